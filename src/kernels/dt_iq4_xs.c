/* dt_iq4_xs.c — iq4_xs: super-blocks of 256 as 8 sub-blocks of 32, each
 * an iq4_nl block whose f16 scale is replaced by a signed 6-bit one
 * (stored + 32) under one f16 super-scale d: value = d * (ls - 32) * K[q]
 * (layout in kernels_int.h, table K in dt_iq4_nl.c). Reference quantizer:
 * iq4_nl's scale search per sub-block; the 8 scales then go to 6 bits
 * against the one of largest magnitude (which maps to -32) and the levels
 * are recomputed with the rounded scales. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_dt_iq4_xs_from_f32(const float *src, void *dst, int64_t n)
{
    block_iq4_xs *y = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            scales[j] = cv_iq4_search_scale(32, x + 32 * j, L + 32 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max = scales[j];
            }
        }
        memset(&y[b], 0, sizeof y[b]);
        const float iscale = max ? -32.f / max : 0.f;
        for (int j = 0; j < QK_K / 32; j++) {
            int ls = nearest_int(iscale * scales[j]);
            ls = (ls < -32 ? -32 : ls > 31 ? 31 : ls) + 32;
            y[b].scales_l[j / 2] |= (uint8_t)((ls & 0xF) << (4 * (j % 2)));
            y[b].scales_h |= (uint16_t)((ls >> 4) << (2 * j));
        }
        y[b].d = f32_to_f16(max ? 1 / iscale : 0.f);
        /* Levels against the scales as stored. */
        const float d_all = f16_to_f32(y[b].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const float d = d_all * (float)iq4_xs_scale(y[b].scales_l, y[b].scales_h, j);
            uint8_t *q = y[b].qs + 16 * j;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)cv_iq4_nearest(d ? x[32 * j + l] / d : 0.f);
            for (int l = 0; l < 16; l++)
                q[l] = (uint8_t)(L[32 * j + l] | (L[32 * j + l + 16] << 4));
        }
    }
}

void cv_dt_iq4_xs_to_f32(const void *src, float *dst, int64_t n)
{
    const block_iq4_xs *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const float dl = d * (float)iq4_xs_scale(x[b].scales_l, x[b].scales_h, j);
            const uint8_t *q = x[b].qs + 16 * j;
            float *y = dst + b * QK_K + 32 * j;
            for (int l = 0; l < 16; l++) {
                y[l] = dl * (float)cv_iq4_values[q[l] & 0xF];
                y[l + 16] = dl * (float)cv_iq4_values[q[l] >> 4];
            }
        }
    }
}

void cv_dt_iq4_xs_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int sumi = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            const uint8_t *q = x[b].qs + 16 * j;
            const int8_t *qa = y[b].qs + 32 * j;
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += cv_iq4_values[q[l] & 0xF] * qa[l] + cv_iq4_values[q[l] >> 4] * qa[l + 16];
            sumi += iq4_xs_scale(x[b].scales_l, x[b].scales_h, j) * s;
        }
        sum += y[b].d * f16_to_f32(x[b].d) * (float)sumi;
    }
    *out = sum;
}
