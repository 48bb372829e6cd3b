/* dt_iq4_xs_avx2.c — iq4_xs on AVX2: dequantize (bit-exact: (d * (ls - 32))
 * * K[q]) and the iq4_xs x q8_K dot. Each sub-block of 32 is iq4_nl's
 * shape: one vpshufb turns its 16 bytes of nibbles into 32 signed levels,
 * multiplied by the activations with q8_0's sign trick and summed to int32
 * under the sub-block's scale by one vpmaddwd. The matmul runs through the
 * generic driver (docs/KERNELS.md says what a tile would add). */
#include "kernels/simd_avx2.h"

static inline __m256i levels(const uint8_t *qs, __m256i tbl, __m256i m4)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
}

void cv_dt_iq4_xs_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_iq4_xs *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const __m256 dl = _mm256_set1_ps(d * (float)iq4_xs_scale(x[b].scales_l, x[b].scales_h, j));
            const __m256i v = levels(x[b].qs + 16 * j, tbl, m4);
            float *y = dst + b * QK_K + 32 * j;
            for (int k = 0; k < 4; k++) {
                __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
                _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(w)));
            }
        }
    }
}

void cv_dt_iq4_xs_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < QK_K / 32; j++) {
            const __m256i wq = levels(x[b].qs + 16 * j, tbl, m4);
            const __m256i aq = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * j));
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
            const __m256i ls = _mm256_set1_epi16((short)iq4_xs_scale(x[b].scales_l, x[b].scales_h, j));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ls));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}
