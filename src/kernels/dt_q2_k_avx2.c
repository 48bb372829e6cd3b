/* dt_q2_k_avx2.c — q2_K on AVX2: dequantize (bit-exact with the scalar
 * reference: d*sc and dmin*m first, then dl*q - ml without fusing) and the
 * q2_K x q8_K dot. One 32-byte load of qs holds 128 values; each shift by
 * 2s and mask gives the 32 values 32s..32s+31 of it, i.e. two sub-blocks
 * of 16, whose products vpmaddwd sums with their two scales at once. The
 * mins meet q8_K's sums of each 16 in one more vpmaddwd. The matmul runs
 * through the generic driver (docs/KERNELS.md says what a tile would add). */
#include "kernels/simd_avx2.h"

void cv_dt_q2_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q2_K *x = src;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), min = h2f(x[b].dmin);
        float *y = dst + b * QK_K;
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                for (int k = 0; k < 4; k++) {
                    const uint8_t sc = x[b].scales[8 * h + 2 * s + k / 2];
                    const __m256 dl = _mm256_set1_ps(d * (float)(sc & 0xF));
                    const __m256 ml = _mm256_set1_ps(min * (float)(sc >> 4));
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(y + 128 * h + 32 * s + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dl, f), ml));
                }
            }
        }
    }
}

void cv_dt_q2_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    /* vpshufb mask: int16 lanes holding scale byte 0 (low 128 bits) and
     * byte 1 (high); adding 2p to its low bytes selects sub-blocks 2p, 2p+1 */
    const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1,
                                          1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m256i scb = _mm256_broadcastsi128_si256(_mm_and_si128(sc8, m4));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                const int pair = 4 * h + s; /* these 32 values are sub-blocks 2 pair and 2 pair + 1 */
                const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * pair)));
                const __m256i sc = _mm256_shuffle_epi8(scb, _mm256_add_epi8(pick, _mm256_set1_epi16((short)(2 * pair))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
        }
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
        const int sum_mins = hsum_epi32(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[b].bsums)));
        const float da = y[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(da * h2f(x[b].d)), acc);
        acc_min += da * h2f(x[b].dmin) * (float)sum_mins;
    }
    *out = hsum_ps(acc) - acc_min;
}
