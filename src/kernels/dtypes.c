/* dtypes.c — the dtype table: one row per ggml type corvid computes with,
 * naming its block geometry, its reference functions, the activation type
 * its dot product wants, and its functions per ISA. Adding a type is one
 * dt_<name>.c (+ _avx2.c) and one row here; everything else (matmul, tests,
 * doctor) iterates the table. Geometry must equal the GGUF format table in
 * gguf/ (tests/kernels checks every row). */
#include "kernels/kernels_int.h"

#define SCALAR_OPS(nm) { cv_dt_##nm##_to_f32, cv_dt_##nm##_from_f32, NULL }
#define SCALAR_OPS_DOT(nm) { cv_dt_##nm##_to_f32, cv_dt_##nm##_from_f32, cv_dt_##nm##_dot }

const cv_dtype cv_dtypes[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_F32] = { "f32", CV_GGML_F32, 1, 4, false, true, CV_GGML_F32,
                      { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(f32),
                         [CV_ISA_AVX2] = { NULL, NULL, cv_dt_f32_dot_avx2 } } },
    [CV_GGML_F16] = { "f16", CV_GGML_F16, 1, 2, false, true, CV_GGML_F32,
                      { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(f16),
                         [CV_ISA_AVX2] = { cv_dt_f16_to_f32_avx2, cv_dt_f16_from_f32_avx2, cv_dt_f16_dot_avx2 } } },
    [CV_GGML_BF16] = { "bf16", CV_GGML_BF16, 1, 2, false, true, CV_GGML_F32,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(bf16),
                         [CV_ISA_AVX2] = { cv_dt_bf16_to_f32_avx2, NULL, cv_dt_bf16_dot_avx2 } } },
    [CV_GGML_Q4_0] = { "q4_0", CV_GGML_Q4_0, QK4_0, sizeof(block_q4_0), true, true, CV_GGML_Q8_0,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_0),
                         [CV_ISA_AVX2] = { cv_dt_q4_0_to_f32_avx2, NULL, cv_dt_q4_0_dot_avx2 } } },
    [CV_GGML_Q4_1] = { "q4_1", CV_GGML_Q4_1, QK4_1, sizeof(block_q4_1), true, true, CV_GGML_Q8_1,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_1),
                         [CV_ISA_AVX2] = { cv_dt_q4_1_to_f32_avx2, NULL, cv_dt_q4_1_dot_avx2 } } },
    [CV_GGML_Q5_0] = { "q5_0", CV_GGML_Q5_0, QK5_0, sizeof(block_q5_0), true, true, CV_GGML_Q8_0,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_0),
                         [CV_ISA_AVX2] = { cv_dt_q5_0_to_f32_avx2, NULL, cv_dt_q5_0_dot_avx2 } } },
    [CV_GGML_Q5_1] = { "q5_1", CV_GGML_Q5_1, QK5_1, sizeof(block_q5_1), true, true, CV_GGML_Q8_1,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_1),
                         [CV_ISA_AVX2] = { cv_dt_q5_1_to_f32_avx2, NULL, cv_dt_q5_1_dot_avx2 } } },
    [CV_GGML_Q8_0] = { "q8_0", CV_GGML_Q8_0, QK8_0, sizeof(block_q8_0), true, true, CV_GGML_Q8_0,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q8_0),
                         [CV_ISA_AVX2] = { cv_dt_q8_0_to_f32_avx2, cv_dt_q8_0_from_f32_avx2, cv_dt_q8_0_dot_avx2 } } },
    [CV_GGML_Q8_1] = { "q8_1", CV_GGML_Q8_1, QK8_1, sizeof(block_q8_1), true, false, CV_GGML_Q8_1,
                       { [CV_ISA_SCALAR] = SCALAR_OPS(q8_1),
                         [CV_ISA_AVX2] = { NULL, cv_dt_q8_1_from_f32_avx2, NULL } } },
    [CV_GGML_Q4_K] = { "q4_K", CV_GGML_Q4_K, QK_K, sizeof(block_q4_K), true, true, CV_GGML_Q8_K,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_K),
                         [CV_ISA_AVX2] = { cv_dt_q4_K_to_f32_avx2, NULL, cv_dt_q4_K_dot_avx2 } } },
    [CV_GGML_Q5_K] = { "q5_K", CV_GGML_Q5_K, QK_K, sizeof(block_q5_K), true, true, CV_GGML_Q8_K,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_K),
                         [CV_ISA_AVX2] = { cv_dt_q5_K_to_f32_avx2, NULL, cv_dt_q5_K_dot_avx2 } } },
    [CV_GGML_Q6_K] = { "q6_K", CV_GGML_Q6_K, QK_K, sizeof(block_q6_K), true, true, CV_GGML_Q8_K,
                       { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q6_K),
                         [CV_ISA_AVX2] = { cv_dt_q6_K_to_f32_avx2, NULL, cv_dt_q6_K_dot_avx2 } } },
    [CV_GGML_Q8_K] = { "q8_K", CV_GGML_Q8_K, QK_K, sizeof(block_q8_K), true, false, CV_GGML_Q8_K,
                       { [CV_ISA_SCALAR] = SCALAR_OPS(q8_K),
                         [CV_ISA_AVX2] = { NULL, cv_dt_q8_K_from_f32_avx2, NULL } } },
};

const cv_dtype *cv_dtype_get(uint32_t type)
{
    if (type >= CV_GGML_TYPE_COUNT || !cv_dtypes[type].name)
        return NULL;
    return &cv_dtypes[type];
}

cv_dtype_ops cv_dtype_ops_for(const cv_dtype *dt, cv_isa isa)
{
    cv_dtype_ops ops = dt->ops[CV_ISA_SCALAR];
    if (isa != CV_ISA_SCALAR && (unsigned)isa < CV_ISA_COUNT && cv_isa_supported(isa)) {
        const cv_dtype_ops *o = &dt->ops[isa];
        if (o->to_f32) ops.to_f32 = o->to_f32;
        if (o->from_f32) ops.from_f32 = o->from_f32;
        if (o->vec_dot) ops.vec_dot = o->vec_dot;
    }
    return ops;
}

static int check_row(const cv_dtype *dt, uint32_t type, int64_t n, const char *what, cv_err *err)
{
    if (!dt)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: tensor type %u is not one corvid computes with", what, type);
    if (n < 0 || n % dt->block_elems != 0)
        return cv_err_set(err, CV_EINVAL, "%s: row of %lld %s values is not a multiple of its block of %u", what,
                          (long long)n, dt->name, dt->block_elems);
    return 0;
}

int cv_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n, cv_err *err)
{
    const cv_dtype *dt = cv_dtype_get(type);
    int rc = check_row(dt, type, n, "dequantize", err);
    if (rc)
        return rc;
    cv_to_f32_fn to_f32 = cv_dtype_ops_for(dt, cv_isa_active()).to_f32;
    if ((uintptr_t)src % 4 == 0) {
        to_f32(src, dst, n);
        return 0;
    }
    /* A GGUF file may align tensors to less than its block fields need:
     * dequantize from an aligned copy, a chunk at a time. */
    _Alignas(64) uint8_t tmp[4096];
    const int64_t per = (int64_t)(sizeof tmp / dt->block_bytes) * dt->block_elems;
    for (int64_t i = 0; i < n; i += per) {
        const int64_t m = CV_MIN(per, n - i);
        const size_t bytes = (size_t)(m / dt->block_elems) * dt->block_bytes;
        memcpy(tmp, (const uint8_t *)src + (size_t)(i / dt->block_elems) * dt->block_bytes, bytes);
        to_f32(tmp, dst + i, m);
    }
    return 0;
}

int cv_quantize_row(uint32_t type, const float *src, void *dst, int64_t n, cv_err *err)
{
    const cv_dtype *dt = cv_dtype_get(type);
    int rc = check_row(dt, type, n, "quantize", err);
    if (rc)
        return rc;
    cv_from_f32_fn from_f32 = dt->ops[CV_ISA_SCALAR].from_f32;
    if ((uintptr_t)dst % 4 == 0) {
        from_f32(src, dst, n);
        return 0;
    }
    _Alignas(64) uint8_t tmp[4096];
    const int64_t per = (int64_t)(sizeof tmp / dt->block_bytes) * dt->block_elems;
    for (int64_t i = 0; i < n; i += per) {
        const int64_t m = CV_MIN(per, n - i);
        from_f32(src + i, tmp, m);
        memcpy((uint8_t *)dst + (size_t)(i / dt->block_elems) * dt->block_bytes, tmp,
               (size_t)(m / dt->block_elems) * dt->block_bytes);
    }
    return 0;
}
