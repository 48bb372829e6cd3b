/* engine.c — creating and destroying an engine: resolving and validating
 * its parameters against the model and base/limits.h, and allocating once
 * everything a forward call uses (a KV pool per layer group over the
 * layers that attend, the per-sequence block tables and recurrent-state
 * slots, the residual stream and logits rows, the attention plans, each
 * layer kind's own scratch through its traits row, and gemma4's per-layer
 * inputs), so that the forward pass itself never allocates. */
#include <stdlib.h>

#include "engine/engine_int.h"

void *eng_mem_alloc(cv_engine *e, size_t n_bytes, cv_err *err)
{
    void *p = cv_be_rows_alloc(e->m->be, n_bytes);
    if (!p)
        cv_err_set(err, CV_ENOMEM, "engine: the %s backend has no room for %zu bytes of activation rows",
                   cv_backend_name(e->m->be), n_bytes);
    return p;
}

float *eng_rows_alloc(cv_engine *e, int64_t n_rows, int64_t ld, cv_err *err)
{
    return eng_mem_alloc(e, (size_t)n_rows * (size_t)ld * sizeof(float), err);
}

void eng_rows_free(cv_engine *e, void *rows) { cv_be_rows_free(e->m->be, rows); }

static cv_bact act_of(const cv_hparams *hp)
{
    switch (hp->glu) {
    case CV_GLU_GELU_TANH: return (cv_bact){ .kind = CV_BGLU_GELU_TANH };
    case CV_GLU_SILU_CLAMPED:
        return (cv_bact){ .kind = CV_BGLU_SILU_CLAMPED, .alpha = hp->glu_alpha, .limit = hp->glu_limit };
    case CV_GLU_SILU: break;
    }
    return (cv_bact){ .kind = CV_BGLU_SILU };
}

static int resolve_params(const cv_model *m, const cv_engine_params *in, cv_engine_params *p, cv_err *err)
{
    *p = in ? *in : (cv_engine_params){ 0 };
    if (p->n_threads <= 0)
        p->n_threads = cv_cpu_count();
    if (p->n_threads > 1024)
        return cv_err_set(err, CV_EINVAL, "engine: %d threads, must be 1..1024", p->n_threads);
    if (p->n_ctx <= 0)
        p->n_ctx = CV_MIN(m->hp.n_ctx_train, 4096);
    if (p->n_ctx > CV_MAX_CONTEXT)
        return cv_err_set(err, CV_ELIMIT, "engine: context of %d positions exceeds the limit of %d", p->n_ctx,
                          CV_MAX_CONTEXT);
    if (p->n_seq_max <= 0)
        p->n_seq_max = 1;
    if (p->n_seq_max > CV_MAX_SEQS)
        return cv_err_set(err, CV_ELIMIT, "engine: %d sequences exceed the limit of %d", p->n_seq_max, CV_MAX_SEQS);
    if (p->n_kv_tokens <= 0) { /* every sequence its whole context, in whole blocks */
        int64_t t = (int64_t)(p->n_ctx + CV_KV_BLOCK - 1) / CV_KV_BLOCK * CV_KV_BLOCK * p->n_seq_max;
        p->n_kv_tokens = (int32_t)CV_MIN(t, (int64_t)INT32_MAX - CV_KV_BLOCK);
    }
    if (p->n_batch <= 0)
        p->n_batch = 512;
    if (p->n_batch > CV_MAX_BATCH_TOKENS)
        return cv_err_set(err, CV_ELIMIT, "engine: batch of %d tokens exceeds the limit of %d", p->n_batch,
                          CV_MAX_BATCH_TOKENS);
    if (p->n_logits <= 0)
        p->n_logits = CV_MAX(p->n_seq_max, 8);
    if (p->n_logits > p->n_batch)
        p->n_logits = p->n_batch;
    if (p->kv_type != CV_GGML_F32 && p->kv_type != CV_GGML_F16 && p->kv_type != CV_GGML_Q8_0)
        return cv_err_set(err, CV_EINVAL, "engine: KV cache type %u, must be f32 (%d), f16 (%d) or q8_0 (%d)",
                          p->kv_type, CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0);
    return 0;
}

int cv_engine_create(const cv_model *m, const cv_engine_params *params, cv_engine **out, cv_err *err)
{
    *out = NULL;
    cv_engine_params p;
    int rc = resolve_params(m, params, &p, err);
    if (rc)
        return rc;
    const cv_hparams *hp = &m->hp;
    int64_t n_blocks = ((int64_t)p.n_kv_tokens + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    /* Refuse what cannot be addressed before asking the OS. */
    double kv_bytes = (double)n_blocks * (double)cv_engine_kv_block_bytes(m, p.kv_type);
    if (kv_bytes > (double)(1ull << 46))
        return cv_err_set(err, CV_ELIMIT, "engine: a KV cache of %d tokens would take %.0f GiB", p.n_kv_tokens,
                          kv_bytes / (1ull << 30));

    cv_engine *e = cv_xcalloc(1, sizeof *e);
    e->m = m;
    e->p = p;
    e->act = act_of(hp);
    if ((rc = cv_bstream_create(m->be, p.n_threads, &e->st, err)))
        goto fail;
    e->pool = cv_bstream_cpu_pool(e->st);
    if (!e->pool) {
        rc = cv_err_set(err, CV_EUNSUPPORTED, "engine: the %s backend cannot run the forward pass yet",
                        cv_backend_name(m->be));
        goto fail;
    }
    e->n_threads = cv_bstream_threads(e->st);
    int32_t n_mats;
    const cv_bmat *const *mats = cv_model_mats(m, &n_mats);
    cv_bstream_reserve(e->st, mats, n_mats, p.n_batch);
    /* Every group's pool has the same count of blocks: group 0's holds one
     * for every block of positions held, the window group's no more, and a
     * pool costs only the pages it touches. */
    int32_t *group = cv_xmalloc((size_t)hp->n_layer * sizeof *group);
    e->kv_layer = cv_xmalloc((size_t)hp->n_layer * sizeof *e->kv_layer);
    e->kv_group = cv_xmalloc((size_t)hp->n_layer * sizeof *e->kv_group);
    const eng_kv_groups g = eng_kv_group_layers(m, group, e->kv_layer);
    for (int32_t il = 0; il < hp->n_layer; il++)
        e->kv_group[il] = (int8_t)group[il];
    free(group);
    if (g.odd_layer >= 0) {
        const cv_layer *L = &m->layers[g.odd_layer];
        const int32_t k = L->n_swa > 0;
        rc = cv_err_set(err, CV_EUNSUPPORTED, "engine: layer %d keeps %d kv heads of %d, the other %s layers %d of "
                        "%d; corvid holds one head size per layer group", g.odd_layer, L->n_head_kv, L->head_dim,
                        k ? "window" : "full", g.n_head_kv[k], g.head_dim[k]);
        goto fail;
    }
    e->n_groups = g.n_layer[1] > 0 ? 2 : 1;
    e->kv_window = g.window;
    for (int32_t k = 0; k < e->n_groups; k++) {
        if ((rc = kv_pool_init(&e->kv[k], (int32_t)n_blocks, g.n_layer[k], cv_kv_parts(hp), g.n_head_kv[k],
                               g.head_dim[k], p.kv_type, err)))
            goto fail;
        e->kv_committed += kv_pool_commit_first_run(&e->kv[k]);
    }
    e->max_blocks = (p.n_ctx + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    e->seqs = cv_xcalloc((size_t)p.n_seq_max, sizeof *e->seqs);
    for (int32_t i = 0; i < p.n_seq_max; i++)
        for (int32_t k = 0; k < e->n_groups; k++)
            e->seqs[i].blocks[k] = cv_xmalloc((size_t)e->max_blocks * sizeof(int32_t));
    e->new_len = cv_xmalloc((size_t)p.n_seq_max * sizeof(int32_t));

    e->ld_x = hp->n_embd;
    if (!(e->x = eng_rows_alloc(e, p.n_batch, e->ld_x, err)) || !(e->xn = eng_rows_alloc(e, p.n_batch, e->ld_x, err)) ||
        !(e->tmp = eng_rows_alloc(e, p.n_batch, e->ld_x, err)) ||
        !(e->xo = eng_rows_alloc(e, p.n_logits, e->ld_x, err)) ||
        !(e->logits = eng_rows_alloc(e, p.n_logits, hp->n_vocab, err))) {
        rc = CV_ENOMEM;
        goto fail;
    }
    e->rows = cv_xmalloc((size_t)p.n_logits * sizeof(int32_t));
    /* Attention tiles: as many tokens as keep a tile's accumulators and
     * queries (2 x rows x head_dim floats) within ~16 KiB of L1, for the
     * widest layer (the kinds make the backend's workspace for them). */
    int32_t rep_hd = 1;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        if (L->mixer == CV_MIXER_ATTN || L->mixer == CV_MIXER_MLA)
            rep_hd = CV_MAX(rep_hd, hp->n_head / L->n_head_kv * L->head_dim);
    }
    e->att_tile_tokens = CV_MAX(1, CV_MIN(16, 2048 / rep_hd));
    e->att_tiles = cv_xmalloc((size_t)p.n_batch * sizeof *e->att_tiles);
    e->att_rows = cv_xmalloc((size_t)p.n_batch * sizeof *e->att_rows);
    e->att_seq_start = cv_xmalloc(((size_t)p.n_seq_max + 1) * sizeof *e->att_seq_start);
    e->att_n_slots = e->n_threads > 1 ? 32 * e->n_threads : 0;
    for (int32_t k = 0; k < e->n_groups; k++) {
        e->att_tables[k] = cv_xmalloc((size_t)p.n_seq_max * sizeof *e->att_tables[k]);
        for (int32_t i = 0; i < p.n_seq_max; i++)
            e->att_tables[k][i] = e->seqs[i].blocks[k];
    }
    cv_engine_att_plans_init(e);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        e->kinds_used[0] |= 1u << m->layers[il].mixer;
        e->kinds_used[1] |= 1u << m->layers[il].ffn;
    }
    for (int k = 0; k < CV_MIXER_COUNT; k++)
        if ((e->kinds_used[0] >> k & 1) && (rc = eng_mixers[k]->init(e, err)))
            goto fail;
    for (int k = 0; k < CV_FFN_COUNT; k++)
        if ((e->kinds_used[1] >> k & 1) && (rc = eng_ffns[k]->init(e, err)))
            goto fail;
    if (m->pl_model_proj && (rc = eng_pl_init(e, err)))
        goto fail;
    if ((rc = eng_state_init(e, err)))
        goto fail;
    *out = e;
    return 0;
fail:
    cv_engine_destroy(e);
    return rc;
}

void cv_engine_destroy(cv_engine *e)
{
    if (!e)
        return;
    /* A failed init leaves later kinds unallocated: fini only what ran.
     * Each fini frees what its init set, and tolerates NULL fields. */
    for (int k = 0; k < CV_MIXER_COUNT; k++)
        if (e->kinds_used[0] >> k & 1)
            eng_mixers[k]->fini(e);
    for (int k = 0; k < CV_FFN_COUNT; k++)
        if (e->kinds_used[1] >> k & 1)
            eng_ffns[k]->fini(e);
    eng_state_fini(e);
    eng_pl_fini(e);
    for (int32_t k = 0; k < CV_MEM_MAX_GROUPS; k++)
        kv_pool_fini(&e->kv[k]);
    free(e->kv_layer);
    free(e->kv_group);
    if (e->seqs)
        for (int32_t i = 0; i < e->p.n_seq_max; i++)
            for (int32_t k = 0; k < CV_MEM_MAX_GROUPS; k++)
                free(e->seqs[i].blocks[k]);
    free(e->seqs);
    free(e->new_len);
    float *rows[] = { e->x, e->xn, e->tmp, e->xo, e->logits };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++)
        eng_rows_free(e, rows[i]);
    free(e->rows);
    free(e->att_tiles);
    free(e->att_rows);
    free(e->att_seq_start);
    for (int32_t k = 0; k < CV_MEM_MAX_GROUPS; k++)
        free(e->att_tables[k]);
    cv_engine_att_plans_fini(e);
    cv_bstream_destroy(e->st);
    free(e);
}

const cv_model *cv_engine_model(const cv_engine *e) { return e->m; }
const cv_engine_params *cv_engine_params_get(const cv_engine *e) { return &e->p; }
cv_pool *cv_engine_pool(cv_engine *e) { return e->pool; }
void cv_engine_set_threads(cv_engine *e, int32_t n) { cv_bstream_set_threads(e->st, n); }
void cv_engine_set_profiling(cv_engine *e, bool on) { e->profiling = on; }
const cv_engine_stats *cv_engine_last_stats(const cv_engine *e) { return &e->stats; }
