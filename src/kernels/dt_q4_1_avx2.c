/* dt_q4_1_avx2.c — q4_1 on AVX2: dequantize (q * d + m, unfused, as the
 * reference) and the q4_1 x q8_1 dot. Matmuls use the generic driver. */
#include "kernels/simd_avx2.h"

void cv_dt_q4_1_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q4_1 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / QK4_1; b++) {
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d)), m = _mm256_set1_ps(f16_to_f32(x[b].m));
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
            _mm256_storeu_ps(dst + b * QK4_1 + 8 * k, _mm256_add_ps(_mm256_mul_ps(f, d), m));
        }
    }
}

void cv_dt_q4_1_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    float offs = 0;
    for (int64_t b = 0; b < n / QK4_1; b++) {
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
        __m256i p = _mm256_maddubs_epi16(wq, _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), d, acc);
        offs += f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
    }
    *out = hsum_ps(acc) + offs;
}
