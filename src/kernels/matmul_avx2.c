/* matmul_avx2.c — which AVX2 matmul implementation each weight type uses
 * (the tiles live beside their dtype in dt_*_avx2.c). A type without one
 * would run the generic vec_dot driver with its AVX2 dot. */
#include "kernels/kernels_int.h"

extern const cv_mm_impl cv_mm_q4_0_avx2;
extern const cv_mm_impl cv_mm_q4_1_avx2;
extern const cv_mm_impl cv_mm_q4_K_avx2;
extern const cv_mm_impl cv_mm_q2_K_avx2;
extern const cv_mm_impl cv_mm_q3_K_avx2;
extern const cv_mm_impl cv_mm_iq4_xs_avx2;
extern const cv_mm_impl cv_mm_q8_0_avx2;
extern const cv_mm_impl cv_mm_q6_K_avx2;
extern const cv_mm_impl cv_mm_q5_0_avx2;
extern const cv_mm_impl cv_mm_q5_1_avx2;
extern const cv_mm_impl cv_mm_q5_K_avx2;
extern const cv_mm_impl cv_mm_iq4_nl_avx2;
extern const cv_mm_impl cv_mm_mxfp4_avx2;
extern const cv_mm_impl cv_mm_f32_avx2;
extern const cv_mm_impl cv_mm_f16_avx2;
extern const cv_mm_impl cv_mm_bf16_avx2;

static const cv_mm_impl *const impls[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_Q4_0] = &cv_mm_q4_0_avx2,
    [CV_GGML_Q4_1] = &cv_mm_q4_1_avx2,
    [CV_GGML_Q4_K] = &cv_mm_q4_K_avx2,
    [CV_GGML_Q2_K] = &cv_mm_q2_K_avx2,
    [CV_GGML_Q3_K] = &cv_mm_q3_K_avx2,
    [CV_GGML_IQ4_XS] = &cv_mm_iq4_xs_avx2,
    [CV_GGML_Q8_0] = &cv_mm_q8_0_avx2,
    [CV_GGML_Q6_K] = &cv_mm_q6_K_avx2,
    [CV_GGML_Q5_0] = &cv_mm_q5_0_avx2,
    [CV_GGML_Q5_1] = &cv_mm_q5_1_avx2,
    [CV_GGML_Q5_K] = &cv_mm_q5_K_avx2,
    [CV_GGML_IQ4_NL] = &cv_mm_iq4_nl_avx2,
    [CV_GGML_MXFP4] = &cv_mm_mxfp4_avx2,
    [CV_GGML_F32] = &cv_mm_f32_avx2,
    [CV_GGML_F16] = &cv_mm_f16_avx2,
    [CV_GGML_BF16] = &cv_mm_bf16_avx2,
};

const cv_mm_impl *cv_mm_impl_avx2(uint32_t type) { return type < CV_GGML_TYPE_COUNT ? impls[type] : NULL; }
