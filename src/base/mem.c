/* mem.c — allocation wrappers: abort-on-OOM forms for sizes corvid chose
 * itself, and 64-byte aligned blocks for kernels (their pages committed
 * at once where a caller asks). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"

static void oom(size_t n)
{
    fprintf(stderr, "corvid: out of memory allocating %zu bytes\n", n);
    abort();
}

void *cv_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *cv_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *cv_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *cv_xstrdup(const char *s) { return cv_xstrndup(s, strlen(s)); }

char *cv_xstrndup(const char *s, size_t n)
{
    char *d = cv_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void *cv_aligned_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? (n + 63) & ~(size_t)63 : 64) != 0) oom(n);
    return p;
}

void cv_pages_commit(void *p, size_t n)
{
    if (n == 0)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)p & ~(page - 1),
                    hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    /* Every page [p, p + n) touches, its ends included (the kernel fills a
     * page's table entry leaving its bytes as they are); without Linux
     * 5.14's MADV_POPULATE_WRITE, a zero written into each page (inside
     * [p, p + n), so neighbours keep theirs) does it, a fault each. */
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0)
        for (uintptr_t a = lo; a < hi; a += page)
            *(volatile char *)CV_MAX(a, (uintptr_t)p) = 0;
}

void *cv_aligned_alloc_committed(size_t n)
{
    char *p = cv_aligned_alloc(n);
    cv_pages_commit(p, n);
    return p;
}

void cv_aligned_free(void *p) { free(p); }
