/* test_cuda_nvrtc — every embedded kernel program through the real NVRTC
 * that corvid loads at run time, where this machine has one (no GPU
 * needed): each program, for every weight type, compiles to PTX that
 * defines every kernel the backend looks up; those of each block family
 * also to a cubin for sm_90 (the H200 the check script runs on), act.cu,
 * rows.cu, attn.cu, moe.cu and one matmul program for the oldest architecture this
 * NVRTC and corvid share; a broken program returns NVRTC's log.
 *
 * Without NVRTC the test prints "nvrtc: not on this machine" and CTest
 * reports a skip (tests/backend/CMakeLists.txt). That skip stands under
 * CI=true as well, against the suite's rule that a test fails in CI what
 * it cannot run: CI's Debian has no CUDA toolkit and no package of NVRTC
 * the suite could install, and the host side it would exercise is
 * test_cuda_host's, over fake libraries, which CI runs. */
#include <stdlib.h>

#include "backend/cuda/cuda_int.h"
#include "cuda_test.h"
#include "test.h"

static cv_cuda_nvrtc g_rtc;

static bool nvrtc_knows(int sm)
{
    for (int i = 0; i < g_rtc.n_archs; i++)
        if (g_rtc.archs[i] == sm)
            return true;
    return false;
}

/* The kernels cuda.c looks up by name in each program's image. */
static const char *const act_kernels[] = { "cv_quantize_q8", "cv_route_group", NULL };
static const char *const rows_kernels[] = { "cv_rmsnorm", "cv_add", "cv_scale", "cv_softcap", "cv_glu", "cv_sigmoid_mul",
                                            NULL };
static const char *const attn_kernels[] = { "cv_attn_rows", NULL };
static const char *const moe_kernels[] = { "cv_moe_route", "cv_moe_glu", "cv_moe_sum", NULL };
static const char *const mm_kernels[] = { "cv_mm_dense_1x1", "cv_mm_dense_1x2", "cv_mm_dense_1x4",   "cv_mm_dense_1x8",
                                          "cv_mm_dense_4x8", "cv_mm_routes_1",  "cv_mm_grouped_4x8", "cv_dequant_rows",
                                          NULL };

/* The programs every stream loads, and mm.cu for every weight type (only:
 * those of the list, ended by -1), for sm as a cubin or as PTX; PTX must
 * define every kernel cuda.c launches. */
static const char *const base_programs[] = { "act.cu", "rows.cu", "attn.cu", "moe.cu" };
static const char *const *const base_kernels[] = { act_kernels, rows_kernels, attn_kernels, moe_kernels };
enum { N_BASE = 4 };

static void compile_for(int sm, bool ptx, const int *only)
{
    const cv_cuda_target t = { .sm = sm, .ptx = ptx };
    uint32_t types[CV_GGML_TYPE_COUNT];
    const int n = weight_types(types);
    cv_buf image = { 0 };
    cv_err err = { 0 };
    const double t0 = cv_now_s();
    int done = 0;
    for (int i = -N_BASE; i < n; i++) {
        bool listed = i < 0 || !only; /* the base programs always */
        for (const int *o = only; o && *o >= 0 && !listed; o++)
            listed = (uint32_t)*o == types[i];
        if (!listed)
            continue;
        char defines[32] = "";
        if (i >= 0)
            snprintf(defines, sizeof defines, "-DCV_WTYPE=%u", types[i]);
        const char *src = i < 0 ? base_programs[N_BASE + i] : "mm.cu";
        cv_err_clear(&err);
        const int rc = cv_cuda_rtc_compile(&g_rtc, &t, src, defines, &image, &err);
        CHECK_MSG(rc == 0, "%s %s for %s_%d: %s", src, defines, ptx ? "compute" : "sm", sm, err.msg);
        if (rc)
            continue;
        done++;
        if (!ptx) {
            CHECK_MSG(image.len > 64 && !memcmp(image.data, "\x7f" "ELF", 4), "%s %s: not a cubin", src, defines);
            continue;
        }
        CHECK_MSG(strstr(image.data, ".target"), "%s %s: not PTX", src, defines);
        for (const char *const *k = i < 0 ? base_kernels[N_BASE + i] : mm_kernels; *k; k++) {
            char entry[64];
            snprintf(entry, sizeof entry, ".entry %s(", *k);
            CHECK_MSG(strstr(image.data, entry), "%s %s: no kernel %s", src, defines, *k);
        }
    }
    printf("     %d programs for %s_%d in %.1f s\n", done, ptx ? "compute" : "sm", sm, cv_now_s() - t0);
    cv_buf_free(&image);
}

TEST(every_program_compiles_to_ptx)
{
    compile_for(g_rtc.archs[g_rtc.n_archs - 1], true, NULL);
}

/* A cubin is PTX through ptxas (registers, local memory), 20-30 s a
 * program on two shared cores: the block families stand for the rest
 * (32-value blocks, K-quants with and without minimums, MXFP4's byte
 * loads, a float type); scripts/cuda-check.sh builds every one on the
 * GPU. */
static const int cubin_types[] = { CV_GGML_Q8_0, CV_GGML_Q4_K, CV_GGML_Q6_K, CV_GGML_MXFP4, CV_GGML_BF16, -1 };

TEST(programs_compile_for_sm_90)
{
    if (!nvrtc_knows(90))
        TEST_SKIP("NVRTC %d.%d does not compile for sm_90", g_rtc.major, g_rtc.minor);
    compile_for(90, false, cubin_types);
}

/* Nothing in the kernels depends on the architecture beyond dp4a (sm_61):
 * the base programs and one matmul program stand for the rest at the
 * oldest. */
TEST(programs_compile_for_the_oldest_shared_arch)
{
    int old = 0;
    for (int i = 0; i < g_rtc.n_archs && !old; i++)
        if (g_rtc.archs[i] >= CV_CUDA_MIN_SM)
            old = g_rtc.archs[i];
    CHECK(old > 0);
    static const int q4_k[] = { CV_GGML_Q4_K, -1 };
    compile_for(old, false, q4_k);
}

TEST(a_broken_program_reports_nvrtc_log)
{
    const cv_cuda_target t = { .sm = g_rtc.archs[g_rtc.n_archs - 1] };
    cv_buf image = { 0 };
    cv_err err = { 0 };
    /* mm.cu refuses to compile without its weight type */
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "mm.cu", "", &image, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "cannot compile mm.cu") && strstr(err.msg, "CV_WTYPE"), "%s", err.msg);
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "common.cuh", "", &image, &err), CV_EINVAL);
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "nope.cu", "", &image, &err), CV_EINVAL);
    cv_buf_free(&image);
}

int main(void)
{
    cv_err err = { 0 };
    if (cv_cuda_nvrtc_open(NULL, &g_rtc, &err)) {
        printf("nvrtc: not on this machine (%s)\n", err.msg);
        return 0;
    }
    printf("NVRTC %d.%d at %s, sm_%d to sm_%d\n", g_rtc.major, g_rtc.minor, g_rtc.path, g_rtc.archs[0],
           g_rtc.archs[g_rtc.n_archs - 1]);
    RUN(every_program_compiles_to_ptx);
    RUN(programs_compile_for_sm_90);
    RUN(programs_compile_for_the_oldest_shared_arch);
    RUN(a_broken_program_reports_nvrtc_log);
    cv_cuda_nvrtc_close(&g_rtc);
    return test_report();
}
