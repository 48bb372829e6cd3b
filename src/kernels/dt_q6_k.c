/* dt_q6_k.c — q6_K: super-blocks of 256 as 16 sub-blocks of 16 with int8
 * scales under one f16 d; value = d * sc * (q - 32) with 6-bit q split into
 * 4 low bits (ql) and 2 high bits (qh) (layout in kernels_int.h). Reference
 * quantizer: a symmetric x^2-weighted scale search per sub-block (kq_search.c),
 * the 16 scales quantized to int8 against the largest, levels recomputed
 * with the stored scales. Pairs with q8_K activations. */
#include "kernels/kernels_int.h"

void cv_dt_q6_K_from_f32(const float *src, void *dst, int64_t n)
{
    block_q6_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            scales[ib] = cv_kq_search_scale(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < 1e-15f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[b].d = f32_to_f16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int v = nearest_int(iscale * scales[ib]);
            y[b].scales[ib] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = f16_to_f32(y[b].d) * y[b].scales[j];
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = l < -32 ? -32 : l > 31 ? 31 : l;
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        uint8_t *ql = y[b].ql, *qh = y[b].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; l++) {
                const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

/* The 6-bit level (0..63) of value i (0..255) of a q6_K block. */
static inline int q6_level(const block_q6_K *x, int i)
{
    const int half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
    const uint8_t *ql = x->ql + 64 * half, *qh = x->qh + 32 * half;
    const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
    const int low4 = quarter >= 2 ? lo >> 4 : lo & 0xF;
    return low4 | (((qh[l] >> (2 * quarter)) & 3) << 4);
}

void cv_dt_q6_K_to_f32(const void *src, float *dst, int64_t n)
{
    const block_q6_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16_to_f32(x[b].d);
        for (int i = 0; i < QK_K; i++)
            /* (d * sc) * q in this order: the reference dequantizers round
             * the same way, which the sha256 fixtures check. */
            dst[b * QK_K + i] = d * (float)x[b].scales[i / 16] * (float)(q6_level(&x[b], i) - 32);
    }
}

void cv_dt_q6_K_dot(int64_t n, const void *w, const void *a, float *out)
{
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 16 * j; i < 16 * j + 16; i++)
                s += (q6_level(&x[b], i) - 32) * y[b].qs[i];
            sumi += x[b].scales[j] * s;
        }
        sum += y[b].d * f16_to_f32(x[b].d) * (float)sumi;
    }
    *out = sum;
}
