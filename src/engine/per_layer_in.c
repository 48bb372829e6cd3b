/* per_layer_in.c — gemma4's per-layer inputs (E2B, E4B: cv_hparams.n_pl >
 * 0): besides the stream, every token carries a small input of n_pl values
 * for each layer, made once before layer 0 and gated into the stream after
 * each layer's FFN. Made from two sources: the token's row of
 * per_layer_token_embd times sqrt(n_pl), and the projection of the (already
 * sqrt(n_embd)-scaled) token embedding by per_layer_model_proj, times
 * 1/sqrt(n_embd) and RMS-normed per layer with per_layer_proj_norm; the
 * input is their sum times 1/sqrt(2) (llama.cpp's order of operations).
 * After layer il's FFN:
 *   x += RMSNorm(W_proj (gelu(W_gate x) * pl[il]); post_norm)
 * with the tanh GELU. Spec: ../shared/testdata/reference3/README.md
 * (gemma4, forward pass steps 2 and 3.7). */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

struct eng_pl_scratch {
    int64_t ld;          /* n_layer * n_pl */
    float *in;           /* [n_batch][ld] every layer's input, made by eng_pl_prepare */
    float *proj;         /* [n_batch][ld] the embedding's projection */
    float *gate;         /* [n_batch][n_pl] one layer's gate */
};

int eng_pl_init(cv_engine *e)
{
    const cv_hparams *hp = &e->m->hp;
    eng_pl_scratch *s = e->pl = cv_xcalloc(1, sizeof *s);
    const size_t T = (size_t)e->p.n_batch;
    s->ld = (int64_t)hp->n_layer * hp->n_pl;
    s->in = cv_aligned_alloc_committed(T * (size_t)s->ld * sizeof(float));
    s->proj = cv_aligned_alloc_committed(T * (size_t)s->ld * sizeof(float));
    s->gate = cv_aligned_alloc_committed(T * (size_t)hp->n_pl * sizeof(float));
    return 0;
}

void eng_pl_fini(cv_engine *e)
{
    eng_pl_scratch *s = e->pl;
    if (!s)
        return;
    cv_aligned_free(s->in);
    cv_aligned_free(s->proj);
    cv_aligned_free(s->gate);
    free(s);
    e->pl = NULL;
}

typedef struct pl_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t n_rows;
    int32_t layer;
} pl_job;

static void rows_inputs(void *ctx, int ith, int nth)
{
    pl_job *j = ctx;
    cv_engine *e = j->e;
    const cv_model *m = e->m;
    const int32_t n_pl = m->hp.n_pl;
    eng_pl_scratch *s = e->pl;
    const float sq_pl = sqrtf((float)n_pl), inv_embd = 1.0f / sqrtf((float)m->hp.n_embd);
    const float inv_sqrt2 = 1.0f / sqrtf(2.0f);
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *in = s->in + t * s->ld, *p = s->proj + t * s->ld;
        cv_model_embed_per_layer(m, j->b->token[t], in);
        e->vec->scale(in, sq_pl, s->ld);
        e->vec->scale(p, inv_embd, s->ld);
        for (int32_t il = 0; il < m->hp.n_layer; il++) {
            float *pi = p + (int64_t)il * n_pl;
            e->vec->rmsnorm(pi, pi, m->pl_proj_norm, n_pl, m->hp.rms_eps);
        }
        e->vec->add(in, in, p, s->ld);
        e->vec->scale(in, inv_sqrt2, s->ld);
    }
}

void eng_pl_prepare(cv_engine *e, const cv_batch *b)
{
    const int32_t T = b->n_tokens;
    eng_matmul(e, e->m->pl_model_proj, T, e->x, e->ld_x, e->pl->proj, e->pl->ld);
    pl_job j = { .e = e, .b = b, .n_rows = T };
    eng_run_rows(e, T, rows_inputs, &j);
}

/* gate = gelu(gate) * the layer's input, per row. */
static void rows_gate(void *ctx, int ith, int nth)
{
    pl_job *j = ctx;
    const int32_t n_pl = j->e->m->hp.n_pl;
    eng_pl_scratch *s = j->e->pl;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *g = s->gate + t * n_pl;
        j->e->vec->geglu(g, g, s->in + t * s->ld + (int64_t)j->layer * n_pl, n_pl);
    }
}

/* x += RMSNorm(tmp; post_norm), per row. */
static void rows_add(void *ctx, int ith, int nth)
{
    pl_job *j = ctx;
    cv_engine *e = j->e;
    const cv_layer *L = &e->m->layers[j->layer];
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *y = e->tmp + t * e->ld_x, *x = e->x + t * e->ld_x;
        e->vec->rmsnorm(y, y, L->pl_post_norm, e->ld_x, e->m->hp.rms_eps);
        e->vec->add(x, x, y, e->ld_x);
    }
}

void eng_pl_layer(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens, n_pl = e->m->hp.n_pl;
    eng_matmul(e, L->pl_gate, T, e->x, e->ld_x, e->pl->gate, n_pl);
    pl_job j = { .e = e, .b = b, .n_rows = T, .layer = il };
    eng_run_rows(e, T, rows_gate, &j);
    eng_matmul(e, L->pl_proj, T, e->pl->gate, n_pl, e->tmp, e->ld_x);
    eng_run_rows(e, T, rows_add, &j);
}
