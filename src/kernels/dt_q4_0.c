/* dt_q4_0.c — q4_0: blocks of 32 values as one f16 scale and 4-bit levels
 * 0..15 meaning (q - 8) * d. Reference quantizer: d = the value of largest
 * magnitude / -8, levels round to nearest (ggml's q4_0 rule, so files we
 * write quantize like llama-quantize's). The dot pairs with q8_0
 * activations: one integer sum per block, scaled by d_w * d_a. */
#include "kernels/kernels_int.h"

void cv_dt_q4_0_from_f32(const float *src, void *dst, int64_t n)
{
    block_q4_0 *y = dst;
    for (int64_t b = 0; b < n / QK4_0; b++) {
        const float *x = src + b * QK4_0;
        float amax = 0, max = 0;
        for (int j = 0; j < QK4_0; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        /* Mapping the extreme value to -8 uses the full 16 levels. */
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            /* +8.5 then truncation = round half up into 0..16; 16 only for
             * the extreme itself after f16 rounding, hence the clamp. */
            int q0 = (int)(int8_t)(x[j] * id + 8.5f);
            int q1 = (int)(int8_t)(x[j + QK4_0 / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void cv_dt_q4_0_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q4_0 *x = src;
    for (int64_t b = 0; b < n / QK4_0; b++) {
        const float d = f16_to_f32(x[b].d);
        float *y = dst + b * QK4_0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[b].qs[j] & 0x0F) - 8) * d;
            y[j + QK4_0 / 2] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void cv_dt_q4_0_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK4_0; b++) {
        int isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j];
            isum += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK4_0 / 2];
        }
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
    }
    *out = sum;
}
