/* forward.c — the one forward pass every architecture runs. A batch holds
 * tokens of several sequences at different positions; every matmul takes
 * all of them at once (weights are read once per step for the whole
 * batch), per-token work (norms, bias, Q/K norm, RoPE, cache writes,
 * SwiGLU) is split over the compute pool by rows, and attention reads each
 * sequence's own blocks. What varies between architectures is data in the
 * bound cv_model (a bias present or not, a Q/K norm present or not, the
 * RoPE style and factors, a tied output), never a branch on a name.
 *
 * Per block, for the batch's rows X [T][n_embd]:
 *   Xn = rmsnorm(X) * attn_norm
 *   Q|K|V = Xn Wqkv^T (+ bias)        one or three matmuls (fused at load)
 *   Q, K = rmsnorm per head (qwen3), RoPE at each row's position
 *   cache[seq][pos] = K, V ; A = attention(Q, cache)
 *   X += A Wo^T
 *   Xn = rmsnorm(X) * ffn_norm ; G|U = Xn Wgu^T ; X += (silu(G) * U) Wdown^T
 * then logits = (rmsnorm(X) * output_norm) Wout^T for the wanted rows only. */
#include <math.h>

#include "engine/engine_int.h"

/* ---- per-row work on the pool ---- */

typedef struct row_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t layer;
    int32_t n_rows;
    const float *norm_w; /* rmsnorm: weight */
    const float *src;    /* rmsnorm: input rows (ld_x apart) */
    float *dst;          /* rmsnorm: output rows (ld_x apart) */
    const int32_t *rows; /* rmsnorm: gather src rows through this map (NULL: identity) */
} row_job;

/* Small batches run inline: waking the pool costs more than the work. */
static void run_rows(cv_engine *e, int32_t n_rows, cv_pool_fn fn, row_job *j)
{
    j->n_rows = n_rows;
    if (n_rows < 4 || e->n_threads == 1)
        fn(j, 0, 1);
    else
        cv_pool_run(e->pool, fn, j);
}

static void rows_rmsnorm(void *ctx, int ith, int nth)
{
    row_job *j = ctx;
    cv_engine *e = j->e;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t s = j->rows ? j->rows[t] : t;
        e->vec->rmsnorm(j->dst + t * e->ld_x, j->src + s * e->ld_x, j->norm_w, e->ld_x, e->m->hp.rms_eps);
    }
}

/* Bias, per-head Q/K norm, RoPE, and the cache write of each row's K/V. */
static void rows_post_qkv(void *ctx, int ith, int nth)
{
    row_job *j = ctx;
    cv_engine *e = j->e;
    const cv_model *m = e->m;
    const cv_hparams *hp = &m->hp;
    const cv_layer *L = &m->layers[j->layer];
    const cv_vec_ops *vec = e->vec;
    const kv_pool *kv = &e->kv;
    const int32_t hd = hp->head_dim;
    const int64_t n_q = (int64_t)hp->n_head * hd, n_kv = (int64_t)hp->n_head_kv * hd;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *q = e->qkv + t * e->ld_qkv, *k = q + n_q, *v = k + n_kv;
        if (L->q_bias) vec->add(q, q, L->q_bias, n_q);
        if (L->k_bias) vec->add(k, k, L->k_bias, n_kv);
        if (L->v_bias) vec->add(v, v, L->v_bias, n_kv);
        if (L->q_norm)
            for (int32_t h = 0; h < hp->n_head; h++)
                vec->rmsnorm(q + (int64_t)h * hd, q + (int64_t)h * hd, L->q_norm, hd, hp->rms_eps);
        if (L->k_norm)
            for (int32_t h = 0; h < hp->n_head_kv; h++)
                vec->rmsnorm(k + (int64_t)h * hd, k + (int64_t)h * hd, L->k_norm, hd, hp->rms_eps);
        const int32_t pos = j->b->pos[t];
        vec->rope(&m->rope, q, hp->n_head, hd, pos);
        vec->rope(&m->rope, k, hp->n_head_kv, hd, pos);
        const int32_t blk = e->seqs[j->b->seq[t]].blocks[pos / CV_KV_BLOCK], at = pos % CV_KV_BLOCK;
        for (int32_t g = 0; g < hp->n_head_kv; g++) {
            const float *kg = k + (int64_t)g * hd, *vg = v + (int64_t)g * hd;
            kv_store(kv, vec, kv_k(kv, blk, j->layer, g), kv_v(kv, blk, j->layer, g), at, kg, vg);
        }
    }
}

static void rows_swiglu(void *ctx, int ith, int nth)
{
    row_job *j = ctx;
    cv_engine *e = j->e;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *g = e->gu + t * e->ld_gu;
        e->vec->swiglu(e->ff + t * e->ld_ff, g, g + e->ld_ff, e->ld_ff);
    }
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
    int64_t need = 0;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            need += cv_engine_kv_blocks_needed(e, s, e->new_len[s]);
    if (need > e->kv.n_free)
        return cv_err_set(err, CV_ELIMIT, "engine: the KV cache is full: this batch needs %lld blocks, %d are free",
                          (long long)need, e->kv.n_free);
    *n_want = nw;
    return 0;
}

/* ---- the pass ---- */

static inline uint64_t tick(const cv_engine *e) { return e->profiling ? cv_now_ns() : 0; }

int cv_engine_forward(cv_engine *e, const cv_batch *b, const float **logits, int32_t *n_logits, cv_err *err)
{
    int32_t n_want = 0;
    int rc = check_batch(e, b, &n_want, err);
    if (rc)
        return rc;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            cv_engine_kv_grow(e, s, e->new_len[s]);

    const cv_model *m = e->m;
    const cv_hparams *hp = &m->hp;
    const int32_t T = b->n_tokens;
    cv_pool *pool = e->pool;
    uint64_t t_mm = 0, t_att = 0, t0 = tick(e), t1;
    int32_t runs = 0;
#define MATMUL(stmt)              \
    do {                          \
        t1 = tick(e);             \
        stmt;                     \
        t_mm += tick(e) - t1;     \
        runs++;                   \
    } while (0)

    for (int32_t t = 0; t < T; t++)
        cv_model_embed(m, b->token[t], e->x + (int64_t)t * e->ld_x);
    cv_engine_att_plan(e, b);

    row_job j = { .e = e, .b = b };
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        j.layer = il;

        j.norm_w = L->attn_norm, j.src = e->x, j.dst = e->xn, j.rows = NULL;
        run_rows(e, T, rows_rmsnorm, &j);
        for (int32_t i = 0; i < L->n_qkv; i++)
            MATMUL(cv_matmul_strided(pool, L->qkv[i].w, T, e->xn, e->ld_x, e->qkv + L->qkv[i].col, e->ld_qkv));
        run_rows(e, T, rows_post_qkv, &j);

        t1 = tick(e);
        cv_engine_attention(e, il);
        t_att += tick(e) - t1;
        runs++;

        MATMUL(cv_matmul(pool, L->wo, T, e->attn, e->tmp));
        e->vec->add(e->x, e->x, e->tmp, (int64_t)T * e->ld_x);

        j.norm_w = L->ffn_norm, j.src = e->x, j.dst = e->xn, j.rows = NULL;
        run_rows(e, T, rows_rmsnorm, &j);
        for (int32_t i = 0; i < L->n_gate_up; i++)
            MATMUL(cv_matmul_strided(pool, L->gate_up[i].w, T, e->xn, e->ld_x, e->gu + L->gate_up[i].col,
                                     e->ld_gu));
        run_rows(e, T, rows_swiglu, &j);
        MATMUL(cv_matmul(pool, L->w_down, T, e->ff, e->tmp));
        e->vec->add(e->x, e->x, e->tmp, (int64_t)T * e->ld_x);
    }

    if (n_want > 0) {
        j.norm_w = m->output_norm, j.src = e->x, j.dst = e->xo, j.rows = e->rows;
        run_rows(e, n_want, rows_rmsnorm, &j);
        MATMUL(cv_matmul(pool, m->output, n_want, e->xo, e->logits));
    }
#undef MATMUL

    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            e->seqs[s].len = e->new_len[s];
    if (e->profiling) {
        double total = (double)(tick(e) - t0) * 1e-9;
        e->stats = (cv_engine_stats){
            .t_total = total,
            .t_matmul = (double)t_mm * 1e-9,
            .t_attention = (double)t_att * 1e-9,
            .t_other = total - (double)(t_mm + t_att) * 1e-9,
            .n_tokens = T,
            .n_pool_runs = runs,
        };
    }
    *logits = e->logits;
    *n_logits = n_want;
    return 0;
}
