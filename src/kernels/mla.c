/* mla.c — multi-head latent attention's kernels on the CPU (mla.h): the
 * latent cache's rows stored and read, the absorbed form's tile and the
 * decompressed form's per-head attention over pieces of the context, their
 * products by the Gated DeltaNet kind's GEMM loops of one ISA level
 * (kernels/deltanet.h), picked here. The mixer (engine/mix_mla.c) owns the
 * projections and which tokens take which form; the derivation of both
 * forms heads it. */
#include <math.h>
#include <string.h>

#include "kernels/mla.h"

/* ---- the latent cache ---- */

void cv_mla_store(const kv_pool *p, const cv_vec_ops *vec, void *piece, int32_t j, const float *row)
{
    const int32_t D = p->head_dim;
    switch (p->type) {
    case CV_GGML_Q8_0: {
        const int32_t ng = D / p->qgroup;
        int8_t *q = (int8_t *)piece + (size_t)j * D;
        uint16_t *d = (uint16_t *)((char *)piece + (size_t)CV_KV_BLOCK * D) + (size_t)j * ng;
        for (int32_t g = 0; g < ng; g++)
            d[g] = kv_quantize_q8(row + g * p->qgroup, p->qgroup, q + g * p->qgroup);
        break;
    }
    case CV_GGML_F16: vec->f32_to_f16(row, (uint16_t *)piece + (size_t)j * D, D); break;
    default: memcpy((float *)piece + (size_t)j * D, row, (size_t)D * sizeof(float));
    }
}

const float *cv_mla_rows(const kv_pool *p, const void *piece, int32_t n, float *buf)
{
    const int32_t D = p->head_dim;
    if (p->type == CV_GGML_F32)
        return piece;
    if (p->type == CV_GGML_F16) {
        cv_f16_to_f32(piece, buf, (int64_t)n * D);
        return buf;
    }
    const int32_t qg = p->qgroup, ng = D / qg;
    const int8_t *q = piece;
    const uint16_t *d = (const uint16_t *)((const char *)piece + (size_t)CV_KV_BLOCK * D);
    for (int32_t j = 0; j < n; j++)
        for (int32_t g = 0; g < ng; g++) {
            const float f = cv_fp16_to_fp32(d[(size_t)j * ng + g]);
            for (int32_t i = g * qg; i < (g + 1) * qg; i++)
                buf[(size_t)j * D + i] = f * q[(size_t)j * D + i];
        }
    return buf;
}

/* ---- the tile ---- */

/* Query rows of a tile padded to whole vectors: the score GEMM's columns,
 * so that every score is computed by the same kind of block. */
static inline int32_t padded_rows(int32_t R) { return (R + 7) & ~7; }
static inline size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Floats an MLA tile of R query rows keeps past the generic tile scratch
 * (cv_att_scratch_floats, whose end holds cv_att_tile_run's running
 * state): the queries transposed [D][Rp], a block's scores [16][Rp], its
 * probabilities [R][16] and its rows in f32 [16][D]. */
static size_t tile_tmp_floats(int32_t R, int32_t D)
{
    const size_t Rp = (size_t)padded_rows(R);
    return round16((size_t)D * Rp) + round16(CV_KV_BLOCK * Rp) + round16((size_t)R * CV_KV_BLOCK) +
           round16((size_t)CV_KV_BLOCK * (size_t)D);
}

/* Tile a over blocks [blk0, blk1): the state of its R = n_tok x H rows
 * (acc [R][hd_v], max [R], sum [R]) at the start of scratch, as every
 * tile leaves it (engine_int.h, att_tile_fn). */
static void mla_tile(const dn_kernels *kn, const att_tile *a, float *scratch)
{
    const kv_pool *kv = a->kv;
    const int32_t D = a->hd, C = a->hd_v, H = a->n_rep, R = a->n_tok * H, Rp = padded_rows(R);
    float *acc = scratch, *mx = acc + (size_t)R * C, *sum = mx + R;
    float *qt = scratch + cv_att_scratch_floats(R, D), *s = qt + round16((size_t)D * Rp);
    float *p = s + round16(CV_KV_BLOCK * (size_t)Rp), *rowbuf = p + round16((size_t)R * CV_KV_BLOCK);
    memset(acc, 0, (size_t)R * C * sizeof(float));
    for (int32_t r = 0; r < R; r++)
        mx[r] = -INFINITY, sum[r] = 0;
    for (int32_t r = 0; r < Rp; r++) {
        const float *q = r < R ? a->qkv + (int64_t)a->rows[r / H] * a->ld_qkv + (int64_t)(a->g * H + r % H) * D
                               : NULL;
        for (int32_t i = 0; i < D; i++)
            qt[(size_t)i * Rp + r] = q ? q[i] : 0.0f;
    }
    const int32_t last = a->pos0 + a->n_tok - 1;
    const int32_t end = CV_MIN(a->blk1, last / CV_KV_BLOCK + 1);
    for (int32_t blk = a->blk0; blk < end; blk++) {
        const int32_t base = blk * CV_KV_BLOCK, n = CV_MIN(CV_KV_BLOCK, last + 1 - base);
        const float *rows = cv_mla_rows(kv, kv_k(kv, a->blocks[blk], a->layer, a->g), n, rowbuf);
        /* s [n][Rp] = scale rows [n][D] qt [D][Rp] */
        kn->gemm(n, Rp, D, a->scale, rows, D, qt, Rp, s, Rp, false);
        for (int32_t r = 0; r < R; r++) {
            /* positions 0..nv-1 of the block are causal for this row */
            const int32_t nv = CV_MIN(n, a->pos0 + r / H + 1 - base);
            float *pr = p + (size_t)r * CV_KV_BLOCK;
            if (nv <= 0) {
                memset(pr, 0, CV_KV_BLOCK * sizeof(float));
                continue;
            }
            float bm = -INFINITY;
            for (int32_t j = 0; j < nv; j++)
                bm = s[(size_t)j * Rp + r] > bm ? s[(size_t)j * Rp + r] : bm;
            if (bm > mx[r]) {
                const float c = expf(mx[r] - bm); /* 0 on the first block this row sees */
                sum[r] *= c;
                cv_scale(acc + (size_t)r * C, c, C);
                mx[r] = bm;
            }
            for (int32_t j = 0; j < nv; j++)
                pr[j] = s[(size_t)j * Rp + r] - mx[r];
            cv_exp(pr, pr, nv);
            for (int32_t j = 0; j < nv; j++)
                sum[r] += pr[j];
            for (int32_t j = nv; j < CV_KV_BLOCK; j++)
                pr[j] = 0;
        }
        /* acc [R][C] += p [R][n] rows[:, 0:C] */
        kn->gemm(R, C, n, 1.0f, p, CV_KV_BLOCK, rows, D, acc, C, true);
    }
}

void cv_mla_tile_scalar(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_scalar, a, scratch); }
void cv_mla_tile_avx2(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_avx2, a, scratch); }
void cv_mla_tile_avx512(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_avx512, a, scratch); }

att_tile_fn cv_mla_tile_for(void)
{
    /* the gemm takes any sizes: a head size every level takes asks only
     * for the level */
    const dn_kernels *kn = cv_dn_kernels_for(16);
    return kn == &cv_dn_kernels_avx512 ? cv_mla_tile_avx512
           : kn == &cv_dn_kernels_avx2 ? cv_mla_tile_avx2
                                       : cv_mla_tile_scalar;
}

const char *cv_mla_tile_name(att_tile_fn fn)
{
    return fn == cv_mla_tile_avx512 ? "avx512 gemm" : fn == cv_mla_tile_avx2 ? "avx2 gemm" : "scalar gemm";
}

size_t cv_mla_scratch_floats(int32_t R, int32_t D)
{
    return round16(cv_att_scratch_floats(R, D) + tile_tmp_floats(R, D));
}

/* ---- the decompressed form's attention ---- */

size_t cv_mla_dec_state_floats(int32_t n_q, int32_t nope, int32_t rot, int32_t v)
{
    const size_t nq = (size_t)n_q;
    return round16((size_t)(nope + rot) * nq) + round16(nq * (size_t)v) + 2 * round16(nq);
}

size_t cv_mla_dec_scratch_floats(int32_t n_q, int32_t nope, int32_t rot, int32_t v)
{
    const size_t P = CV_MLA_PIECE;
    return round16(P * (size_t)(nope + rot)) + round16(P * (size_t)v) + round16((size_t)n_q * P);
}

void cv_mla_dec_start(mla_dec_head *h, float *mem, const float *q, int64_t ld_q, const int32_t *rows)
{
    const int32_t K = h->nope + h->rot, nq = h->n_q;
    h->q = mem;
    h->acc = h->q + round16((size_t)K * nq);
    h->mx = h->acc + round16((size_t)nq * h->v);
    h->sum = h->mx + round16((size_t)nq);
    for (int32_t t = 0; t < nq; t++)
        memcpy(h->q + (size_t)t * K, q + (int64_t)rows[t] * ld_q, (size_t)K * sizeof(float));
    memset(h->acc, 0, (size_t)nq * h->v * sizeof(float));
    for (int32_t t = 0; t < nq; t++)
        h->mx[t] = -INFINITY, h->sum[t] = 0;
}

void cv_mla_dec_piece(const dn_kernels *kn, mla_dec_head *h, const mla_dec_piece *p, float *scratch)
{
    const int32_t P = CV_MLA_PIECE, K = h->nope + h->rot, V = h->v, nq = h->n_q;
    float *kt = scratch, *vh = kt + round16((size_t)P * K), *s = vh + round16((size_t)P * V);
    /* the queries from position base on see the piece */
    const int32_t t0 = CV_MAX(0, p->base - h->pos0), nt = nq - t0;
    if (nt <= 0)
        return;
    /* the piece's keys transposed ([K][P]: the score GEMM's columns are
     * its positions, one whole block of them) and its values, zero past
     * its positions. Every product runs with alpha 1 (a score is scaled
     * after it), and the value GEMM always sums P terms, the positions a
     * query does not see adding exact zeros: an element's bits depend on
     * its query and the piece only. */
    for (int32_t j = 0; j < P; j++) {
        const bool in = j < p->n;
        for (int32_t i = 0; i < h->nope; i++)
            kt[(size_t)i * P + j] = in ? p->k[j * p->ld_k + i] : 0.0f;
        for (int32_t i = 0; i < h->rot; i++)
            kt[(size_t)(h->nope + i) * P + j] = in ? p->pe[j * p->ld_pe + i] : 0.0f;
        if (in)
            memcpy(vh + (size_t)j * V, p->val + j * p->ld_v, (size_t)V * sizeof(float));
        else
            memset(vh + (size_t)j * V, 0, (size_t)V * sizeof(float));
    }
    /* s [nt][P] = q [nt][K] kt [K][P], then each row's online softmax in
     * place: its probabilities */
    kn->gemm(nt, P, K, 1.0f, h->q + (size_t)t0 * K, K, kt, P, s, P, false);
    for (int32_t c = 0; c < nt; c++) {
        const int32_t t = t0 + c, nv = CV_MIN(p->n, h->pos0 + t + 1 - p->base);
        float *pr = s + (size_t)c * P, bm = -INFINITY;
        for (int32_t j = 0; j < nv; j++) {
            pr[j] *= h->scale;
            bm = pr[j] > bm ? pr[j] : bm;
        }
        if (bm > h->mx[t]) {
            const float f = expf(h->mx[t] - bm); /* 0 on the first piece */
            h->sum[t] *= f;
            cv_scale(h->acc + (size_t)t * V, f, V);
            h->mx[t] = bm;
        }
        for (int32_t j = 0; j < nv; j++)
            pr[j] -= h->mx[t];
        cv_exp(pr, pr, nv);
        for (int32_t j = 0; j < nv; j++)
            h->sum[t] += pr[j];
        for (int32_t j = nv; j < P; j++)
            pr[j] = 0;
    }
    /* acc [nt][V] += s [nt][P] vh [P][V] */
    kn->gemm(nt, V, P, 1.0f, s, P, vh, V, h->acc + (size_t)t0 * V, V, true);
}

void cv_mla_dec_finish(const mla_dec_head *h, const int32_t *rows, float *out, int64_t ld_out)
{
    for (int32_t t = 0; t < h->n_q; t++) {
        float *o = out + (int64_t)rows[t] * ld_out;
        const float inv = 1.0f / h->sum[t];
        for (int32_t i = 0; i < h->v; i++)
            o[i] = h->acc[(size_t)t * h->v + i] * inv;
    }
}
