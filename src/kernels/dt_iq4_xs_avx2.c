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

/* The 8 sub-block scales of a block minus 32, as int16 in the low 128
 * bits: each 32-bit lane shifts its own nibble of scales_l and its own 2
 * bits of scales_h into place (vpsrlvd), then one pack. */
static inline __m128i iq4_xs_scales(const block_iq4_xs *x)
{
    uint32_t lo;
    memcpy(&lo, x->scales_l, 4);
    const __m256i l = _mm256_srlv_epi32(_mm256_set1_epi32((int)lo), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i l4 = _mm256_and_si256(l, _mm256_set1_epi32(0xF)), h2 = _mm256_and_si256(h, _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(l4, _mm256_slli_epi32(h2, 4)), _mm256_set1_epi32(32));
    return _mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1));
}

void cv_dt_iq4_xs_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m256i ls = _mm256_broadcastsi128_si256(iq4_xs_scales(&x[b]));
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 64; k++) {
            /* sub-blocks 2k (bytes 0-15) and 2k+1 (16-31) in one load; each
             * takes its low nibbles then its high ones */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * k));
            const __m256i lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(q, m4));
            const __m256i hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            const __m256i wq[2] = { _mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31) };
            for (int e = 0; e < 2; e++) {
                const int j = 2 * k + e;
                const __m256i aq = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq[e], wq[e]), _mm256_sign_epi8(aq, wq[e]));
                const __m256i sc = _mm256_shuffle_epi8(ls, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}
