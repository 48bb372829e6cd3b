/* matmul_avxvnni.c — which AVX-VNNI (256-bit vpdpbusd) matmul
 * implementation each weight type uses (the tiles live beside their dtype
 * in dt_*_avxvnni.c). A type without one runs the avx2 tile. */
#include "kernels/kernels_int.h"

extern const cv_mm_impl cv_mm_q4_0_avx_vnni;
extern const cv_mm_impl cv_mm_q4_1_avx_vnni;
extern const cv_mm_impl cv_mm_q5_0_avx_vnni;
extern const cv_mm_impl cv_mm_q5_1_avx_vnni;
extern const cv_mm_impl cv_mm_q8_0_avx_vnni;
extern const cv_mm_impl cv_mm_iq4_nl_avx_vnni;
extern const cv_mm_impl cv_mm_mxfp4_avx_vnni;
extern const cv_mm_impl cv_mm_q4_K_avx_vnni;
extern const cv_mm_impl cv_mm_q5_K_avx_vnni;
extern const cv_mm_impl cv_mm_q6_K_avx_vnni;
extern const cv_mm_impl cv_mm_q2_K_avx_vnni;
extern const cv_mm_impl cv_mm_q3_K_avx_vnni;
extern const cv_mm_impl cv_mm_iq4_xs_avx_vnni;

static const cv_mm_impl *const impls[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_Q4_0] = &cv_mm_q4_0_avx_vnni,
    [CV_GGML_Q4_1] = &cv_mm_q4_1_avx_vnni,
    [CV_GGML_Q5_0] = &cv_mm_q5_0_avx_vnni,
    [CV_GGML_Q5_1] = &cv_mm_q5_1_avx_vnni,
    [CV_GGML_Q8_0] = &cv_mm_q8_0_avx_vnni,
    [CV_GGML_IQ4_NL] = &cv_mm_iq4_nl_avx_vnni,
    [CV_GGML_MXFP4] = &cv_mm_mxfp4_avx_vnni,
    [CV_GGML_Q4_K] = &cv_mm_q4_K_avx_vnni,
    [CV_GGML_Q5_K] = &cv_mm_q5_K_avx_vnni,
    [CV_GGML_Q6_K] = &cv_mm_q6_K_avx_vnni,
    [CV_GGML_Q2_K] = &cv_mm_q2_K_avx_vnni,
    [CV_GGML_Q3_K] = &cv_mm_q3_K_avx_vnni,
    [CV_GGML_IQ4_XS] = &cv_mm_iq4_xs_avx_vnni,
};

const cv_mm_impl *cv_mm_impl_avx_vnni(uint32_t type) { return type < CV_GGML_TYPE_COUNT ? impls[type] : NULL; }
