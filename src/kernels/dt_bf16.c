/* dt_bf16.c — bfloat16 weights (the top half of an f32): exact widening,
 * round-to-nearest-even narrowing, and the dot product with f32 activations
 * (vec_dot_type f32). */
#include "kernels/kernels_int.h"

void cv_dt_bf16_to_f32(const void *src, float *dst, int64_t n)
{
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_bf16_to_fp32(s[i]);
}

void cv_dt_bf16_from_f32(const float *src, void *dst, int64_t n)
{
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = cv_fp32_to_bf16(src[i]);
}

void cv_dt_bf16_dot(int64_t n, const void *w, const void *a, float *out)
{
    const uint16_t *x = w;
    const float *y = a;
    float s[4] = { 0, 0, 0, 0 };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += cv_bf16_to_fp32(x[i + k]) * y[i + k];
    for (; i < n; i++)
        s[0] += cv_bf16_to_fp32(x[i]) * y[i];
    *out = (s[0] + s[1]) + (s[2] + s[3]);
}
