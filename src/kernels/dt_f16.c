/* dt_f16.c — IEEE half-precision weights: the exact half<->single
 * conversions every other file uses for block scales (bit manipulation, no
 * F16C, so the reference runs on any x86-64), row conversion, and the dot
 * product of an f16 weight row with f32 activations (vec_dot_type f32: the
 * activations are not rounded to f16, which costs nothing on a memory-bound
 * matvec and keeps the F16 model within f32 rounding of its dequantized twin). */
#include "kernels/kernels_int.h"

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float cv_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) /* inf or nan: keep the payload */
        return bits_f32(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* Subnormal half: value = man * 2^-24, exact in f32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t cv_fp32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) /* nan: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7E00 | ((a >> 13) & 0x3FF));
    if (a >= 0x477FF000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7C00);
    if (a < 0x38800000u) {
        /* Result is subnormal (or zero): scale so the half's unit is 2^-24 and
         * let the FPU round to nearest even. */
        float v = bits_f32(a) * 0x1p24f;
        uint32_t m = (uint32_t)lrintf(v); /* <= 1024; 1024 is the smallest normal */
        return (uint16_t)(sign | m);
    }
    /* Normal: drop 13 mantissa bits with round to nearest even; a carry
     * out of the mantissa correctly bumps the exponent. */
    uint32_t r = a + 0xFFFu + ((a >> 13) & 1);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float cv_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t cv_fp32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* nan: force quiet so it stays a nan */
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

void cv_dt_f16_to_f32(const void *src, float *dst, int64_t n)
{
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = cv_fp16_to_fp32(s[i]);
}

void cv_dt_f16_from_f32(const float *src, void *dst, int64_t n)
{
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = cv_fp32_to_fp16(src[i]);
}

void cv_dt_f16_dot(int64_t n, const void *w, const void *a, float *out)
{
    const uint16_t *x = w;
    const float *y = a;
    float s[4] = { 0, 0, 0, 0 };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += cv_fp16_to_fp32(x[i + k]) * y[i + k];
    for (; i < n; i++)
        s[0] += cv_fp16_to_fp32(x[i]) * y[i];
    *out = (s[0] + s[1]) + (s[2] + s[3]);
}
