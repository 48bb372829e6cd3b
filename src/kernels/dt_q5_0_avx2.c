/* dt_q5_0_avx2.c — q5_0 on AVX2: dequantize, the q5_0 x q8_0 dot, and the
 * matmul tile over weights repacked 16 rows at a time (q5_0 is what
 * llama-quantize puts in a Q4_K_M file where rows are not a multiple of
 * 256, e.g. every hidden-size row of qwen2.5-0.5b).
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), one
 * stream of 352-byte blocks (scales inside each block: a second stream
 * would halve what one core streams from DRAM):
 *   per block: u8 qh[2 halves][32]    bit s of byte (r, c) = bit 4 of
 *                                     value 4s+c of row r (k-step s) |
 *              u8 qs[4][2 halves][32] (the q4_0 tile's nibbles) |
 *              f16 d[16]
 * (fields in reading order: the prefetchers follow a monotonic stream)
 * (22 bytes per row and block, the GGUF size). Levels are used unsigned
 * (0..31); the -16 goes through the activation sum s. Four vpmaddubsw
 * (pairs <= 2*31*127) fit an int16 sum. */
#include "kernels/simd_avx2.h"

#define ROWS 16

static inline __m256i q5_bits(const block_q5_0 *x)
{
    /* 32 bytes: 0x10 where bit j of qh is set (value j), else 0. */
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

void cv_dt_q5_0_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q5_0 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(16);
    for (int64_t b = 0; b < n / QK5_0; b++) {
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d));
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
        v = _mm256_sub_epi8(_mm256_or_si256(v, q5_bits(&x[b])), off);
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
            _mm256_storeu_ps(dst + b * QK5_0 + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(w), d));
        }
    }
}

void cv_dt_q5_0_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK5_0; b++) {
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
        wq = _mm256_sub_epi8(_mm256_or_si256(wq, q5_bits(&x[b])), off);
        __m256i aq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK5_0) * ROWS * 22; }
static size_t pack_bytes(int64_t n_in, int64_t n_out) { return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in); }

static void pack(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK5_0, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q5_0 *w = src;
    memset(dst, 0, pack_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++) {
        uint8_t *gp = (uint8_t *)dst + (size_t)g * group_bytes(n_in);
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q5_0 *row = w + (g * ROWS + r) * nb;
            const int h = r / 8, rr = r % 8;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *bp = gp + b * 352;
                uint32_t qh;
                memcpy(&qh, row[b].qh, 4);
                for (int i = 0; i < QK5_0; i++) {
                    const int lo = i < 16 ? row[b].qs[i] & 0xF : row[b].qs[i - 16] >> 4;
                    const int hb = (qh >> i) & 1, s = i / 4, c = i % 4;
                    bp[64 + (s / 2) * 64 + h * 32 + 4 * rr + c] |= (uint8_t)(lo << (4 * (s & 1)));
                    bp[h * 32 + 4 * rr + c] |= (uint8_t)(hb << s);
                }
                ((cv_f16 *)(bp + 320))[r] = row[b].d;
            }
        }
    }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

/* Bit 4 of the levels of k-step s from the qh vector h. */
static inline __m256i hbit(__m256i h, int s, __m256i m10)
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

static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nb = n_in / QK5_0;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    const float *ad = act32_d(act, n_in), *as = act32_s(act, n_in);
    __m256 *acc = (__m256 *)(void *)out;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *bp = wp + b * 352, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(bp + 320);
        prefetch_range(bp + 12 * 352, 352);
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
                w0 = _mm256_or_si256(_mm256_and_si256(w0, m4), hbit(_mm256_load_si256(hp), s, m10));
                w1 = _mm256_or_si256(_mm256_and_si256(w1, m4), hbit(_mm256_load_si256(hp + 1), s, m10));
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
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            /* d_w * (d_a * sum(q a) - 16 s_a) */
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + b) + t * stride));
            const __m256 so = _mm256_set1_ps(-16.0f * *(const float *)((const uint8_t *)(as + b) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), da, so), d0, acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), da, so), d1, acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q5_0_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = pack_bytes,
    .pack = pack,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
