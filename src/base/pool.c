/* pool.c — the persistent compute pool. One run = the caller and nth-1
 * workers each call fn(ctx, ith, nth) once. A run is published by bumping
 * `gen`, whose low bits carry the run's thread count; workers spin on it
 * for a short while (decode issues a run every few microseconds) and then
 * sleep on a futex so an idle server costs no CPU. Completion is an atomic
 * countdown the caller spins on, then yields: the caller does its own share
 * first, so by the time it waits the others are nearly done.
 * A run may use fewer threads than the pool has (cv_pool_set_threads: the
 * engines of several models share the machine's cores): the workers past
 * its count sleep on a second futex word until a run needs them again
 * (sit_out), so runs they have no part in neither wake them nor wait for
 * them. The count travels in gen itself, so a worker that sat out one run
 * and is still looking when the next is published never reads the next
 * run's count as the one it woke for.
 * A part belongs to whoever takes it first: each worker's slot holds the
 * number of the run whose part it has not taken yet, and a worker takes it
 * by swapping that number for 0. The caller, its own part done, takes every
 * part still untaken and computes it itself. A part is a function of
 * (ith, nth) alone, so its bits are the same on any thread; and a run never
 * waits for a worker the OS has not scheduled yet (on a host with more
 * runnable threads than cores, a descheduled worker held every run of its
 * pool for a time slice: docs/PERF.md "Several models in one server").
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
#define RUN_BITS 11       /* gen's low bits: the run's threads (<= 1024) */
#define RUN_MASK ((1u << RUN_BITS) - 1)

typedef struct worker {
    cv_pool *pool;
    int ith;
    pthread_t tid;
    _Alignas(64) _Atomic uint64_t part; /* the run whose part ith nobody has taken yet; 0: none */
} worker;

struct cv_pool {
    int nth;                                /* threads created, the caller included */
    int n_run;                              /* threads the next run uses: 1..nth (the caller's) */
    int last_n;                             /* threads the last published run used (the caller's) */
    worker *workers;
    _Alignas(64) _Atomic uint32_t gen;      /* futex word: a count bumped once per run above RUN_BITS,
                                             * that run's threads below */
    _Alignas(64) _Atomic int pending;       /* workers still running this run */
    _Atomic int sleepers;                   /* workers blocked in futex_wait on gen */
    _Alignas(64) _Atomic uint32_t resize;   /* futex word of workers that runs leave out: bumped when a
                                             * run uses more threads than the one before */
    _Atomic int idlers;                     /* workers blocked on resize */
    _Atomic bool quit;
    _Atomic uint64_t run;                   /* the published run's number (1, 2, ...) */
    uint64_t n_runs;                        /* runs published (the caller's) */
    int run_n;                              /* threads of the published run */
    cv_pool_fn fn;
    void *ctx;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

/* A worker that run g leaves out waits on resize, not gen, so runs it has
 * no part in do not wake it. Returns the first run that needs it (a run
 * that needs it cannot finish without it, so it is the newest), or 0 to
 * quit. The caller bumps resize after publishing a run that uses more
 * threads than the last; reading resize before gen means a worker that
 * read the older gen sleeps on a stale resize and returns at once. */
static uint32_t sit_out(cv_pool *p, int ith, uint32_t seen)
{
    for (;;) {
        const uint32_t r = atomic_load(&p->resize);
        const uint32_t g = atomic_load(&p->gen);
        if (atomic_load(&p->quit))
            return 0;
        if (g != seen && (int)(g & RUN_MASK) > ith)
            return g;
        atomic_fetch_add(&p->idlers, 1);
        futex(&p->resize, FUTEX_WAIT_PRIVATE, r);
        atomic_fetch_sub(&p->idlers, 1);
    }
}

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
        if ((int)(g & RUN_MASK) <= w->ith && !(seen = g = sit_out(p, w->ith, g)))
            return NULL;
        /* The newest run, which may be newer than g; its fields were
         * written before its number. A part the caller took, or of a run
         * that leaves this worker out, fails the swap: look again. */
        uint64_t r = atomic_load_explicit(&p->run, memory_order_acquire);
        if (!atomic_compare_exchange_strong_explicit(&w->part, &r, 0, memory_order_acquire, memory_order_relaxed))
            continue;
        p->fn(p->ctx, w->ith, p->run_n);
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
    p->nth = p->n_run = p->last_n = n_threads;
    p->workers = cv_aligned_alloc((size_t)n_threads * sizeof(worker));
    memset(p->workers, 0, (size_t)n_threads * sizeof(worker));
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            /* Shrink to the threads we got; still correct, just slower. */
            cv_warn("thread pool: could only start %d of %d threads", i, n_threads);
            p->nth = p->n_run = p->last_n = i;
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
    atomic_fetch_add_explicit(&p->gen, 1u << RUN_BITS, memory_order_release);
    futex(&p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
    atomic_fetch_add(&p->resize, 1);
    futex(&p->resize, FUTEX_WAKE_PRIVATE, INT32_MAX);
    for (int i = 1; i < p->nth; i++)
        pthread_join(p->workers[i].tid, NULL);
    cv_aligned_free(p->workers);
    cv_aligned_free(p);
}

int cv_pool_size(const cv_pool *p) { return p ? p->n_run : 1; }

void cv_pool_set_threads(cv_pool *p, int n)
{
    if (p)
        p->n_run = CV_MAX(1, CV_MIN(n, p->nth));
}

void cv_pool_run(cv_pool *p, cv_pool_fn fn, void *ctx)
{
    if (!p || p->n_run == 1) {
        fn(ctx, 0, 1);
        return;
    }
    const int n = p->n_run;
    const uint64_t run = ++p->n_runs;
    p->fn = fn;
    p->ctx = ctx;
    p->run_n = n;
    for (int i = 1; i < n; i++)
        atomic_store_explicit(&p->workers[i].part, run, memory_order_relaxed);
    atomic_store_explicit(&p->pending, n - 1, memory_order_relaxed);
    atomic_store_explicit(&p->run, run, memory_order_release);
    /* Only this thread writes gen between create and destroy. seq_cst: the
     * sleepers load must not move above the bump, or a worker that has
     * just decided to sleep could miss this run's wake-up. */
    const uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed);
    atomic_store(&p->gen, (((g >> RUN_BITS) + 1) << RUN_BITS) | (uint32_t)p->n_run);
    if (atomic_load(&p->sleepers) > 0)
        futex(&p->gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
    if (p->n_run > p->last_n) { /* workers the last runs left out are needed again (sit_out) */
        atomic_fetch_add(&p->resize, 1);
        if (atomic_load(&p->idlers) > 0)
            futex(&p->resize, FUTEX_WAKE_PRIVATE, INT32_MAX);
    }
    p->last_n = n;
    fn(ctx, 0, n);
    /* The parts no worker has started: computed here rather than waited for. */
    for (int i = 1; i < n; i++) {
        uint64_t r = run;
        if (atomic_compare_exchange_strong_explicit(&p->workers[i].part, &r, 0, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            fn(ctx, i, n);
            atomic_fetch_sub_explicit(&p->pending, 1, memory_order_relaxed);
        }
    }
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

typedef struct item_run {
    cv_pool_item_fn fn;
    void *ctx;
    int64_t n_items;
    _Atomic int64_t next; /* the first item nobody has taken */
} item_run;

static void item_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    item_run *r = ctx;
    for (;;) {
        const int64_t i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (i >= r->n_items)
            break;
        r->fn(r->ctx, i, ith);
    }
}

void cv_pool_run_items(cv_pool *p, int64_t n_items, cv_pool_item_fn fn, void *ctx)
{
    item_run r = { .fn = fn, .ctx = ctx, .n_items = n_items };
    atomic_init(&r.next, 0);
    if (n_items <= 1 || cv_pool_size(p) == 1)
        item_worker(&r, 0, 1);
    else
        cv_pool_run(p, item_worker, &r);
}
