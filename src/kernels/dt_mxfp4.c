/* dt_mxfp4.c — mxfp4 (OCP microscaling FP4, the expert weights of
 * gpt-oss): blocks of 32 values as one E8M0 exponent byte e and 4-bit E2M1
 * codes (sign, 2 exponent bits, 1 mantissa bit) in q4_0's nibble order.
 * ggml stores the codes' values doubled so they are integers (T, here
 * cv_mxfp4_values) and halves the scale to compensate: value =
 * 2^(e-128) * T[q] (kernels_int.h). Reference quantizer: the three
 * power-of-two scales around amax / 12 (T's largest level), each with
 * round-to-nearest codes, keeping the smallest squared error. Pairs with
 * q8_0 activations: one integer sum of T[q] * a per block. */
#include "kernels/kernels_int.h"

/* E2M1 x 2: codes 0-7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled; 8-15 the
 * same negated (8 is -0). */
const int8_t cv_mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* The code nearest v (in units of the block scale); zero as +0. */
static int mxfp4_nearest(float v)
{
    const float a = fabsf(v);
    /* midpoints between the magnitudes 0 1 2 3 4 6 8 12 */
    const int m = a < 0.5f ? 0 : a < 1.5f ? 1 : a < 2.5f ? 2 : a < 3.5f ? 3
                : a < 5.f ? 4 : a < 7.f ? 5 : a < 10.f ? 6 : 7;
    return m && v < 0 ? m + 8 : m;
}

void cv_dt_mxfp4_from_f32(const float *src, void *dst, int64_t n)
{
    block_mxfp4 *y = dst;
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        const float *x = src + b * QK_MXFP4;
        float amax = 0;
        for (int j = 0; j < QK_MXFP4; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        int best_e = 0;
        if (amax > 0) {
            /* 2^(ex-1) <= amax / 12 < 2^ex: e - 128 = ex maps amax just
             * inside the top level; one and two below clip it but resolve
             * the rest of the block more finely. */
            int ex;
            frexpf(amax / 12, &ex);
            float best_err = INFINITY;
            for (int e = ex + 128 - 2; e <= ex + 128; e++) {
                if (e < 0 || e > 255)
                    continue;
                const float d = e8m0_half_to_f32((uint8_t)e);
                float err = 0;
                for (int j = 0; j < QK_MXFP4; j++) {
                    const float diff = x[j] - d * (float)cv_mxfp4_values[mxfp4_nearest(x[j] / d)];
                    err += diff * diff;
                }
                if (err < best_err) {
                    best_err = err;
                    best_e = e;
                }
            }
        }
        const float d = e8m0_half_to_f32((uint8_t)best_e);
        y[b].e = (uint8_t)best_e;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            const int q0 = amax > 0 ? mxfp4_nearest(x[j] / d) : 0;
            const int q1 = amax > 0 ? mxfp4_nearest(x[j + QK_MXFP4 / 2] / d) : 0;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void cv_dt_mxfp4_to_f32(const void *src, float *dst, int64_t n)
{
    const block_mxfp4 *x = src;
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        const float d = e8m0_half_to_f32(x[b].e);
        float *y = dst + b * QK_MXFP4;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = (float)cv_mxfp4_values[x[b].qs[j] & 0xF] * d;
            y[j + QK_MXFP4 / 2] = (float)cv_mxfp4_values[x[b].qs[j] >> 4] * d;
        }
    }
}

void cv_dt_mxfp4_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_mxfp4 *x = w;
    const block_q8_0 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        int isum = 0;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            isum += cv_mxfp4_values[x[b].qs[j] & 0xF] * y[b].qs[j];
            isum += cv_mxfp4_values[x[b].qs[j] >> 4] * y[b].qs[j + QK_MXFP4 / 2];
        }
        sum += (float)isum * (e8m0_half_to_f32(x[b].e) * f16_to_f32(y[b].d));
    }
    *out = sum;
}
