/* deltanet_avx512.c — the Gated DeltaNet mixer's two inner loops on
 * AVX-512 (deltanet.c has the scalar reference and the math,
 * deltanet_avx2.c the same loops eight lanes wide):
 *   gemm: the chunked form's small products with up to 24 accumulators of
 *     C in registers while k runs (6 rows x 64 columns, or one row x 128);
 *   step: one token through a d x d state in two passes, 64 columns at a
 *     time.
 * Every element is computed as the AVX2 loops compute it: a product sum
 * in k order with one fused multiply-add a term (gemm), even and odd state
 * rows summed apart (step). Only the lane count differs, so the bits equal
 * deltanet_avx2.c's (tests/engine/test_engine_deltanet.c checks it). Needs
 * d % 16 == 0 (cv_dn_kernels_for falls back otherwise); gemm takes any
 * sizes. */
#include <immintrin.h>
#include <math.h>

#include "kernels/deltanet.h"

static inline void put(float *c, __m512 v, __m512 alpha, bool acc)
{
    _mm512_storeu_ps(c, acc ? _mm512_fmadd_ps(alpha, v, _mm512_loadu_ps(c)) : _mm512_mul_ps(alpha, v));
}

/* Rows 0..R-1 and columns 0..16W-1 of C (R * W <= 24 accumulators). R and
 * W are constants at every call, so the loops unroll into registers. */
static inline __attribute__((always_inline)) void block(int32_t R, int32_t W, int32_t K, __m512 alpha,
                                                         const float *A, int64_t lda, const float *B, int64_t ldb,
                                                         float *C, int64_t ldc, bool acc)
{
    __m512 c[6][8];
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int32_t w = 0; w < W; w++)
            c[r][w] = _mm512_setzero_ps();
    for (int32_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
#pragma GCC unroll 6
        for (int32_t r = 0; r < R; r++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + k]);
#pragma GCC unroll 8
            for (int32_t w = 0; w < W; w++)
                c[r][w] = _mm512_fmadd_ps(a, _mm512_loadu_ps(b + 16 * w), c[r][w]);
        }
    }
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int32_t w = 0; w < W; w++)
            put(C + r * ldc + 16 * w, c[r][w], alpha, acc);
}

/* Columns 0..7 of rows 0..R-1: a half-width block, where the AVX2 loop
 * runs its last whole vector (its put is fused; the tail's is not). */
static inline __attribute__((always_inline)) void block8(int32_t R, int32_t K, __m512 alpha, const float *A,
                                                          int64_t lda, const float *B, int64_t ldb, float *C,
                                                          int64_t ldc, bool acc)
{
    const __mmask16 m8 = 0x00FF;
    __m512 c[6];
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++)
        c[r] = _mm512_setzero_ps();
    for (int32_t k = 0; k < K; k++) {
        const __m512 b = _mm512_maskz_loadu_ps(m8, B + k * ldb);
#pragma GCC unroll 6
        for (int32_t r = 0; r < R; r++)
            c[r] = _mm512_fmadd_ps(_mm512_set1_ps(A[r * lda + k]), b, c[r]);
    }
#pragma GCC unroll 6
    for (int32_t r = 0; r < R; r++) {
        float *cr = C + r * ldc;
        const __m512 v = acc ? _mm512_fmadd_ps(alpha, c[r], _mm512_maskz_loadu_ps(m8, cr)) : _mm512_mul_ps(alpha, c[r]);
        _mm512_mask_storeu_ps(cr, m8, v);
    }
}

/* Columns n0.. of rows 0..R-1 past the last whole vector: the AVX2 loop's
 * tail, term by term. */
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

/* Rows m..m+R-1 of C: blocks of 128 columns when the panel is one row (a
 * chunk's substitution is one-row products of 2d columns), then 64, then
 * 16, then 8 (as the AVX2 loop's last vector), then the tail. */
static inline __attribute__((always_inline)) void panel(int32_t R, int32_t m, int32_t N, int32_t K, __m512 va,
                                                         float alpha, const float *A, int64_t lda, const float *B,
                                                         int64_t ldb, float *C, int64_t ldc, bool acc)
{
    const float *a = A + m * lda;
    float *c = C + m * ldc;
    int32_t n = 0;
    if (R == 1)
        for (; n + 128 <= N; n += 128)
            block(1, 8, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    for (; n + 64 <= N; n += 64)
        block(R, 4, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    for (; n + 16 <= N; n += 16)
        block(R, 1, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
    if (n + 8 <= N) {
        block8(R, K, va, a, lda, B + n, ldb, c + n, ldc, acc);
        n += 8;
    }
    tail(R, n, N, K, alpha, a, lda, B, ldb, c, ldc, acc);
}

/* Panels of 6 rows, then 4, then single rows. */
static void gemm_avx512(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool acc)
{
    const __m512 va = _mm512_set1_ps(alpha);
    int32_t m = 0;
    for (; m + 6 <= M; m += 6)
        panel(6, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
    for (; m + 4 <= M; m += 4)
        panel(4, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
    for (; m < M; m++)
        panel(1, m, N, K, va, alpha, A, lda, B, ldb, C, ldc, acc);
}

static void step_avx512(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g,
                        float *o, float *delta)
{
    const float gam = expf(g);
    const __m512 vgam = _mm512_set1_ps(gam), vbeta = _mm512_set1_ps(beta);
    /* Pass 1: delta = beta (v - gam S^T k), 64 columns at a time; even and
     * odd rows in separate accumulators (8 chains). */
    for (int32_t c = 0; c < d; c += 64) {
        const int32_t w = CV_MIN(4, (d - c) / 16);
        __m512 e[4], f[4];
        for (int32_t x = 0; x < 4; x++)
            e[x] = f[x] = _mm512_setzero_ps();
        for (int32_t i = 0; i < d; i += 2) {
            const __m512 k0 = _mm512_set1_ps(k[i]), k1 = _mm512_set1_ps(k[i + 1]);
            const float *r0 = S + (size_t)i * d + c, *r1 = r0 + d;
            for (int32_t x = 0; x < w; x++) {
                e[x] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(r0 + 16 * x), e[x]);
                f[x] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(r1 + 16 * x), f[x]);
            }
        }
        for (int32_t x = 0; x < w; x++) {
            const __m512 r = _mm512_fnmadd_ps(vgam, _mm512_add_ps(e[x], f[x]), _mm512_loadu_ps(v + c + 16 * x));
            _mm512_storeu_ps(delta + c + 16 * x, _mm512_mul_ps(vbeta, r));
        }
    }
    /* Pass 2: S = gam S + k delta^T, o = S^T q from the rows just written
     * (even and odd rows summed apart, as above). */
    for (int32_t c = 0; c < d; c += 64) {
        const int32_t w = CV_MIN(4, (d - c) / 16);
        __m512 dl[4], e[4], f[4];
        for (int32_t x = 0; x < 4; x++) {
            dl[x] = x < w ? _mm512_loadu_ps(delta + c + 16 * x) : _mm512_setzero_ps();
            e[x] = f[x] = _mm512_setzero_ps();
        }
        for (int32_t i = 0; i < d; i += 2) {
            const __m512 k0 = _mm512_set1_ps(k[i]), q0 = _mm512_set1_ps(q[i]);
            const __m512 k1 = _mm512_set1_ps(k[i + 1]), q1 = _mm512_set1_ps(q[i + 1]);
            float *r0 = S + (size_t)i * d + c, *r1 = r0 + d;
            for (int32_t x = 0; x < w; x++) {
                const __m512 s0 = _mm512_fmadd_ps(vgam, _mm512_loadu_ps(r0 + 16 * x), _mm512_mul_ps(k0, dl[x]));
                const __m512 s1 = _mm512_fmadd_ps(vgam, _mm512_loadu_ps(r1 + 16 * x), _mm512_mul_ps(k1, dl[x]));
                _mm512_storeu_ps(r0 + 16 * x, s0);
                _mm512_storeu_ps(r1 + 16 * x, s1);
                e[x] = _mm512_fmadd_ps(q0, s0, e[x]);
                f[x] = _mm512_fmadd_ps(q1, s1, f[x]);
            }
        }
        for (int32_t x = 0; x < w; x++)
            _mm512_storeu_ps(o + c + 16 * x, _mm512_add_ps(e[x], f[x]));
    }
}

const dn_kernels cv_dn_kernels_avx512 = { .gemm = gemm_avx512, .step = step_avx512 };
