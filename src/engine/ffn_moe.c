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
 * they add up. Between the matmuls, the rows are the backend's too: each
 * route's biases and activation (moe_glu), and each token's weighted sum
 * with its post-norm and the shared expert's output added (moe_sum, after
 * the shared expert's matmuls; cv_bmoe_rows). The step's (token, expert)
 * routes go through
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

static void routed_matmul(cv_engine *e, cv_bmat *const *w, int64_t n_x, const float *x, int64_t ldx, int64_t n_rows,
                          const int32_t *src, float *y, int64_t ldy)
{
    ffn_moe_scratch *s = e->moe;
    eng_matmul_experts(e, w, s->n_exp, n_x, x, ldx, n_rows, s->expert, src, y, ldy, s->ws);
}

static void moe_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    const cv_hparams *hp = &e->m->hp;
    ffn_moe_scratch *s = e->moe;
    const int32_t T = b->n_tokens;
    const int64_t R = (int64_t)T * s->k;
    if (L->router_scale) { /* RMSNorm(x) times the router scale, / sqrt(n_embd) */
        cv_be_rmsnorm(e->st, T, e->ld_x, e->x, e->ld_x, NULL, L->router_scale, hp->rms_eps, s->r_in, e->ld_x);
        cv_be_scale(e->st, T, e->ld_x, s->r_in, e->ld_x, 1.0f / sqrtf((float)e->ld_x));
    }
    if (L->exp_norm)
        cv_be_rmsnorm(e->st, T, e->ld_x, e->x, e->ld_x, NULL, L->exp_norm, hp->rms_eps, s->x_in, e->ld_x);
    const float *r_in = L->router_scale ? s->r_in : e->xn, *x_in = L->exp_norm ? s->x_in : e->xn;
    eng_matmul(e, L->router, T, r_in, e->ld_x, s->logits, s->n_exp);
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
    const cv_bmoe_rows rows = {
        .n_rows = T,
        .k = s->k,
        .n_expert = s->n_exp,
        .expert = s->expert,
        .weight = s->weight,
        .act = &e->act,
        .n_ff = s->ld_gu / 2,
        .gu = s->gu,
        .ld_gu = s->ld_gu,
        .gate_bias = L->exp_gate_bias,
        .up_bias = L->exp_up_bias,
        .h = s->h,
        .ld_h = s->ld_gu / 2,
        .n = e->ld_x,
        .y = s->y,
        .ldy = e->ld_x,
        .down_bias = L->exp_down_bias,
        .post_norm = L->exp_post_norm,
        .eps = hp->rms_eps,
        .shared = L->shexp_down ? s->sh_y : NULL,
        .ld_shared = e->ld_x,
        .sh_post_norm = L->shexp_post_norm,
        .sh_gate = L->shexp_gate,
        .x = e->xn,
        .ldx = e->ld_x,
        .out = e->tmp,
        .ld_out = e->ld_x,
    };
    for (int32_t i = 0; i < L->n_exp_gate_up; i++)
        routed_matmul(e, L->exp_gate_up[i].w, T, x_in, e->ld_x, R, s->src, s->gu + L->exp_gate_up[i].col,
                      s->ld_gu);
    cv_be_moe_glu(e->st, &rows);
    routed_matmul(e, L->exp_down, R, s->h, s->ld_gu / 2, R, NULL, s->y, e->ld_x);
    if (L->shexp_down) { /* its output before the sum, which adds it in */
        const int64_t ff = L->shexp_down->n_in;
        for (int32_t i = 0; i < L->n_shexp_gate_up; i++)
            eng_matmul(e, L->shexp_gate_up[i].w, T, e->xn, e->ld_x, s->sh_gu + L->shexp_gate_up[i].col, s->ld_sh_gu);
        cv_be_glu(e->st, &e->act, T, ff, s->sh_h, s->ld_sh_gu / 2, s->sh_gu, s->ld_sh_gu, s->sh_gu + ff, s->ld_sh_gu);
        eng_matmul(e, L->shexp_down, T, s->sh_h, s->ld_sh_gu / 2, s->sh_y, e->ld_x);
    }
    cv_be_moe_sum(e->st, &rows);
}

static int moe_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    ffn_moe_scratch *s = e->moe = cv_xcalloc(1, sizeof *s);
    const int64_t T = e->p.n_batch, R = T * hp->n_expert_used;
    s->n_exp = hp->n_expert;
    s->k = hp->n_expert_used;
    s->ld_gu = 2 * (int64_t)hp->n_ff_exp;
    s->seen = cv_xmalloc((size_t)s->n_exp);
    bool own_inputs = false;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const cv_layer *L = &e->m->layers[il];
        if (L->shexp_down)
            s->ld_sh_gu = CV_MAX(s->ld_sh_gu, 2 * L->shexp_down->n_in);
        own_inputs |= L->router_scale || L->exp_norm;
    }
    if (!(s->logits = eng_rows_alloc(e, T, s->n_exp, err)) ||
        !(s->expert = eng_mem_alloc(e, (size_t)R * sizeof *s->expert, err)) ||
        !(s->src = eng_mem_alloc(e, (size_t)R * sizeof *s->src, err)) || !(s->weight = eng_rows_alloc(e, R, 1, err)) ||
        !(s->gu = eng_rows_alloc(e, R, s->ld_gu, err)) || !(s->h = eng_rows_alloc(e, R, hp->n_ff_exp, err)) ||
        !(s->y = eng_rows_alloc(e, R, e->ld_x, err)))
        return CV_ENOMEM;
    if (s->ld_sh_gu > 0 &&
        (!(s->sh_gu = eng_rows_alloc(e, T, s->ld_sh_gu, err)) || !(s->sh_h = eng_rows_alloc(e, T, s->ld_sh_gu / 2, err)) ||
         !(s->sh_y = eng_rows_alloc(e, T, e->ld_x, err))))
        return CV_ENOMEM;
    if (own_inputs && (!(s->r_in = eng_rows_alloc(e, T, e->ld_x, err)) || !(s->x_in = eng_rows_alloc(e, T, e->ld_x, err))))
        return CV_ENOMEM;
    s->ws = cv_be_experts_ws_create(e->st, R, CV_MAX(hp->n_embd, hp->n_ff_exp), CV_MAX(s->ld_gu, hp->n_embd), s->n_exp);
    return 0;
}

static void moe_fini(cv_engine *e)
{
    ffn_moe_scratch *s = e->moe;
    if (!s)
        return;
    void *rows[] = { s->logits, s->expert, s->src, s->weight, s->gu, s->h, s->y,
                     s->sh_gu, s->sh_h, s->sh_y, s->r_in, s->x_in };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++)
        eng_rows_free(e, rows[i]);
    free(s->seen);
    cv_be_experts_ws_destroy(e->st, s->ws);
    free(s);
    e->moe = NULL;
}

const eng_kind eng_ffn_moe = {
    .name = "mixture of experts",
    .init = moe_init,
    .fini = moe_fini,
    .forward = moe_forward,
};
