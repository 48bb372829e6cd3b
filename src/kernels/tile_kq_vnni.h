/* tile_kq_vnni.h — the K-quants' matmul tiles at the VNNI levels (q4_K,
 * q5_K, q6_K, q2_K, q3_K, iq4_xs), written once in v16 operations
 * (simd_vnni.h) and instantiated by the small dt_<type>_avx512.c and
 * dt_<type>_avxvnni.c files (CV_VNNI_KQ_IMPL). Each reads its type's AVX2
 * pack (cv_<type>_pack16; the layout is written out in dt_<type>_avx2.c and
 * restated by offset here) and act256 activation rows.
 *
 * The shape of every tile: per super-block, J = v16_subs(T) sub-blocks at
 * a time, each token's products of a sub-block summed by vpdpbusd alone in
 * int32 (J x T sums in flight), then the sub-block's scale applied to the
 * sum (vpmulld, or vpdpwssd where the sum fits int16) and added to the
 * super-block's int32 sum; per super-block the offsets (mins, or the levels'
 * bias times the scales) meet the activation sums in vpdpwssd and the
 * floats are met in the AVX2 tile's order. Where the AVX2 tile sums the same
 * integer per row and super-block, the outputs are its bits
 * (docs/KERNELS.md has the table; test_kernels_matmul compares them). */
#ifndef CV_TILE_KQ_VNNI_H
#define CV_TILE_KQ_VNNI_H

#include "kernels/simd_vnni.h"

/* The cv_mm_impl of a K-quant's VNNI tile at the level being compiled: its
 * type's 16-row pack, act256 rows, run = the CV_VNNI_TILE_RUN of its tile. */
static inline size_t kq_act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static inline void kq_quant_act(const cv_wmat *w, const float *x, void *dst)
{
    cv_act256_quantize_avx2(x, w->n_in, dst);
}
#define CV_VNNI_KQ_IMPL(type, run_fn)                                                                                  \
    const cv_mm_impl CV_VNNI_IMPL(type) = {                                                                            \
        .name = V16_ISA " tile: " V16_TILE_NAME ", vpdpbusd, avx2's packed weights",                                  \
        .rows_per_group = 16,                                                                                          \
        .pack_bytes = cv_##type##_pack16_bytes,                                                                        \
        .pack = cv_##type##_pack16,                                                                                    \
        .act_row_bytes = kq_act_row_bytes,                                                                             \
        .quant_act = kq_quant_act,                                                                                     \
        .run = run_fn,                                                                                                 \
    }

/* The signed byte of sub-block j of a row's pair of scale bytes (packs
 * that keep [pair][16 rows][2]: q6_K, q3_K, iq4_xs), as int32 per row, from
 * the pair loaded as a sign-extended int16 (v16_i16_i32): even j the low
 * byte, odd j the high one. */
static inline __attribute__((always_inline)) v16i kq_pair_i8(v16i pair, int j)
{
    return j & 1 ? v16_srai32(pair, 8) : v16_srai32(v16_slli32(pair, 24), 24);
}

/* ---- q4_K and q5_K ----
 * dt_q4_k_avx2.c's pack, per group and super-block of 2368 bytes: u8
 * sc[8][16] at 0, mins u8 mn[4][2][8][2] at 128, f16 d[16] at 256 and
 * dmin[16] at 288, then 8 sub-blocks x 4 vectors of 64 bytes at 320, low
 * nibbles k-step 2i and high 2i+1. dt_q5_k_avx2.c's, 2880 bytes: the same
 * with 320 bytes a sub-block, the fifth bits qh first (bit s of a byte:
 * k-step s), so a level is its nibble | its fifth bit shifted into bit 4
 * (one vpternlogd at avx512).
 * A sub-block's 8 vpdpbusd per token, its scale by vpmulld; the mins by
 * vpdpwssd with the activation sums of each 32 (bsum32). The AVX2 tiles sum
 * each sub-block's 32 products in int16 pairs (never overflowing; q5_K in
 * two rounds) and apply the scale in vpmaddwd: the same integers, the same
 * bits. */

#define Q4K_SB_BYTES 2368
#define Q5K_SB_BYTES 2880

/* qh shifted so that the fifth bit of k-step ks sits in bit 4. */
static inline __attribute__((always_inline)) v16i q5k_hbit(v16i h, int ks)
{
    return ks < 4 ? v16_slli16(h, 4 - ks) : ks == 4 ? h : v16_srli16(h, ks - 4);
}

/* 16 rows x T tokens over all super-blocks: out[t][16]; five: q5_K. */
static inline __attribute__((always_inline)) void q45k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                 size_t stride, int64_t n_in, int T, float *out,
                                                                 bool five)
{
    const int64_t nsb = n_in / QK_K;
    const int sb_bytes = five ? Q5K_SB_BYTES : Q4K_SB_BYTES, sub_bytes = five ? 320 : 256, nib = five ? 64 : 0;
    const int J = v16_subs(T, 8); /* sub-blocks at once */
    const v16i m4 = v16_set1_8(0x0F), m10 = v16_set1_8(0x10);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum32(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * sb_bytes, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 8; j0 += J) {
            /* J eighths of the super-block two ahead, spread out */
            prefetch_range(sb + 2 * sb_bytes + j0 * (sb_bytes / 8), (size_t)J * (sb_bytes / 8));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 4")
            for (int i = 0; i < 4; i++) {
                _Pragma("GCC unroll 8")
                for (int jj = 0; jj < J; jj++) {
                    const int j = j0 + jj;
                    const uint8_t *blk = sb + 320 + j * sub_bytes;
                    const v16i v = v16_load(blk + nib + i * 64);
                    v16i w0 = v16_and(v, m4), w1 = v16_and(v16_srli16(v, 4), m4);
                    if (five) {
                        const v16i h = v16_load(blk);
                        w0 = v16_or_and(w0, q5k_hbit(h, 2 * i), m10);
                        w1 = v16_or_and(w1, q5k_hbit(h, 2 * i + 1), m10);
                    }
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++) {
                        const uint8_t *a = as + t * stride + 32 * j + 8 * i;
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w0, a);
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w1, a + 4);
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

static inline __attribute__((always_inline)) void q4k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    q45k_vnni_tile(wp, act, stride, n_in, T, out, false);
}
static inline __attribute__((always_inline)) void q5k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    q45k_vnni_tile(wp, act, stride, n_in, T, out, true);
}
static inline size_t q4k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q4K_SB_BYTES; }
static inline size_t q5k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q5K_SB_BYTES; }

/* ---- q6_K ----
 * dt_q6_k_avx2.c's pack, per group and super-block of 3360 bytes: i8
 * sc[8 pairs][16 rows][2] at 0, f16 d[16] at 256, then 16 sub-blocks of 16
 * values x 192 bytes at 288: vectors A, B, C whose low 6 bits are k-steps
 * 0, 1, 2 and whose top 2 bits are k-step 3's levels in three bit pairs.
 * Levels 0..63 unsigned; the -32 goes through the activation sums of each
 * 16 (bsum16) times the scales, in vpdpwssd. A sub-block's 4 vpdpbusd per
 * token, its scale by vpmulld (a sum of 16 products reaches 128016). The
 * AVX2 tiles sum the same integers (two vpmaddubsw in int16, then
 * vpmaddwd by the scale): the same bits. */

#define Q6K_SB_BYTES 3360

static inline __attribute__((always_inline)) void q6k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const int J = v16_subs(T, 16);
    const v16i m3f = v16_set1_8(0x3F), mc0 = v16_set1_8((int8_t)0xC0), m0c = v16_set1_8(0x0C),
               m30 = v16_set1_8(0x30);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum16(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * Q6K_SB_BYTES, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 16; j0 += J) {
            prefetch_range(sb + 2 * Q6K_SB_BYTES + j0 * (Q6K_SB_BYTES / 16), (size_t)J * (Q6K_SB_BYTES / 16));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const uint8_t *blk = sb + 288 + j * 192;
                const v16i va = v16_load(blk), vb = v16_load(blk + 64), vc = v16_load(blk + 128);
                v16i w[4];
                w[0] = v16_and(va, m3f);
                w[1] = v16_and(vb, m3f);
                w[2] = v16_and(vc, m3f);
                /* top bit pairs of A, B, C -> bits 0-1, 2-3, 4-5 (the 16-bit
                 * shifts bring in the next byte's bits, which the masks drop) */
                w[3] = v16_or_and(v16_or_and(v16_srli16(v16_and(va, mc0), 6), v16_srli16(vb, 4), m0c),
                                  v16_srli16(vc, 2), m30);
                _Pragma("GCC unroll 4")
                for (int k = 0; k < 4; k++)
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++)
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w[k], as + t * stride + 16 * j + 4 * k);
            }
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const v16i sc = kq_pair_i8(v16_i16_i32(sb + (j / 2) * 32), j);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    isum[t] = v16_add(isum[t], v16_mullo(sub[jj * T + t], sc));
            }
        }
        const v16f d = v16_f16(sb + 256);
        v16i sp[8]; /* int16 (sc 2p, sc 2p+1) per row */
        _Pragma("GCC unroll 8")
        for (int p = 0; p < 8; p++)
            sp[p] = v16_i8_i16(sb + p * 32);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            v16i o = v16_zero();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++)
                o = v16_dpwssd_b(o, sp[p], bst + 2 * p);
            const v16f da = v16_bcast_f32((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[t] = v16_fmadd(v16_cvt(v16_sub(isum[t], v16_slli32(o, 5))), v16_mul(d, da), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        v16_store(out + 16 * t, acc[t]);
}

static inline size_t q6k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q6K_SB_BYTES; }

/* ---- q2_K ----
 * dt_q2_k_avx2.c's pack, per group and super-block of 1344 bytes: u8
 * scm[8 pairs][16 rows][2] at 0 (the GGUF byte: 4-bit scale, 4-bit min),
 * f16 d[16] at 256 and dmin[16] at 288, then 16 sub-blocks x 64 bytes at
 * 320, bits 2s..2s+1 of each byte k-step s. A sub-block's 4 vpdpbusd per
 * token sum at most 16 x 3 x 127, so one vpdpwssd (the sum's low int16
 * times the scale, its high int16 times 0) applies the scale; the mins meet
 * the activation sums of each 16 (bsum16) in vpdpwssd. The AVX2 tile sums
 * the same integers (4 vpmaddubsw in int16, then vpmaddwd): the same bits. */

#define Q2K_SB_BYTES 1344

static inline __attribute__((always_inline)) void q2k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const int J = v16_subs(T, 16);
    const v16i m3 = v16_set1_8(3), m0f = v16_set1_32(0x0F);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum16(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * Q2K_SB_BYTES, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 16; j0 += J) {
            /* four ahead: 5.4 KB, as far as the others' two */
            prefetch_range(sb + 4 * Q2K_SB_BYTES + j0 * (Q2K_SB_BYTES / 16), (size_t)J * (Q2K_SB_BYTES / 16));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const v16i v = v16_load(sb + 320 + j * 64);
                _Pragma("GCC unroll 4")
                for (int ks = 0; ks < 4; ks++) {
                    const v16i w = v16_and(ks ? v16_srli16(v, 2 * ks) : v, m3);
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++)
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w, as + t * stride + 16 * j + 4 * ks);
                }
            }
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const v16i pair = v16_i16_i32(sb + (j / 2) * 32);
                const v16i sc = v16_and(j & 1 ? v16_srli32(pair, 8) : pair, m0f); /* (scale, 0) int16 */
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    isum[t] = v16_dpwssd(isum[t], sub[jj * T + t], sc);
            }
        }
        const v16f d = v16_f16(sb + 256), dmin = v16_f16(sb + 288);
        v16i mn[8]; /* int16 (min 2p, min 2p+1) per row: the high nibbles */
        _Pragma("GCC unroll 8")
        for (int p = 0; p < 8; p++)
            mn[p] = v16_srli16(v16_u8_i16(sb + p * 32), 4);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            v16i mi = v16_zero();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++)
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

static inline size_t q2k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q2K_SB_BYTES; }

/* ---- q3_K ----
 * dt_q3_k_avx2.c's pack, per group and super-block of 1824 bytes: i8
 * sc[8 pairs][16 rows][2] at 0 (scale - 32), f16 d[16] at 256, then per
 * sub-block pair vectors A, B, C of 64 bytes at 288, k-step k = 4e + s of
 * sub-block 2p + e in 3 bits: k = 0, 1, 2 in bits 0-2 of A, B, C, k = 3,
 * 4, 5 in bits 3-5, k = 6, 7 in the top 2 bits of A, B with their third
 * bits in bits 6, 7 of C. Levels 0..7 unsigned; a sub-block's sum (<= 16 x
 * 7 x 127) takes its scale in one vpdpwssd, and the -4 goes through bsum16
 * times the scales in vpdpwssd. The AVX2 tile sums the same integers: the
 * same bits. */

#define Q3K_SB_BYTES 1824

static inline __attribute__((always_inline)) void q3k_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                size_t stride, int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const int J = v16_subs(T, 16);
    const v16i m3 = v16_set1_8(3), m4 = v16_set1_8(4), m7 = v16_set1_8(7), low16 = v16_set1_32(0xFFFF);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum16(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * Q3K_SB_BYTES, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 16; j0 += J) {
            /* three ahead: 5.5 KB, as far as the others' two */
            prefetch_range(sb + 3 * Q3K_SB_BYTES + j0 * (Q3K_SB_BYTES / 16), (size_t)J * (Q3K_SB_BYTES / 16));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const uint8_t *abc = sb + 288 + (j / 2) * 192;
                _Pragma("GCC unroll 4")
                for (int ks = 0; ks < 4; ks++) {
                    const int k = 4 * (j & 1) + ks;
                    const v16i w = k < 3   ? v16_and(v16_load(abc + 64 * k), m7)
                                   : k < 6 ? v16_and(v16_srli16(v16_load(abc + 64 * (k - 3)), 3), m7)
                                           : v16_or_and(v16_and(v16_srli16(v16_load(abc + 64 * (k - 6)), 6), m3),
                                                        v16_srli16(v16_load(abc + 128), k - 2), m4);
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++)
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w, as + t * stride + 16 * j + 4 * ks);
                }
            }
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                /* (scale, 0) int16 */
                const v16i sc = v16_and(kq_pair_i8(v16_i16_i32(sb + (j / 2) * 32), j), low16);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    isum[t] = v16_dpwssd(isum[t], sub[jj * T + t], sc);
            }
        }
        const v16f d = v16_f16(sb + 256);
        v16i sp[8]; /* int16 (sc 2p, sc 2p+1) per row */
        _Pragma("GCC unroll 8")
        for (int p = 0; p < 8; p++)
            sp[p] = v16_i8_i16(sb + p * 32);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            v16i o = v16_zero();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++)
                o = v16_dpwssd_b(o, sp[p], bst + 2 * p);
            const v16f da = v16_bcast_f32((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[t] = v16_fmadd(v16_cvt(v16_sub(isum[t], v16_slli32(o, 2))), v16_mul(d, da), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        v16_store(out + 16 * t, acc[t]);
}

static inline size_t q3k_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * Q3K_SB_BYTES; }

/* ---- iq4_xs ----
 * dt_iq4_xs_avx2.c's pack, per group and super-block of 2208 bytes: i8
 * ls[4 pairs][16 rows][2] at 0 (scale - 32), f16 d[16] at 128, then 8
 * sub-blocks x 4 vectors of 64 bytes at 160, q4_K's nibbles. vpdpbusd wants
 * unsigned weights, so the table gives K + 128 (1..241; K itself reaches
 * -127) and the 128 comes back per sub-block through the activation sums
 * of each 32: sum K a = sum (K + 128) a - 128 bsum32. A sub-block's 8
 * vpdpbusd per token, its scale by vpmulld, the 128 bsum32 ls in vpdpwssd
 * per super-block. The AVX2 tile (vpsignb, vpmaddubsw, vpmaddwd by the
 * scales) sums the same integer sum(ls K a): the same bits. */

#define IQ4XS_SB_BYTES 2208

static inline __attribute__((always_inline)) void iq4xs_vnni_tile(const uint8_t *wp, const uint8_t *act,
                                                                  size_t stride, int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const int J = v16_subs(T, 8);
    const v16i m4 = v16_set1_8(0x0F), tbl = v16_xor(v16_table(cv_iq4_values), v16_set1_8((int8_t)0x80));
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum32(act, n_in);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * IQ4XS_SB_BYTES, *as = act + s * QK_K;
        v16i isum[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            isum[t] = v16_zero();
        _Pragma("GCC unroll 1")
        for (int j0 = 0; j0 < 8; j0 += J) {
            prefetch_range(sb + 2 * IQ4XS_SB_BYTES + j0 * (IQ4XS_SB_BYTES / 8), (size_t)J * (IQ4XS_SB_BYTES / 8));
            v16i sub[V16_CHAINS]; /* [jj][t] */
            _Pragma("GCC unroll 8")
            for (int k = 0; k < J * T; k++)
                sub[k] = v16_zero();
            _Pragma("GCC unroll 4")
            for (int i = 0; i < 4; i++) {
                _Pragma("GCC unroll 8")
                for (int jj = 0; jj < J; jj++) {
                    const int j = j0 + jj;
                    const v16i v = v16_load(sb + 160 + j * 256 + i * 64);
                    const v16i w0 = v16_shuffle8(tbl, v16_and(v, m4));
                    const v16i w1 = v16_shuffle8(tbl, v16_and(v16_srli16(v, 4), m4));
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++) {
                        const uint8_t *a = as + t * stride + 32 * j + 8 * i;
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w0, a);
                        sub[jj * T + t] = v16_dpbusd(sub[jj * T + t], w1, a + 4);
                    }
                }
            }
            _Pragma("GCC unroll 8")
            for (int jj = 0; jj < J; jj++) {
                const int j = j0 + jj;
                const v16i ls = kq_pair_i8(v16_i16_i32(sb + (j / 2) * 32), j);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    isum[t] = v16_add(isum[t], v16_mullo(sub[jj * T + t], ls));
            }
        }
        const v16f d = v16_f16(sb + 128);
        v16i lp[4]; /* int16 (ls 2p, ls 2p+1) per row */
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++)
            lp[p] = v16_i8_i16(sb + p * 32);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 8 * s) + t * stride);
            v16i o = v16_zero();
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++)
                o = v16_dpwssd_b(o, lp[p], bst + 2 * p);
            const v16f da = v16_bcast_f32((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[t] = v16_fmadd(v16_cvt(v16_sub(isum[t], v16_slli32(o, 7))), v16_mul(d, da), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        v16_store(out + 16 * t, acc[t]);
}

static inline size_t iq4xs_group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * IQ4XS_SB_BYTES; }

#endif
