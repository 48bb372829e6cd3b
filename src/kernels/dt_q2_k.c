/* dt_q2_k.c — q2_K: super-blocks of 256 as 16 sub-blocks of 16, each with
 * a 4-bit scale and a 4-bit min under f16 super-scales d and dmin; value =
 * d * sc * q - dmin * m with 2-bit q (layout in kernels_int.h). Reference
 * quantizer: per sub-block, weights |x| and the asymmetric (scale, min)
 * search (kq_search.c) over 16 candidates onto 0..3; the 16 scales and 16
 * mins are then quantized to 4 bits against their maxima and the levels
 * recomputed with the rounded scales. Pairs with q8_K activations: one
 * integer sum per sub-block times its scale, and the mins through q8_K's
 * sums of each 16. */
#include "kernels/kernels_int.h"

void cv_dt_q2_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q2_K *y = dst;
    uint8_t L[QK_K], Laux[16];
    float weights[16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = cv_kq_search_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 15.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 15.f / max_min : 0.f;
        for (int j = 0; j < QK_K / 16; j++) {
            int ls = nearest_int(inv_scale * scales[j]), lm = nearest_int(inv_min * mins[j]);
            ls = ls > 15 ? 15 : ls;
            lm = lm > 15 ? 15 : lm;
            y[b].scales[j] = (uint8_t)(ls | (lm << 4));
        }
        y[b].d = f32_to_f16(max_scale / 15.f);
        y[b].dmin = f32_to_f16(max_min / 15.f);
        /* Recompute the levels against the scales as stored. */
        const float d_all = f16_to_f32(y[b].d), m_all = f16_to_f32(y[b].dmin);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = d_all * (float)(y[b].scales[j] & 0xF);
            if (!d)
                continue;
            const float dm = m_all * (float)(y[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                int q = nearest_int((x[16 * j + l] + dm) / d);
                L[16 * j + l] = (uint8_t)(q < 0 ? 0 : q > 3 ? 3 : q);
            }
        }
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int i = 0; i < QK_K; i++)
            y[b].qs[kq2_byte(i)] |= (uint8_t)(L[i] << kq2_shift(i));
    }
}

void cv_dt_q2_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q2_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d), min = f16_to_f32(x[b].dmin);
        float *y = dst + b * QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            /* ggml's order: (d * sc) * q - (dmin * m), unfused */
            const float dl = d * (float)(x[b].scales[j] & 0xF), ml = min * (float)(x[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                const int i = 16 * j + l;
                y[i] = dl * (float)q2_k_level(&x[b], i) - ml;
            }
        }
    }
}

void cv_dt_q2_K_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int sumi = 0, sumi_mins = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) {
                const int i = 16 * j + l;
                s += q2_k_level(&x[b], i) * y[b].qs[i];
            }
            sumi += (x[b].scales[j] & 0xF) * s;
            sumi_mins += (x[b].scales[j] >> 4) * y[b].bsums[j];
        }
        const float da = y[b].d;
        sum += da * f16_to_f32(x[b].d) * (float)sumi - da * f16_to_f32(x[b].dmin) * (float)sumi_mins;
    }
    *out = sum;
}
