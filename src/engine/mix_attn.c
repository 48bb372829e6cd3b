/* mix_attn.c — the attention mixer: Q|K|V projections (fused at load when
 * their dtypes allow), bias, per-head Q/K RMSNorm, RoPE at each row's
 * position, the K/V cache write, attention over each sequence's blocks
 * (attention.c: within the layer's window, with its sinks), an optional
 * per-head output gate, and the output projection with its bias. What
 * varies between architectures is data in the bound layer (a bias, a norm
 * or sinks present or not, the window, the layer's RoPE, a gate) or the
 * model (a query temperature: each query scaled after RoPE by its
 * position's factor, mistral3), never a branch on a name.
 *
 * The gate (cv_layer.attn_gate, Qwen3.5's gated attention) is data on this
 * kind rather than a kind of its own: it changes only where q sits in the
 * projection's row and one elementwise product after attention. Its q
 * projection gives each head's query then its gate g (2 n_q values); the
 * gates move to e->gate and the queries close up to the row's first n_q
 * values, where attention reads them, and the heads' outputs are
 * multiplied by sigmoid(g) before W_o. */
#include <math.h>

#include "engine/engine_int.h"

typedef struct qkv_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t layer;
    int32_t n_rows;
} qkv_job;

/* Bias, per-head Q/K norm, RoPE, and the cache write of each row's K/V. */
static void rows_post_qkv(void *ctx, int ith, int nth)
{
    qkv_job *j = ctx;
    cv_engine *e = j->e;
    const cv_model *m = e->m;
    const cv_hparams *hp = &m->hp;
    const cv_layer *L = &m->layers[j->layer];
    const cv_vec_ops *vec = e->vec;
    const kv_pool *kv = eng_layer_pool(e, j->layer);
    const int32_t hd = L->head_dim, n_head_kv = L->n_head_kv, kl = e->kv_layer[j->layer];
    const int64_t n_q = (int64_t)hp->n_head * hd, n_kv = (int64_t)n_head_kv * hd;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    const bool own_kv = L->kv_src == j->layer; /* else an earlier layer's K/V, already cached */
    for (int64_t t = lo; t < hi; t++) {
        float *q = e->qkv + t * e->ld_qkv, *k = q + (L->attn_gate ? 2 : 1) * n_q, *v = k + n_kv;
        if (L->v_from_k) /* gemma4's K=V layers: V is K as projected */
            memcpy(v, k, (size_t)n_kv * sizeof(float));
        if (L->attn_gate) {
            /* [query h | gate h] per head -> queries in order, gates apart;
             * query h moves down to h * hd, never over one not yet moved */
            for (int32_t h = 0; h < hp->n_head; h++) {
                memcpy(e->gate + t * e->ld_q + (int64_t)h * hd, q + (2 * (int64_t)h + 1) * hd, (size_t)hd * sizeof(float));
                memmove(q + (int64_t)h * hd, q + 2 * (int64_t)h * hd, (size_t)hd * sizeof(float));
            }
        }
        if (L->q_bias) vec->add(q, q, L->q_bias, n_q);
        if (L->k_bias) vec->add(k, k, L->k_bias, n_kv);
        if (L->v_bias) vec->add(v, v, L->v_bias, n_kv);
        if (L->q_norm)
            for (int32_t h = 0; h < hp->n_head; h++)
                vec->rmsnorm(q + (int64_t)h * hd, q + (int64_t)h * hd, L->q_norm, hd, hp->rms_eps);
        if (L->k_norm)
            for (int32_t h = 0; h < n_head_kv; h++)
                vec->rmsnorm(k + (int64_t)h * hd, k + (int64_t)h * hd, L->k_norm, hd, hp->rms_eps);
        if (L->v_norm && own_kv)
            for (int32_t h = 0; h < n_head_kv; h++)
                vec->rmsnorm(v + (int64_t)h * hd, v + (int64_t)h * hd, NULL, hd, hp->rms_eps);
        const int32_t pos = j->b->pos[t];
        vec->rope(&L->rope, q, hp->n_head, hd, pos);
        if (hp->attn_temp_scale > 0) /* in f32, in llama.cpp's order */
            vec->scale(q, logf(floorf((float)pos / (float)hp->attn_temp_len) + 1.0f) * hp->attn_temp_scale + 1.0f,
                       n_q);
        if (!own_kv)
            continue;
        vec->rope(&L->rope, k, n_head_kv, hd, pos);
        const int32_t blk = eng_layer_table(e, j->layer, &e->seqs[j->b->seq[t]])[pos / CV_KV_BLOCK];
        const int32_t at = pos % CV_KV_BLOCK;
        for (int32_t g = 0; g < n_head_kv; g++) {
            const float *kg = k + (int64_t)g * hd, *vg = v + (int64_t)g * hd;
            kv_store(kv, vec, kv_k(kv, blk, kl, g), kv_v(kv, blk, kl, g), at, kg, vg);
        }
    }
}

static void attn_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_qkv; i++)
        eng_matmul(e, L->qkv[i].w, T, e->xn, e->ld_x, e->qkv + L->qkv[i].col, e->ld_qkv);
    qkv_job j = { .e = e, .b = b, .layer = il, .n_rows = T };
    eng_run_rows(e, T, rows_post_qkv, &j);

    const uint64_t t0 = eng_tick(e);
    cv_engine_attention(e, il);
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;

    if (L->attn_gate) /* the heads' outputs times sigmoid of their gates */
        cv_be_sigmoid_mul(e->st, T, (int64_t)e->m->hp.n_head * L->head_dim, e->attn, e->ld_q, e->attn, e->ld_q, e->gate,
                          e->ld_q);
    eng_matmul(e, L->wo, T, e->attn, e->ld_q, e->tmp, e->ld_x);
    if (L->o_bias)
        eng_add_bias(e, e->tmp, e->ld_x, T, L->o_bias, e->ld_x);
}

static int attn_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    /* rows as wide as the widest layer's (gemma4's layers differ) */
    bool gated = false;
    e->ld_qkv = e->ld_q = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &e->m->layers[il];
        if (L->mixer != CV_MIXER_ATTN)
            continue;
        const int64_t n_q = (int64_t)hp->n_head * L->head_dim, n_kv = (int64_t)L->n_head_kv * L->head_dim;
        gated |= L->attn_gate;
        e->ld_qkv = CV_MAX(e->ld_qkv, (L->attn_gate ? 2 : 1) * n_q + 2 * n_kv);
        e->ld_q = CV_MAX(e->ld_q, n_q);
    }
    if (!(e->qkv = eng_rows_alloc(e, e->p.n_batch, e->ld_qkv, err)) ||
        !(e->attn = eng_rows_alloc(e, e->p.n_batch, e->ld_q, err)) ||
        (gated && !(e->gate = eng_rows_alloc(e, e->p.n_batch, e->ld_q, err))))
        return CV_ENOMEM;
    return 0;
}

static void attn_fini(cv_engine *e)
{
    eng_rows_free(e, e->qkv);
    eng_rows_free(e, e->attn);
    eng_rows_free(e, e->gate);
}

const eng_kind eng_mix_attn = {
    .name = "attention",
    .init = attn_init,
    .fini = attn_fini,
    .forward = attn_forward,
};
