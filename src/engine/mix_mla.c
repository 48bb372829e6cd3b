/* mix_mla.c — multi-head latent attention (CV_MIXER_MLA), deepseek2's mixer
 * (DeepSeek-V2/V3, Kimi-K2, GLM-4.7-Flash; arch_deepseek2.c). A position
 * keeps one latent row in the layer's KV cache instead of per-head keys and
 * values, and every head attends over those rows:
 *
 *   q   = W_q_b rmsnorm(W_q_a a)   (or W_q a)      [H][nope | rope]
 *   row = [c, k_pe]:  c = rmsnorm((W_kv_a a)[0:C]),  k_pe = RoPE((W_kv_a a)[C:C+r])
 *   q_abs_h = [k_b_h q_nope_h, RoPE(q_pe_h)]                     [H][D], D = C + r
 *   s_hj = scale (q_abs_h . row_j)                    softmax over j <= i
 *   o_h  = v_b_h (sum_j p_hj c_j)                                [H][v_mla]
 *   out  = W_o concat(o_h)
 *
 * k_b_h (attn_k_b) is head h's key up-projection transposed, so
 * q_nope_h . (W_UK_h c) = (k_b_h q_nope_h) . c: the up-projections are
 * "absorbed" into the query and the output, and attention runs in the
 * latent space, reading D floats a position for all H heads (an MQA of H
 * query heads over one D-wide KV head whose value is the key's first C
 * dims). That is what makes the cache small (576 values a position and
 * layer for DeepSeek-V3's 128 heads, which per-head K/V would store as
 * 128 x 320), and it is the form used for every call: prefill could
 * instead decompress the context into per-head keys and values and attend
 * with head size nope + r and value v_mla, fewer multiply-adds per pair of
 * positions at long prompts but H (nope + v_mla) C more per context position
 * and call, which a 512-token prefill chunk does not win back
 * (docs/PERF.md, "Multi-head latent attention").
 *
 * The latent cache is a KV pool of one part (engine_int.h, "a latent
 * pool"): a block's rows position by position, f32, f16, or q8_0 with a
 * factor per 32 dims (per row when D is not a multiple of 32). The
 * attention itself is the engine's plan (attention.c: tiles of a
 * sequence's tokens, chunks of CV_ATT_CHUNK_BLOCKS blocks merged in order,
 * deep contexts cut across threads) with this file's tile: per block of 16
 * positions, the rows as f32, the scores of every query row by one small
 * GEMM (rows x transposed queries), an online softmax per query row, and
 * the values by a second (probabilities x rows' first C dims), both through
 * the Gated DeltaNet kind's GEMM kernels (scalar, AVX2). Every element of
 * both products sums its terms in the same order whatever else the tile
 * holds, so a token's bits are the same alone, batched or chunked. The
 * up-projections of all heads run as one expert-routed matmul each (a
 * route per token and head), so each head's matrix is read once a call. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

struct mla_scratch {
    int32_t H, C, D, rot, nope, k_mla, v_mla, q_lora;
    float *qa;       /* [n_batch][q_lora] (q_lora > 0) */
    float *q;        /* [n_batch][H * k_mla] each head's q_nope | q_pe */
    float *kv;       /* [n_batch][D] the latent rows of this call */
    float *o;        /* [n_batch][H * v_mla] the heads' outputs */
    int32_t *head;   /* [n_batch * H] route r's head: r mod H */
    cv_experts_ws *ws; /* the up-projections' routed matmuls */
};

/* ---- the latent cache ---- */

void eng_mla_store(const kv_pool *p, const cv_vec_ops *vec, void *piece, int32_t j, const float *row)
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

/* The first n rows of a block's piece as f32: the piece itself when it is
 * f32, else converted into buf [n][D]. */
static const float *latent_rows(const kv_pool *p, const void *piece, int32_t n, float *buf)
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
        const float *rows = latent_rows(kv, kv_k(kv, a->blocks[blk], a->layer, a->g), n, rowbuf);
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

void eng_mla_tile_scalar(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_scalar, a, scratch); }
void eng_mla_tile_avx2(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_avx2, a, scratch); }
void eng_mla_tile_avx512(const att_tile *a, float *scratch) { mla_tile(&cv_dn_kernels_avx512, a, scratch); }

att_tile_fn eng_mla_tile_for(void)
{
    /* the gemm takes any sizes: a head size every level takes asks only
     * for the level */
    const dn_kernels *kn = cv_dn_kernels_for(16);
    return kn == &cv_dn_kernels_avx512 ? eng_mla_tile_avx512
           : kn == &cv_dn_kernels_avx2 ? eng_mla_tile_avx2
                                       : eng_mla_tile_scalar;
}

int32_t eng_mla_tile_tokens(int32_t n_head) { return CV_MAX(1, CV_MIN(16, 48 / n_head)); }

size_t eng_mla_scratch_floats(int32_t R, int32_t D)
{
    return round16(cv_att_scratch_floats(R, D) + tile_tmp_floats(R, D));
}

/* ---- the layer ---- */

typedef struct mla_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t layer;
    int32_t n_rows;
} mla_job;

static void rows_q_norm(void *ctx, int ith, int nth)
{
    mla_job *j = ctx;
    cv_engine *e = j->e;
    mla_scratch *M = e->mla;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *qa = M->qa + t * M->q_lora;
        e->vec->rmsnorm(qa, qa, e->m->layers[j->layer].mla_q_norm, M->q_lora, e->m->hp.rms_eps);
    }
}

/* Per row: the latent's norm and k_pe's RoPE, the row into the cache, and
 * each head's RoPE'd q_pe into its absorbed query (whose first C dims the
 * up-projection writes). */
static void rows_latent(void *ctx, int ith, int nth)
{
    mla_job *j = ctx;
    cv_engine *e = j->e;
    mla_scratch *M = e->mla;
    const cv_layer *L = &e->m->layers[j->layer];
    const cv_vec_ops *vec = e->vec;
    const kv_pool *kv = eng_layer_pool(e, j->layer);
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const int32_t pos = j->b->pos[t];
        float *row = M->kv + t * M->D, *q = M->q + t * M->H * M->k_mla, *qa = e->qkv + t * e->ld_qkv;
        vec->rmsnorm(row, row, L->mla_kv_norm, M->C, e->m->hp.rms_eps);
        vec->rope(&L->rope, row + M->C, 1, M->rot, pos);
        for (int32_t h = 0; h < M->H; h++) {
            float *pe = q + (int64_t)h * M->k_mla + M->nope;
            vec->rope(&L->rope, pe, 1, M->rot, pos);
            memcpy(qa + (int64_t)h * M->D + M->C, pe, (size_t)M->rot * sizeof(float));
        }
        const int32_t blk = eng_layer_table(e, j->layer, &e->seqs[j->b->seq[t]])[pos / CV_KV_BLOCK];
        eng_mla_store(kv, vec, kv_k(kv, blk, e->kv_layer[j->layer], 0), pos % CV_KV_BLOCK, row);
    }
}

/* Every head's matrix of an up-projection, counted into the call's bytes. */
static void heads_matmul(cv_engine *e, cv_bmat *const *w, int32_t T, const float *x, int64_t ldx, float *y,
                         int64_t ldy)
{
    mla_scratch *M = e->mla;
    eng_matmul_experts(e, w, M->H, (int64_t)T * M->H, x, ldx, (int64_t)T * M->H, M->head, NULL, y, ldy, M->ws);
    e->prof_bytes += (double)M->H * (double)w[0]->bytes;
}

static void mla_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    mla_scratch *M = e->mla;
    const int32_t T = b->n_tokens;
    const int64_t ld_q = (int64_t)M->H * M->k_mla;
    mla_job j = { .e = e, .b = b, .layer = il, .n_rows = T };
    if (L->mla_q_b) {
        eng_matmul(e, L->mla_q, T, e->xn, e->ld_x, M->qa, M->q_lora);
        eng_run_rows(e, T, rows_q_norm, &j);
        eng_matmul(e, L->mla_q_b, T, M->qa, M->q_lora, M->q, ld_q);
    } else {
        eng_matmul(e, L->mla_q, T, e->xn, e->ld_x, M->q, ld_q);
    }
    eng_matmul(e, L->mla_kv, T, e->xn, e->ld_x, M->kv, M->D);
    eng_run_rows(e, T, rows_latent, &j);
    /* route r = t H + h: q_nope of token t, head h (the first nope values of
     * its k_mla) into the first C dims of its absorbed query */
    heads_matmul(e, L->mla_k_b, T, M->q, M->k_mla, e->qkv, M->D);

    const uint64_t t0 = eng_tick(e);
    cv_engine_attention(e, il);
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;

    heads_matmul(e, L->mla_v_b, T, e->attn, M->C, M->o, M->v_mla);
    eng_matmul(e, L->wo, T, M->o, (int64_t)M->H * M->v_mla, e->tmp, e->ld_x);
}

static int mla_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    if (e->kinds_used[0] >> CV_MIXER_ATTN & 1)
        return cv_err_set(err, CV_EUNSUPPORTED, "engine: a model with both latent and plain attention layers");
    mla_scratch *M = e->mla = cv_xcalloc(1, sizeof *M);
    M->H = hp->n_head;
    M->C = hp->n_lora_kv;
    M->rot = hp->n_rot;
    M->D = M->C + M->rot;
    M->k_mla = hp->k_mla;
    M->nope = hp->k_mla - hp->n_rot;
    M->v_mla = hp->v_mla;
    M->q_lora = hp->n_lora_q;
    const size_t T = (size_t)e->p.n_batch, TH = T * (size_t)M->H;
    if (M->q_lora > 0)
        M->qa = cv_aligned_alloc(T * (size_t)M->q_lora * sizeof(float));
    M->q = cv_aligned_alloc(TH * (size_t)M->k_mla * sizeof(float));
    M->kv = cv_aligned_alloc(T * (size_t)M->D * sizeof(float));
    M->o = cv_aligned_alloc(TH * (size_t)M->v_mla * sizeof(float));
    M->head = cv_xmalloc(TH * sizeof *M->head);
    for (size_t r = 0; r < TH; r++)
        M->head[r] = (int32_t)(r % (size_t)M->H);
    M->ws = cv_be_experts_ws_create(e->st, (int64_t)TH, CV_MAX(M->nope, M->C), CV_MAX(M->C, M->v_mla), M->H);
    /* The attention reads the absorbed queries and writes the heads'
     * latent outputs where the plain attention kind keeps q and its output. */
    e->ld_qkv = (int64_t)M->H * M->D;
    e->ld_q = (int64_t)M->H * M->C;
    e->qkv = cv_aligned_alloc(T * (size_t)e->ld_qkv * sizeof(float));
    e->attn = cv_aligned_alloc(T * (size_t)e->ld_q * sizeof(float));
    e->att_tile = eng_mla_tile_for();
    /* The tile's size is the kind's: its scratch and the cut pairs' state
     * slots follow it (the engine sized them for plain attention's). */
    e->att_tile_tokens = eng_mla_tile_tokens(M->H);
    const int32_t R = e->att_tile_tokens * M->H;
    const size_t need = eng_mla_scratch_floats(R, M->D), slot = round16(cv_att_state_floats(R, M->C));
    if (need > e->att_scratch_floats) {
        cv_aligned_free(e->att_scratch);
        e->att_scratch_floats = need;
        e->att_scratch = cv_aligned_alloc(need * sizeof(float) * (size_t)e->n_threads);
    }
    if (slot > e->att_slot_floats) {
        cv_aligned_free(e->att_slots);
        e->att_slot_floats = slot;
        e->att_slots = cv_aligned_alloc(CV_MAX(1, (size_t)e->att_n_slots * slot) * sizeof(float));
    }
    return 0;
}

static void mla_fini(cv_engine *e)
{
    mla_scratch *M = e->mla;
    if (!M)
        return;
    cv_aligned_free(M->qa);
    cv_aligned_free(M->q);
    cv_aligned_free(M->kv);
    cv_aligned_free(M->o);
    free(M->head);
    cv_be_experts_ws_destroy(e->st, M->ws);
    cv_aligned_free(e->qkv);
    cv_aligned_free(e->attn);
    free(M);
    e->mla = NULL;
}

const eng_kind eng_mix_mla = {
    .name = "multi-head latent attention",
    .init = mla_init,
    .fini = mla_fini,
    .forward = mla_forward,
};
