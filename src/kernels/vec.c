/* vec.c — the scalar reference of the vector ops a forward pass needs
 * (RMSNorm, SwiGLU and its GeGLU and clamped variants, the sigmoid gate,
 * exp, softmax, RoPE, add/scale/axpy, f32/f16 dots, f16/bf16 conversion),
 * and the process-ISA entry points that dispatch to the table
 * of the active ISA. Reductions accumulate in double here: the reference
 * should be the most accurate version, the SIMD one is checked against it. */
#include "kernels/kernels_int.h"

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)(n > 0 ? n : 1) + eps));
    for (int64_t i = 0; i < n; i++)
        y[i] = w ? x[i] * r * w[i] : x[i] * r;
}

static void swiglu(float *y, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void geglu(float *y, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        y[i] = x / (1.0f + expf(-CV_GELU_2C * (x + 0.044715f * x * x * x))) * u[i];
    }
}

static void swiglu_clamped(float *y, const float *g, const float *u, int64_t n, float alpha, float limit)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = fminf(g[i], limit), v = fmaxf(fminf(u[i], limit), -limit);
        y[i] = x / (1.0f + expf(-alpha * x)) * (v + 1.0f);
    }
}

static void sigmoid_mul(float *y, const float *x, const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-g[i]));
}

static void vexp(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

static float softmax(float *x, int64_t n)
{
    if (n <= 0)
        return 0;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = fmaxf(max, x[i]);
    if (max == -INFINITY) {
        /* Everything masked: no distribution exists; give all-zero
         * probabilities (sum 0) rather than NaNs. */
        memset(x, 0, (size_t)n * sizeof *x);
        return 0;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
    return (float)sum;
}

static void add(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

static void scale(float *x, float s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}

static void axpy(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * cv_fp16_to_fp32(x[i]);
}

static float dot_f32(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return (float)s;
}

static float dot_f16(const uint16_t *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)cv_fp16_to_fp32(a[i]) * b[i];
    return (float)s;
}

static void row_f16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_fp16_to_fp32(src[i]);
}

static void row_f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_fp32_to_fp16(src[i]);
}

static void row_bf16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_bf16_to_fp32(src[i]);
}

static void row_f32_to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_fp32_to_bf16(src[i]);
}

/* Angles in double: at positions in the 100k range a float angle has lost
 * most of its fraction, and the rotation should not degrade with context. */
void cv_rope_cos_sin(const cv_rope_params *p, int64_t pos, float *cs, float *sn)
{
    const int half = p->n_rot / 2;
    const double base = p->theta, fs = p->freq_scale > 0 ? p->freq_scale : 1.0;
    const double ms = p->mscale > 0 ? p->mscale : 1.0;
    for (int i = 0; i < half; i++) {
        double ang = (double)pos * fs * pow(base, -2.0 * i / p->n_rot);
        if (p->freq_factors)
            ang /= p->freq_factors[i];
        cs[i] = (float)(cos(ang) * ms);
        sn[i] = (float)(sin(ang) * ms);
    }
}

static void rope(const cv_rope_params *p, float *x, int32_t n_head, int32_t head_dim, int64_t pos)
{
    const int half = p->n_rot / 2;
    assert(p->n_rot % 2 == 0 && p->n_rot <= head_dim && half <= CV_MAX_ROPE_DIMS / 2);
    float cs[CV_MAX_ROPE_DIMS / 2], sn[CV_MAX_ROPE_DIMS / 2];
    cv_rope_cos_sin(p, pos, cs, sn);
    for (int32_t h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            /* NORM pairs adjacent values, NEOX pairs the two halves. */
            const int i0 = p->style == CV_ROPE_NEOX ? i : 2 * i;
            const int i1 = p->style == CV_ROPE_NEOX ? i + half : 2 * i + 1;
            const float x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * cs[i] - x1 * sn[i];
            v[i1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

static int64_t argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

const cv_vec_ops cv_vec_ops_scalar = {
    .rmsnorm = rmsnorm,
    .swiglu = swiglu,
    .geglu = geglu,
    .swiglu_clamped = swiglu_clamped,
    .sigmoid_mul = sigmoid_mul,
    .exp = vexp,
    .softmax = softmax,
    .add = add,
    .scale = scale,
    .axpy = axpy,
    .axpy_f16 = axpy_f16,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .f16_to_f32 = row_f16_to_f32,
    .f32_to_f16 = row_f32_to_f16,
    .bf16_to_f32 = row_bf16_to_f32,
    .f32_to_bf16 = row_f32_to_bf16,
    .rope = rope,
    .argmax = argmax,
};

/* The vector ops have an AVX2 version only: the levels above run it. */
cv_isa cv_vec_ops_level(cv_isa isa)
{
    return isa >= CV_ISA_AVX2 && cv_isa_supported(isa) ? CV_ISA_AVX2 : CV_ISA_SCALAR;
}

const cv_vec_ops *cv_vec_ops_for(cv_isa isa)
{
    return cv_vec_ops_level(isa) == CV_ISA_AVX2 ? &cv_vec_ops_avx2 : &cv_vec_ops_scalar;
}

const char *cv_vec_ops_why_not(cv_isa isa)
{
    if (!cv_isa_supported(isa))
        return cv_isa_missing(isa);
    return cv_vec_ops_level(isa) == isa ? NULL : "no version of its own: avx2's loops run";
}

/* ---- process-ISA entry points ---- */

static const cv_vec_ops *active(void) { return cv_vec_ops_for(cv_isa_active()); }

void cv_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) { active()->rmsnorm(y, x, w, n, eps); }
void cv_swiglu(float *y, const float *g, const float *u, int64_t n) { active()->swiglu(y, g, u, n); }
void cv_geglu(float *y, const float *g, const float *u, int64_t n) { active()->geglu(y, g, u, n); }
void cv_swiglu_clamped(float *y, const float *g, const float *u, int64_t n, float alpha, float limit)
{
    active()->swiglu_clamped(y, g, u, n, alpha, limit);
}
void cv_sigmoid_mul(float *y, const float *x, const float *g, int64_t n) { active()->sigmoid_mul(y, x, g, n); }
void cv_exp(float *y, const float *x, int64_t n) { active()->exp(y, x, n); }
float cv_softmax(float *x, int64_t n) { return active()->softmax(x, n); }
void cv_add(float *y, const float *a, const float *b, int64_t n) { active()->add(y, a, b, n); }
void cv_scale(float *x, float s, int64_t n) { active()->scale(x, s, n); }
void cv_axpy(float *y, float a, const float *x, int64_t n) { active()->axpy(y, a, x, n); }
void cv_axpy_f16(float *y, float a, const uint16_t *x, int64_t n) { active()->axpy_f16(y, a, x, n); }
float cv_dot_f32(const float *a, const float *b, int64_t n) { return active()->dot_f32(a, b, n); }
float cv_dot_f16(const uint16_t *a, const float *b, int64_t n) { return active()->dot_f16(a, b, n); }
void cv_f16_to_f32(const uint16_t *src, float *dst, int64_t n) { active()->f16_to_f32(src, dst, n); }
void cv_f32_to_f16(const float *src, uint16_t *dst, int64_t n) { active()->f32_to_f16(src, dst, n); }
void cv_bf16_to_f32(const uint16_t *src, float *dst, int64_t n) { active()->bf16_to_f32(src, dst, n); }
void cv_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) { active()->f32_to_bf16(src, dst, n); }
void cv_rope(const cv_rope_params *p, float *x, int32_t n_head, int32_t head_dim, int64_t pos)
{
    active()->rope(p, x, n_head, head_dim, pos);
}
int64_t cv_argmax_f32(const float *x, int64_t n) { return active()->argmax(x, n); }
