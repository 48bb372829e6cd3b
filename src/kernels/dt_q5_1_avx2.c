/* dt_q5_1_avx2.c — q5_1 on AVX2: dequantize (q * d + m, unfused), the
 * q5_1 x q8_1 dot, and the matmul over weights repacked 16 rows at a time
 * (tile_q5x_avx2.h; activations in act32, whose sums carry the min term). */
#include "kernels/tile_q5x_avx2.h"

#define ROWS 16

static inline __m256i q5_bits(const uint8_t qh4[4])
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

void cv_dt_q5_1_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q5_1 *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / QK5_1; b++) {
        const __m256 d = _mm256_set1_ps(h2f(x[b].d)), m = _mm256_set1_ps(h2f(x[b].m));
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i v = _mm256_or_si256(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4), q5_bits(x[b].qh));
        for (int k = 0; k < 4; k++) {
            __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
            __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
            _mm256_storeu_ps(dst + b * QK5_1 + 8 * k, _mm256_add_ps(_mm256_mul_ps(f, d), m));
        }
    }
}

void cv_dt_q5_1_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    float offs = 0;
    for (int64_t b = 0; b < n / QK5_1; b++) {
        __m128i q = _mm_loadu_si128((const __m128i *)x[b].qs);
        __m256i wq = _mm256_or_si256(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4), q5_bits(x[b].qh));
        __m256i p = _mm256_maddubs_epi16(wq, _mm256_loadu_si256((const __m256i *)y[b].qs));
        const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), d, acc);
        offs += h2f(x[b].m) * h2f(y[b].s);
    }
    *out = hsum_ps(acc) + offs;
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK5_1) * ROWS * 24; }
size_t cv_q5_1_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q5_1_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nb = n_in / QK5_1, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q5_1 *w = src;
    memset(dst, 0, cv_q5_1_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q5_1 *row = w + (g * ROWS + r) * nb;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *blk = (uint8_t *)dst + (size_t)g * group_bytes(n_in) + b * 384;
                q5x_pack_levels(blk, r, row[b].qs, row[b].qh);
                ((cv_f16 *)(blk + 320))[r] = row[b].d;
                ((cv_f16 *)(blk + 352))[r] = row[b].m;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act32_quantize_avx2(x, w->n_in, dst); }

static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    q5x_tile(wp, act, stride, n_in, T, out, true);
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q5_1_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q5_1_pack16_bytes,
    .pack = cv_q5_1_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
