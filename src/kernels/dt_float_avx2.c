/* dt_float_avx2.c — the float weight types on AVX2 (f32, f16 via F16C,
 * bf16 by shifting): row conversion and dot products with f32
 * activations. These run through the generic matmul driver, one dot per
 * (row, token), with the row in L1 while it meets every token. */
#include "kernels/simd_avx2.h"

void cv_dt_f32_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    *out = cv_vec_ops_avx2.dot_f32(w, a, n);
}

void cv_dt_f16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.f16_to_f32(src, dst, n); }
void cv_dt_f16_from_f32_avx2(const float *src, void *dst, int64_t n) { cv_vec_ops_avx2.f32_to_f16(src, dst, n); }
void cv_dt_f16_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    *out = cv_vec_ops_avx2.dot_f16(w, a, n);
}

void cv_dt_bf16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.bf16_to_f32(src, dst, n); }

static inline __m256 bf16x8(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

void cv_dt_bf16_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const uint16_t *x = w;
    const float *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(bf16x8(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(bf16x8(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(bf16x8(x + i), _mm256_loadu_ps(y + i), acc0);
    float s = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        s += cv_bf16_to_fp32(x[i]) * y[i];
    *out = s;
}
