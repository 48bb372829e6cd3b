/* test_engine_mla.c — multi-head latent attention's tile and cache against
 * a plain two-pass softmax in double written out here: random latent rows
 * stored through eng_mla_store into a real latent pool (one part, f32, f16
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
            double mx = -INFINITY, z = 0;
            for (int32_t p = 0; p < n; p++) {
                const void *piece = kv_k(kv, a->blocks[p / CV_KV_BLOCK], a->layer, 0);
                double d = 0;
                for (int32_t i = 0; i < D; i++)
                    d += (double)q[i] * stored(kv, piece, p % CV_KV_BLOCK, i);
                s[p] = d * a->scale;
                mx = fmax(mx, s[p]);
            }
            for (int32_t p = 0; p < n; p++)
                z += exp(s[p] - mx);
            for (int32_t i = 0; i < C; i++) {
                double o = 0;
                for (int32_t p = 0; p < n; p++)
                    o += exp(s[p] - mx) / z *
                         stored(kv, kv_k(kv, a->blocks[p / CV_KV_BLOCK], a->layer, 0), p % CV_KV_BLOCK, i);
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
    fns[n] = eng_mla_tile_scalar, names[n++] = "scalar";
    if (cv_dn_kernels_at(CV_ISA_AVX2, 16))
        fns[n] = eng_mla_tile_avx2, names[n++] = "avx2";
    if (cv_dn_kernels_at(CV_ISA_AVX512, 16))
        fns[n] = eng_mla_tile_avx512, names[n++] = "avx512";
    return n;
}

static void run_case(const mla_case *c)
{
    const int32_t D = c->C + c->rot, last = c->pos0 + c->n_tok - 1, n_blocks = last / CV_KV_BLOCK + 1;
    const int32_t layer = 1;
    kv_pool kv;
    cv_err err = { 0 };
    /* 2 layers, blocks in reverse order of position (a table need not be sorted) */
    if (kv_pool_init(&kv, n_blocks + 2, 2, 1, 1, D, c->kv_type, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t b = 0; b < n_blocks; b++)
        blocks[b] = n_blocks + 1 - b;
    cv_rng rng;
    cv_rng_seed(&rng, (uint64_t)(c->pos0 * 131 + c->n_tok * 7 + c->H * 3 + D + c->kv_type));
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    float *row = malloc((size_t)D * sizeof *row);
    for (int32_t p = 0; p <= last; p++) {
        for (int32_t i = 0; i < D; i++)
            row[i] = cv_rng_f32(&rng) * 2 - 1;
        eng_mla_store(&kv, vec, kv_k(&kv, blocks[p / CV_KV_BLOCK], layer, 0), p % CV_KV_BLOCK, row);
    }
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
    float *scratch = cv_aligned_alloc(eng_mla_scratch_floats(R, D) * sizeof(float));
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
    free(row);
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
    RUN(a_latent_position_keeps_one_row_a_layer);
    return test_report();
}
