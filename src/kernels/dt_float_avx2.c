/* dt_float_avx2.c — the float weight types on AVX2 (f32, f16 via F16C,
 * bf16 by shifting): row conversion, dot products with f32 activations,
 * and the matmul tile of 2 rows x 3 tokens, which reads the rows in place
 * (tile_float.h at 8 lanes: the dots are its ft_dot, which sums as the
 * tile does). */
#include "kernels/tile_float.h"

void cv_dt_f32_dot_avx2(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_F32); }

void cv_dt_f16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.f16_to_f32(src, dst, n); }
void cv_dt_f16_from_f32_avx2(const float *src, void *dst, int64_t n) { cv_vec_ops_avx2.f32_to_f16(src, dst, n); }
void cv_dt_f16_dot_avx2(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_F16); }

void cv_dt_bf16_to_f32_avx2(const void *src, float *dst, int64_t n) { cv_vec_ops_avx2.bf16_to_f32(src, dst, n); }

void cv_dt_bf16_dot_avx2(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_BF16); }
