/* common.cuh — what every corvid CUDA kernel shares: fixed-width types
 * (NVRTC gets no system headers), half/bfloat conversions done in PTX, the
 * unaligned loads the GGUF block layouts need, and the quantized
 * activation block the int8 matmuls read.
 *
 * Compiled by NVRTC at run time (cuda_rtc.c), never by the build: the build
 * embeds this text (cuda_embed.cmake) and hands it to every program as an
 * include. */
#pragma once

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef long long i64;
typedef unsigned long long u64;

#define CV_FULL_MASK 0xffffffffu
#define CV_WARP 32

/* ---- scalars ---- */

__device__ __forceinline__ float cv_h2f(u16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ float cv_bf2f(u16 h) { return __int_as_float((int)((u32)h << 16)); }

/* MXFP4's scale 2^(e-128) from its E8M0 byte, as the CPU's
 * e8m0_half_to_f32 (kernels_int.h): e < 2 are the subnormals 2^-128, 2^-127. */
__device__ __forceinline__ float cv_e8m0_half(u8 e)
{
    const u32 bits = e < 2 ? 0x00200000u << e : (u32)(e - 1) << 23;
    return __int_as_float((int)bits);
}

/* ---- loads of 4 bytes at the alignment a block layout guarantees ---- */

__device__ __forceinline__ u32 cv_ld4(const u8 *p) { return *(const u32 *)p; }
__device__ __forceinline__ u32 cv_ld2x2(const u8 *p)
{
    const u16 *q = (const u16 *)p;
    return (u32)q[0] | ((u32)q[1] << 16);
}
__device__ __forceinline__ u32 cv_ld1x4(const u8 *p)
{
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}
__device__ __forceinline__ u16 cv_ld_u16(const u8 *p) { return *(const u16 *)p; }

/* Four 4-bit indices (the low nibble of each byte of v) looked up in a
 * 16-entry table of int8 levels, packed back into the four bytes. */
__device__ __forceinline__ int cv_lut4(u32 v, const i8 *t)
{
    return (int)((u32)(u8)t[v & 15] | ((u32)(u8)t[(v >> 8) & 15] << 8) | ((u32)(u8)t[(v >> 16) & 15] << 16) |
                 ((u32)(u8)t[(v >> 24) & 15] << 24));
}

/* ---- the activation block of the int8 matmuls ----
 * 32 consecutive values of an activation row quantized symmetrically:
 * x ~ d * qs[i], d = max|x| / 127; s0 and s1 are d times the sums of the
 * first and second 16 levels, which the weight types with a per-16 (or per
 * 32) minimum need (x = d_w q - m_w). 48 bytes, so three 16-byte loads. */
struct __align__(16) cv_act_q8 {
    int qs[8];
    float d, s0, s1, pad;
};

/* One group's contribution to a dot product: the 32 weight levels q
 * (packed int8, in value order), their scales dm[0] (values 0-15) and dm[1]
 * (16-31) and minimums dm[2], dm[3] (x = dm[h] q - dm[2 + h]), against an
 * activation block. The rounding is pinned (no contraction the compiler
 * could choose differently per caller), so a group's contribution has the
 * same bits in every kernel that computes it. */
__device__ __forceinline__ float cv_group_dot(const int q[8], const float dm[4], const cv_act_q8 &a)
{
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        lo = __dp4a(q[i], a.qs[i], lo);
        hi = __dp4a(q[4 + i], a.qs[4 + i], hi);
    }
    float r = __fmul_rn(__fmul_rn(dm[0], a.d), (float)lo);
    r = __fmaf_rn(__fmul_rn(dm[1], a.d), (float)hi, r);
    r = __fmaf_rn(-dm[2], a.s0, r);
    return __fmaf_rn(-dm[3], a.s1, r);
}

/* The sum of v over a warp by a fixed butterfly: every lane ends with the
 * same bits, whatever the kernel. */
__device__ __forceinline__ float cv_warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(CV_FULL_MASK, v, off));
    return v;
}

/* The sum of v over a block of 256 threads by a fixed tree (part: 256
 * floats of shared memory), returned to every thread: a row's sum does not
 * depend on anything but its values. Every thread of the block calls it. */
__device__ __forceinline__ float cv_block_sum256(float v, float *part)
{
    part[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int half = 128; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] = __fadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
        __syncthreads();
    }
    const float s = part[0];
    __syncthreads(); /* part is free again */
    return s;
}

/* ---- gated activations ---- */

/* backend.h's cv_bglu, by the same number */
#define CV_GLU_SILU 0
#define CV_GLU_GELU_TANH 1
#define CV_GLU_SILU_CLAMPED 2
/* 2 sqrt(2 / pi): the tanh GELU as x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) */
#define CV_GELU_2C 1.5957691216057308f

/* act(x) * v with the CPU's scalar reference's formulas (kernels/vec.c). */
__device__ __forceinline__ float cv_glu_value(int kind, float alpha, float limit, float x, float v)
{
    if (kind == CV_GLU_SILU)
        return x / (1.0f + expf(-x)) * v;
    if (kind == CV_GLU_GELU_TANH)
        return x / (1.0f + expf(-CV_GELU_2C * (x + 0.044715f * x * x * x))) * v;
    const float xc = fminf(x, limit), vc = fmaxf(fminf(v, limit), -limit);
    return xc / (1.0f + expf(-alpha * xc)) * (vc + 1.0f);
}

/* Routes of one expert a grouped matmul tile takes (mm.cu's 4 x 8 tiles;
 * act.cu's cv_route_group cuts the lists by it). */
#define CV_ROUTE_TILE 8
