/* attention.c — causal attention over paged KV blocks with an online
 * softmax (attention.h): one pass over the keys keeping a running maximum
 * and sum per query row and rescaling the accumulated values when the
 * maximum grows, so no score row of the whole context is ever
 * materialised. A tile is up to a few consecutive tokens of one sequence
 * against one kv head, all n_rep query heads of that head (GQA) at once:
 * it reads each key and value block once for all its rows, from L1,
 * instead of once per token and head. A tile attends its context in chunks
 * of CV_ATT_CHUNK_BLOCKS blocks, each with an online softmax of its own,
 * merged in order (cv_att_tile_run), so a deep context's chunks may also
 * run on different threads with the same bits. The tile kernel is per ISA
 * level: the scalar one here is the reference, attention_avx2.c and
 * attention_avx512.c the fast ones (cv_att_tile_for picks). This file also
 * holds the block layout's sizes and the store of a position's K/V.
 *
 * Token t at position p sees positions 0..p of its own sequence (a window
 * layer's only p - W + 1 .. p: whole blocks before its window are skipped,
 * the boundary block masked); scores are scaled by the tile's scale. A
 * layer with sinks adds each head's sink logit to the softmax's sum when
 * the state is written out, after every chunk is merged, so the sink's
 * place is the same however the context was cut. */
#include <math.h>
#include <stdlib.h>

#include "kernels/attention.h"

/* ---- the block layout ---- */

size_t kv_head_bytes(int32_t head_dim, uint32_t type)
{
    if (type == CV_GGML_Q8_0)
        return (size_t)CV_KV_BLOCK * ((size_t)head_dim + (size_t)(head_dim / kv_q8_group(head_dim)) * 2);
    return (size_t)CV_KV_BLOCK * (size_t)head_dim * (type == CV_GGML_F16 ? 2 : 4);
}

size_t kv_block_bytes(int32_t n_layer, int32_t n_parts, int32_t n_head_kv, int32_t head_dim, uint32_t type)
{
    return (size_t)n_layer * (size_t)n_parts * (size_t)n_head_kv * kv_head_bytes(head_dim, type);
}

uint16_t kv_quantize_q8(const float *x, int32_t n, int8_t *q)
{
    float amax = 0;
    for (int32_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const uint16_t dh = cv_fp32_to_fp16(amax / 127.0f);
    const float d = cv_fp16_to_fp32(dh), id = d > 0 && d < INFINITY ? 1.0f / d : 0.0f;
    for (int32_t i = 0; i < n; i++) {
        const float t = x[i] * id;
        q[i] = (int8_t)(t >= 127.0f ? 127.0f : t <= -127.0f ? -127.0f : t == t ? nearbyintf(t) : 0.0f);
    }
    return dh;
}

void kv_store(const kv_pool *p, const cv_vec_ops *vec, void *K, void *V, int32_t j, const float *k, const float *v)
{
    const int32_t hd = p->head_dim;
    /* The key goes in transposed: one element per dimension's row. */
    switch (p->type) {
    case CV_GGML_Q8_0: {
        uint16_t *ks = (uint16_t *)kv_q8_scales(p, K), *vs = (uint16_t *)kv_q8_scales(p, V);
        uint8_t *ku = K;
        int8_t kq[CV_MAX_HEAD_DIM], *vq = (int8_t *)V + kv_v_at(hd, j, 0);
        for (int32_t i = 0; i < hd; i += p->qgroup) {
            ks[kv_scale_at(p, j, i)] = kv_quantize_q8(k + i, p->qgroup, kq + i);
            vs[kv_scale_at(p, j, i)] = kv_quantize_q8(v + i, p->qgroup, vq + i);
        }
        for (int32_t i = 0; i < hd; i++) /* offset by 128 (attention.h, kv_k8_value) */
            ku[kv_k8_at(j, i)] = (uint8_t)(kq[i] + 128);
        break;
    }
    case CV_GGML_F16: {
        uint16_t kh[CV_MAX_HEAD_DIM];
        vec->f32_to_f16(k, kh, hd);
        for (int32_t i = 0; i < hd; i++)
            ((uint16_t *)K)[kv_k_at(j, i)] = kh[i];
        vec->f32_to_f16(v, (uint16_t *)V + kv_v_at(hd, j, 0), hd);
        break;
    }
    default:
        for (int32_t i = 0; i < hd; i++)
            ((float *)K)[kv_k_at(j, i)] = k[i];
        memcpy((float *)V + kv_v_at(hd, j, 0), v, (size_t)hd * sizeof(float));
    }
}

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

const char *cv_att_tile_why_not(cv_isa isa, int32_t hd)
{
    if (!cv_isa_supported(isa))
        return cv_isa_missing(isa);
    if (tile_at(isa, hd))
        return NULL;
    if (isa == CV_ISA_AVX512)
        return "head size not a multiple of 16";
    if (isa == CV_ISA_AVX2)
        return "head size not a multiple of 8";
    return "no tile of its own: avx2's runs";
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

