/* dt_q5_1.c — q5_1: blocks of 32 as f16 scale d, f16 offset m, fifth bits
 * and low nibbles laid out as q5_0; value = q * d + m, q 0..31. Reference
 * quantizer: m = min, d = (max - min) / 31, round to nearest. Pairs with q8_1
 * activations (offset term from their stored sum). */
#include "kernels/kernels_int.h"

void cv_dt_q5_1_from_f32(const float *src, void *dst, int64_t n)
{
    block_q5_1 *y = dst;
    for (int64_t b = 0; b < n / QK5_1; b++) {
        const float *x = src + b * QK5_1;
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].m = f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            /* (x - min) * id lies in [0, 31] up to rounding: +0.5 and
             * truncation rounds, the clamp guards the rounding. */
            int q0 = (int)(uint8_t)((x[j] - min) * id + 0.5f);
            int q1 = (int)(uint8_t)((x[j + QK5_1 / 2] - min) * id + 0.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + QK5_1 / 2);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

static inline int q5_level(const uint8_t *qs, uint32_t qh, int j)
{
    int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    return lo | (int)(((qh >> j) & 1) << 4);
}

void cv_dt_q5_1_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q5_1 *x = src;
    for (int64_t b = 0; b < n / QK5_1; b++) {
        const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < QK5_1; j++)
            dst[b * QK5_1 + j] = (float)q5_level(x[b].qs, qh, j) * d + m;
    }
}

void cv_dt_q5_1_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK5_1; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, 4);
        int isum = 0;
        for (int j = 0; j < QK5_1; j++)
            isum += q5_level(x[b].qs, qh, j) * y[b].qs[j];
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) + f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
    }
    *out = sum;
}
