/* attention.c — causal attention over paged KV blocks with an online
 * softmax: one pass over the keys keeping a running maximum and sum per
 * query row and rescaling the accumulated values when the maximum grows,
 * so no score row of the whole context is ever materialised.
 *
 * Work is cut into tiles: up to `tile` consecutive tokens of one sequence
 * against one kv head, all n_rep query heads of that head (GQA) at once.
 * A tile reads each key and value block once for all its rows, from L1,
 * instead of once per token and head; decode tiles hold one token. Tiles
 * are built once per forward call (cv_engine_att_plan) and handed out
 * longest first through an atomic counter, because later positions cost
 * more. A tile attends its context in chunks of CV_ATT_CHUNK_BLOCKS blocks,
 * each with an online softmax of its own, merged in order; when a step has
 * few tiles (a few sequences decoding), their chunks become work items of
 * their own, so a deep context's attention spreads over every thread with
 * the bits it gets in one. The tile kernel is per ISA: the scalar one here
 * is the reference, attention_avx2.c and attention_avx512.c the fast ones
 * (cv_att_tile_for picks).
 *
 * Token t at position p sees positions 0..p of its own sequence (a window
 * layer's only p - W + 1 .. p: whole blocks before its window are skipped,
 * the boundary block masked), which the forward pass wrote to the cache
 * before calling; scores are scaled by the model's attn_scale. A layer
 * with sinks adds each head's sink logit to the softmax's sum when the
 * state is written out, after every chunk is merged, so the sink's place
 * is the same however the context was cut. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine/engine_int.h"

/* ---- q8_0: the query rows in int8 ---- */

/* Floats before the q8_0 rows in a tile's scratch (R rows): the scalar
 * tile's or the fast tiles' own (cv_att_scratch_floats), 64-byte aligned. */
static size_t q8_offset(int32_t R, int32_t hd)
{
    const size_t groups = (size_t)(hd / kv_q8_group(hd));
    const size_t n = (size_t)R * ((size_t)hd + 2) +
                     CV_MAX((size_t)CV_KV_BLOCK, (size_t)R * (1 + CV_KV_BLOCK * (1 + groups)));
    return (n + 15) & ~(size_t)15;
}

/* Floats of one [R][hd] array of int8, 64-byte aligned. */
static size_t q8_bytes_floats(int32_t R, int32_t hd) { return (((size_t)R * (size_t)hd + 63) / 64) * 16; }

/* Floats of the q8_0 rows themselves: int8 [R][hd], their magnitudes
 * [R][hd], then d and sums. */
static size_t q8_floats(int32_t R, int32_t hd)
{
    const size_t groups = (size_t)(hd / kv_q8_group(hd));
    return 2 * q8_bytes_floats(R, hd) + (((size_t)R * 2 * groups + 15) & ~(size_t)15);
}

att_q8 cv_att_q8_at(const att_tile *a, float *scratch)
{
    const int32_t hd = a->hd, R = a->n_tok * a->n_rep, ng = hd / a->kv->qgroup;
    float *at = scratch + q8_offset(R, hd);
    att_q8 o = { .q = (int8_t *)at, .qa = (uint8_t *)(at + q8_bytes_floats(R, hd)) };
    o.d = at + 2 * q8_bytes_floats(R, hd);
    o.sum = (int32_t *)(o.d + (size_t)R * ng);
    return o;
}

att_q8 cv_att_q8_rows(const att_tile *a, float *scratch)
{
    const int32_t hd = a->hd, R = a->n_tok * a->n_rep, group = a->kv->qgroup, ng = hd / group;
    const att_q8 o = cv_att_q8_at(a, scratch);
    for (int32_t r = 0; r < R; r++) {
        const int32_t k = r / a->n_rep, h = r % a->n_rep;
        const float *x = a->qkv + (int64_t)a->rows[k] * a->ld_qkv + (int64_t)(a->g * a->n_rep + h) * hd;
        for (int32_t g = 0; g < ng; g++) {
            const float *xg = x + g * group;
            int8_t *qg = o.q + (size_t)r * hd + g * group;
            uint8_t *ag = o.qa + (size_t)r * hd + g * group;
            float amax = 0;
            for (int32_t i = 0; i < group; i++) {
                const float m = fabsf(xg[i]);
                amax = m > amax ? m : amax; /* a NaN is passed over, as by fmaxf */
            }
            const float d = amax / 127.0f, id = d > 0 && d < INFINITY ? 1.0f / d : 0.0f;
            int32_t sum = 0;
            for (int32_t i = 0; i < group; i++) {
                /* t within +-127 rounds to the nearest, ties to even, as
                 * nearbyintf does, by the 1.5 x 2^23 shift (no libm call on
                 * baseline x86-64) */
                const float t = xg[i] * id;
                const float u = t >= 127.0f ? 127.0f : t <= -127.0f ? -127.0f : t == t ? t : 0.0f;
                qg[i] = (int8_t)((u + 0x1.8p23f) - 0x1.8p23f);
                ag[i] = (uint8_t)(qg[i] < 0 ? -qg[i] : qg[i]);
                sum += qg[i];
            }
            o.d[(size_t)r * ng + g] = d;
            o.sum[(size_t)r * ng + g] = sum;
        }
    }
    return o;
}

/* ---- the scalar tile (reference) ---- */

void cv_att_tile_scalar(const att_tile *a, float *scratch)
{
    const kv_pool *kv = a->kv;
    const int32_t hd = a->hd, n_rep = a->n_rep, R = a->n_tok * n_rep;
    float *acc = scratch, *mx = acc + (size_t)R * hd, *sum = mx + R, *s = sum + R;
    memset(acc, 0, (size_t)R * hd * sizeof(float));
    for (int32_t r = 0; r < R; r++)
        mx[r] = -INFINITY, sum[r] = 0;
    const bool q8 = kv->type == CV_GGML_Q8_0;
    const att_q8 q8r = !q8 ? (att_q8){ 0 } : a->q8_ready ? cv_att_q8_at(a, scratch) : cv_att_q8_rows(a, scratch);
    const int32_t group = kv->qgroup, ng = hd / group;
    const int32_t first = CV_MAX(a->blk0, cv_att_first_block(a->pos0, a->window));
    const int32_t end = CV_MIN(a->blk1, (a->pos0 + a->n_tok - 1) / CV_KV_BLOCK + 1);
    for (int32_t blk = first; blk < end; blk++) {
        const int32_t base = blk * CV_KV_BLOCK;
        const char *K = kv_k(kv, a->blocks[blk], a->layer, a->g);
        const char *V = kv_v(kv, a->blocks[blk], a->layer, a->g);
        for (int32_t k = 0; k < a->n_tok; k++) {
            /* positions j0..nv-1 of the block: causal above, window below */
            const int32_t p = a->pos0 + k, nv = CV_MIN(CV_KV_BLOCK, p + 1 - base);
            const int32_t j0 = a->window > 0 ? CV_MAX(0, p - a->window + 1 - base) : 0;
            for (int32_t h = 0; h < n_rep && nv > j0; h++) {
                const int32_t r = k * n_rep + h;
                const float *q = a->qkv + (int64_t)a->rows[k] * a->ld_qkv + (int64_t)(a->g * n_rep + h) * hd;
                float bm = -INFINITY;
                for (int32_t j = j0; j < nv; j++) {
                    float d = 0;
                    if (q8) {
                        const uint16_t *ks = kv_q8_scales(kv, K);
                        for (int32_t g = 0; g < ng; g++) {
                            const int8_t *qg = q8r.q + (size_t)r * hd + g * group;
                            int32_t isum = 0;
                            for (int32_t i = 0; i < group; i++)
                                isum += qg[i] * kv_k8_value(K, j, g * group + i);
                            const float dk = cv_fp16_to_fp32(ks[kv_scale_at(kv, j, g * group)]);
                            d = fmaf((float)isum, dk * q8r.d[(size_t)r * ng + g], d);
                        }
                    } else {
                        for (int32_t i = 0; i < hd; i++)
                            d += q[i] * kv_k_get(kv, K, j, i);
                    }
                    s[j] = d * a->scale;
                    bm = s[j] > bm ? s[j] : bm;
                }
                float *ar = acc + (size_t)r * hd;
                if (bm > mx[r]) {
                    const float c = expf(mx[r] - bm); /* 0 on the first block of the range */
                    sum[r] *= c;
                    for (int32_t i = 0; i < hd; i++)
                        ar[i] *= c;
                    mx[r] = bm;
                }
                for (int32_t j = j0; j < nv; j++) {
                    const float pj = expf(s[j] - mx[r]);
                    sum[r] += pj;
                    for (int32_t i = 0; i < hd; i++)
                        ar[i] += pj * kv_v_get(kv, V, j, i);
                }
            }
        }
    }
}

/* The tile of level isa for head_dim hd, or NULL when the level has none
 * for it (avx-vnni has no tile of its own: its CPUs run avx2's). */
static att_tile_fn tile_at(cv_isa isa, int32_t hd)
{
    if (isa == CV_ISA_AVX512)
        return hd % 16 == 0 ? cv_att_tile_avx512 : NULL;
    if (isa == CV_ISA_AVX2)
        return hd % 8 == 0 ? cv_att_tile_avx2 : NULL;
    return isa == CV_ISA_SCALAR ? cv_att_tile_scalar : NULL;
}

att_tile_fn cv_att_tile_for(int32_t hd)
{
    for (cv_isa l = cv_isa_active();; l = cv_isa_fallback(l)) {
        att_tile_fn fn = tile_at(l, hd);
        if (fn)
            return fn;
    }
}

att_tile_fn cv_att_tile_named(const char *name, int32_t hd)
{
    for (int l = 0; l < CV_ISA_COUNT; l++)
        if (!strcmp(name, cv_isa_name(l)))
            return cv_isa_supported(l) ? tile_at(l, hd) : NULL;
    return NULL;
}

const char *cv_att_tile_name(att_tile_fn fn)
{
    return fn == cv_att_tile_avx512 ? "avx512" : fn == cv_att_tile_avx2 ? "avx2" : "scalar";
}

/* ---- chunks: merging states, writing them out ---- */

void cv_att_state_merge(float *a, const float *b, int32_t R, int32_t hd)
{
    float *am = a + (size_t)R * hd, *as = am + R;
    const float *bm = b + (size_t)R * hd, *bs = bm + R;
    for (int32_t r = 0; r < R; r++) {
        if (bm[r] == -INFINITY) /* b saw none of its chunk */
            continue;
        const float m = am[r] > bm[r] ? am[r] : bm[r];
        const float ca = expf(am[r] - m), cb = expf(bm[r] - m);
        float *x = a + (size_t)r * hd;
        const float *y = b + (size_t)r * hd;
        for (int32_t i = 0; i < hd; i++)
            x[i] = x[i] * ca + y[i] * cb;
        as[r] = as[r] * ca + bs[r] * cb;
        am[r] = m;
    }
}

void cv_att_state_write(const att_tile *a, const float *st)
{
    const int32_t hd = a->hd_v, R = a->n_tok * a->n_rep;
    const float *mx = st + (size_t)R * hd, *sum = mx + R;
    for (int32_t k = 0; k < a->n_tok; k++)
        for (int32_t h = 0; h < a->n_rep; h++) {
            const int32_t r = k * a->n_rep + h, head = a->g * a->n_rep + h;
            float *o = a->out + (int64_t)a->rows[k] * a->ld_out + (int64_t)head * hd;
            float inv = 1.0f / sum[r];
            if (a->sinks) {
                /* The sink is one more score with no value: it joins the
                 * sum only, both terms taken against the larger maximum. */
                const float s = a->sinks[head], m = fmaxf(mx[r], s), c = expf(mx[r] - m);
                inv = c / (sum[r] * c + expf(s - m));
            }
            for (int32_t i = 0; i < hd; i++)
                o[i] = st[(size_t)r * hd + i] * inv;
        }
}

void cv_att_tile_run(att_tile_fn fn, att_tile *a, float *scratch)
{
    const int32_t R = a->n_tok * a->n_rep, c0 = cv_att_chunk0(a), c1 = cv_att_chunks(a->pos0 + a->n_tok - 1);
    const size_t n = cv_att_state_floats(R, a->hd_v);
    /* the kernel's scratch first, the running state at the end; a q8_0
     * cache's query rows quantized once for all the chunks */
    float *run = scratch + cv_att_scratch_floats(R, a->hd) - n;
    if (a->kv->type == CV_GGML_Q8_0 && c1 - c0 > 1) {
        cv_att_q8_rows(a, scratch);
        a->q8_ready = true;
    }
    for (int32_t c = c0; c < c1; c++) {
        a->blk0 = c * CV_ATT_CHUNK_BLOCKS;
        a->blk1 = a->blk0 + CV_ATT_CHUNK_BLOCKS;
        fn(a, scratch);
        if (c1 - c0 == 1) {
            cv_att_state_write(a, scratch);
            return;
        }
        if (c == c0)
            memcpy(run, scratch, n * sizeof(float));
        else
            cv_att_state_merge(run, scratch, R, a->hd_v);
    }
    cv_att_state_write(a, run);
}

size_t cv_att_scratch_floats(int32_t max_rows, int32_t hd)
{
    /* acc [R][hd], max [R], sum [R], then the scalar tile's scores [BLOCK],
     * or the fast tiles' corrections [R], probabilities [R][BLOCK] and, for
     * a q8_0 cache, those times each group's value factors [groups][R][BLOCK];
     * then a q8_0 cache's query rows (cv_att_q8_rows); then
     * cv_att_tile_run's running state */
    return q8_offset(max_rows, hd) + q8_floats(max_rows, hd) + cv_att_state_floats(max_rows, hd);
}

/* ---- planning: tiles for this batch ---- */

static int cmp_tile(const void *x, const void *y)
{
    const att_plan_tile *a = x, *b = y;
    int32_t ea = a->pos0 + a->n_tok, eb = b->pos0 + b->n_tok;
    if (ea != eb)
        return ea > eb ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq; /* deterministic order */
}

/* Work items for the tiles x kv heads: one item computes a pair's whole
 * context, longest first. When there are fewer pairs than twice the
 * threads (a few sequences decoding), pairs whose context spans several
 * chunks are cut into one item per chunk, as far as the state slots go;
 * the caller merges their states once all are done. Same bits either way
 * (cv_att_tile_run merges the chunks in the same order). */
static void plan_items(cv_engine *e, att_plan *pl)
{
    const int32_t n_kv = pl->n_head_kv, pairs = e->att_n_tiles * n_kv;
    const bool split = e->n_threads > 1 && pairs < 2 * e->n_threads;
    int32_t ni = 0, ns = 0, slots = 0;
    for (int32_t t = 0; t < e->att_n_tiles; t++)
        for (int32_t g = 0; g < n_kv; g++) {
            const att_plan_tile *pt = &e->att_tiles[t];
            const int32_t c0 = cv_att_first_block(pt->pos0, pl->window) / CV_ATT_CHUNK_BLOCKS;
            const int32_t nc = cv_att_chunks(pt->pos0 + pt->n_tok - 1) - c0;
            if (split && nc > 1 && slots + nc <= e->att_n_slots) {
                pl->split[ns++] = (att_split_pair){ t, g, slots, nc };
                slots += nc;
            } else {
                pl->items[ni++] = (att_item){ t, g, -1, -1 };
            }
        }
    for (int32_t i = 0; i < ns; i++) {
        const att_split_pair *sp = &pl->split[i];
        const int32_t c0 = cv_att_first_block(e->att_tiles[sp->tile].pos0, pl->window) / CV_ATT_CHUNK_BLOCKS;
        for (int32_t c = 0; c < sp->n_chunks; c++)
            pl->items[ni++] = (att_item){ sp->tile, sp->g, c0 + c, sp->slot0 + c };
    }
    pl->n_items = ni;
    pl->n_split = ns;
}

void cv_engine_att_plans_init(cv_engine *e)
{
    const cv_model *m = e->m;
    const size_t n_items = (size_t)e->p.n_batch * (size_t)m->hp.n_head_kv + (size_t)e->att_n_slots;
    e->att_plan_of = cv_xmalloc((size_t)m->hp.n_layer * sizeof *e->att_plan_of);
    e->att_plans = cv_xcalloc((size_t)m->hp.n_layer, sizeof *e->att_plans);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        int32_t k = 0;
        while (k < e->att_n_plans && (e->att_plans[k].window != L->n_swa || e->att_plans[k].n_head_kv != L->n_head_kv))
            k++;
        if (k == e->att_n_plans) {
            att_plan *pl = &e->att_plans[e->att_n_plans++];
            pl->window = L->n_swa;
            pl->n_head_kv = L->n_head_kv;
            pl->items = cv_xmalloc(n_items * sizeof *pl->items);
            pl->split = cv_xmalloc(CV_MAX(1, (size_t)e->att_n_slots) * sizeof *pl->split);
        }
        e->att_plan_of[il] = k;
    }
}

void cv_engine_att_plans_fini(cv_engine *e)
{
    for (int32_t k = 0; k < e->att_n_plans; k++) {
        free(e->att_plans[k].items);
        free(e->att_plans[k].split);
    }
    free(e->att_plans);
    free(e->att_plan_of);
}

void cv_engine_att_plan(cv_engine *e, const cv_batch *b)
{
    /* Group the batch's rows by sequence, keeping batch order inside one
     * (which is position order): a counting sort over the sequences. */
    int32_t *start = e->att_seq_start; /* [n_seq_max + 1] */
    memset(start, 0, ((size_t)e->p.n_seq_max + 1) * sizeof *start);
    for (int32_t i = 0; i < b->n_tokens; i++)
        start[b->seq[i] + 1]++;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        start[s + 1] += start[s];
    for (int32_t i = 0; i < b->n_tokens; i++)
        e->att_rows[start[b->seq[i]]++] = i;
    /* start[s] now ends sequence s's run; runs are back to back. */
    int32_t n = 0, at = 0;
    for (int32_t s = 0; s < e->p.n_seq_max; s++) {
        for (int32_t k = at; k < start[s]; k += e->att_tile_tokens) {
            att_plan_tile *t = &e->att_tiles[n++];
            t->seq = s;
            t->first = k;
            t->n_tok = CV_MIN(e->att_tile_tokens, start[s] - k);
            t->pos0 = b->pos[e->att_rows[k]];
        }
        at = start[s];
    }
    qsort(e->att_tiles, (size_t)n, sizeof *e->att_tiles, cmp_tile);
    e->att_n_tiles = n;
    for (int32_t k = 0; k < e->att_n_plans; k++)
        plan_items(e, &e->att_plans[k]);
}

/* ---- running the tiles of one layer ---- */

static att_tile tile_of(cv_engine *e, int32_t il, int32_t t, int32_t g)
{
    const cv_hparams *hp = &e->m->hp;
    const cv_layer *L = &e->m->layers[il];
    const att_plan_tile *pt = &e->att_tiles[t];
    return (att_tile){
        .kv = eng_layer_pool(e, il),
        .blocks = eng_layer_table(e, il, &e->seqs[pt->seq]),
        .layer = e->kv_layer[il],
        .g = g,
        .n_tok = pt->n_tok,
        .pos0 = pt->pos0,
        .rows = e->att_rows + pt->first,
        .qkv = e->qkv,
        .ld_qkv = e->ld_qkv,
        .out = e->attn,
        .ld_out = e->ld_q,
        .n_rep = hp->n_head / L->n_head_kv,
        .hd = L->head_dim,
        .hd_v = L->head_dim - (hp->head_dim - hp->head_dim_v), /* the key's size but MLA's (its latent part) */
        .scale = hp->attn_scale,
        .window = L->n_swa,
        .sinks = L->sinks,
    };
}

static inline float *slot(cv_engine *e, int32_t i) { return e->att_slots + (size_t)i * e->att_slot_floats; }

typedef struct att_job {
    cv_engine *e;
    int32_t il;
    const att_plan *pl;
    _Atomic int32_t next;
} att_job;

static void att_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    att_job *j = ctx;
    cv_engine *e = j->e;
    float *scr = e->att_scratch + (size_t)ith * e->att_scratch_floats;
    for (;;) {
        const int32_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->pl->n_items)
            break;
        const att_item *it = &j->pl->items[i];
        att_tile a = tile_of(e, j->il, it->tile, it->g);
        if (it->chunk < 0) {
            cv_att_tile_run(e->att_tile, &a, scr);
            continue;
        }
        a.blk0 = it->chunk * CV_ATT_CHUNK_BLOCKS;
        a.blk1 = a.blk0 + CV_ATT_CHUNK_BLOCKS;
        e->att_tile(&a, scr);
        memcpy(slot(e, it->slot), scr, cv_att_state_floats(a.n_tok * a.n_rep, a.hd_v) * sizeof(float));
    }
}

void cv_engine_attention(cv_engine *e, int32_t il)
{
    const att_plan *pl = &e->att_plans[e->att_plan_of[il]];
    att_job j = { .e = e, .il = il, .pl = pl };
    atomic_init(&j.next, 0);
    if (pl->n_items == 1 || e->n_threads == 1)
        att_worker(&j, 0, 1);
    else
        cv_pool_run(e->pool, att_worker, &j);
    for (int32_t i = 0; i < pl->n_split; i++) {
        const att_split_pair *sp = &pl->split[i];
        const att_tile a = tile_of(e, il, sp->tile, sp->g);
        float *st = slot(e, sp->slot0);
        for (int32_t c = 1; c < sp->n_chunks; c++)
            cv_att_state_merge(st, slot(e, sp->slot0 + c), a.n_tok * a.n_rep, a.hd_v);
        cv_att_state_write(&a, st);
    }
}
