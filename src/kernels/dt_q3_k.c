/* dt_q3_k.c — q3_K: super-blocks of 256 as 16 sub-blocks of 16, each with
 * a signed 6-bit scale (stored + 32) under one f16 super-scale d; value =
 * d * (sc - 32) * (q - 4) with 3-bit q split into 2 low bits (as q2_K's)
 * and a high bit in hmask (layout in kernels_int.h). Reference quantizer:
 * per sub-block the symmetric x^2-weighted scale search onto -4..3
 * (kq_search.c, q6_K's); the 16 scales then go to 6 bits against the one
 * of largest magnitude (which maps to -32) and the levels are recomputed
 * with the rounded scales. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_dt_q3_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q3_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = cv_kq_search_scale(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max = scales[j];
            }
        }
        memset(&y[b], 0, sizeof y[b]);
        /* The scale of largest magnitude maps to -32, the side with one
         * more level. */
        const float iscale = max ? -32.f / max : 0.f;
        for (int j = 0; j < QK_K / 16; j++) {
            int ls = nearest_int(iscale * scales[j]);
            ls = (ls < -32 ? -32 : ls > 31 ? 31 : ls) + 32;
            if (j < 8)
                y[b].scales[j] = (uint8_t)(ls & 0xF);
            else
                y[b].scales[j - 8] |= (uint8_t)((ls & 0xF) << 4);
            y[b].scales[8 + j % 4] |= (uint8_t)((ls >> 4) << (2 * (j / 4)));
        }
        y[b].d = f32_to_f16(max ? 1 / iscale : 0.f);
        /* Recompute the levels against the scales as stored. */
        const float d_all = f16_to_f32(y[b].d);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = d_all * (float)q3_k_scale(y[b].scales, j);
            for (int l = 0; l < 16; l++) {
                int q = d ? nearest_int(x[16 * j + l] / d) : 0;
                L[16 * j + l] = (int8_t)((q < -4 ? -4 : q > 3 ? 3 : q) + 4);
            }
        }
        for (int i = 0; i < QK_K; i++) {
            y[b].qs[kq2_byte(i)] |= (uint8_t)((L[i] & 3) << kq2_shift(i));
            y[b].hmask[i % 32] |= (uint8_t)((L[i] >> 2) << (i / 32));
        }
    }
}

void cv_dt_q3_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q3_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d);
        float *y = dst + b * QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)q3_k_scale(x[b].scales, j);
            for (int l = 0; l < 16; l++)
                y[16 * j + l] = dl * (float)(q3_k_level(&x[b], 16 * j + l) - 4);
        }
    }
}

void cv_dt_q3_K_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += (q3_k_level(&x[b], 16 * j + l) - 4) * y[b].qs[16 * j + l];
            sumi += q3_k_scale(x[b].scales, j) * s;
        }
        sum += y[b].d * f16_to_f32(x[b].d) * (float)sumi;
    }
    *out = sum;
}
