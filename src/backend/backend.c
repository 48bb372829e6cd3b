/* backend.c — finding a backend by name: the CPU backend, and the CUDA
 * one, which needs a driver, NVRTC and a GPU at run time; a missing one is
 * a clear error (cv_cuda_open says what is missing) and the CPU stays the
 * fallback. */
#include "backend/backend.h"
#include "backend/cuda/cuda.h"

int cv_backend_open(const char *name, cv_backend **out, cv_err *err)
{
    *out = NULL;
    if (!strcmp(name, "cpu")) {
        *out = cv_backend_cpu();
        return 0;
    }
    if (!strncmp(name, "cuda", 4)) {
        int ordinal;
        int rc = cv_cuda_parse_device(name, &ordinal, err);
        return rc ? rc : cv_cuda_open(ordinal, out, err);
    }
    return cv_err_set(err, CV_EUNSUPPORTED, "backend '%s': not one corvid has (it has: cpu, cuda[:N])", name);
}

const char *cv_backend_name(const cv_backend *be) { return be->ops->name; }
