/* matmul_experts.c — the expert-routed matmul of a mixture-of-experts FFN
 * (cv_matmul_experts, ggml's mul_mat_id) and the workspace it runs in. A
 * call sorts its routes by expert (a stable counting sort: an expert's rows
 * keep their order), then quantizes each X row some route reads once,
 * straight into the slot of its first route in expert order, and copies the
 * bytes to its other routes' slots, so each expert's activations lie
 * contiguous exactly as a dense matmul's do. One pool job then takes items
 * of (expert, chunk of row groups) from one counter; an item runs the
 * expert's own tile (its cv_mm_impl.run, the one cv_matmul uses) over all
 * the expert's rows, writing each row's outputs straight into its route's
 * row of Y (cv_mm_job.y_rows). Each
 * used expert's weights thus stream once per call however many rows it
 * has; an expert with no rows is never touched. This file owns no tile:
 * the bits come from the dense path's implementations, which is why they
 * equal cv_matmul's (the run contract in kernels_int.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kernels/kernels_int.h"

/* ---- workspace ---- */

struct cv_mm_ws {
    int64_t max_rows, max_n_in, max_n_out;
    int32_t n_expert;
    size_t act_row_cap;  /* bytes of the widest activation row of max_n_in values */
    /* per expert */
    int64_t *e_off;      /* [n_expert + 1] first slot of expert e's rows (slots in expert order) */
    int32_t *used;       /* [n_expert] the experts with rows, ascending */
    int64_t *item_off;   /* [n_expert + 1] first work item of used expert u */
    int64_t *chunk;      /* [n_expert] row groups per work item of used expert u */
    /* per route and per X row */
    int64_t *fill;       /* [max(n_expert, max_rows)] counting-sort cursors */
    int32_t *order;      /* [max_rows] the route in slot p */
    int32_t *slot;       /* [max_rows] the slot of route r */
    int64_t *x_off;      /* [max_rows + 1] routes reading X row s: x_route[x_off[s] .. x_off[s + 1]) */
    int32_t *x_route;    /* [max_rows] */
    int32_t *x_read;     /* [max_rows] the X rows some route reads, ascending */
    /* reserved address space, backed only where a call writes */
    uint8_t *act;        /* [max_rows][act_row_cap] quantized rows by slot */
    size_t act_bytes;
};

/* Anonymous, never-touched pages cost no memory until written, so sizing
 * for f32 activations and the widest output wastes nothing on a quantized
 * model's calls; MAP_NORESERVE keeps the reservation out of the commit
 * charge for the same reason. */
static void *reserve(size_t n, int64_t max_rows)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        cv_error("out of memory: %zu MiB of address space for an expert matmul workspace of %lld rows", n >> 20,
                 (long long)max_rows);
        abort();
    }
    return p;
}

cv_mm_ws *cv_mm_ws_create(int64_t max_rows, int64_t max_n_in, int64_t max_n_out, int32_t n_expert)
{
    assert(max_rows >= 1 && max_rows <= INT32_MAX && n_expert >= 1);
    assert(max_n_in >= 1 && max_n_in <= CV_MAX_MATMUL_DIM && max_n_out >= 1 && max_n_out <= CV_MAX_MATMUL_DIM);
    cv_mm_ws *ws = cv_xcalloc(1, sizeof *ws);
    ws->max_rows = max_rows;
    ws->max_n_in = max_n_in;
    ws->max_n_out = max_n_out;
    ws->n_expert = n_expert;
    ws->act_row_cap = cv_mm_act_row_bytes_max(max_n_in);
    const size_t ne = (size_t)n_expert, nr = (size_t)max_rows;
    ws->e_off = cv_xmalloc((ne + 1) * sizeof *ws->e_off);
    ws->used = cv_xmalloc(ne * sizeof *ws->used);
    ws->item_off = cv_xmalloc((ne + 1) * sizeof *ws->item_off);
    ws->chunk = cv_xmalloc(ne * sizeof *ws->chunk);
    ws->fill = cv_xmalloc(CV_MAX(ne, nr) * sizeof *ws->fill);
    ws->order = cv_xmalloc(nr * sizeof *ws->order);
    ws->slot = cv_xmalloc(nr * sizeof *ws->slot);
    ws->x_off = cv_xmalloc((nr + 1) * sizeof *ws->x_off);
    ws->x_route = cv_xmalloc(nr * sizeof *ws->x_route);
    ws->x_read = cv_xmalloc(nr * sizeof *ws->x_read);
    /* below 2^31 rows x 2^26 bytes each: no overflow */
    ws->act_bytes = nr * ws->act_row_cap;
    ws->act = reserve(ws->act_bytes, max_rows);
    return ws;
}

void cv_mm_ws_commit(cv_mm_ws *ws, size_t row_bytes)
{
    const size_t n = CV_MIN(ws->act_bytes, (size_t)ws->max_rows * CV_MIN(row_bytes, ws->act_row_cap));
    cv_pages_commit(ws->act, n);
}

void cv_mm_ws_destroy(cv_mm_ws *ws)
{
    if (!ws)
        return;
    munmap(ws->act, ws->act_bytes);
    free(ws->e_off);
    free(ws->used);
    free(ws->item_off);
    free(ws->chunk);
    free(ws->fill);
    free(ws->order);
    free(ws->slot);
    free(ws->x_off);
    free(ws->x_route);
    free(ws->x_read);
    free(ws);
}

/* ---- routing: slots in expert order, X rows to their routes ---- */

/* Counting sort of the routes by expert, stable, so that the rows of one
 * expert keep their order whatever the others do. Fills e_off, slot, order
 * and the list of used experts; returns how many are used. */
static int32_t sort_by_expert(cv_mm_ws *ws, int32_t n_expert, int64_t n_rows, const int32_t *expert)
{
    int64_t *n = ws->fill;
    memset(n, 0, (size_t)n_expert * sizeof *n);
    for (int64_t r = 0; r < n_rows; r++) {
        assert(expert[r] >= 0 && expert[r] < n_expert);
        n[expert[r]]++;
    }
    int32_t n_used = 0;
    int64_t p = 0;
    for (int32_t e = 0; e < n_expert; e++) {
        ws->e_off[e] = p;
        if (n[e])
            ws->used[n_used++] = e;
        const int64_t c = n[e];
        n[e] = p; /* now the next free slot of e */
        p += c;
    }
    ws->e_off[n_expert] = p;
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t s = n[expert[r]]++;
        ws->slot[r] = (int32_t)s;
        ws->order[s] = (int32_t)r;
    }
    return n_used;
}

/* The routes of each X row (CSR by source row) and the list of rows read;
 * returns how many rows are read. */
static int64_t group_by_source(cv_mm_ws *ws, int64_t n_x, int64_t n_rows, const int32_t *src)
{
    int64_t *n = ws->fill;
    memset(n, 0, (size_t)n_x * sizeof *n);
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t s = src ? src[r] : r;
        assert(s >= 0 && s < n_x);
        n[s]++;
    }
    int64_t p = 0, n_read = 0;
    for (int64_t s = 0; s < n_x; s++) {
        ws->x_off[s] = p;
        if (n[s])
            ws->x_read[n_read++] = (int32_t)s;
        const int64_t c = n[s];
        n[s] = p;
        p += c;
    }
    ws->x_off[n_x] = p;
    for (int64_t r = 0; r < n_rows; r++)
        ws->x_route[n[src ? src[r] : r]++] = (int32_t)r;
    return n_read;
}

/* A row group's weights stream from DRAM in about the time the tile needs
 * to apply them to this many tokens (a q4_K group of 2048 inputs on one
 * core here: ~1 us to stream its 19 KB, ~0.35 us per token; more tokens'
 * worth where many cores share the memory bus), so an item's cost is taken
 * as groups x (rows + STREAM_TOKENS): a decode expert with one row still
 * costs its stream, a prefill expert with 100 rows costs its compute. */
#define STREAM_TOKENS 4

/* Work items: each used expert's row groups in chunks sized so that every
 * item costs about 1 / (CV_MM_CHUNKS_PER_THREAD x threads) of the call, as
 * cv_matmul's chunks do for one expert. Returns the number of items. */
static int64_t plan_items(cv_mm_ws *ws, int32_t n_used, int64_t n_groups, int nth)
{
    int64_t total = 0;
    for (int32_t u = 0; u < n_used; u++) {
        const int32_t e = ws->used[u];
        total += n_groups * (ws->e_off[e + 1] - ws->e_off[e] + STREAM_TOKENS);
    }
    const int64_t target = total / (CV_MM_CHUNKS_PER_THREAD * (int64_t)nth);
    int64_t n_items = 0;
    for (int32_t u = 0; u < n_used; u++) {
        const int32_t e = ws->used[u];
        const int64_t per_group = ws->e_off[e + 1] - ws->e_off[e] + STREAM_TOKENS;
        const int64_t c = CV_MIN(n_groups, CV_MAX(1, target / per_group));
        ws->chunk[u] = c;
        ws->item_off[u] = n_items;
        n_items += (n_groups + c - 1) / c;
    }
    ws->item_off[n_used] = n_items;
    return n_items;
}

/* ---- the driver ---- */

typedef struct moe_run {
    const cv_wmat *const *w;
    const cv_wmat *w0;    /* a used expert: type, ISA, shape and impl of them all */
    cv_mm_ws *ws;
    const float *x;
    int64_t ldx;
    float *y;
    int64_t ldy;
    size_t arb;           /* bytes of one activation row */
    int64_t n_read, n_groups, n_items;
    _Atomic int64_t next_item;
} moe_run;

/* Each read X row: quantized into its first route's slot, the bytes then
 * copied to its other routes' slots while they are in cache. */
static void quant_job(void *ctx, int ith, int nth)
{
    moe_run *r = ctx;
    const cv_mm_ws *ws = r->ws;
    int64_t i0, i1;
    cv_split_range(r->n_read, ith, nth, 1, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t s = ws->x_read[i], k0 = ws->x_off[s], k1 = ws->x_off[s + 1];
        uint8_t *first = ws->act + (size_t)ws->slot[ws->x_route[k0]] * r->arb;
        r->w0->impl->quant_act(r->w0, r->x + s * r->ldx, first);
        for (int64_t k = k0 + 1; k < k1; k++)
            memcpy(ws->act + (size_t)ws->slot[ws->x_route[k]] * r->arb, first, r->arb);
    }
}

/* Items in expert order, so a thread's items only move forward and its
 * cursor over the used experts walks each once (the cursor is why this
 * queue is its own loop and not cv_pool_run_items, whose items keep no
 * state of the thread between them). */
static void compute_job(void *ctx, int ith, int nth)
{
    (void)ith;
    (void)nth;
    moe_run *r = ctx;
    const cv_mm_ws *ws = r->ws;
    const int64_t n_out = r->w0->n_out;
    int32_t u = 0;
    for (;;) {
        const int64_t i = atomic_fetch_add_explicit(&r->next_item, 1, memory_order_relaxed);
        if (i >= r->n_items)
            break;
        while (ws->item_off[u + 1] <= i)
            u++;
        const int32_t e = ws->used[u];
        const int64_t p0 = ws->e_off[e], n = ws->e_off[e + 1] - p0;
        const int64_t g0 = (i - ws->item_off[u]) * ws->chunk[u], g1 = CV_MIN(r->n_groups, g0 + ws->chunk[u]);
        const cv_mm_job job = {
            .w = r->w[e],
            .act = ws->act + (size_t)p0 * r->arb,
            .act_row_bytes = r->arb,
            .n_in = r->w0->n_in,
            .n_out = n_out,
            .n_tok = n,
            .y = r->y,
            .ldy = r->ldy,
            .y_rows = ws->order + p0,
        };
        r->w0->impl->run(&job, g0, g1, 0, n);
    }
}

void cv_matmul_experts(cv_pool *pool, const cv_wmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                       int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y, int64_t ldy,
                       cv_mm_ws *ws)
{
    assert(n_rows >= 0 && n_rows <= ws->max_rows && n_expert >= 1 && n_expert <= ws->n_expert);
    assert(src ? n_x <= ws->max_rows : n_x >= n_rows);
    if (n_rows == 0)
        return;
    moe_run r = { .w = w, .ws = ws, .x = x, .ldx = ldx, .y = y, .ldy = ldy };
    const int32_t n_used = sort_by_expert(ws, n_expert, n_rows, expert);
    const cv_wmat *w0 = r.w0 = w[ws->used[0]];
    assert(w0 && w0->n_in <= ws->max_n_in && w0->n_out <= ws->max_n_out && ldx >= w0->n_in && ldy >= w0->n_out);
    for (int32_t u = 1; u < n_used; u++) {
        const cv_wmat *we = w[ws->used[u]];
        assert(we && we->impl == w0->impl && we->type == w0->type && we->n_in == w0->n_in && we->n_out == w0->n_out);
        (void)we;
    }
    r.arb = w0->impl->act_row_bytes(w0);
    assert(r.arb <= ws->act_row_cap);
    r.n_read = group_by_source(ws, src ? n_x : n_rows, n_rows, src);
    if (r.n_read * w0->n_in <= CV_MM_QUANT_INLINE_VALUES)
        quant_job(&r, 0, 1);
    else
        cv_pool_run(pool, quant_job, &r);
    const int64_t rpg = w0->impl->rows_per_group;
    r.n_groups = (w0->n_out + rpg - 1) / rpg;
    r.n_items = plan_items(ws, n_used, r.n_groups, cv_pool_size(pool));
    atomic_init(&r.next_item, 0);
    cv_pool_run(pool, compute_job, &r);
}
