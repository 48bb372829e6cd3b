/* dt_q8_0_avx2.c — q8_0 on AVX2: dequantize, the q8_0 x q8_0 dot, the
 * activation quantizer, and the matmul tile over weights repacked 16 rows
 * at a time.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero), one
 * stream of 544-byte blocks:
 *   per block: i8 qs[8 k-steps][2 halves][32] | f16 d[16]
 * vector (b, s, h) holds rows 8h..8h+7, values 4s..4s+3 of block b. Both
 * operands are signed, so each step is vpsignb + vpmaddubsw (|w| times a
 * with w's sign) and, as a pair of products reaches 2*127*127, a vpmaddwd
 * to int32 right away: twice the multiplier work of the 4-bit tiles per
 * value, which is what bounds q8_0 on AVX2 (VNNI would not need it). */
#include "kernels/simd_avx2.h"

#define ROWS 16

void cv_dt_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q8_0 *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const __m256 d = _mm256_set1_ps(h2f(x[b].d));
        for (int k = 0; k < 4; k++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x[b].qs + 8 * k)));
            _mm256_storeu_ps(dst + b * QK8_0 + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

void cv_dt_q8_0_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q8_0 *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK8_0; b++) {
        __m256i wq = _mm256_loadu_si256((const __m256i *)x[b].qs);
        __m256i aq = _mm256_loadu_si256((const __m256i *)y[b].qs);
        __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
    }
    *out = hsum_ps(acc);
}

void cv_dt_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n)
{
    /* The act32 quantizer's levels, in q8_0 blocks with an f16 scale. */
    block_q8_0 *y = dst;
    uint8_t row[32 + 8];
    for (int64_t b = 0; b < n / QK8_0; b++) {
        cv_act32_quantize_avx2(src + b * QK8_0, QK8_0, row);
        memcpy(y[b].qs, row, 32);
        float d;
        memcpy(&d, row + 32, 4);
        y[b].d = f32_to_f16(d);
    }
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK8_0) * ROWS * 34; }

size_t cv_q8_0_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q8_0_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK8_0, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q8_0 *w = src;
    memset(dst, 0, cv_q8_0_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++) {
        int8_t *qs = (int8_t *)dst + (size_t)g * group_bytes(n_in);
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q8_0 *row = w + (g * ROWS + r) * nb;
            for (int64_t b = 0; b < nb; b++) {
                for (int s = 0; s < 8; s++)
                    memcpy(qs + b * 544 + s * 64 + (r / 8) * 32 + 4 * (r % 8), row[b].qs + 4 * s, 4);
                ((cv_f16 *)(qs + b * 544 + 512))[r] = row[b].d;
            }
        }
    }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nb = n_in / QK8_0;
    const __m256i ones = _mm256_set1_epi16(1);
    const float *ad = act32_d(act, n_in);
    __m256 *acc = (__m256 *)(void *)out;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i i0[4], i1[4];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            i0[t] = i1[t] = _mm256_setzero_si256();
        const uint8_t *wb = wp + b * 544, *ab = act + b * 32;
        const cv_f16 *dw = (const cv_f16 *)(wb + 512);
        prefetch_range(wb + 8 * 544, 544);
        _Pragma("GCC unroll 1")
        for (int s = 0; s < 8; s++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)(wb + s * 64));
            const __m256i w1 = _mm256_load_si256((const __m256i *)(wb + s * 64 + 32));
            const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const __m256i av = bcast32(ab + t * stride + 4 * s);
                i0[t] = dot_acc32_s8(i0[t], a0, w0, av, ones);
                i1[t] = dot_acc32_s8(i1[t], a1, w1, av, ones);
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

const cv_mm_impl cv_mm_q8_0_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q8_0_pack16_bytes,
    .pack = cv_q8_0_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
