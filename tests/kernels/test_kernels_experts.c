/* test_kernels_experts.c — the expert-routed matmul against cv_matmul of
 * each route's X row alone with its expert's matrix, bit for bit, for every
 * weight dtype in the table and every ISA this CPU runs: one route; every
 * row to one expert (in one tile chunk, and in more than one); no two rows
 * sharing an expert; tokens with k experts each (src with repeats) leaving
 * experts unused; random routes with repeats in any order; routings large
 * enough for the pooled quantization; each on 1, 2 and 3 threads (one run
 * through strided X and Y). Unused experts are never touched: their
 * weights sit on pages with no access, and their entries are in turn the
 * real matrix, NULL, or a pointer into a page with no access. Also that
 * the workspace reserves its large buffers without taking the memory. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/kernels_int.h"
#include "test.h"

#define N_EXPERT 8
#define N_IN 256
#define N_OUT 37 /* two 16-row groups and a partial one */
#define MAX_ROWS 600

static void fill(float *x, int64_t n, cv_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = cv_rng_normal(r);
        if (cv_rng_below(r, 100) == 0)
            x[i] *= 8;
    }
}

/* ---- experts: each on its own pages, as slices of a mapped expert tensor ---- */

typedef struct experts {
    cv_wmat *w[N_EXPERT];
    uint8_t *mem;      /* N_EXPERT slices of `slice` bytes (GGUF rows, then padding to a page) */
    size_t slice;
} experts;

static bool experts_make(experts *ex, const cv_dtype *dt, cv_isa isa, cv_rng *rng)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), row = (size_t)(N_IN / dt->block_elems) * dt->block_bytes;
    ex->slice = (row * N_OUT + page - 1) / page * page;
    ex->mem = mmap(NULL, ex->slice * N_EXPERT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ex->mem != MAP_FAILED);
    if (ex->mem == MAP_FAILED)
        return false;
    float wf[N_IN];
    bool ok = true;
    for (int e = 0; e < N_EXPERT; e++) {
        uint8_t *we = ex->mem + e * ex->slice;
        for (int o = 0; o < N_OUT; o++) {
            fill(wf, N_IN, rng);
            dt->ops[CV_ISA_SCALAR].from_f32(wf, we + o * row, N_IN);
        }
        cv_err err = { 0 };
        int rc = cv_wmat_create_isa(dt->type, N_IN, N_OUT, we, row * N_OUT, isa, &ex->w[e], &err);
        CHECK_MSG(rc == 0, "%s %s: %s", dt->name, cv_isa_name(isa), err.msg);
        ok = ok && rc == 0;
    }
    return ok;
}

static void experts_free(experts *ex)
{
    for (int e = 0; e < N_EXPERT; e++)
        cv_wmat_destroy(ex->w[e]);
    munmap(ex->mem, ex->slice * N_EXPERT);
}

/* ---- routings ---- */

typedef enum { UNUSED_REAL, UNUSED_NULL, UNUSED_POISON } unused_kind;

typedef struct routing {
    const char *name;
    int64_t n_rows, n_x; /* n_x 0: src NULL */
    int32_t expert[MAX_ROWS], src[MAX_ROWS];
} routing;

/* k distinct experts from `allowed` (a bit set) for each of n_tok tokens. */
static void route_tokens(routing *rt, int64_t n_tok, int k, unsigned allowed, cv_rng *r)
{
    rt->n_x = n_tok;
    rt->n_rows = n_tok * k;
    for (int64_t t = 0; t < n_tok; t++) {
        unsigned taken = 0;
        for (int j = 0; j < k; j++) {
            int32_t e;
            do
                e = (int32_t)cv_rng_below(r, N_EXPERT);
            while (!(allowed >> e & 1) || (taken >> e & 1));
            taken |= 1u << e;
            rt->expert[t * k + j] = e;
            rt->src[t * k + j] = (int32_t)t;
        }
    }
}

static void route_random(routing *rt, int64_t n_rows, int64_t n_x, unsigned allowed, cv_rng *r)
{
    rt->n_rows = n_rows;
    rt->n_x = n_x;
    for (int64_t i = 0; i < n_rows; i++) {
        do
            rt->expert[i] = (int32_t)cv_rng_below(r, N_EXPERT);
        while (!(allowed >> rt->expert[i] & 1));
        rt->src[i] = n_x ? (int32_t)cv_rng_below(r, (uint64_t)n_x) : 0;
    }
}

enum { N_ROUTINGS = 9 };

static void make_routing(routing *rt, int i, cv_rng *r)
{
    memset(rt, 0, sizeof *rt);
    switch (i) {
    case 0:
        rt->name = "one route";
        rt->n_rows = 1;
        rt->expert[0] = 5;
        break;
    case 1:
        rt->name = "every row to one expert";
        route_random(rt, 9, 0, 1u << 3, r);
        break;
    case 2:
        rt->name = "no two rows share an expert";
        rt->n_rows = N_EXPERT;
        for (int e = 0; e < N_EXPERT; e++)
            rt->expert[e] = (e * 5 + 3) % N_EXPERT;
        break;
    case 3:
        rt->name = "5 tokens x 3 experts, 3 unused";
        route_tokens(rt, 5, 3, 0x57, r);
        break;
    case 4:
        rt->name = "random routes over 7 X rows, repeats in any order, 2 unused";
        route_random(rt, 20, 7, 0xBB, r);
        break;
    case 5:
        rt->name = "6 routes to any experts, src NULL";
        route_random(rt, 6, 0, 0xFF, r);
        break;
    case 6:
        rt->name = "pooled quantization, src NULL, 1 unused";
        route_random(rt, 300, 0, 0xFD, r);
        break;
    case 7:
        rt->name = "pooled quantization, every row to one expert (3 tile chunks)";
        route_random(rt, 300, 0, 1u << 6, r);
        break;
    default:
        rt->name = "pooled quantization, 150 tokens x 4 experts";
        route_tokens(rt, 150, 4, 0xFF, r);
        break;
    }
}

/* ---- the check ---- */

/* Runs one routing on pools of 1, 2 and 3 threads (the 2-thread run
 * through strided X and Y) and compares every route's row with cv_matmul
 * of its X row alone. */
static void check_routing(const cv_dtype *dt, cv_isa isa, experts *ex, const routing *rt, unused_kind unused,
                          cv_pool *const *pools, cv_mm_ws *ws, const void *poison, cv_rng *rng)
{
    const int64_t n_rows = rt->n_rows, n_x = rt->n_x ? rt->n_x : n_rows;
    const int32_t *src = rt->n_x ? rt->src : NULL;
    bool used[N_EXPERT] = { false };
    for (int64_t i = 0; i < n_rows; i++)
        used[rt->expert[i]] = true;
    const cv_wmat *w[N_EXPERT];
    for (int e = 0; e < N_EXPERT; e++) {
        w[e] = used[e] || unused == UNUSED_REAL ? ex->w[e] : unused == UNUSED_NULL ? NULL : (const cv_wmat *)poison;
        /* In-place matrices (the scalar path, float weights) would fault on
         * any read of an unused expert's weights. */
        if (!used[e])
            CHECK(mprotect(ex->mem + e * ex->slice, ex->slice, PROT_NONE) == 0);
    }
    enum { LDX = N_IN + 3, LDY = N_OUT + 5 };
    float *ref = malloc((size_t)(n_rows * N_OUT) * sizeof *ref), *x = malloc((size_t)(n_x * N_IN) * sizeof *x);
    float *xs = malloc((size_t)(n_x * LDX) * sizeof *xs), *y = malloc((size_t)(n_rows * LDY) * sizeof *y);
    fill(x, n_x * N_IN, rng);
    for (int64_t i = 0; i < n_x; i++)
        memcpy(xs + i * LDX, x + i * N_IN, N_IN * sizeof *x);
    for (int64_t i = 0; i < n_rows; i++)
        cv_matmul(NULL, ex->w[rt->expert[i]], 1, x + (src ? src[i] : i) * N_IN, ref + i * N_OUT);
    for (int p = 0; p < 3; p++) {
        const bool strided = p == 1;
        const int64_t ldy = strided ? LDY : N_OUT;
        for (int64_t i = 0; i < n_rows * ldy; i++)
            y[i] = NAN; /* every output written, the gaps left alone */
        cv_matmul_experts(pools[p], w, N_EXPERT, n_x, strided ? xs : x, strided ? LDX : N_IN, n_rows, rt->expert, src,
                          y, ldy, ws);
        int64_t bad = -1, gaps = 0;
        for (int64_t i = 0; i < n_rows; i++) {
            if (bad < 0 && memcmp(y + i * ldy, ref + i * N_OUT, N_OUT * sizeof *y))
                bad = i;
            for (int64_t o = N_OUT; o < ldy; o++)
                gaps += !isnan(y[i * ldy + o]);
        }
        CHECK_MSG(bad < 0, "%s %s, %s, %d threads%s: route %lld (expert %d) differs from cv_matmul of its row, "
                  "y[0] %.9g vs %.9g", dt->name, cv_isa_name(isa), rt->name, cv_pool_size(pools[p]),
                  strided ? ", strided" : "", (long long)bad, bad < 0 ? -1 : rt->expert[bad],
                  bad < 0 ? 0.0 : y[bad * ldy], bad < 0 ? 0.0 : ref[bad * N_OUT]);
        CHECK_MSG(gaps == 0, "%s %s, %s: %lld values written between strided rows", dt->name, cv_isa_name(isa),
                  rt->name, (long long)gaps);
    }
    free(x);
    free(xs);
    free(y);
    free(ref);
    for (int e = 0; e < N_EXPERT; e++)
        if (!used[e])
            CHECK(mprotect(ex->mem + e * ex->slice, ex->slice, PROT_READ | PROT_WRITE) == 0);
}

TEST(expert_matmul_equals_cv_matmul_of_each_row_for_every_dtype_isa_and_routing)
{
    cv_pool *pools[3] = { NULL, cv_pool_create(2, NULL), cv_pool_create(3, NULL) };
    cv_mm_ws *ws = cv_mm_ws_create(MAX_ROWS, N_IN, N_OUT, N_EXPERT);
    void *poison = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(poison != MAP_FAILED);
    routing *rt = malloc(sizeof *rt);
    cv_rng rng;
    cv_rng_seed(&rng, 2026);
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt || !dt->is_weight || N_IN % dt->block_elems)
            continue;
        for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
            if (!cv_isa_supported(isa))
                continue;
            experts ex = { 0 };
            if (experts_make(&ex, dt, isa, &rng))
                for (int i = 0; i < N_ROUTINGS; i++) {
                    make_routing(rt, i, &rng);
                    check_routing(dt, isa, &ex, rt, (unused_kind)(i % 3), pools, ws, poison, &rng);
                }
            experts_free(&ex);
        }
    }
    free(rt);
    munmap(poison, 4096);
    cv_mm_ws_destroy(ws);
    cv_pool_destroy(pools[1]);
    cv_pool_destroy(pools[2]);
}

TEST(expert_matmul_with_no_routes_writes_nothing)
{
    cv_mm_ws *ws = cv_mm_ws_create(4, 4, 2, 2);
    const cv_wmat *w[2] = { NULL, NULL };
    float x[4] = { 1, 2, 3, 4 }, y[2] = { 7, 7 };
    cv_matmul_experts(NULL, w, 2, 1, x, 4, 0, NULL, NULL, y, 2, ws);
    CHECK(y[0] == 7 && y[1] == 7);
    cv_mm_ws_destroy(ws);
}

/* Resident pages of this process (/proc/self/statm), or -1. */
static long resident_pages(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = -1, rss = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = -1;
        fclose(f);
    }
    return rss;
}

TEST(expert_workspace_takes_memory_only_where_a_call_writes)
{
    /* qwen3-30b-a3b at 512 tokens x 8 routes: 32 MiB of f32-wide
     * activation rows and 32 MiB of results reserved. */
    const long page = sysconf(_SC_PAGESIZE), before = resident_pages();
    cv_mm_ws *ws = cv_mm_ws_create(4096, 2048, 2048, 128);
    const long after = resident_pages();
    CHECK(before > 0 && after > 0);
    CHECK_MSG((after - before) * page < (4 << 20), "creating the workspace made %ld KiB resident",
              (after - before) * page >> 10);
    cv_mm_ws_destroy(ws);
    cv_mm_ws_destroy(NULL);
}

int main(void)
{
    RUN(expert_matmul_equals_cv_matmul_of_each_row_for_every_dtype_isa_and_routing);
    RUN(expert_matmul_with_no_routes_writes_nothing);
    RUN(expert_workspace_takes_memory_only_where_a_call_writes);
    return test_report();
}
