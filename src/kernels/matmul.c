/* matmul.c — prepared weights (cv_wmat) and the matmul driver. Creation
 * validates the shape, picks the implementation for (dtype, ISA) and packs
 * the weights once if that implementation wants its own layout. A matmul
 * then runs two pool jobs: quantize every activation row once (split over
 * tokens), and compute (output row groups taken in chunks, so each thread
 * streams long slices of the weights and applies every loaded block to all
 * tokens of the tile). The generic implementation here is the scalar reference and
 * the fallback: one vec_dot per (row, token), tokens in chunks small enough
 * that their activations stay in cache while a row is reused across them. */
#include <stdlib.h>
#include <sys/mman.h>

#include "kernels/kernels_int.h"

/* ---- weight memory ---- */

/* Packed weights are streamed start to end on every decode step. Backed by
 * 4 KiB pages, the stream crosses a page every few microseconds, and each
 * crossing costs a TLB walk and restarts the hardware prefetcher (it does
 * not cross page boundaries), which keeps one core well below its read
 * bandwidth. So large packed matrices ask for transparent huge pages (a
 * hint: the OS may decline, which only costs speed). */
#define HUGE_BYTES ((size_t)2 << 20)

/* 64-byte aligned (2 MiB for large ones, in whole 4 KiB pages: rounding
 * to a huge page would make the OS back the last one whole, up to 2 MiB of
 * resident waste a matrix, 0.3 GB a layer of an MoE of 128 experts of 2.2
 * MiB; posix_memalign, as aligned_alloc wants whole multiples of the
 * alignment); free with free(). Aborts when the OS has no memory, like
 * base's allocators (the size comes from a validated tensor shape). */
static void *weights_alloc(size_t n)
{
    const bool huge = n >= HUGE_BYTES;
    const size_t align = huge ? HUGE_BYTES : 64, page = huge ? 4096 : 64, rounded = (n + page - 1) & ~(page - 1);
    void *p = NULL;
    if (posix_memalign(&p, align, rounded ? rounded : align))
        p = NULL;
    if (!p) {
        cv_error("out of memory allocating %zu bytes of prepared weights", n);
        abort();
    }
    if (huge)
        madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

/* ---- the generic implementation: vec_dot per row and token ---- */

static size_t generic_act_row_bytes(const cv_wmat *w)
{
    const cv_dtype *a = cv_dtype_get(w->dt->vec_dot_type);
    return (size_t)(w->n_in / a->block_elems) * a->block_bytes;
}

static void generic_quant_act(const cv_wmat *w, const float *x, void *dst) { w->act_ops.from_f32(x, dst, w->n_in); }

/* Tokens per chunk: 16 rows of activations of a long row (16 x 8 KiB for
 * n_in = 8192 in q8) stay in L2 while each weight row is applied to them. */
#define GENERIC_TOK_CHUNK 16

static void generic_run(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)
{
    const cv_wmat *w = job->w;
    const uint8_t *wd = w->data;
    for (int64_t tc = t0; tc < t1; tc += GENERIC_TOK_CHUNK) {
        const int64_t te = CV_MIN(t1, tc + GENERIC_TOK_CHUNK);
        for (int64_t r = g0; r < g1; r++)
            for (int64_t t = tc; t < te; t++)
                w->ops.vec_dot(w->n_in, wd + (size_t)r * w->row_bytes, job->act + (size_t)t * job->act_row_bytes,
                               &cv_mm_y_row(job, t)[r]);
    }
}

static const cv_mm_impl generic_impl = {
    .name = "row dots (generic driver)",
    .rows_per_group = 1,
    .act_row_bytes = generic_act_row_bytes,
    .quant_act = generic_quant_act,
    .run = generic_run,
};

/* The implementation of the highest level at or below isa that has one
 * for the type (the chain of cv_isa_fallback), else the generic driver. */
static const cv_mm_impl *impl_for(uint32_t type, cv_isa isa)
{
    static const cv_mm_impl *(*const tables[CV_ISA_COUNT])(uint32_t) = {
        [CV_ISA_AVX2] = cv_mm_impl_avx2,
        [CV_ISA_AVX_VNNI] = cv_mm_impl_avx_vnni,
        [CV_ISA_AVX512] = cv_mm_impl_avx512,
    };
    for (cv_isa l = isa; l != CV_ISA_SCALAR; l = cv_isa_fallback(l)) {
        const cv_mm_impl *impl = tables[l](type);
        if (impl)
            return impl;
    }
    return &generic_impl;
}

const char *cv_matmul_path(uint32_t type, cv_isa isa)
{
    return impl_for(type, cv_isa_supported(isa) ? isa : CV_ISA_SCALAR)->name;
}

/* ---- prepared weights ---- */

/* Everything of a wmat but its data: what the implementation's functions
 * read (shared with cv_mm_act_row_bytes_max, which asks them about shapes
 * no wmat exists for). */
static void wmat_describe(cv_wmat *w, const cv_dtype *dt, int64_t n_in, int64_t n_out, cv_isa isa)
{
    w->type = dt->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->isa = isa;
    w->dt = dt;
    w->ops = cv_dtype_ops_for(dt, isa);
    w->act_ops = cv_dtype_ops_for(cv_dtype_get(dt->vec_dot_type), isa);
    w->row_bytes = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    w->impl = impl_for(dt->type, isa);
}

size_t cv_mm_act_row_bytes_max(int64_t n_in)
{
    size_t most = 0;
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt || !dt->is_weight || n_in < dt->block_elems)
            continue;
        for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
            if (!cv_isa_supported(isa))
                continue;
            cv_wmat w = { 0 };
            wmat_describe(&w, dt, n_in - n_in % dt->block_elems, 1, isa);
            most = CV_MAX(most, w.impl->act_row_bytes(&w));
        }
    }
    return most;
}

int cv_wmat_create_isa(uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes, cv_isa isa,
                       cv_wmat **out, cv_err *err)
{
    *out = NULL;
    const cv_dtype *dt = cv_dtype_get(type);
    if (!dt || !dt->is_weight)
        return cv_err_set(err, CV_EUNSUPPORTED, "matmul weights: tensor type %u (%s) is not a weight type corvid computes with",
                          type, dt ? dt->name : "unknown");
    if ((unsigned)isa >= CV_ISA_COUNT || !cv_isa_supported(isa))
        return cv_err_set(err, CV_EUNSUPPORTED, "matmul weights: ISA %s is not supported by this CPU", cv_isa_name(isa));
    if (n_in <= 0 || n_out <= 0)
        return cv_err_set(err, CV_EINVAL, "matmul weights: shape %lld x %lld, both must be > 0", (long long)n_out,
                          (long long)n_in);
    if (n_in > CV_MAX_MATMUL_DIM || n_out > CV_MAX_MATMUL_DIM)
        return cv_err_set(err, CV_ELIMIT, "matmul weights: shape %lld x %lld exceeds the limit of %d per dimension",
                          (long long)n_out, (long long)n_in, CV_MAX_MATMUL_DIM);
    if (n_in % dt->block_elems != 0)
        return cv_err_set(err, CV_EINVAL, "matmul weights: row of %lld %s values is not a multiple of its block of %u",
                          (long long)n_in, dt->name, dt->block_elems);
    const size_t row_bytes = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    if (n_bytes != row_bytes * (size_t)n_out)
        return cv_err_set(err, CV_EINVAL, "matmul weights: %zu bytes given, a %lld x %lld %s matrix takes %zu", n_bytes,
                          (long long)n_out, (long long)n_in, dt->name, row_bytes * (size_t)n_out);

    cv_wmat *w = cv_xcalloc(1, sizeof *w);
    wmat_describe(w, dt, n_in, n_out, isa);
    w->data = data;
    /* Block structs hold f16/f32 fields: reading them in place needs the
     * alignment a GGUF file normally gives (its own alignment may be as low
     * as 1). Misaligned data is read from an aligned copy. */
    void *copy = NULL;
    if ((uintptr_t)data % 4 != 0) {
        copy = weights_alloc(n_bytes);
        memcpy(copy, data, n_bytes);
        w->data = copy;
    }
    if (w->impl->pack) {
        w->owned = weights_alloc(w->impl->pack_bytes(n_in, n_out));
        w->impl->pack(w->data, n_in, n_out, w->owned);
        w->data = w->owned;
        free(copy);
    } else if (copy) {
        w->owned = copy;
    }
    *out = w;
    return 0;
}

int cv_wmat_create(uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes, cv_wmat **out,
                   cv_err *err)
{
    return cv_wmat_create_isa(type, n_in, n_out, data, n_bytes, cv_isa_active(), out, err);
}

void cv_wmat_destroy(cv_wmat *w)
{
    if (!w)
        return;
    free(w->owned); /* weights_alloc memory: aligned_alloc/posix_memalign, both free() */
    free(w);
}

uint32_t cv_wmat_type(const cv_wmat *w) { return w->type; }
int64_t cv_wmat_n_in(const cv_wmat *w) { return w->n_in; }
int64_t cv_wmat_n_out(const cv_wmat *w) { return w->n_out; }
cv_isa cv_wmat_isa(const cv_wmat *w) { return w->isa; }
size_t cv_wmat_bytes(const cv_wmat *w) { return w->row_bytes * (size_t)w->n_out; }
bool cv_wmat_is_packed(const cv_wmat *w) { return w->owned != NULL; }
bool cv_wmat_owns_data(const cv_wmat *w) { return w->owned != NULL; }

/* ---- the driver ---- */

typedef struct mm_run {
    cv_mm_job job;
    const float *x;
    int64_t ldx;
    int64_t n_groups, chunk; /* row groups, and how many an item (a take of a thread) holds */
} mm_run;

static void quant_job(void *ctx, int ith, int nth)
{
    mm_run *r = ctx;
    int64_t t0, t1;
    cv_split_range(r->job.n_tok, ith, nth, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; t++)
        r->job.w->impl->quant_act(r->job.w, r->x + t * r->ldx, (void *)(r->job.act + (size_t)t * r->job.act_row_bytes));
}

/* Threads take row groups in chunks from a work queue rather than a fixed
 * share each: a thread that loses its core for a while (another process,
 * an SMT sibling, a slower core) then delays the matmul by one chunk
 * instead of by its whole share while the others wait at the end. Chunks
 * stay long (CV_MM_CHUNKS_PER_THREAD per thread's share) so that each
 * thread still reads the weights as a few long forward streams. */
static void compute_item(void *ctx, int64_t i, int ith)
{
    (void)ith;
    const mm_run *r = ctx;
    const int64_t g0 = i * r->chunk;
    r->job.w->impl->run(&r->job, g0, CV_MIN(g0 + r->chunk, r->n_groups), 0, r->job.n_tok);
}

size_t cv_wmat_act_bytes(const cv_wmat *w, int64_t n_tok) { return w->impl->act_row_bytes(w) * (size_t)n_tok; }

void cv_matmul_strided(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                       int64_t ldy)
{
    if (n_tok == 0)
        return;
    void *act = cv_aligned_alloc(cv_wmat_act_bytes(w, n_tok));
    cv_matmul_strided_act(pool, w, n_tok, x, ldx, y, ldy, act);
    cv_aligned_free(act);
}

void cv_matmul_strided_act(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                           int64_t ldy, void *act)
{
    assert(ldx >= w->n_in && ldy >= w->n_out && n_tok >= 0);
    if (n_tok == 0)
        return;
    mm_run r = { 0 };
    r.job.w = w;
    r.job.n_in = w->n_in;
    r.job.n_out = w->n_out;
    r.job.n_tok = n_tok;
    r.job.y = y;
    r.job.ldy = ldy;
    r.job.act_row_bytes = w->impl->act_row_bytes(w);
    r.x = x;
    r.ldx = ldx;
    r.job.act = act;
    if (n_tok * w->n_in <= CV_MM_QUANT_INLINE_VALUES)
        quant_job(&r, 0, 1);
    else
        cv_pool_run(pool, quant_job, &r);
    const int rpg = w->impl->rows_per_group, nth = cv_pool_size(pool);
    r.n_groups = (w->n_out + rpg - 1) / rpg;
    r.chunk = CV_MAX(1, r.n_groups / (CV_MM_CHUNKS_PER_THREAD * (int64_t)nth));
    cv_pool_run_items(pool, (r.n_groups + r.chunk - 1) / r.chunk, compute_item, &r);
}

void cv_matmul(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, float *y)
{
    cv_matmul_strided(pool, w, n_tok, x, w->n_in, y, w->n_out);
}
