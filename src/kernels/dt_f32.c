/* dt_f32.c — f32 weights as a dtype-table row: "dequantize" and
 * "quantize" are copies, and the dot product is a plain f32 dot against f32
 * activations (vec_dot_type f32). Kept in the table so the matmul treats
 * every weight type the same way. */
#include "kernels/kernels_int.h"

void cv_dt_f32_to_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void cv_dt_f32_from_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void cv_dt_f32_dot(int64_t n, const void *w, const void *a, float *out)
{
    const float *x = w, *y = a;
    /* Four partial sums, like the SIMD paths, so the reference is not the
     * outlier in rounding for long rows. */
    float s[4] = { 0, 0, 0, 0 };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += x[i + k] * y[i + k];
    for (; i < n; i++)
        s[0] += x[i] * y[i];
    *out = (s[0] + s[1]) + (s[2] + s[3]);
}
