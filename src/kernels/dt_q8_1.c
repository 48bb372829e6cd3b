/* dt_q8_1.c — q8_1: q8_0 plus s = d * sum(levels) in f16, the activation
 * type of the q4_1/q5_1 dots (s carries their offset term). Activation
 * only: it has no dot of its own. */
#include "kernels/kernels_int.h"

void cv_dt_q8_1_from_f32(const float *src, void *dst, int64_t n)
{
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const float *x = src + b * QK8_1;
        float amax = 0;
        for (int j = 0; j < QK8_1; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[b].qs[j];
        }
        y[b].d = f32_to_f16(d);
        y[b].s = f32_to_f16((float)sum * d);
    }
}

void cv_dt_q8_1_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q8_1 *x = src;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK8_1; j++)
            dst[b * QK8_1 + j] = (float)x[b].qs[j] * d;
    }
}
