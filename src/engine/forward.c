/* forward.c — the one forward pass every architecture runs. A batch holds
 * tokens of several sequences at different positions; every matmul takes
 * all of them at once (weights are read once per step for the whole
 * batch), row operations (norms, residual adds, scales, the soft cap) go
 * to the backend's stream as matmuls do, and attention reads each
 * sequence's own blocks. Each layer is a mixer and an
 * FFN of the kinds the model resolved at load; this file runs the residual
 * stream around them and leaves their math to their traits rows
 * (mix_attn.c, mix_deltanet.c, ffn_dense.c, ffn_moe.c):
 *
 * X [T][n_embd] starts as the rows' token embeddings (times the model's
 * embedding scale: the backend's embed_rows), then per layer:
 *   X += post_norm(mixer(rmsnorm(X) * attn_norm))
 *   X += post_norm(ffn(rmsnorm(X) * ffn_norm))
 *   X += the layer's per-layer input (gemma4 E2B/E4B: per_layer_in.c)
 *   X *= the layer's output scale (gemma4; 1 for the others)
 * where a post-norm (gemma's) is an RMSNorm with its own weight when the
 * layer has one and the identity otherwise; then
 * logits = (rmsnorm(X) * output_norm) Wout^T for the wanted rows only,
 * soft-capped where the model says (gemma4: c tanh(logits / c)) (and
 * rmsnorm(X) * output_norm itself for every row when the batch asks for
 * hidden states). */

#include "engine/engine_int.h"

const eng_kind *const eng_mixers[CV_MIXER_COUNT] = { [CV_MIXER_ATTN] = &eng_mix_attn,
                                                     [CV_MIXER_DELTANET] = &eng_mix_deltanet,
                                                     [CV_MIXER_MLA] = &eng_mix_mla };
const eng_kind *const eng_ffns[CV_FFN_COUNT] = { [CV_FFN_DENSE] = &eng_ffn_dense, [CV_FFN_MOE] = &eng_ffn_moe };

void eng_matmul(cv_engine *e, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y, int64_t ldy)
{
    const uint64_t t0 = eng_tick(e);
    cv_be_matmul(e->st, w, n_tok, x, ldx, y, ldy);
    e->prof_mm_ns += eng_tick(e) - t0;
    e->prof_runs++;
    e->prof_bytes += (double)w->bytes;
}

void eng_matmul_experts(cv_engine *e, cv_bmat *const *w, int32_t n_w, int64_t n_x, const float *x, int64_t ldx,
                        int64_t n_rows, const int32_t *which, const int32_t *src, float *y, int64_t ldy,
                        cv_experts_ws *ws)
{
    const uint64_t t0 = eng_tick(e);
    cv_be_matmul_experts(e->st, (const cv_bmat *const *)w, n_w, n_x, x, ldx, n_rows, which, src, y, ldy, ws);
    e->prof_mm_ns += eng_tick(e) - t0;
    e->prof_runs++;
}

/* n residual-stream rows normed into dst (gathered through rows unless
 * NULL), times w. */
static void rmsnorm_rows(cv_engine *e, int32_t n, const float *w, const float *src, float *dst, const int32_t *rows)
{
    cv_be_rmsnorm(e->st, n, e->ld_x, src, e->ld_x, rows, w, e->m->hp.rms_eps, dst, e->ld_x);
}

void eng_add_bias(cv_engine *e, float *rows, int64_t ld, int32_t n_rows, const float *bias, int64_t n)
{
    cv_be_add(e->st, n_rows, n, rows, ld, rows, ld, bias, 0);
}

/* ---- validation ---- */

/* Checks the whole batch before anything changes; fills e->new_len for
 * the sequences it touches (-1 for the others) and e->rows. */
static int check_batch(cv_engine *e, const cv_batch *b, int32_t *n_want, cv_err *err)
{
    const int32_t n_vocab = e->m->hp.n_vocab;
    if (b->n_tokens < 1 || b->n_tokens > e->p.n_batch)
        return cv_err_set(err, CV_EINVAL, "engine: batch of %d tokens, must be 1..%d", b->n_tokens, e->p.n_batch);
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        e->new_len[s] = -1;
    int32_t nw = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t s = b->seq[i];
        if (s < 0 || s >= e->p.n_seq_max || !e->seqs[s].open)
            return cv_err_set(err, CV_EINVAL, "engine: batch token %d names sequence %d, which is not open", i, s);
        if (b->token[i] < 0 || b->token[i] >= n_vocab)
            return cv_err_set(err, CV_EINVAL, "engine: batch token %d has id %d, must be 0..%d", i, b->token[i],
                              n_vocab - 1);
        if (e->new_len[s] < 0)
            e->new_len[s] = e->seqs[s].len;
        if (b->pos[i] != e->new_len[s])
            return cv_err_set(err, CV_EINVAL, "engine: batch token %d of sequence %d is at position %d, expected %d "
                              "(positions must continue the sequence in order)", i, s, b->pos[i], e->new_len[s]);
        if (e->new_len[s] >= e->p.n_ctx)
            return cv_err_set(err, CV_ELIMIT, "engine: sequence %d is full: its context holds %d positions", s,
                              e->p.n_ctx);
        e->new_len[s]++;
        bool want = b->want ? b->want[i] : i == b->n_tokens - 1;
        if (want) {
            if (nw == e->p.n_logits)
                return cv_err_set(err, CV_EINVAL, "engine: batch asks for more than %d rows of logits",
                                  e->p.n_logits);
            e->rows[nw++] = i;
        }
    }
    cv_mem_need need = { 0 };
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            kv_table_need(e, &e->seqs[s], e->new_len[s], &need);
    const int32_t short_by = cv_engine_mem_short(e, &need, NULL);
    if (short_by > 0)
        return cv_err_set(err, CV_ELIMIT, "engine: the KV cache is full: this batch needs %d blocks more than are free",
                          short_by);
    *n_want = nw;
    return 0;
}

/* ---- the pass ---- */

int cv_engine_forward(cv_engine *e, const cv_batch *b, const float **logits, int32_t *n_logits, cv_err *err)
{
    int32_t n_want = 0;
    int rc = check_batch(e, b, &n_want, err);
    if (rc)
        return rc;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            kv_table_grow(e, &e->seqs[s], e->new_len[s]);

    const cv_model *m = e->m;
    const int32_t T = b->n_tokens;
    const uint64_t t0 = eng_tick(e);
    e->prof_mm_ns = e->prof_att_ns = 0;
    e->prof_runs = 0;
    e->prof_bytes = 0;
    e->prof_experts = 0;

    const cv_gguf_tensor *te = m->tok_embd;
    cv_be_embed_rows(e->st, te->type, te->ne[0], te->data, te->ne[1], T, b->token, m->hp.embd_scale, e->x, e->ld_x);
    cv_engine_att_plan(e, b);
    if (e->pl)
        eng_pl_prepare(e, b);

    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        rmsnorm_rows(e, T, L->attn_norm, e->x, e->xn, NULL);
        eng_mixers[L->mixer]->forward(e, b, il);
        if (L->attn_post_norm)
            rmsnorm_rows(e, T, L->attn_post_norm, e->tmp, e->tmp, NULL);
        cv_be_add(e->st, T, e->ld_x, e->x, e->ld_x, e->x, e->ld_x, e->tmp, e->ld_x);
        rmsnorm_rows(e, T, L->ffn_norm, e->x, e->xn, NULL);
        eng_ffns[L->ffn]->forward(e, b, il);
        if (L->ffn_post_norm)
            rmsnorm_rows(e, T, L->ffn_post_norm, e->tmp, e->tmp, NULL);
        cv_be_add(e->st, T, e->ld_x, e->x, e->ld_x, e->x, e->ld_x, e->tmp, e->ld_x);
        if (L->pl_gate)
            eng_pl_layer(e, b, il);
        if (L->out_scale != 1.0f)
            cv_be_scale(e->st, T, e->ld_x, e->x, e->ld_x, L->out_scale);
    }

    if (e->keep_hidden) /* into xn, free once the last layer has read it */
        rmsnorm_rows(e, T, m->output_norm, e->x, e->xn, NULL);
    if (n_want > 0) {
        rmsnorm_rows(e, n_want, m->output_norm, e->x, e->xo, e->rows);
        eng_matmul(e, m->output, n_want, e->xo, e->ld_x, e->logits, m->hp.n_vocab);
        if (m->hp.logit_softcap > 0) /* gemma4: c tanh(logits / c) */
            cv_be_softcap(e->st, n_want, m->hp.n_vocab, e->logits, m->hp.n_vocab, m->hp.logit_softcap);
    }

    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            e->seqs[s].len = e->new_len[s];
    e->stats.weight_bytes = e->prof_bytes;
    e->stats.experts_read = e->prof_experts;
    if (e->profiling) {
        double total = (double)(eng_tick(e) - t0) * 1e-9;
        e->stats = (cv_engine_stats){
            .t_total = total,
            .t_matmul = (double)e->prof_mm_ns * 1e-9,
            .t_attention = (double)e->prof_att_ns * 1e-9,
            .t_other = total - (double)(e->prof_mm_ns + e->prof_att_ns) * 1e-9,
            .n_tokens = T,
            .n_pool_runs = e->prof_runs,
            .weight_bytes = e->prof_bytes,
            .experts_read = e->prof_experts,
        };
    }
    *logits = e->logits;
    *n_logits = n_want;
    return 0;
}

void cv_engine_keep_hidden(cv_engine *e, bool on) { e->keep_hidden = on; }
const float *cv_engine_hidden(const cv_engine *e) { return e->xn; }
