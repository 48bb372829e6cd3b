/* attn.cu — the attention mixer's work on the device: the row pass between
 * its projections and attention (backend.h's cv_batt_rows: the gate split,
 * biases, per-head RMSNorm, RoPE, the query temperature and the K/V store),
 * in the CPU's order and with the formulas of its scalar reference in f32
 * (kernels/vec.c: each head's RMSNorm, RoPE with its angles in double;
 * kernels/attention.c: kv_store's conversions), every rounding pinned so
 * that no contraction the compiler may choose changes a bit. A block of
 * 256 threads a row; the steps that need a whole head's values (the norms,
 * a q8_0 group's factor) take a warp a head. */
#include "common.cuh"
#include "kv.cuh"

#define CV_ATT_THREADS 256
#define CV_ATT_WARPS (CV_ATT_THREADS / CV_WARP)
/* kernels.h's CV_MAX_ROPE_DIMS / 2: the pairs one RoPE rotates at most */
#define CV_ROPE_PAIRS 512
#define CV_ROPE_NEOX 1

/* The pass's inputs as cuda.c passes them (its attn_args, field for
 * field): the pool first (kv_addr.cuh), device rows, the host inputs
 * already copied in (NULL: none), then the shapes and options of
 * cv_batt_rows, flags as ints. */
struct cv_attn_args {
    cv_kv kv;
    float *qkv, *gate;
    const float *q_bias, *k_bias, *v_bias, *q_norm, *k_norm, *freq_factors;
    const int *pos, *kv_block;
    i64 ld_qkv, ld_gate;
    i32 n_head, n_head_kv, head_dim, kv_layer;
    i32 gated, v_from_k, v_norm, store_kv;
    i32 rope_style, n_rot, temp_len;
    float eps, theta, freq_scale, mscale, temp_scale;
};

/* x [n] = x / sqrt(mean(x^2) + eps) (* w), by a warp: the sum of squares
 * lane by lane then by the fixed butterfly, the factor in double as the
 * reference takes it. Each lane writes only what it read. */
__device__ __forceinline__ void cv_warp_rmsnorm(float *x, const float *w, int n, float eps, int lane)
{
    float ss = 0.0f;
    for (int i = lane; i < n; i += CV_WARP)
        ss = __fmaf_rn(x[i], x[i], ss);
    ss = cv_warp_sum(ss);
    const float r = (float)(1.0 / sqrt((double)ss / (double)n + (double)eps));
    for (int i = lane; i < n; i += CV_WARP)
        x[i] = w ? __fmul_rn(__fmul_rn(x[i], r), w[i]) : __fmul_rn(x[i], r);
}

/* Row blockIdx.x of the pass. Grid (n_rows), CV_ATT_THREADS threads. */
extern "C" __global__ void __launch_bounds__(CV_ATT_THREADS) cv_attn_rows(const cv_attn_args a)
{
    __shared__ float cs[CV_ROPE_PAIRS], sn[CV_ROPE_PAIRS];
    const i64 t = blockIdx.x;
    const int tid = threadIdx.x, lane = tid % CV_WARP, warp = tid / CV_WARP, hd = a.head_dim;
    const i64 n_q = (i64)a.n_head * hd, n_kv = (i64)a.n_head_kv * hd;
    float *q = a.qkv + t * a.ld_qkv, *k = q + (a.gated ? 2 : 1) * n_q, *v = k + n_kv;
    const int pos = a.pos[t];

    /* the rotation's cos and sin at pos (kernels/vec.c, cv_rope_cos_sin) */
    const int n_pairs = a.n_rot / 2;
    const double fs = a.freq_scale > 0 ? (double)a.freq_scale : 1.0, ms = a.mscale > 0 ? (double)a.mscale : 1.0;
    for (int i = tid; i < n_pairs; i += CV_ATT_THREADS) {
        double ang = (double)pos * fs * pow((double)a.theta, -2.0 * i / a.n_rot);
        if (a.freq_factors)
            ang /= a.freq_factors[i];
        cs[i] = (float)(cos(ang) * ms);
        sn[i] = (float)(sin(ang) * ms);
    }

    /* V = K as projected; the gates out of q. Query h moves down to h hd:
     * the values it lands on are query h/2's or gate (h-1)/2's, which the
     * same thread (the same dimensions of every head) read before. */
    if (a.v_from_k)
        for (i64 i = tid; i < n_kv; i += CV_ATT_THREADS)
            v[i] = k[i];
    if (a.gated)
        for (int h = 0; h < a.n_head; h++)
            for (int i = tid; i < hd; i += CV_ATT_THREADS) {
                const float qv = q[(i64)2 * h * hd + i], gv = q[((i64)2 * h + 1) * hd + i];
                a.gate[t * a.ld_gate + (i64)h * hd + i] = gv;
                q[(i64)h * hd + i] = qv;
            }
    __syncthreads();

    if (a.q_bias)
        for (i64 i = tid; i < n_q; i += CV_ATT_THREADS)
            q[i] = __fadd_rn(q[i], a.q_bias[i]);
    if (a.k_bias)
        for (i64 i = tid; i < n_kv; i += CV_ATT_THREADS)
            k[i] = __fadd_rn(k[i], a.k_bias[i]);
    if (a.v_bias)
        for (i64 i = tid; i < n_kv; i += CV_ATT_THREADS)
            v[i] = __fadd_rn(v[i], a.v_bias[i]);
    __syncthreads();

    /* the heads' norms, a warp a head: q's, k's, then V's (no weight) */
    const int nq = a.q_norm ? a.n_head : 0, nk = a.k_norm ? a.n_head_kv : 0;
    const int nv = a.v_norm && a.store_kv ? a.n_head_kv : 0;
    for (int h = warp; h < nq + nk + nv; h += CV_ATT_WARPS) {
        if (h < nq)
            cv_warp_rmsnorm(q + (i64)h * hd, a.q_norm, hd, a.eps, lane);
        else if (h < nq + nk)
            cv_warp_rmsnorm(k + (i64)(h - nq) * hd, a.k_norm, hd, a.eps, lane);
        else
            cv_warp_rmsnorm(v + (i64)(h - nq - nk) * hd, nullptr, hd, a.eps, lane);
    }
    __syncthreads();

    /* RoPE of q and, where the row's K/V is stored, of k: a thread a pair
     * (NORM pairs adjacent values, NEOX the two halves of the rotated
     * dimensions) */
    const i64 n_rope = (i64)(a.n_head + (a.store_kv ? a.n_head_kv : 0)) * n_pairs;
    for (i64 p = tid; p < n_rope; p += CV_ATT_THREADS) {
        const int h = (int)(p / n_pairs), i = (int)(p % n_pairs);
        float *x = h < a.n_head ? q + (i64)h * hd : k + (i64)(h - a.n_head) * hd;
        const bool neox = a.rope_style == CV_ROPE_NEOX;
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + n_pairs : 2 * i + 1;
        const float x0 = x[i0], x1 = x[i1];
        x[i0] = __fsub_rn(__fmul_rn(x0, cs[i]), __fmul_rn(x1, sn[i]));
        x[i1] = __fadd_rn(__fmul_rn(x0, sn[i]), __fmul_rn(x1, cs[i]));
    }
    __syncthreads();

    /* the query temperature, in f32 in llama.cpp's order */
    if (a.temp_scale > 0) {
        const float f = __fadd_rn(__fmul_rn(logf(floorf((float)pos / (float)a.temp_len) + 1.0f), a.temp_scale), 1.0f);
        for (i64 i = tid; i < n_q; i += CV_ATT_THREADS)
            q[i] = __fmul_rn(q[i], f);
    }
    if (!a.store_kv)
        return;
    /* each kv head's key and value into the row's block, a warp a half */
    const int blk = a.kv_block[t], j = pos % CV_KV_BLOCK;
    for (int h = warp; h < 2 * a.n_head_kv; h += CV_ATT_WARPS) {
        const int g = h / 2;
        const bool key = h % 2 == 0;
        u8 *dst = key ? cv_kv_k(a.kv, blk, a.kv_layer, g) : cv_kv_v(a.kv, blk, a.kv_layer, g);
        cv_kv_store_half(a.kv, dst, key, j, (key ? k : v) + (i64)g * hd, lane);
    }
}
