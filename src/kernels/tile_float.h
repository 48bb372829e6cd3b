/* tile_float.h — the float weight types' (f32, f16, bf16) row dot and
 * matmul tile, written once for the vector width of the file that includes
 * it: 8 lanes in dt_float_avx2.c (ymm, 16 registers: tiles of 2 rows x 3
 * tokens), 16 in dt_float_avx512.c (zmm, 32 registers: 4 rows x 3 tokens).
 * Including it defines that level's cv_mm_f32_<level>, cv_mm_f16_<level>
 * and cv_mm_bf16_<level>.
 *
 * The weights stay as they are (f32, f16 or bf16 rows, read in place) and
 * the activations are f32 rows (docs/KERNELS.md: float weights use f32
 * activations). Every (row, token) is summed in one order, the dot's: two
 * L-lane sums over alternate L values, a last L into the first, the lanes
 * of their sum added (ft_hsum), then the n_in % L tail one by one. So a
 * tile's results are its level's dots' bits, whatever else shares the
 * tile, and a token's outputs are the same alone or batched (the dots
 * are ft_dot; at 8 lanes it is also the order of vec_avx2.c's dot_f32 and
 * dot_f16, which attention uses). A tile keeps 2 x rows x 3 sums: per L inputs 3
 * activation vectors and the rows (converted once) meet in rows x 3 FMAs,
 * where a dot per (row, token) issues 2 loads per FMA. */
#ifndef CV_TILE_FLOAT_H
#define CV_TILE_FLOAT_H

#if defined(__AVX512F__)
#include "kernels/simd_avx512.h"
#else
#include "kernels/simd_avx2.h"
#endif

enum { FT_F32, FT_F16, FT_BF16 };
#define FT_TOKS 3

#if defined(__AVX512F__)
#define FT_LANES 16
#define FT_ROWS 4
#define FT_IMPL_NAME(T) cv_mm_##T##_avx512
#define FT_TILE_NAME "avx512 tile: 4 rows x 3 tokens, rows read in place"
typedef __m512 ftv;
static inline __attribute__((always_inline)) ftv ft_zero(void) { return _mm512_setzero_ps(); }
static inline __attribute__((always_inline)) ftv ft_loadx(const float *p) { return _mm512_loadu_ps(p); }
static inline __attribute__((always_inline)) ftv ft_fmadd(ftv a, ftv b, ftv c) { return _mm512_fmadd_ps(a, b, c); }
static inline __attribute__((always_inline)) float ft_hsum(ftv a, ftv b)
{
    const __m512 s = _mm512_add_ps(a, b);
    return hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1)));
}
static inline __attribute__((always_inline)) ftv ft_load(const uint8_t *row, int64_t i, const int kind)
{
    if (kind == FT_F32)
        return _mm512_loadu_ps((const float *)row + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    if (kind == FT_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#else
#define FT_LANES 8
#define FT_ROWS 2
#define FT_IMPL_NAME(T) cv_mm_##T##_avx2
#define FT_TILE_NAME "avx2 tile: 2 rows x 3 tokens, rows read in place"
typedef __m256 ftv;
static inline __attribute__((always_inline)) ftv ft_zero(void) { return _mm256_setzero_ps(); }
static inline __attribute__((always_inline)) ftv ft_loadx(const float *p) { return _mm256_loadu_ps(p); }
static inline __attribute__((always_inline)) ftv ft_fmadd(ftv a, ftv b, ftv c) { return _mm256_fmadd_ps(a, b, c); }
static inline __attribute__((always_inline)) float ft_hsum(ftv a, ftv b) { return hsum_ps(_mm256_add_ps(a, b)); }
static inline __attribute__((always_inline)) ftv ft_load(const uint8_t *row, int64_t i, const int kind)
{
    if (kind == FT_F32)
        return _mm256_loadu_ps((const float *)row + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (kind == FT_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

static inline __attribute__((always_inline)) float ft_one(const uint8_t *row, int64_t i, const int kind)
{
    if (kind == FT_F32)
        return ((const float *)row)[i];
    if (kind == FT_F16)
        return cv_fp16_to_fp32(((const uint16_t *)row)[i]);
    return cv_bf16_to_fp32(((const uint16_t *)row)[i]);
}

/* ---- the dot ---- */

/* One weight row w (kind) with one f32 row x, n values, in the order above. */
static inline __attribute__((always_inline)) float ft_dot(const void *w, const float *x, int64_t n, const int kind)
{
    ftv a0 = ft_zero(), a1 = ft_zero();
    int64_t i = 0;
    for (; i + 2 * FT_LANES <= n; i += 2 * FT_LANES) {
        a0 = ft_fmadd(ft_load(w, i, kind), ft_loadx(x + i), a0);
        a1 = ft_fmadd(ft_load(w, i + FT_LANES, kind), ft_loadx(x + i + FT_LANES), a1);
    }
    if (i + FT_LANES <= n) {
        a0 = ft_fmadd(ft_load(w, i, kind), ft_loadx(x + i), a0);
        i += FT_LANES;
    }
    float s = ft_hsum(a0, a1);
    for (; i < n; i++)
        s += ft_one(w, i, kind) * x[i];
    return s;
}

/* ---- the tile ---- */

/* One of the two sums (acc) of nr rows x nt tokens += the L values from i. */
#define FT_STEP(acc, i)                                                                                               \
    do {                                                                                                              \
        ftv xv[FT_TOKS];                                                                                              \
        _Pragma("GCC unroll 3") for (int t = 0; t < nt; t++) xv[t] = ft_loadx(x + t * xs + (i));                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < nr; r++)                                                          \
        {                                                                                                             \
            const ftv wv = ft_load(w + r * rb, (i), kind);                                                            \
            _Pragma("GCC unroll 3") for (int t = 0; t < nt; t++) acc[r][t] = ft_fmadd(wv, xv[t], acc[r][t]);          \
        }                                                                                                             \
    } while (0)

static inline __attribute__((always_inline)) void ft_tile(const uint8_t *w, size_t rb, const float *x, size_t xs,
                                                          int64_t n, const cv_mm_job *job, int64_t t0, int64_t r0,
                                                          const int nr, const int nt, const int kind)
{
    ftv a0[FT_ROWS][FT_TOKS], a1[FT_ROWS][FT_TOKS];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < nr; r++)
        _Pragma("GCC unroll 3")
        for (int t = 0; t < nt; t++)
            a0[r][t] = a1[r][t] = ft_zero();
    int64_t i = 0;
    for (; i + 2 * FT_LANES <= n; i += 2 * FT_LANES) {
        FT_STEP(a0, i);
        FT_STEP(a1, i + FT_LANES);
    }
    if (i + FT_LANES <= n) {
        FT_STEP(a0, i);
        i += FT_LANES;
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < nr; r++)
        _Pragma("GCC unroll 3")
        for (int t = 0; t < nt; t++) {
            float s = ft_hsum(a0[r][t], a1[r][t]);
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
 * one thread, AVX2), for reasons this VM's lack of counters hid. */
#define FT_CASE(nr, nt)                                                                                               \
    case (nr) * 4 + (nt):                                                                                             \
        if ((nt) == 1)                                                                                                \
            for (int r = 0; r < (nr); r++)                                                                            \
                job->w->ops.vec_dot(n_in, w + r * rb, x, &cv_mm_y_row(job, t)[r0 + r]);                               \
        else                                                                                                          \
            ft_tile(w, rb, x, xs, n_in, job, t, r0, nr, nt, kind);                                                    \
        break
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
#if FT_ROWS == 4
                FT_CASE(4, 3); FT_CASE(4, 2); FT_CASE(4, 1);
                FT_CASE(3, 3); FT_CASE(3, 2); FT_CASE(3, 1);
#endif
                FT_CASE(2, 3); FT_CASE(2, 2); FT_CASE(2, 1);
                FT_CASE(1, 3); FT_CASE(1, 2); FT_CASE(1, 1);
                default: assert(0);
                }
            }
        }
    }
}
#undef FT_CASE

static size_t ft_act_row_bytes(const cv_wmat *w) { return (size_t)w->n_in * sizeof(float); }
static void ft_quant_act(const cv_wmat *w, const float *x, void *dst) { memcpy(dst, x, (size_t)w->n_in * sizeof(float)); }

#define FT_IMPL(T, KIND)                                                                                              \
    static void run_##T(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)                         \
    {                                                                                                                 \
        ft_run(job, g0, g1, t0, t1, KIND);                                                                            \
    }                                                                                                                 \
    const cv_mm_impl FT_IMPL_NAME(T) = {                                                                              \
        .name = FT_TILE_NAME,                                                                                         \
        .rows_per_group = FT_ROWS,                                                                                    \
        .act_row_bytes = ft_act_row_bytes,                                                                            \
        .quant_act = ft_quant_act,                                                                                    \
        .run = run_##T,                                                                                               \
    };
FT_IMPL(f32, FT_F32)
FT_IMPL(f16, FT_F16)
FT_IMPL(bf16, FT_BF16)
#undef FT_IMPL

#endif
