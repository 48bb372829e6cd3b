/* dt_q5_k_avx2.c — q5_K on AVX2: dequantize (bit-exact: d*sc, dmin*m,
 * then d1*q - m1 unfused) and the q5_K x q8_K dot. Matmuls use the generic
 * driver. */
#include "kernels/simd_avx2.h"

void cv_kq_unpack_scales(const uint8_t *q, uint8_t *sc, uint8_t *m);

/* Levels (0..31) of the 64 values of chunk c (sub-blocks 2c, 2c+1). */
static inline void q5k_levels(const block_q5_K *x, int c, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
    const __m256i h = _mm256_loadu_si256((const __m256i *)x->qh);
    /* bit 2c of qh[l] is bit 4 of value l of sub-block 2c; bit 2c+1 of 2c+1 */
    const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one);
    const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one);
    *lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(h1, 4));
}

void cv_dt_q5_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q5_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d), min = f16_to_f32(x[b].dmin);
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        for (int c = 0; c < 4; c++) {
            __m256i v[2];
            q5k_levels(&x[b], c, &v[0], &v[1]);
            for (int h = 0; h < 2; h++) {
                const __m256 d1 = _mm256_set1_ps(d * sc[2 * c + h]), m1 = _mm256_set1_ps(min * m[2 * c + h]);
                for (int k = 0; k < 4; k++) {
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v[h]) : _mm256_extracti128_si256(v[h], 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(dst + b * QK_K + 64 * c + 32 * h + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, f), m1));
                }
            }
        }
    }
}

void cv_dt_q5_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q5k_levels(&x[b], c, &lo, &hi);
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c)));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int mins = 0;
        for (int j = 0; j < 8; j++)
            mins += m[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        const float da = y[b].d;
        sum += da * f16_to_f32(x[b].d) * (float)hsum_epi32(isum) - da * f16_to_f32(x[b].dmin) * (float)mins;
    }
    *out = sum;
}
