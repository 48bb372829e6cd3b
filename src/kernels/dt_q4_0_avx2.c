/* dt_q4_0_avx2.c — q4_0 on AVX2: dequantize, the q4_0 x q8_0 dot, and the
 * matmul over weights repacked 16 rows at a time (the tile and its layout:
 * tile_q4x_avx2.h). */
#include "kernels/tile_q4x_avx2.h"

#define ROWS 16

void cv_dt_q4_0_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q4_0 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < n / QK4_0; b++) {
        const __m256 d = _mm256_set1_ps(h2f(x[b].d));
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
        const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK4_0) * ROWS * 18; }
size_t cv_q4_0_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q4_0_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK4_0, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q4_0 *w = src;
    memset(dst, 0, cv_q4_0_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q4_0 *row = w + (g * ROWS + r) * nb;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *blk = (uint8_t *)dst + (size_t)g * group_bytes(n_in) + b * 288;
                q4x_pack_nibbles(blk, r, row[b].qs);
                ((cv_f16 *)(blk + 256))[r] = row[b].d;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    q4x_tile(wp, act, stride, n_in, T, out, false);
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q4_0_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q4_0_pack16_bytes,
    .pack = cv_q4_0_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
