/* fake_nvrtc.c — a stand-in for libnvrtc that the CUDA backend's host
 * tests load through CORVID_LIBNVRTC, so that opening a device, compiling
 * its programs, uploading weights and launching run on a machine with no
 * CUDA at all (CI). A compile checks that the program is one of corvid's
 * (it includes common.cuh, directly or through dtypes.cuh) and returns a
 * PTX text (as its PTX or its "cubin") that fake_cuda.c's
 * cuModuleLoadData takes and whose cuModuleGetFunction finds any cv_*
 * kernel in ("// fake-nvrtc: every cv_ entry"); the real compiles are
 * test_cuda_nvrtc's.
 *
 * $FAKE_NVRTC_VERSION ("12.4"; default 13.0) is the version it reports;
 * it compiles for sm_75 to sm_120, as NVRTC 13 does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtc_result;

typedef struct fake_program {
    char *src;
    int ok;
} fake_program;

static const int archs[] = { 75, 80, 86, 87, 89, 90, 100, 103, 110, 120 };
static const char image[] = ".version 9.0\n.target sm_90\n.address_size 64\n// fake-nvrtc: every cv_ entry\n";

nvrtc_result nvrtcVersion(int *major, int *minor)
{
    const char *v = getenv("FAKE_NVRTC_VERSION");
    *major = 13;
    *minor = 0;
    if (v && sscanf(v, "%d.%d", major, minor) != 2)
        return 1;
    return 0;
}
nvrtc_result nvrtcGetNumSupportedArchs(int *n)
{
    *n = (int)(sizeof archs / sizeof archs[0]);
    return 0;
}
nvrtc_result nvrtcGetSupportedArchs(int *out)
{
    memcpy(out, archs, sizeof archs);
    return 0;
}
nvrtc_result nvrtcCreateProgram(fake_program **p, const char *src, const char *name, int n_headers,
                                const char *const *headers, const char *const *include_names)
{
    (void)name, (void)n_headers, (void)headers, (void)include_names;
    *p = calloc(1, sizeof **p);
    (*p)->src = strdup(src);
    return 0;
}
nvrtc_result nvrtcCompileProgram(fake_program *p, int n_options, const char *const *options)
{
    (void)n_options, (void)options;
    p->ok = strstr(p->src, "#include \"common.cuh\"") || strstr(p->src, "#include \"dtypes.cuh\"");
    return p->ok ? 0 : 6; /* NVRTC_ERROR_COMPILATION */
}
nvrtc_result nvrtcGetProgramLogSize(fake_program *p, size_t *n)
{
    (void)p;
    *n = sizeof "fake-nvrtc: not a corvid program";
    return 0;
}
nvrtc_result nvrtcGetProgramLog(fake_program *p, char *log)
{
    (void)p;
    strcpy(log, "fake-nvrtc: not a corvid program");
    return 0;
}
/* A "cubin" is the same text: fake_cuda.c loads either. */
nvrtc_result nvrtcGetPTXSize(fake_program *p, size_t *n)
{
    *n = p->ok ? sizeof image : 0;
    return 0;
}
nvrtc_result nvrtcGetPTX(fake_program *p, char *out)
{
    (void)p;
    memcpy(out, image, sizeof image);
    return 0;
}
nvrtc_result nvrtcGetCUBINSize(fake_program *p, size_t *n) { return nvrtcGetPTXSize(p, n); }
nvrtc_result nvrtcGetCUBIN(fake_program *p, char *out) { return nvrtcGetPTX(p, out); }
nvrtc_result nvrtcDestroyProgram(fake_program **p)
{
    if (*p) {
        free((*p)->src);
        free(*p);
    }
    *p = NULL;
    return 0;
}
const char *nvrtcGetErrorString(nvrtc_result r) { return r == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR"; }
