/* attention.c — the attention of a forward call, planned and run on the
 * engine's threads: the batch cut into tiles (up to att_tile_tokens
 * consecutive tokens of one sequence) once per call (cv_engine_att_plan),
 * each tile x kv head a work item handed out longest first through a
 * work queue (cv_pool_run_items), because later positions cost more; when
 * a step has few tiles (a few sequences decoding), their deep contexts'
 * chunks become work items of their own, so a deep context's attention
 * spreads over every thread with the bits it gets in one (the tiles and
 * their chunking are the kernels layer's: kernels/attention.h). */
#include <stdlib.h>

#include "engine/engine_int.h"

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

att_tile eng_att_tile(cv_engine *e, int32_t il, int32_t t, int32_t g)
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
} att_job;

static void tile_item(void *ctx, int64_t i, int ith)
{
    const att_job *j = ctx;
    cv_engine *e = j->e;
    float *scr = e->att_scratch + (size_t)ith * e->att_scratch_floats;
    const att_item *it = &j->pl->items[i];
    att_tile a = eng_att_tile(e, j->il, it->tile, it->g);
    if (it->chunk < 0) {
        cv_att_tile_run(e->att_tile, &a, scr);
        return;
    }
    a.blk0 = it->chunk * CV_ATT_CHUNK_BLOCKS;
    a.blk1 = a.blk0 + CV_ATT_CHUNK_BLOCKS;
    e->att_tile(&a, scr);
    memcpy(slot(e, it->slot), scr, cv_att_state_floats(a.n_tok * a.n_rep, a.hd_v) * sizeof(float));
}

void cv_engine_attention(cv_engine *e, int32_t il)
{
    const att_plan *pl = &e->att_plans[e->att_plan_of[il]];
    att_job j = { .e = e, .il = il, .pl = pl };
    cv_pool_run_items(e->pool, pl->n_items, tile_item, &j);
    for (int32_t i = 0; i < pl->n_split; i++) {
        const att_split_pair *sp = &pl->split[i];
        const att_tile a = eng_att_tile(e, il, sp->tile, sp->g);
        float *st = slot(e, sp->slot0);
        for (int32_t c = 1; c < sp->n_chunks; c++)
            cv_att_state_merge(st, slot(e, sp->slot0 + c), a.n_tok * a.n_rep, a.hd_v);
        cv_att_state_write(&a, st);
    }
}
