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

/* The 16 scales of a q3_K block minus 32, as int8 in sub-block order: low
 * nibbles from bytes 0-7 (sub-blocks 0-7) and their high nibbles (8-15),
 * top bits from bytes 8-11 two at a time (kernels_int.h). */
static inline __m128i q3_scales(const uint8_t *q)
{
    uint32_t a0, a1, a2;
    memcpy(&a0, q, 4);
    memcpy(&a1, q + 4, 4);
    memcpy(&a2, q + 8, 4);
    const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((a0 & m4) | ((a2 & m2) << 4)), (int)((a1 & m4) | (((a2 >> 2) & m2) << 4)),
                                     (int)(((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4)),
                                     (int)(((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

void cv_dt_q3_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    /* even sub-blocks' scales to the low 8 bytes, odd ones to the high */
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = q3_scales(x[b].scales);
        /* int16 scales: sub-block 2p in lane p of the low 128 bits, 2p+1 in
         * lane p of the high 128, so one vpshufb spreads the pair p over the
         * two halves of a product vector */
        const __m256i sc_pairs = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const int p = 4 * h + s; /* these 32 values are sub-blocks 2p and 2p+1 */
                const __m256i prod = _mm256_maddubs_epi16(q3_levels(q, hm, h, s),
                                                          _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * p)));
                const __m256i scv = _mm256_shuffle_epi8(sc_pairs, _mm256_set1_epi16((short)(0x0100 + 0x0202 * p)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, scv));
            }
        }
        /* the -4 of every level: 4 * sum_j sc_j * (sum of the activations of sub-block j) */
        const __m256i off =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), _mm256_loadu_si256((const __m256i *)y[b].bsums));
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 2));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}
