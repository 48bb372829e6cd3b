/* tile_q5x_avx2.h — the 16-row x 4-token matmul tile shared by q5_0 and
 * q5_1 (their blocks differ only by q5_1's per-block min), included by
 * dt_q5_0_avx2.c and dt_q5_1_avx2.c.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), one
 * stream of blocks of 32 values, fields in reading order (the prefetchers
 * follow a monotonic stream):
 *   u8 qh[2 halves][32]    bit s of byte (r, c) = bit 4 of value 4s+c of
 *                          row 8h + r (k-step s)
 *   u8 qs[4][2 halves][32] the q4 tiles' nibbles (tile_q4x_avx2.h)
 *   f16 d[16] | (q5_1 only) f16 m[16]
 * = 352 (q5_0) or 384 (q5_1) bytes, the GGUF size of 16 rows' blocks.
 * Levels are used unsigned (0..31): q5_0's -16 and q5_1's min go through
 * the activation sum s (act32). Four vpmaddubsw (pairs <= 2*31*127) fit an
 * int16 sum, so a block takes two vpmaddwd per token and half. */
#ifndef CV_TILE_Q5X_AVX2_H
#define CV_TILE_Q5X_AVX2_H

#include "kernels/simd_avx2.h"

#define Q5X_BLOCK_BYTES(has_min) ((has_min) ? 384 : 352)

/* Places one row's block (GGUF order: value j's low nibble in qs[j] (j <
 * 16) or the high nibble of qs[j-16], bit 4 in bit j of qh) into a packed
 * block for row r of the group. */
static inline void q5x_pack_levels(uint8_t *blk, int r, const uint8_t qs[16], const uint8_t qh4[4])
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const int h = r / 8, rr = r % 8;
    for (int i = 0; i < 32; i++) {
        const int lo = i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4;
        const int hb = (qh >> i) & 1, s = i / 4, c = i % 4;
        blk[64 + (s / 2) * 64 + h * 32 + 4 * rr + c] |= (uint8_t)(lo << (4 * (s & 1)));
        blk[h * 32 + 4 * rr + c] |= (uint8_t)(hb << s);
    }
}

/* Bit 4 of the levels of k-step s from the qh vector h. */
static inline __m256i q5x_hbit(__m256i h, int s, __m256i m10)
{
    switch (s) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(h, 4), m10);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(h, 3), m10);
    case 2: return _mm256_and_si256(_mm256_slli_epi16(h, 2), m10);
    case 3: return _mm256_and_si256(_mm256_slli_epi16(h, 1), m10);
    case 4: return _mm256_and_si256(h, m10);
    case 5: return _mm256_and_si256(_mm256_srli_epi16(h, 1), m10);
    case 6: return _mm256_and_si256(_mm256_srli_epi16(h, 2), m10);
    default: return _mm256_and_si256(_mm256_srli_epi16(h, 3), m10);
    }
}

static inline __attribute__((always_inline)) void q5x_tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                           int64_t n_in, int T, float *out, bool has_min)
{
    const int64_t nb = n_in / 32, bb = Q5X_BLOCK_BYTES(has_min);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    const float *ad = act32_d(act, n_in), *as = act32_s(act, n_in);
    __m256 *acc = (__m256 *)(void *)out;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *bp = wp + b * bb, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(bp + 320);
        prefetch_range(bp + 12 * bb, (size_t)bb);
        __m256i i0[4], i1[4];
        _Pragma("GCC unroll 2")
        for (int q = 0; q < 2; q++) { /* k-steps 4q..4q+3: one int16 round */
            __m256i s0[4], s1[4];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++)
                s0[t] = s1[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int k = 0; k < 4; k++) {
                const int s = 4 * q + k;
                const __m256i *pp = (const __m256i *)(bp + 64 + (s / 2) * 64);
                const __m256i *hp = (const __m256i *)bp;
                __m256i w0 = (s & 1) ? _mm256_srli_epi16(_mm256_load_si256(pp), 4) : _mm256_load_si256(pp);
                __m256i w1 = (s & 1) ? _mm256_srli_epi16(_mm256_load_si256(pp + 1), 4) : _mm256_load_si256(pp + 1);
                w0 = _mm256_or_si256(_mm256_and_si256(w0, m4), q5x_hbit(_mm256_load_si256(hp), s, m10));
                w1 = _mm256_or_si256(_mm256_and_si256(w1, m4), q5x_hbit(_mm256_load_si256(hp + 1), s, m10));
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    const __m256i av = bcast32(ab + t * stride + 4 * s);
                    s0[t] = dot_acc16(s0[t], w0, av);
                    s1[t] = dot_acc16(s1[t], w1, av);
                }
            }
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const __m256i v0 = _mm256_madd_epi16(s0[t], ones), v1 = _mm256_madd_epi16(s1[t], ones);
                i0[t] = q ? _mm256_add_epi32(i0[t], v0) : v0;
                i1[t] = q ? _mm256_add_epi32(i1[t], v1) : v1;
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dw));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 8)));
        if (!has_min) {
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                /* q5_0: d_w * (d_a * sum(q a) - 16 s_a) */
                const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
                const __m256 so = _mm256_set1_ps(-16.0f * *(const float *)((const uint8_t *)(as + b) + t * stride));
                acc[2 * t] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), da, so), d0, acc[2 * t]);
                acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), da, so), d1, acc[2 * t + 1]);
            }
        } else {
            const __m256 m0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 16)));
            const __m256 m1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 24)));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                /* q5_1: d_w * d_a * sum(q a) + m_w * s_a */
                const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
                const __m256 sa = _mm256_broadcast_ss((const float *)((const uint8_t *)(as + b) + t * stride));
                const __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(i0[t]), da);
                const __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(i1[t]), da);
                acc[2 * t] = _mm256_fmadd_ps(m0, sa, _mm256_fmadd_ps(v0, d0, acc[2 * t]));
                acc[2 * t + 1] = _mm256_fmadd_ps(m1, sa, _mm256_fmadd_ps(v1, d1, acc[2 * t + 1]));
            }
        }
    }
}

#endif
