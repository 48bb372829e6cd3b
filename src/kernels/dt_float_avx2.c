/* dt_float_avx2.c — the float weight types on AVX2 (f32, f16 via F16C,
 * bf16 by shifting): row conversion, dot products with f32 activations,
 * and the matmul tile of 2 rows x 3 tokens, which reads the rows in place. */
#include "kernels/simd_avx2.h"

void cv_dt_f32_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    *out = cv_vec_ops_avx2.dot_f32(w, a, n);
}

void cv_dt_f16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.f16_to_f32(src, dst, n); }
void cv_dt_f16_from_f32_avx2(const float *src, void *dst, int64_t n) { cv_vec_ops_avx2.f32_to_f16(src, dst, n); }
void cv_dt_f16_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    *out = cv_vec_ops_avx2.dot_f16(w, a, n);
}

void cv_dt_bf16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.bf16_to_f32(src, dst, n); }

static inline __m256 bf16x8(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

void cv_dt_bf16_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const uint16_t *x = w;
    const float *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(bf16x8(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(bf16x8(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(bf16x8(x + i), _mm256_loadu_ps(y + i), acc0);
    float s = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        s += cv_bf16_to_fp32(x[i]) * y[i];
    *out = s;
}

/* ---- matmul: 2 rows x 3 tokens of float weights ---- */

/* The weights stay as they are (f32, f16 or bf16 rows, read in place) and
 * the activations are f32 rows. Each (row, token) is summed exactly as the
 * dot products above sum it (two 8-lane sums over alternate 8 values, a
 * last 8 into the first, hsum_ps of their sum, then the n_in % 8 tail one
 * by one), so the results are the dots' bits, whatever else shares a tile:
 * a token's outputs are the same alone or batched. A tile keeps 12 sums:
 * per 8 inputs 3 activation vectors and 2 weight rows (converted once)
 * meet in 6 FMAs, 5 loads where the dots issue 12 (4 rows x 3 tokens
 * would need 24 sums: more than the 16 registers). */
enum { FT_F32, FT_F16, FT_BF16 };
#define FT_ROWS 2
#define FT_TOKS 3

static inline __attribute__((always_inline)) __m256 ft_load(const uint8_t *row, int64_t i, const int kind)
{
    if (kind == FT_F32)
        return _mm256_loadu_ps((const float *)row + i);
    if (kind == FT_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return bf16x8((const uint16_t *)row + i);
}

static inline __attribute__((always_inline)) float ft_one(const uint8_t *row, int64_t i, const int kind)
{
    if (kind == FT_F32)
        return ((const float *)row)[i];
    if (kind == FT_F16)
        return cv_fp16_to_fp32(((const uint16_t *)row)[i]);
    return cv_bf16_to_fp32(((const uint16_t *)row)[i]);
}

/* One of the two sums (acc) of nr rows x nt tokens += the 8 values from i. */
#define FT_STEP(acc, i)                                                                                               \
    do {                                                                                                              \
        __m256 xv[FT_TOKS];                                                                                           \
        _Pragma("GCC unroll 3") for (int t = 0; t < nt; t++) xv[t] = _mm256_loadu_ps(x + t * xs + (i));               \
        _Pragma("GCC unroll 2") for (int r = 0; r < nr; r++)                                                          \
        {                                                                                                             \
            const __m256 wv = ft_load(w + r * rb, (i), kind);                                                         \
            _Pragma("GCC unroll 3") for (int t = 0; t < nt; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);   \
        }                                                                                                             \
    } while (0)

static inline __attribute__((always_inline)) void ft_tile(const uint8_t *w, size_t rb, const float *x, size_t xs,
                                                          int64_t n, const cv_mm_job *job, int64_t t0, int64_t r0,
                                                          const int nr, const int nt, const int kind)
{
    __m256 a0[FT_ROWS][FT_TOKS], a1[FT_ROWS][FT_TOKS];
    _Pragma("GCC unroll 2")
    for (int r = 0; r < nr; r++)
        _Pragma("GCC unroll 3")
        for (int t = 0; t < nt; t++)
            a0[r][t] = a1[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        FT_STEP(a0, i);
        FT_STEP(a1, i + 8);
    }
    if (i + 8 <= n) {
        FT_STEP(a0, i);
        i += 8;
    }
    _Pragma("GCC unroll 2")
    for (int r = 0; r < nr; r++)
        _Pragma("GCC unroll 3")
        for (int t = 0; t < nt; t++) {
            float s = hsum_ps(_mm256_add_ps(a0[r][t], a1[r][t]));
            for (int64_t j = i; j < n; j++)
                s += ft_one(w + r * rb, j, kind) * x[t * xs + j];
            cv_mm_y_row(job, t0 + t)[r0 + r] = s;
        }
}
#undef FT_STEP

/* Tokens a chunk: their activations (~256 KB) stay in L2 while every group
 * of rows of the call meets them; a multiple of FT_TOKS. */
static int64_t ft_chunk(int64_t n_in)
{
    const int64_t c = (256 << 10) / (n_in * 4) / FT_TOKS * FT_TOKS;
    return c < FT_TOKS ? FT_TOKS : c > 48 ? 48 : c;
}

/* One token (decode): the row dots themselves, a group's rows one after
 * the other. Rows read two (or four) at once streamed from DRAM at half to
 * two thirds the rate of one at a time (f16, 896 and 2048 values a row,
 * one thread), for reasons this VM's lack of counters hid. */
#define FT_CASE(nr, nt)                                                                                               \
    do {                                                                                                              \
        if ((nt) == 1)                                                                                                \
            for (int r = 0; r < (nr); r++)                                                                            \
                job->w->ops.vec_dot(n_in, w + r * rb, x, &cv_mm_y_row(job, t)[r0 + r]);                               \
        else                                                                                                          \
            ft_tile(w, rb, x, xs, n_in, job, t, r0, nr, nt, kind);                                                    \
    } while (0)
static inline __attribute__((always_inline)) void ft_run(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0,
                                                         int64_t t1, const int kind)
{
    const int64_t n_in = job->n_in, chunk = ft_chunk(n_in);
    const size_t rb = job->w->row_bytes, xs = job->act_row_bytes / sizeof(float);
    for (int64_t tc = t0; tc < t1; tc += chunk) {
        const int64_t te = CV_MIN(t1, tc + chunk);
        for (int64_t g = g0; g < g1; g++) {
            const int64_t r0 = g * FT_ROWS, nr = CV_MIN(FT_ROWS, job->n_out - r0);
            const uint8_t *w = (const uint8_t *)job->w->data + (size_t)r0 * rb;
            for (int64_t t = tc; t < te; t += FT_TOKS) {
                const float *x = (const float *)(job->act + (size_t)t * job->act_row_bytes);
                switch ((int)(nr * 4 + CV_MIN(FT_TOKS, te - t))) {
                case 2 * 4 + 3: FT_CASE(2, 3); break;
                case 2 * 4 + 2: FT_CASE(2, 2); break;
                case 2 * 4 + 1: FT_CASE(2, 1); break;
                case 1 * 4 + 3: FT_CASE(1, 3); break;
                case 1 * 4 + 2: FT_CASE(1, 2); break;
                default: FT_CASE(1, 1); break;
                }
            }
        }
    }
}
#undef FT_CASE

static size_t ft_act_row_bytes(const cv_wmat *w) { return (size_t)w->n_in * sizeof(float); }
static void ft_quant_act(const cv_wmat *w, const float *x, void *dst) { memcpy(dst, x, (size_t)w->n_in * sizeof(float)); }

static void run_f32(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)
{
    ft_run(job, g0, g1, t0, t1, FT_F32);
}
static void run_f16(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)
{
    ft_run(job, g0, g1, t0, t1, FT_F16);
}
static void run_bf16(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)
{
    ft_run(job, g0, g1, t0, t1, FT_BF16);
}

#define FT_IMPL(T)                                                                                                    \
    const cv_mm_impl cv_mm_##T##_avx2 = {                                                                             \
        .name = "avx2 tile: 2 rows x 3 tokens, rows read in place",                                                   \
        .rows_per_group = FT_ROWS,                                                                                    \
        .act_row_bytes = ft_act_row_bytes,                                                                            \
        .quant_act = ft_quant_act,                                                                                    \
        .run = run_##T,                                                                                               \
    };
FT_IMPL(f32)
FT_IMPL(f16)
FT_IMPL(bf16)
