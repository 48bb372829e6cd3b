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
 * alone (gpt-oss) (this choice, from the logits to the routes, is the
 * backend's: cv_bmoe_route, moe_route); then the weighted sum of those
 * experts' gated outputs
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

/* The backend's routing kinds are the model's, by number. */
_Static_assert((int)CV_BROUTE_SOFTMAX_TOPK == (int)CV_ROUTE_SOFTMAX_TOPK &&
                   (int)CV_BROUTE_TOPK_SOFTMAX == (int)CV_ROUTE_TOPK_SOFTMAX &&
                   (int)CV_BROUTE_SIGMOID_TOPK == (int)CV_ROUTE_SIGMOID_TOPK,
               "cv_broute and cv_routing differ");

struct ffn_moe_scratch {
    int32_t n_exp, k;
    int64_t ld_gu;       /* 2 n_ff_exp: gate | up of one route */
    float *logits;       /* [n_batch][n_exp] router output */
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
    const cv_hparams *hp = &e->m->hp;
    const cv_bmoe_route route = {
        .n_rows = T,
        .n_expert = s->n_exp,
        .k = s->k,
        .logits = s->logits,
        .ld_logits = s->n_exp,
        .kind = (cv_broute)hp->routing,
        .bias = L->router_bias,
        .sel_bias = L->exp_probs_b,
        .n_group = hp->n_expert_group,
        .n_group_used = hp->n_group_used,
        .norm = hp->expert_norm,
        .scale = hp->expert_weights_scale,
        .exp_scale = L->exp_scale,
        .expert = s->expert,
        .src = s->src,
        .weight = s->weight,
    };
    cv_be_moe_route(e->st, &route);
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
