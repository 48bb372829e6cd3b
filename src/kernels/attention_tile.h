/* attention_tile.h — the block loop both fast attention tiles share
 * (attention_avx2.c, attention_avx512.c: see attention.c for the algorithm
 * and the tile's contract). A tile file defines its vector pieces, then
 * includes this header, which builds the tile from them:
 *   ATT_QK_ROWS   how many rows one qk_rows call scores (4 or 8)
 *   qk_rows(q, K, hd, S, nr, kt, pf)
 *                 raw scores S[r][16] of nr (1..ATT_QK_ROWS) query rows q[r]
 *                 against a block's f32 or f16 keys K, one cv_att_pf_take of
 *                 pf per 16 dimensions
 *   qk_rows_q8(q8, r, K, ks, hd, group, S, nr, pf)
 *                 the same for a q8_0 cache: rows r.. of q8 against the int8
 *                 keys K with their factors ks (attention.h att_q8)
 *   softmax_token(a, P, mx, sum, corr, k, base)
 *                 the online-softmax update of token k's rows: its scores in
 *                 P become probabilities (0 outside what it sees), mx and sum
 *                 move on, corr gets each row's correction factor
 *   scale_pq(kv, V, P, Pq, gstride, ng, r0, R)
 *                 q8_0: rows r0..R-1 of P times each group's value factors
 *   pv_rows(acc, P, gstride, group, corr, V, row, nv, hd, nr, kt, pf)
 *                 nr (1..4) rows of acc: acc * corr + P x the first nv value
 *                 rows of V, one cv_att_pf_take of pf per 16 columns
 * Every row's scores are a sum over the head's dimensions in order,
 * whatever rows share its tile, so a token's logits are bit-identical
 * batched or alone, shared prefix or not (test_engine_batch,
 * test_engine_kv_share). */
#ifndef CV_ATTENTION_TILE_H
#define CV_ATTENTION_TILE_H

#include <math.h>

#include "kernels/attention.h"

static inline const float *q_row(const att_tile *a, int32_t r)
{
    const int32_t k = r / a->n_rep, h = r % a->n_rep;
    return a->qkv + (int64_t)a->rows[k] * a->ld_qkv + (int64_t)(a->g * a->n_rep + h) * a->hd;
}

/* Scores of rows r.. (ATT_QK_ROWS of them, or what is left), with nr a
 * constant in each call so the ISA's loop keeps its sums in registers. */
static inline __attribute__((always_inline)) void qk_group(const att_tile *a, const att_q8 *q8, int32_t r, int32_t R,
                                                           const char *K, const uint16_t *ks, int32_t group, float *S,
                                                           const int kt, att_pf *pf)
{
    const float *q[8] = { 0 };
    for (int32_t t = 0; kt != KT_Q8 && t < ATT_QK_ROWS && r + t < R; t++)
        q[t] = q_row(a, r + t);
    const int32_t hd = a->hd;
#define QK_CALL(n)                                                                                                     \
    do {                                                                                                               \
        if (kt == KT_Q8)                                                                                               \
            qk_rows_q8(q8, r, K, ks, hd, group, S, n, pf);                                                             \
        else                                                                                                           \
            qk_rows(q, K, hd, S, n, kt, pf);                                                                           \
    } while (0)
    switch (CV_MIN(ATT_QK_ROWS, R - r)) {
    case 8: QK_CALL(ATT_QK_ROWS >= 8 ? 8 : 1); break;
    case 7: QK_CALL(ATT_QK_ROWS >= 8 ? 7 : 1); break;
    case 6: QK_CALL(ATT_QK_ROWS >= 8 ? 6 : 1); break;
    case 5: QK_CALL(ATT_QK_ROWS >= 8 ? 5 : 1); break;
    case 4: QK_CALL(4); break;
    case 3: QK_CALL(3); break;
    case 2: QK_CALL(2); break;
    default: QK_CALL(1); break;
    }
#undef QK_CALL
}

/* Per KV block: every row's raw scores (a small GEMM on the transposed
 * keys), every row's online-softmax update, then the value accumulation
 * four rows at a time; the keys of the block CV_ATT_PREFETCH_BLOCKS ahead
 * go into L2 during the first scores, its values during the first values
 * (the later row groups of a prompt's tile find their cursors spent). kt
 * is a constant after inlining: the body is compiled once per cache type. */
static inline __attribute__((always_inline)) void att_tile_body(const att_tile *a, float *scratch, const int kt)
{
    const kv_pool *kv = a->kv;
    const int32_t hd = a->hd, n_rep = a->n_rep, R = a->n_tok * n_rep;
    const int32_t group = kt == KT_Q8 ? kv->qgroup : hd, ng = hd / group;
    const size_t row = (size_t)hd * kv->elt_bytes;
    float *acc = scratch, *mx = acc + (size_t)R * hd, *sum = mx + R, *corr = sum + R, *P = corr + R;
    /* q8_0: the probabilities times each group's value factors, [ng][R][16] */
    float *Pq = P + (size_t)R * CV_KV_BLOCK;
    const size_t gstride = kt == KT_Q8 ? (size_t)R * CV_KV_BLOCK : 0;
    memset(acc, 0, (size_t)R * hd * sizeof(float));
    for (int32_t r = 0; r < R; r++)
        mx[r] = -INFINITY, sum[r] = 0;
    const att_q8 q8 = kt != KT_Q8 ? (att_q8){ 0 } : a->q8_ready ? cv_att_q8_at(a, scratch) : cv_att_q8_rows(a, scratch);
    /* the tile's context ends at block ctx_end, this call's range at end;
     * with a window it starts at the first token's window */
    const int32_t ctx_end = (a->pos0 + a->n_tok - 1) / CV_KV_BLOCK + 1, end = CV_MIN(a->blk1, ctx_end);
    const int32_t first = CV_MAX(a->blk0, cv_att_first_block(a->pos0, a->window));
    const size_t pf_step = cv_att_pf_step(kv, hd);
    for (int32_t blk = first; blk < end; blk++) {
        const int32_t base = blk * CV_KV_BLOCK;
        const char *K = kv_k(kv, a->blocks[blk], a->layer, a->g);
        const char *V = kv_v(kv, a->blocks[blk], a->layer, a->g);
        const int32_t ahead = blk + CV_ATT_PREFETCH_BLOCKS < ctx_end ? a->blocks[blk + CV_ATT_PREFETCH_BLOCKS] : -1;
        att_pf pk = cv_att_pf(kv, ahead >= 0 ? kv_k(kv, ahead, a->layer, a->g) : NULL, pf_step);
        att_pf pv = cv_att_pf(kv, ahead >= 0 ? kv_v(kv, ahead, a->layer, a->g) : NULL, pf_step);
        const uint16_t *ks = kt == KT_Q8 ? kv_q8_scales(kv, K) : NULL;
        /* Tokens before k0 sit before this block: only rows from r0 see it. */
        const int32_t k0 = CV_MAX(0, base - a->pos0), r0 = k0 * n_rep;
        for (int32_t r = r0; r < R; r += ATT_QK_ROWS)
            qk_group(a, &q8, r, R, K, ks, group, P + (size_t)r * CV_KV_BLOCK, kt, &pk);
        for (int32_t k = k0; k < a->n_tok; k++)
            softmax_token(a, P, mx, sum, corr, k, base);
        if (kt == KT_Q8)
            scale_pq(kv, V, P, Pq, gstride, ng, r0, R);
        /* Values, four rows at a time: a group reads the value rows its
         * last token sees (the others' probabilities are 0 past theirs). */
        for (int32_t r = r0; r < R; r += 4) {
            const int32_t nr = CV_MIN(4, R - r), kl = (r + nr - 1) / n_rep;
            const int32_t nv = CV_MIN(CV_KV_BLOCK, a->pos0 + kl + 1 - base);
            float *ar = acc + (size_t)r * hd;
            const float *pr = (kt == KT_Q8 ? Pq : P) + (size_t)r * CV_KV_BLOCK;
            switch (nr) {
            case 4: pv_rows(ar, pr, gstride, group, corr + r, V, row, nv, hd, 4, kt, &pv); break;
            case 3: pv_rows(ar, pr, gstride, group, corr + r, V, row, nv, hd, 3, kt, &pv); break;
            case 2: pv_rows(ar, pr, gstride, group, corr + r, V, row, nv, hd, 2, kt, &pv); break;
            default: pv_rows(ar, pr, gstride, group, corr + r, V, row, nv, hd, 1, kt, &pv); break;
            }
        }
        assert(pk.left == 0 && pv.left == 0);
    }
}

/* The tile for a's cache type. */
static inline void att_tile_typed(const att_tile *a, float *scratch)
{
    switch (a->kv->type) {
    case CV_GGML_Q8_0: att_tile_body(a, scratch, KT_Q8); break;
    case CV_GGML_F16: att_tile_body(a, scratch, KT_F16); break;
    default: att_tile_body(a, scratch, KT_F32); break;
    }
}

#endif
