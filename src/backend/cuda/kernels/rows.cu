/* rows.cu — the backend table's row operations (backend.h, ABI 2): each
 * over n_rows rows of n values, ld apart, with the formulas of the CPU's
 * scalar reference (kernels/vec.c) in f32. Elementwise operations take a
 * grid (ceil(n / 256), n_rows) of 256 threads, a value a thread; RMSNorm a
 * block of 256 threads a row, its sum of squares by a fixed tree so a
 * row's result does not depend on the others. */
#include "common.cuh"

/* y[t] = x[gather[t]] / sqrt(mean(x^2) + eps) (* w); gather NULL: row t,
 * w NULL: no weight. Grid (n_rows), 256 threads. */
extern "C" __global__ void __launch_bounds__(256)
    cv_rmsnorm(const float *x, i64 ldx, const int *gather, const float *w, float eps, i64 n, float *y, i64 ldy)
{
    __shared__ float part[256];
    const i64 t = blockIdx.x;
    const float *xr = x + (gather ? (i64)gather[t] : t) * ldx;
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += 256)
        ss = __fmaf_rn(xr[i], xr[i], ss);
    const float r = rsqrtf(cv_block_sum256(ss, part) / (float)n + eps);
    float *yr = y + t * ldy;
    /* x is read before y is written only within a thread: y may be x */
    for (i64 i = threadIdx.x; i < n; i += 256)
        yr[i] = w ? xr[i] * r * w[i] : xr[i] * r;
}

/* The value (i, row) a thread of an elementwise grid takes, false past n. */
__device__ __forceinline__ bool cv_elem(i64 n, i64 *i, i64 *t)
{
    *i = (i64)blockIdx.x * 256 + threadIdx.x;
    *t = blockIdx.y;
    return *i < n;
}

/* y[t] = a[t] + b[t]; ldb 0: the one row b added to every row. */
extern "C" __global__ void __launch_bounds__(256)
    cv_add(float *y, i64 ldy, const float *a, i64 lda, const float *b, i64 ldb, i64 n)
{
    i64 i, t;
    if (cv_elem(n, &i, &t))
        y[t * ldy + i] = __fadd_rn(a[t * lda + i], b[t * ldb + i]);
}

/* x[t] *= f */
extern "C" __global__ void __launch_bounds__(256) cv_scale(float *x, i64 ldx, float f, i64 n)
{
    i64 i, t;
    if (cv_elem(n, &i, &t))
        x[t * ldx + i] = __fmul_rn(x[t * ldx + i], f);
}

/* x[t] = cap tanh(x[t] / cap) */
extern "C" __global__ void __launch_bounds__(256) cv_softcap(float *x, i64 ldx, float cap, i64 n)
{
    i64 i, t;
    if (cv_elem(n, &i, &t))
        x[t * ldx + i] = cap * tanhf(x[t * ldx + i] * (1.0f / cap));
}

/* y[t] = act(g[t]) * u[t] (common.cuh's cv_glu_value) */
extern "C" __global__ void __launch_bounds__(256)
    cv_glu(int kind, float alpha, float limit, float *y, i64 ldy, const float *g, i64 ldg, const float *u, i64 ldu,
           i64 n)
{
    i64 i, t;
    if (cv_elem(n, &i, &t))
        y[t * ldy + i] = cv_glu_value(kind, alpha, limit, g[t * ldg + i], u[t * ldu + i]);
}

/* y[t] = x[t] * sigmoid(g[t]) */
extern "C" __global__ void __launch_bounds__(256)
    cv_sigmoid_mul(float *y, i64 ldy, const float *x, i64 ldx, const float *g, i64 ldg, i64 n)
{
    i64 i, t;
    if (cv_elem(n, &i, &t))
        y[t * ldy + i] = x[t * ldx + i] / (1.0f + expf(-g[t * ldg + i]));
}
