/* ffn_dense.c — the dense gated FFN: gate|up projections (one matmul when
 * fused at load), act(gate) * up per row on the pool (the model's gated
 * activation: SwiGLU, GeGLU), and the down projection. */
#include "engine/engine_int.h"

typedef struct swiglu_job {
    cv_engine *e;
    int32_t n_rows;
    int32_t n_ff;        /* the layer's width (<= ld_ff: gemma4's layers differ) */
} swiglu_job;

static void rows_swiglu(void *ctx, int ith, int nth)
{
    swiglu_job *j = ctx;
    cv_engine *e = j->e;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *g = e->gu + t * e->ld_gu;
        eng_glu(e, e->ff + t * e->ld_ff, g, g + j->n_ff, j->n_ff);
    }
}

static void dense_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_gate_up; i++)
        eng_matmul(e, L->gate_up[i].w, T, e->xn, e->ld_x, e->gu + L->gate_up[i].col, e->ld_gu);
    swiglu_job j = { .e = e, .n_rows = T, .n_ff = L->n_ff };
    eng_run_rows(e, T, rows_swiglu, &j);
    eng_matmul(e, L->w_down, T, e->ff, e->ld_ff, e->tmp, e->ld_x);
}

static int dense_init(cv_engine *e, cv_err *err)
{
    (void)err;
    e->ld_ff = e->m->hp.n_ff; /* the widest layer's */
    e->ld_gu = 2 * e->ld_ff;
    e->gu = cv_aligned_alloc((size_t)e->p.n_batch * (size_t)e->ld_gu * sizeof(float));
    e->ff = cv_aligned_alloc((size_t)e->p.n_batch * (size_t)e->ld_ff * sizeof(float));
    return 0;
}

static void dense_fini(cv_engine *e)
{
    cv_aligned_free(e->gu);
    cv_aligned_free(e->ff);
}

const eng_kind eng_ffn_dense = {
    .name = "dense gated FFN",
    .init = dense_init,
    .fini = dense_fini,
    .forward = dense_forward,
};
