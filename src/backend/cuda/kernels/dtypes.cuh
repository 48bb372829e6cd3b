/* dtypes.cuh — the GGUF weight types on the GPU, one traits struct each,
 * reading the blocks exactly as kernels_int.h lays them out (the CPU's
 * reference is the spec: tests/backend compares every type against it).
 *
 * A quantized type (INT8) gives, for group j of 32 consecutive values of a
 * block (QK values, BB bytes), the 32 integer levels packed as int8 in
 * value order and the affine map back to values: x = dm[h] * q - dm[2 + h]
 * for the values 16h .. 16h + 15 of the group (h = 0, 1), so one dot-product
 * routine (cv_group_dot) serves every type. The float types (F32, F16,
 * BF16) give one value at a time and multiply f32 activations.
 *
 * Loads use the alignment each block size guarantees on rows that start
 * 256-aligned (cuMemAlloc's) and hold whole blocks: 4 bytes for 20-, 84-,
 * 136-, 144- and 176-byte blocks, 2 for 18, 22, 34, 110 and 210, 1 for
 * MXFP4's 17. */
#pragma once
#include "common.cuh"

/* ggml type ids (gguf.h's cv_ggml_type) */
#define CV_T_F32 0
#define CV_T_F16 1
#define CV_T_Q4_0 2
#define CV_T_Q4_1 3
#define CV_T_Q5_0 6
#define CV_T_Q5_1 7
#define CV_T_Q8_0 8
#define CV_T_Q2_K 10
#define CV_T_Q3_K 11
#define CV_T_Q4_K 12
#define CV_T_Q5_K 13
#define CV_T_Q6_K 14
#define CV_T_IQ4_NL 20
#define CV_T_IQ4_XS 23
#define CV_T_BF16 30
#define CV_T_MXFP4 39

/* IQ4_NL / IQ4_XS's non-linear levels and MXFP4's E2M1 values doubled
 * (kernels_int.h: cv_iq4_values, cv_mxfp4_values). */
__constant__ i8 cv_iq4_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
__constant__ i8 cv_mxfp4_levels[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* Bits 4i..4i+3 of h, each moved to bit `to` of its own byte (the fifth
 * bit of four 5-bit levels). */
__device__ __forceinline__ u32 cv_spread4(u32 h, int i, int to)
{
    const u32 b = (h >> (4 * i)) & 0xF;
    return ((b & 1) | ((b & 2) << 7) | ((b & 4) << 14) | ((b & 8) << 21)) << to;
}

/* q4_K / q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes
 * (kernels_int.h, k_scale_min). */
__device__ __forceinline__ void cv_k_scale_min(int j, const u8 *q, float *sc, float *m)
{
    if (j < 4) {
        *sc = (float)(q[j] & 63);
        *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* 16 bytes of 4-bit indices, as four words v, into the 32 levels of
 * table t: the low nibbles are values 0-15, the high ones 16-31 (iq4_nl,
 * iq4_xs, mxfp4). */
__device__ __forceinline__ void cv_lut_nibbles(const u32 v[4], const i8 *t, int q[8])
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        q[i] = cv_lut4(v[i], t);
        q[4 + i] = cv_lut4(v[i] >> 4, t);
    }
}

struct cv_q4_0 {
    static constexpr int QK = 32, BB = 18;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const u32 v = cv_ld2x2(b + 2 + 4 * i);
            q[i] = (int)__vsub4(v & 0x0F0F0F0F, 0x08080808);
            q[4 + i] = (int)__vsub4((v >> 4) & 0x0F0F0F0F, 0x08080808);
        }
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = 0.0f;
    }
};

struct cv_q4_1 {
    static constexpr int QK = 32, BB = 20;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b)), m = cv_h2f(cv_ld_u16(b + 2));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const u32 v = cv_ld4(b + 4 + 4 * i);
            q[i] = (int)(v & 0x0F0F0F0F);
            q[4 + i] = (int)((v >> 4) & 0x0F0F0F0F);
        }
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = -m; /* x = d q + m */
    }
};

struct cv_q5_0 {
    static constexpr int QK = 32, BB = 22;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b));
        const u32 qh = cv_ld2x2(b + 2);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const u32 v = cv_ld2x2(b + 6 + 4 * i);
            q[i] = (int)__vsub4((v & 0x0F0F0F0F) | cv_spread4(qh, i, 4), 0x10101010);
            q[4 + i] = (int)__vsub4(((v >> 4) & 0x0F0F0F0F) | cv_spread4(qh >> 16, i, 4), 0x10101010);
        }
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = 0.0f;
    }
};

struct cv_q5_1 {
    static constexpr int QK = 32, BB = 24;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b)), m = cv_h2f(cv_ld_u16(b + 2));
        const u32 qh = cv_ld4(b + 4);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const u32 v = cv_ld4(b + 8 + 4 * i);
            q[i] = (int)((v & 0x0F0F0F0F) | cv_spread4(qh, i, 4));
            q[4 + i] = (int)(((v >> 4) & 0x0F0F0F0F) | cv_spread4(qh >> 16, i, 4));
        }
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = -m;
    }
};

struct cv_q8_0 {
    static constexpr int QK = 32, BB = 34;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b));
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = (int)cv_ld2x2(b + 2 + 4 * i);
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = 0.0f;
    }
};

/* q2_K: scales[16] | qs[64] | d | dmin. Value 32j + l (l < 32) keeps its 2
 * bits at byte 32(j/4) + l, shift 2(j%4); sub-blocks 2j and 2j + 1. */
struct cv_q2_K {
    static constexpr int QK = 256, BB = 84;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b + 80)), dmin = cv_h2f(cv_ld_u16(b + 82));
        const u8 *qs = b + 16 + 32 * (j / 4);
        const int sh = 2 * (j % 4);
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = (int)((cv_ld4(qs + 4 * i) >> sh) & 0x03030303);
        const u8 s0 = b[2 * j], s1 = b[2 * j + 1];
        dm[0] = d * (float)(s0 & 0xF);
        dm[1] = d * (float)(s1 & 0xF);
        dm[2] = dmin * (float)(s0 >> 4);
        dm[3] = dmin * (float)(s1 >> 4);
    }
};

/* q3_K: hmask[32] | qs[64] | scales[12] | d; level = 2 low bits as q2_K
 * plus bit j of hmask[l], x = d (sc - 32) (level - 4). */
struct cv_q3_K {
    static constexpr int QK = 256, BB = 110;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ int scale(const u8 *s, int k)
    {
        const int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
        const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        return (lo | (hi << 4)) - 32;
    }
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b + 108));
        const u8 *qs = b + 32 + 32 * (j / 4);
        const int sh = 2 * (j % 4);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const u32 lo = (cv_ld2x2(qs + 4 * i) >> sh) & 0x03030303;
            const u32 hb = ((cv_ld2x2(b + 4 * i) >> j) & 0x01010101) << 2;
            q[i] = (int)__vsub4(lo | hb, 0x04040404);
        }
        dm[0] = d * (float)scale(b + 96, 2 * j);
        dm[1] = d * (float)scale(b + 96, 2 * j + 1);
        dm[2] = dm[3] = 0.0f;
    }
};

/* q4_K: d | dmin | scales[12] | qs[128]; sub-block j in the low (j even)
 * or high nibbles of bytes 32(j/2) .. +31; x = d sc q - dmin m. */
struct cv_q4_K {
    static constexpr int QK = 256, BB = 144;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b)), dmin = cv_h2f(cv_ld_u16(b + 2));
        const u8 *qs = b + 16 + 32 * (j / 2);
        const int sh = 4 * (j % 2);
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = (int)((cv_ld4(qs + 4 * i) >> sh) & 0x0F0F0F0F);
        float sc, m;
        cv_k_scale_min(j, b + 4, &sc, &m);
        dm[0] = dm[1] = d * sc;
        dm[2] = dm[3] = dmin * m;
    }
};

/* q5_K: q4_K's fields with qh[32] before qs; bit 4 of value l of
 * sub-block j is bit j of qh[l]. */
struct cv_q5_K {
    static constexpr int QK = 256, BB = 176;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b)), dmin = cv_h2f(cv_ld_u16(b + 2));
        const u8 *qs = b + 48 + 32 * (j / 2);
        const int sh = 4 * (j % 2);
#pragma unroll
        for (int i = 0; i < 8; i++)
            q[i] = (int)(((cv_ld4(qs + 4 * i) >> sh) & 0x0F0F0F0F) | (((cv_ld4(b + 16 + 4 * i) >> j) & 0x01010101) << 4));
        float sc, m;
        cv_k_scale_min(j, b + 4, &sc, &m);
        dm[0] = dm[1] = d * sc;
        dm[2] = dm[3] = dmin * m;
    }
};

/* q6_K: ql[128] | qh[64] | scales[16] | d. Group j is values 32j .. +31 of
 * the 128-value half j/4; within it, quarter jj = j%4 takes the low (jj < 2)
 * or high nibbles of ql[32(jj%2) + l] and bits 2jj, 2jj+1 of qh[l];
 * x = d sc (q - 32) with sub-blocks 2j and 2j + 1. */
struct cv_q6_K {
    static constexpr int QK = 256, BB = 210;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b + 208));
        const int h = j / 4, jj = j % 4;
        const u8 *ql = b + 64 * h + 32 * (jj % 2), *qh = b + 128 + 32 * h;
        const int shl = 4 * (jj / 2), shh = 2 * jj;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const u32 lo = (cv_ld2x2(ql + 4 * i) >> shl) & 0x0F0F0F0F;
            const u32 hi = ((cv_ld2x2(qh + 4 * i) >> shh) & 0x03030303) << 4;
            q[i] = (int)__vsub4(lo | hi, 0x20202020);
        }
        const i8 *sc = (const i8 *)(b + 192);
        dm[0] = d * (float)sc[2 * j];
        dm[1] = d * (float)sc[2 * j + 1];
        dm[2] = dm[3] = 0.0f;
    }
};

struct cv_iq4_nl {
    static constexpr int QK = 32, BB = 18;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b));
        const u32 v[4] = { cv_ld2x2(b + 2), cv_ld2x2(b + 6), cv_ld2x2(b + 10), cv_ld2x2(b + 14) };
        cv_lut_nibbles(v, cv_iq4_levels, q);
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = 0.0f;
    }
};

/* iq4_xs: d | scales_h | scales_l[4] | qs[128]; sub-block j is 16 bytes as
 * iq4_nl's, scaled by d (ls - 32). */
struct cv_iq4_xs {
    static constexpr int QK = 256, BB = 136;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_h2f(cv_ld_u16(b));
        const u32 sh = cv_ld_u16(b + 2);
        const int ls = (((b[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((sh >> (2 * j)) & 3) << 4)) - 32;
        const u8 *qs = b + 8 + 16 * j;
        const u32 v[4] = { cv_ld4(qs), cv_ld4(qs + 4), cv_ld4(qs + 8), cv_ld4(qs + 12) };
        cv_lut_nibbles(v, cv_iq4_levels, q);
        dm[0] = dm[1] = d * (float)ls;
        dm[2] = dm[3] = 0.0f;
    }
};

struct cv_mxfp4 {
    static constexpr int QK = 32, BB = 17;
    static constexpr bool INT8 = true;
    static __device__ __forceinline__ void load(const u8 *b, int j, int q[8], float dm[4])
    {
        const float d = cv_e8m0_half(b[0]);
        const u32 v[4] = { cv_ld1x4(b + 1), cv_ld1x4(b + 5), cv_ld1x4(b + 9), cv_ld1x4(b + 13) };
        cv_lut_nibbles(v, cv_mxfp4_levels, q);
        dm[0] = dm[1] = d;
        dm[2] = dm[3] = 0.0f;
    }
};

struct cv_f32 {
    static constexpr bool INT8 = false;
    static __device__ __forceinline__ float at(const u8 *row, i64 i) { return ((const float *)row)[i]; }
};
struct cv_f16 {
    static constexpr bool INT8 = false;
    static __device__ __forceinline__ float at(const u8 *row, i64 i) { return cv_h2f(((const u16 *)row)[i]); }
};
struct cv_bf16 {
    static constexpr bool INT8 = false;
    static __device__ __forceinline__ float at(const u8 *row, i64 i) { return cv_bf2f(((const u16 *)row)[i]); }
};

/* The traits of the type a program is compiled for (-DCV_WTYPE=id). */
#if defined(CV_WTYPE)
#if CV_WTYPE == CV_T_F32
typedef cv_f32 cv_wt;
#elif CV_WTYPE == CV_T_F16
typedef cv_f16 cv_wt;
#elif CV_WTYPE == CV_T_BF16
typedef cv_bf16 cv_wt;
#elif CV_WTYPE == CV_T_Q4_0
typedef cv_q4_0 cv_wt;
#elif CV_WTYPE == CV_T_Q4_1
typedef cv_q4_1 cv_wt;
#elif CV_WTYPE == CV_T_Q5_0
typedef cv_q5_0 cv_wt;
#elif CV_WTYPE == CV_T_Q5_1
typedef cv_q5_1 cv_wt;
#elif CV_WTYPE == CV_T_Q8_0
typedef cv_q8_0 cv_wt;
#elif CV_WTYPE == CV_T_Q2_K
typedef cv_q2_K cv_wt;
#elif CV_WTYPE == CV_T_Q3_K
typedef cv_q3_K cv_wt;
#elif CV_WTYPE == CV_T_Q4_K
typedef cv_q4_K cv_wt;
#elif CV_WTYPE == CV_T_Q5_K
typedef cv_q5_K cv_wt;
#elif CV_WTYPE == CV_T_Q6_K
typedef cv_q6_K cv_wt;
#elif CV_WTYPE == CV_T_IQ4_NL
typedef cv_iq4_nl cv_wt;
#elif CV_WTYPE == CV_T_IQ4_XS
typedef cv_iq4_xs cv_wt;
#elif CV_WTYPE == CV_T_MXFP4
typedef cv_mxfp4 cv_wt;
#else
#error "CV_WTYPE: no GPU kernel for this weight type"
#endif
#endif
