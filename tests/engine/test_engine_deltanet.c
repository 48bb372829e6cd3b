/* test_engine_deltanet.c — the Gated DeltaNet kernels on their own: each
 * fast level's gemm and step against the scalar reference on odd sizes,
 * and avx512's equal to avx2's to the bit (they compute every element
 * alike; only the lanes differ); the
 * chunked form against the step form it must equal (every chunk length
 * 1..CV_DN_CHUNK, head sizes 8..128, from a zero and a non-zero state,
 * weak and strong decay, a decay that underflows to 0), outputs and the
 * state left behind; and the step form against the recurrence written out
 * in double. The mixer as a whole is checked against llama.cpp in
 * test_engine_reference (reference2's qwen35 files). */
#include <stdlib.h>

#include "kernels/deltanet.h"
#include "test.h"

static void fill(float *x, int64_t n, cv_rng *r, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = cv_rng_normal(r) * scale;
}

static void l2norm(float *x, int32_t d, float extra)
{
    double s = 0;
    for (int32_t i = 0; i < d; i++)
        s += (double)x[i] * x[i];
    for (int32_t i = 0; i < d; i++)
        x[i] = (float)(x[i] / sqrt(s) * extra);
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double m = 0, scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)b[i]));
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return scale > 0 ? m / scale : m;
}

/* Level isa's gemm and step against the scalar reference (and, for
 * avx512, against avx2's bits) on odd sizes; false when the CPU lacks it. */
static bool check_fast_level(cv_isa isa)
{
    const dn_kernels *kn = cv_dn_kernels_at(isa, 128), *k2 = cv_dn_kernels_at(CV_ISA_AVX2, 128);
    if (!kn) {
        printf("  %s: not on this CPU (%s)\n", cv_isa_name(isa), cv_isa_missing(isa));
        return false;
    }
    const bool same_bits = isa == CV_ISA_AVX512 && k2;
    static const int32_t sizes[] = { 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 33, 64, 128 };
    cv_rng r;
    cv_rng_seed(&r, 7);
    for (size_t a = 0; a < CV_ARRAY_LEN(sizes); a++)
        for (size_t b = 0; b < CV_ARRAY_LEN(sizes); b += 2)
            for (size_t c = 0; c < CV_ARRAY_LEN(sizes); c += 3) {
                const int32_t M = sizes[a], N = sizes[b], K = sizes[c];
                const int64_t lda = K + 3, ldb = N + 5, ldc = N + 1;
                float *A = malloc((size_t)(M * lda) * 4), *B = malloc((size_t)(K * ldb) * 4);
                float *C0 = malloc((size_t)(M * ldc) * 4), *C1 = malloc((size_t)(M * ldc) * 4);
                float *C2 = malloc((size_t)(M * ldc) * 4);
                fill(A, M * lda, &r, 1), fill(B, K * ldb, &r, 1), fill(C0, M * ldc, &r, 1);
                memcpy(C1, C0, (size_t)(M * ldc) * 4);
                memcpy(C2, C0, (size_t)(M * ldc) * 4);
                const bool acc = (a + b + c) % 2;
                cv_dn_kernels_scalar.gemm(M, N, K, -0.75f, A, lda, B, ldb, C0, ldc, acc);
                kn->gemm(M, N, K, -0.75f, A, lda, B, ldb, C1, ldc, acc);
                CHECK_MSG(max_rel(C1, C0, M * ldc) <= 2e-6, "%s gemm %dx%dx%d acc %d: %g", cv_isa_name(isa), M, N, K,
                          acc, max_rel(C1, C0, M * ldc));
                if (same_bits) {
                    k2->gemm(M, N, K, -0.75f, A, lda, B, ldb, C2, ldc, acc);
                    CHECK_MSG(!memcmp(C1, C2, (size_t)(M * ldc) * 4), "avx512 gemm %dx%dx%d acc %d: not avx2's bits",
                              M, N, K, acc);
                }
                free(A), free(B), free(C0), free(C1), free(C2);
            }
    for (int32_t d = 8; d <= 128; d *= 2) {
        const dn_kernels *kd = cv_dn_kernels_at(isa, d);
        if (!kd)
            continue;
        const size_t dd = (size_t)d * d;
        float *S0 = malloc(dd * 4), *S1 = malloc(dd * 4), *S2 = malloc(dd * 4), *q = malloc((size_t)d * 4);
        float *k = malloc((size_t)d * 4), *v = malloc((size_t)d * 4), *o0 = malloc((size_t)d * 4);
        float *o1 = malloc((size_t)d * 4), *o2 = malloc((size_t)d * 4), *tmp = malloc((size_t)d * 4);
        fill(S0, (int64_t)dd, &r, 0.3f), fill(q, d, &r, 1), fill(k, d, &r, 1), fill(v, d, &r, 1);
        l2norm(q, d, 1 / sqrtf((float)d)), l2norm(k, d, 1);
        memcpy(S1, S0, dd * 4);
        memcpy(S2, S0, dd * 4);
        cv_dn_kernels_scalar.step(d, S0, q, k, v, 0.6f, -0.4f, o0, tmp);
        kd->step(d, S1, q, k, v, 0.6f, -0.4f, o1, tmp);
        CHECK_MSG(max_rel(o1, o0, d) <= 2e-6 && max_rel(S1, S0, (int64_t)dd) <= 2e-6, "%s step d=%d: o %g S %g",
                  cv_isa_name(isa), d, max_rel(o1, o0, d), max_rel(S1, S0, (int64_t)dd));
        if (same_bits) {
            k2->step(d, S2, q, k, v, 0.6f, -0.4f, o2, tmp);
            CHECK_MSG(!memcmp(o1, o2, (size_t)d * 4) && !memcmp(S1, S2, dd * 4), "avx512 step d=%d: not avx2's bits",
                      d);
        }
        free(S0), free(S1), free(S2), free(q), free(k), free(v), free(o0), free(o1), free(o2), free(tmp);
    }
    return true;
}

TEST(fast_gemm_and_step_match_the_scalar_reference_at_every_level)
{
    int ran = 0;
    for (int isa = CV_ISA_AVX2; isa < CV_ISA_COUNT; isa++)
        if (isa != CV_ISA_AVX_VNNI) /* no float loops of its own: it runs avx2's */
            ran += check_fast_level(isa);
    if (!ran)
        TEST_SKIP("no AVX2 on this CPU: only the scalar loops exist here");
}

/* The recurrence in double, for one token (README of reference2, item 5). */
static void step_double(int32_t d, double *S, const float *q, const float *k, const float *v, float beta, float g,
                        double *o)
{
    const double gam = exp((double)g);
    for (int64_t i = 0; i < (int64_t)d * d; i++)
        S[i] *= gam;
    double *delta = malloc((size_t)d * sizeof *delta);
    for (int32_t m = 0; m < d; m++) {
        double sk = 0;
        for (int32_t i = 0; i < d; i++)
            sk += S[(size_t)i * d + m] * k[i];
        delta[m] = beta * (v[m] - sk);
    }
    for (int32_t i = 0; i < d; i++)
        for (int32_t m = 0; m < d; m++)
            S[(size_t)i * d + m] += k[i] * delta[m];
    for (int32_t m = 0; m < d; m++) {
        o[m] = 0;
        for (int32_t i = 0; i < d; i++)
            o[m] += S[(size_t)i * d + m] * q[i];
    }
    free(delta);
}

/* n tokens of one head, three ways from the same state: the chunked form,
 * the step form, the recurrence in double. Returns the worst relative
 * difference of chunked vs double (outputs and final state), and checks
 * step vs double too. */
static double compare_forms(const dn_kernels *kn, int32_t d, int32_t n, float gmin, bool warm, cv_rng *r)
{
    const size_t dd = (size_t)d * d;
    float *q = malloc((size_t)n * d * 4), *k = malloc((size_t)n * d * 4), *v = malloc((size_t)n * d * 4);
    float *beta = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
    float *Sc = calloc(dd, 4), *Ss = calloc(dd, 4), *oc = malloc((size_t)n * d * 4), *os = malloc((size_t)n * d * 4);
    double *Sd = calloc(dd, sizeof(double)), *od = malloc((size_t)d * sizeof(double));
    float *scratch = malloc(cv_dn_chunk_floats(d) * 4), *tmp = malloc((size_t)d * 4);
    fill(q, (int64_t)n * d, r, 1), fill(k, (int64_t)n * d, r, 1), fill(v, (int64_t)n * d, r, 1);
    for (int32_t t = 0; t < n; t++) {
        l2norm(q + (size_t)t * d, d, 1 / sqrtf((float)d));
        l2norm(k + (size_t)t * d, d, 1);
        beta[t] = cv_rng_f32(r);
        g[t] = gmin * cv_rng_f32(r);
    }
    if (warm) {
        fill(Sc, (int64_t)dd, r, 0.5f);
        memcpy(Ss, Sc, dd * 4);
        for (size_t i = 0; i < dd; i++)
            Sd[i] = Sc[i];
    }
    cv_dn_chunk(kn, cv_vec_ops_for(kn == &cv_dn_kernels_scalar ? CV_ISA_SCALAR : CV_ISA_AVX2), d, n, Sc, q, k, v, beta,
                g, oc, scratch);
    double worst_c = 0, worst_s = 0, scale = 0;
    float *od_f = malloc((size_t)n * d * 4);
    for (int32_t t = 0; t < n; t++) {
        kn->step(d, Ss, q + (size_t)t * d, k + (size_t)t * d, v + (size_t)t * d, beta[t], g[t], os + (size_t)t * d,
                 tmp);
        step_double(d, Sd, q + (size_t)t * d, k + (size_t)t * d, v + (size_t)t * d, beta[t], g[t], od);
        for (int32_t m = 0; m < d; m++)
            od_f[(size_t)t * d + m] = (float)od[m];
    }
    for (int64_t i = 0; i < (int64_t)n * d; i++)
        scale = fmax(scale, fabs((double)od_f[i]));
    for (int64_t i = 0; i < (int64_t)n * d; i++) {
        worst_c = fmax(worst_c, fabs((double)oc[i] - od_f[i]) / scale);
        worst_s = fmax(worst_s, fabs((double)os[i] - od_f[i]) / scale);
        CHECK(isfinite(oc[i]));
    }
    double sscale = 0;
    for (size_t i = 0; i < dd; i++)
        sscale = fmax(sscale, fabs(Sd[i]));
    for (size_t i = 0; i < dd; i++) {
        worst_c = fmax(worst_c, fabs(Sc[i] - Sd[i]) / sscale);
        worst_s = fmax(worst_s, fabs(Ss[i] - Sd[i]) / sscale);
    }
    CHECK_MSG(worst_s <= 2e-5, "step form d=%d n=%d vs double: %g", d, n, worst_s);
    free(q), free(k), free(v), free(beta), free(g), free(Sc), free(Ss), free(oc), free(os), free(Sd), free(od);
    free(scratch), free(tmp), free(od_f);
    return worst_c;
}

TEST(chunked_form_equals_the_recurrence_for_every_chunk_length)
{
    cv_rng r;
    cv_rng_seed(&r, 11);
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_dn_kernels_at(isa, 8) && !cv_dn_kernels_at(isa, 16))
            continue;
        static const int32_t ds[] = { 8, 32, 64, 128 };
        double worst = 0;
        for (size_t di = 0; di < CV_ARRAY_LEN(ds); di++) {
            const dn_kernels *kn = cv_dn_kernels_at(isa, ds[di]);
            if (!kn)
                continue;
            for (int32_t n = 1; n <= CV_DN_CHUNK; n += ds[di] >= 64 ? 9 : 1) {
                /* weak decay from zero, strong decay from a warm state */
                const double w0 = compare_forms(kn, ds[di], n, -0.1f, false, &r);
                const double w1 = compare_forms(kn, ds[di], n, -3.0f, true, &r);
                CHECK_MSG(w0 <= 5e-5 && w1 <= 5e-5, "%s d=%d n=%d: chunked vs recurrence %g / %g", cv_isa_name(isa),
                          ds[di], n, w0, w1);
                worst = fmax(worst, fmax(w0, w1));
            }
        }
        /* a decay that underflows (G below -87: exp(G) = 0) stays finite */
        const double wu = compare_forms(cv_dn_kernels_at(isa, 64), 64, CV_DN_CHUNK, -40.0f, true, &r);
        CHECK_MSG(wu <= 5e-5, "%s: underflowing decay %g", cv_isa_name(isa), wu);
        printf("  %s: chunked vs recurrence in double, worst relative difference %.2e (underflowing decay %.2e)\n",
               cv_isa_name(isa), worst, wu);
    }
}

/* corvid doctor's reasons, as for the attention tiles: the level
 * cv_dn_kernels_for picks is the highest one without a reason. */
TEST(each_level_says_why_it_has_no_loops_for_a_head_size)
{
    static const int32_t sizes[] = { 128, 24, 12 };
    for (size_t i = 0; i < CV_ARRAY_LEN(sizes); i++) {
        const int32_t d = sizes[i];
        const dn_kernels *best = &cv_dn_kernels_scalar;
        for (int l = CV_ISA_SCALAR; l < CV_ISA_COUNT; l++) {
            const char *why = cv_dn_kernels_why_not(l, d);
            CHECK_MSG((why == NULL) == (cv_dn_kernels_at(l, d) != NULL), "%s d %d: %s", cv_isa_name(l), d,
                      why ? why : "runs");
            if (!cv_isa_supported(l))
                CHECK_EQ_STR(why, cv_isa_missing(l));
            if (!why && l <= (int)cv_isa_active())
                best = cv_dn_kernels_at(l, d);
        }
        CHECK(cv_dn_kernels_for(d) == best);
    }
}

int main(void)
{
    RUN(fast_gemm_and_step_match_the_scalar_reference_at_every_level);
    RUN(chunked_form_equals_the_recurrence_for_every_chunk_length);
    RUN(each_level_says_why_it_has_no_loops_for_a_head_size);
    return test_report();
}
