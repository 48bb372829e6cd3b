/* dt_q4_1.c — q4_1: blocks of 32 as f16 scale d, f16 offset m and 4-bit
 * levels meaning q * d + m. Reference quantizer: m = block min, d =
 * (max - min) / 15, round to nearest. Pairs with q8_1 activations, whose
 * stored s = d_a * sum(a) carries the offset term: dot = d_w d_a sum(q a) + m s. */
#include "kernels/kernels_int.h"

void cv_dt_q4_1_from_f32(const float *src, void *dst, int64_t n)
{
    block_q4_1 *y = dst;
    for (int64_t b = 0; b < n / QK4_1; b++) {
        const float *x = src + b * QK4_1;
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].m = f32_to_f16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int q0 = (int)(int8_t)((x[j] - min) * id + 0.5f);
            int q1 = (int)(int8_t)((x[j + QK4_1 / 2] - min) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void cv_dt_q4_1_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q4_1 *x = src;
    for (int64_t b = 0; b < n / QK4_1; b++) {
        const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
        float *y = dst + b * QK4_1;
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[b].qs[j] & 0x0F) * d + m;
            y[j + QK4_1 / 2] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

void cv_dt_q4_1_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK4_1; b++) {
        int isum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            isum += (x[b].qs[j] & 0x0F) * y[b].qs[j];
            isum += (x[b].qs[j] >> 4) * y[b].qs[j + QK4_1 / 2];
        }
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) + f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
    }
    *out = sum;
}
