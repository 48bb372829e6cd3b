/* dt_q5_k.c — q5_K: q4_K's super-block with a fifth bit per value (bit j of
 * qh[l] for value l of sub-block j); value = d * sc * q - dmin * m, q 0..31.
 * Reference quantizer: q4_K's super-block search (kq_search.c) with 31
 * levels and 16 candidate scales. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_dt_q5_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q5_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        cv_kq_superblock_scale_min(src + b * QK_K, 31, -0.5f, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
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
