/* dt_q4_k.c — q4_K: super-blocks of 256 as 8 sub-blocks of 32, each with
 * a 6-bit scale and 6-bit min under f16 super-scales d and dmin; value =
 * d * sc * q - dmin * m with 4-bit q (layout in kernels_int.h). Reference
 * quantizer: the super-block search of kq_search.c (per sub-block,
 * weights |x| + rms(x) and the asymmetric (scale, min) search over 21
 * candidates; the 8 scales and 8 mins quantized to 6 bits against their
 * maxima and the levels recomputed with the rounded scales), with 15
 * levels. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_dt_q4_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q4_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++) {
        cv_kq_superblock_scale_min(src + b * QK_K, 15, -1.f, 20, y[b].scales, &y[b].d, &y[b].dmin, L);
        uint8_t *q = y[b].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void cv_dt_q4_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q4_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d), min = f16_to_f32(x[b].dmin);
        const uint8_t *q = x[b].qs;
        float *y = dst + b * QK_K;
        for (int j = 0; j < QK_K / 32; j += 2) {
            uint8_t sc, m;
            k_scale_min(j, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            k_scale_min(j + 1, x[b].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
        }
    }
}

void cv_dt_q4_K_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *q = x[b].qs;
        const int8_t *qa = y[b].qs;
        int sumi = 0, sumi_mins = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, x[b].scales, &sc, &m);
            sumi_mins += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
            const uint8_t *qj = q + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; l++)
                s += ((j & 1) ? (qj[l] >> 4) : (qj[l] & 0xF)) * qa[32 * j + l];
            sumi += sc * s;
        }
        const float da = y[b].d;
        sum += da * f16_to_f32(x[b].d) * (float)sumi - da * f16_to_f32(x[b].dmin) * (float)sumi_mins;
    }
    *out = sum;
}
