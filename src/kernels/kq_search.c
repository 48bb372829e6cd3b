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
