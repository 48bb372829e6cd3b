/* dt_q3_k_avx2.c — q3_K on AVX2: dequantize (bit-exact: (d * sc) * (q - 4))
 * and the q3_K x q8_K dot. As for q2_K, one load of qs holds 128 values'
 * low bits and each shift by 2s gives 32 of them; the high bits of the
 * same 32 values are bit 4h + s of each byte of hmask. Levels are used
 * unsigned (0..7) and the -4 applied once per super-block through q8_K's
 * sums of each 16 times the scales. The matmul runs through the generic
 * driver (docs/KERNELS.md says what a tile would add). */
#include "kernels/simd_avx2.h"

/* Levels 0..7 of values 128h + 32s .. +31. */
static inline __m256i q3_levels(__m256i q, __m256i hm, int h, int s)
{
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), _mm256_set1_epi8(3));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), _mm256_set1_epi8(1));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
}

void cv_dt_q3_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q3_K *x = src;
    const __m256i off = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        float *y = dst + b * QK_K;
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_sub_epi8(q3_levels(q, hm, h, s), off);
                for (int k = 0; k < 4; k++) {
                    const __m256 dl = _mm256_set1_ps(d * (float)q3_k_scale(x[b].scales, 8 * h + 2 * s + k / 2));
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(y + 128 * h + 32 * s + 8 * k, _mm256_mul_ps(dl, f));
                }
            }
        }
    }
}

void cv_dt_q3_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        int16_t sc[16];
        for (int j = 0; j < 16; j++)
            sc[j] = (int16_t)q3_k_scale(x[b].scales, j);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const int j = 8 * h + 2 * s; /* the sub-blocks of these 32 values: j, j+1 */
                const __m256i p = _mm256_maddubs_epi16(q3_levels(q, hm, h, s),
                                                       _mm256_loadu_si256((const __m256i *)(y[b].qs + 16 * j)));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[j + 1]), _mm_set1_epi16(sc[j]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv));
            }
        }
        /* the -4 of every level: 4 * sum_j sc_j * (sum of the activations of sub-block j) */
        const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)sc),
                                              _mm256_loadu_si256((const __m256i *)y[b].bsums));
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 2));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}
