/* dt_float_avx512.c — the float weight types (f32, f16, bf16) at the
 * avx512 level: their dots with f32 activations and the matmul tile of 4
 * rows x 3 tokens (tile_float.h at 16 lanes, so twice the AVX2 tile's
 * multiply-adds per instruction; its sums are these dots'). Conversions
 * stay AVX2's (an embedding lookup converts one row a token). */
#include "kernels/tile_float.h"

void cv_dt_f32_dot_avx512(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_F32); }
void cv_dt_f16_dot_avx512(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_F16); }
void cv_dt_bf16_dot_avx512(int64_t n, const void *w, const void *a, float *out) { *out = ft_dot(w, a, n, FT_BF16); }
