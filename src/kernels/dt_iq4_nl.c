/* dt_iq4_nl.c — iq4_nl: blocks of 32 values as one f16 scale and 4-bit
 * indices into a fixed non-linear table of 16 int8 levels (denser near
 * zero, where weights are), value = d * K[q]; the nibble order is q4_0's.
 * Owns the table, shared with iq4_xs, and the scale search both reference
 * quantizers use: a sweep of candidate scales mapping the extreme value
 * near either end of the table, each with nearest levels and its
 * least-squares scale, keeping the smallest squared error. Pairs with q8_0
 * activations: one integer sum of K[q] * a per block, scaled by d_w * d_a. */
#include "kernels/kernels_int.h"

/* The format's levels (ggml's kvalues_iq4nl), ascending. */
const int8_t cv_iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* Index of the level nearest zero: what an all-zero group stores. */
#define IQ4_ZERO_INDEX 8

/* Candidate targets for the extreme value: K[0] + k and K[15] + k. */
#define IQ4_SWEEP 10

int cv_iq4_nearest(float v)
{
    const int8_t *K = cv_iq4_values;
    if (!(v > K[0]))
        return 0;
    if (v >= K[15])
        return 15;
    int lo = 0, hi = 15; /* K[lo] < v < K[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < K[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - K[lo] < K[hi] - v ? lo : hi;
}

float cv_iq4_search_scale(int n, const float *x, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(L, IQ4_ZERO_INDEX, (size_t)n);
        return 0.f;
    }
    float best_d = 0, best_num = -1, best_den = 1;
    for (int end = 0; end < 2; end++)
        for (int k = -IQ4_SWEEP; k <= IQ4_SWEEP; k++) {
            /* x * id lands the extreme on K[0] + k or K[15] + k */
            const float id = ((float)cv_iq4_values[end ? 15 : 0] + (float)k) / max;
            float sum_xk = 0, sum_kk = 0;
            for (int i = 0; i < n; i++) {
                const float kv = cv_iq4_values[cv_iq4_nearest(id * x[i])];
                sum_xk += x[i] * kv;
                sum_kk += kv * kv;
            }
            /* The least-squares scale for these levels reduces the squared
             * error by sum_xk^2 / sum_kk: keep the largest reduction. */
            if (sum_kk > 0 && sum_xk * sum_xk * best_den > best_num * sum_kk) {
                best_num = sum_xk * sum_xk;
                best_den = sum_kk;
                best_d = sum_xk / sum_kk;
            }
        }
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)(best_d ? cv_iq4_nearest(x[i] / best_d) : IQ4_ZERO_INDEX);
    return best_d;
}

void cv_dt_iq4_nl_from_f32(const float *src, void *dst, int64_t n)
{
    block_iq4_nl *y = dst;
    uint8_t L[QK4_NL];
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        const float *x = src + b * QK4_NL;
        y[b].d = f32_to_f16(cv_iq4_search_scale(QK4_NL, x, L));
        /* Levels against the scale as stored. */
        const float d = f16_to_f32(y[b].d);
        for (int j = 0; j < QK4_NL; j++)
            L[j] = (uint8_t)(d ? cv_iq4_nearest(x[j] / d) : IQ4_ZERO_INDEX);
        for (int j = 0; j < QK4_NL / 2; j++)
            y[b].qs[j] = (uint8_t)(L[j] | (L[j + QK4_NL / 2] << 4));
    }
}

void cv_dt_iq4_nl_to_f32(const void *src, float *dst, int64_t n)
{
    const block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        const float d = f16_to_f32(x[b].d);
        float *y = dst + b * QK4_NL;
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)cv_iq4_values[x[b].qs[j] & 0xF];
            y[j + QK4_NL / 2] = d * (float)cv_iq4_values[x[b].qs[j] >> 4];
        }
    }
}

void cv_dt_iq4_nl_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        int isum = 0;
        for (int j = 0; j < QK4_NL / 2; j++) {
            isum += cv_iq4_values[x[b].qs[j] & 0xF] * y[b].qs[j];
            isum += cv_iq4_values[x[b].qs[j] >> 4] * y[b].qs[j + QK4_NL / 2];
        }
        sum += (float)isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
    }
    *out = sum;
}
