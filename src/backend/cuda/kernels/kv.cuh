/* kv.cuh — the K/V cache's blocks in device memory, in the CPU's layout
 * (kernels/attention.h is the spec; the engine saves, shares and reloads
 * blocks byte for byte, so a block must not depend on who wrote it).
 *
 * A pool is head-major in runs of blocks: within a run, region r =
 * (layer * n_parts + kv) * n_head_kv + head holds that head's keys (kv 0)
 * or values (kv 1) of the run's blocks in block order, head_bytes a block
 * ("a half"); runs follow one another (kv_addr.cuh, which the host's tests
 * read too). In a half of CV_KV_BLOCK positions: f32 and f16 keys are transposed ([head_dim][16]: one
 * dimension's 16 positions together), values by position ([16][head_dim]);
 * q8_0 keys are int8 levels offset by 128, in rows of 16 positions x 4
 * dimensions (a position's 4 bytes together: cv_kv_k8_at), values int8 by
 * position, and after the levels each half's f16 factors as
 * [head_dim / qgroup][16], one per group of qgroup dimensions of a
 * position (qgroup 32, or head_dim when 32 does not divide it). */
#pragma once
#include "common.cuh"
#define CV_KV_FN __device__ __forceinline__
#include "kv_addr.cuh"

#define CV_KV_BLOCK 16
/* the pool's element types (ggml type ids) */
#define CV_KV_F32 0
#define CV_KV_F16 1
#define CV_KV_Q8_0 8
/* f16's largest finite value: a factor above it is infinite */
#define CV_F16_MAX 65504.0f

__device__ __forceinline__ u8 *cv_kv_k(const cv_kv &p, int b, int layer, int head)
{
    return p.data + cv_kv_k_at_block(&p, b, layer, head);
}
__device__ __forceinline__ u8 *cv_kv_v(const cv_kv &p, int b, int layer, int head)
{
    return p.data + cv_kv_v_at_block(&p, b, layer, head);
}
/* Element offsets in a half of dimension i at position j. */
__device__ __forceinline__ i64 cv_kv_k_at(int j, int i) { return (i64)i * CV_KV_BLOCK + j; }
__device__ __forceinline__ i64 cv_kv_k8_at(int j, int i) { return (i64)(i / 4) * 4 * CV_KV_BLOCK + j * 4 + i % 4; }
__device__ __forceinline__ i64 cv_kv_v_at(int hd, int j, int i) { return (i64)j * hd + i; }
/* q8_0: a half's factors, and the index of position j's for dimension i. */
__device__ __forceinline__ u16 *cv_kv_q8_scales(const cv_kv &p, u8 *piece)
{
    return (u16 *)(piece + (i64)CV_KV_BLOCK * p.head_dim);
}
__device__ __forceinline__ i64 cv_kv_scale_at(const cv_kv &p, int j, int i)
{
    return (i64)(i / p.qgroup) * CV_KV_BLOCK + j;
}

/* f32 to f16, rounding to nearest even (the CPU's F16C and its scalar
 * conversion). */
__device__ __forceinline__ u16 cv_f2h(float f)
{
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

/* One position's key (key true) or value x [head_dim] into position j of
 * a head's half, converted to the pool's type as the CPU's kv_store does:
 * q8_0 per group d = f16(max|x| / 127), levels round(x / d) by the f16
 * factor's reciprocal, clamped to +-127, a NaN stored as 0. The 32 lanes of
 * a warp together, each on dimensions lane, lane + 32, ... */
__device__ __forceinline__ void cv_kv_store_half(const cv_kv &p, u8 *piece, bool key, int j, const float *x, int lane)
{
    const int hd = p.head_dim;
    if (p.type != CV_KV_Q8_0) {
        for (int i = lane; i < hd; i += CV_WARP) {
            const i64 at = key ? cv_kv_k_at(j, i) : cv_kv_v_at(hd, j, i);
            if (p.type == CV_KV_F16)
                ((u16 *)piece)[at] = cv_f2h(x[i]);
            else
                ((float *)piece)[at] = x[i];
        }
        return;
    }
    u16 *scales = cv_kv_q8_scales(p, piece);
    for (int g0 = 0; g0 < hd; g0 += p.qgroup) {
        float amax = 0.0f;
        for (int i = lane; i < p.qgroup; i += CV_WARP)
            amax = fmaxf(amax, fabsf(x[g0 + i]));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(CV_FULL_MASK, amax, off));
        const u16 dh = cv_f2h(amax / 127.0f);
        const float d = cv_h2f(dh), id = d > 0.0f && d <= CV_F16_MAX ? 1.0f / d : 0.0f;
        for (int i = lane; i < p.qgroup; i += CV_WARP) {
            const float t = __fmul_rn(x[g0 + i], id);
            const int q = t >= 127.0f ? 127 : t <= -127.0f ? -127 : t == t ? (int)rintf(t) : 0;
            if (key)
                piece[cv_kv_k8_at(j, g0 + i)] = (u8)(q + 128);
            else
                ((i8 *)piece)[cv_kv_v_at(hd, j, g0 + i)] = (i8)q;
        }
        if (lane == 0)
            scales[cv_kv_scale_at(p, j, g0)] = dh;
    }
}
