/* tile_q4_k_vnni.h — q4_K's matmul tile at the VNNI levels, written once
 * in v16 operations (simd_vnni.h) and included by dt_q4_k_avx512.c and
 * dt_q4_k_avxvnni.c. It reads the AVX2 tile's pack (dt_q4_k_avx2.c: per
 * group and super-block of 2368 bytes, u8 sc[8][16] at 0, mins
 * u8 mn[4][2][8][2] at 128, f16 d[16] at 256 and dmin[16] at 288, then
 * 8 sub-blocks x 4 vectors of 64 bytes at 320, low nibbles k-step 2i and
 * high 2i+1).
 *
 * A sub-block's 8 vpdpbusd per token sum the 32 products of each row in
 * int32, then one vpmulld applies the row's scale and the product joins the
 * super-block's int32 sum; the mins meet the activation sums of each 32
 * (act256 bsum32) in four vpdpwssd. The integers are exactly the AVX2
 * tile's (it sums each sub-block's 32 products in int16 pairs, which never
 * overflow, and applies the scale in vpmaddwd), and the floats meet in its
 * order, row by row: the outputs are the AVX2 tile's bits. */
#ifndef CV_TILE_Q4_K_VNNI_H
#define CV_TILE_Q4_K_VNNI_H

#include "kernels/simd_vnni.h"

#define Q4K_SB_BYTES 2368

static inline __attribute__((always_inline)) void q4k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const int J = v16_subs(T, 8); /* sub-blocks at once */
    const v16i m4 = v16_set1_8(0x0F);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum32(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * Q4K_SB_BYTES, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 8; j0 += J) {
            prefetch_range(sb + 2 * Q4K_SB_BYTES + j0 * (Q4K_SB_BYTES / 8), (size_t)J * (Q4K_SB_BYTES / 8));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 4")
            for (int i = 0; i < 4; i++) {
                _Pragma("GCC unroll 8")
                for (int jj = 0; jj < J; jj++) {
                    const int j = j0 + jj;
                    const v16i v = v16_load(sb + 320 + j * 256 + i * 64);
                    const v16i lo = v16_and(v, m4), hi = v16_and(v16_srli16(v, 4), m4);
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++) {
                        const uint8_t *a = as + t * stride + 32 * j + 8 * i;
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], lo, a);
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], hi, a + 4);
                    }
                }
            }
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const v16i sc = v16_u8_i32(sb + (j0 + jj) * 16);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    isum[t] = v16_add(isum[t], v16_mullo(sub[jj * T + t], sc));
            }
        }
        const v16f d = v16_f16(sb + 256), dmin = v16_f16(sb + 288);
        v16i mn[4]; /* int16 (min 2p, min 2p+1) per row */
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++)
            mn[p] = v16_u8_i16(sb + 128 + p * 32);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 8 * s) + t * stride);
            v16i mi = v16_zero();
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++)
                mi = v16_dpwssd_b(mi, mn[p], bst + 2 * p);
            const v16f da = v16_bcast_f32((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[t] = v16_fmadd(v16_cvt(isum[t]), v16_mul(d, da), acc[t]);
            acc[t] = v16_fnmadd(v16_cvt(mi), v16_mul(dmin, da), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        v16_store(out + 16 * t, acc[t]);
}

static size_t q4k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q4K_SB_BYTES; }
CV_VNNI_TILE_RUN(q4k_vnni_run, q4k_vnni_tile, q4k_group_bytes)

static size_t q4k_act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static void q4k_quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act256_quantize_avx2(x, w->n_in, dst); }

const cv_mm_impl CV_VNNI_IMPL(q4_K) = {
    .name = V16_ISA " tile: " V16_TILE_NAME ", vpdpbusd, avx2's packed weights",
    .rows_per_group = 16,
    .pack_bytes = cv_q4_K_pack16_bytes,
    .pack = cv_q4_K_pack16,
    .act_row_bytes = q4k_act_row_bytes,
    .quant_act = q4k_quant_act,
    .run = q4k_vnni_run,
};

#endif
