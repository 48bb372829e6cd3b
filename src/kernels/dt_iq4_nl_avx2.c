/* dt_iq4_nl_avx2.c — iq4_nl on AVX2: dequantize (bit-exact: d * K[q]),
 * the iq4_nl x q8_0 dot, and the matmul tile over weights repacked 16 rows
 * at a time. The table lookup is one vpshufb: the 16 levels fit a 128-bit
 * register, and the nibbles are its indices.
 *
 * Packed layout: q4_0's (tile_q4x_avx2.h), since the block is the same
 * f16 d + 16 bytes of nibbles: per group of 16 rows and block of 32,
 *   u8 qs[4][2 halves][32] | f16 d[16]    = 288 bytes, the GGUF size.
 * The levels are signed and reach -127, so unlike q4_0 they cannot be
 * offset into vpmaddubsw's unsigned operand (K + 127 times a 127 overflows
 * a pair's int16): each step is q8_0's vpsignb + vpmaddubsw + vpmaddwd
 * (dot_acc32_s8). That makes the tile compute like q8_0's while reading
 * half its bytes, which is what decode, bound by memory, pays for. */
#include "kernels/tile_q4x_avx2.h"

#define ROWS 16
#define BLOCK_BYTES 288

static inline __m128i levels128(void) { return _mm_loadu_si128((const __m128i *)cv_iq4_values); }

void cv_dt_iq4_nl_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_iq4_nl *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), tbl = _mm256_broadcastsi128_si256(levels128());
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        const __m256 d = _mm256_set1_ps(h2f(x[b].d));
        const __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        /* low nibbles are values 0..15, high nibbles values 16..31 */
        const __m256i v = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
        float *y = dst + b * QK4_NL;
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(w)));
        }
    }
}

void cv_dt_iq4_nl_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i tbl = _mm256_broadcastsi128_si256(levels128());
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        const __m256i wq = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
        const __m256i aq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), d, acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK4_NL) * BLOCK_BYTES; }
size_t cv_iq4_nl_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_iq4_nl_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK4_NL, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_iq4_nl *w = src;
    memset(dst, 0, cv_iq4_nl_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_iq4_nl *row = w + (g * ROWS + r) * nb;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *blk = (uint8_t *)dst + (size_t)g * group_bytes(n_in) + b * BLOCK_BYTES;
                q4x_pack_nibbles(blk, r, row[b].qs);
                ((cv_f16 *)(blk + 256))[r] = row[b].d;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

/* 16 rows x T tokens over all blocks: out[t][16]. Zero rows of a partial
 * group hold nibble 0, level -127, under a zero scale: they stay 0. */
static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nb = n_in / QK4_NL;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i tbl = _mm256_broadcastsi128_si256(levels128());
    const float *ad = act32_d(act, n_in);
    __m256 *acc = (__m256 *)(void *)out; /* [T][2], 32-byte aligned by the caller */
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i i0[4], i1[4];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            i0[t] = i1[t] = _mm256_setzero_si256();
        const uint8_t *qb = wp + b * BLOCK_BYTES, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(qb + 256);
        prefetch_range(qb + 16 * BLOCK_BYTES, BLOCK_BYTES);
        _Pragma("GCC unroll 1")
        for (int j = 0; j < 4; j++) {
            const __m256i *pj = (const __m256i *)(qb + j * 64);
            /* low nibbles (values 8j..8j+3) for all tokens, then high
             * (8j+4..8j+7): two live weight vectors and their |w| */
            _Pragma("GCC unroll 2")
            for (int h = 0; h < 2; h++) {
                __m256i w0 = _mm256_load_si256(pj), w1 = _mm256_load_si256(pj + 1);
                if (h) {
                    w0 = _mm256_srli_epi16(w0, 4);
                    w1 = _mm256_srli_epi16(w1, 4);
                }
                w0 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w0, m4));
                w1 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w1, m4));
                const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    const __m256i av = bcast32(ab + t * stride + j * 8 + 4 * h);
                    i0[t] = dot_acc32_s8(i0[t], a0, w0, av, ones);
                    i1[t] = dot_acc32_s8(i1[t], a1, w1, av, ones);
                }
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dw));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dw + 8)));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), _mm256_mul_ps(d0, da), acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), _mm256_mul_ps(d1, da), acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_iq4_nl_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_iq4_nl_pack16_bytes,
    .pack = cv_iq4_nl_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
