/* dt_q5_0.c — q5_0: blocks of 32 as f16 scale d, a 32-bit mask of fifth
 * bits and 4-bit low parts; value j is (q - 16) * d with q 0..31, its low
 * nibble in qs (j < 16 low halves, j >= 16 high halves) and bit 4 in bit j of
 * qh. Reference quantizer: d = extreme / -16, round to nearest. Pairs with
 * q8_0 activations. */
#include "kernels/kernels_int.h"

void cv_dt_q5_0_from_f32(const float *src, void *dst, int64_t n)
{
    block_q5_0 *y = dst;
    for (int64_t b = 0; b < n / QK5_0; b++) {
        const float *x = src + b * QK5_0;
        float amax = 0, max = 0;
        for (int j = 0; j < QK5_0; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (int)(int8_t)(x[j] * id + 16.5f);
            int q1 = (int)(int8_t)(x[j + QK5_0 / 2] * id + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + QK5_0 / 2);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

/* The 5-bit level of value j of a block (shared by dequantize and dot). */
static inline int q5_level(const uint8_t *qs, uint32_t qh, int j)
{
    int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    return lo | (int)(((qh >> j) & 1) << 4);
}

void cv_dt_q5_0_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q5_0 *x = src;
    for (int64_t b = 0; b < n / QK5_0; b++) {
        const float d = f16_to_f32(x[b].d);
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < QK5_0; j++)
            dst[b * QK5_0 + j] = (float)(q5_level(x[b].qs, qh, j) - 16) * d;
    }
}

void cv_dt_q5_0_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK5_0; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        int isum = 0;
        for (int j = 0; j < QK5_0; j++)
            isum += (q5_level(x[b].qs, qh, j) - 16) * y[b].qs[j];
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
    }
    *out = sum;
}
