/* matmul_avx512.c — which AVX-512 (VNNI) matmul implementation each weight
 * type uses (the tiles live beside their dtype in dt_*_avx512.c). A type
 * without one runs the next level down (cv_isa_fallback: avx-vnni where the
 * CPU has it, else avx2). */
#include "kernels/kernels_int.h"

extern const cv_mm_impl cv_mm_q4_0_avx512;
extern const cv_mm_impl cv_mm_q4_1_avx512;
extern const cv_mm_impl cv_mm_q5_0_avx512;
extern const cv_mm_impl cv_mm_q5_1_avx512;
extern const cv_mm_impl cv_mm_q8_0_avx512;
extern const cv_mm_impl cv_mm_iq4_nl_avx512;
extern const cv_mm_impl cv_mm_mxfp4_avx512;
extern const cv_mm_impl cv_mm_f32_avx512;
extern const cv_mm_impl cv_mm_f16_avx512;
extern const cv_mm_impl cv_mm_bf16_avx512;
extern const cv_mm_impl cv_mm_q4_K_avx512;
extern const cv_mm_impl cv_mm_q5_K_avx512;
extern const cv_mm_impl cv_mm_q6_K_avx512;
extern const cv_mm_impl cv_mm_q2_K_avx512;
extern const cv_mm_impl cv_mm_q3_K_avx512;
extern const cv_mm_impl cv_mm_iq4_xs_avx512;

static const cv_mm_impl *const impls[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_Q4_0] = &cv_mm_q4_0_avx512,
    [CV_GGML_Q4_1] = &cv_mm_q4_1_avx512,
    [CV_GGML_Q5_0] = &cv_mm_q5_0_avx512,
    [CV_GGML_Q5_1] = &cv_mm_q5_1_avx512,
    [CV_GGML_Q8_0] = &cv_mm_q8_0_avx512,
    [CV_GGML_IQ4_NL] = &cv_mm_iq4_nl_avx512,
    [CV_GGML_MXFP4] = &cv_mm_mxfp4_avx512,
    [CV_GGML_F32] = &cv_mm_f32_avx512,
    [CV_GGML_F16] = &cv_mm_f16_avx512,
    [CV_GGML_BF16] = &cv_mm_bf16_avx512,
    [CV_GGML_Q4_K] = &cv_mm_q4_K_avx512,
    [CV_GGML_Q5_K] = &cv_mm_q5_K_avx512,
    [CV_GGML_Q6_K] = &cv_mm_q6_K_avx512,
    [CV_GGML_Q2_K] = &cv_mm_q2_K_avx512,
    [CV_GGML_Q3_K] = &cv_mm_q3_K_avx512,
    [CV_GGML_IQ4_XS] = &cv_mm_iq4_xs_avx512,
};

const cv_mm_impl *cv_mm_impl_avx512(uint32_t type) { return type < CV_GGML_TYPE_COUNT ? impls[type] : NULL; }
