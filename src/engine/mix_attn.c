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
 * multiplied by sigmoid(g) before W_o.
 *
 * Everything between the projections and attention (the gate split,
 * biases, norms, RoPE, the query temperature, the K/V store) is one pass of
 * the backend's (cv_batt_rows, attn_rows), fed the layer's data and each
 * row's cache block; the attention itself another (cv_batt, attention), fed
 * the call's plan (attention.c). */
#include <stdlib.h>

#include "engine/engine_int.h"

static int32_t gcd(int32_t a, int32_t b)
{
    while (b) {
        const int32_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static void attn_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_qkv; i++)
        eng_matmul(e, L->qkv[i].w, T, e->xn, e->ld_x, e->qkv + L->qkv[i].col, e->ld_qkv);
    const cv_hparams *hp = &e->m->hp;
    const bool own_kv = L->kv_src == il; /* else an earlier layer's K/V, already cached */
    if (own_kv)
        for (int32_t t = 0; t < T; t++)
            e->att_kv_block[t] = eng_layer_table(e, il, &e->seqs[b->seq[t]])[b->pos[t] / CV_KV_BLOCK];
    const cv_batt_rows rows = {
        .n_rows = T,
        .qkv = e->qkv,
        .ld_qkv = e->ld_qkv,
        .gate = e->gate,
        .ld_gate = e->ld_q,
        .n_head = hp->n_head,
        .n_head_kv = L->n_head_kv,
        .head_dim = L->head_dim,
        .gated = L->attn_gate,
        .v_from_k = L->v_from_k,
        .v_norm = L->v_norm,
        .store_kv = own_kv,
        .q_bias = L->q_bias,
        .k_bias = L->k_bias,
        .v_bias = L->v_bias,
        .q_norm = L->q_norm,
        .k_norm = L->k_norm,
        .eps = hp->rms_eps,
        .rope = &L->rope,
        .pos = b->pos,
        .temp_scale = hp->attn_temp_scale,
        .temp_len = hp->attn_temp_len,
        .kv = eng_layer_pool(e, il),
        .kv_layer = e->kv_layer[il],
        .kv_block = e->att_kv_block,
    };
    cv_be_attn_rows(e->st, &rows);

    const uint64_t t0 = eng_tick(e);
    cv_engine_attention(e, il);
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;

    if (L->attn_gate) /* the heads' outputs times sigmoid of their gates */
        cv_be_sigmoid_mul(e->st, T, (int64_t)hp->n_head * L->head_dim, e->attn, e->ld_q, e->attn, e->ld_q, e->gate,
                          e->ld_q);
    eng_matmul(e, L->wo, T, e->attn, e->ld_q, e->tmp, e->ld_x);
    if (L->o_bias)
        eng_add_bias(e, e->tmp, e->ld_x, T, L->o_bias, e->ld_x);
}

static int attn_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    /* rows as wide as the widest layer's (gemma4's layers differ); the
     * attention workspace for the tiles of the widest, one tile kernel that
     * every layer's head size takes (their common divisor's) */
    bool gated = false;
    e->ld_qkv = e->ld_q = 0;
    cv_att_ws_shape shape = { .n_slots = e->att_n_slots };
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &e->m->layers[il];
        if (L->mixer != CV_MIXER_ATTN)
            continue;
        const int64_t n_q = (int64_t)hp->n_head * L->head_dim, n_kv = (int64_t)L->n_head_kv * L->head_dim;
        gated |= L->attn_gate;
        e->ld_qkv = CV_MAX(e->ld_qkv, (L->attn_gate ? 2 : 1) * n_q + 2 * n_kv);
        e->ld_q = CV_MAX(e->ld_q, n_q);
        shape.max_rows = CV_MAX(shape.max_rows, e->att_tile_tokens * (hp->n_head / L->n_head_kv));
        shape.max_hd = CV_MAX(shape.max_hd, L->head_dim);
        shape.max_hd_v = CV_MAX(shape.max_hd_v, L->head_dim);
        shape.hd_div = gcd(shape.hd_div, L->head_dim);
    }
    if (!(e->qkv = eng_rows_alloc(e, e->p.n_batch, e->ld_qkv, err)) ||
        !(e->attn = eng_rows_alloc(e, e->p.n_batch, e->ld_q, err)) ||
        (gated && !(e->gate = eng_rows_alloc(e, e->p.n_batch, e->ld_q, err))))
        return CV_ENOMEM;
    if (!(e->att_ws = cv_be_attention_ws_create(e->st, &shape)))
        return cv_err_set(err, CV_ENOMEM, "engine: the %s backend made no attention workspace",
                          cv_backend_name(e->m->be));
    e->att_kv_block = cv_xmalloc((size_t)e->p.n_batch * sizeof *e->att_kv_block);
    return 0;
}

static void attn_fini(cv_engine *e)
{
    eng_rows_free(e, e->qkv);
    eng_rows_free(e, e->attn);
    eng_rows_free(e, e->gate);
    free(e->att_kv_block);
    cv_be_attention_ws_destroy(e->st, e->att_ws);
}

const eng_kind eng_mix_attn = {
    .name = "attention",
    .init = attn_init,
    .fini = attn_fini,
    .forward = attn_forward,
};
