/* log.c — the process-wide logger: one line per call on stderr, prefixed by
 * the monotonic time and the level. The only mutable global in corvid; the
 * level is read from $CORVID_LOG on first use. Lines are written with one
 * write() so concurrent threads do not interleave within a line. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"

static _Atomic int g_level = -1;

static cv_log_level level_from_env(void)
{
    const char *e = getenv("CORVID_LOG");
    if (!e) return CV_LOG_INFO;
    if (!strcmp(e, "debug")) return CV_LOG_DEBUG;
    if (!strcmp(e, "warn")) return CV_LOG_WARN;
    if (!strcmp(e, "error")) return CV_LOG_ERROR;
    if (!strcmp(e, "off")) return CV_LOG_OFF;
    return CV_LOG_INFO;
}

void cv_log_set_level(cv_log_level level) { atomic_store(&g_level, (int)level); }

cv_log_level cv_log_get_level(void)
{
    int l = atomic_load(&g_level);
    if (l < 0) {
        l = (int)level_from_env();
        atomic_store(&g_level, l);
    }
    return (cv_log_level)l;
}

void cv_log(cv_log_level level, const char *fmt, ...)
{
    if (level < cv_log_get_level())
        return;
    static const char *names[] = { "debug", "info", "warn", "error" };
    char line[2048];
    int n = snprintf(line, sizeof line, "[%9.3f] %-5s ", cv_now_s(), names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : CV_MIN((size_t)m, sizeof line - (size_t)n - 2));
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}
