/* tile_q4x_avx2.h — the 16-row x 4-token matmul tile shared by q4_0 and
 * q4_1 (their blocks differ only by q4_1's per-block min), included by
 * dt_q4_0_avx2.c and dt_q4_1_avx2.c.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), one
 * stream of blocks of 32 values, in reading order:
 *   u8 qs[4][2 halves][32] | f16 d[16] | (q4_1 only) f16 m[16]
 * = 288 (q4_0) or 320 (q4_1) bytes, the GGUF size of 16 rows' blocks.
 * Vector qs[j][h] holds, for row 8h + r (bytes 4r..4r+3), values 8j..8j+3
 * of the block in the low nibbles and values 8j+4..8j+7 in the high
 * nibbles. So one 32-byte load and two masks give two "k-steps": 8 rows x 4
 * values, each multiplied (vpmaddubsw) by 4 broadcast activation bytes of a
 * token; one broadcast serves both halves. Nibbles are used unsigned
 * (0..15): q4_0's -8 and q4_1's min are applied once per block through the
 * activation sum s (act32), and the 8 product pairs of a block (each
 * <= 2*15*127) add up in int16 without overflow (<= 30480), leaving one
 * vpmaddwd per block and token. */
#ifndef CV_TILE_Q4X_AVX2_H
#define CV_TILE_Q4X_AVX2_H

#include "kernels/simd_avx2.h"

#define Q4X_BLOCK_BYTES(has_min) ((has_min) ? 320 : 288)

/* Places one row's 16 bytes of nibbles (GGUF order: value j low, j+16
 * high) into a packed block for row r of the group. */
static inline void q4x_pack_nibbles(uint8_t *blk, int r, const uint8_t qs[16])
{
    uint8_t v[32];
    for (int j = 0; j < 16; j++) {
        v[j] = qs[j] & 0x0F;
        v[j + 16] = qs[j] >> 4;
    }
    const int half = r / 8, rr = r % 8;
    for (int j = 0; j < 4; j++)
        for (int c = 0; c < 4; c++)
            blk[j * 64 + half * 32 + 4 * rr + c] = (uint8_t)(v[8 * j + c] | (v[8 * j + 4 + c] << 4));
}

/* One group of 16 rows against T tokens (T a compile-time constant after
 * inlining, so the int16 sums live in registers; the f32 sums, 2T vectors,
 * stay in L1): out[t][16 rows]. Activation rows are `stride` bytes apart.
 * Each broadcast of 4 activation bytes feeds two vpmaddubsw (rows 0-7 and
 * 8-15), and each unpacked weight vector feeds T of them. */
static inline __attribute__((always_inline)) void q4x_tile(const uint8_t *qs, const uint8_t *act, size_t stride,
                                                           int64_t n_in, int T, float *out, bool has_min)
{
    const int64_t nb = n_in / 32;
    const int64_t bb = Q4X_BLOCK_BYTES(has_min);
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const float *ad = act32_d(act, n_in), *as = act32_s(act, n_in);
    __m256 *acc = (__m256 *)(void *)out; /* [T][2], 32-byte aligned by the caller */
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i s0[4], s1[4];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            s0[t] = s1[t] = _mm256_setzero_si256();
        const uint8_t *qb = qs + b * bb, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(qb + 256);
        prefetch_range(qb + 16 * bb, (size_t)bb);
        _Pragma("GCC unroll 1")
        for (int j = 0; j < 4; j++) {
            /* Low nibbles for all tokens, then high nibbles: keeps 2 weight
             * vectors live instead of 4, so the 2T sums stay in registers. */
            const __m256i *pj = (const __m256i *)(qb + j * 64);
            __m256i w0 = _mm256_and_si256(_mm256_load_si256(pj), m4);
            __m256i w1 = _mm256_and_si256(_mm256_load_si256(pj + 1), m4);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const __m256i av = bcast32(ab + t * stride + j * 8);
                s0[t] = dot_acc16(s0[t], w0, av);
                s1[t] = dot_acc16(s1[t], w1, av);
            }
            w0 = _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(pj), 4), m4);
            w1 = _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(pj + 1), 4), m4);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const __m256i av = bcast32(ab + t * stride + j * 8 + 4);
                s0[t] = dot_acc16(s0[t], w0, av);
                s1[t] = dot_acc16(s1[t], w1, av);
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dw));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 8)));
        if (!has_min) {
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                /* q4_0: d_w * (d_a * sum(q a) - 8 s_a) */
                const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
                const __m256 so = _mm256_set1_ps(-8.0f * *(const float *)((const uint8_t *)(as + b) + t * stride));
                __m256 v0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s0[t], ones)), da, so);
                __m256 v1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s1[t], ones)), da, so);
                acc[2 * t] = _mm256_fmadd_ps(v0, d0, acc[2 * t]);
                acc[2 * t + 1] = _mm256_fmadd_ps(v1, d1, acc[2 * t + 1]);
            }
        } else {
            const __m256 m0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 16)));
            const __m256 m1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 24)));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                /* q4_1: d_w * d_a * sum(q a) + m_w * s_a */
                const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
                const __m256 sa = _mm256_broadcast_ss((const float *)((const uint8_t *)(as + b) + t * stride));
                __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s0[t], ones)), da);
                __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s1[t], ones)), da);
                acc[2 * t] = _mm256_fmadd_ps(m0, sa, _mm256_fmadd_ps(v0, d0, acc[2 * t]));
                acc[2 * t + 1] = _mm256_fmadd_ps(m1, sa, _mm256_fmadd_ps(v1, d1, acc[2 * t + 1]));
            }
        }
    }
}

#endif
