/* vec_avx2.c — AVX2/FMA/F16C versions of the vector ops, 8 lanes at a
 * time with a scalar tail that calls the reference's formula. expf is
 * simd_exp.h's polynomial (relative error < 2e-7, below f32 rounding of the
 * sums it feeds); tests bound the difference to vec.c per op. */
#include "kernels/simd_avx2.h"
#include "kernels/simd_exp.h"

/* e^x, and exactly 0 below the polynomial's range (-inf included): a
 * banned logit's probability in a softmax is 0, as expf gives. */
static inline __m256 exp_ps(__m256 x)
{
    const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(CV_EXP_LO), _CMP_LT_OQ);
    return _mm256_andnot_ps(tiny, cv_exp8_ps(x));
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        acc0 = _mm256_fmadd_ps(a, a, acc0);
        acc1 = _mm256_fmadd_ps(b, b, acc1);
    }
    float ss = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        ss += x[i] * x[i];
    const float r = (float)(1.0 / sqrt((double)ss / (double)(n > 0 ? n : 1) + eps));
    const __m256 vr = _mm256_set1_ps(r);
    i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        if (w)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++)
        y[i] = w ? x[i] * r * w[i] : x[i] * r;
}

static void swiglu(float *y, const float *g, const float *u, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vg = _mm256_loadu_ps(g + i);
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), vg));
        __m256 s = _mm256_div_ps(vg, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* GELU as x sigmoid(2c (x + 0.044715 x^3)) (vec.c's formula). For very
 * negative x the exponential saturates at e^88.7 and x / that is -0. */
static void geglu(float *y, const float *g, const float *u, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), m2c = _mm256_set1_ps(-CV_GELU_2C);
    const __m256 k = _mm256_set1_ps(0.044715f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 e = exp_ps(_mm256_mul_ps(m2c, _mm256_fmadd_ps(k, x3, x)));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) {
        const float x = g[i];
        y[i] = x / (1.0f + expf(-CV_GELU_2C * (x + 0.044715f * x * x * x))) * u[i];
    }
}

static void swiglu_clamped(float *y, const float *g, const float *u, int64_t n, float alpha, float limit)
{
    const __m256 one = _mm256_set1_ps(1.0f), na = _mm256_set1_ps(-alpha);
    const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_min_ps(_mm256_loadu_ps(g + i), hi);
        const __m256 v = _mm256_max_ps(_mm256_min_ps(_mm256_loadu_ps(u + i), hi), lo);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp_ps(_mm256_mul_ps(na, x))));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_add_ps(v, one)));
    }
    for (; i < n; i++) {
        const float x = fminf(g[i], limit), v = fmaxf(fminf(u[i], limit), -limit);
        y[i] = x / (1.0f + expf(-alpha * x)) * (v + 1.0f);
    }
}

static void sigmoid_mul(float *y, const float *x, const float *g, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(g + i)));
        _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_loadu_ps(x + i), _mm256_add_ps(one, e)));
    }
    for (; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-g[i]));
}

static void vexp(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp_ps(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = expf(x[i]);
}

static float softmax(float *x, int64_t n)
{
    if (n <= 0)
        return 0;
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float max = hmax_ps(vmax);
    for (; i < n; i++)
        max = fmaxf(max, x[i]);
    if (max == -INFINITY) {
        memset(x, 0, (size_t)n * sizeof *x);
        return 0;
    }
    const __m256 vm = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    double sum = hsum_ps(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    const __m256 vi = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
    for (; i < n; i++)
        x[i] *= inv;
    return (float)sum;
}

static void add(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

static void scale(float *x, float s, int64_t n)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++)
        x[i] *= s;
}

static void axpy(float *y, float a, const float *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, vx, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++)
        y[i] += a * cv_fp16_to_fp32(x[i]);
}

static float dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float s = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static float dot_f16(const uint16_t *a, const float *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))),
                               _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), _mm256_loadu_ps(b + i), acc0);
    float s = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        s += cv_fp16_to_fp32(a[i]) * b[i];
    return s;
}

static void row_f16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = cv_fp16_to_fp32(src[i]);
}

static void row_f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++)
        dst[i] = cv_fp32_to_fp16(src[i]);
}

static void row_bf16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        dst[i] = cv_bf16_to_fp32(src[i]);
}

static void row_f32_to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    /* Rounding with NaN care is cheap in scalar and this runs only when
     * writing files; the reference is used as is. */
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_fp32_to_bf16(src[i]);
}

static void rope(const cv_rope_params *p, float *x, int32_t n_head, int32_t head_dim, int64_t pos)
{
    const int half = p->n_rot / 2;
    assert(p->n_rot % 2 == 0 && p->n_rot <= head_dim && half <= CV_MAX_ROPE_DIMS / 2);
    float cs[CV_MAX_ROPE_DIMS / 2], sn[CV_MAX_ROPE_DIMS / 2];
    cv_rope_cos_sin(p, pos, cs, sn);
    for (int32_t h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * head_dim;
        int i = 0;
        if (p->style == CV_ROPE_NEOX) {
            for (; i + 8 <= half; i += 8) {
                __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
                __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
                _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
                _mm256_storeu_ps(v + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
            }
        }
        /* NORM pairs are interleaved; the tail and the NORM style use the
         * reference formula (RoPE is a small share of a forward pass). */
        for (; i < half; i++) {
            const int i0 = p->style == CV_ROPE_NEOX ? i : 2 * i;
            const int i1 = p->style == CV_ROPE_NEOX ? i + half : 2 * i + 1;
            const float x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * cs[i] - x1 * sn[i];
            v[i1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* Two passes over x (a vocabulary of logits stays in L2/L3 between them):
 * the maximum, then the first index that holds it. vmaxps returns its
 * second operand when the first is NaN, so NaNs never enter the running
 * maximum; equal values (and +0 / -0) compare equal in the second pass,
 * which keeps the first of them, as the scalar loop does. */
static int64_t argmax(const float *x, int64_t n)
{
    if (n <= 1 || x[0] != x[0])
        return 0;
    __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    }
    float m = hmax_ps(_mm256_max_ps(m0, m1));
    for (; i < n; i++)
        if (x[i] > m)
            m = x[i];
    const __m256 mv = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
        if (hit)
            return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0; /* not reached: m is one of x's values */
}

const cv_vec_ops cv_vec_ops_avx2 = {
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
