/* dt_q5_k.c — q5_K: q4_K's super-block with a fifth bit per value (bit j of
 * qh[l] for value l of sub-block j); value = d * sc * q - dmin * m, q 0..31.
 * Reference quantizer as q4_K with 31 levels and 16 candidate scales.
 * Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_kq_pack_scale_min(uint8_t *q, int j, int ls, int lm);

void cv_dt_q5_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q5_K *y = dst;
    uint8_t L[QK_K], Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++)
                sum_x2 += x[32 * j + l] * x[32 * j + l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++)
                weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = cv_kq_search_scale_min(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        memset(y[b].scales, 0, K_SCALE_SIZE);
        for (int j = 0; j < QK_K / 32; j++) {
            int ls = nearest_int(inv_scale * scales[j]);
            int lm = nearest_int(inv_min * mins[j]);
            cv_kq_pack_scale_min(y[b].scales, j, ls > 63 ? 63 : ls, lm > 63 ? 63 : lm);
        }
        y[b].d = f32_to_f16(max_scale / 63.f);
        y[b].dmin = f32_to_f16(max_min / 63.f);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, y[b].scales, &sc, &m);
            const float d = f16_to_f32(y[b].d) * sc;
            if (!d)
                continue;
            const float dm = f16_to_f32(y[b].dmin) * m;
            for (int l = 0; l < 32; l++) {
                int q = nearest_int((x[32 * j + l] + dm) / d);
                L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > 31 ? 31 : q);
            }
        }
        memset(y[b].qh, 0, sizeof y[b].qh);
        uint8_t *ql = y[b].qs;
        uint8_t m1 = 1, m2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l], l2 = L[j + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[b].qh[l] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[b].qh[l] |= m2;
                }
                ql[l] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
    }
}

void cv_dt_q5_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q5_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d), min = f16_to_f32(x[b].dmin);
        const uint8_t *ql = x[b].qs, *qh = x[b].qh;
        float *y = dst + b * QK_K;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K / 32; j += 2) {
            uint8_t sc, m;
            k_scale_min(j, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            k_scale_min(j + 1, x[b].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

void cv_dt_q5_K_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const int8_t *qa = y[b].qs;
        int sumi = 0, sumi_mins = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, x[b].scales, &sc, &m);
            sumi_mins += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
            const uint8_t *ql = x[b].qs + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; l++) {
                int q = ((j & 1) ? (ql[l] >> 4) : (ql[l] & 0xF)) | (((x[b].qh[l] >> j) & 1) << 4);
                s += q * qa[32 * j + l];
            }
            sumi += sc * s;
        }
        const float da = y[b].d;
        sum += da * f16_to_f32(x[b].d) * (float)sumi - da * f16_to_f32(x[b].dmin) * (float)sumi_mins;
    }
    *out = sum;
}
