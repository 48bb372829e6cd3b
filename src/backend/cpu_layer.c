/* cpu_layer.c — the CPU backend's layer passes: the per-row work of a
 * layer kind between its matmuls, one table operation each (the attention
 * mixer's Q/K/V preparation and K/V store, the MoE router's choice of
 * experts, the MoE layer's per-route activation and weighted sum, the
 * token embedding's rows). Each is the loop the engine
 * ran before it moved behind the table, over the kernels layer's vector
 * loops of the process's level, so a row's bits are the same as they
 * were, alone or in a batch, on one thread or several (rows split whole,
 * cpu_run_rows). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "backend/cpu_int.h"

/* ---- the attention mixer's rows ---- */

typedef struct attn_rows_job {
    const cv_vec_ops *vec;
    const cv_batt_rows *a;
} attn_rows_job;

static void attn_rows_part(void *ctx, int ith, int nth)
{
    const attn_rows_job *j = ctx;
    const cv_batt_rows *a = j->a;
    const cv_vec_ops *vec = j->vec;
    const int32_t hd = a->head_dim;
    const int64_t n_q = (int64_t)a->n_head * hd, n_kv = (int64_t)a->n_head_kv * hd;
    int64_t lo, hi;
    cv_split_range(a->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *q = a->qkv + t * a->ld_qkv, *k = q + (a->gated ? 2 : 1) * n_q, *v = k + n_kv;
        if (a->v_from_k) /* gemma4's K=V layers: V is K as projected */
            memcpy(v, k, (size_t)n_kv * sizeof(float));
        if (a->gated) {
            /* [query h | gate h] per head -> queries in order, gates apart;
             * query h moves down to h * hd, never over one not yet moved */
            for (int32_t h = 0; h < a->n_head; h++) {
                memcpy(a->gate + t * a->ld_gate + (int64_t)h * hd, q + (2 * (int64_t)h + 1) * hd,
                       (size_t)hd * sizeof(float));
                memmove(q + (int64_t)h * hd, q + 2 * (int64_t)h * hd, (size_t)hd * sizeof(float));
            }
        }
        if (a->q_bias)
            vec->add(q, q, a->q_bias, n_q);
        if (a->k_bias)
            vec->add(k, k, a->k_bias, n_kv);
        if (a->v_bias)
            vec->add(v, v, a->v_bias, n_kv);
        if (a->q_norm)
            for (int32_t h = 0; h < a->n_head; h++)
                vec->rmsnorm(q + (int64_t)h * hd, q + (int64_t)h * hd, a->q_norm, hd, a->eps);
        if (a->k_norm)
            for (int32_t h = 0; h < a->n_head_kv; h++)
                vec->rmsnorm(k + (int64_t)h * hd, k + (int64_t)h * hd, a->k_norm, hd, a->eps);
        if (a->v_norm && a->store_kv)
            for (int32_t h = 0; h < a->n_head_kv; h++)
                vec->rmsnorm(v + (int64_t)h * hd, v + (int64_t)h * hd, NULL, hd, a->eps);
        const int32_t pos = a->pos[t];
        vec->rope(a->rope, q, a->n_head, hd, pos);
        if (a->temp_scale > 0) /* in f32, in llama.cpp's order */
            vec->scale(q, logf(floorf((float)pos / (float)a->temp_len) + 1.0f) * a->temp_scale + 1.0f, n_q);
        if (!a->store_kv)
            continue;
        vec->rope(a->rope, k, a->n_head_kv, hd, pos);
        const int32_t blk = a->kv_block[t], at = pos % CV_KV_BLOCK;
        for (int32_t g = 0; g < a->n_head_kv; g++)
            kv_store(a->kv, vec, kv_k(a->kv, blk, a->kv_layer, g), kv_v(a->kv, blk, a->kv_layer, g), at,
                     k + (int64_t)g * hd, v + (int64_t)g * hd);
    }
}

void cpu_attn_rows(cv_bstream *s, const cv_batt_rows *a)
{
    attn_rows_job j = { .vec = cpu_stream_of(s)->vec, .a = a };
    if (a->n_rows > 0)
        cpu_run_rows(s, a->n_rows, attn_rows_part, &j);
}

/* ---- the MoE router ---- */

/* The k indices of the largest values of x[n], by descending value (ties:
 * the lower index first). */
static void top_k(const float *x, int32_t n, int32_t k, int32_t *idx)
{
    int32_t m = 0; /* idx[0..m) sorted by descending value */
    for (int32_t e = 0; e < n; e++) {
        const float p = x[e];
        if (m == k && !(p > x[idx[k - 1]]))
            continue;
        int32_t at = m < k ? m++ : k - 1;
        while (at > 0 && p > x[idx[at - 1]]) {
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = e;
    }
}

/* The selection scores of one row (probabilities p) into sel: p plus the
 * selection bias, and, with expert groups, -inf outside the n_group_used
 * groups whose two best scores sum highest (llama.cpp's reading of
 * DeepSeek-V3's group-limited routing). */
static void select_scores(const cv_bmoe_route *r, const float *p, float *sel)
{
    const int32_t n = r->n_expert;
    for (int32_t e = 0; e < n; e++)
        sel[e] = r->sel_bias ? p[e] + r->sel_bias[e] : p[e];
    if (r->n_group <= 1)
        return;
    const int32_t n_g = r->n_group, per = n / n_g;
    float score[CV_MAX_EXPERTS];
    int32_t best[2], keep[CV_MAX_EXPERTS];
    for (int32_t g = 0; g < n_g; g++) {
        top_k(sel + g * per, per, 2, best);
        score[g] = sel[g * per + best[0]] + sel[g * per + best[1]];
    }
    top_k(score, n_g, r->n_group_used, keep);
    bool kept[CV_MAX_EXPERTS] = { false };
    for (int32_t i = 0; i < r->n_group_used; i++)
        kept[keep[i]] = true;
    for (int32_t g = 0; g < n_g; g++)
        if (!kept[g])
            for (int32_t e = g * per; e < (g + 1) * per; e++)
                sel[e] = -INFINITY;
}

/* Row t's experts, in the order of choice, and their weights. */
static void route_row(const cv_bmoe_route *r, const cv_vec_ops *vec, int64_t t)
{
    const int32_t n = r->n_expert, k = r->k;
    float *logits = r->logits + t * r->ld_logits, *w = r->weight + t * k;
    int32_t *idx = r->expert + t * k;
    if (r->bias)
        vec->add(logits, logits, r->bias, n);
    if (r->kind == CV_BROUTE_TOPK_SOFTMAX) {
        top_k(logits, n, k, idx);
        for (int32_t j = 0; j < k; j++)
            w[j] = logits[idx[j]];
        vec->softmax(w, k);
    } else {
        if (r->kind == CV_BROUTE_SIGMOID_TOPK)
            for (int32_t e = 0; e < n; e++)
                logits[e] = 1.0f / (1.0f + expf(-logits[e]));
        else
            vec->softmax(logits, n);
        if (r->sel_bias || r->n_group > 1) {
            float sel[CV_MAX_EXPERTS];
            select_scores(r, logits, sel);
            top_k(sel, n, k, idx);
        } else {
            top_k(logits, n, k, idx);
        }
        float sum = 0;
        for (int32_t j = 0; j < k; j++)
            sum += w[j] = logits[idx[j]];
        if (r->norm) {
            /* llama.cpp bounds the denominator below at 2^-14 (an f16's
             * smallest normal) against a router that gives the chosen
             * experts no probability at all. */
            const float inv = 1.0f / fmaxf(sum, 6.103515625e-5f);
            for (int32_t j = 0; j < k; j++)
                w[j] *= inv;
        }
        if (r->scale != 1.0f)
            for (int32_t j = 0; j < k; j++)
                w[j] *= r->scale;
    }
    for (int32_t j = 0; j < k; j++) {
        r->src[t * k + j] = (int32_t)t;
        if (r->exp_scale) /* each expert's output scale, folded into its weight */
            w[j] *= r->exp_scale[idx[j]];
    }
}

typedef struct route_job {
    const cv_vec_ops *vec;
    const cv_bmoe_route *r;
} route_job;

static void route_part(void *ctx, int ith, int nth)
{
    const route_job *j = ctx;
    int64_t lo, hi;
    cv_split_range(j->r->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        route_row(j->r, j->vec, t);
}

void cpu_moe_route(cv_bstream *s, const cv_bmoe_route *r)
{
    route_job j = { .vec = cpu_stream_of(s)->vec, .r = r };
    if (r->n_rows > 0)
        cpu_run_rows(s, r->n_rows, route_part, &j);
}

/* ---- the MoE layer's rows ---- */

typedef struct moe_rows_job {
    const cv_vec_ops *vec;
    const cv_bmoe_rows *m;
} moe_rows_job;

/* Per route: its expert's gate and up biases, then the activation. */
static void moe_glu_part(void *ctx, int ith, int nth)
{
    const moe_rows_job *j = ctx;
    const cv_bmoe_rows *m = j->m;
    const int64_t ff = m->n_ff;
    int64_t lo, hi;
    cv_split_range((int64_t)m->n_rows * m->k, ith, nth, 1, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *g = m->gu + r * m->ld_gu;
        const int64_t x = m->expert[r];
        if (m->gate_bias)
            j->vec->add(g, g, m->gate_bias + x * ff, ff);
        if (m->up_bias)
            j->vec->add(g + ff, g + ff, m->up_bias + x * ff, ff);
        cpu_glu_row(j->vec, m->act, m->h + r * m->ld_h, g, g + ff, ff);
    }
}

void cpu_moe_glu(cv_bstream *s, const cv_bmoe_rows *m)
{
    moe_rows_job j = { .vec = cpu_stream_of(s)->vec, .m = m };
    const int64_t n_routes = (int64_t)m->n_rows * m->k;
    assert(n_routes <= INT32_MAX);
    if (n_routes > 0)
        cpu_run_rows(s, (int32_t)n_routes, moe_glu_part, &j);
}

/* out[t] = sum_j weight[t][j] (y[t k + j] + its expert's down bias), in
 * the row's order of choice, post-normed; then the shared expert's row,
 * post-normed, gated or as it is. */
static void moe_sum_part(void *ctx, int ith, int nth)
{
    const moe_rows_job *j = ctx;
    const cv_bmoe_rows *m = j->m;
    const cv_vec_ops *vec = j->vec;
    const int64_t n = m->n;
    int64_t lo, hi;
    cv_split_range(m->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *out = m->out + t * m->ld_out;
        memset(out, 0, (size_t)n * sizeof *out);
        for (int32_t i = 0; i < m->k; i++) {
            const int64_t r = t * m->k + i;
            float *y = m->y + r * m->ldy;
            if (m->down_bias)
                vec->add(y, y, m->down_bias + (int64_t)m->expert[r] * n, n);
            vec->axpy(out, m->weight[r], y, n);
        }
        if (m->post_norm)
            vec->rmsnorm(out, out, m->post_norm, n, m->eps);
        if (!m->shared)
            continue;
        float *y = m->shared + t * m->ld_shared;
        if (m->sh_post_norm)
            vec->rmsnorm(y, y, m->sh_post_norm, n, m->eps);
        if (m->sh_gate)
            vec->axpy(out, 1.0f / (1.0f + expf(-vec->dot_f32(m->sh_gate, m->x + t * m->ldx, n))), y, n);
        else
            vec->add(out, out, y, n);
    }
}

void cpu_moe_sum(cv_bstream *s, const cv_bmoe_rows *m)
{
    moe_rows_job j = { .vec = cpu_stream_of(s)->vec, .m = m };
    if (m->n_rows > 0)
        cpu_run_rows(s, m->n_rows, moe_sum_part, &j);
}

/* ---- the token embedding ---- */

typedef struct embed_job {
    const cv_vec_ops *vec;
    uint32_t type;
    int64_t n;
    const char *table;
    size_t row_bytes;
    int32_t n_rows;
    const int32_t *tokens;
    float scale;
    float *y;
    int64_t ldy;
} embed_job;

static void embed_part(void *ctx, int ith, int nth)
{
    const embed_job *j = ctx;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *y = j->y + t * j->ldy;
        cv_dequantize_row(j->type, j->table + (size_t)j->tokens[t] * j->row_bytes, y, j->n, NULL);
        if (j->scale != 1.0f)
            j->vec->scale(y, j->scale, j->n);
    }
}

void cpu_embed_rows(cv_bstream *s, uint32_t type, int64_t n, const void *table, int64_t n_vocab, int32_t n_rows,
                    const int32_t *tokens, float scale, float *y, int64_t ldy)
{
    const cv_dtype *dt = cv_dtype_get(type);
    assert(dt && n % dt->block_elems == 0);
    for (int32_t t = 0; t < n_rows; t++)
        assert(tokens[t] >= 0 && tokens[t] < n_vocab);
    (void)n_vocab;
    embed_job j = { .vec = cpu_stream_of(s)->vec, .type = type, .n = n, .table = table,
                    .row_bytes = (size_t)(n / dt->block_elems) * dt->block_bytes, .n_rows = n_rows, .tokens = tokens,
                    .scale = scale, .y = y, .ldy = ldy };
    if (n_rows > 0)
        cpu_run_rows(s, n_rows, embed_part, &j);
}
