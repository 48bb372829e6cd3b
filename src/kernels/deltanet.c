/* deltanet.c — the Gated DeltaNet mixer's kernels (deltanet.h): the scalar
 * reference of its two inner loops, and the chunked form of the delta rule
 * over whichever level's loops the caller picks. The recurrence itself,
 * per value head and token (engine/mix_deltanet.c states the whole mixer):
 *
 *   S <- exp(g) S;  delta = beta (v - S^T k);  S <- S + k delta^T;  o = S^T q
 *
 * ---- The chunked form (one value head; n tokens from state S0) ----
 * Rows are tokens: Q, K [n][d] (the head's q, k), V [n][d], beta_t, g_t.
 * Let G_t = g_1 + ... + g_t (t = 1..n) and Gamma_t = exp(G_t), so the state
 * decays by Gamma_t / Gamma_s = exp(G_t - G_s) <= 1 from after token s to
 * after token t. Unrolling S_t = gamma_t S_{t-1} + k_t delta_t^T:
 *
 *   S_t = Gamma_t S0 + sum_{s<=t} exp(G_t - G_s) k_s delta_s^T          (1)
 *
 * and each delta_t reads the decayed state before its own write:
 *
 *   delta_t = beta_t (v_t - Gamma_t S0^T k_t
 *                     - sum_{s<t} exp(G_t - G_s) (k_s . k_t) delta_s)
 *
 * so with A[t][s] = beta_t exp(G_t - G_s) (k_t . k_s) for s < t (strictly
 * lower triangular) and Delta the rows delta_t:
 *
 *   (I + A) Delta = diag(beta) V - diag(beta Gamma) K S0
 *   Delta = U - W S0,  U = (I + A)^-1 diag(beta) V,
 *                      W = (I + A)^-1 diag(beta Gamma) K                 (2)
 *
 * (the WY form of the product of the n Householder-like updates; U and W
 * come from one forward substitution over the unit lower triangular
 * I + A, applied to both right-hand sides at once). The outputs follow
 * from (1):
 *
 *   o_t = S_t^T q_t = Gamma_t S0^T q_t + sum_{s<=t} exp(G_t - G_s) (q_t . k_s) delta_s
 *   O = diag(Gamma) Q S0 + M Delta,  M[t][s] = exp(G_t - G_s) (q_t . k_s), s <= t   (3)
 *
 * and the state after the chunk is (1) at t = n:
 *
 *   S_n = Gamma_n S0 + K^T diag(exp(G_n - G_s)) Delta                    (4)
 *
 * Every factor is an exp of a difference G_t - G_s <= 0 (or of G_t <= 0),
 * so nothing overflows, and a state that has decayed away underflows to 0
 * as it should. Per chunk and head the work is K K^T and Q K^T (n^2 d),
 * the substitution (n^2 d), W S0, Q S0 and K^T Delta (3 n d^2) and
 * M Delta (n^2 d / 2): matrix products over a d x d state and n x d
 * inputs held in L2, instead of 3 n passes over the state for the step
 * form. Both forms agree to rounding (tests/engine/test_engine_deltanet.c). */
#include <assert.h>
#include <math.h>

#include "kernels/deltanet.h"

/* ---- the chunked form (see the top of the file) ---- */

size_t cv_dn_chunk_floats(int32_t d)
{
    const size_t n = CV_DN_CHUNK;
    /* G, Gamma, a row of decays [n]; K^T [d][n]; A, M [n][n]; X [n][2d]
     * (U | W); Delta [n][d] */
    return 3 * n + (size_t)d * n + 2 * n * n + n * 2 * (size_t)d + n * (size_t)d;
}

void cv_dn_chunk(const dn_kernels *kn, const cv_vec_ops *vec, int32_t d, int32_t n, float *S, const float *q,
                 const float *k, const float *v, const float *beta, const float *g, float *o, float *scratch)
{
    enum { N = CV_DN_CHUNK };
    assert(n >= 1 && n <= N);
    float *G = scratch, *eG = G + N, *row = eG + N, *KT = row + N, *A = KT + (size_t)d * N, *M = A + N * N;
    float *X = M + N * N, *D = X + (size_t)N * 2 * d;
    const int64_t ldx = 2 * (int64_t)d;
    float acc = 0;
    for (int32_t t = 0; t < n; t++) {
        acc += g[t];
        G[t] = acc;
    }
    vec->exp(eG, G, n);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < d; i++)
            KT[(size_t)i * N + t] = k[(size_t)t * d + i];
    /* A = strict lower part of K K^T, weighted; M = lower part (with the
     * diagonal) of Q K^T, weighted; row t's decays exp(G_t - G_s), s <= t. */
    kn->gemm(n, n, d, 1.0f, k, d, KT, N, A, N, false);
    kn->gemm(n, n, d, 1.0f, q, d, KT, N, M, N, false);
    for (int32_t t = 0; t < n; t++) {
        for (int32_t s = 0; s <= t; s++)
            row[s] = G[t] - G[s];
        vec->exp(row, row, t + 1);
        for (int32_t s = 0; s < n; s++) {
            A[t * N + s] = s < t ? beta[t] * row[s] * A[t * N + s] : 0.0f;
            M[t * N + s] = s <= t ? row[s] * M[t * N + s] : 0.0f;
        }
    }
    /* (2): X = [beta V | beta Gamma K], then X <- (I + A)^-1 X by forward
     * substitution, row t after every row before it. */
    for (int32_t t = 0; t < n; t++) {
        float *x = X + t * ldx;
        for (int32_t i = 0; i < d; i++) {
            x[i] = beta[t] * v[(size_t)t * d + i];
            x[d + i] = beta[t] * eG[t] * k[(size_t)t * d + i];
        }
        /* x_t -= A[t][0..t) X[0..t): one row of a product */
        kn->gemm(1, 2 * d, t, -1.0f, A + t * N, N, X, ldx, x, ldx, true);
    }
    /* Delta = U - W S0 */
    for (int32_t t = 0; t < n; t++)
        memcpy(D + (size_t)t * d, X + t * ldx, (size_t)d * sizeof(float));
    kn->gemm(n, d, d, -1.0f, X + d, ldx, S, d, D, d, true);
    /* (3): O = diag(Gamma) Q S0 + M Delta */
    kn->gemm(n, d, d, 1.0f, q, d, S, d, o, d, false);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < d; i++)
            o[(size_t)t * d + i] *= eG[t];
    kn->gemm(n, d, n, 1.0f, M, N, D, d, o, d, true);
    /* (4): S = Gamma_n S0 + (K^T diag(exp(G_n - G_s))) Delta */
    vec->scale(S, eG[n - 1], (int64_t)d * d);
    for (int32_t t = 0; t < n; t++)
        row[t] = G[n - 1] - G[t];
    vec->exp(row, row, n);
    for (int32_t i = 0; i < d; i++)
        for (int32_t t = 0; t < n; t++)
            KT[(size_t)i * N + t] *= row[t];
    kn->gemm(d, d, n, 1.0f, KT, N, D, d, S, d, true);
}

/* ---- scalar kernels (the reference) ---- */

static void gemm_scalar(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool acc)
{
    for (int32_t m = 0; m < M; m++)
        for (int32_t n = 0; n < N; n++) {
            float sum = 0;
            for (int32_t k = 0; k < K; k++)
                sum += A[m * lda + k] * B[k * ldb + n];
            C[m * ldc + n] = acc ? C[m * ldc + n] + alpha * sum : alpha * sum;
        }
}

static void step_scalar(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g,
                        float *o, float *delta)
{
    const float gam = expf(g);
    /* delta = beta (v - gam S^T k): the decayed state read along k */
    for (int32_t m = 0; m < d; m++)
        delta[m] = 0;
    for (int32_t i = 0; i < d; i++)
        for (int32_t m = 0; m < d; m++)
            delta[m] += k[i] * S[(size_t)i * d + m];
    for (int32_t m = 0; m < d; m++)
        delta[m] = beta * (v[m] - gam * delta[m]);
    /* S = gam S + k delta^T, and o = S^T q as each row is written */
    for (int32_t m = 0; m < d; m++)
        o[m] = 0;
    for (int32_t i = 0; i < d; i++) {
        float *row = S + (size_t)i * d;
        for (int32_t m = 0; m < d; m++) {
            row[m] = gam * row[m] + k[i] * delta[m];
            o[m] += q[i] * row[m];
        }
    }
}

const dn_kernels cv_dn_kernels_scalar = { .gemm = gemm_scalar, .step = step_scalar };

const dn_kernels *cv_dn_kernels_at(cv_isa isa, int32_t d)
{
    if (!cv_isa_supported(isa))
        return NULL;
    switch (isa) {
    case CV_ISA_SCALAR: return &cv_dn_kernels_scalar;
    case CV_ISA_AVX2: return d % 8 == 0 ? &cv_dn_kernels_avx2 : NULL;
    case CV_ISA_AVX512: return d % 16 == 0 ? &cv_dn_kernels_avx512 : NULL;
    default: return NULL; /* avx-vnni has no float loops of its own */
    }
}

const dn_kernels *cv_dn_kernels_for(int32_t d)
{
    for (cv_isa l = cv_isa_active();; l = cv_isa_fallback(l)) {
        const dn_kernels *kn = cv_dn_kernels_at(l, d);
        if (kn)
            return kn;
    }
}

const char *cv_dn_kernels_why_not(cv_isa isa, int32_t d)
{
    if (!cv_isa_supported(isa))
        return cv_isa_missing(isa);
    if (cv_dn_kernels_at(isa, d))
        return NULL;
    if (isa == CV_ISA_AVX512)
        return "head size not a multiple of 16";
    if (isa == CV_ISA_AVX2)
        return "head size not a multiple of 8";
    return "no float loops of its own: avx2's run";
}

const char *cv_dn_kernels_name(const dn_kernels *kn)
{
    return kn == &cv_dn_kernels_avx512 ? "avx512" : kn == &cv_dn_kernels_avx2 ? "avx2" : "scalar";
}
