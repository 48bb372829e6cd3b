/* dt_q4_k.c — q4_K: super-blocks of 256 as 8 sub-blocks of 32, each with
 * a 6-bit scale and 6-bit min under f16 super-scales d and dmin; value =
 * d * sc * q - dmin * m with 4-bit q (layout in kernels_int.h). Reference
 * quantizer: per sub-block, weights |x| + rms(x) and the asymmetric
 * (scale, min) search over 21 candidates (kq_search.c); the 8 scales and 8
 * mins are then quantized to 6 bits against their maxima and the levels
 * recomputed with the rounded scales. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

/* Packs 6-bit scale ls and min lm of sub-block j (inverse of k_scale_min). */
void cv_kq_pack_scale_min(uint8_t *q, int j, int ls, int lm);

void cv_kq_pack_scale_min(uint8_t *q, int j, int ls, int lm)
{
    if (j < 4) {
        q[j] = (uint8_t)ls;
        q[j + 4] = (uint8_t)lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

void cv_dt_q4_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q4_K *y = dst;
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
            scales[j] = cv_kq_search_scale_min(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
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
        /* Recompute the levels against the scales as stored. */
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, y[b].scales, &sc, &m);
            const float d = f16_to_f32(y[b].d) * sc;
            if (!d)
                continue;
            const float dm = f16_to_f32(y[b].dmin) * m;
            for (int l = 0; l < 32; l++) {
                int q = nearest_int((x[32 * j + l] + dm) / d);
                L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > 15 ? 15 : q);
            }
        }
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
