/* err.c — recording failures in a cv_err: the code, one user-facing sentence
 * and where in the source it was first seen. Messages are truncated, never
 * overflowed. */
#include <stdio.h>

#include "base/base.h"

static void vset(cv_err *err, int code, const char *file, int line, const char *fmt, va_list ap)
{
    err->code = code;
    err->file = file;
    err->line = line;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

int cv_err_set(cv_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vset(err, code, NULL, 0, fmt, ap);
    va_end(ap);
    return code;
}

int cv_err_at(cv_err *err, int code, const char *file, int line, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vset(err, code, file, line, fmt, ap);
    va_end(ap);
    return code;
}

void cv_err_prefix(cv_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char pre[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strlen(pre), no = strlen(old);
    if (np > sizeof err->msg - 1) np = sizeof err->msg - 1;
    if (no > sizeof err->msg - 1 - np) no = sizeof err->msg - 1 - np;
    memcpy(err->msg, pre, np);
    memcpy(err->msg + np, old, no);
    err->msg[np + no] = 0;
}

void cv_err_clear(cv_err *err)
{
    if (!err)
        return;
    err->code = 0;
    err->file = NULL;
    err->line = 0;
    err->msg[0] = 0;
}

const char *cv_err_name(int code)
{
    switch (code) {
    case CV_OK: return "ok";
    case CV_EINVAL: return "invalid input";
    case CV_ECORRUPT: return "corrupt file";
    case CV_ELIMIT: return "limit exceeded";
    case CV_ENOMEM: return "out of memory";
    case CV_EIO: return "i/o error";
    case CV_ECANCELED: return "canceled";
    case CV_EUNSUPPORTED: return "unsupported";
    case CV_ENOTFOUND: return "not found";
    case CV_EBUSY: return "busy";
    }
    return "error";
}
