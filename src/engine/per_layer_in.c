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

int eng_pl_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    eng_pl_scratch *s = e->pl = cv_xcalloc(1, sizeof *s);
    const int64_t T = e->p.n_batch;
    s->ld = (int64_t)hp->n_layer * hp->n_pl;
    if (!(s->in = eng_rows_alloc(e, T, s->ld, err)) || !(s->proj = eng_rows_alloc(e, T, s->ld, err)) ||
        !(s->gate = eng_rows_alloc(e, T, hp->n_pl, err)))
        return CV_ENOMEM;
    return 0;
}

void eng_pl_fini(cv_engine *e)
{
    eng_pl_scratch *s = e->pl;
    if (!s)
        return;
    eng_rows_free(e, s->in);
    eng_rows_free(e, s->proj);
    eng_rows_free(e, s->gate);
    free(s);
    e->pl = NULL;
}

void eng_pl_prepare(cv_engine *e, const cv_batch *b)
{
    const cv_model *m = e->m;
    const cv_hparams *hp = &m->hp;
    eng_pl_scratch *s = e->pl;
    const int32_t T = b->n_tokens;
    const cv_gguf_tensor *te = m->pl_embd;
    eng_matmul(e, m->pl_model_proj, T, e->x, e->ld_x, s->proj, s->ld);
    /* in = embd * sqrt(n_pl); proj = RMSNorm(proj / sqrt(n_embd)) per
     * layer (T * n_layer rows of n_pl); in = (in + proj) / sqrt(2) */
    cv_be_embed_rows(e->st, te->type, te->ne[0], te->data, te->ne[1], T, b->token, sqrtf((float)hp->n_pl), s->in,
                     s->ld);
    cv_be_scale(e->st, T, s->ld, s->proj, s->ld, 1.0f / sqrtf((float)hp->n_embd));
    cv_be_rmsnorm(e->st, T * hp->n_layer, hp->n_pl, s->proj, hp->n_pl, NULL, m->pl_proj_norm, hp->rms_eps, s->proj,
                  hp->n_pl);
    cv_be_add(e->st, T, s->ld, s->in, s->ld, s->in, s->ld, s->proj, s->ld);
    cv_be_scale(e->st, T, s->ld, s->in, s->ld, 1.0f / sqrtf(2.0f));
}

void eng_pl_layer(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens, n_pl = e->m->hp.n_pl;
    eng_pl_scratch *s = e->pl;
    static const cv_bact gelu = { .kind = CV_BGLU_GELU_TANH };
    /* gate = gelu(W_gate x) * the layer's input; x += RMSNorm(W_proj gate) */
    eng_matmul(e, L->pl_gate, T, e->x, e->ld_x, s->gate, n_pl);
    cv_be_glu(e->st, &gelu, T, n_pl, s->gate, n_pl, s->gate, n_pl, s->in + (int64_t)il * n_pl, s->ld);
    eng_matmul(e, L->pl_proj, T, s->gate, n_pl, e->tmp, e->ld_x);
    cv_be_rmsnorm(e->st, T, e->ld_x, e->tmp, e->ld_x, NULL, L->pl_post_norm, e->m->hp.rms_eps, e->tmp, e->ld_x);
    cv_be_add(e->st, T, e->ld_x, e->x, e->ld_x, e->x, e->ld_x, e->tmp, e->ld_x);
}
