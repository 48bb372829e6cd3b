/* deltanet_avx2.c — AVX2/FMA versions of the Gated DeltaNet mixer's two
 * inner loops (deltanet.c has the scalar reference and the math):
 *   gemm: the chunked form's small products (n x d by d x d and the like,
 *     n <= CV_DN_CHUNK), up to 12 accumulators of C in registers while k
 *     runs (6 rows x 16 columns, or one row x 64), so every FMA chain has
 *     the others to hide its latency behind;
 *   step: one token through a d x d state in two passes, a block of up to
 *     32 columns at a time with its accumulators in registers, so the
 *     state (64 KiB at d = 128) streams through twice per token and head.
 * The gemm sums each element's products in k order, as the reference
 * does, and the step sums even and odd rows apart; they differ from the
 * reference by rounding only. Needs d % 8 == 0 (even, for the step's row
 * pairs; the mixer falls back to the scalar kernels otherwise); gemm takes
 * any sizes. */
#include <immintrin.h>
#include <math.h>

#include "kernels/deltanet.h"

static inline void put(float *c, __m256 v, __m256 alpha, bool acc)
{
    _mm256_storeu_ps(c, acc ? _mm256_fmadd_ps(alpha, v, _mm256_loadu_ps(c)) : _mm256_mul_ps(alpha, v));
}

/* Rows 0..R-1 and columns 0..8W-1 of C (R * W <= 12 accumulators: that
 * many independent FMA chains hide the FMA's latency, 5 cycles at 2 per
 * cycle on Zen). R and W are constants at every call, so the loops unroll
 * into registers. */
static inline __attribute__((always_inline)) void block(int32_t R, int32_t W, int32_t K, __m256 alpha,
                                                         const float *A, int64_t lda, const float *B, int64_t ldb,
                                                         float *C, int64_t ldc, bool acc)
{
    __m256 c[6][8];
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int32_t w = 0; w < W; w++)
            c[r][w] = _mm256_setzero_ps();
    for (int32_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
#pragma GCC unroll 6
        for (int32_t r = 0; r < R; r++) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
#pragma GCC unroll 8
            for (int32_t w = 0; w < W; w++)
                c[r][w] = _mm256_fmadd_ps(a, _mm256_loadu_ps(b + 8 * w), c[r][w]);
        }
    }
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int32_t w = 0; w < W; w++)
            put(C + r * ldc + 8 * w, c[r][w], alpha, acc);
}

/* Columns n0.. of rows 0..R-1 past the last whole vector. */
static void tail(int32_t R, int32_t n0, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float *C, int64_t ldc, bool acc)
{
    for (int32_t r = 0; r < R; r++)
        for (int32_t n = n0; n < N; n++) {
            float sum = 0;
            for (int32_t k = 0; k < K; k++)
                sum = fmaf(A[r * lda + k], B[k * ldb + n], sum);
            C[r * ldc + n] = acc ? C[r * ldc + n] + alpha * sum : alpha * sum;
        }
}

/* Rows m..m+R-1 of C, all columns: blocks of 64 columns when the panel
 * is one row (a chunk's substitution is one-row products of 2d columns),
 * then 16, then 8, then the tail. R is a constant at every call. */
static inline __attribute__((always_inline)) void panel(int32_t R, int32_t m, int32_t N, int32_t K, __m256 va,
                                                         float alpha, const float *A, int64_t lda, const float *B,
                                                         int64_t ldb, float *C, int64_t ldc, bool acc)
{
    const float *a = A + m * lda;
    float *c = C + m * ldc;
    int32_t n = 0;
    if (R == 1)
        for (; n + 64 <= N; n += 64)
            block(1, 8, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    for (; n + 16 <= N; n += 16)
        block(R, 2, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    for (; n + 8 <= N; n += 8)
        block(R, 1, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    tail(R, n, N, K, alpha, a, lda, B, ldb, c, ldc, acc);
}

/* Panels of 6 rows, then 4, then single rows. */
static void gemm_avx2(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                      int64_t ldb, float *C, int64_t ldc, bool acc)
{
    const __m256 va = _mm256_set1_ps(alpha);
    int32_t m = 0;
    for (; m + 6 <= M; m += 6)
        panel(6, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
    for (; m + 4 <= M; m += 4)
        panel(4, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
    for (; m < M; m++)
        panel(1, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
}

static void step_avx2(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g,
                      float *o, float *delta)
{
    const float gam = expf(g);
    const __m256 vgam = _mm256_set1_ps(gam), vbeta = _mm256_set1_ps(beta);
    /* Pass 1: delta = beta (v - gam S^T k), columns c..c+8w at a time;
     * even and odd rows in separate accumulators (8 chains). */
    for (int32_t c = 0; c < d; c += 32) {
        const int32_t w = CV_MIN(4, (d - c) / 8);
        __m256 e[4], f[4];
        for (int32_t x = 0; x < 4; x++)
            e[x] = f[x] = _mm256_setzero_ps();
        for (int32_t i = 0; i < d; i += 2) {
            const __m256 k0 = _mm256_broadcast_ss(k + i), k1 = _mm256_broadcast_ss(k + i + 1);
            const float *r0 = S + (size_t)i * d + c, *r1 = r0 + d;
            for (int32_t x = 0; x < w; x++) {
                e[x] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(r0 + 8 * x), e[x]);
                f[x] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(r1 + 8 * x), f[x]);
            }
        }
        for (int32_t x = 0; x < w; x++) {
            const __m256 r = _mm256_fnmadd_ps(vgam, _mm256_add_ps(e[x], f[x]), _mm256_loadu_ps(v + c + 8 * x));
            _mm256_storeu_ps(delta + c + 8 * x, _mm256_mul_ps(vbeta, r));
        }
    }
    /* Pass 2: S = gam S + k delta^T, o = S^T q from the rows just written
     * (even and odd rows summed apart, as above). */
    for (int32_t c = 0; c < d; c += 32) {
        const int32_t w = CV_MIN(4, (d - c) / 8);
        __m256 dl[4], e[4], f[4];
        for (int32_t x = 0; x < 4; x++) {
            dl[x] = x < w ? _mm256_loadu_ps(delta + c + 8 * x) : _mm256_setzero_ps();
            e[x] = f[x] = _mm256_setzero_ps();
        }
        for (int32_t i = 0; i < d; i += 2) {
            const __m256 k0 = _mm256_broadcast_ss(k + i), q0 = _mm256_broadcast_ss(q + i);
            const __m256 k1 = _mm256_broadcast_ss(k + i + 1), q1 = _mm256_broadcast_ss(q + i + 1);
            float *r0 = S + (size_t)i * d + c, *r1 = r0 + d;
            for (int32_t x = 0; x < w; x++) {
                const __m256 s0 = _mm256_fmadd_ps(vgam, _mm256_loadu_ps(r0 + 8 * x), _mm256_mul_ps(k0, dl[x]));
                const __m256 s1 = _mm256_fmadd_ps(vgam, _mm256_loadu_ps(r1 + 8 * x), _mm256_mul_ps(k1, dl[x]));
                _mm256_storeu_ps(r0 + 8 * x, s0);
                _mm256_storeu_ps(r1 + 8 * x, s1);
                e[x] = _mm256_fmadd_ps(q0, s0, e[x]);
                f[x] = _mm256_fmadd_ps(q1, s1, f[x]);
            }
        }
        for (int32_t x = 0; x < w; x++)
            _mm256_storeu_ps(o + c + 8 * x, _mm256_add_ps(e[x], f[x]));
    }
}

const dn_kernels cv_dn_kernels_avx2 = { .gemm = gemm_avx2, .step = step_avx2 };
