/* mix_deltanet_avx2.c — AVX2/FMA versions of the Gated DeltaNet mixer's two
 * inner loops (mix_deltanet.c has the scalar reference and the math):
 *   gemm: the chunked form's small products (n x d by d x d and the like,
 *     n <= CV_DN_CHUNK), 4 rows x 16 columns of C in registers while k
 *     runs, so each loaded row of B feeds 8 FMAs;
 *   step: one token through a d x d state in two passes, a block of up to
 *     32 columns at a time with its accumulators in registers, so the
 *     state (64 KiB at d = 128) streams through twice per token and head.
 * Each element sums its products in k order, as the reference does; the
 * two differ only by FMA rounding. Needs d % 8 == 0 (the mixer falls back
 * to the scalar kernels otherwise); gemm takes any sizes. */
#include <immintrin.h>
#include <math.h>

#include "engine/engine_int.h"

static inline void put(float *c, __m256 v, __m256 alpha, bool acc)
{
    _mm256_storeu_ps(c, acc ? _mm256_fmadd_ps(alpha, v, _mm256_loadu_ps(c)) : _mm256_mul_ps(alpha, v));
}

/* Rows m..m+R-1 (R <= 4) and columns n..n+8W-1 (W <= 2) of C. */
static inline void block(int32_t R, int32_t W, int32_t K, __m256 alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float *C, int64_t ldc, bool acc)
{
    __m256 c[4][2];
    for (int32_t r = 0; r < 4; r++)
        c[r][0] = c[r][1] = _mm256_setzero_ps();
    for (int32_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = W > 1 ? _mm256_loadu_ps(B + k * ldb + 8) : b0;
        for (int32_t r = 0; r < R; r++) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
            if (W > 1)
                c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
        }
    }
    for (int32_t r = 0; r < R; r++)
        for (int32_t w = 0; w < W; w++)
            put(C + r * ldc + 8 * w, c[r][w], alpha, acc);
}

/* Columns n..n+8W-1 of every row of C: 4 rows at a time, then one. */
static inline void columns(int32_t W, int32_t n, int32_t M, int32_t K, __m256 alpha, const float *A, int64_t lda,
                           const float *B, int64_t ldb, float *C, int64_t ldc, bool acc)
{
    int32_t m = 0;
    for (; m + 4 <= M; m += 4)
        block(4, W, K, alpha, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc);
    for (; m < M; m++)
        block(1, W, K, alpha, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, acc);
}

static void gemm_avx2(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                      int64_t ldb, float *C, int64_t ldc, bool acc)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int32_t n = 0;
    for (; n + 16 <= N; n += 16)
        columns(2, n, M, K, va, A, lda, B, ldb, C, ldc, acc);
    for (; n + 8 <= N; n += 8)
        columns(1, n, M, K, va, A, lda, B, ldb, C, ldc, acc);
    for (; n < N; n++)
        for (int32_t m = 0; m < M; m++) {
            float sum = 0;
            for (int32_t k = 0; k < K; k++)
                sum = fmaf(A[m * lda + k], B[k * ldb + n], sum);
            C[m * ldc + n] = acc ? C[m * ldc + n] + alpha * sum : alpha * sum;
        }
}

static void step_avx2(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g,
                      float *o, float *delta)
{
    const float gam = expf(g);
    const __m256 vgam = _mm256_set1_ps(gam), vbeta = _mm256_set1_ps(beta);
    /* Pass 1: delta = beta (v - gam S^T k), columns c..c+8w at a time. */
    for (int32_t c = 0; c < d; c += 32) {
        const int32_t w = CV_MIN(4, (d - c) / 8);
        __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
        for (int32_t i = 0; i < d; i++) {
            const __m256 ki = _mm256_broadcast_ss(k + i);
            const float *row = S + (size_t)i * d + c;
            for (int32_t x = 0; x < w; x++)
                acc[x] = _mm256_fmadd_ps(ki, _mm256_loadu_ps(row + 8 * x), acc[x]);
        }
        for (int32_t x = 0; x < w; x++) {
            const __m256 r = _mm256_fnmadd_ps(vgam, acc[x], _mm256_loadu_ps(v + c + 8 * x));
            _mm256_storeu_ps(delta + c + 8 * x, _mm256_mul_ps(vbeta, r));
        }
    }
    /* Pass 2: S = gam S + k delta^T, o = S^T q from the rows just written. */
    for (int32_t c = 0; c < d; c += 32) {
        const int32_t w = CV_MIN(4, (d - c) / 8);
        __m256 dl[4], acc[4];
        for (int32_t x = 0; x < w; x++) {
            dl[x] = _mm256_loadu_ps(delta + c + 8 * x);
            acc[x] = _mm256_setzero_ps();
        }
        for (int32_t i = 0; i < d; i++) {
            const __m256 ki = _mm256_broadcast_ss(k + i), qi = _mm256_broadcast_ss(q + i);
            float *row = S + (size_t)i * d + c;
            for (int32_t x = 0; x < w; x++) {
                const __m256 s = _mm256_fmadd_ps(vgam, _mm256_loadu_ps(row + 8 * x), _mm256_mul_ps(ki, dl[x]));
                _mm256_storeu_ps(row + 8 * x, s);
                acc[x] = _mm256_fmadd_ps(qi, s, acc[x]);
            }
        }
        for (int32_t x = 0; x < w; x++)
            _mm256_storeu_ps(o + c + 8 * x, acc[x]);
    }
}

const dn_kernels eng_dn_kernels_avx2 = { .gemm = gemm_avx2, .step = step_avx2 };
