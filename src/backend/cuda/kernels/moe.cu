/* moe.cu — the MoE layer's row work on the device: the router (backend.h's
 * cv_bmoe_route, moe_route), and the rows around the expert matmuls
 * (cv_bmoe_rows: moe_glu, each route's biases and activation, a value a
 * thread; moe_sum, each row's weighted sum of its experts, in order of
 * choice, with the post-norms and the shared expert, a block a row). The
 * router takes a row's logits to its k experts and their weights, chosen
 * as the CPU's loop chooses them (the router's bias; a softmax with its
 * sum in double as kernels/vec.c's reference, or each logit's sigmoid; the
 * selection bias and group-limited choice; the k best by descending score,
 * ties to the lower index; the weights summed in order of choice,
 * renormalised, scaled) in f32 with every rounding pinned. A block of 256
 * threads a row, its scores in shared memory; the k best by k rounds of a
 * block-wide argmax. */
#include "common.cuh"

#define CV_MOE_THREADS 256
#define CV_MOE_WARPS (CV_MOE_THREADS / CV_WARP)
/* limits.h's CV_MAX_EXPERTS and CV_MAX_EXPERTS_USED */
#define CV_MOE_MAX_EXPERTS 1024
#define CV_MOE_MAX_K 64
/* backend.h's cv_broute */
#define CV_BROUTE_TOPK_SOFTMAX 1
#define CV_BROUTE_SIGMOID_TOPK 2
#define CV_NO_INDEX 0x7fffffff
#define CV_INF __int_as_float(0x7f800000)

/* The call as cuda.c passes it (its moe_args, field for field): device
 * rows and routes, the host inputs copied in (NULL: none), the options. */
struct cv_moe_args {
    const float *logits, *bias, *sel_bias, *exp_scale;
    int *expert, *src;
    float *weight;
    i64 ld_logits;
    i32 n_expert, k, kind, n_group, n_group_used, norm;
    float scale;
    i32 pad;
};

/* (v, i) chosen before (bv, bi): a higher value, or the same and a lower
 * index. */
__device__ __forceinline__ bool cv_before(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

/* The warp's first (v, i), in every lane. */
__device__ __forceinline__ void cv_warp_first(float *v, int *i)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(CV_FULL_MASK, *v, off);
        const int oi = __shfl_xor_sync(CV_FULL_MASK, *i, off);
        if (cv_before(ov, oi, *v, *i))
            *v = ov, *i = oi;
    }
}

/* The block's first (value, index) of those its threads bring (value -inf
 * and index CV_NO_INDEX: none), returned to every thread. */
__device__ int cv_block_first(float v, int i, float *sv, int *si)
{
    const int lane = threadIdx.x % CV_WARP, warp = threadIdx.x / CV_WARP;
    cv_warp_first(&v, &i);
    if (lane == 0)
        sv[warp] = v, si[warp] = i;
    __syncthreads();
    if (warp == 0) {
        v = lane < CV_MOE_WARPS ? sv[lane] : -CV_INF;
        i = lane < CV_MOE_WARPS ? si[lane] : CV_NO_INDEX;
        cv_warp_first(&v, &i);
        if (lane == 0)
            si[CV_MOE_WARPS] = i;
    }
    __syncthreads();
    const int best = si[CV_MOE_WARPS];
    __syncthreads(); /* sv and si are free again */
    return best;
}

/* The k indices of the largest of x[n] in order into idx; taken[i] ends 1
 * for those. */
__device__ void cv_block_top_k(const float *x, int n, int k, u8 *taken, int *idx, float *sv, int *si)
{
    for (int e = threadIdx.x; e < n; e += CV_MOE_THREADS)
        taken[e] = 0;
    __syncthreads();
    for (int j = 0; j < k; j++) {
        float bv = -CV_INF;
        int bi = CV_NO_INDEX;
        for (int e = threadIdx.x; e < n; e += CV_MOE_THREADS)
            if (!taken[e] && cv_before(x[e], e, bv, bi))
                bv = x[e], bi = e;
        int b = cv_block_first(bv, bi, sv, si);
        if (threadIdx.x == 0) {
            /* only NaNs left, which no comparison chooses: the first of
             * them, as the CPU's insertion takes them */
            for (int e = 0; b == CV_NO_INDEX && e < n; e++)
                if (!taken[e])
                    b = e;
            idx[j] = b;
            taken[b] = 1;
        }
        __syncthreads();
    }
}

/* x[n] = softmax(x): the maximum, e^(x - max), their sum in double, each
 * times (float)(1 / sum); all zero when every value is -inf. */
__device__ void cv_block_softmax(float *x, int n, float *sv, double *sd)
{
    const int lane = threadIdx.x % CV_WARP, warp = threadIdx.x / CV_WARP;
    float m = -CV_INF;
    for (int e = threadIdx.x; e < n; e += CV_MOE_THREADS)
        m = fmaxf(m, x[e]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(CV_FULL_MASK, m, off));
    if (lane == 0)
        sv[warp] = m;
    __syncthreads();
    m = sv[0];
    for (int w = 1; w < CV_MOE_WARPS; w++)
        m = fmaxf(m, sv[w]);
    double sum = 0.0;
    for (int e = threadIdx.x; e < n; e += CV_MOE_THREADS) {
        x[e] = m == -CV_INF ? 0.0f : expf(__fsub_rn(x[e], m));
        sum += (double)x[e];
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(CV_FULL_MASK, sum, off);
    if (lane == 0)
        sd[warp] = sum;
    __syncthreads();
    sum = 0.0;
    for (int w = 0; w < CV_MOE_WARPS; w++)
        sum += sd[w];
    const float inv = m == -CV_INF ? 0.0f : (float)(1.0 / sum);
    for (int e = threadIdx.x; e < n; e += CV_MOE_THREADS)
        x[e] = __fmul_rn(x[e], inv);
    __syncthreads();
}

/* Row blockIdx.x's routes. Grid (n_rows), CV_MOE_THREADS threads. */
extern "C" __global__ void __launch_bounds__(CV_MOE_THREADS) cv_moe_route(const cv_moe_args a)
{
    __shared__ float p[CV_MOE_MAX_EXPERTS], sel[CV_MOE_MAX_EXPERTS], gs[CV_MOE_MAX_EXPERTS];
    __shared__ u8 taken[CV_MOE_MAX_EXPERTS];
    __shared__ int idx[CV_MOE_MAX_K];
    __shared__ float sv[CV_MOE_WARPS + 1];
    __shared__ int si[CV_MOE_WARPS + 1];
    __shared__ double sd[CV_MOE_WARPS];
    const i64 t = blockIdx.x;
    const int n = a.n_expert, k = a.k, tid = threadIdx.x;
    const float *row = a.logits + t * a.ld_logits;
    for (int e = tid; e < n; e += CV_MOE_THREADS)
        p[e] = a.bias ? __fadd_rn(row[e], a.bias[e]) : row[e];
    __syncthreads();
    float w[CV_MOE_MAX_K]; /* thread 0's */
    if (a.kind == CV_BROUTE_TOPK_SOFTMAX) {
        cv_block_top_k(p, n, k, taken, idx, sv, si);
        if (tid == 0) {
            /* the softmax of the k chosen, as the reference computes it */
            float m = -CV_INF;
            for (int j = 0; j < k; j++)
                m = fmaxf(m, p[idx[j]]);
            double sum = 0.0;
            for (int j = 0; j < k; j++) {
                w[j] = m == -CV_INF ? 0.0f : expf(__fsub_rn(p[idx[j]], m));
                sum += (double)w[j];
            }
            const float inv = m == -CV_INF ? 0.0f : (float)(1.0 / sum);
            for (int j = 0; j < k; j++)
                w[j] = __fmul_rn(w[j], inv);
        }
    } else {
        if (a.kind == CV_BROUTE_SIGMOID_TOPK) {
            for (int e = tid; e < n; e += CV_MOE_THREADS)
                p[e] = 1.0f / (1.0f + expf(-p[e]));
            __syncthreads();
        } else {
            cv_block_softmax(p, n, sv, sd);
        }
        const float *score = p;
        if (a.sel_bias || a.n_group > 1) {
            for (int e = tid; e < n; e += CV_MOE_THREADS)
                sel[e] = a.sel_bias ? __fadd_rn(p[e], a.sel_bias[e]) : p[e];
            score = sel;
            __syncthreads();
        }
        if (a.n_group > 1) {
            /* a group's score, its two best summed (a thread a group);
             * the n_group_used best groups keep their experts */
            const int per = n / a.n_group;
            for (int g = tid; g < a.n_group; g += CV_MOE_THREADS) {
                int b0 = CV_NO_INDEX, b1 = CV_NO_INDEX;
                float v0 = -CV_INF, v1 = -CV_INF;
                for (int e = g * per; e < (g + 1) * per; e++) {
                    if (cv_before(sel[e], e, v0, b0))
                        v1 = v0, b1 = b0, v0 = sel[e], b0 = e;
                    else if (cv_before(sel[e], e, v1, b1))
                        v1 = sel[e], b1 = e;
                }
                gs[g] = __fadd_rn(v0, v1);
            }
            __syncthreads();
            cv_block_top_k(gs, a.n_group, a.n_group_used, taken, idx, sv, si);
            for (int e = tid; e < n; e += CV_MOE_THREADS)
                if (!taken[e / per])
                    sel[e] = -CV_INF;
            __syncthreads();
        }
        cv_block_top_k(score, n, k, taken, idx, sv, si);
        if (tid == 0) {
            float sum = 0.0f;
            for (int j = 0; j < k; j++) {
                w[j] = p[idx[j]];
                sum = __fadd_rn(sum, w[j]);
            }
            if (a.norm) {
                const float inv = 1.0f / fmaxf(sum, 6.103515625e-5f);
                for (int j = 0; j < k; j++)
                    w[j] = __fmul_rn(w[j], inv);
            }
            if (a.scale != 1.0f)
                for (int j = 0; j < k; j++)
                    w[j] = __fmul_rn(w[j], a.scale);
        }
    }
    if (tid == 0)
        for (int j = 0; j < k; j++) {
            a.expert[t * k + j] = idx[j];
            a.src[t * k + j] = (int)t;
            a.weight[t * k + j] = a.exp_scale ? __fmul_rn(w[j], a.exp_scale[idx[j]]) : w[j];
        }
}

/* ---- the rows around the expert matmuls (cv_bmoe_rows) ---- */

/* Route blockIdx.y's biases (added into gu, as the CPU's loop leaves them)
 * and activation, a value a thread. Grid (ceil(n_ff / 256), n_routes),
 * 256 threads. */
extern "C" __global__ void __launch_bounds__(256)
    cv_moe_glu(int kind, float alpha, float limit, const int *expert, float *gu, i64 ld_gu, const float *gate_bias,
               const float *up_bias, float *h, i64 ld_h, i64 n_ff)
{
    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x, r = blockIdx.y;
    if (i >= n_ff)
        return;
    const i64 e = expert[r];
    float *g = gu + r * ld_gu;
    float x = g[i], v = g[n_ff + i];
    if (gate_bias)
        g[i] = x = __fadd_rn(x, gate_bias[e * n_ff + i]);
    if (up_bias)
        g[n_ff + i] = v = __fadd_rn(v, up_bias[e * n_ff + i]);
    h[r * ld_h + i] = cv_glu_value(kind, alpha, limit, x, v);
}

/* x [n] (a thread's values: i = tid, tid + 256, ...) times the RMSNorm
 * factor of the whole row and w, with rows.cu's cv_rmsnorm's formula. Each
 * thread rescales what it wrote. */
__device__ void cv_moe_rmsnorm(float *x, const float *w, i64 n, float eps, float *part)
{
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += 256)
        ss = __fmaf_rn(x[i], x[i], ss);
    const float r = rsqrtf(cv_block_sum256(ss, part) / (float)n + eps);
    for (i64 i = threadIdx.x; i < n; i += 256)
        x[i] = x[i] * r * w[i];
}

/* Row blockIdx.x's weighted sum of its k experts' outputs (their down
 * biases added into y, in order of choice), post-normed, and the shared
 * expert's row added, post-normed and gated. Grid (n_rows), 256 threads. */
extern "C" __global__ void __launch_bounds__(256)
    cv_moe_sum(int k, const int *expert, const float *weight, float *y, i64 ldy, const float *down_bias,
               const float *post_norm, float eps, float *shared, i64 ld_shared, const float *sh_post_norm,
               const float *sh_gate, const float *x, i64 ldx, float *out, i64 ld_out, i64 n)
{
    __shared__ float part[256];
    const i64 t = blockIdx.x;
    float *o = out + t * ld_out;
    for (i64 i = threadIdx.x; i < n; i += 256) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
            const i64 r = t * k + j;
            float *yr = y + r * ldy;
            float v = yr[i];
            if (down_bias)
                yr[i] = v = __fadd_rn(v, down_bias[(i64)expert[r] * n + i]);
            acc = __fmaf_rn(weight[r], v, acc);
        }
        o[i] = acc;
    }
    if (post_norm)
        cv_moe_rmsnorm(o, post_norm, n, eps, part);
    if (!shared)
        return;
    float *sy = shared + t * ld_shared;
    if (sh_post_norm)
        cv_moe_rmsnorm(sy, sh_post_norm, n, eps, part);
    float g = 1.0f;
    if (sh_gate) {
        const float *xr = x + t * ldx;
        float d = 0.0f;
        for (i64 i = threadIdx.x; i < n; i += 256)
            d = __fmaf_rn(sh_gate[i], xr[i], d);
        g = 1.0f / (1.0f + expf(-cv_block_sum256(d, part)));
    }
    for (i64 i = threadIdx.x; i < n; i += 256)
        o[i] = sh_gate ? __fmaf_rn(g, sy[i], o[i]) : __fadd_rn(o[i], sy[i]);
}
