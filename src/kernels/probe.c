/* probe.c — the machine ceilings corvid measures itself against: read
 * bandwidth (what a decode step's matvec can at best stream its weights at)
 * and the int8 multiply-add peak (what prefill and batched decode can at
 * best compute at), the latter per ISA level (each level's tiles multiply
 * with their own instruction). Each runs its inner loop on every thread of
 * the pool at once, repeats, and reports the median and the best repeat.
 * The inner loops live in probe_avx2.c, probe_avxvnni.c and
 * probe_avx512.c; without AVX2 the bandwidth probe reads with plain 64-bit
 * loads and the int8 probes report CV_EUNSUPPORTED. */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/kernels_int.h"

#define READ_BYTES (256u << 20)  /* >> any LLC; also 4 KiB-page aligned shares */
#define READ_REPEATS 9
#define INT8_MACS 1024000000.0   /* multiply-adds per thread per repeat (~10 ms of vpmaddubsw) */
#define INT8_REPEATS 9

/* The int8 loops: what each iteration multiplies, and how. */
typedef enum int8_loop { LOOP_NONE, LOOP_AVX2, LOOP_AVX2_I32, LOOP_VNNI256, LOOP_VNNI512 } int8_loop;
static const struct {
    uint64_t (*fn)(int64_t iters);
    double macs; /* per iteration */
} loops[] = {
    [LOOP_AVX2] = { cv_probe_int8_avx2, 8 * 32 },
    [LOOP_AVX2_I32] = { cv_probe_int8_i32_avx2, 8 * 32 },
    [LOOP_VNNI256] = { cv_probe_int8_vnni_avxvnni, 12 * 32 },
    [LOOP_VNNI512] = { cv_probe_int8_vnni_avx512, 12 * 64 },
};

static uint64_t read_scalar(const void *p, size_t n)
{
    const uint64_t *q = p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        s0 += q[i];
        s1 += q[i + 1];
        s2 += q[i + 2];
        s3 += q[i + 3];
    }
    return s0 ^ s1 ^ s2 ^ s3;
}

typedef struct probe_ctx {
    const uint8_t *buf;
    size_t bytes;
    bool avx2;
    int8_loop int8; /* LOOP_NONE: bandwidth */
    _Atomic uint64_t sink; /* keeps the loads from being optimised away */
} probe_ctx;

static void probe_job(void *vctx, int ith, int nth)
{
    probe_ctx *c = vctx;
    uint64_t r;
    if (c->int8) {
        r = loops[c->int8].fn((int64_t)(INT8_MACS / loops[c->int8].macs));
    } else {
        int64_t lo, hi;
        cv_split_range((int64_t)c->bytes, ith, nth, 4096, &lo, &hi);
        r = c->avx2 ? cv_probe_read_avx2(c->buf + lo, (size_t)(hi - lo)) : read_scalar(c->buf + lo, (size_t)(hi - lo));
    }
    atomic_fetch_xor(&c->sink, r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_repeats(cv_pool *pool, probe_ctx *c, int n, double work, cv_probe_result *out)
{
    double rate[16], crate[16];
    cv_pool_run(pool, probe_job, c); /* warm-up: page faults, clocks, wake-ups */
    for (int i = 0; i < n; i++) {
        double t0 = cv_now_s(), c0 = thread_cpu_s();
        cv_pool_run(pool, probe_job, c);
        double dt = cv_now_s() - t0, dc = thread_cpu_s() - c0;
        rate[i] = work / (dt > 0 ? dt : 1e-9);
        crate[i] = work / (dc > 0 ? dc : 1e-9);
    }
    qsort(rate, (size_t)n, sizeof rate[0], cmp_double);
    qsort(crate, (size_t)n, sizeof crate[0], cmp_double);
    out->value = rate[n / 2];
    out->best = rate[n - 1];
    out->cpu_value = crate[n / 2];
    out->n_repeats = n;
    out->n_threads = cv_pool_size(pool);
}

int cv_probe_read_bandwidth(cv_pool *pool, cv_probe_result *out, cv_err *err)
{
    memset(out, 0, sizeof *out);
    /* Transparent huge pages, as the prepared weights get (matmul.c): the
     * ceiling is the best stream the machine gives, not one slowed by a
     * TLB walk every 4 KiB. */
    uint8_t *buf = aligned_alloc((size_t)2 << 20, READ_BYTES);
    if (!buf)
        return cv_err_set(err, CV_ENOMEM, "read bandwidth probe: no memory for a %u MiB buffer", READ_BYTES >> 20);
    madvise(buf, READ_BYTES, MADV_HUGEPAGE);
    /* Distinct values so no page is a shared zero page. */
    for (size_t i = 0; i < READ_BYTES; i += 64)
        buf[i] = (uint8_t)i;
    probe_ctx c = { .buf = buf, .bytes = READ_BYTES, .avx2 = cv_isa_supported(CV_ISA_AVX2) };
    run_repeats(pool, &c, READ_REPEATS, (double)READ_BYTES, out);
    out->value /= 1e9;
    out->best /= 1e9;
    out->cpu_value /= 1e9;
    out->work = READ_BYTES;
    free(buf);
    return 0;
}

static int run_int8(cv_pool *pool, int8_loop loop, cv_probe_result *out)
{
    probe_ctx c = { .int8 = loop };
    const double iters = (double)(int64_t)(INT8_MACS / loops[loop].macs);
    const double macs = iters * loops[loop].macs * cv_pool_size(pool);
    run_repeats(pool, &c, INT8_REPEATS, macs, out);
    out->work = (size_t)macs;
    return 0;
}

int cv_probe_int8_peak(cv_pool *pool, cv_isa isa, cv_probe_result *out, cv_err *err)
{
    memset(out, 0, sizeof *out);
    if (isa == CV_ISA_SCALAR || !cv_isa_supported(isa))
        return cv_err_set(err, CV_EUNSUPPORTED, "int8 peak probe of %s: %s", cv_isa_name(isa),
                          isa == CV_ISA_SCALAR ? "the scalar level has no int8 instruction"
                                               : cv_isa_missing(isa));
    const int8_loop loop = isa == CV_ISA_AVX512 ? LOOP_VNNI512 : isa == CV_ISA_AVX_VNNI ? LOOP_VNNI256 : LOOP_AVX2;
    return run_int8(pool, loop, out);
}

const char *cv_probe_int8_what(cv_isa isa)
{
    return isa == CV_ISA_AVX512 ? "512-bit vpdpbusd" : isa == CV_ISA_AVX_VNNI ? "256-bit vpdpbusd"
                                                                              : "vpmaddubsw+vpaddw";
}

int cv_probe_int8_peak_i32(cv_pool *pool, cv_probe_result *out, cv_err *err)
{
    memset(out, 0, sizeof *out);
    if (!cv_isa_supported(CV_ISA_AVX2))
        return cv_err_set(err, CV_EUNSUPPORTED, "int8 i32 probe: this CPU has no AVX2");
    return run_int8(pool, LOOP_AVX2_I32, out);
}
