/* cuda_lib.c — finding the CUDA driver and NVRTC at run time. Each is
 * dlopen'ed by name (or by the path a user or test gives), every function
 * corvid calls is looked up, and a failure says exactly what was missing:
 * the library with dlopen's reason and where it was looked for, or the
 * first function it lacks. Nothing of CUDA is linked, so the binary runs
 * (on the CPU) where none of it exists. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_int.h"

/* Resolves every X(...) of a list into the struct at p, or names the first
 * symbol missing. */
#define CV_RESOLVE(member, sym, ret, params)                                             \
    if (!(p->member = (ret(*) params)dlsym(p->handle, sym))) {                           \
        missing = sym;                                                                   \
        goto missing;                                                                    \
    }

int cv_cuda_driver_open(const char *path, cv_cuda_driver *p, cv_err *err)
{
    memset(p, 0, sizeof *p);
    const char *env = getenv("CORVID_LIBCUDA");
    if (!path)
        path = env && *env ? env : "libcuda.so.1";
    snprintf(p->path, sizeof p->path, "%s", path);
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "no NVIDIA driver: %s cannot be opened (%s); install the NVIDIA driver, or set "
                          "CORVID_LIBCUDA to its libcuda.so.1",
                          path, dlerror());
    const char *missing;
    CV_CUDA_DRIVER_FNS(CV_RESOLVE)
    char name[64];
    cu_result r = p->cuInit(0);
    if (r != CU_SUCCESS) {
        int rc;
        if (r == CU_ERROR_STUB_LIBRARY)
            rc = cv_err_set(err, CV_EUNSUPPORTED,
                            "%s is the CUDA toolkit's stub library, not a driver (cuInit: %s); install the NVIDIA "
                            "driver, or point CORVID_LIBCUDA at its libcuda.so.1",
                            path, cv_cuda_result_name(p, r, name, sizeof name));
        else if (r == CU_ERROR_NO_DEVICE)
            rc = cv_err_set(err, CV_EUNSUPPORTED, "no CUDA device: the driver (%s) sees no NVIDIA GPU (cuInit: %s)",
                            path, cv_cuda_result_name(p, r, name, sizeof name));
        else if (r == CU_ERROR_INSUFFICIENT_DRIVER || r == CU_ERROR_SYSTEM_DRIVER_MISMATCH)
            rc = cv_err_set(err, CV_EUNSUPPORTED,
                            "the NVIDIA driver does not match its library %s (cuInit: %s): the kernel module and "
                            "libcuda.so.1 are of different versions; reboot after a driver update, or reinstall it",
                            path, cv_cuda_result_name(p, r, name, sizeof name));
        else
            rc = cv_err_set(err, CV_EUNSUPPORTED, "the NVIDIA driver (%s) failed to start: cuInit: %s", path,
                            cv_cuda_result_name(p, r, name, sizeof name));
        cv_cuda_driver_close(p);
        return rc;
    }
    if ((r = p->cuDriverGetVersion(&p->version)) != CU_SUCCESS)
        p->version = 0;
    return 0;
missing:;
    int rc = cv_err_set(err, CV_EUNSUPPORTED,
                        "the NVIDIA driver library %s lacks %s, which corvid calls (a driver older than CUDA 11, or "
                        "not a driver)",
                        path, missing);
    cv_cuda_driver_close(p);
    return rc;
}

/* Where NVRTC may be: its sonames of CUDA 13, 12 and 11.2+ (ABI-stable
 * within a major version) on the loader's path, then where the toolkit
 * installs itself when not registered with ldconfig. */
static const char *const nvrtc_names[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so" };

static void *nvrtc_dlopen(cv_cuda_nvrtc *p, cv_buf *tried)
{
    const char *home = getenv("CUDA_HOME");
    const char *dirs[] = { NULL, home && *home ? home : NULL, "/usr/local/cuda" };
    for (size_t d = 0; d < CV_ARRAY_LEN(dirs); d++) {
        if (d > 0 && !dirs[d])
            continue;
        for (size_t i = 0; i < CV_ARRAY_LEN(nvrtc_names); i++) {
            if (d == 0)
                snprintf(p->path, sizeof p->path, "%s", nvrtc_names[i]);
            else
                snprintf(p->path, sizeof p->path, "%s/lib64/%s", dirs[d], nvrtc_names[i]);
            void *h = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
            if (h)
                return h;
            cv_buf_printf(tried, "%s%s", tried->len ? ", " : "", p->path);
        }
    }
    return NULL;
}

int cv_cuda_nvrtc_open(const char *path, cv_cuda_nvrtc *p, cv_err *err)
{
    memset(p, 0, sizeof *p);
    const char *env = getenv("CORVID_LIBNVRTC");
    if (!path && env && *env)
        path = env;
    if (path) {
        snprintf(p->path, sizeof p->path, "%s", path);
        if (!(p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
            return cv_err_set(err, CV_EUNSUPPORTED, "no NVRTC: %s cannot be opened (%s)", path, dlerror());
    } else {
        cv_buf tried = { 0 };
        p->handle = nvrtc_dlopen(p, &tried);
        if (!p->handle) {
            int rc = cv_err_set(err, CV_EUNSUPPORTED,
                                "no NVRTC (the CUDA run-time compiler corvid builds its kernels with): tried %s; "
                                "install the CUDA toolkit's NVRTC (Debian: nvidia-cuda-toolkit; NVIDIA's "
                                "cuda-nvrtc package), or set CORVID_LIBNVRTC to its libnvrtc.so",
                                tried.data);
            cv_buf_free(&tried);
            return rc;
        }
        cv_buf_free(&tried);
    }
    const char *missing;
    CV_NVRTC_FNS(CV_RESOLVE)
    if (p->nvrtcVersion(&p->major, &p->minor) != 0 || p->nvrtcGetNumSupportedArchs(&p->n_archs) != 0 ||
        p->n_archs < 1 || p->n_archs > (int)CV_ARRAY_LEN(p->archs) || p->nvrtcGetSupportedArchs(p->archs) != 0) {
        int rc = cv_err_set(err, CV_EUNSUPPORTED, "NVRTC at %s does not say which architectures it compiles for",
                            p->path);
        cv_cuda_nvrtc_close(p);
        return rc;
    }
    return 0;
missing:;
    int rc = cv_err_set(err, CV_EUNSUPPORTED,
                        "NVRTC at %s lacks %s, which corvid calls (NVRTC of CUDA 11.2 or newer is needed)", p->path,
                        missing);
    cv_cuda_nvrtc_close(p);
    return rc;
}

void cv_cuda_driver_close(cv_cuda_driver *p)
{
    if (p->handle)
        dlclose(p->handle);
    p->handle = NULL;
}

void cv_cuda_nvrtc_close(cv_cuda_nvrtc *p)
{
    if (p->handle)
        dlclose(p->handle);
    p->handle = NULL;
}

const char *cv_cuda_result_name(const cv_cuda_driver *p, cu_result r, char *buf, size_t n)
{
    const char *name = NULL;
    if (p->cuGetErrorName && p->cuGetErrorName(r, &name) == CU_SUCCESS && name)
        snprintf(buf, n, "%s (%d)", name, r);
    else
        snprintf(buf, n, "CUDA error %d", r);
    return buf;
}
