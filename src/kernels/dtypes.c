/* dtypes.c — the dtype table: one row per ggml type corvid computes with,
 * naming its block geometry, its reference functions, the activation type
 * its dot product wants, and its functions per ISA. Adding a type is one
 * dt_<name>.c (+ a file per SIMD level) and one row here; everything else (matmul, tests,
 * doctor) iterates the table. Geometry must equal the GGUF format table in
 * gguf/ (tests/kernels checks every row). */
#include "kernels/kernels_int.h"

/* The reference functions of a dtype (scalar slot): dequantize, quantize
 * and, for weight types, the dot. */
#define SCALAR_OPS(nm) { .to_f32 = cv_dt_##nm##_to_f32, .from_f32 = cv_dt_##nm##_from_f32 }
#define SCALAR_OPS_DOT(nm) \
    { .to_f32 = cv_dt_##nm##_to_f32, .from_f32 = cv_dt_##nm##_from_f32, .vec_dot = cv_dt_##nm##_dot }

const cv_dtype cv_dtypes[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_F32] = {
        .name = "f32", .type = CV_GGML_F32, .block_elems = 1, .block_bytes = 4,
        .is_quantized = false, .is_weight = true, .vec_dot_type = CV_GGML_F32,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(f32),
                 [CV_ISA_AVX2] = { .vec_dot = cv_dt_f32_dot_avx2 },
                 [CV_ISA_AVX512] = { .vec_dot = cv_dt_f32_dot_avx512 } },
    },
    [CV_GGML_F16] = {
        .name = "f16", .type = CV_GGML_F16, .block_elems = 1, .block_bytes = 2,
        .is_quantized = false, .is_weight = true, .vec_dot_type = CV_GGML_F32,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(f16),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_f16_to_f32_avx2,
                                   .from_f32 = cv_dt_f16_from_f32_avx2,
                                   .vec_dot = cv_dt_f16_dot_avx2 },
                 [CV_ISA_AVX512] = { .vec_dot = cv_dt_f16_dot_avx512 } },
    },
    [CV_GGML_BF16] = {
        .name = "bf16", .type = CV_GGML_BF16, .block_elems = 1, .block_bytes = 2,
        .is_quantized = false, .is_weight = true, .vec_dot_type = CV_GGML_F32,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(bf16),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_bf16_to_f32_avx2, .vec_dot = cv_dt_bf16_dot_avx2 },
                 [CV_ISA_AVX512] = { .vec_dot = cv_dt_bf16_dot_avx512 } },
    },
    [CV_GGML_Q4_0] = {
        .name = "q4_0", .type = CV_GGML_Q4_0, .block_elems = QK4_0, .block_bytes = sizeof(block_q4_0),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_0,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_0),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q4_0_to_f32_avx2, .vec_dot = cv_dt_q4_0_dot_avx2 } },
    },
    [CV_GGML_Q4_1] = {
        .name = "q4_1", .type = CV_GGML_Q4_1, .block_elems = QK4_1, .block_bytes = sizeof(block_q4_1),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_1,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_1),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q4_1_to_f32_avx2, .vec_dot = cv_dt_q4_1_dot_avx2 } },
    },
    [CV_GGML_Q5_0] = {
        .name = "q5_0", .type = CV_GGML_Q5_0, .block_elems = QK5_0, .block_bytes = sizeof(block_q5_0),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_0,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_0),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q5_0_to_f32_avx2, .vec_dot = cv_dt_q5_0_dot_avx2 } },
    },
    [CV_GGML_Q5_1] = {
        .name = "q5_1", .type = CV_GGML_Q5_1, .block_elems = QK5_1, .block_bytes = sizeof(block_q5_1),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_1,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_1),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q5_1_to_f32_avx2, .vec_dot = cv_dt_q5_1_dot_avx2 } },
    },
    [CV_GGML_Q8_0] = {
        .name = "q8_0", .type = CV_GGML_Q8_0, .block_elems = QK8_0, .block_bytes = sizeof(block_q8_0),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_0,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q8_0),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q8_0_to_f32_avx2,
                                   .from_f32 = cv_dt_q8_0_from_f32_avx2,
                                   .vec_dot = cv_dt_q8_0_dot_avx2 } },
    },
    [CV_GGML_Q8_1] = {
        .name = "q8_1", .type = CV_GGML_Q8_1, .block_elems = QK8_1, .block_bytes = sizeof(block_q8_1),
        .is_quantized = true, .is_weight = false, .vec_dot_type = CV_GGML_Q8_1,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS(q8_1),
                 [CV_ISA_AVX2] = { .from_f32 = cv_dt_q8_1_from_f32_avx2 } },
    },
    [CV_GGML_Q2_K] = {
        .name = "q2_K", .type = CV_GGML_Q2_K, .block_elems = QK_K, .block_bytes = sizeof(block_q2_K),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q2_K),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q2_K_to_f32_avx2, .vec_dot = cv_dt_q2_K_dot_avx2 } },
    },
    [CV_GGML_Q3_K] = {
        .name = "q3_K", .type = CV_GGML_Q3_K, .block_elems = QK_K, .block_bytes = sizeof(block_q3_K),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q3_K),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q3_K_to_f32_avx2, .vec_dot = cv_dt_q3_K_dot_avx2 } },
    },
    [CV_GGML_Q4_K] = {
        .name = "q4_K", .type = CV_GGML_Q4_K, .block_elems = QK_K, .block_bytes = sizeof(block_q4_K),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q4_K),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q4_K_to_f32_avx2, .vec_dot = cv_dt_q4_K_dot_avx2 } },
    },
    [CV_GGML_Q5_K] = {
        .name = "q5_K", .type = CV_GGML_Q5_K, .block_elems = QK_K, .block_bytes = sizeof(block_q5_K),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q5_K),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q5_K_to_f32_avx2, .vec_dot = cv_dt_q5_K_dot_avx2 } },
    },
    [CV_GGML_Q6_K] = {
        .name = "q6_K", .type = CV_GGML_Q6_K, .block_elems = QK_K, .block_bytes = sizeof(block_q6_K),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(q6_K),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_q6_K_to_f32_avx2, .vec_dot = cv_dt_q6_K_dot_avx2 } },
    },
    [CV_GGML_Q8_K] = {
        .name = "q8_K", .type = CV_GGML_Q8_K, .block_elems = QK_K, .block_bytes = sizeof(block_q8_K),
        .is_quantized = true, .is_weight = false, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS(q8_K),
                 [CV_ISA_AVX2] = { .from_f32 = cv_dt_q8_K_from_f32_avx2 } },
    },
    [CV_GGML_IQ4_NL] = {
        .name = "iq4_nl", .type = CV_GGML_IQ4_NL, .block_elems = QK4_NL, .block_bytes = sizeof(block_iq4_nl),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_0,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(iq4_nl),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_iq4_nl_to_f32_avx2, .vec_dot = cv_dt_iq4_nl_dot_avx2 } },
    },
    [CV_GGML_IQ4_XS] = {
        .name = "iq4_xs", .type = CV_GGML_IQ4_XS, .block_elems = QK_K, .block_bytes = sizeof(block_iq4_xs),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_K,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(iq4_xs),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_iq4_xs_to_f32_avx2, .vec_dot = cv_dt_iq4_xs_dot_avx2 } },
    },
    [CV_GGML_MXFP4] = {
        .name = "mxfp4", .type = CV_GGML_MXFP4, .block_elems = QK_MXFP4, .block_bytes = sizeof(block_mxfp4),
        .is_quantized = true, .is_weight = true, .vec_dot_type = CV_GGML_Q8_0,
        .ops = { [CV_ISA_SCALAR] = SCALAR_OPS_DOT(mxfp4),
                 [CV_ISA_AVX2] = { .to_f32 = cv_dt_mxfp4_to_f32_avx2, .vec_dot = cv_dt_mxfp4_dot_avx2 } },
    },
};

const cv_dtype *cv_dtype_get(uint32_t type)
{
    if (type >= CV_GGML_TYPE_COUNT || !cv_dtypes[type].name)
        return NULL;
    return &cv_dtypes[type];
}

cv_dtype_ops cv_dtype_ops_for(const cv_dtype *dt, cv_isa isa)
{
    if ((unsigned)isa >= CV_ISA_COUNT || !cv_isa_supported(isa))
        isa = CV_ISA_SCALAR;
    /* Each slot from the highest level at or below isa that has it: the
     * chain isa, cv_isa_fallback(isa), ... ends at scalar, which has all. */
    cv_dtype_ops ops = { 0 };
    for (cv_isa l = isa;; l = cv_isa_fallback(l)) {
        const cv_dtype_ops *o = &dt->ops[l];
        if (!ops.to_f32) ops.to_f32 = o->to_f32;
        if (!ops.from_f32) ops.from_f32 = o->from_f32;
        if (!ops.vec_dot) ops.vec_dot = o->vec_dot;
        if (l == CV_ISA_SCALAR)
            return ops;
    }
}

cv_isa cv_dtype_dot_isa(const cv_dtype *dt, cv_isa isa)
{
    if ((unsigned)isa >= CV_ISA_COUNT || !cv_isa_supported(isa))
        return CV_ISA_SCALAR;
    while (isa != CV_ISA_SCALAR && !dt->ops[isa].vec_dot)
        isa = cv_isa_fallback(isa);
    return isa;
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
