/* test_engine_mla.c — multi-head latent attention's tile and cache against
 * a plain two-pass softmax in double written out here: random latent rows
 * stored through cv_mla_store into a real latent pool (one part, f32, f16
 * and q8_0), random absorbed queries, tiles of 1..5 tokens x 1..20 heads
 * starting anywhere, rows of 80 (the tiny files: 64 latent + 16 RoPE) to
 * 576 (DeepSeek-V3, GLM-4.7-Flash: 512 + 64), contexts that cross chunks of
 * CV_ATT_CHUNK_BLOCKS blocks (merged by cv_att_tile_run). The reference
 * reads the rows back as the tile converts them, so every type is held to
 * the same 2e-5 bound relative to max(|out|, 0.05) (an output is an average
 * of values in [-1, 1]; the tiles' exp is a polynomial); scalar and
 * AVX2 GEMMs alike. Then the property batching and chunking rest on: a
 * token's output is the same bits in a tile of several tokens as alone.
 * Last, the model-level sizes: a latent pool's block holds one row a
 * position and layer (cv_engine_kv_block_bytes), a quarter or less of what
 * per-head K/V would take on the real shapes. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"
#include "test.h"

typedef struct mla_case {
    int32_t n_tok, pos0, H, C, rot;
    uint32_t kv_type;
} mla_case;

/* The stored row j of a block as f32, the way the tile reads it. */
static double stored(const kv_pool *kv, const void *piece, int32_t j, int32_t i)
{
    const int32_t D = kv->head_dim;
    if (kv->type == CV_GGML_F32)
        return ((const float *)piece)[(size_t)j * D + i];
    if (kv->type == CV_GGML_F16)
        return cv_fp16_to_fp32(((const uint16_t *)piece)[(size_t)j * D + i]);
    const int32_t ng = D / kv->qgroup;
    const uint16_t *d = (const uint16_t *)((const char *)piece + (size_t)CV_KV_BLOCK * D);
    return (double)cv_fp16_to_fp32(d[(size_t)j * ng + i / kv->qgroup]) * ((const int8_t *)piece)[(size_t)j * D + i];
}

/* Scores s[0..n) to their softmax weights, in place, in double. */
static void softmax_d(double *s, int32_t n)
{
    double mx = -INFINITY, z = 0;
    for (int32_t p = 0; p < n; p++)
        mx = fmax(mx, s[p]);
    for (int32_t p = 0; p < n; p++)
        z += s[p] = exp(s[p] - mx);
    for (int32_t p = 0; p < n; p++)
        s[p] /= z;
}

/* out[k][h][C] by the book over positions 0..pos0 + k. */
static void naive(const att_tile *a, float *out)
{
    const kv_pool *kv = a->kv;
    const int32_t D = a->hd, C = a->hd_v;
    for (int32_t k = 0; k < a->n_tok; k++) {
        const int32_t n = a->pos0 + k + 1;
        double *s = malloc((size_t)n * sizeof *s);
        for (int32_t h = 0; h < a->n_rep; h++) {
            const float *q = a->qkv + (int64_t)a->rows[k] * a->ld_qkv + (int64_t)h * D;
            for (int32_t p = 0; p < n; p++) {
                const void *piece = kv_k(kv, a->blocks[p / CV_KV_BLOCK], a->layer, 0);
                double d = 0;
                for (int32_t i = 0; i < D; i++)
                    d += (double)q[i] * stored(kv, piece, p % CV_KV_BLOCK, i);
                s[p] = d * a->scale;
            }
            softmax_d(s, n);
            for (int32_t i = 0; i < C; i++) {
                double o = 0;
                for (int32_t p = 0; p < n; p++)
                    o += s[p] * stored(kv, kv_k(kv, a->blocks[p / CV_KV_BLOCK], a->layer, 0), p % CV_KV_BLOCK, i);
                out[((size_t)k * a->n_rep + h) * C + i] = (float)o;
            }
        }
        free(s);
    }
}

/* The tiles this CPU runs. */
static int tiles(att_tile_fn *fns, const char **names)
{
    int n = 0;
    fns[n] = cv_mla_tile_scalar, names[n++] = "scalar";
    if (cv_dn_kernels_at(CV_ISA_AVX2, 16))
        fns[n] = cv_mla_tile_avx2, names[n++] = "avx2";
    if (cv_dn_kernels_at(CV_ISA_AVX512, 16))
        fns[n] = cv_mla_tile_avx512, names[n++] = "avx512";
    return n;
}

/* A latent pool of 2 layers holding random rows of D (each value in
 * [-1, 1)) at positions 0..last of layer `layer`, through cv_mla_store;
 * its table's blocks in reverse order of position (a table need not be
 * sorted). NULL (a failed check) when the pool cannot be made. */
static int32_t *random_rows(kv_pool *kv, int32_t D, uint32_t type, int32_t layer, int32_t last, cv_rng *rng)
{
    const int32_t n_blocks = last / CV_KV_BLOCK + 1;
    cv_err err = { 0 };
    if (kv_pool_init(kv, n_blocks + 2, 2, 1, 1, D, type, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return NULL;
    }
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t b = 0; b < n_blocks; b++)
        blocks[b] = n_blocks + 1 - b;
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    float *row = malloc((size_t)D * sizeof *row);
    for (int32_t p = 0; p <= last; p++) {
        for (int32_t i = 0; i < D; i++)
            row[i] = cv_rng_f32(rng) * 2 - 1;
        cv_mla_store(kv, vec, kv_k(kv, blocks[p / CV_KV_BLOCK], layer, 0), p % CV_KV_BLOCK, row);
    }
    free(row);
    return blocks;
}

static void run_case(const mla_case *c)
{
    const int32_t D = c->C + c->rot, last = c->pos0 + c->n_tok - 1;
    const int32_t layer = 1;
    kv_pool kv;
    cv_rng rng;
    cv_rng_seed(&rng, (uint64_t)(c->pos0 * 131 + c->n_tok * 7 + c->H * 3 + D + c->kv_type));
    int32_t *blocks = random_rows(&kv, D, c->kv_type, layer, last, &rng);
    if (!blocks)
        return;
    const int32_t R = c->n_tok * c->H;
    /* query rows 3 apart in the batch (rows[k] = 3k), each H x D wide */
    const int64_t ld = (int64_t)c->H * D;
    float *q = malloc((size_t)3 * c->n_tok * ld * sizeof *q);
    for (int64_t i = 0; i < 3 * c->n_tok * ld; i++)
        q[i] = cv_rng_f32(&rng) * 2 - 1;
    int32_t *rows = malloc((size_t)c->n_tok * sizeof *rows);
    for (int32_t k = 0; k < c->n_tok; k++)
        rows[k] = 3 * k;
    const int64_t ld_out = (int64_t)c->H * c->C;
    float *out = calloc((size_t)3 * c->n_tok * ld_out, sizeof *out), *ref = malloc((size_t)R * c->C * sizeof *ref);
    float *scratch = cv_aligned_alloc(cv_mla_scratch_floats(R, D) * sizeof(float));
    att_tile a = { .kv = &kv, .blocks = blocks, .layer = layer, .g = 0, .n_tok = c->n_tok, .pos0 = c->pos0,
                   .rows = rows, .qkv = q, .ld_qkv = ld, .out = out, .ld_out = ld_out, .n_rep = c->H, .hd = D,
                   .hd_v = c->C, .scale = 1.0f / sqrtf((float)(c->rot + 32)) };
    naive(&a, ref);
    att_tile_fn fns[3];
    const char *names[3];
    const int n_fn = tiles(fns, names);
    for (int f = 0; f < n_fn; f++) {
        memset(out, 0, (size_t)3 * c->n_tok * ld_out * sizeof *out);
        att_tile t = a;
        cv_att_tile_run(fns[f], &t, scratch);
        double worst = 0;
        for (int32_t k = 0; k < c->n_tok; k++)
            for (int32_t i = 0; i < c->H * c->C; i++) {
                const double r = ref[(size_t)k * c->H * c->C + i], o = out[(size_t)rows[k] * ld_out + i];
                worst = fmax(worst, fabs(o - r) / fmax(5e-2, fabs(r)));
            }
        CHECK_MSG(worst <= 2e-5, "%s tile, %s cache, %d tokens at %d, %d heads, rows of %d: relative error %g",
                  names[f], cv_engine_kv_type_name(c->kv_type), c->n_tok, c->pos0, c->H, D, worst);
        /* each token alone: the same bits as in the tile */
        for (int32_t k = 0; k < c->n_tok; k++) {
            float *alone = calloc((size_t)ld_out, sizeof *alone);
            const int32_t row0 = 0;
            att_tile t1 = a;
            t1.n_tok = 1, t1.pos0 = c->pos0 + k, t1.rows = &row0, t1.qkv = q + (size_t)rows[k] * ld, t1.out = alone;
            cv_att_tile_run(fns[f], &t1, scratch);
            CHECK_MSG(memcmp(alone, out + (size_t)rows[k] * ld_out, (size_t)ld_out * sizeof(float)) == 0,
                      "%s tile: token %d of %d alone gives other bits than in the tile", names[f], k, c->n_tok);
            free(alone);
        }
    }
    cv_aligned_free(scratch);
    free(out);
    free(ref);
    free(rows);
    free(q);
    free(blocks);
    kv_pool_fini(&kv);
}

TEST(mla_tiles_match_a_plain_softmax_over_the_latent_rows)
{
    static const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    const mla_case cases[] = {
        /* the tiny files' rows: one token at position 0, mid-block, a block edge */
        { 1, 0, 4, 64, 16, 0 },   { 1, 7, 4, 64, 16, 0 },    { 3, 14, 4, 64, 16, 0 },
        { 5, 33, 3, 64, 16, 0 },
        /* DeepSeek-V3 / GLM-4.7-Flash rows, GLM's 20 heads */
        { 1, 40, 20, 512, 64, 0 }, { 2, 95, 16, 512, 64, 0 },
        /* past a chunk of 64 blocks: two chunks merged */
        { 2, 1030, 4, 64, 16, 0 }, { 1, 1100, 20, 512, 64, 0 },
    };
    for (size_t t = 0; t < CV_ARRAY_LEN(types); t++)
        for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
            mla_case c = cases[i];
            c.kv_type = types[t];
            run_case(&c);
        }
    if (!cv_isa_supported(CV_ISA_AVX2))
        printf("  (no AVX2 on this CPU: the scalar tile only)\n");
}

/* ---- the decompressed form ---- */

typedef struct dec_case {
    int32_t n_q, pos0, H, C, rot, nope, v;
    uint32_t kv_type;
} dec_case;

/* The level's GEMMs this CPU runs, as the tiles above. */
static int gemms(const dn_kernels **kns, const char **names)
{
    int n = 0;
    kns[n] = &cv_dn_kernels_scalar, names[n++] = "scalar";
    if (cv_dn_kernels_at(CV_ISA_AVX2, 16))
        kns[n] = &cv_dn_kernels_avx2, names[n++] = "avx2";
    if (cv_dn_kernels_at(CV_ISA_AVX512, 16))
        kns[n] = &cv_dn_kernels_avx512, names[n++] = "avx512";
    return n;
}

static double rel_err(const float *got, int64_t ld_got, const double *ref, int32_t n_q, int32_t w)
{
    double worst = 0;
    for (int32_t t = 0; t < n_q; t++)
        for (int32_t i = 0; i < w; i++) {
            const double r = ref[(size_t)t * w + i];
            worst = fmax(worst, fabs(got[(size_t)t * ld_got + i] - r) / fmax(5e-2, fabs(r)));
        }
    return worst;
}

/* One head's keys and values (kf [n][nope + rot], vf [n][v], position by
 * position) and what cv_mla_dec_* make of them. */
typedef struct dec_run {
    const dn_kernels *kn;
    int32_t nope, rot, v;
    float scale;
    const float *kf, *vf;
    float *scratch, *state;
} dec_run;

/* n_q queries at pos0.. (query t at q + rows[t] ld_q) through every piece
 * of the context in order, outputs to out + rows[t] ld_out. */
static void run_dec(const dec_run *d, int32_t n_q, int32_t pos0, const float *q, int64_t ld_q, const int32_t *rows,
                    float *out, int64_t ld_out)
{
    const int32_t K = d->nope + d->rot, last = pos0 + n_q - 1;
    mla_dec_head h = { .nope = d->nope, .rot = d->rot, .v = d->v, .n_q = n_q, .pos0 = pos0, .scale = d->scale };
    cv_mla_dec_start(&h, d->state, q, ld_q, rows);
    for (int32_t base = 0; base <= last; base += CV_MLA_PIECE) {
        const mla_dec_piece p = { .base = base, .n = CV_MIN(CV_MLA_PIECE, last + 1 - base),
                                  .k = d->kf + (size_t)base * K, .ld_k = K,
                                  .pe = d->kf + (size_t)base * K + d->nope, .ld_pe = K,
                                  .val = d->vf + (size_t)base * d->v, .ld_v = d->v };
        cv_mla_dec_piece(d->kn, &h, &p, d->scratch);
    }
    cv_mla_dec_finish(&h, rows, out, ld_out);
}

/* Random latent rows in a pool, random up-projections (attn_k_b's [H][C]
 * [nope] and attn_v_b's [H][v][C], as the file stores them) and queries
 * [q_nope, q_pe]; the reference decompresses every position's keys and
 * values in double and takes a two-pass softmax. Both forms are held to
 * it: the decompressed one (eng_mla_dec, every GEMM level) and the
 * absorbed one (the latent tile over queries absorbed in double, its
 * latent outputs through v_b in double), so they agree with each other.
 * Then a query's bits alone, and in a run split anywhere, are its bits in
 * the whole run. */
static void run_dec_case(const dec_case *c)
{
    const int32_t H = c->H, C = c->C, D = C + c->rot, K = c->nope + c->rot, V = c->v, nq = c->n_q;
    const int32_t last = c->pos0 + nq - 1, layer = 1;
    kv_pool kv;
    cv_rng rng;
    cv_rng_seed(&rng, (uint64_t)(c->pos0 * 31 + nq * 5 + H + D + c->kv_type));
    int32_t *blocks = random_rows(&kv, D, c->kv_type, layer, last, &rng);
    if (!blocks)
        return;
    const size_t HC = (size_t)H * C;
    float *wk = malloc(HC * c->nope * sizeof *wk), *wv = malloc(HC * V * sizeof *wv);
    for (size_t i = 0; i < HC * c->nope; i++)
        wk[i] = (cv_rng_f32(&rng) * 2 - 1) / sqrtf((float)C) * 2;
    for (int32_t h = 0; h < H; h++)
        for (int32_t i = 0; i < V; i++)
            for (int32_t x = 0; x < C; x++) {
                wv[((size_t)h * V + i) * C + x] = (cv_rng_f32(&rng) * 2 - 1) / sqrtf((float)C) * 2;
            }
    /* queries 3 rows apart, [H][K] each */
    const int64_t ld_q = (int64_t)H * K, ld_o = (int64_t)H * V;
    float *q = malloc((size_t)3 * nq * ld_q * sizeof *q);
    for (int64_t i = 0; i < 3 * nq * ld_q; i++)
        q[i] = cv_rng_f32(&rng) * 2 - 1;
    int32_t *rows = malloc((size_t)nq * sizeof *rows);
    for (int32_t t = 0; t < nq; t++)
        rows[t] = 3 * t;
    const float scale = 1.0f / sqrtf((float)K);

    /* the reference: [H][nq][V]; and the keys and values the engine's
     * matmuls would give, rounded to f32: kf [H][n_pos][K], vf [H][n_pos][V] */
    const int32_t n_pos = last + 1;
    double *kd = malloc((size_t)n_pos * K * sizeof *kd), *vd = malloc((size_t)n_pos * V * sizeof *vd);
    double *ref = malloc((size_t)H * nq * V * sizeof *ref), *sc = malloc((size_t)n_pos * sizeof *sc);
    float *kf = malloc((size_t)H * n_pos * K * sizeof *kf), *vf = malloc((size_t)H * n_pos * V * sizeof *vf);
    for (int32_t h = 0; h < H; h++) {
        for (int32_t p = 0; p < n_pos; p++) {
            const void *piece = kv_k(&kv, blocks[p / CV_KV_BLOCK], layer, 0);
            for (int32_t i = 0; i < c->nope; i++) {
                double a = 0;
                for (int32_t x = 0; x < C; x++)
                    a += (double)wk[((size_t)h * C + x) * c->nope + i] * stored(&kv, piece, p % CV_KV_BLOCK, x);
                kd[(size_t)p * K + i] = a;
            }
            for (int32_t i = 0; i < c->rot; i++)
                kd[(size_t)p * K + c->nope + i] = stored(&kv, piece, p % CV_KV_BLOCK, C + i);
            for (int32_t i = 0; i < V; i++) {
                double a = 0;
                for (int32_t x = 0; x < C; x++)
                    a += (double)wv[((size_t)h * V + i) * C + x] * stored(&kv, piece, p % CV_KV_BLOCK, x);
                vd[(size_t)p * V + i] = a;
            }
            for (int32_t i = 0; i < K; i++)
                kf[((size_t)h * n_pos + p) * K + i] = (float)kd[(size_t)p * K + i];
            for (int32_t i = 0; i < V; i++)
                vf[((size_t)h * n_pos + p) * V + i] = (float)vd[(size_t)p * V + i];
        }
        for (int32_t t = 0; t < nq; t++) {
            const float *qt = q + (int64_t)rows[t] * ld_q + (int64_t)h * K;
            const int32_t n = c->pos0 + t + 1;
            for (int32_t p = 0; p < n; p++) {
                double a = 0;
                for (int32_t i = 0; i < K; i++)
                    a += (double)qt[i] * kd[(size_t)p * K + i];
                sc[p] = a * scale;
            }
            softmax_d(sc, n);
            for (int32_t i = 0; i < V; i++) {
                double o = 0;
                for (int32_t p = 0; p < n; p++)
                    o += sc[p] * vd[(size_t)p * V + i];
                ref[((size_t)h * nq + t) * V + i] = o;
            }
        }
    }

    const dn_kernels *kns[3];
    const char *names[3];
    const int n_kn = gemms(kns, names);
    float *out = calloc((size_t)3 * nq * ld_o, sizeof *out), *part = calloc((size_t)3 * nq * ld_o, sizeof *part);
    float *scratch = cv_aligned_alloc(cv_mla_dec_scratch_floats(nq, c->nope, c->rot, V) * sizeof(float));
    float *state = cv_aligned_alloc(cv_mla_dec_state_floats(nq, c->nope, c->rot, V) * sizeof(float));
    for (int f = 0; f < n_kn; f++) {
        double worst = 0;
        for (int32_t h = 0; h < H; h++) {
            const dec_run d = { .kn = kns[f], .nope = c->nope, .rot = c->rot, .v = V, .scale = scale,
                                .kf = kf + (size_t)h * n_pos * K, .vf = vf + (size_t)h * n_pos * V,
                                .scratch = scratch, .state = state };
            run_dec(&d, nq, c->pos0, q + (int64_t)h * K, ld_q, rows, out + (int64_t)h * V, ld_o);
            worst = fmax(worst, rel_err(out + (int64_t)h * V, 3 * ld_o, ref + (size_t)h * nq * V, nq, V));
            /* the run cut in two where it crosses a piece, and queries
             * alone: the same bits */
            const int32_t cut = CV_MIN(nq - 1, CV_MAX(1, CV_MLA_PIECE - c->pos0 % CV_MLA_PIECE));
            run_dec(&d, cut, c->pos0, q + (int64_t)h * K, ld_q, rows, part + (int64_t)h * V, ld_o);
            run_dec(&d, nq - cut, c->pos0 + cut, q + (int64_t)h * K, ld_q, rows + cut, part + (int64_t)h * V, ld_o);
            for (int32_t t = 0; t < nq; t++) {
                float *alone = part + (size_t)rows[t] * ld_o + (int64_t)h * V, keep[CV_MAX_HEAD_DIM];
                CHECK_MSG(memcmp(alone, out + (size_t)rows[t] * ld_o + (int64_t)h * V, (size_t)V * sizeof(float)) == 0,
                          "%s decompressed: query %d of %d cut at %d gives other bits", names[f], t, nq, cut);
                if (t != 0 && t != cut - 1 && t != cut && t != nq - 1) /* alone: the run's ends and the cut's */
                    continue;
                memcpy(keep, alone, (size_t)V * sizeof(float));
                const int32_t row0 = 0;
                run_dec(&d, 1, c->pos0 + t, q + (size_t)rows[t] * ld_q + (int64_t)h * K, ld_q, &row0, alone, ld_o);
                CHECK_MSG(memcmp(alone, keep, (size_t)V * sizeof(float)) == 0,
                          "%s decompressed: query %d of %d alone gives other bits", names[f], t, nq);
            }
        }
        printf("  decompressed (%s), %s rows of %d, %d heads, %d queries at %d: relative error %.3g\n", names[f],
               cv_engine_kv_type_name(c->kv_type), D, H, nq, c->pos0, worst);
        CHECK_MSG(worst <= 5e-5, "%s decompressed form, %s cache, %d queries at %d: relative error %g", names[f],
                  cv_engine_kv_type_name(c->kv_type), nq, c->pos0, worst);
    }

    /* the absorbed form over the same rows: q_abs = [k_b_h q_nope, q_pe] */
    const int64_t ld_a = (int64_t)H * D, ld_l = (int64_t)H * C;
    float *qa = malloc((size_t)3 * nq * ld_a * sizeof *qa), *lat = calloc((size_t)3 * nq * ld_l, sizeof *lat);
    for (int32_t t = 0; t < nq; t++)
        for (int32_t h = 0; h < H; h++) {
            const float *qt = q + (int64_t)rows[t] * ld_q + (int64_t)h * K;
            float *a = qa + (int64_t)rows[t] * ld_a + (int64_t)h * D;
            for (int32_t x = 0; x < C; x++) {
                double s = 0;
                for (int32_t i = 0; i < c->nope; i++)
                    s += (double)wk[((size_t)h * C + x) * c->nope + i] * qt[i];
                a[x] = (float)s;
            }
            memcpy(a + C, qt + c->nope, (size_t)c->rot * sizeof(float));
        }
    float *tscr = cv_aligned_alloc(cv_mla_scratch_floats(nq * H, D) * sizeof(float));
    att_tile a = { .kv = &kv, .blocks = blocks, .layer = layer, .g = 0, .n_tok = nq, .pos0 = c->pos0,
                   .rows = rows, .qkv = qa, .ld_qkv = ld_a, .out = lat, .ld_out = ld_l, .n_rep = H, .hd = D,
                   .hd_v = C, .scale = scale };
    cv_att_tile_run(cv_mla_tile_for(), &a, tscr);
    double worst = 0, apart = 0;
    for (int32_t t = 0; t < nq; t++)
        for (int32_t h = 0; h < H; h++)
            for (int32_t i = 0; i < V; i++) {
                double o = 0;
                for (int32_t x = 0; x < C; x++)
                    o += (double)wv[((size_t)h * V + i) * C + x] * lat[(size_t)rows[t] * ld_l + (size_t)h * C + x];
                const double r = ref[((size_t)h * nq + t) * V + i];
                const float dd = out[(size_t)rows[t] * ld_o + (size_t)h * V + i];
                worst = fmax(worst, fabs(o - r) / fmax(5e-2, fabs(r)));
                apart = fmax(apart, fabs(o - dd) / fmax(5e-2, fabs(r)));
            }
    printf("  absorbed over the same rows: relative error %.3g, %.3g from the decompressed form\n", worst, apart);
    CHECK_MSG(worst <= 5e-5 && apart <= 1e-4, "absorbed form, %s cache, %d queries at %d: relative error %g, %g "
              "from the decompressed form", cv_engine_kv_type_name(c->kv_type), nq, c->pos0, worst, apart);
    cv_aligned_free(tscr);
    free(qa), free(lat);
    cv_aligned_free(scratch);
    cv_aligned_free(state);
    free(out), free(part), free(kd), free(vd), free(kf), free(vf), free(ref), free(sc);
    free(q), free(rows), free(wk), free(wv), free(blocks);
    kv_pool_fini(&kv);
}

TEST(mla_decompressed_form_matches_the_absorbed_one_and_a_double_reference)
{
    static const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    const dec_case cases[] = {
        /* the tiny files' sizes: a group from 0, one that crosses a piece */
        { 64, 0, 4, 64, 16, 32, 32, 0 },
        { 70, 100, 4, 64, 16, 32, 32, 0 },
        /* GLM-4.7-Flash's head (192 + 64 / 256 over 512 + 64), DeepSeek's (128 + 64 / 128) */
        { 64, 64, 2, 512, 64, 192, 256, 0 },
        { 13, 130, 3, 512, 64, 128, 128, 0 },
    };
    for (size_t t = 0; t < CV_ARRAY_LEN(types); t++)
        for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
            dec_case c = cases[i];
            c.kv_type = types[t];
            run_dec_case(&c);
        }
}

/* The bytes a position keeps in the cache, on the real shapes' sizes:
 * latent rows in a one-part pool against what per-head K/V would take. */
TEST(a_latent_position_keeps_one_row_a_layer)
{
    static const struct {
        const char *name;
        int32_t layers, heads, C, rot, nope, v;
    } shapes[] = {
        { "glm-4.7-flash", 47, 20, 512, 64, 192, 256 },
        { "deepseek-v2-lite", 27, 16, 512, 64, 128, 128 },
        { "kimi-k2", 61, 64, 512, 64, 128, 128 },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(shapes); i++) {
        const int32_t D = shapes[i].C + shapes[i].rot;
        const size_t latent = kv_block_bytes(shapes[i].layers, 1, 1, D, CV_GGML_F16) / CV_KV_BLOCK;
        /* per-head K (nope + rope) and V of every head, f16 */
        const size_t per_head = (size_t)shapes[i].layers * shapes[i].heads *
                                (size_t)(shapes[i].nope + shapes[i].rot + shapes[i].v) * 2;
        printf("  %s: %zu bytes a position (f16 latent rows), per-head K/V would take %zu (%.1fx)\n", shapes[i].name,
               latent, per_head, (double)per_head / latent);
        CHECK_EQ_INT(latent, (size_t)shapes[i].layers * D * 2);
        CHECK(latent * 4 <= per_head);
    }
}

int main(void)
{
    RUN(mla_tiles_match_a_plain_softmax_over_the_latent_rows);
    RUN(mla_decompressed_form_matches_the_absorbed_one_and_a_double_reference);
    RUN(a_latent_position_keeps_one_row_a_layer);
    return test_report();
}
