/* ffn_moe.c — the mixture-of-experts FFN. Per token: the router's logits
 * over n_expert experts (plus its bias, when it has one), then by the
 * model's routing either probabilities for all of them (a softmax, or a
 * sigmoid of each: DeepSeek-V3's), the n_expert_used best by selection
 * score (the probability plus the layer's selection bias, when it has one,
 * among the n_group_used best groups of consecutive experts when the model
 * groups them, a group scored by the sum of its two best; ties: the lower
 * index), weighted by their probabilities, renormalised to sum 1 when the
 * model says so (qwen3moe, DeepSeek-V3) and times expert_weights_scale; or
 * the n_expert_used largest raw logits weighed by a softmax over those
 * alone (gpt-oss); then the weighted sum of those experts' gated outputs
 * (the model's activation, each expert's gate/up/down biases added when it
 * has them); a layer with a shared expert (bound shexp_down) adds that
 * dense FFN's output (the model's activation), scaled by
 * sigmoid(shexp_gate . x), one scalar per token, where it has that gate
 * (qwen35moe) and as it is otherwise (deepseek2, gemma4). Gemma 4's 26B-A4B
 * varies this in data (cv_layer): its router and its experts read inputs of
 * their own made from the residual stream (an unweighted RMSNorm /
 * sqrt(n_embd) times a learned scale; an RMSNorm with the experts' weight),
 * each expert's output has a scale (folded into its weight), and the routed
 * sum and the shared expert (its dense FFN) are each post-normed before
 * they add up. The step's (token, expert) routes go through
 * expert-routed matmuls, so each expert's weights are read once per step
 * for every token routed to it and an expert no token chose is not read: a
 * decode batch reads the union of its tokens' experts.
 *
 * Bits: a route's result is the same whatever else is in the batch (the
 * routed matmul's contract), and each token sums its experts in its own
 * order of choice, so a token's output is the same alone or batched. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

struct ffn_moe_scratch {
    int32_t n_exp, k;
    int64_t ld_gu;       /* 2 n_ff_exp: gate | up of one route */
    float *logits;       /* [n_batch][n_exp] router output */
    float *select;       /* [n_batch][n_exp] selection scores (with a selection bias or expert groups) */
    int32_t *expert;     /* [n_batch * k] route r = t * k + j: token t's j-th expert */
    int32_t *src;        /* [n_batch * k] the token of each route */
    float *weight;       /* [n_batch * k] */
    float *gu;           /* [n_batch * k][ld_gu] */
    float *h;            /* [n_batch * k][n_ff_exp] act(gate) * up */
    float *y;            /* [n_batch * k][n_embd] each route's expert output */
    uint8_t *seen;       /* [n_exp] experts some route of this layer names */
    cv_experts_ws *ws;   /* the routed matmuls' scratch */
    /* the shared expert (NULL when no layer has one) */
    int64_t ld_sh_gu;    /* 2 x the widest layer's shared expert */
    float *sh_gu;        /* [n_batch][ld_sh_gu] */
    float *sh_h;         /* [n_batch][ld_sh_gu / 2] */
    float *sh_y;         /* [n_batch][n_embd] */
    /* the router's and the experts' own inputs (gemma4; NULL when no layer
     * has them: both read the FFN's normed input) */
    float *r_in;         /* [n_batch][n_embd] */
    float *x_in;         /* [n_batch][n_embd] */
};

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

/* The selection scores of one token (probabilities p [n]) into sel: p plus
 * the selection bias (NULL: none), and, with expert groups, -inf outside
 * the n_group_used groups whose two best scores sum highest (llama.cpp's
 * reading of DeepSeek-V3's group-limited routing). */
static void select_scores(const cv_hparams *hp, const float *p, const float *bias, float *sel)
{
    const int32_t n = hp->n_expert;
    for (int32_t e = 0; e < n; e++)
        sel[e] = bias ? p[e] + bias[e] : p[e];
    if (hp->n_expert_group <= 1)
        return;
    const int32_t n_g = hp->n_expert_group, per = n / n_g;
    float score[CV_MAX_EXPERTS];
    int32_t best[2], keep[CV_MAX_EXPERTS];
    for (int32_t g = 0; g < n_g; g++) {
        top_k(sel + g * per, per, 2, best);
        score[g] = sel[g * per + best[0]] + sel[g * per + best[1]];
    }
    top_k(score, n_g, hp->n_group_used, keep);
    bool kept[CV_MAX_EXPERTS] = { false };
    for (int32_t i = 0; i < hp->n_group_used; i++)
        kept[keep[i]] = true;
    for (int32_t g = 0; g < n_g; g++)
        if (!kept[g])
            for (int32_t e = g * per; e < (g + 1) * per; e++)
                sel[e] = -INFINITY;
}

/* The chosen experts of one token from its router logits (sel: n_expert
 * floats of scratch): k indices and their weights, in the order of
 * choice. */
static void route_token(const cv_hparams *hp, const cv_vec_ops *vec, const float *sel_bias, float *logits,
                        float *sel, int32_t *idx, float *w)
{
    const int32_t n = hp->n_expert, k = hp->n_expert_used;
    if (hp->routing == CV_ROUTE_TOPK_SOFTMAX) {
        top_k(logits, n, k, idx);
        for (int32_t j = 0; j < k; j++)
            w[j] = logits[idx[j]];
        vec->softmax(w, k);
        return;
    }
    if (hp->routing == CV_ROUTE_SIGMOID_TOPK)
        for (int32_t e = 0; e < n; e++)
            logits[e] = 1.0f / (1.0f + expf(-logits[e]));
    else
        vec->softmax(logits, n);
    if (sel_bias || hp->n_expert_group > 1) {
        select_scores(hp, logits, sel_bias, sel);
        top_k(sel, n, k, idx);
    } else {
        top_k(logits, n, k, idx);
    }
    float sum = 0;
    for (int32_t j = 0; j < k; j++)
        sum += w[j] = logits[idx[j]];
    if (hp->expert_norm) {
        /* llama.cpp bounds the denominator below at 2^-14 (an f16's
         * smallest normal) against a router that gives the chosen experts
         * no probability at all. */
        const float inv = 1.0f / fmaxf(sum, 6.103515625e-5f);
        for (int32_t j = 0; j < k; j++)
            w[j] *= inv;
    }
    if (hp->expert_weights_scale != 1.0f)
        for (int32_t j = 0; j < k; j++)
            w[j] *= hp->expert_weights_scale;
}

typedef struct moe_job {
    cv_engine *e;
    int32_t n_rows;
    int32_t layer;
} moe_job;

/* gemma4's inputs of its own for the router (RMSNorm(x) times the router
 * scale, / sqrt(n_embd)) and the experts (RMSNorm(x; exp_norm)), from the
 * residual stream x, per row. */
static void rows_inputs(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    cv_engine *e = j->e;
    const cv_layer *L = &e->m->layers[j->layer];
    ffn_moe_scratch *s = e->moe;
    const float eps = e->m->hp.rms_eps, inv = 1.0f / sqrtf((float)e->ld_x);
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *x = e->x + t * e->ld_x;
        if (L->router_scale) {
            e->vec->rmsnorm(s->r_in + t * e->ld_x, x, L->router_scale, e->ld_x, eps);
            e->vec->scale(s->r_in + t * e->ld_x, inv, e->ld_x);
        }
        if (L->exp_norm)
            e->vec->rmsnorm(s->x_in + t * e->ld_x, x, L->exp_norm, e->ld_x, eps);
    }
}

static void rows_route(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    ffn_moe_scratch *s = j->e->moe;
    const cv_layer *L = &j->e->m->layers[j->layer];
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        if (L->router_bias)
            j->e->vec->add(s->logits + t * s->n_exp, s->logits + t * s->n_exp, L->router_bias, s->n_exp);
        route_token(&j->e->m->hp, j->e->vec, L->exp_probs_b, s->logits + t * s->n_exp, s->select + t * s->n_exp,
                    s->expert + t * s->k, s->weight + t * s->k);
        for (int32_t r = 0; r < s->k; r++) {
            s->src[t * s->k + r] = (int32_t)t;
            if (L->exp_scale) /* each expert's output scale, folded into its weight */
                s->weight[t * s->k + r] *= L->exp_scale[s->expert[t * s->k + r]];
        }
    }
}

/* Per route: its expert's gate and up biases, then the activation. */
static void rows_glu(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    const cv_engine *e = j->e;
    const cv_layer *L = &e->m->layers[j->layer];
    ffn_moe_scratch *s = e->moe;
    const int64_t ff = s->ld_gu / 2;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *g = s->gu + r * s->ld_gu;
        const int64_t x = s->expert[r];
        if (L->exp_gate_bias)
            e->vec->add(g, g, L->exp_gate_bias + x * ff, ff);
        if (L->exp_up_bias)
            e->vec->add(g + ff, g + ff, L->exp_up_bias + x * ff, ff);
        eng_glu(e, s->h + r * ff, g, g + ff, ff);
    }
}

/* tmp[t] = sum_j weight[t][j] (y[t * k + j] + down bias of its expert), in
 * the token's order of choice. */
static void rows_combine(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    cv_engine *e = j->e;
    const cv_layer *L = &e->m->layers[j->layer];
    ffn_moe_scratch *s = e->moe;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *out = e->tmp + t * e->ld_x;
        memset(out, 0, (size_t)e->ld_x * sizeof *out);
        for (int32_t r = 0; r < s->k; r++) {
            float *y = s->y + (t * s->k + r) * e->ld_x;
            if (L->exp_down_bias)
                e->vec->add(y, y, L->exp_down_bias + (int64_t)s->expert[t * s->k + r] * e->ld_x, e->ld_x);
            e->vec->axpy(out, s->weight[t * s->k + r], y, e->ld_x);
        }
        if (L->exp_post_norm)
            e->vec->rmsnorm(out, out, L->exp_post_norm, e->ld_x, e->m->hp.rms_eps);
    }
}

/* The experts the routes name, counted into the call's statistics with
 * the bytes their matrices take. */
static void count_experts(cv_engine *e, const cv_layer *L, int64_t n_routes)
{
    ffn_moe_scratch *s = e->moe;
    memset(s->seen, 0, (size_t)s->n_exp);
    int32_t n = 0;
    for (int64_t r = 0; r < n_routes; r++)
        if (!s->seen[s->expert[r]]++)
            n++;
    size_t per = L->exp_down[0]->bytes;
    for (int32_t i = 0; i < L->n_exp_gate_up; i++)
        per += L->exp_gate_up[i].w[0]->bytes;
    e->prof_experts += n;
    e->prof_bytes += (double)n * (double)per;
}

static void rows_shared_glu(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    ffn_moe_scratch *s = j->e->moe;
    const int64_t ff = j->e->m->layers[j->layer].shexp_down->n_in, ld = s->ld_sh_gu / 2;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *g = s->sh_gu + t * s->ld_sh_gu;
        eng_glu(j->e, s->sh_h + t * ld, g, g + ff, ff);
    }
}

/* tmp[t] += sigmoid(shexp_gate . xn[t]) sh_y[t], after the routed sum; a
 * shared expert without a gate (gemma4's dense branch) is added as is,
 * after its post-norm when it has one. */
static void rows_shared_add(void *ctx, int ith, int nth)
{
    moe_job *j = ctx;
    cv_engine *e = j->e;
    ffn_moe_scratch *s = e->moe;
    const cv_layer *L = &e->m->layers[j->layer];
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *y = s->sh_y + t * e->ld_x;
        if (L->shexp_post_norm)
            e->vec->rmsnorm(y, y, L->shexp_post_norm, e->ld_x, e->m->hp.rms_eps);
        const float gate =
            L->shexp_gate ? 1.0f / (1.0f + expf(-e->vec->dot_f32(L->shexp_gate, e->xn + t * e->ld_x, e->ld_x))) : 1.0f;
        if (L->shexp_gate)
            e->vec->axpy(e->tmp + t * e->ld_x, gate, y, e->ld_x);
        else
            e->vec->add(e->tmp + t * e->ld_x, e->tmp + t * e->ld_x, y, e->ld_x);
    }
}

static void routed_matmul(cv_engine *e, cv_bmat *const *w, int64_t n_x, const float *x, int64_t ldx, int64_t n_rows,
                          const int32_t *src, float *y, int64_t ldy)
{
    ffn_moe_scratch *s = e->moe;
    eng_matmul_experts(e, w, s->n_exp, n_x, x, ldx, n_rows, s->expert, src, y, ldy, s->ws);
}

static void moe_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    ffn_moe_scratch *s = e->moe;
    const int32_t T = b->n_tokens;
    const int64_t R = (int64_t)T * s->k;
    moe_job j = { .e = e, .n_rows = T, .layer = il };
    if (L->router_scale || L->exp_norm)
        eng_run_rows(e, T, rows_inputs, &j);
    const float *r_in = L->router_scale ? s->r_in : e->xn, *x_in = L->exp_norm ? s->x_in : e->xn;
    eng_matmul(e, L->router, T, r_in, e->ld_x, s->logits, s->n_exp);
    eng_run_rows(e, T, rows_route, &j);
    count_experts(e, L, R);
    for (int32_t i = 0; i < L->n_exp_gate_up; i++)
        routed_matmul(e, L->exp_gate_up[i].w, T, x_in, e->ld_x, R, s->src, s->gu + L->exp_gate_up[i].col,
                      s->ld_gu);
    j.n_rows = (int32_t)R;
    eng_run_rows(e, (int32_t)R, rows_glu, &j);
    routed_matmul(e, L->exp_down, R, s->h, s->ld_gu / 2, R, NULL, s->y, e->ld_x);
    j.n_rows = T;
    eng_run_rows(e, T, rows_combine, &j);
    if (L->shexp_down) {
        for (int32_t i = 0; i < L->n_shexp_gate_up; i++)
            eng_matmul(e, L->shexp_gate_up[i].w, T, e->xn, e->ld_x, s->sh_gu + L->shexp_gate_up[i].col, s->ld_sh_gu);
        eng_run_rows(e, T, rows_shared_glu, &j);
        eng_matmul(e, L->shexp_down, T, s->sh_h, s->ld_sh_gu / 2, s->sh_y, e->ld_x);
        eng_run_rows(e, T, rows_shared_add, &j);
    }
}

static int moe_init(cv_engine *e, cv_err *err)
{
    (void)err;
    const cv_hparams *hp = &e->m->hp;
    ffn_moe_scratch *s = e->moe = cv_xcalloc(1, sizeof *s);
    const size_t T = (size_t)e->p.n_batch, R = T * (size_t)hp->n_expert_used;
    s->n_exp = hp->n_expert;
    s->k = hp->n_expert_used;
    s->ld_gu = 2 * (int64_t)hp->n_ff_exp;
    s->logits = cv_aligned_alloc(T * (size_t)s->n_exp * sizeof(float));
    s->select = cv_aligned_alloc(T * (size_t)s->n_exp * sizeof(float));
    s->expert = cv_xmalloc(R * sizeof *s->expert);
    s->src = cv_xmalloc(R * sizeof *s->src);
    s->weight = cv_xmalloc(R * sizeof *s->weight);
    s->gu = cv_aligned_alloc(R * (size_t)s->ld_gu * sizeof(float));
    s->h = cv_aligned_alloc(R * (size_t)hp->n_ff_exp * sizeof(float));
    s->y = cv_aligned_alloc(R * (size_t)e->ld_x * sizeof(float));
    s->seen = cv_xmalloc((size_t)s->n_exp);
    s->ws = cv_be_experts_ws_create(e->st, (int64_t)R, CV_MAX(hp->n_embd, hp->n_ff_exp), CV_MAX(s->ld_gu, hp->n_embd), s->n_exp);
    bool own_inputs = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &e->m->layers[il];
        if (L->shexp_down)
            s->ld_sh_gu = CV_MAX(s->ld_sh_gu, 2 * L->shexp_down->n_in);
        own_inputs |= L->router_scale || L->exp_norm;
    }
    if (s->ld_sh_gu > 0) {
        s->sh_gu = cv_aligned_alloc(T * (size_t)s->ld_sh_gu * sizeof(float));
        s->sh_h = cv_aligned_alloc(T * (size_t)(s->ld_sh_gu / 2) * sizeof(float));
        s->sh_y = cv_aligned_alloc(T * (size_t)e->ld_x * sizeof(float));
    }
    if (own_inputs) {
        s->r_in = cv_aligned_alloc(T * (size_t)e->ld_x * sizeof(float));
        s->x_in = cv_aligned_alloc(T * (size_t)e->ld_x * sizeof(float));
    }
    return 0;
}

static void moe_fini(cv_engine *e)
{
    ffn_moe_scratch *s = e->moe;
    if (!s)
        return;
    cv_aligned_free(s->logits);
    cv_aligned_free(s->select);
    free(s->expert);
    free(s->src);
    free(s->weight);
    cv_aligned_free(s->gu);
    cv_aligned_free(s->h);
    cv_aligned_free(s->y);
    free(s->seen);
    cv_be_experts_ws_destroy(e->st, s->ws);
    cv_aligned_free(s->sh_gu);
    cv_aligned_free(s->sh_h);
    cv_aligned_free(s->sh_y);
    cv_aligned_free(s->r_in);
    cv_aligned_free(s->x_in);
    free(s);
    e->moe = NULL;
}

const eng_kind eng_ffn_moe = {
    .name = "mixture of experts",
    .init = moe_init,
    .fini = moe_fini,
    .forward = moe_forward,
};
