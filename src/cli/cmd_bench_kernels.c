/* cmd_bench_kernels.c — `corvid bench-kernels`: the kernel micro-benchmark
 * behind docs/PERF.md. It measures the machine's ceilings (read bandwidth,
 * int8 multiply-add peak) with the kernels' probes, then runs the matmuls
 * of real model shapes on random weights in the dtype mixes of real files
 * and prints each case as a fraction of its ceiling:
 *   decode   1 token through every matrix of the model (output layer
 *            included): bytes of weights / time vs read bandwidth;
 *   batch8   8 tokens through every matrix: multiply-adds / time vs the
 *            int8 peak;
 *   prefill  512 tokens through the matrices of two layers (the first and
 *            the middle one): multiply-adds / time vs the int8 peak.
 *   tiles    (extra) each quantized type's matmul on a small matrix kept in
 *            cache, fastest of 50 runs: compute efficiency without DRAM.
 *   experts  the expert-routed matmuls of one qwen3-30b-a3b MoE layer (128
 *            experts, 8 per token; gate and up fused): decode (1 token),
 *            batch 8 and a 512-token prefill, freshly routed every step;
 *            bytes of the experts read / time vs read bandwidth, and
 *            multiply-adds / time vs the int8 peak, beside the same work
 *            done as one cv_matmul per used expert.
 *   attention  decode attention alone at the depths the engine issues
 *            name (qwen3.5-4b's 8 attending layers at 12,288 positions,
 *            gpt-oss-20b's 12 full layers at 32,768, qwen3-30b-a3b's 48
 *            at 8,192): one token's query heads over f16 and q8_0 K/V,
 *            through every tile this CPU runs; K/V bytes / time vs read
 *            bandwidth (cv_engine_bench_attention).
 *   mla      multi-head latent attention alone, one layer of the latent
 *            shapes (glm-4.7-flash, deepseek-v2-lite, kimi-k2) over f16
 *            latent rows, both forms: a decode step at 16,384 positions
 *            (absorbed) and prefill chunks of 64..512 tokens from position
 *            0 and at 4,096, multiply-adds / time, with Q4_K
 *            up-projections (cv_engine_bench_mla).
 *   deltanet the Gated DeltaNet kernels of the qwen3.5-4b shape on the
 *            calling thread, at each level this CPU runs: a decode step
 *            (one token through every layer's and head's 128 x 128 state,
 *            48 MiB read and written: state bytes / time) and one head's
 *            64-token chunk in cache (its floating-point operations /
 *            time).
 * Weights are distinct memory for every matrix (so decode really streams
 * the whole model from DRAM), filled by quantizing a few random rows with
 * the reference quantizers and repeating them. Each figure is the median of
 * repeats; the machine is shared, so run it twice and compare. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "engine/engine_bench.h"
#include "kernels/deltanet.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/synth.h"

/* The dense shapes measured (cv_model_shapes rows) and the matrices of one
 * layer, each with the role that picks its type from the mix
 * (cv_quant_mix_type, the rule `corvid synth` writes files by). */
static const char *const shape_names[] = { "qwen2.5-0.5b", "llama3.2-1b" };

static uint32_t mix_type(const char *mix, cv_role role, int64_t layer, int64_t n_layer, int64_t n_in)
{
    return cv_quant_mix_type(cv_quant_mix_find(mix), role, (int)layer, (int)n_layer, n_in, false);
}

typedef struct mat {
    cv_role role;
    int64_t layer;
    cv_wmat *w;
    void *src; /* kept only when the wmat reads it in place */
    uint64_t macs_per_token;
} mat;

typedef struct model {
    mat *m;
    int n;
    size_t bytes;
    uint64_t macs_per_token;
} model;

static int make_mat(mat *out, uint32_t type, int64_t n_in, int64_t n_out, cv_rng *rng, cv_err *err)
{
    const cv_dtype *dt = cv_dtype_get(type);
    const size_t row = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    uint8_t *src = malloc(row * (size_t)n_out);
    if (!src)
        return cv_err_set(err, CV_ENOMEM, "bench-kernels: out of memory for a %lld x %lld %s matrix",
                          (long long)n_out, (long long)n_in, dt->name);
    enum { SAMPLES = 8 };
    float *x = malloc((size_t)n_in * sizeof *x);
    for (int s = 0; s < SAMPLES && s < n_out; s++) {
        for (int64_t i = 0; i < n_in; i++)
            x[i] = cv_rng_normal(rng) * 0.02f;
        cv_quantize_row(type, x, src + s * row, n_in, NULL);
    }
    for (int64_t r = SAMPLES; r < n_out; r++)
        memcpy(src + r * row, src + (r % SAMPLES) * row, row);
    free(x);
    int rc = cv_wmat_create(type, n_in, n_out, src, row * (size_t)n_out, &out->w, err);
    if (rc) {
        free(src);
        return rc;
    }
    if (cv_wmat_owns_data(out->w)) {
        free(src);
        src = NULL;
    }
    out->src = src;
    out->macs_per_token = (uint64_t)n_in * (uint64_t)n_out;
    return 0;
}

static void model_free(model *m)
{
    for (int i = 0; i < m->n; i++) {
        cv_wmat_destroy(m->m[i].w);
        free(m->m[i].src);
    }
    free(m->m);
    memset(m, 0, sizeof *m);
}

/* The matrices of the given layers (all when layers is NULL), plus the
 * output layer if asked. */
static int model_build(model *m, const cv_model_shape *s, const char *mix, const int64_t *layers, int64_t n_layers,
                       bool with_output, cv_err *err)
{
    memset(m, 0, sizeof *m);
    if (!layers)
        n_layers = s->n_layer;
    m->m = calloc((size_t)(n_layers * 7 + 1), sizeof *m->m);
    cv_rng rng;
    cv_rng_seed(&rng, 1234);
    const int64_t q = (int64_t)s->n_head * s->head_dim, kv = (int64_t)s->n_head_kv * s->head_dim;
    for (int64_t li = 0; li < n_layers; li++) {
        const int64_t l = layers ? layers[li] : li;
        const struct { cv_role role; int64_t n_in, n_out; } mats[] = {
            { CV_ROLE_ATTN_Q, s->n_embd, q },       { CV_ROLE_ATTN_K, s->n_embd, kv },
            { CV_ROLE_ATTN_V, s->n_embd, kv },      { CV_ROLE_ATTN_OUT, q, s->n_embd },
            { CV_ROLE_FFN_GATE, s->n_embd, s->n_ff }, { CV_ROLE_FFN_UP, s->n_embd, s->n_ff },
            { CV_ROLE_FFN_DOWN, s->n_ff, s->n_embd },
        };
        for (size_t i = 0; i < CV_ARRAY_LEN(mats); i++) {
            mat *x = &m->m[m->n];
            x->role = mats[i].role;
            x->layer = l;
            int rc = make_mat(x, mix_type(mix, mats[i].role, l, s->n_layer, mats[i].n_in), mats[i].n_in, mats[i].n_out,
                              &rng, err);
            if (rc)
                return model_free(m), rc;
            m->n++;
        }
    }
    if (with_output) {
        mat *x = &m->m[m->n];
        x->role = CV_ROLE_OUTPUT;
        int rc = make_mat(x, mix_type(mix, CV_ROLE_OUTPUT, 0, s->n_layer, s->n_embd), s->n_embd, s->n_vocab, &rng,
                          err);
        if (rc)
            return model_free(m), rc;
        m->n++;
    }
    for (int i = 0; i < m->n; i++) {
        m->bytes += cv_wmat_bytes(m->m[i].w);
        m->macs_per_token += m->m[i].macs_per_token;
    }
    return 0;
}

/* The clock passes are timed with: wall time, or (--clock cpu, one thread)
 * the CPU time of the calling thread, which excludes the time slices a
 * shared machine gives to other processes. */
static bool use_cpu_clock;

static double clock_s(void)
{
    if (!use_cpu_clock)
        return cv_now_s();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median (and in *best the fastest) seconds of `repeats` passes of n_tok
 * tokens through every matrix, after one warm-up pass. */
static double time_pass(cv_pool *pool, const model *m, int64_t n_tok, int repeats, const cv_model_shape *s, double *best)
{
    int64_t max_in = CV_MAX(s->n_ff, s->n_head * s->head_dim), max_out = CV_MAX(s->n_vocab, s->n_ff);
    float *x = cv_aligned_alloc((size_t)(n_tok * max_in) * sizeof *x);
    float *y = cv_aligned_alloc((size_t)(n_tok * max_out) * sizeof *y);
    cv_rng rng;
    cv_rng_seed(&rng, 7);
    for (int64_t i = 0; i < n_tok * max_in; i++)
        x[i] = cv_rng_normal(&rng);
    double t[64];
    repeats = CV_MIN(repeats, 64);
    for (int r = -1; r < repeats; r++) {
        double t0 = clock_s();
        for (int i = 0; i < m->n; i++)
            cv_matmul(pool, m->m[i].w, n_tok, x, y);
        if (r >= 0)
            t[r] = clock_s() - t0;
    }
    cv_aligned_free(x);
    cv_aligned_free(y);
    qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
    *best = t[0];
    return t[repeats / 2];
}

/* Compute efficiency of each weight type's matmul with its weights in
 * cache: a 1024 x 2048 matrix (about 1 MiB in 4-bit types) run again and
 * again, fastest of many short runs, at 8 and 128 tokens. Separates what
 * the tile computes from what streaming weights out of DRAM costs. */
static void bench_tiles(cv_pool *pool, double peak)
{
    const int64_t n_in = 2048, n_out = 1024, toks[2] = { 8, 128 };
    printf("\nin-cache tiles (%lld x %lld, fastest run of 50): GMAC/s and fraction of the int8 peak\n",
           (long long)n_out, (long long)n_in);
    cv_rng rng;
    cv_rng_seed(&rng, 99);
    float *x = cv_aligned_alloc((size_t)(128 * n_in) * sizeof *x), *y = cv_aligned_alloc((size_t)(128 * n_out) * sizeof *y);
    for (int64_t i = 0; i < 128 * n_in; i++)
        x[i] = cv_rng_normal(&rng);
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt || !dt->is_weight || !dt->is_quantized)
            continue;
        mat m = { 0 };
        cv_err err = { 0 };
        if (make_mat(&m, t, n_in, n_out, &rng, &err) != 0)
            continue;
        printf("  %-5s", dt->name);
        for (int k = 0; k < 2; k++) {
            double best = 1e30;
            for (int r = 0; r < 50; r++) {
                double t0 = clock_s();
                cv_matmul(pool, m.w, toks[k], x, y);
                best = CV_MIN(best, clock_s() - t0);
            }
            const double g = (double)n_in * n_out * toks[k] / best;
            printf("   %3lld tok %6.1f GMAC/s %5.1f%%", (long long)toks[k], g / 1e9, 100 * g / peak);
        }
        printf("   %s\n", cv_matmul_path(t, cv_isa_active()));
        cv_wmat_destroy(m.w);
        free(m.src);
    }
    cv_aligned_free(x);
    cv_aligned_free(y);
}

/* ---- expert-routed matmuls (mixture of experts) ---- */

/* One MoE FFN layer of the qwen3-30b-a3b shape (cv_model_shapes: hidden
 * 2048, 128 experts of FFN 768, 8 used per token). Gate and up are fused
 * into one 1536 x 2048 matrix per expert (the pair reads the same input
 * row), down is 2048 x 768. */
enum { MOE_N_EXPERT = 128 };
typedef struct moe_shape {
    const char *name;
    int64_t hidden, ffn, n_expert, k, n_layer;
} moe_shape;
static moe_shape moe;

static void moe_shape_load(void)
{
    const cv_model_shape *s = cv_model_shape_find("qwen3-30b-a3b");
    assert(s && s->n_expert == MOE_N_EXPERT);
    moe = (moe_shape){ s->name, s->n_embd, s->n_ff_exp, s->n_expert, s->n_expert_used, s->n_layer };
}

typedef struct moe_layer {
    mat gate_up[MOE_N_EXPERT], down[MOE_N_EXPERT];
    size_t gate_up_bytes, down_bytes; /* one expert's */
} moe_layer;

/* The routes of n_steps steps of n_tok tokens: k distinct experts each,
 * uniform (real routers are skewed, which only moves rows between
 * experts). */
static void moe_route(int32_t *expert, int32_t *src, int64_t n_steps, int64_t n_tok, cv_rng *rng)
{
    for (int64_t st = 0; st < n_steps; st++)
        for (int64_t t = 0; t < n_tok; t++) {
            int32_t *e = expert + (st * n_tok + t) * moe.k;
            for (int64_t j = 0; j < moe.k; j++) {
                bool again;
                do {
                    e[j] = (int32_t)cv_rng_below(rng, (uint64_t)moe.n_expert);
                    again = false;
                    for (int64_t i = 0; i < j; i++)
                        again |= e[i] == e[j];
                } while (again);
            }
        }
    for (int64_t r = 0; r < n_tok * moe.k; r++)
        src[r] = (int32_t)(r / moe.k);
}

/* One expert matmul done the plain way, for comparison: the rows of each
 * used expert gathered, one cv_matmul each, results scattered back. */
static void matmul_per_expert(cv_pool *pool, cv_wmat *const *w, const float *x, int64_t n_rows, const int32_t *expert,
                              const int32_t *src, float *y, float *xg, float *yg)
{
    const int64_t n_in = cv_wmat_n_in(w[0]), n_out = cv_wmat_n_out(w[0]);
    for (int32_t e = 0; e < moe.n_expert; e++) {
        int64_t n = 0;
        for (int64_t r = 0; r < n_rows; r++)
            if (expert[r] == e)
                memcpy(xg + n++ * n_in, x + (src ? src[r] : r) * n_in, (size_t)n_in * sizeof *x);
        if (!n)
            continue;
        cv_matmul(pool, w[e], n, xg, yg);
        n = 0;
        for (int64_t r = 0; r < n_rows; r++)
            if (expert[r] == e)
                memcpy(y + r * n_out, yg + n++ * n_out, (size_t)n_out * sizeof *y);
    }
}

/* The gate+up and the down matmuls of n_steps steps of n_tok tokens, as
 * cv_matmul_experts (variant 0) and as one cv_matmul per used expert
 * (variant 1), `repeats` passes of each after one warm-up pass, the two
 * variants' passes alternating (which goes first alternates too), so that
 * the machine's load drifts over both alike. Gives per variant and matrix
 * the median and best seconds of a pass, per matrix the median over
 * repeats of variant 1's time over variant 0's in the same repeat, and the
 * bytes of the experts a pass reads (each used expert's matrix once per
 * step). A pass reads hundreds of MB, so neither leaves the other its
 * weights in cache. */
typedef struct moe_times {
    double med[2][2], best[2][2], ratio[2], bytes[2];
} moe_times;

static void moe_time(cv_pool *pool, moe_layer *L, cv_mm_ws *ws, int64_t n_tok, int64_t n_steps, int repeats,
                     moe_times *out)
{
    const int64_t n_rows = n_tok * moe.k, fused = 2 * moe.ffn;
    int32_t *expert = malloc((size_t)(n_steps * n_rows) * sizeof *expert), *src = malloc((size_t)n_rows * sizeof *src);
    float *x = cv_aligned_alloc((size_t)(n_tok * moe.hidden) * sizeof *x);
    float *h = cv_aligned_alloc((size_t)(n_rows * moe.ffn) * sizeof *h);
    float *y = cv_aligned_alloc((size_t)(n_rows * CV_MAX(fused, moe.hidden)) * sizeof *y);
    float *xg = cv_aligned_alloc((size_t)(n_rows * moe.hidden) * sizeof *xg);
    float *yg = cv_aligned_alloc((size_t)(n_rows * CV_MAX(fused, moe.hidden)) * sizeof *yg);
    cv_rng rng;
    cv_rng_seed(&rng, 4321);
    for (int64_t i = 0; i < n_tok * moe.hidden; i++)
        x[i] = cv_rng_normal(&rng);
    for (int64_t i = 0; i < n_rows * moe.ffn; i++)
        h[i] = cv_rng_normal(&rng);
    moe_route(expert, src, n_steps, n_tok, &rng);
    out->bytes[0] = out->bytes[1] = 0;
    for (int64_t st = 0; st < n_steps; st++) {
        bool seen[MOE_N_EXPERT] = { false };
        for (int64_t r = 0; r < n_rows; r++)
            seen[expert[st * n_rows + r]] = true;
        for (int e = 0; e < moe.n_expert; e++)
            if (seen[e]) {
                out->bytes[0] += (double)L->gate_up_bytes;
                out->bytes[1] += (double)L->down_bytes;
            }
    }
    cv_wmat *gu[MOE_N_EXPERT], *dn[MOE_N_EXPERT];
    for (int e = 0; e < moe.n_expert; e++) {
        gu[e] = L->gate_up[e].w;
        dn[e] = L->down[e].w;
    }
    double t[2][2][64], ratio[2][64];
    repeats = CV_MIN(repeats, 64);
    for (int rep = -1; rep < repeats; rep++)
        for (int vi = 0; vi < 2; vi++) {
            const int v = (rep & 1) ^ vi;
            double sum[2] = { 0, 0 };
            for (int64_t st = 0; st < n_steps; st++) {
                const int32_t *ex = expert + st * n_rows;
                const double t0 = clock_s();
                if (v)
                    matmul_per_expert(pool, gu, x, n_rows, ex, src, y, xg, yg);
                else
                    cv_matmul_experts(pool, (const cv_wmat *const *)gu, (int32_t)moe.n_expert, n_tok, x, moe.hidden,
                                      n_rows, ex, src, y, fused, ws);
                const double t1 = clock_s();
                if (v)
                    matmul_per_expert(pool, dn, h, n_rows, ex, NULL, y, xg, yg);
                else
                    cv_matmul_experts(pool, (const cv_wmat *const *)dn, (int32_t)moe.n_expert, n_rows, h, moe.ffn,
                                      n_rows, ex, NULL, y, moe.hidden, ws);
                sum[0] += t1 - t0;
                sum[1] += clock_s() - t1;
            }
            if (rep >= 0)
                for (int k = 0; k < 2; k++)
                    t[v][k][rep] = sum[k];
        }
    for (int k = 0; k < 2; k++) {
        for (int rep = 0; rep < repeats; rep++)
            ratio[k][rep] = t[1][k][rep] / t[0][k][rep];
        qsort(ratio[k], (size_t)repeats, sizeof ratio[k][0], cmp_double);
        out->ratio[k] = ratio[k][repeats / 2];
        for (int v = 0; v < 2; v++) {
            qsort(t[v][k], (size_t)repeats, sizeof t[v][k][0], cmp_double);
            out->med[v][k] = t[v][k][repeats / 2];
            out->best[v][k] = t[v][k][0];
        }
    }
    free(expert);
    free(src);
    cv_aligned_free(x);
    cv_aligned_free(h);
    cv_aligned_free(y);
    cv_aligned_free(xg);
    cv_aligned_free(yg);
}

/* The three step shapes for one dtype mix: decode and batch 8 against the
 * read bandwidth (weights of the used experts / time), prefill against the
 * int8 peak; each also as one cv_matmul per used expert. */
static int bench_experts(cv_pool *pool, const char *mix, int repeats, const cv_probe_result *bw,
                         const cv_probe_result *peak, bool have_peak, cv_err *err)
{
    moe_layer *L = calloc(1, sizeof *L);
    cv_mm_ws *ws = NULL;
    int rc = 0, made = 0;
    if (!L)
        return cv_err_set(err, CV_ENOMEM, "bench-kernels: out of memory for the expert layer");
    cv_rng rng;
    cv_rng_seed(&rng, 5678);
    const int64_t mid = moe.n_layer / 2;
    const uint32_t t_gu = mix_type(mix, CV_ROLE_FFN_GATE_EXPS, mid, moe.n_layer, moe.hidden);
    const uint32_t t_dn = mix_type(mix, CV_ROLE_FFN_DOWN_EXPS, mid, moe.n_layer, moe.ffn);
    for (; made < moe.n_expert; made++) {
        if ((rc = make_mat(&L->gate_up[made], t_gu, moe.hidden, 2 * moe.ffn, &rng, err)))
            goto done;
        if ((rc = make_mat(&L->down[made], t_dn, moe.ffn, moe.hidden, &rng, err))) {
            cv_wmat_destroy(L->gate_up[made].w);
            free(L->gate_up[made].src);
            goto done;
        }
    }
    L->gate_up_bytes = cv_wmat_bytes(L->gate_up[0].w);
    L->down_bytes = cv_wmat_bytes(L->down[0].w);
    ws = cv_mm_ws_create(512 * moe.k, moe.hidden, CV_MAX(2 * moe.ffn, moe.hidden), (int32_t)moe.n_expert);
    const struct { const char *name; int64_t n_tok, n_steps; int repeats; } cases[] = {
        { "decode", 1, 32, repeats + 2 },
        { "batch8", 8, 8, repeats },
        { "prefill", 512, 1, CV_MAX(1, repeats / 2) },
    };
    const char *names[2] = { "gate+up", "down" };
    const cv_dtype *dts[2] = { cv_dtype_get(t_gu), cv_dtype_get(t_dn) };
    const int64_t macs[2] = { moe.hidden * 2 * moe.ffn, moe.ffn * moe.hidden };
    for (size_t c = 0; c < CV_ARRAY_LEN(cases); c++) {
        moe_times mt;
        moe_time(pool, L, ws, cases[c].n_tok, cases[c].n_steps, cases[c].repeats, &mt);
        for (int k = 0; k < 2; k++) {
            const double tm = mt.med[0][k], tb = mt.best[0][k], per_step = tm / (double)cases[c].n_steps * 1e3;
            const double gbs = mt.bytes[k] / tm / 1e9, gbs_b = mt.bytes[k] / tb / 1e9;
            const double macs_pass = (double)(cases[c].n_tok * moe.k * cases[c].n_steps * macs[k]);
            const double g = macs_pass / tm, gb = macs_pass / tb, speedup = mt.ratio[k];
            if (cases[c].n_tok < 512)
                printf("%-13s %-7s %-8s %-8s %-5s %9.3f %9.2f GB/s     %5.1f%% (%5.1f%%)  %4.2fx\n", moe.name, mix,
                       cases[c].name, names[k], dts[k]->name, per_step, gbs, 100 * gbs / bw->value,
                       100 * gbs_b / bw->best, speedup);
            else
                printf("%-13s %-7s %-8s %-8s %-5s %9.3f %7.1f GMAC/s     %5.1f%% (%5.1f%%)  %4.2fx\n", moe.name, mix,
                       cases[c].name, names[k], dts[k]->name, per_step, g / 1e9,
                       have_peak ? 100 * g / peak->value : 0.0, have_peak ? 100 * gb / peak->best : 0.0, speedup);
        }
        fflush(stdout);
    }
done:
    for (int e = 0; e < made; e++) {
        cv_wmat_destroy(L->gate_up[e].w);
        free(L->gate_up[e].src);
        cv_wmat_destroy(L->down[e].w);
        free(L->down[e].src);
    }
    cv_mm_ws_destroy(ws);
    free(L);
    return rc;
}

static bool in_list(const char *list, const char *item)
{
    if (!list || !strcmp(list, "all"))
        return true;
    size_t n = strlen(item);
    for (const char *p = list; (p = strstr(p, item)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return true;
    return false;
}

/* Decode attention at depth: the shapes' attending layers (a hybrid's
 * every full_attn_interval-th, gpt-oss's full half; its window layers
 * read 128 positions), each KV type, each tile this CPU runs. */
static int bench_attention(cv_pool *pool, const char *models, int repeats, const cv_probe_result *bw, cv_err *err)
{
    static const struct { const char *shape; int32_t n_layer, depth; } rows[] = {
        { "qwen3.5-4b", 8, 12288 }, { "gpt-oss-20b", 12, 32768 }, { "qwen3-30b-a3b", 48, 8192 },
    };
    static const uint32_t types[] = { CV_GGML_F16, CV_GGML_Q8_0 };
    static const char *const tiles[] = { "avx512", "avx2" };
    printf("\ndecode attention alone: one token over the K/V of the attending layers at depth (random K/V)\n");
    printf("%-13s %-7s %-9s %-7s %10s %9s %16s\n", "model", "kv", "case", "tile", "median ms", "MiB", "rate");
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        const cv_model_shape *s = cv_model_shape_find(rows[i].shape);
        if (!s || !in_list(models, s->name))
            continue;
        for (size_t t = 0; t < CV_ARRAY_LEN(types); t++)
            for (size_t k = 0; k < CV_ARRAY_LEN(tiles); k++) {
                const cv_att_bench b = { .n_layer = rows[i].n_layer, .n_head_kv = s->n_head_kv,
                                         .n_rep = s->n_head / s->n_head_kv, .head_dim = s->head_dim,
                                         .depth = rows[i].depth, .kv_type = types[t], .tile = tiles[k],
                                         .repeats = repeats };
                cv_att_bench_result r;
                const int rc = cv_engine_bench_attention(&b, pool, &r, err);
                if (rc == CV_EUNSUPPORTED)
                    continue;
                if (rc)
                    return rc;
                char name[16];
                snprintf(name, sizeof name, "attn@%dk", rows[i].depth / 1024);
                const double gbs = r.bytes / r.median_s / 1e9;
                printf("%-13s %-7s %-9s %-7s %10.2f %9.1f %9.2f GB/s     %5.1f%% (%5.1f%%)\n", s->name,
                       types[t] == CV_GGML_F16 ? "f16" : "q8_0", name, r.tile, r.median_s * 1e3, r.bytes / 1048576,
                       gbs, 100 * gbs / bw->value, 100 * r.bytes / r.best_s / 1e9 / bw->best);
                fflush(stdout);
            }
    }
    return 0;
}

/* Latent attention, one layer of each latent shape, in both forms: decode
 * at depth (absorbed only, as the engine runs it), prefill chunks from
 * position 0 and at depth (where the decompressed form's decompression
 * serves fewer queries a position). */
static int bench_mla(cv_pool *pool, const char *models, int repeats, cv_err *err)
{
    static const struct { const char *case_name; int32_t depth, n_tok; } cases[] = {
        { "decode@16k", 16384, 1 }, { "prefill64", 64, 64 },     { "prefill128", 128, 128 },
        { "prefill256", 256, 256 }, { "prefill512", 512, 512 }, { "chunk64@4k", 4096, 64 },
        { "chunk128@4k", 4096, 128 }, { "chunk512@4k", 4096, 512 },
    };
    printf("\nlatent attention alone, one layer (f16 latent rows, Q4_K up-projections): absorbed (the tile and the "
           "per-token up-projections) and decompressed (per-head keys and values from the context, then attention)\n");
    printf("%-17s %-12s %11s %8s %14s %8s %7s\n", "model", "case", "absorbed ms", "GMAC/s", "decompressed ms",
           "GMAC/s", "ratio");
    for (int i = 0; i < cv_n_model_shapes; i++) {
        const cv_model_shape *s = &cv_model_shapes[i];
        if (s->n_lora_kv == 0 || !strcmp(s->name, "tiny") || !in_list(models, s->name))
            continue;
        for (size_t c = 0; c < CV_ARRAY_LEN(cases); c++) {
            const cv_mla_bench b = { .n_head = s->n_head, .kv_lora = s->n_lora_kv, .rope = s->mla_rope,
                                     .nope = s->mla_nope, .v = s->mla_v, .depth = cases[c].depth,
                                     .n_tok = cases[c].n_tok, .kv_type = CV_GGML_F16, .up_type = CV_GGML_Q4_K,
                                     .repeats = repeats, .clock = clock_s };
            cv_mla_bench_result r;
            const int rc = cv_engine_bench_mla(&b, pool, &r, err);
            if (rc)
                return rc;
            printf("%-17s %-12s %11.2f %8.1f", s->name, cases[c].case_name, r.absorbed_s * 1e3,
                   r.absorbed_macs / r.absorbed_s / 1e9);
            if (r.decompressed_s > 0)
                printf(" %14.2f %8.1f %6.2fx\n", r.decompressed_s * 1e3, r.decompressed_macs / r.decompressed_s / 1e9,
                       r.absorbed_s / r.decompressed_s);
            else
                printf(" %14s %8s %7s\n", "-", "-", "-");
            fflush(stdout);
        }
    }
    return 0;
}

/* The Gated DeltaNet kernels of the qwen3.5-4b shape at each level: a
 * decode step over every layer's and value head's state (distinct memory,
 * so it streams from DRAM as decoding does) and one head's 64-token chunk
 * (in cache), on the calling thread. */
static int bench_deltanet(const char *models, int repeats)
{
    const cv_model_shape *s = cv_model_shape_find("qwen3.5-4b");
    if (!s || !in_list(models, s->name) || s->ssm_state <= 0)
        return 0;
    const int32_t d = s->ssm_state, n_heads = s->ssm_heads, n_layers = s->n_layer - s->n_layer / s->full_attn_interval;
    const int64_t n_states = (int64_t)n_heads * n_layers;
    const size_t dd = (size_t)d * d, N = CV_DN_CHUNK;
    float *S = cv_aligned_alloc((size_t)n_states * dd * sizeof(float));
    float *in = cv_aligned_alloc(4 * N * (size_t)d * sizeof(float)), *gb = cv_aligned_alloc(2 * N * sizeof(float));
    float *o = cv_aligned_alloc(N * (size_t)d * sizeof(float)), *tmp = cv_aligned_alloc((size_t)d * sizeof(float));
    float *scratch = cv_aligned_alloc(cv_dn_chunk_floats(d) * sizeof(float)), *S1 = cv_aligned_alloc(dd * 4);
    cv_rng r;
    cv_rng_seed(&r, 5);
    for (size_t i = 0; i < (size_t)n_states * dd; i++)
        S[i] = 0.01f * cv_rng_normal(&r);
    for (size_t i = 0; i < 4 * N * (size_t)d; i++)
        in[i] = cv_rng_normal(&r) / sqrtf((float)d);
    for (size_t t = 0; t < N; t++)
        gb[t] = 0.5f, gb[N + t] = -0.05f;
    const float *q = in, *k = in + N * d, *v = in + 2 * N * d;
    /* the chunk's products: K K^T, Q K^T, the substitution, W S0, Q S0,
     * M Delta, K^T Delta (deltanet.c's count) */
    const double chunk_macs = (double)N * N * d * 2 + (double)N * N * 2 * d / 2 + 3.0 * N * d * d + (double)N * N * d / 2;
    printf("\ngated deltanet kernels (%s shape: %lld states of %d x %d, one thread)\n", s->name, (long long)n_states, d,
           d);
    printf("%-8s %14s %12s %18s %14s\n", "level", "decode step ms", "GB/s r+w", "64-token chunk us", "GFLOP/s");
    double t[64];
    repeats = CV_MIN(repeats, 64);
    for (int l = 0; l < CV_ISA_COUNT; l++) {
        const dn_kernels *kn = cv_dn_kernels_at(l, d);
        if (!kn) {
            if (!cv_isa_supported(l))
                printf("%-8s not on this CPU (%s)\n", cv_isa_name(l), cv_isa_missing(l));
            continue;
        }
        const cv_vec_ops *vec = cv_vec_ops_for(l);
        double best_step = 1e30, best_chunk = 1e30;
        for (int rep = 0; rep < repeats; rep++) {
            double t0 = clock_s();
            for (int64_t h = 0; h < n_states; h++)
                kn->step(d, S + (size_t)h * dd, q, k, v, 0.5f, -0.05f, o, tmp);
            t[rep] = clock_s() - t0;
            best_step = fmin(best_step, t[rep]);
            memcpy(S1, S, dd * 4);
            t0 = clock_s();
            cv_dn_chunk(kn, vec, d, (int32_t)N, S1, q, k, v, gb, gb + N, o, scratch);
            best_chunk = fmin(best_chunk, clock_s() - t0);
        }
        qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
        const double state_bytes = 2.0 * (double)n_states * (double)dd * 4;
        printf("%-8s %14.3f %12.2f %18.1f %14.1f   (step best %.3f ms)\n", cv_isa_name(l), t[repeats / 2] * 1e3,
               state_bytes / t[repeats / 2] / 1e9, best_chunk * 1e6, 2 * chunk_macs / best_chunk / 1e9, best_step * 1e3);
        fflush(stdout);
    }
    cv_aligned_free(S), cv_aligned_free(in), cv_aligned_free(gb), cv_aligned_free(o), cv_aligned_free(tmp);
    cv_aligned_free(scratch), cv_aligned_free(S1);
    return 0;
}

typedef struct bk_opts {
    int32_t threads, repeats;
    const char *models, *mixes, *cases;
    bool cpu_clock;
} bk_opts;

static int clock_kind(void *opts, const char *v, cv_err *err)
{
    if (strcmp(v, "wall") && strcmp(v, "cpu"))
        return cv_err_set(err, CV_EINVAL, "'%s' is not wall or cpu", v);
    ((bk_opts *)opts)->cpu_clock = !strcmp(v, "cpu");
    return 0;
}

#define O(field) offsetof(bk_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--model", NULL, CV_FLAG_STR, O(models), 0, 0, "qwen2.5-0.5b,llama3.2-1b,qwen3-30b-a3b,qwen3.5-4b,gpt-oss-20b|all",
      "the shapes (default all)"),
    CV_FLAG_ROW("--dtype", NULL, CV_FLAG_STR, O(mixes), 0, 0, "q4_0,q4_k_m,q8_0,f16,iq4_xs,mxfp4,q2_k,q3_k_m|all",
      "the type mixes (default q4_0,q4_k_m,q8_0)"),
    CV_FLAG_ROW("--case", NULL, CV_FLAG_STR, O(cases), 0, 0,
      "decode,batch8,prefill,tiles,experts,attention,mla,deltanet|all",
      "the cases (default all)"),
    CV_FLAG_ROW("--threads", NULL, CV_FLAG_I32, O(threads), 1, 1024, "N", "compute threads (default: every CPU)"),
    CV_FLAG_ROW("--repeats", NULL, CV_FLAG_I32, O(repeats), 1, 64, "N", "repeats of each case (default 5)"),
    CV_FLAG_FN_ROW("--clock", NULL, "wall|cpu", "what is timed; cpu needs --threads 1 (default wall)", clock_kind,
      false),

};
#undef O
static const cv_cli_spec spec = { .name = "bench-kernels", .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_bench_kernels(int argc, char **argv)
{
    bk_opts o = { .threads = cv_cpu_count(), .repeats = 5, .models = "all", .mixes = "q4_0,q4_k_m,q8_0",
                  .cases = "all" };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    int threads = o.threads, repeats = o.repeats;
    const char *models = o.models, *mixes = o.mixes, *cases = o.cases;
    use_cpu_clock = o.cpu_clock;
    moe_shape_load();
    if (use_cpu_clock && threads != 1)
        return cv_cli_usage_error(&spec, "--clock cpu times one thread: use it with --threads 1");
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(threads, &err);
    if (!pool) {
        fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
        return 1;
    }
    printf("isa %s, %d threads, %s clock\n", cv_isa_name(cv_isa_active()), cv_pool_size(pool),
           use_cpu_clock ? "thread-CPU" : "wall");
    cv_probe_result bw, peak;
    cv_probe_read_bandwidth(pool, &bw, NULL);
    int have_peak = cv_probe_int8_peak(pool, cv_isa_active(), &peak, &err) == 0;
    if (use_cpu_clock) {
        /* Ceilings on the same clock as the passes. */
        bw.value = bw.best = bw.cpu_value;
        peak.value = peak.best = peak.cpu_value;
    }
    printf("ceiling read bandwidth   %8.2f GB/s   (best %.2f)\n", bw.value, bw.best);
    if (have_peak) {
        cv_probe_result p32;
        cv_probe_int8_peak_i32(pool, &p32, NULL);
        if (use_cpu_clock)
            p32.value = p32.best = p32.cpu_value;
        printf("ceiling int8 peak        %8.2f GMAC/s (best %.2f; %s)\n", peak.value / 1e9, peak.best / 1e9,
               cv_probe_int8_what(cv_isa_active()));
        printf("  for context: i32 step  %8.2f GMAC/s (best %.2f; +vpmaddwd, what q8_0 needs)\n", p32.value / 1e9,
               p32.best / 1e9);
    }
    else
        printf("ceiling int8 peak        n/a (%s)\n", err.msg);
    printf("fractions: median pass / median probe (best pass / best probe)\n");
    printf("%-13s %-7s %-8s %10s %16s %18s\n", "model", "dtype", "case", "median ms", "rate", "fraction");
    int rc = 0;
    for (size_t si = 0; si < CV_ARRAY_LEN(shape_names); si++) {
        const cv_model_shape *s = cv_model_shape_find(shape_names[si]);
        if (!in_list(models, s->name))
            continue;
        const char *all_mixes[] = { "q4_0", "q4_k_m", "q8_0", "f16", "iq4_xs", "mxfp4", "q2_k", "q3_k_m" };
        for (size_t mi = 0; mi < CV_ARRAY_LEN(all_mixes); mi++) {
            const char *mix = all_mixes[mi];
            if (!in_list(mixes, mix))
                continue;
            model m;
            if (in_list(cases, "decode") || in_list(cases, "batch8")) {
                if ((rc = model_build(&m, s, mix, NULL, 0, true, &err))) {
                    fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
                    goto done;
                }
                if (in_list(cases, "decode")) {
                    double tb, t = time_pass(pool, &m, 1, repeats + 2, s, &tb);
                    double gbs = (double)m.bytes / t / 1e9, gbs_b = (double)m.bytes / tb / 1e9;
                    printf("%-13s %-7s %-8s %10.2f %9.2f GB/s     %5.1f%% (%5.1f%%)\n", s->name, mix, "decode", t * 1e3,
                           gbs, 100 * gbs / bw.value, 100 * gbs_b / bw.best);
                }
                if (in_list(cases, "batch8")) {
                    double tb, t = time_pass(pool, &m, 8, repeats, s, &tb);
                    double g = 8.0 * (double)m.macs_per_token / t, gb = 8.0 * (double)m.macs_per_token / tb;
                    printf("%-13s %-7s %-8s %10.2f %7.1f GMAC/s     %5.1f%% (%5.1f%%)\n", s->name, mix, "batch8",
                           t * 1e3, g / 1e9, have_peak ? 100 * g / peak.value : 0.0,
                           have_peak ? 100 * gb / peak.best : 0.0);
                }
                model_free(&m);
            }
            if (in_list(cases, "prefill")) {
                /* layer 0 and the middle one: in Q4_K_M, one with Q6_K
                 * attn_v/ffn_down and one without, as half the layers are */
                const int64_t sample[2] = { 0, s->n_layer / 2 };
                if ((rc = model_build(&m, s, mix, sample, 2, false, &err))) {
                    fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
                    goto done;
                }
                double tb, t = time_pass(pool, &m, 512, CV_MAX(1, repeats / 2), s, &tb);
                double g = 512.0 * (double)m.macs_per_token / t, gb = 512.0 * (double)m.macs_per_token / tb;
                printf("%-13s %-7s %-8s %10.2f %7.1f GMAC/s     %5.1f%% (%5.1f%%)\n", s->name, mix, "prefill",
                       t * 1e3, g / 1e9, have_peak ? 100 * g / peak.value : 0.0, have_peak ? 100 * gb / peak.best : 0.0);
                model_free(&m);
            }
            fflush(stdout);
        }
    }
    if (in_list(models, moe.name) && in_list(cases, "experts")) {
        printf("\nexpert-routed matmuls, %s MoE layer (%lld experts, %lld per token, gate+up fused), fresh routes "
               "every step;\nms per step, rate over the used experts' weights, and the time of one cv_matmul per used "
               "expert over this (median of paired passes)\n", moe.name, (long long)moe.n_expert, (long long)moe.k);
        printf("%-13s %-7s %-8s %-8s %-5s %9s %14s %18s  %s\n", "model", "dtype", "case", "matrix", "type", "ms/step",
               "rate", "fraction", "loop/this");
        const char *moe_mixes[] = { "q4_0", "q4_k_m", "q8_0", "iq4_xs", "mxfp4", "q2_k", "q3_k_m" };
        for (size_t mi = 0; mi < CV_ARRAY_LEN(moe_mixes) && !rc; mi++)
            if (in_list(mixes, moe_mixes[mi]) && (rc = bench_experts(pool, moe_mixes[mi], repeats, &bw, &peak,
                                                                     have_peak, &err)))
                fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
    }
    if (!rc && in_list(cases, "deltanet"))
        rc = bench_deltanet(models, repeats);
    if (!rc && in_list(cases, "attention") && (rc = bench_attention(pool, models, repeats, &bw, &err)))
        fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
    if (!rc && in_list(cases, "mla") && (rc = bench_mla(pool, models, repeats, &err)))
        fprintf(stderr, "corvid bench-kernels: %s\n", err.msg);
    if (have_peak && in_list(cases, "tiles"))
        bench_tiles(pool, peak.best);
done:
    cv_pool_destroy(pool);
    return rc ? 1 : 0;
}
