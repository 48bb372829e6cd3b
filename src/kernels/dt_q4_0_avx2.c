/* dt_q4_0_avx2.c — q4_0 on AVX2: dequantize, the q4_0 x q8_0 dot, and the
 * matmul tile over weights repacked 16 rows at a time.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), one
 * stream of 288-byte blocks (as many bytes as the GGUF blocks of 16 rows):
 *   per block: u8 qs[4][2 halves][32] | f16 d[16]
 * Vector qs[b][j][h] holds, for row 8h + r (bytes 4r..4r+3), values
 * 8j..8j+3 of block b in the low nibbles and values 8j+4..8j+7 in the high
 * nibbles. So one 32-byte load and two masks give two "k-steps": 8 rows x 4
 * values, each multiplied (vpmaddubsw) by 4 broadcast activation bytes of a
 * token; one broadcast serves both halves.
 * Nibbles are used unsigned (0..15); the -8 is applied once per block
 * through the activation sum s (act32), so no sign fix-up is needed, and
 * the 8 products-pairs of a block (each <= 2*15*127) add up in int16
 * without overflow (<= 30480), leaving one vpmaddwd per block and token.
 * The packed size equals the GGUF size. */
#include "kernels/simd_avx2.h"

#define ROWS 16
#define TOK_TILE 4

void cv_dt_q4_0_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q4_0 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < n / QK4_0; b++) {
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d));
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        /* low nibbles are values 0..15, high nibbles values 16..31 */
        __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
        v = _mm256_sub_epi8(_mm256_and_si256(v, m4), off);
        float *y = dst + b * QK4_0;
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(w), d));
        }
    }
}

void cv_dt_q4_0_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK4_0; b++) {
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i wq = _mm256_sub_epi8(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4), off);
        __m256i aq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        /* signed x signed through vpmaddubsw: |w| times a with w's sign */
        __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

static size_t pack_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * (size_t)(n_in / QK4_0) * (ROWS * 18);
}

static void pack(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK4_0, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q4_0 *w = src;
    uint8_t *out = dst;
    memset(dst, 0, pack_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++) {
        uint8_t *qs = out + (size_t)g * nb * ROWS * 18;
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q4_0 *row = w + (g * ROWS + r) * nb;
            const int half = r / 8, rr = r % 8;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t v[QK4_0];
                for (int j = 0; j < 16; j++) {
                    v[j] = row[b].qs[j] & 0x0F;
                    v[j + 16] = row[b].qs[j] >> 4;
                }
                for (int j = 0; j < 4; j++)
                    for (int c = 0; c < 4; c++)
                        qs[b * 288 + j * 64 + half * 32 + 4 * rr + c] = (uint8_t)(v[8 * j + c] | (v[8 * j + 4 + c] << 4));
                ((cv_f16 *)(qs + b * 288 + 256))[r] = row[b].d;
            }
        }
    }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

/* One group of 16 rows against T tokens (T a compile-time constant after
 * inlining, so the int16 sums live in registers; the f32 sums, 2T vectors,
 * stay in L1): out[t][16 rows]. Activation rows are `stride` bytes apart.
 * Each broadcast of 4 activation bytes feeds two vpmaddubsw (rows 0-7 and
 * 8-15), and each unpacked weight vector feeds T of them. */
static inline __attribute__((always_inline)) void tile(const uint8_t *qs, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nb = n_in / QK4_0;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const float *ad = act32_d(act, n_in), *as = act32_s(act, n_in);
    __m256 *acc = (__m256 *)(void *)out; /* [T][2], 32-byte aligned by the caller */
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i s0[TOK_TILE], s1[TOK_TILE];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            s0[t] = s1[t] = _mm256_setzero_si256();
        const uint8_t *qb = qs + b * 288, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(qb + 256);
        prefetch_range(qb + 16 * 288, 288);
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
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            /* d_w * (d_a * sum(q a) - 8 s_a) */
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
            const __m256 so = _mm256_set1_ps(-8.0f * *(const float *)((const uint8_t *)(as + b) + t * stride));
            __m256 v0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s0[t], ones)), da, so);
            __m256 v1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s1[t], ones)), da, so);
            acc[2 * t] = _mm256_fmadd_ps(v0, d0, acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(v1, d1, acc[2 * t + 1]);
        }
    }
}

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK4_0) * ROWS * 18; }
CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q4_0_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = pack_bytes,
    .pack = pack,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
