/* test_engine_attention.c — the attention tile kernels against a plain
 * two-pass softmax written out here: random queries, keys and values in a
 * real KV block pool (f32, f16 and q8_0, written by kv_store as the forward
 * pass writes them), tiles of 1..16 tokens starting anywhere (block edges,
 * mid-block), GQA groups of 1..7 heads, head sizes 8..128; sliding windows
 * (position p sees p - W + 1 .. p) of 1 to 1024 positions, boundaries
 * inside a block and across chunks of 1024, and per-head sink logits that
 * join the softmax's sum with no value. A window tile's table holds no
 * block before its first token's window (an id far past the pool there,
 * where a sliding layer's freed blocks would be): reading one faults. The scalar tile
 * is the reference; the AVX2 and AVX-512F ones (where the CPU has them)
 * must agree with the plain softmax within 2e-5 relative (their exp is a
 * polynomial), each case against one reference computed once (a q8_0
 * cache scores with the query quantized as the tiles do: q8_query). Before that,
 * kv_store's conversions read back (kv_k_get / kv_v_get) within each type's
 * rounding: every other check reads the cache through those two. */
#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/engine_int.h"
#include "test.h"

typedef struct att_case {
    int32_t n_tok, pos0, n_rep, hd;
    uint32_t kv_type;
} att_case;

/* A case with a window (0: none) and sinks or not. */
typedef struct win_case {
    att_case c;
    int32_t window;
    bool sinks;
} win_case;

/* The query a q8_0 cache scores with (engine_int.h att_q8): per group of
 * qgroup dimensions d = max|x| / 127, x as d x round(x / d). */
static void q8_query(const float *x, int32_t hd, int32_t group, double *out)
{
    for (int32_t g = 0; g < hd; g += group) {
        float amax = 0;
        for (int32_t i = g; i < g + group; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int32_t i = g; i < g + group; i++)
            out[i] = (double)d * nearbyintf(x[i] * id);
    }
}

/* out[k][h][hd] by the book: scores for positions lo..pos (lo = 0, or the
 * window's first), max (the sink's logit included), exp, sum. */
static void naive(const att_tile *a, const float *q_all, float *out)
{
    const kv_pool *kv = a->kv;
    const int32_t hd = a->hd;
    double q[CV_MAX_HEAD_DIM];
    for (int32_t k = 0; k < a->n_tok; k++) {
        const int32_t n = a->pos0 + k + 1, lo = a->window > 0 ? CV_MAX(0, n - a->window) : 0;
        double *s = malloc((size_t)n * sizeof *s);
        for (int32_t h = 0; h < a->n_rep; h++) {
            const float *x = q_all + ((size_t)k * a->n_rep + h) * hd;
            if (kv->type == CV_GGML_Q8_0)
                q8_query(x, hd, kv->qgroup, q);
            else
                for (int32_t i = 0; i < hd; i++)
                    q[i] = x[i];
            const double sink = a->sinks ? a->sinks[a->g * a->n_rep + h] : -INFINITY;
            double mx = sink, z = a->sinks ? 1 : 0; /* exp(sink - mx) once mx is known: fixed below */
            for (int32_t p = lo; p < n; p++) {
                const char *K = kv_k(kv, a->blocks[p / CV_KV_BLOCK], a->layer, a->g);
                double d = 0;
                for (int32_t i = 0; i < hd; i++)
                    d += q[i] * kv_k_get(kv, K, p % CV_KV_BLOCK, i);
                s[p] = d * a->scale;
                mx = fmax(mx, s[p]);
            }
            z = a->sinks ? exp(sink - mx) : 0;
            for (int32_t p = lo; p < n; p++)
                z += exp(s[p] - mx);
            for (int32_t i = 0; i < hd; i++) {
                double o = 0;
                for (int32_t p = lo; p < n; p++) {
                    const char *V = kv_v(kv, a->blocks[p / CV_KV_BLOCK], a->layer, a->g);
                    o += exp(s[p] - mx) / z * kv_v_get(kv, V, p % CV_KV_BLOCK, i);
                }
                out[((size_t)k * a->n_rep + h) * hd + i] = (float)o;
            }
        }
        free(s);
    }
}

/* The tiles this CPU runs for head size hd: the scalar reference, AVX2
 * (hd a multiple of 8), AVX-512F (of 16). */
static int tiles_for(int32_t hd, att_tile_fn *fns)
{
    static const char *const names[] = { "scalar", "avx2", "avx512" };
    int n = 0;
    for (size_t i = 0; i < CV_ARRAY_LEN(names); i++)
        if ((fns[n] = cv_att_tile_named(names[i], hd)))
            n++;
    return n;
}

/* Every tile this CPU runs for the case against one plain softmax. */
static void run_case(const att_case *c, int32_t window, bool with_sinks)
{
    const int32_t n_kv = 2, g = 1, layer = 1, last = c->pos0 + c->n_tok - 1;
    const int32_t n_blocks = last / CV_KV_BLOCK + 1;
    kv_pool kv;
    cv_err err = { 0 };
    if (kv_pool_init(&kv, n_blocks + 3, 2, 2, n_kv, c->hd, c->kv_type, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    /* Blocks out of order in the pool, as a real table may be; none before
     * the window of the tile's first token. */
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t i = 0; i < n_blocks + 3; i++)
        kv_pool_alloc(&kv);
    const int32_t first = cv_att_first_block(c->pos0, window);
    for (int32_t i = 0; i < n_blocks; i++)
        blocks[i] = i < first ? 1 << 28 : n_blocks + 2 - i; /* far past the pool's mapping */
    cv_rng r;
    cv_rng_seed(&r, (uint64_t)(c->n_tok * 1000 + c->pos0 * 10 + c->n_rep + c->hd));
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    float kvec[CV_MAX_HEAD_DIM], vvec[CV_MAX_HEAD_DIM];
    for (int32_t b = 0; b < n_blocks + 3; b++)
        for (int32_t l = 0; l < 2; l++)
            for (int32_t h = 0; h < n_kv; h++)
                for (int32_t j = 0; j < CV_KV_BLOCK; j++) {
                    for (int32_t i = 0; i < c->hd; i++)
                        kvec[i] = cv_rng_normal(&r) * 2, vvec[i] = cv_rng_normal(&r);
                    kv_store(&kv, vec, kv_k(&kv, b, l, h), kv_v(&kv, b, l, h), j, kvec, vvec);
                }
    /* Batch rows interleaved with other tokens: row k of the tile is 2k+1. */
    const int32_t n_q = n_kv * c->n_rep * c->hd, ld_qkv = n_q + 7, ld_out = n_q + 3;
    float *qkv = calloc((size_t)(2 * c->n_tok + 1) * ld_qkv, sizeof(float));
    float *out = calloc((size_t)(2 * c->n_tok + 1) * ld_out, sizeof(float));
    float *q_tile = malloc((size_t)c->n_tok * c->n_rep * c->hd * sizeof(float));
    int32_t rows[16];
    for (int32_t k = 0; k < c->n_tok; k++) {
        rows[k] = 2 * k + 1;
        for (int32_t h = 0; h < c->n_rep; h++)
            for (int32_t i = 0; i < c->hd; i++) {
                float v = cv_rng_normal(&r);
                qkv[(size_t)rows[k] * ld_qkv + (size_t)(g * c->n_rep + h) * c->hd + i] = v;
                q_tile[((size_t)k * c->n_rep + h) * c->hd + i] = v;
            }
    }
    /* Sink logits around the scores' size, one per query head of both kv
     * heads: some above a row's best score, some far below. */
    float sinks[2 * 8];
    for (int32_t i = 0; i < n_kv * c->n_rep; i++)
        sinks[i] = cv_rng_normal(&r) * 2.5f + 1.0f;
    att_tile a = { .kv = &kv, .blocks = blocks, .layer = layer, .g = g, .n_tok = c->n_tok, .pos0 = c->pos0,
                   .rows = rows, .qkv = qkv, .ld_qkv = ld_qkv, .out = out, .ld_out = ld_out, .n_rep = c->n_rep,
                   .hd = c->hd, .hd_v = c->hd, .scale = 1.0f / sqrtf((float)c->hd), .window = window,
                   .sinks = with_sinks ? sinks : NULL };
    float *scratch = malloc(cv_att_scratch_floats(c->n_tok * c->n_rep, c->hd) * sizeof(float));
    float *ref = malloc((size_t)c->n_tok * c->n_rep * c->hd * sizeof(float));
    naive(&a, q_tile, ref);
    att_tile_fn fns[3];
    const int n_fns = tiles_for(c->hd, fns);
    for (int f = 0; f < n_fns; f++) {
        memset(out, 0, (size_t)(2 * c->n_tok + 1) * ld_out * sizeof(float));
        cv_att_tile_run(fns[f], &a, scratch);
        double worst = 0;
        for (int32_t k = 0; k < c->n_tok; k++)
            for (int32_t h = 0; h < c->n_rep; h++)
                for (int32_t i = 0; i < c->hd; i++) {
                    double want = ref[((size_t)k * c->n_rep + h) * c->hd + i];
                    double got = out[(size_t)rows[k] * ld_out + (size_t)(g * c->n_rep + h) * c->hd + i];
                    worst = fmax(worst, fabs(got - want) / (1 + fabs(want)));
                }
        /* Columns of other kv heads and other rows stay untouched. */
        bool clean = true;
        for (int32_t t = 0; t < 2 * c->n_tok + 1; t += 2)
            for (int32_t i = 0; i < ld_out; i++)
                clean = clean && out[(size_t)t * ld_out + i] == 0;
        CHECK_MSG(worst <= 2e-5 && clean,
                  "%s tile n_tok %d pos0 %d n_rep %d hd %d %s window %d%s: worst relative error %g%s",
                  cv_att_tile_name(fns[f]), c->n_tok, c->pos0, c->n_rep, c->hd, cv_engine_kv_type_name(c->kv_type),
                  window, with_sinks ? " sinks" : "", worst, clean ? "" : ", wrote outside its rows");
    }
    free(scratch);
    free(ref);
    free(q_tile);
    free(qkv);
    free(out);
    free(blocks);
    kv_pool_fini(&kv);
}

static const att_case cases[] = {
    { 1, 0, 1, 8, CV_GGML_F32 },    { 1, 15, 2, 64, CV_GGML_F32 },  { 1, 16, 7, 64, CV_GGML_F16 },
    { 1, 200, 4, 128, CV_GGML_F32 }, { 5, 0, 2, 32, CV_GGML_F32 },   { 7, 13, 3, 64, CV_GGML_F16 },
    { 16, 0, 1, 64, CV_GGML_F32 },  { 16, 33, 2, 72, CV_GGML_F32 }, { 3, 47, 5, 40, CV_GGML_F16 },
    { 8, 100, 4, 64, CV_GGML_F32 }, { 2, 31, 1, 16, CV_GGML_F16 },  { 9, 7, 2, 128, CV_GGML_F16 },
    /* the shapes of qwen2.5-0.5b's and llama3.2-1b's prefill tiles deep into a context */
    { 4, 1001, 7, 64, CV_GGML_F16 }, { 8, 517, 4, 64, CV_GGML_F32 },
    /* q8_0: one factor per 32 dimensions (64, 128) or per head (8, 40, 72) */
    { 1, 0, 1, 8, CV_GGML_Q8_0 },   { 1, 16, 7, 64, CV_GGML_Q8_0 }, { 7, 13, 3, 64, CV_GGML_Q8_0 },
    { 3, 47, 5, 40, CV_GGML_Q8_0 }, { 16, 33, 2, 72, CV_GGML_Q8_0 }, { 9, 7, 2, 128, CV_GGML_Q8_0 },
    { 4, 1001, 7, 64, CV_GGML_Q8_0 }, { 1, 200, 4, 128, CV_GGML_Q8_0 },
    /* deeper: past 1024 and 2048 positions, a tile across 1024 */
    { 1, 2100, 7, 64, CV_GGML_F16 }, { 5, 1021, 2, 64, CV_GGML_F32 }, { 3, 2047, 4, 128, CV_GGML_Q8_0 },
};

/* Sliding windows: the reference2 models' 32 (inside the window, at its
 * edge, past it, prefill tiles whose last tokens' windows start past their
 * first blocks), gpt-oss's 128, gemma3's 1024 across chunks of 1024
 * positions, a window of one position; sinks with and without a window. */
static const win_case win_cases[] = {
    { { 1, 17, 4, 64, CV_GGML_F32 }, 32, true },    { { 1, 31, 4, 64, CV_GGML_F32 }, 32, false },
    { { 1, 32, 4, 64, CV_GGML_F32 }, 32, true },    { { 1, 199, 4, 64, CV_GGML_F16 }, 32, true },
    { { 16, 40, 4, 64, CV_GGML_F32 }, 32, true },   { { 16, 184, 2, 64, CV_GGML_Q8_0 }, 32, false },
    { { 9, 7, 2, 64, CV_GGML_F32 }, 32, true },     { { 5, 300, 8, 64, CV_GGML_F16 }, 128, true },
    { { 1, 2100, 7, 64, CV_GGML_F32 }, 1024, false }, { { 3, 1100, 2, 128, CV_GGML_Q8_0 }, 1024, true },
    { { 4, 50, 3, 40, CV_GGML_F32 }, 1, true },     { { 1, 0, 1, 8, CV_GGML_F32 }, 0, true },
    { { 7, 13, 3, 64, CV_GGML_F16 }, 0, true },
};

/* kv_store then kv_k_get / kv_v_get: f32 exact, f16 within half an f16 ulp,
 * q8_0 within half a step of each position's own group (a group with an
 * outlier loses precision, its neighbours do not) plus the factor's f16
 * rounding. Positions the store did not touch keep their bytes. */
static void check_round_trip(int32_t hd, uint32_t type)
{
    kv_pool kv;
    cv_err err = { 0 };
    if (kv_pool_init(&kv, 2, 1, 2, 2, hd, type, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    const int32_t b = kv_pool_alloc(&kv), grp = type == CV_GGML_Q8_0 ? kv.qgroup : 1;
    memset(kv_k(&kv, b, 0, 0), 0x5a, kv.block_bytes);
    cv_rng r;
    cv_rng_seed(&r, (uint64_t)hd * 31 + type);
    float k[CV_MAX_HEAD_DIM], v[CV_MAX_HEAD_DIM];
    double worst = 0;
    for (int32_t j = 0; j < CV_KV_BLOCK; j += 3) { /* positions 0, 3, ..., 15 */
        for (int32_t i = 0; i < hd; i++)
            k[i] = cv_rng_normal(&r) * (i == 5 ? 40.0f : 1.0f), v[i] = cv_rng_normal(&r) * 0.01f;
        kv_store(&kv, vec, kv_k(&kv, b, 0, 1), kv_v(&kv, b, 0, 1), j, k, v);
        for (int32_t i = 0; i < hd; i++) {
            float amk = 0, amv = 0;
            for (int32_t t = i / grp * grp; t < (i / grp + 1) * grp; t++)
                amk = fmaxf(amk, fabsf(k[t])), amv = fmaxf(amv, fabsf(v[t]));
            const double tk = type == CV_GGML_F32   ? 0
                              : type == CV_GGML_F16 ? fabsf(k[i]) / 2048 + 3e-8
                                                    : amk / 127 * 0.502;
            const double tv = type == CV_GGML_F32   ? 0
                              : type == CV_GGML_F16 ? fabsf(v[i]) / 2048 + 3e-8
                                                    : amv / 127 * 0.502;
            const double ek = fabs(kv_k_get(&kv, kv_k(&kv, b, 0, 1), j, i) - k[i]);
            const double ev = fabs(kv_v_get(&kv, kv_v(&kv, b, 0, 1), j, i) - v[i]);
            CHECK_MSG(ek <= tk && ev <= tv, "%s hd %d position %d dim %d: key off by %g (bound %g), value by %g (%g)",
                      cv_engine_kv_type_name(type), hd, j, i, ek, tk, ev, tv);
            worst = fmax(worst, fmax(ek / (tk + 1e-30), ev / (tv + 1e-30)));
        }
    }
    if (type == CV_GGML_Q8_0) { /* a NaN (an overflowed model) stores 0; its group's others keep their values */
        for (int32_t i = 0; i < hd; i++)
            k[i] = (float)(i % 7) - 3.0f, v[i] = 1.0f;
        k[0] = NAN;
        kv_store(&kv, vec, kv_k(&kv, b, 0, 1), kv_v(&kv, b, 0, 1), 1, k, v);
        CHECK(kv_k_get(&kv, kv_k(&kv, b, 0, 1), 1, 0) == 0.0f);
        CHECK(fabs(kv_k_get(&kv, kv_k(&kv, b, 0, 1), 1, 1) - k[1]) <= 3.0 / 127 * 0.502);
    }
    /* head 0 and layer 0's other half were never stored to */
    const unsigned char *h0 = kv_k(&kv, b, 0, 0);
    bool kept = true;
    for (size_t i = 0; i < kv.head_bytes; i++)
        kept = kept && h0[i] == 0x5a;
    CHECK_MSG(kept, "%s hd %d: a store into head 1 wrote into head 0", cv_engine_kv_type_name(type), hd);
    kv_pool_fini(&kv);
}

TEST(stored_keys_and_values_read_back_within_their_types_rounding)
{
    const int32_t hds[] = { 8, 40, 64, 128 };
    const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    for (size_t i = 0; i < CV_ARRAY_LEN(hds); i++)
        for (size_t t = 0; t < CV_ARRAY_LEN(types); t++)
            check_round_trip(hds[i], types[t]);
}

/* The AVX-512 tile's own shapes beside those above: the decode shapes it
 * is there for (past a chunk of 1,024 positions), head sizes of 48 and 80
 * (a multiple of 16, not of 32: q8_0 has one factor for the head). */
static const att_case wide_cases[] = {
    { 1, 1100, 4, 256, CV_GGML_F16 }, { 1, 1099, 8, 64, CV_GGML_Q8_0 }, { 2, 300, 8, 64, CV_GGML_F32 },
    { 16, 70, 1, 256, CV_GGML_F16 },  { 3, 20, 6, 48, CV_GGML_Q8_0 },   { 5, 40, 3, 80, CV_GGML_F16 },
};

/* Each case through every tile this CPU runs (tiles_for): the scalar one
 * everywhere, AVX2 and AVX-512F where the CPU has them; a CPU without
 * one says so in a line. */
TEST(every_tile_matches_a_plain_softmax)
{
    if (!cv_isa_supported(CV_ISA_AVX2))
        printf("  avx2 tile: not on this CPU: %s (the scalar tile ran)\n", cv_isa_missing(CV_ISA_AVX2));
    if (!cv_isa_supported(CV_ISA_AVX512))
        printf("  avx512 tile: not on this CPU: %s (the avx2 and scalar tiles ran)\n", cv_isa_missing(CV_ISA_AVX512));
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++)
        run_case(&cases[i], 0, false);
    for (size_t i = 0; i < CV_ARRAY_LEN(wide_cases); i++)
        run_case(&wide_cases[i], 0, false);
    for (size_t i = 0; i < CV_ARRAY_LEN(win_cases); i++)
        run_case(&win_cases[i].c, win_cases[i].window, win_cases[i].sinks);
}

/* The attention benchmark (bench-kernels --case attention) runs the tile
 * the engine would pick, reads each (layer, head)'s K/V of every block,
 * and refuses a tile this head size or CPU cannot take. */
TEST(attention_bench_runs_the_engines_tile_over_every_pair)
{
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(2, &err);
    CHECK_MSG(pool != NULL, "%s", err.msg);
    if (!pool)
        return;
    const cv_att_bench b = { .n_layer = 3, .n_head_kv = 2, .n_rep = 4, .head_dim = 64, .depth = 100,
                             .kv_type = CV_GGML_F16, .repeats = 3 };
    cv_att_bench_result r;
    CHECK_EQ_INT(cv_engine_bench_attention(&b, pool, &r, &err), 0);
    CHECK(r.best_s > 0 && r.median_s >= r.best_s);
    CHECK_EQ_STR(r.tile, cv_att_tile_name(cv_att_tile_for(64)));
    CHECK(r.bytes == 7.0 * 3 * 2 * 2 * (double)kv_block_bytes(1, 2, 1, 64, CV_GGML_F16) / 2);
    cv_att_bench odd = b;
    odd.head_dim = 40, odd.tile = "avx512";
    CHECK_EQ_INT(cv_engine_bench_attention(&odd, pool, &r, &err), CV_EUNSUPPORTED);
    cv_pool_destroy(pool);
}

/* corvid doctor's reasons: a level the CPU lacks gives the CPU's reason,
 * a head size a level cannot take says so, and the level cv_att_tile_for
 * picks is the highest one without a reason. */
TEST(each_level_says_why_it_runs_no_tile_for_a_head_size)
{
    static const int32_t sizes[] = { 128, 72, 36 };
    for (size_t i = 0; i < CV_ARRAY_LEN(sizes); i++) {
        const int32_t hd = sizes[i];
        cv_isa best = CV_ISA_SCALAR;
        for (int l = CV_ISA_SCALAR; l < CV_ISA_COUNT; l++) {
            const char *why = cv_att_tile_why_not(l, hd);
            if (!cv_isa_supported(l))
                CHECK_EQ_STR(why, cv_isa_missing(l));
            else if (l == CV_ISA_AVX_VNNI)
                CHECK(why != NULL);
            else
                CHECK_MSG((why == NULL) == (hd % (l == CV_ISA_AVX512 ? 16 : l == CV_ISA_AVX2 ? 8 : 1) == 0),
                          "%s hd %d: %s", cv_isa_name(l), hd, why ? why : "runs");
            if (!why && l <= (int)cv_isa_active())
                best = (cv_isa)l;
        }
        CHECK_EQ_STR(cv_att_tile_name(cv_att_tile_for(hd)), cv_isa_name(best));
    }
}

static int cmp_size(const void *x, const void *y)
{
    const size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return a < b ? -1 : a > b;
}

/* The pool is committed on first touch, in 2 MiB huge pages where the
 * kernel grants them (attention.h, the layout): a fresh sequence's blocks,
 * the pool's first in order, must lie in the huge pages their own runs
 * take, not in one per region (24 regions here; a 24-layer, 2-KV-head
 * model's first forward call zeroed 96, 192 MiB, for a 428-token prompt:
 * docs/PERF.md "Several models in one server"). Every piece of every block
 * is its own and inside the mapping. What storing into those blocks
 * commits (mincore) is their runs' bytes rounded up to huge pages, where
 * huge pages are granted or not. */
TEST(a_fresh_sequence_commits_the_huge_pages_of_its_own_runs)
{
    const int32_t n_blocks = 1000, n_layer = 6, n_kv = 2, hd = 64, used = 27; /* 428 positions */
    kv_pool kv;
    cv_err err = { 0 };
    if (kv_pool_init(&kv, n_blocks, n_layer, 2, n_kv, hd, CV_GGML_F16, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const size_t n_reg = kv_regions(&kv), bytes = kv_pool_bytes(&kv), huge = (size_t)2 << 20;
    CHECK_EQ_INT((int)n_reg, n_layer * 2 * n_kv);
    size_t *off = malloc(n_reg * (size_t)n_blocks * sizeof *off), n = 0;
    for (int32_t b = 0; b < n_blocks; b++)
        for (size_t r = 0; r < n_reg; r++)
            off[n++] = (size_t)(kv_piece(&kv, r, b) - kv.data);
    qsort(off, n, sizeof *off, cmp_size);
    bool apart = off[n - 1] + kv.head_bytes <= bytes;
    for (size_t i = 1; i < n; i++)
        apart = apart && off[i] - off[i - 1] >= kv.head_bytes;
    CHECK_MSG(apart, "pieces overlap or leave the %zu-byte mapping", bytes);
    free(off);

    const size_t runs_bytes = (size_t)(used + CV_KV_RUN_BLOCKS - 1) / CV_KV_RUN_BLOCKS * CV_KV_RUN_BLOCKS * kv.block_bytes;
    const size_t bound = (runs_bytes + huge - 1) / huge + 1; /* + 1: the runs need not start on a huge page */
    uintptr_t pages[64];
    size_t n_pages = 0;
    for (int32_t i = 0; i < used; i++) {
        const int32_t b = kv_pool_alloc(&kv);
        CHECK_EQ_INT(b, i);
        for (size_t r = 0; r < n_reg; r++) {
            const uintptr_t pg = (uintptr_t)kv_piece(&kv, r, b) / huge;
            size_t k = 0;
            while (k < n_pages && pages[k] != pg)
                k++;
            if (k == n_pages && n_pages < CV_ARRAY_LEN(pages))
                pages[n_pages++] = pg;
            memset(kv_piece(&kv, r, b), 0x3c, kv.head_bytes);
        }
    }
    CHECK_MSG(n_pages <= bound, "%d blocks of %zu bytes lie in %zu huge pages; their runs take %zu", used,
              kv.block_bytes, n_pages, bound);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n_vec = (bytes + page - 1) / page;
    unsigned char *vec = malloc(n_vec);
    CHECK(mincore(kv.data, bytes, vec) == 0);
    size_t resident = 0;
    for (size_t i = 0; i < n_vec; i++)
        resident += (vec[i] & 1) * page;
    CHECK_MSG(resident <= bound * huge, "%d blocks of %zu bytes committed %zu bytes; their runs' huge pages are %zu",
              used, kv.block_bytes, resident, bound * huge);
    free(vec);
    kv_pool_fini(&kv);
}

/* The engine commits each pool's first run when it is made (the blocks a
 * first sequence takes, whatever its length, where huge pages are
 * granted): every page of that run is resident after it, and no more than
 * the run's huge pages. */
TEST(a_pool_commits_its_first_run_and_no_more)
{
    kv_pool kv;
    cv_err err = { 0 };
    if (kv_pool_init(&kv, 1000, 6, 2, 2, 64, CV_GGML_F16, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const size_t run = kv.block_bytes * CV_KV_RUN_BLOCKS, bytes = kv_pool_bytes(&kv), huge = (size_t)2 << 20;
    const size_t got = kv_pool_commit_first_run(&kv);
    CHECK_MSG(got == run, "committed %zu bytes, the first run is %zu (MADV_POPULATE_WRITE needs Linux 5.14)", got, run);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n_vec = (bytes + page - 1) / page;
    unsigned char *vec = malloc(n_vec);
    CHECK(mincore(kv.data, bytes, vec) == 0);
    size_t in_run = 0, resident = 0;
    for (size_t i = 0; i < n_vec; i++) {
        resident += (vec[i] & 1) * page;
        in_run += i * page < run ? (vec[i] & 1) * page : 0;
    }
    CHECK_MSG(in_run >= run, "%zu of the first run's %zu bytes are resident", in_run, run);
    CHECK_MSG(resident <= ((run + huge - 1) / huge + 1) * huge, "committing the first run of %zu bytes made %zu resident",
              run, resident);
    free(vec);
    kv_pool_fini(&kv);
}

int main(void)
{
    RUN(stored_keys_and_values_read_back_within_their_types_rounding);
    RUN(each_level_says_why_it_runs_no_tile_for_a_head_size);
    RUN(every_tile_matches_a_plain_softmax);
    RUN(attention_bench_runs_the_engines_tile_over_every_pair);
    RUN(a_fresh_sequence_commits_the_huge_pages_of_its_own_runs);
    RUN(a_pool_commits_its_first_run_and_no_more);
    return test_report();
}
