/* dt_q8_0.c — q8_0: blocks of 32 as f16 scale d and int8 levels, value =
 * q * d; the weight type of Q8_0 files and the activation type of the
 * q4_0, q5_0 and q8_0 dots. Reference quantizer: d = amax / 127, levels
 * rounded half away from zero. */
#include "kernels/kernels_int.h"

void cv_dt_q8_0_from_f32(const float *src, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float *x = src + b * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++)
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void cv_dt_q8_0_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q8_0 *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK8_0; j++)
            dst[b * QK8_0 + j] = (float)x[b].qs[j] * d;
    }
}

void cv_dt_q8_0_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++)
            isum += x[b].qs[j] * y[b].qs[j];
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
    }
    *out = sum;
}
