/* fake_cuda.c — a stand-in for libcuda.so.1 that the CUDA backend's host
 * tests load through CORVID_LIBCUDA: the driver functions corvid calls,
 * with "device memory" in host RAM and launches that only count, so the
 * loader's errors, the device checks, the weight uploads, out-of-memory and
 * failed launches are exercised on a machine without a GPU.
 *
 * A test may ask it to keep the start of each launch's first parameter
 * (fake_cuda_keep), to see what a kernel would be given.
 *
 * $FAKE_CUDA_MODE picks what it plays: ok (one sm_90 device, the default),
 * stub (the toolkit's stub: cuInit 34), nodev (cuInit 100), zero (no device
 * counted), old (one sm_50 device), launchfail (launches fail with 719).
 * $FAKE_CUDA_MEM caps its memory (bytes; default 1 GiB), $FAKE_CUDA_DRIVER
 * is the CUDA version it reports (1000 major + 10 minor; default 13000). Built twice: as
 * is, and with -DFAKE_NO_LAUNCH, a library that lacks cuLaunchKernel. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result;
typedef unsigned long long cu_dptr;

static const char *mode(void)
{
    const char *m = getenv("FAKE_CUDA_MODE");
    return m ? m : "ok";
}

static size_t mem_cap(void)
{
    const char *m = getenv("FAKE_CUDA_MEM");
    return m ? (size_t)strtoull(m, NULL, 10) : (size_t)1 << 30;
}

static size_t used;
static int launches;
static unsigned char kept[256]; /* the first bytes of the last launch's first parameter */
static size_t keep_n;

cu_result cuInit(unsigned flags)
{
    (void)flags;
    if (!strcmp(mode(), "stub"))
        return 34;
    if (!strcmp(mode(), "nodev"))
        return 100;
    return 0;
}
cu_result cuDriverGetVersion(int *v)
{
    const char *e = getenv("FAKE_CUDA_DRIVER");
    *v = e ? atoi(e) : 13000;
    return 0;
}
cu_result cuDeviceGetCount(int *n) { *n = strcmp(mode(), "zero") ? 1 : 0; return 0; }
cu_result cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return ordinal == 0 ? 0 : 101; }
cu_result cuDeviceGetName(char *name, int len, int dev)
{
    (void)dev;
    snprintf(name, (size_t)len, "Fake GPU");
    return 0;
}
cu_result cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    const int old = !strcmp(mode(), "old");
    *v = attr == 75 ? (old ? 5 : 9) : attr == 76 ? 0 : attr == 16 ? 132 : 0;
    return 0;
}
cu_result cuDeviceTotalMem_v2(size_t *b, int dev) { (void)dev; *b = mem_cap(); return 0; }
cu_result cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = (void *)0x1; return 0; }
cu_result cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
cu_result cuCtxSynchronize(void) { return 0; }
cu_result cuMemGetInfo_v2(size_t *f, size_t *t)
{
    *t = mem_cap();
    *f = mem_cap() - used;
    return 0;
}
/* Blocks carry their size in front, so cuMemFree can give it back. */
cu_result cuMemAlloc_v2(cu_dptr *p, size_t n)
{
    if (used + n > mem_cap())
        return 2;
    size_t *b = malloc(n + 16);
    if (!b)
        return 2;
    b[0] = n;
    used += n;
    *p = (cu_dptr)(uintptr_t)(b + 2);
    return 0;
}
cu_result cuMemFree_v2(cu_dptr p)
{
    size_t *b = (size_t *)(uintptr_t)p - 2;
    used -= b[0];
    free(b);
    return 0;
}
cu_result cuMemcpyHtoD_v2(cu_dptr dst, const void *src, size_t n) { memcpy((void *)(uintptr_t)dst, src, n); return 0; }
cu_result cuMemcpyDtoH_v2(void *dst, cu_dptr src, size_t n) { memcpy(dst, (const void *)(uintptr_t)src, n); return 0; }
cu_result cuMemcpyDtoD_v2(cu_dptr dst, cu_dptr src, size_t n)
{
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}
cu_result cuMemcpyHtoDAsync_v2(cu_dptr dst, const void *src, size_t n, void *s)
{
    (void)s;
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
/* A module keeps a copy of its image, which must be a cubin (a 64-bit ELF:
 * its size from the section headers at its end) or PTX text, so that
 * cuModuleGetFunction can refuse a kernel the image does not hold. */
typedef struct fake_module {
    size_t len;
    char image[];
} fake_module;

cu_result cuModuleLoadData(void **mod, const void *image)
{
    const unsigned char *c = image;
    size_t len;
    if (!memcmp(c, "\x7f" "ELF", 4) && c[4] == 2) {
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, c + 0x28, 8);
        memcpy(&shentsize, c + 0x3A, 2);
        memcpy(&shnum, c + 0x3C, 2);
        len = (size_t)shoff + (size_t)shentsize * shnum;
    } else if (strstr((const char *)c, ".version")) {
        len = strlen((const char *)c);
    } else {
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    }
    fake_module *m = malloc(sizeof *m + len + 1);
    m->len = len;
    memcpy(m->image, image, len);
    m->image[len] = 0;
    *mod = m;
    return 0;
}
cu_result cuModuleGetFunction(void **f, void *mod, const char *name)
{
    const fake_module *m = mod;
    if (strstr(m->image, "// fake-nvrtc: every cv_ entry") && !strncmp(name, "cv_", 3)) {
        *f = (void *)name;
        return 0;
    }
    const size_t n = strlen(name) + 1; /* the name as a whole string of the image */
    for (size_t i = 0; i + n <= m->len; i++) {
        const char *c = m->image + i;
        /* a cubin's string table, or PTX's ".entry name(" */
        if (!memcmp(c, name, n) || (c[0] == ' ' && !memcmp(c + 1, name, n - 1) && c[n] == '(')) {
            *f = (void *)name;
            return 0;
        }
    }
    return 500; /* CUDA_ERROR_NOT_FOUND */
}
#ifndef FAKE_NO_LAUNCH
cu_result cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, void *s, void **params, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s, (void)params,
        (void)extra;
    if (!strcmp(mode(), "launchfail"))
        return 719;
    launches++;
    if (keep_n && params)
        memcpy(kept, params[0], keep_n);
    return 0;
}
#endif
cu_result cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = (void *)0x2; return 0; }
cu_result cuStreamDestroy_v2(void *s) { (void)s; return 0; }
cu_result cuStreamSynchronize(void *s) { (void)s; return 0; }
cu_result cuGetErrorName(cu_result r, const char **name)
{
    *name = r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : r == 34 ? "CUDA_ERROR_STUB_LIBRARY"
          : r == 100 ? "CUDA_ERROR_NO_DEVICE" : r == 500 ? "CUDA_ERROR_NOT_FOUND"
          : r == 719 ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

/* For the tests: launches so far. */
int fake_cuda_launches(void) { return launches; }
/* From now on each launch keeps the first n (<= 256) bytes of its first
 * parameter (a kernel's argument struct), which fake_cuda_kept returns. */
void fake_cuda_keep(size_t n) { keep_n = n < sizeof kept ? n : sizeof kept; }
const void *fake_cuda_kept(void) { return kept; }
