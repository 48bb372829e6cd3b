/* mm.cu — the matrix products of one weight type (compiled once per type,
 * -DCV_WTYPE=id): the dense matmul Y[t] = W X[t] and the expert-routed one
 * Y[r] = W[expert[r]] X[src[r]], both the backend table's operations; and
 * rows of the type dequantized (a token embedding's, embed_rows).
 *
 * One warp computes a tile of R weight rows x NT activation rows. Its 32
 * lanes split the row's values: for a quantized type lane l takes the
 * groups of 32 values g = l, l + 32, ... (the group's integer levels
 * against the activation's int8 levels with dp4a, cv_group_dot), for a
 * float type the values i = l, l + 32, ... (coalesced f32 FMAs); each lane
 * adds its terms in increasing order, then the warp sums its lanes with a
 * fixed butterfly. An output's arithmetic therefore depends only on its
 * weight row and its activation row, never on R, NT, the grid or which
 * other rows share the call: decode (1 x 1 tiles), batches (4 x 8 tiles)
 * and routed experts give one row the same bits, as the CPU backend
 * promises (kernels.h, cv_matmul_experts), so a sequence computes the same
 * alone or in a batch.
 *
 * Activations for a quantized type are cv_act_q8 blocks (act.cu quantizes
 * them once per call), act_ld bytes apart per row; for a float type the f32
 * rows themselves. Four warps a block. */
#include "dtypes.cuh"

#ifndef CV_WTYPE
#error "mm.cu is compiled once per weight type: -DCV_WTYPE=<ggml type id>"
#endif

#define CV_MM_WARPS 4

/* The tile: wr[r] is weight row r's first byte (or NULL past n_out), ar[t]
 * activation row t's (or NULL past the last), y[r][t] where output (r, t)
 * goes. n_in values a row. */
template <class T, int R, int NT>
__device__ __forceinline__ void cv_tile(const u8 *const wr[R], const u8 *const ar[NT], i64 n_in, float *const yp[NT],
                                        const int o[R])
{
    const int lane = threadIdx.x % CV_WARP;
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[r][t] = 0.0f;
    if constexpr (T::INT8) {
        const i64 n_groups = n_in / 32;
        for (i64 g = lane; g < n_groups; g += CV_WARP) {
            int q[R][8];
            float dm[R][4];
#pragma unroll
            for (int r = 0; r < R; r++)
                if (wr[r])
                    T::load(wr[r] + (g * 32 / T::QK) * T::BB, (int)(g % (T::QK / 32)), q[r], dm[r]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (!ar[t])
                    continue;
                const cv_act_q8 a = ((const cv_act_q8 *)ar[t])[g];
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (wr[r])
                        acc[r][t] = __fadd_rn(acc[r][t], cv_group_dot(q[r], dm[r], a));
            }
        }
    } else {
        for (i64 i = lane; i < n_in; i += CV_WARP) {
            float w[R];
#pragma unroll
            for (int r = 0; r < R; r++)
                w[r] = wr[r] ? T::at(wr[r], i) : 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (!ar[t])
                    continue;
                const float x = ((const float *)ar[t])[i];
#pragma unroll
                for (int r = 0; r < R; r++)
                    acc[r][t] = __fmaf_rn(w[r], x, acc[r][t]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float v = cv_warp_sum(acc[r][t]);
            if (lane == (r * NT + t) % CV_WARP && wr[r] && ar[t])
                yp[t][o[r]] = v;
        }
}

/* Weight rows o0 .. o0 + R - 1 of w (NULL past n_out) and their output
 * columns. */
template <int R>
__device__ __forceinline__ void cv_weight_rows(const u8 *w, i64 row_bytes, i64 o0, i64 n_out, const u8 *wr[R], int o[R])
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        wr[r] = o0 + r < n_out ? w + (o0 + r) * row_bytes : nullptr;
        o[r] = (int)(o0 + r);
    }
}

/* Dense: grid (ceil(n_out / (4R)), ceil(n_tok / NT)). */
template <int R, int NT>
__device__ __forceinline__ void cv_mm_dense(const u8 *w, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act, i64 act_ld,
                                            i64 n_tok, float *y, i64 ldy)
{
    const i64 o0 = ((i64)blockIdx.x * CV_MM_WARPS + threadIdx.x / CV_WARP) * R, t0 = (i64)blockIdx.y * NT;
    if (o0 >= n_out)
        return;
    const u8 *wr[R], *ar[NT];
    float *yp[NT];
    int o[R];
    cv_weight_rows<R>(w, row_bytes, o0, n_out, wr, o);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        ar[t] = t0 + t < n_tok ? act + (t0 + t) * act_ld : nullptr;
        yp[t] = y + (t0 + t) * ldy;
    }
    cv_tile<cv_wt, R, NT>(wr, ar, n_in, yp, o);
}

/* Routed, one route a tile column: grid (ceil(n_out / (4R)), n_routes).
 * wp[e] is expert e's matrix; route r reads activation row src[r] (src
 * NULL: r) and writes Y row r. */
template <int R>
__device__ __forceinline__ void cv_mm_routes(const u64 *wp, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act,
                                             i64 act_ld, const int *expert, const int *src, float *y, i64 ldy)
{
    const i64 o0 = ((i64)blockIdx.x * CV_MM_WARPS + threadIdx.x / CV_WARP) * R;
    const int route = blockIdx.y;
    if (o0 >= n_out)
        return;
    const u8 *w = (const u8 *)wp[expert[route]];
    const u8 *wr[R], *ar[1] = { act + (i64)(src ? src[route] : route) * act_ld };
    float *yp[1] = { y + (i64)route * ldy };
    int o[R];
    cv_weight_rows<R>(w, row_bytes, o0, n_out, wr, o);
    cv_tile<cv_wt, R, 1>(wr, ar, n_in, yp, o);
}

/* Routed, grouped by expert (act.cu's cv_route_group made the list): tile
 * k of up to NT (= CV_ROUTE_TILE) routes of one expert, tiles[k] = (expert, first, count)
 * into order[]; grid (ceil(n_out / (4R)), a bound on the tiles), blocks
 * past *n_tiles return. */
template <int R, int NT>
__device__ __forceinline__ void cv_mm_grouped(const u64 *wp, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act,
                                              i64 act_ld, const int *src, const int *order, const int4 *tiles,
                                              const int *n_tiles, float *y, i64 ldy)
{
    const i64 o0 = ((i64)blockIdx.x * CV_MM_WARPS + threadIdx.x / CV_WARP) * R;
    if (o0 >= n_out || (int)blockIdx.y >= *n_tiles)
        return;
    const int4 tile = tiles[blockIdx.y];
    const u8 *w = (const u8 *)wp[tile.x];
    const u8 *wr[R], *ar[NT];
    float *yp[NT];
    int o[R];
    cv_weight_rows<R>(w, row_bytes, o0, n_out, wr, o);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const int route = t < tile.z ? order[tile.y + t] : 0;
        ar[t] = t < tile.z ? act + (i64)(src ? src[route] : route) * act_ld : nullptr;
        yp[t] = y + (i64)route * ldy;
    }
    cv_tile<cv_wt, R, NT>(wr, ar, n_in, yp, o);
}

/* The entry points cuda.c launches, by name: decode shapes (one row a warp,
 * 1-8 tokens) and the batch shape (4 rows x 8 tokens). */
#define CV_DENSE(R, NT)                                                                                         \
    extern "C" __global__ void __launch_bounds__(CV_MM_WARPS * CV_WARP)                                         \
        cv_mm_dense_##R##x##NT(const u8 *w, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act, i64 act_ld,      \
                               i64 n_tok, float *y, i64 ldy)                                                    \
    {                                                                                                           \
        cv_mm_dense<R, NT>(w, row_bytes, n_in, n_out, act, act_ld, n_tok, y, ldy);                              \
    }
CV_DENSE(1, 1)
CV_DENSE(1, 2)
CV_DENSE(1, 4)
CV_DENSE(1, 8)
CV_DENSE(4, 8)

extern "C" __global__ void __launch_bounds__(CV_MM_WARPS * CV_WARP)
    cv_mm_routes_1(const u64 *wp, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act, i64 act_ld, const int *expert,
                   const int *src, float *y, i64 ldy)
{
    cv_mm_routes<1>(wp, row_bytes, n_in, n_out, act, act_ld, expert, src, y, ldy);
}

extern "C" __global__ void __launch_bounds__(CV_MM_WARPS * CV_WARP)
    cv_mm_grouped_4x8(const u64 *wp, i64 row_bytes, i64 n_in, i64 n_out, const u8 *act, i64 act_ld, const int *src,
                      const int *order, const int4 *tiles, const int *n_tiles, float *y, i64 ldy)
{
    cv_mm_grouped<4, 8>(wp, row_bytes, n_in, n_out, act, act_ld, src, order, tiles, n_tiles, y, ldy);
}

/* Value i of a row of type T: x = dm[h] q - dm[2 + h] for a quantized
 * type (its levels and affine map, dtypes.cuh), else the value itself. */
template <class T>
__device__ __forceinline__ float cv_value(const u8 *row, i64 i)
{
    if constexpr (T::INT8) {
        const i64 g = i / 32;
        const int l = (int)(i % 32);
        int q[8];
        float dm[4];
        T::load(row + (g * 32 / T::QK) * T::BB, (int)(g % (T::QK / 32)), q, dm);
        const float level = (float)(i8)(q[l / 4] >> (8 * (l % 4)));
        return __fsub_rn(__fmul_rn(dm[l / 16], level), dm[2 + l / 16]);
    } else {
        return T::at(row, i);
    }
}

/* Rows of the type as f32 times scale: y[t] = row t of w (row_bytes apart,
 * each 256-aligned). Grid (ceil(n / 256), n_rows), 256 threads, a value a
 * thread. */
extern "C" __global__ void __launch_bounds__(256) cv_dequant_rows(const u8 *w, i64 row_bytes, i64 n, float scale,
                                                                   float *y, i64 ldy)
{
    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x, t = blockIdx.y;
    if (i >= n)
        return;
    const float x = cv_value<cv_wt>(w + t * row_bytes, i);
    y[t * ldy + i] = scale == 1.0f ? x : __fmul_rn(x, scale);
}
