/* kq_search.c — the scale searches behind the K-quant reference
 * quantizers. These reproduce the well-known round-to-nearest searches of
 * ggml's reference K-quantizers (no importance matrix): for q4_K/q5_K an
 * asymmetric (scale, min) fit per sub-block by weighted least squares over a
 * sweep of candidate scales, for q6_K a symmetric scale chosen among 19
 * candidates by the x^2-weighted fit. They only decide which levels a file
 * stores; every reader dequantizes whatever levels it finds, so these need
 * to be good, not bit-identical to another quantizer. */
#include "kernels/kernels_int.h"

/* Below this a group is treated as all zeros (avoids dividing by ~0). */
#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

float cv_kq_search_scale_min(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    /* The min is stored as a non-negative offset to subtract: a group of
     * positive values uses min 0. */
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        L[i] = (uint8_t)l;
        float diff = scale * l + min - x[i];
        best_error += weights[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        /* Closed-form weighted least squares for x ~ scale * l + min. */
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += weights[i] * diff * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Packs 6-bit scale ls and min lm of sub-block j (inverse of k_scale_min). */
static void pack_scale_min(uint8_t *q, int j, int ls, int lm)
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

void cv_kq_superblock_scale_min(const float *x, int nmax, float rmin, int nstep, uint8_t *scales, cv_f16 *d,
                                cv_f16 *dmin, uint8_t *L)
{
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], sub[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        sub[j] = cv_kq_search_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        if (sub[j] > max_scale) max_scale = sub[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, K_SCALE_SIZE);
    for (int j = 0; j < QK_K / 32; j++) {
        int ls = nearest_int(inv_scale * sub[j]);
        int lm = nearest_int(inv_min * mins[j]);
        pack_scale_min(scales, j, ls > 63 ? 63 : ls, lm > 63 ? 63 : lm);
    }
    *d = f32_to_f16(max_scale / 63.f);
    *dmin = f32_to_f16(max_min / 63.f);
    /* Recompute the levels against the scales as stored. */
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        k_scale_min(j, scales, &sc, &m);
        const float dj = f16_to_f32(*d) * sc;
        if (!dj)
            continue;
        const float dm = f16_to_f32(*dmin) * m;
        for (int l = 0; l < 32; l++) {
            int q = nearest_int((x[32 * j + l] + dm) / dj);
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}


float cv_kq_search_scale(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    /* The extreme value maps to -nmax (the side with one more level). */
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        /* sumlx^2 / suml2 is the error reduction of the best scale for
         * these levels: keep the candidate that reduces the error most. */
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}
