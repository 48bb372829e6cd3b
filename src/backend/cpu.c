/* cpu.c — the CPU backend: weights prepared by the kernels layer
 * (cv_wmat: repacked for the tiles of the process's ISA level, or read in
 * place), and streams that are a thread pool each. Every operation is the
 * kernels layer's, which picks its ISA level at run time; this file maps
 * the table onto it (the row operations and activation memory:
 * cpu_rows.c; the layer passes: cpu_layer.c; the Gated DeltaNet mixer's:
 * cpu_deltanet.c; attention over the paged cache: cpu_attention.c; the latent
 * attention kind's: cpu_mla.c). */
#include <assert.h>
#include <stdlib.h>

#include "backend/cpu_int.h"

typedef struct cpu_mat {
    cv_bmat pub;
    cv_wmat *w;
} cpu_mat;

const cv_wmat *cpu_wmat(const cv_bmat *m) { return ((const cpu_mat *)m)->w; }
static cv_pool *pool_of(cv_bstream *s) { return cpu_stream_of(s)->pool; }

static int mat_create(cv_backend *be, uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes,
                      cv_bmat **out, cv_err *err)
{
    (void)be;
    *out = NULL;
    cv_wmat *w;
    int rc = cv_wmat_create(type, n_in, n_out, data, n_bytes, &w, err);
    if (rc)
        return rc;
    cpu_mat *m = cv_xcalloc(1, sizeof *m);
    m->w = w;
    m->pub = (cv_bmat){ .type = type, .n_in = n_in, .n_out = n_out, .bytes = cv_wmat_bytes(w),
                        .owns_data = cv_wmat_owns_data(w) };
    *out = &m->pub;
    return 0;
}

static void mat_destroy(cv_backend *be, cv_bmat *m)
{
    (void)be;
    cv_wmat_destroy(((cpu_mat *)m)->w);
    free(m);
}

static const char *mat_path(const cv_bmat *m) { return cv_matmul_path(m->type, cv_wmat_isa(cpu_wmat(m))); }

static int stream_create(cv_backend *be, int32_t n_threads, cv_bstream **out, cv_err *err)
{
    *out = NULL;
    cv_pool *pool = cv_pool_create(n_threads > 0 ? n_threads : cv_cpu_count(), err);
    if (!pool)
        return err ? err->code : CV_EINVAL;
    cpu_stream *s = cv_xcalloc(1, sizeof *s);
    s->pub.be = be;
    s->pool = pool;
    s->vec = cv_vec_ops_for(cv_isa_active());
    *out = &s->pub;
    return 0;
}

static void stream_destroy(cv_bstream *s)
{
    cv_pool_destroy(pool_of(s));
    cv_aligned_free(cpu_stream_of(s)->act);
    free(s);
}

/* The activation scratch, at least n bytes: grown, and committed when it
 * grows, since the rows go to every thread of the next matmul at once. */
static void *act_scratch(cpu_stream *st, size_t n)
{
    if (n > st->act_bytes) {
        cv_aligned_free(st->act);
        st->act = cv_aligned_alloc_committed(n);
        st->act_bytes = n;
    }
    return st->act;
}

static void stream_reserve(cv_bstream *s, const cv_bmat *const *mats, int32_t n_mats, int64_t max_tok)
{
    cpu_stream *st = cpu_stream_of(s);
    for (int32_t i = 0; i < n_mats; i++)
        st->act_row_max = CV_MAX(st->act_row_max, cv_wmat_act_bytes(cpu_wmat(mats[i]), 1));
    act_scratch(st, st->act_row_max * (size_t)max_tok);
}

static int stream_threads(const cv_bstream *s) { return cv_pool_size(((const cpu_stream *)s)->pool); }

/* Each matmul splits its rows by the pool's run count, and a row's bits do
 * not depend on which thread computes it. */
static void stream_set_threads(cv_bstream *s, int32_t n) { cv_pool_set_threads(pool_of(s), n); }

/* Every operation returns when its pool job has: nothing is ever queued. */
static void sync(cv_bstream *s) { (void)s; }

static void matmul(cv_bstream *s, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y, int64_t ldy)
{
    const cv_wmat *wm = cpu_wmat(w);
    cv_matmul_strided_act(pool_of(s), wm, n_tok, x, ldx, y, ldy,
                          act_scratch(cpu_stream_of(s), cv_wmat_act_bytes(wm, n_tok)));
}

static cv_experts_ws *experts_ws_create(cv_bstream *s, int64_t max_rows, int64_t max_n_in, int64_t max_n_out,
                                        int32_t n_expert)
{
    cv_mm_ws *ws = cv_mm_ws_create(max_rows, max_n_in, max_n_out, n_expert);
    if (cpu_stream_of(s)->act_row_max > 0)
        cv_mm_ws_commit(ws, cpu_stream_of(s)->act_row_max);
    return (cv_experts_ws *)ws;
}

static void experts_ws_destroy(cv_bstream *s, cv_experts_ws *ws)
{
    (void)s;
    cv_mm_ws_destroy((cv_mm_ws *)ws);
}

static void matmul_experts(cv_bstream *s, const cv_bmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                           int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y,
                           int64_t ldy, cv_experts_ws *ws)
{
    /* The kernels take the prepared matrices themselves; an expert no
     * route names may be NULL and stays so. */
    const cv_wmat *wm[CV_MAX_EXPERTS];
    assert(n_expert <= CV_MAX_EXPERTS);
    for (int32_t e = 0; e < n_expert; e++)
        wm[e] = w[e] ? cpu_wmat(w[e]) : NULL;
    cv_matmul_experts(pool_of(s), wm, n_expert, n_x, x, ldx, n_rows, expert, src, y, ldy, (cv_mm_ws *)ws);
}

static const cv_backend_ops cpu_ops = {
    .abi = CV_BACKEND_ABI,
    .name = "cpu",
    .mat_create = mat_create,
    .mat_destroy = mat_destroy,
    .mat_path = mat_path,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_threads = stream_threads,
    .stream_set_threads = stream_set_threads,
    .sync = sync,
    .stream_reserve = stream_reserve,
    .matmul = matmul,
    .experts_ws_create = experts_ws_create,
    .experts_ws_destroy = experts_ws_destroy,
    .matmul_experts = matmul_experts,
    .rows_alloc = cpu_rows_alloc,
    .rows_free = cpu_rows_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .rmsnorm = cpu_rmsnorm,
    .add = cpu_add,
    .scale = cpu_scale,
    .glu = cpu_glu,
    .sigmoid_mul = cpu_sigmoid_mul,
    .softcap = cpu_softcap,
    .attn_rows = cpu_attn_rows,
    .moe_route = cpu_moe_route,
    .moe_glu = cpu_moe_glu,
    .moe_sum = cpu_moe_sum,
    .deltanet_ws_create = cpu_deltanet_ws_create,
    .deltanet_ws_destroy = cpu_deltanet_ws_destroy,
    .deltanet = cpu_deltanet,
    .attention_ws_create = cpu_attention_ws_create,
    .attention_ws_destroy = cpu_attention_ws_destroy,
    .attention = cpu_attention,
    .mla_rows = cpu_mla_rows,
    .mla_latent = cpu_mla_latent,
    .mla_ws_create = cpu_mla_ws_create,
    .mla_ws_destroy = cpu_mla_ws_destroy,
    .mla_dec = cpu_mla_dec,
    .embed_rows = cpu_embed_rows,
};

static cv_backend cpu_backend = { .ops = &cpu_ops };

cv_backend *cv_backend_cpu(void) { return &cpu_backend; }

cv_pool *cv_bstream_cpu_pool(cv_bstream *s) { return s->be->ops == &cpu_ops ? pool_of(s) : NULL; }
