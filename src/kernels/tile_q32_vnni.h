/* tile_q32_vnni.h — the VNNI matmul tile of the seven types whose blocks
 * hold 32 values (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4), written
 * once in simd_vnni.h's v16 operations: 16 rows in one zmm and tiles of up
 * to 8 tokens at avx512 (dt_q32_avx512.c), a pair of ymm and up to 4 tokens
 * at avx-vnni (dt_q32_avxvnni.c). Including it defines that level's
 * implementation of each type (cv_mm_q4_0_avx512, cv_mm_q4_0_avx_vnni, ...),
 * so each of those files is this header compiled with its level's flags.
 *
 * Layouts: each type's AVX2 pack (cv_<type>_pack16: tile_q4x_avx2.h,
 * tile_q5x_avx2.h, dt_q8_0_avx2.c, dt_mxfp4_avx2.c; iq4_nl packs as q4_0):
 * a k-step (4 values of 16 rows) is 64 contiguous bytes, one v16.
 *
 * Arithmetic. A k-step is one vpdpbusd per token (u8 weights x s8
 * activations, 4 products summed into an int32 lane), where the AVX2 tiles
 * issue vpmaddubsw + vpaddw, a vpmaddwd to widen, and for signed weights a
 * vpsignb. A block's int32 sum is exact either way, so it is the integer
 * the AVX2 tile computes. Unsigned levels go in as they are (the q4/q5
 * nibbles, mxfp4's T + 12); signed ones are offset by 128 into u8 (q8_0
 * flips each byte's top bit, iq4_nl looks up K + 128), and the block's
 * 128 sum(a) is taken back exactly: its chain starts at the int32
 * -128 sum(a) the activation row holds (act32 isum). A block then ends
 * with the AVX2 tile's float operations in the AVX2 tile's order, its
 * offset term read from the activation row in the form the AVX2 tile
 * computes it in its loop (act32 ks: q4_0's -8 s), so every output has the
 * AVX2 tile's bits (test_kernels_matmul compares them at every level).
 *
 * A tile of T tokens splits each block's 8 k-steps over V16_CHAINS / T
 * chains (up to 4), so that enough vpdpbusd sums are in flight for a
 * single token too (integer adds: the bits stay). */
#ifndef CV_TILE_Q32_VNNI_H
#define CV_TILE_Q32_VNNI_H

#include "kernels/simd_vnni.h"

enum { Q32_Q4_0, Q32_Q4_1, Q32_Q5_0, Q32_Q5_1, Q32_Q8_0, Q32_IQ4_NL, Q32_MXFP4 };

/* ---- where each type keeps a block ---- */

/* The packed bytes of one block of a group (16 rows x 32 values), as the
 * AVX2 packings lay them out: q5's qh vectors, the k-steps' levels (qs),
 * then the rows' f16 scales (and mins). mxfp4 keeps its blocks in pairs,
 * both blocks' exponents ahead of their levels. */
static inline size_t q32_block_bytes(const int kind)
{
    switch (kind) {
    case Q32_Q4_0: case Q32_IQ4_NL: return 288;
    case Q32_Q4_1: return 320;
    case Q32_Q5_0: return 352;
    case Q32_Q5_1: return 384;
    case Q32_Q8_0: return 544;
    default: return 272; /* mxfp4: 16 x 17, the stream's average */
    }
}
static inline const uint8_t *q32_qs(const uint8_t *wp, int64_t b, const int kind)
{
    if (kind == Q32_MXFP4)
        return wp + (size_t)(b / 2) * 544 + 32 + (size_t)(b % 2) * 256;
    return wp + (size_t)b * q32_block_bytes(kind) + (kind == Q32_Q5_0 || kind == Q32_Q5_1 ? 64 : 0);
}
/* The f16 scales (and after them the mins) of the block whose qs is at qs. */
static inline const cv_f16 *q32_d(const uint8_t *qs, const int kind)
{
    return (const cv_f16 *)(qs + (kind == Q32_Q8_0 ? 512 : 256));
}
static inline const uint8_t *q32_e(const uint8_t *wp, int64_t b)
{
    return wp + (size_t)(b / 2) * 544 + (size_t)(b % 2) * 16;
}

/* The u8 weights of k-step s (values 4s..4s+3). k is the type's constant:
 * the level table (iq4_nl, mxfp4), 0x80 (q8_0) or 0x10 (q5). */
static inline __attribute__((always_inline)) v16i q32_weights(const uint8_t *qs, int s, v16i m4, v16i k,
                                                              const int kind)
{
    if (kind == Q32_Q8_0)
        return v16_xor(v16_load(qs + 64 * s), k);
    v16i v = v16_load(qs + 64 * (s / 2));
    v = v16_and(s & 1 ? v16_srli16(v, 4) : v, m4);
    if (kind == Q32_IQ4_NL || kind == Q32_MXFP4)
        return v16_shuffle8(k, v);
    if (kind == Q32_Q5_0 || kind == Q32_Q5_1) {
        /* bit 4 of the levels: bit s of each byte of the qh vector */
        const v16i qh = v16_load(qs - 64);
        return v16_or_and(v, s < 4 ? v16_slli16(qh, 4 - s) : v16_srli16(qh, s - 4), k);
    }
    return v;
}

/* The level table of iq4_nl (K + 128: u8) or mxfp4 (T + 12, as its AVX2
 * tile takes them). */
static inline __attribute__((always_inline)) v16i q32_table(const int kind)
{
    int8_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = kind == Q32_IQ4_NL ? (int8_t)(cv_iq4_values[i] ^ 0x80) : (int8_t)(cv_mxfp4_values[i] + 12);
    return v16_table(t);
}

/* ---- the tile ---- */

/* Independent sums per block for a tile of T tokens (see the top). */
#define Q32_CHAINS(T) ((T) >= V16_CHAINS ? 1 : V16_CHAINS / (T) >= 4 ? 4 : V16_CHAINS / (T))

/* One group of 16 rows against T tokens: out[t][16 rows], activation rows
 * `stride` bytes apart (T is a constant after inlining, so every sum lives
 * in a register). */
static inline __attribute__((always_inline)) void q32_tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                           int64_t n_in, const int T, float *out, const int kind)
{
    const int64_t nb = n_in / 32;
    const int C = Q32_CHAINS(T);
    const bool isum = kind == Q32_Q8_0 || kind == Q32_IQ4_NL;
    const v16i m4 = v16_set1_8(0x0F);
    v16i k = v16_zero();
    if (kind == Q32_Q8_0)
        k = v16_set1_8((int8_t)0x80);
    else if (kind == Q32_Q5_0 || kind == Q32_Q5_1)
        k = v16_set1_8(0x10);
    else if (kind == Q32_IQ4_NL || kind == Q32_MXFP4)
        k = q32_table(kind);
    v16f acc[V16_MAX_TOK];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        acc[t] = v16f_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qs = q32_qs(wp, b, kind);
        prefetch_range(qs + 16 * q32_block_bytes(kind), q32_block_bytes(kind));
        v16i sum[4][V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < C; c++)
                sum[c][t] = v16_zero();
            if (isum) { /* -128 sum(a) of the block (act32 isum) */
                int32_t c;
                memcpy(&c, act32_s(act + t * stride, n_in) + b, 4);
                sum[0][t] = v16_set1_32(c);
            }
        }
        /* Each token's block of activations, opaque to the optimizer:
         * else it keeps every (token, k-step) address as an induction
         * variable of its own (64 of them at 8 tokens) and spills them. */
        const uint8_t *ab[V16_MAX_TOK];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            ab[t] = act + t * stride + 32 * b;
            __asm__("" : "+r"(ab[t]));
        }
        _Pragma("GCC unroll 8")
        for (int s = 0; s < 8; s++) {
            const v16i w = q32_weights(qs, s, m4, k, kind);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++)
                sum[s % C][t] = v16_dpbusd(sum[s % C][t], w, ab[t] + 4 * s);
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const uint8_t *at = act + t * stride;
            const float *da = act32_d(at, n_in) + b, *o = act32_s(at, n_in) + b;
            v16i i = sum[0][t];
            if (C == 4)
                i = v16_add(v16_add(i, sum[1][t]), v16_add(sum[2][t], sum[3][t]));
            else if (C == 2)
                i = v16_add(i, sum[1][t]);
            const v16f v = v16_cvt(i);
            switch (kind) {
            case Q32_Q4_1: case Q32_Q5_1: {
                /* d_w d_a sum(q a) + m_w s_a */
                const cv_f16 *d = q32_d(qs, kind);
                acc[t] = v16_fmadd(v16_f16(d + 16), v16_bcast_f32(o),
                                   v16_fmadd(v16_mul(v, v16_bcast_f32(da)), v16_f16(d), acc[t]));
                break;
            }
            case Q32_Q8_0: case Q32_IQ4_NL:
                /* d_w d_a sum(w a), the offset already taken back */
                acc[t] = v16_fmadd(v, v16_mul(v16_f16(q32_d(qs, kind)), v16_bcast_f32(da)), acc[t]);
                break;
            default: {
                /* d_w (d_a sum(q a) - k s_a), k s_a from the row (act32 ks) */
                const v16f dw = kind == Q32_MXFP4 ? v16_e8m0_half(q32_e(wp, b)) : v16_f16(q32_d(qs, kind));
                acc[t] = v16_fmadd(v16_fmadd(v, v16_bcast_f32(da), v16_bcast_f32(o)), dw, acc[t]);
                break;
            }
            }
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T; t++)
        v16_store(out + 16 * t, acc[t]);
}

/* ---- one implementation per type ---- */

/* The activation row of a kind: act32 with its block sums as the tile
 * applies them. */
static inline void q32_quant_act(const float *x, int64_t n_in, void *dst, const int kind)
{
    switch (kind) {
    case Q32_Q4_0: cv_act32_quantize_ks_avx2(x, n_in, dst, -8.0f); break;
    case Q32_Q5_0: cv_act32_quantize_ks_avx2(x, n_in, dst, -16.0f); break;
    case Q32_MXFP4: cv_act32_quantize_ks_avx2(x, n_in, dst, -12.0f); break;
    case Q32_Q8_0: case Q32_IQ4_NL: cv_act32_quantize_isum_avx2(x, n_in, dst, -128); break;
    default: cv_act32_quantize_avx2(x, n_in, dst); break;
    }
}

static inline size_t q32_act_row_bytes(const cv_wmat *w) { return act32_row_bytes(w->n_in); }

/* The implementation CV_VNNI_IMPL(type) of a type at the level being
 * compiled, over its AVX2 pack (instantiated for every type below). */
#define Q32_IMPL(type, KIND)                                                                                          \
    static size_t type##_group_bytes(int64_t n_in) { return cv_##type##_pack16_bytes(n_in, 16); }                    \
    static void type##_quant_act(const cv_wmat *w, const float *x, void *dst)                                         \
    {                                                                                                                 \
        q32_quant_act(x, w->n_in, dst, KIND);                                                                         \
    }                                                                                                                 \
    static inline __attribute__((always_inline)) void type##_tile(const uint8_t *wp, const uint8_t *act,            \
                                                                  size_t stride, int64_t n_in, int T, float *out)    \
    {                                                                                                                 \
        q32_tile(wp, act, stride, n_in, T, out, KIND);                                                                \
    }                                                                                                                 \
    CV_VNNI_TILE_RUN(type##_run, type##_tile, type##_group_bytes)                                                     \
    const cv_mm_impl CV_VNNI_IMPL(type) = {                                                                           \
        .name = V16_ISA " tile: " V16_TILE_NAME ", vpdpbusd, avx2's packed weights",                                 \
        .rows_per_group = 16,                                                                                         \
        .pack_bytes = cv_##type##_pack16_bytes,                                                                       \
        .pack = cv_##type##_pack16,                                                                                   \
        .act_row_bytes = q32_act_row_bytes,                                                                           \
        .quant_act = type##_quant_act,                                                                                \
        .run = type##_run,                                                                                            \
    };

Q32_IMPL(q4_0, Q32_Q4_0)
Q32_IMPL(q4_1, Q32_Q4_1)
Q32_IMPL(q5_0, Q32_Q5_0)
Q32_IMPL(q5_1, Q32_Q5_1)
Q32_IMPL(q8_0, Q32_Q8_0)
Q32_IMPL(iq4_nl, Q32_IQ4_NL)
Q32_IMPL(mxfp4, Q32_MXFP4)

#endif
