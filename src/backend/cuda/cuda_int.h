/* cuda_int.h — the CUDA backend's guts, shared by its files only.
 *
 * No CUDA header is read at build time. The few types and functions of
 * the CUDA driver API (libcuda.so.1, which the NVIDIA driver installs) and
 * of NVRTC (libnvrtc, the CUDA toolkit's run-time compiler) that corvid
 * calls are declared here from their documented C ABI, and reached through
 * function pointers that cuda_lib.c fills with dlsym at run time. Handles
 * are opaque pointers, device addresses 64-bit integers, results ints
 * (0 = success), as in NVIDIA's cuda.h and nvrtc.h; where the driver
 * exports a function under a versioned name (cuMemAlloc_v2, the 64-bit
 * one), that is the symbol looked up.
 *
 * Also here: the embedded kernel sources (generated from kernels/ by
 * cuda_embed.cmake) and the NVRTC compile with its disk cache
 * (cuda_rtc.c). */
#ifndef CV_CUDA_INT_H
#define CV_CUDA_INT_H

#include <limits.h>

#include "backend/cuda/cuda.h"

/* ---- driver API types and constants ---- */

typedef int cu_result;
typedef int cu_device;
typedef struct cu_context_st *cu_context;
typedef struct cu_module_st *cu_module;
typedef struct cu_function_st *cu_function;
typedef struct cu_stream_st *cu_stream;
typedef unsigned long long cu_dptr;

enum {
    CU_SUCCESS = 0,
    CU_ERROR_OUT_OF_MEMORY = 2,
    CU_ERROR_STUB_LIBRARY = 34,
    CU_ERROR_INSUFFICIENT_DRIVER = 35,
    CU_ERROR_NO_DEVICE = 100,
    CU_ERROR_INVALID_DEVICE = 101,
    CU_ERROR_NO_BINARY_FOR_GPU = 209,
    CU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CU_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
};
enum {
    CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76,
};
#define CU_STREAM_NON_BLOCKING 1u

/* X(member, symbol, return, parameters): what corvid calls of libcuda. */
#define CV_CUDA_DRIVER_FNS(X)                                                                              \
    X(cuInit, "cuInit", cu_result, (unsigned flags))                                                       \
    X(cuDriverGetVersion, "cuDriverGetVersion", cu_result, (int *version))                                 \
    X(cuDeviceGetCount, "cuDeviceGetCount", cu_result, (int *count))                                       \
    X(cuDeviceGet, "cuDeviceGet", cu_result, (cu_device * dev, int ordinal))                               \
    X(cuDeviceGetName, "cuDeviceGetName", cu_result, (char *name, int len, cu_device dev))                 \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", cu_result, (int *value, int attr, cu_device dev))      \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", cu_result, (size_t * bytes, cu_device dev))                 \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", cu_result, (cu_context * ctx, cu_device dev))  \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", cu_result, (cu_context ctx))                                     \
    X(cuCtxSynchronize, "cuCtxSynchronize", cu_result, (void))                                             \
    X(cuMemGetInfo, "cuMemGetInfo_v2", cu_result, (size_t * free_bytes, size_t *total_bytes))              \
    X(cuMemAlloc, "cuMemAlloc_v2", cu_result, (cu_dptr * p, size_t bytes))                                 \
    X(cuMemFree, "cuMemFree_v2", cu_result, (cu_dptr p))                                                   \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", cu_result, (cu_dptr dst, const void *src, size_t bytes))            \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", cu_result, (void *dst, cu_dptr src, size_t bytes))                  \
    X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", cu_result, (cu_dptr dst, cu_dptr src, size_t bytes))               \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", cu_result,                                                \
      (cu_dptr dst, const void *src, size_t bytes, cu_stream s))                                           \
    X(cuModuleLoadData, "cuModuleLoadData", cu_result, (cu_module * mod, const void *image))               \
    X(cuModuleGetFunction, "cuModuleGetFunction", cu_result, (cu_function * f, cu_module mod, const char *name)) \
    X(cuLaunchKernel, "cuLaunchKernel", cu_result,                                                         \
      (cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,        \
       unsigned shared_bytes, cu_stream s, void **params, void **extra))                                   \
    X(cuStreamCreate, "cuStreamCreate", cu_result, (cu_stream * s, unsigned flags))                        \
    X(cuStreamDestroy, "cuStreamDestroy_v2", cu_result, (cu_stream s))                                     \
    X(cuStreamSynchronize, "cuStreamSynchronize", cu_result, (cu_stream s))                                \
    X(cuGetErrorName, "cuGetErrorName", cu_result, (cu_result r, const char **name))

/* ---- NVRTC ---- */

typedef int nvrtc_result;
typedef struct nvrtc_program_st *nvrtc_program;

#define CV_NVRTC_FNS(X)                                                                                    \
    X(nvrtcVersion, "nvrtcVersion", nvrtc_result, (int *major, int *minor))                               \
    X(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs", nvrtc_result, (int *n))                      \
    X(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs", nvrtc_result, (int *archs))                        \
    X(nvrtcCreateProgram, "nvrtcCreateProgram", nvrtc_result,                                              \
      (nvrtc_program * p, const char *src, const char *name, int n_headers, const char *const *headers,    \
       const char *const *include_names))                                                                  \
    X(nvrtcCompileProgram, "nvrtcCompileProgram", nvrtc_result,                                            \
      (nvrtc_program p, int n_options, const char *const *options))                                        \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", nvrtc_result, (nvrtc_program p, size_t *n))        \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog", nvrtc_result, (nvrtc_program p, char *log))                \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", nvrtc_result, (nvrtc_program p, size_t *n))                  \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN", nvrtc_result, (nvrtc_program p, char *cubin))                        \
    X(nvrtcGetPTXSize, "nvrtcGetPTXSize", nvrtc_result, (nvrtc_program p, size_t *n))                      \
    X(nvrtcGetPTX, "nvrtcGetPTX", nvrtc_result, (nvrtc_program p, char *ptx))                              \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram", nvrtc_result, (nvrtc_program * p))                       \
    X(nvrtcGetErrorString, "nvrtcGetErrorString", const char *, (nvrtc_result r))

#define CV_CUDA_FN_MEMBER(member, sym, ret, params) ret(*member) params;

/* The driver, opened (cv_cuda_driver_open). */
typedef struct cv_cuda_driver {
    void *handle;
    char path[PATH_MAX]; /* what was opened */
    int version;         /* cuDriverGetVersion: 1000 major + 10 minor */
    CV_CUDA_DRIVER_FNS(CV_CUDA_FN_MEMBER)
} cv_cuda_driver;

/* NVRTC, opened (cv_cuda_nvrtc_open). */
typedef struct cv_cuda_nvrtc {
    void *handle;
    char path[PATH_MAX];
    int major, minor;
    int n_archs;
    int archs[64]; /* the sm numbers it compiles for, ascending */
    CV_NVRTC_FNS(CV_CUDA_FN_MEMBER)
} cv_cuda_nvrtc;

/* Opens the driver library at path (NULL: $CORVID_LIBCUDA, else
 * "libcuda.so.1" from the loader's search path), resolves every function
 * above and calls cuInit. CV_EUNSUPPORTED names what is missing: the
 * library (with dlopen's reason), a symbol, or what cuInit said (the
 * toolkit's stub library, no device, a driver too old). On failure nothing
 * stays open. */
int cv_cuda_driver_open(const char *path, cv_cuda_driver *d, cv_err *err);
/* The same for NVRTC: path, else $CORVID_LIBNVRTC, else the sonames of
 * CUDA 13, 12 and 11.2+ on the search path and under $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64. */
int cv_cuda_nvrtc_open(const char *path, cv_cuda_nvrtc *n, cv_err *err);
void cv_cuda_driver_close(cv_cuda_driver *d);
void cv_cuda_nvrtc_close(cv_cuda_nvrtc *n);
/* "CUDA_ERROR_OUT_OF_MEMORY (2)", or "CUDA error 2" when the driver cannot
 * name it. */
const char *cv_cuda_result_name(const cv_cuda_driver *d, cu_result r, char *buf, size_t n);

/* ---- the kernel sources (generated: cuda_sources.c) ---- */

typedef struct cv_cuda_source {
    const char *name; /* "mm.cu", "common.cuh" */
    const char *text; /* NUL-terminated */
    size_t len;
} cv_cuda_source;
extern const cv_cuda_source cv_cuda_sources[];
extern const int cv_cuda_n_sources;

/* ---- compiling them (cuda_rtc.c) ---- */

/* What NVRTC is asked for: a cubin for sm (the device's own architecture,
 * when NVRTC knows it), else PTX for the newest architecture it knows
 * below the device, which the driver compiles when it loads it. */
typedef struct cv_cuda_target {
    int sm;    /* 90 for sm_90 */
    bool ptx;
} cv_cuda_target;

/* The target for a device of compute capability sm: CV_EUNSUPPORTED when
 * sm is below CV_CUDA_MIN_SM or below every architecture this NVRTC
 * compiles for (saying which NVRTC would). */
int cv_cuda_target_for(const cv_cuda_nvrtc *n, int sm, cv_cuda_target *out, cv_err *err);

/* The cache key of a program: SHA-256 (hex) over the format version, the
 * NVRTC version, the target, the options and the text of the source and
 * of every header in the table (a program may include any of them). */
void cv_cuda_rtc_key(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *source, const char *defines,
                     char key[65]);
/* The same over another table of sources (tests: a key must change with
 * any text it covers). */
void cv_cuda_rtc_key_in(const cv_cuda_source *srcs, int n_srcs, const cv_cuda_nvrtc *n, const cv_cuda_target *t,
                        const char *source, const char *defines, char key[65]);
/* Compiles source (a .cu of the table) with defines ("-DCV_WTYPE=12", or
 * "") for t into image: a cubin, or NUL-terminated PTX. CV_EINVAL for a
 * name not in the table, CV_EUNSUPPORTED with NVRTC's log when it fails. */
int cv_cuda_rtc_compile(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *source, const char *defines,
                        cv_buf *image, cv_err *err);
/* The same through the disk cache under dir (NULL or "": no cache): a file
 * named by source, target and key is read if present, else compiled and
 * written (atomically; other files of the same source and target, older
 * keys, are removed). *hit says which. A cache that cannot be written is
 * warned about and the image still returned. */
int cv_cuda_rtc_get(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *dir, const char *source,
                    const char *defines, cv_buf *image, bool *hit, cv_err *err);

#endif
