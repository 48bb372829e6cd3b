/* test_kernels_vec.c — the vector ops: each ISA's version against the
 * scalar reference and against the defining formula in double, on lengths
 * that exercise every tail (0, 1, 7, 8, 9, 31, 33, 1000); RoPE in both
 * styles against the rotation written out, with frequency factors, linear
 * scaling and YaRN's factor on cos and sin; GeGLU and the clamped SwiGLU
 * against their formulas; softmax with masked entries; conversions against the
 * single-value reference; and the ISA override through $CORVID_ISA. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "test.h"

static const int64_t lens[] = { 0, 1, 7, 8, 9, 31, 33, 1000 };

static void fill(float *x, int64_t n, uint64_t seed, float scale)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = cv_rng_normal(&r) * scale;
}

static int64_t count_far(const float *a, const double *ref, int64_t n, double rel, double abs_tol)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i] - ref[i]) <= rel * fabs(ref[i]) + abs_tol))
            bad++;
    return bad;
}

TEST(elementwise_ops_match_their_formulas_on_every_isa_and_tail)
{
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa))
            continue;
        const cv_vec_ops *v = cv_vec_ops_for(isa);
        for (size_t k = 0; k < CV_ARRAY_LEN(lens); k++) {
            const int64_t n = lens[k];
            float *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b), *w = malloc((n + 1) * sizeof *w);
            float *y = malloc((n + 1) * sizeof *y);
            double *ref = malloc((n + 1) * sizeof *ref);
            fill(a, n, 1 + n, 3.0f);
            fill(b, n, 2 + n, 1.0f);
            fill(w, n, 3 + n, 0.5f);

            /* RMSNorm with and without weight. */
            double ss = 0;
            for (int64_t i = 0; i < n; i++)
                ss += (double)a[i] * a[i];
            double r = 1.0 / sqrt(ss / (n ? n : 1) + 1e-5);
            for (int64_t i = 0; i < n; i++)
                ref[i] = a[i] * r * w[i];
            v->rmsnorm(y, a, w, n, 1e-5f);
            CHECK_MSG(count_far(y, ref, n, 2e-6, 1e-7) == 0, "%s rmsnorm n=%lld", cv_isa_name(isa), (long long)n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = a[i] * r;
            memcpy(y, a, n * sizeof *y);
            v->rmsnorm(y, y, NULL, n, 1e-5f); /* in place */
            CHECK_MSG(count_far(y, ref, n, 2e-6, 1e-7) == 0, "%s rmsnorm in place n=%lld", cv_isa_name(isa), (long long)n);

            /* SwiGLU: silu(g) * u, with g over a wide range. */
            for (int64_t i = 0; i < n; i++)
                ref[i] = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
            v->swiglu(y, a, b, n);
            CHECK_MSG(count_far(y, ref, n, 4e-6, 1e-7) == 0, "%s swiglu n=%lld", cv_isa_name(isa), (long long)n);

            /* GeGLU with the tanh GELU, in its defining tanh form. */
            for (int64_t i = 0; i < n; i++) {
                const double x = a[i];
                ref[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * b[i];
            }
            v->geglu(y, a, b, n);
            CHECK_MSG(count_far(y, ref, n, 4e-6, 1e-7) == 0, "%s geglu n=%lld", cv_isa_name(isa), (long long)n);

            /* gpt-oss's clamped SwiGLU: a, spread ~+-9, crosses both clamps. */
            for (int64_t i = 0; i < n; i++) {
                const double x = fmin(a[i] * 3, 7), u = fmax(fmin(b[i] * 9, 7), -7);
                ref[i] = x / (1 + exp(-1.702 * x)) * (u + 1);
            }
            for (int64_t i = 0; i < n; i++)
                w[i] = a[i] * 3, y[i] = b[i] * 9;
            v->swiglu_clamped(y, w, y, n, 1.702f, 7.0f); /* in place over u */
            CHECK_MSG(count_far(y, ref, n, 4e-6, 1e-6) == 0, "%s swiglu_clamped n=%lld", cv_isa_name(isa),
                      (long long)n);
            fill(w, n, 3 + n, 0.5f);
            /* e^x over a wide range (a is N(0, 3^2)), in place too; and its
             * underflow: below ~-87.3, and -inf, give 0. */
            for (int64_t i = 0; i < n; i++)
                ref[i] = exp((double)a[i]);
            v->exp(y, a, n);
            CHECK_MSG(count_far(y, ref, n, 1e-6, 0) == 0, "%s exp n=%lld", cv_isa_name(isa), (long long)n);
            memcpy(y, a, n * sizeof *y);
            v->exp(y, y, n);
            CHECK_MSG(count_far(y, ref, n, 1e-6, 0) == 0, "%s exp in place n=%lld", cv_isa_name(isa), (long long)n);
            for (int64_t i = 0; i < n; i++)
                y[i] = i % 2 ? -INFINITY : -90.0f - (float)i;
            v->exp(y, y, n);
            for (int64_t i = 0; i < n; i++)
                CHECK_MSG(y[i] >= 0 && y[i] < 1e-38f, "%s exp underflow at %lld: %g", cv_isa_name(isa), (long long)i,
                          y[i]);

            /* The sigmoid gate x * sigmoid(g), and silu as x gated by
             * itself in place (how the DeltaNet conv uses it). */
            for (int64_t i = 0; i < n; i++)
                ref[i] = b[i] / (1.0 + exp(-(double)a[i]));
            v->sigmoid_mul(y, b, a, n);
            CHECK_MSG(count_far(y, ref, n, 4e-6, 1e-7) == 0, "%s sigmoid_mul n=%lld", cv_isa_name(isa), (long long)n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = a[i] / (1.0 + exp(-(double)a[i]));
            memcpy(y, a, n * sizeof *y);
            v->sigmoid_mul(y, y, y, n);
            CHECK_MSG(count_far(y, ref, n, 4e-6, 1e-7) == 0, "%s silu in place n=%lld", cv_isa_name(isa),
                      (long long)n);

            for (int64_t i = 0; i < n; i++)
                ref[i] = (float)(a[i] + b[i]);
            v->add(y, a, b, n);
            CHECK_MSG(count_far(y, ref, n, 0, 0) == 0, "%s add n=%lld", cv_isa_name(isa), (long long)n);

            for (int64_t i = 0; i < n; i++)
                ref[i] = (float)(a[i] * 0.3f);
            memcpy(y, a, n * sizeof *y);
            v->scale(y, 0.3f, n);
            CHECK_MSG(count_far(y, ref, n, 0, 0) == 0, "%s scale n=%lld", cv_isa_name(isa), (long long)n);

            for (int64_t i = 0; i < n; i++)
                ref[i] = b[i] + 0.7 * a[i];
            memcpy(y, b, n * sizeof *y);
            v->axpy(y, 0.7f, a, n);
            CHECK_MSG(count_far(y, ref, n, 1e-6, 1e-6) == 0, "%s axpy n=%lld", cv_isa_name(isa), (long long)n);

            uint16_t *h = malloc((n + 1) * sizeof *h);
            for (int64_t i = 0; i < n; i++)
                h[i] = cv_fp32_to_fp16(a[i]);
            for (int64_t i = 0; i < n; i++)
                ref[i] = b[i] + 0.7 * cv_fp16_to_fp32(h[i]);
            memcpy(y, b, n * sizeof *y);
            v->axpy_f16(y, 0.7f, h, n);
            CHECK_MSG(count_far(y, ref, n, 1e-6, 1e-6) == 0, "%s axpy_f16 n=%lld", cv_isa_name(isa), (long long)n);

            double d = 0, m = 0, dh = 0;
            for (int64_t i = 0; i < n; i++) {
                d += (double)a[i] * b[i];
                m += fabs((double)a[i] * b[i]);
                dh += (double)cv_fp16_to_fp32(h[i]) * b[i];
            }
            CHECK_NEAR(v->dot_f32(a, b, n), d, 1e-6 * m + 1e-6);
            CHECK_NEAR(v->dot_f16(h, b, n), dh, 1e-6 * m + 1e-6);

            /* Conversions: exactly the single-value reference. */
            uint16_t *h2 = malloc((n + 1) * sizeof *h2);
            v->f32_to_f16(a, h2, n);
            CHECK_MSG(n == 0 || !memcmp(h, h2, n * sizeof *h), "%s f32_to_f16 n=%lld", cv_isa_name(isa), (long long)n);
            v->f16_to_f32(h, y, n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = cv_fp16_to_fp32(h[i]);
            CHECK_MSG(count_far(y, ref, n, 0, 0) == 0, "%s f16_to_f32 n=%lld", cv_isa_name(isa), (long long)n);
            v->f32_to_bf16(a, h2, n);
            for (int64_t i = 0; i < n; i++)
                CHECK(h2[i] == cv_fp32_to_bf16(a[i]));
            v->bf16_to_f32(h2, y, n);
            for (int64_t i = 0; i < n; i++)
                ref[i] = cv_bf16_to_fp32(h2[i]);
            CHECK_MSG(count_far(y, ref, n, 0, 0) == 0, "%s bf16_to_f32 n=%lld", cv_isa_name(isa), (long long)n);
            free(h);
            free(h2);
            free(a);
            free(b);
            free(w);
            free(y);
            free(ref);
        }
    }
}

TEST(softmax_sums_to_one_and_maps_masked_entries_to_zero)
{
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa))
            continue;
        const cv_vec_ops *v = cv_vec_ops_for(isa);
        for (size_t k = 1; k < CV_ARRAY_LEN(lens); k++) {
            const int64_t n = lens[k];
            float *x = malloc(n * sizeof *x);
            double *ref = malloc(n * sizeof *ref);
            fill(x, n, 40 + n, 8.0f); /* logits spread over ~+-30 */
            if (n > 2)
                x[1] = -INFINITY;
            double max = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++)
                max = fmax(max, x[i]);
            for (int64_t i = 0; i < n; i++)
                sum += exp((double)x[i] - max);
            for (int64_t i = 0; i < n; i++)
                ref[i] = exp((double)x[i] - max) / sum;
            float s = v->softmax(x, n);
            CHECK_NEAR(s, sum, 1e-5 * sum);
            CHECK_MSG(count_far(x, ref, n, 1e-5, 1e-9) == 0, "%s softmax n=%lld", cv_isa_name(isa), (long long)n);
            if (n > 2)
                CHECK(x[1] == 0.0f);
            for (int64_t i = 0; i < n; i++)
                x[i] = -INFINITY;
            CHECK(v->softmax(x, n) == 0.0f);
            CHECK(x[0] == 0.0f && x[n - 1] == 0.0f);
            free(x);
            free(ref);
        }
        CHECK(v->softmax(NULL, 0) == 0.0f);
    }
}

static void rope_ref(const cv_rope_params *p, double *x, int n_head, int head_dim, int64_t pos)
{
    const int half = p->n_rot / 2;
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < half; i++) {
            double ang = pos * (double)p->freq_scale * pow(p->theta, -2.0 * i / p->n_rot);
            if (p->freq_factors)
                ang /= p->freq_factors[i];
            const double ms = p->mscale > 0 ? p->mscale : 1;
            int i0 = p->style == CV_ROPE_NEOX ? i : 2 * i, i1 = p->style == CV_ROPE_NEOX ? i + half : 2 * i + 1;
            double *v = x + h * head_dim, a = v[i0], b = v[i1];
            v[i0] = (a * cos(ang) - b * sin(ang)) * ms;
            v[i1] = (a * sin(ang) + b * cos(ang)) * ms;
        }
}

TEST(rope_rotates_pairs_by_position_in_both_styles)
{
    float ff[64];
    for (int i = 0; i < 64; i++)
        ff[i] = 1.0f + (float)i / 8; /* llama3-like: low frequencies stretched */
    const struct { cv_rope_style style; int n_rot, head_dim; float theta, fs; bool factors; float ms; } cfg[] = {
        { CV_ROPE_NORM, 32, 32, 10000, 1, false, 0 }, { CV_ROPE_NEOX, 32, 32, 1e6f, 1, false, 0 },
        { CV_ROPE_NEOX, 64, 64, 1e6f, 1, true, 0 },   { CV_ROPE_NORM, 16, 24, 10000, 0.25f, false, 0 },
        { CV_ROPE_NEOX, 20, 36, 500000, 1, true, 0 }, { CV_ROPE_NORM, 128, 128, 500000, 1, true, 0 },
        /* YaRN: per-dimension divisors and the attention factor on cos and sin */
        { CV_ROPE_NEOX, 64, 64, 150000, 1, true, 1.3465736f },
    };
    const int64_t positions[] = { 0, 1, 17, 199, 4096, 131071 };
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa))
            continue;
        for (size_t c = 0; c < CV_ARRAY_LEN(cfg); c++)
            for (size_t k = 0; k < CV_ARRAY_LEN(positions); k++) {
                const int n_head = 3, hd = cfg[c].head_dim;
                cv_rope_params p = { cfg[c].style, cfg[c].n_rot, cfg[c].theta, cfg[c].fs, cfg[c].factors ? ff : NULL,
                                     cfg[c].ms };
                float x[3 * 128];
                double ref[3 * 128];
                fill(x, n_head * hd, c * 10 + k, 1.0f);
                for (int i = 0; i < n_head * hd; i++)
                    ref[i] = x[i];
                rope_ref(&p, ref, n_head, hd, positions[k]);
                cv_vec_ops_for(isa)->rope(&p, x, n_head, hd, positions[k]);
                double worst = 0;
                for (int i = 0; i < n_head * hd; i++)
                    worst = fmax(worst, fabs(x[i] - ref[i]));
                CHECK_MSG(worst <= 2e-6, "%s rope cfg %zu pos %lld: max error %g", cv_isa_name(isa), c,
                          (long long)positions[k], worst);
            }
    }
    /* Position 0 is the identity (bit for bit). */
    float x[64], y[64];
    fill(x, 64, 3, 1.0f);
    memcpy(y, x, sizeof x);
    cv_rope_params p = { CV_ROPE_NEOX, 64, 1e6f, 1, NULL, 0 };
    cv_rope(&p, y, 1, 64, 0);
    CHECK(!memcmp(x, y, sizeof x));
}

/* The scalar loop the sampler's greedy path always used: every ISA must
 * pick the same index, ties to the first, NaNs skipped but a NaN first
 * value kept. */
static int64_t argmax_loop(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

TEST(argmax_picks_the_scalar_loops_index_with_ties_nans_and_infinities)
{
    const int64_t ns[] = { 0, 1, 2, 7, 8, 9, 15, 16, 17, 33, 1000, 151936 };
    float *x = malloc(151936 * sizeof *x);
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa))
            continue;
        const cv_vec_ops *v = cv_vec_ops_for(isa);
        for (size_t k = 0; k < CV_ARRAY_LEN(ns); k++)
            for (int kind = 0; kind < 7; kind++) {
                const int64_t n = ns[k];
                fill(x, n, 100 + 7 * (uint64_t)n + (uint64_t)kind, 4.0f);
                cv_rng r;
                cv_rng_seed(&r, 5 + (uint64_t)kind);
                if (n > 0 && kind == 1) /* a tie of the maximum, later copy in the tail or a lane */
                    x[cv_rng_u64(&r) % (uint64_t)n] = 50.0f, x[n - 1] = 50.0f;
                if (n > 0 && kind == 2) /* NaNs everywhere but at 0 */
                    for (int64_t i = 1; i < n; i += 3)
                        x[i] = NAN;
                if (n > 0 && kind == 3) /* a NaN first: nothing beats it */
                    x[0] = NAN;
                if (n > 0 && kind == 4) /* -inf (banned tokens) but one +0 and one -0 */
                    for (int64_t i = 0; i < n; i++)
                        x[i] = i == n / 2 ? -0.0f : i == n - 1 ? 0.0f : -INFINITY;
                if (n > 0 && kind == 5) /* all -inf */
                    for (int64_t i = 0; i < n; i++)
                        x[i] = -INFINITY;
                if (n > 0 && kind == 6) /* +inf late */
                    x[n - 1] = INFINITY;
                const int64_t want = argmax_loop(x, n), got = v->argmax(x, n);
                CHECK_MSG(got == want, "%s argmax n=%lld kind %d: %lld, the loop says %lld", cv_isa_name(isa),
                          (long long)n, kind, (long long)got, (long long)want);
            }
    }
    free(x);
}

/* What CORVID_ISA=name should give: the level when this CPU runs it, else
 * the next one down that it runs. */
static int expected_level(cv_isa l) { return cv_isa_supported(l) ? (int)l : (int)cv_isa_fallback(l); }

TEST(corvid_isa_picks_each_level_this_cpu_runs_and_lowers_the_others)
{
    /* The choice is made once per process: check it in a fresh one (this
     * binary re-executed; see main). */
    const char *envs[] = { "scalar", "bogus", "avx2", "avx-vnni", "avx512" };
    const int want[] = { CV_ISA_SCALAR, cv_isa_best(), expected_level(CV_ISA_AVX2), expected_level(CV_ISA_AVX_VNNI),
                         expected_level(CV_ISA_AVX512) };
    for (int k = 0; k < 5; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            setenv("CORVID_ISA", envs[k], 1);
            execl("/proc/self/exe", "test_kernels_vec", "--print-isa", (char *)NULL);
            _exit(99);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == want[k], "CORVID_ISA=%s: child chose %d, want %d", envs[k],
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, want[k]);
    }
    const cv_cpu_features *f = cv_cpu_features_get();
    CHECK(f->vendor[0] != 0);
    CHECK(cv_isa_supported(CV_ISA_SCALAR));
    CHECK(!cv_isa_supported((cv_isa)99));
    CHECK(cv_isa_missing((cv_isa)99) != NULL);
    CHECK(cv_isa_missing(CV_ISA_SCALAR) == NULL);
    CHECK_EQ_STR(cv_isa_name(CV_ISA_AVX2), "avx2");
    CHECK_EQ_STR(cv_isa_name(CV_ISA_AVX_VNNI), "avx-vnni");
    CHECK_EQ_STR(cv_isa_name(CV_ISA_AVX512), "avx512");
    if (f->avx2 && f->fma && f->f16c && f->bmi2 && f->os_avx)
        CHECK(cv_isa_best() >= CV_ISA_AVX2);
    CHECK(cv_isa_supported(CV_ISA_AVX512) == (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq &&
                                               f->avx512_vnni && f->os_avx512 && cv_isa_supported(CV_ISA_AVX2)));
    CHECK(cv_isa_supported(CV_ISA_AVX_VNNI) == (f->avx_vnni && cv_isa_supported(CV_ISA_AVX2)));
    /* The fallback chain steps down through levels this CPU runs, to scalar. */
    for (int l = CV_ISA_COUNT - 1; l > CV_ISA_SCALAR; l--) {
        const cv_isa fb = cv_isa_fallback(l);
        CHECK(fb < (cv_isa)l && cv_isa_supported(fb));
    }
    /* Say by name which levels this CPU cannot run: their tests ran the
     * level below. */
    for (int l = CV_ISA_AVX2; l < CV_ISA_COUNT; l++)
        if (!cv_isa_supported(l))
            printf("  %s: not on this CPU (%s)\n", cv_isa_name(l), cv_isa_missing(l));
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print-isa"))
        return (int)cv_isa_active();
    if (getenv("CORVID_ISA"))
        unsetenv("CORVID_ISA");
    RUN(elementwise_ops_match_their_formulas_on_every_isa_and_tail);
    RUN(softmax_sums_to_one_and_maps_masked_entries_to_zero);
    RUN(rope_rotates_pairs_by_position_in_both_styles);
    RUN(argmax_picks_the_scalar_loops_index_with_ties_nans_and_infinities);
    RUN(corvid_isa_picks_each_level_this_cpu_runs_and_lowers_the_others);
    return test_report();
}
