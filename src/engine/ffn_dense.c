/* ffn_dense.c — the dense gated FFN: gate|up projections (one matmul when
 * fused at load), act(gate) * up per row (the model's gated activation:
 * SwiGLU, GeGLU; the table's glu), and the down projection. */
#include "engine/engine_int.h"

static void dense_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_gate_up; i++)
        eng_matmul(e, L->gate_up[i].w, T, e->xn, e->ld_x, e->gu + L->gate_up[i].col, e->ld_gu);
    cv_be_glu(e->st, &e->act, T, L->n_ff, e->ff, e->ld_ff, e->gu, e->ld_gu, e->gu + L->n_ff, e->ld_gu);
    eng_matmul(e, L->w_down, T, e->ff, e->ld_ff, e->tmp, e->ld_x);
}

static int dense_init(cv_engine *e, cv_err *err)
{
    e->ld_ff = e->m->hp.n_ff; /* the widest layer's */
    e->ld_gu = 2 * e->ld_ff;
    if (!(e->gu = eng_rows_alloc(e, e->p.n_batch, e->ld_gu, err)) ||
        !(e->ff = eng_rows_alloc(e, e->p.n_batch, e->ld_ff, err)))
        return CV_ENOMEM;
    return 0;
}

static void dense_fini(cv_engine *e)
{
    eng_rows_free(e, e->gu);
    eng_rows_free(e, e->ff);
}

const eng_kind eng_ffn_dense = {
    .name = "dense gated FFN",
    .init = dense_init,
    .fini = dense_fini,
    .forward = dense_forward,
};
