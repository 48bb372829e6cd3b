/* backend.c — finding a backend by name. Only the CPU backend exists so
 * far; a device backend registers here with what it needs at run time, so
 * that a missing one is a clear error and the CPU stays the fallback. */
#include "backend/backend.h"

int cv_backend_open(const char *name, cv_backend **out, cv_err *err)
{
    *out = NULL;
    if (!strcmp(name, "cpu")) {
        *out = cv_backend_cpu();
        return 0;
    }
    return cv_err_set(err, CV_EUNSUPPORTED, "backend '%s': not one corvid has (it has: cpu)", name);
}

const char *cv_backend_name(const cv_backend *be) { return be->ops->name; }
