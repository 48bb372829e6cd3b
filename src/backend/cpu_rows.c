/* cpu_rows.c — the CPU backend's activation memory (host memory: upload
 * and download are copies) and its row operations, each the kernels
 * layer's vector loop of the process's level over whole rows, the same
 * bits as a call per row.
 *
 * When the stream's pool is woken: waking it costs a few microseconds, a
 * decode step's row of a few thousand values far less. Operations whose
 * loop is elementwise and exact at any cut (add, scale, and the soft cap's
 * scalar tanh) split the values of all rows into equal stretches once
 * there are 32768 of them (a prefill's rows, a 262144-value logit row);
 * the others (whose vector loops may round a row's tail differently from
 * its body) split by whole rows from 4 rows up. */
#include <math.h>
#include <string.h>

#include "backend/cpu_int.h"

#define FLAT_MIN_VALUES 32768

void *cpu_rows_alloc(cv_backend *be, size_t n_bytes)
{
    (void)be;
    return cv_aligned_alloc_committed(n_bytes);
}

void cpu_rows_free(cv_backend *be, void *p)
{
    (void)be;
    cv_aligned_free(p);
}

void cpu_upload(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    (void)s;
    if (dst != src)
        memcpy(dst, src, n_bytes);
}

void cpu_download(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    (void)s;
    if (dst != src)
        memcpy(dst, src, n_bytes);
}

typedef enum row_op { OP_RMSNORM, OP_ADD, OP_SCALE, OP_GLU, OP_SIGMOID_MUL, OP_SOFTCAP } row_op;

typedef struct rows_job {
    const cv_vec_ops *vec;
    row_op op;
    int32_t n_rows;
    int64_t n;
    float *y;
    int64_t ldy;
    const float *a, *b;
    int64_t lda, ldb;
    const int32_t *gather;
    float f; /* eps, scale factor or cap */
    const cv_bact *act;
} rows_job;

void cpu_glu_row(const cv_vec_ops *vec, const cv_bact *act, float *y, const float *g, const float *u, int64_t n)
{
    switch (act->kind) {
    case CV_BGLU_SILU: vec->swiglu(y, g, u, n); break;
    case CV_BGLU_GELU_TANH: vec->geglu(y, g, u, n); break;
    case CV_BGLU_SILU_CLAMPED: vec->swiglu_clamped(y, g, u, n, act->alpha, act->limit); break;
    }
}

/* Values c0..c1 of row t. */
static void run_stretch(const rows_job *j, int64_t t, int64_t c0, int64_t c1)
{
    float *y = j->y + t * j->ldy + c0;
    const int64_t n = c1 - c0;
    switch (j->op) {
    case OP_ADD: j->vec->add(y, j->a + t * j->lda + c0, j->b + t * j->ldb + c0, n); break;
    case OP_SCALE: j->vec->scale(y, j->f, n); break;
    case OP_SOFTCAP: {
        const float inv = 1.0f / j->f;
        for (int64_t i = 0; i < n; i++)
            y[i] = j->f * tanhf(y[i] * inv);
        break;
    }
    case OP_RMSNORM:
        j->vec->rmsnorm(y, j->a + (j->gather ? j->gather[t] : t) * j->lda, j->b, n, j->f);
        break;
    case OP_SIGMOID_MUL: j->vec->sigmoid_mul(y, j->a + t * j->lda, j->b + t * j->ldb, n); break;
    case OP_GLU: cpu_glu_row(j->vec, j->act, y, j->a + t * j->lda, j->b + t * j->ldb, n); break;
    }
}

static void rows_part(void *ctx, int ith, int nth)
{
    const rows_job *j = ctx;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        run_stretch(j, t, 0, j->n);
}

static void flat_part(void *ctx, int ith, int nth)
{
    const rows_job *j = ctx;
    int64_t lo, hi;
    cv_split_range((int64_t)j->n_rows * j->n, ith, nth, 16, &lo, &hi);
    for (int64_t t = lo / j->n; t < j->n_rows && t * j->n < hi; t++)
        run_stretch(j, t, CV_MAX(lo - t * j->n, 0), CV_MIN(hi - t * j->n, j->n));
}

void cpu_run_rows(cv_bstream *s, int32_t n_rows, cv_pool_fn fn, void *ctx)
{
    cv_pool *pool = cpu_stream_of(s)->pool;
    if (n_rows < CPU_ROWS_MIN || cv_pool_size(pool) == 1)
        fn(ctx, 0, 1);
    else
        cv_pool_run(pool, fn, ctx);
}

static void run(cv_bstream *s, rows_job *j)
{
    cpu_stream *cs = cpu_stream_of(s);
    j->vec = cs->vec;
    if (j->n_rows < 1 || j->n < 1)
        return;
    if (!(j->op == OP_ADD || j->op == OP_SCALE || j->op == OP_SOFTCAP))
        cpu_run_rows(s, j->n_rows, rows_part, j);
    else if ((int64_t)j->n_rows * j->n < FLAT_MIN_VALUES || cv_pool_size(cs->pool) == 1)
        flat_part(j, 0, 1);
    else
        cv_pool_run(cs->pool, flat_part, j);
}

void cpu_rmsnorm(cv_bstream *s, int32_t n_rows, int64_t n, const float *x, int64_t ldx, const int32_t *gather,
                 const float *w, float eps, float *y, int64_t ldy)
{
    rows_job j = { .op = OP_RMSNORM, .n_rows = n_rows, .n = n, .y = y, .ldy = ldy, .a = x, .lda = ldx, .b = w,
                   .gather = gather, .f = eps };
    run(s, &j);
}

void cpu_add(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *a, int64_t lda,
             const float *b, int64_t ldb)
{
    rows_job j = { .op = OP_ADD, .n_rows = n_rows, .n = n, .y = y, .ldy = ldy, .a = a, .lda = lda, .b = b, .ldb = ldb };
    run(s, &j);
}

void cpu_scale(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f)
{
    rows_job j = { .op = OP_SCALE, .n_rows = n_rows, .n = n, .y = x, .ldy = ldx, .f = f };
    run(s, &j);
}

void cpu_glu(cv_bstream *s, const cv_bact *act, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *g,
             int64_t ldg, const float *u, int64_t ldu)
{
    rows_job j = { .op = OP_GLU, .n_rows = n_rows, .n = n, .y = y, .ldy = ldy, .a = g, .lda = ldg, .b = u, .ldb = ldu,
                   .act = act };
    run(s, &j);
}

void cpu_sigmoid_mul(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *x, int64_t ldx,
                     const float *g, int64_t ldg)
{
    rows_job j = { .op = OP_SIGMOID_MUL, .n_rows = n_rows, .n = n, .y = y, .ldy = ldy, .a = x, .lda = ldx, .b = g,
                   .ldb = ldg };
    run(s, &j);
}

void cpu_softcap(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float cap)
{
    rows_job j = { .op = OP_SOFTCAP, .n_rows = n_rows, .n = n, .y = x, .ldy = ldx, .f = cap };
    run(s, &j);
}
