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

void *cv_aligned_alloc_committed(size_t n)
{
    char *p = cv_aligned_alloc(n);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)p & ~(page - 1),
                    hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    /* Every page the block touches, its ends included (they may be fresh
     * too, and filling a page's table entry leaves what is in it as it
     * is): the kernel fills the page tables (Linux 5.14 and later); else
     * one write into the block a page does it. */
    if (n > 0 && madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0)
        for (uintptr_t a = lo; a < hi; a += page)
            *(volatile char *)CV_MAX(a, (uintptr_t)p) = 0;
    return p;
}

void cv_aligned_free(void *p) { free(p); }
