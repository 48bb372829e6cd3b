/* dt_mxfp4_avx2.c — mxfp4 on AVX2: dequantize (bit-exact: T[q] * 2^(e-128)),
 * the mxfp4 x q8_0 dot, and the matmul tile over weights repacked 16 rows
 * at a time. The code lookup is one vpshufb (16 int8 levels in a 128-bit
 * register, the nibbles as indices); the E8M0 scale becomes a float by
 * building its bits.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), blocks
 * of 32 taken in pairs so every vector load stays 32-byte aligned while
 * the bytes equal the GGUF size (16 x 17 per block):
 *   u8 e[2 blocks][16] | u8 qs[2 blocks][4][2 halves][32]   = 544 bytes
 * and an odd last block as u8 e[16] | 16 zero bytes | qs[4][2][32] (288).
 * qs is q4_0's tile layout (tile_q4x_avx2.h); e[b][r] is row r's exponent.
 * Levels are used unsigned, T + 12 (0..24), and the 12 taken back once per
 * block through the activation sum s (act32). A pair of products is then
 * at most 2*24*127 = 6096, so four k-steps (of a block's eight) add up in
 * int16 before a vpmaddwd widens them: q5_0's rhythm, with a vpshufb in
 * place of q5_0's high-bit merge. */
#include "kernels/tile_q4x_avx2.h"

#define ROWS 16
#define PAIR_BYTES 544
#define BLOCK_BYTES 272 /* 16 rows x 17: the stream's bytes per block, on average */
#define LEVEL_OFFSET 12

void cv_dt_mxfp4_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_mxfp4 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_mxfp4_values));
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        const __m256 d = _mm256_set1_ps(e8m0_half_to_f32(x[b].e));
        const __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m256i v = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
        float *y = dst + b * QK_MXFP4;
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(w), d));
        }
    }
}

void cv_dt_mxfp4_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_mxfp4 *x = w;
    const block_q8_0 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_mxfp4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m256i wq = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
        const __m256i aq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        const __m256 d = _mm256_set1_ps(e8m0_half_to_f32(x[b].e) * h2f(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), d, acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

/* Offsets in a group of block b's exponents and levels. */
static inline size_t e_offset(int64_t b) { return (size_t)(b / 2) * PAIR_BYTES + (size_t)(b % 2) * 16; }
static inline size_t qs_offset(int64_t b) { return (size_t)(b / 2) * PAIR_BYTES + 32 + (size_t)(b % 2) * 256; }

static size_t group_bytes(int64_t n_in)
{
    const int64_t nb = n_in / QK_MXFP4;
    return (size_t)(nb / 2) * PAIR_BYTES + (size_t)(nb % 2) * 288;
}

size_t cv_mxfp4_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_mxfp4_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK_MXFP4, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_mxfp4 *w = src;
    memset(dst, 0, cv_mxfp4_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++) {
        uint8_t *gp = (uint8_t *)dst + (size_t)g * group_bytes(n_in);
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_mxfp4 *row = w + (g * ROWS + r) * nb;
            for (int64_t b = 0; b < nb; b++) {
                q4x_pack_nibbles(gp + qs_offset(b), r, row[b].qs);
                gp[e_offset(b) + r] = row[b].e;
            }
        }
    }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

/* 16 rows x T tokens over all blocks: out[t][16]. */
static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nb = n_in / QK_MXFP4;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    /* T + 12 as bytes: the unsigned levels */
    const __m256i tbl = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_mxfp4_values)),
                                        _mm256_set1_epi8(LEVEL_OFFSET));
    const float *ad = act32_d(act, n_in), *as = act32_s(act, n_in);
    __m256 *acc = (__m256 *)(void *)out; /* [T][2], 32-byte aligned by the caller */
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qb = wp + qs_offset(b), *eb = wp + e_offset(b), *ab = act + b * 32;
        prefetch_range(qb + 16 * BLOCK_BYTES, BLOCK_BYTES);
        __m256i i0[4], i1[4];
        _Pragma("GCC unroll 2")
        for (int q = 0; q < 2; q++) { /* k-steps 4q..4q+3: one int16 round */
            __m256i s0[4], s1[4];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++)
                s0[t] = s1[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int k = 0; k < 4; k++) {
                /* k-step s = 4q + k: values 8(s/2) + 4(s%2) .. +3, in the
                 * low nibbles of vector pair s/2 for even s, high for odd */
                const int s = 4 * q + k;
                const __m256i *pp = (const __m256i *)(qb + (s / 2) * 64);
                __m256i w0 = _mm256_load_si256(pp), w1 = _mm256_load_si256(pp + 1);
                if (s & 1) {
                    w0 = _mm256_srli_epi16(w0, 4);
                    w1 = _mm256_srli_epi16(w1, 4);
                }
                w0 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w0, m4));
                w1 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w1, m4));
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
        const __m256 d0 = e8m0_half_ps(eb), d1 = e8m0_half_ps(eb + 8);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            /* d_w * (d_a * sum((T + 12) a) - 12 s_a) */
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
            const __m256 so =
                _mm256_set1_ps(-(float)LEVEL_OFFSET * *(const float *)((const uint8_t *)(as + b) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), da, so), d0, acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), da, so), d1, acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_mxfp4_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_mxfp4_pack16_bytes,
    .pack = cv_mxfp4_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
