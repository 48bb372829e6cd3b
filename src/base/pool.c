/* pool.c — the persistent compute pool. One run = the caller and nth-1
 * workers each call fn(ctx, ith, nth) once. A run is published by bumping
 * `gen`; workers spin on it for a short while (decode issues a run every few
 * microseconds) and then sleep on a futex so an idle server costs no CPU.
 * Completion is an atomic countdown the caller spins on, then yields: the
 * caller does its own share first, so by the time it waits the others are
 * nearly done.
 * Invariant: at most one run in flight per pool (the engine thread owns it). */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

#define SPIN_ITERS 20000 /* ~50-100 µs of pause loops before sleeping */

typedef struct worker {
    cv_pool *pool;
    int ith;
    pthread_t tid;
} worker;

struct cv_pool {
    int nth;
    worker *workers;
    _Alignas(64) _Atomic uint32_t gen;      /* bumped once per run; futex word */
    _Alignas(64) _Atomic int pending;       /* workers still running this run */
    _Atomic int sleepers;                   /* workers blocked in futex_wait */
    _Atomic bool quit;
    cv_pool_fn fn;
    void *ctx;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

static void *worker_main(void *arg)
{
    worker *w = arg;
    cv_pool *p = w->pool;
    /* Not a load of gen: a worker that starts after the first run was
     * published must still see that run as new. */
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            futex(&p->gen, FUTEX_WAIT_PRIVATE, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load(&p->quit))
            return NULL;
        p->fn(p->ctx, w->ith, p->nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

cv_pool *cv_pool_create(int n_threads, cv_err *err)
{
    if (n_threads < 1 || n_threads > 1024) {
        cv_err_set(err, CV_EINVAL, "thread count %d out of range 1..1024", n_threads);
        return NULL;
    }
    cv_pool *p = cv_aligned_alloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->nth = n_threads;
    p->workers = cv_xcalloc((size_t)n_threads, sizeof(worker));
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            /* Shrink to the threads we got; still correct, just slower. */
            cv_warn("thread pool: could only start %d of %d threads", i, n_threads);
            p->nth = i;
            break;
        }
    }
    return p;
}

void cv_pool_destroy(cv_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->quit, true);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    futex(&p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
    for (int i = 1; i < p->nth; i++)
        pthread_join(p->workers[i].tid, NULL);
    free(p->workers);
    cv_aligned_free(p);
}

int cv_pool_size(const cv_pool *p) { return p ? p->nth : 1; }

void cv_pool_run(cv_pool *p, cv_pool_fn fn, void *ctx)
{
    if (!p || p->nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->nth - 1, memory_order_relaxed);
    /* seq_cst: the sleepers load must not move above the bump, or a worker
     * that has just decided to sleep could miss this run's wake-up. */
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0)
        futex(&p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
    fn(ctx, 0, p->nth);
    /* Spin first (the others are nearly done), then yield: when the machine
     * has more runnable threads than cores, a worker may be waiting for
     * this very core, and spinning would hold it for a whole time slice. */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0;)
        if (++spins < SPIN_ITERS)
            cpu_relax();
        else
            sched_yield();
}

int cv_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

void cv_split_range(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi)
{
    if (align < 1) align = 1;
    int64_t units = (n + align - 1) / align;
    int64_t per = units / nth, extra = units % nth;
    int64_t u0 = ith * per + CV_MIN((int64_t)ith, extra);
    int64_t u1 = u0 + per + (ith < extra ? 1 : 0);
    *lo = CV_MIN(u0 * align, n);
    *hi = CV_MIN(u1 * align, n);
}
