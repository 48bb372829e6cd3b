/* dt_q8_k.c — q8_K: 256 int8 levels with an f32 scale and the sum of each
 * 16 levels, the activation type of the K-quant dots (the sums carry the
 * min and the -32 offset terms without touching the levels again).
 * Reference quantizer: the value of largest magnitude maps to -127 (its
 * sign kept in d), round to nearest even. Activation only: no dot. */
#include "kernels/kernels_int.h"

void cv_dt_q8_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++)
                sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

void cv_dt_q8_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q8_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++)
            dst[b * QK_K + j] = x[b].d * (float)x[b].qs[j];
}
