/* mix_deltanet.c — the Gated DeltaNet mixer (CV_MIXER_DELTANET) of hybrid
 * models (qwen35, qwen35moe, qwen3next): linear attention whose memory is a fixed
 * matrix per value head, carried across tokens and forward calls in the
 * sequence's recurrent-state slot (seq_mem.c; this kind declares its bytes
 * through eng_kind.state_bytes, layout below). Per token t of a sequence, from
 * the normed input a_t:
 *
 *   c_t = W_qkv a_t,  z_t = W_z a_t,  beta_t = sigmoid(W_beta a_t),
 *   g_t = softplus(W_alpha a_t + dt_bias) * ssm_a          (g_t <= 0)
 *   u_t = silu(sum_j conv[c][j] c_{t-K+1+j}[c])             (causal, per channel)
 *   q_h, k_h = u_t's key-head slices / their L2 norms, q_h also / sqrt(d)
 *   v_j = u_t's value-head slice; value head j reads key head j mod H_k
 *     (qwen35's tiled order), or j / (H_v / H_k) (qwen3next's grouped one)
 *   S_j <- exp(g) S_j;  delta = beta (v_j - S_j^T k);  S_j <- S_j + k delta^T
 *   o_j = S_j^T q;  y_j = rmsnorm(o_j) * ssm_norm * silu(z_j);  out = W_out y
 *
 * (testdata/reference2/README.md states it with llama.cpp's conventions.)
 * Decode runs that recurrence one token at a time ("step"). A prompt runs
 * it in chunks of up to CV_DN_CHUNK tokens with the equivalent chunked form
 * below, which turns a chunk's n sequential rank-1 updates into small
 * matrix products.
 *
 * The chunked form and its derivation are the kernels layer's
 * (kernels/deltanet.c); everything between the projections (the conv, the
 * gates, the recurrence in its two forms, the gated norm) is one pass of
 * the backend's (cv_bdeltanet, deltanet), fed the layer's data, the call's
 * rows by sequence (the attention plan's grouping) and each sequence's
 * state.
 *
 * Chunks start at multiples of CV_DN_CHUNK in the sequence (a call that
 * starts mid-chunk first finishes that chunk), so a prompt fed in pieces
 * that end on that grid computes the same chunks as in one call; a piece
 * of at most CV_DN_STEP_RUN tokens takes the step form, token by token, so
 * a short call (a decode step, a speculative step with its drafts) gives
 * the bits of decoding its tokens one by one. These are the engine's
 * split_align and step_run (cv_mem_info). Sequences are independent: each
 * (sequence, value head) is one work item whose chunks run in order on one
 * thread, so a token's output is the same bits alone or in any batch and
 * on any thread count.
 *
 * ---- The state (one layer's part of a sequence's slot) ----
 *   conv [K - 1][C]   the conv's inputs at the K - 1 positions before the
 *                     sequence's next one, oldest first (C = 2 H_k d + H_v d)
 *   ssm  [H_v][d][d]  value head j's state S_j[i][m] (i: key index, m: value
 *                     index)
 * Zero is the state of an empty sequence; the engine opens, copies,
 * checkpoints and snapshots whole slots and never looks inside. */
#include <stdlib.h>

#include "engine/engine_int.h"

_Static_assert(CV_DN_STEP_RUN > CV_SCHED_DRAFT_MAX, "a speculative step (a token and its drafts) takes the step form");

struct dn_scratch {
    int32_t C, inner, H_v, H_k, d, K;
    bool grouped;       /* value head j reads key head j / (H_v / H_k), not j mod H_k */
    int64_t ld_in;      /* C + inner + 2 H_v */
    float *in;          /* [n_batch][ld_in] conv input | z | beta | alpha (beta, g once gated) */
    float *o;           /* [n_batch][inner] the heads' gated outputs */
    cv_dn_ws *ws;       /* the backend's pass's */
    /* this call's sequences, in the order of their runs in e->att_rows */
    int32_t *begin;     /* [n_seq_max + 1] each one's first index into e->att_rows, then the end */
    int32_t *p0;        /* [n_seq_max] its length before the call */
    float **state;      /* [n_seq_max] its layer's state (set per layer) */
    int32_t *seq_at;    /* [n_seq_max] a sequence's index among them */
    int32_t *row_seq;   /* [n_batch] each row's */
    int32_t n_seqs;
};

/* ---- the layer ---- */

static size_t deltanet_state_bytes(const cv_engine *e, int32_t il)
{
    (void)il;
    const dn_scratch *dn = e->dn;
    return ((size_t)(dn->K - 1) * (size_t)dn->C + (size_t)dn->H_v * (size_t)dn->d * (size_t)dn->d) * sizeof(float);
}

static void deltanet_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    dn_scratch *dn = e->dn;
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_ssm_in; i++)
        eng_matmul(e, L->ssm_in[i].w, T, e->xn, e->ld_x, dn->in + L->ssm_in[i].col, dn->ld_in);
    /* the sequences of the call, their runs back to back in e->att_rows
     * (cv_engine_att_plan): sequence s's ends at att_seq_start[s] */
    dn->n_seqs = 0;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0) {
            const int32_t i = dn->n_seqs++;
            dn->begin[i] = s ? e->att_seq_start[s - 1] : 0;
            dn->begin[i + 1] = e->att_seq_start[s];
            dn->p0[i] = e->seqs[s].len;
            dn->state[i] = eng_state(e, s, il);
            dn->seq_at[s] = i;
        }
    for (int32_t t = 0; t < T; t++)
        dn->row_seq[t] = dn->seq_at[b->seq[t]];
    const cv_bdeltanet a = {
        .n_rows = T,
        .in = dn->in,
        .ld_in = dn->ld_in,
        .out = dn->o,
        .ld_out = dn->inner,
        .H_k = dn->H_k,
        .H_v = dn->H_v,
        .d = dn->d,
        .K = dn->K,
        .grouped = dn->grouped,
        .conv = L->ssm_conv1d,
        .dt_bias = L->ssm_dt_bias,
        .a = L->ssm_a,
        .norm = L->ssm_norm,
        .eps = e->m->hp.rms_eps,
        .step_run = CV_DN_STEP_RUN,
        .n_seqs = dn->n_seqs,
        .rows = e->att_rows,
        .begin = dn->begin,
        .p0 = dn->p0,
        .state = dn->state,
        .row_seq = dn->row_seq,
        .pos = b->pos,
    };
    const uint64_t t0 = eng_tick(e);
    cv_be_deltanet(e->st, &a, dn->ws);
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;
    eng_matmul(e, L->ssm_out, T, dn->o, dn->inner, e->tmp, e->ld_x);
}

static int deltanet_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    dn_scratch *dn = e->dn = cv_xcalloc(1, sizeof *dn);
    dn->d = hp->ssm_state;
    dn->K = hp->ssm_conv;
    dn->H_k = hp->ssm_group;
    dn->H_v = hp->ssm_heads;
    dn->inner = hp->ssm_inner;
    dn->grouped = hp->ssm_grouped;
    dn->C = 2 * dn->H_k * dn->d + dn->inner;
    dn->ld_in = dn->C + dn->inner + 2 * (int64_t)dn->H_v;
    const size_t S = (size_t)e->p.n_seq_max;
    dn->begin = cv_xmalloc((S + 1) * sizeof *dn->begin);
    dn->p0 = cv_xmalloc(S * sizeof *dn->p0);
    dn->state = cv_xmalloc(S * sizeof *dn->state);
    dn->seq_at = cv_xmalloc(S * sizeof *dn->seq_at);
    dn->row_seq = cv_xmalloc((size_t)e->p.n_batch * sizeof *dn->row_seq);
    if (!(dn->in = eng_rows_alloc(e, e->p.n_batch, dn->ld_in, err)) ||
        !(dn->o = eng_rows_alloc(e, e->p.n_batch, dn->inner, err)))
        return CV_ENOMEM;
    if (!(dn->ws = cv_be_deltanet_ws_create(e->st, e->p.n_batch, dn->H_k, dn->H_v, dn->d)))
        return cv_err_set(err, CV_ENOMEM, "engine: the %s backend has no room for the Gated DeltaNet mixer's "
                          "workspace", cv_backend_name(e->m->be));
    return 0;
}

static void deltanet_fini(cv_engine *e)
{
    dn_scratch *dn = e->dn;
    if (!dn)
        return;
    eng_rows_free(e, dn->in);
    eng_rows_free(e, dn->o);
    cv_be_deltanet_ws_destroy(e->st, dn->ws);
    free(dn->begin);
    free(dn->p0);
    free(dn->state);
    free(dn->seq_at);
    free(dn->row_seq);
    free(dn);
    e->dn = NULL;
}

const eng_kind eng_mix_deltanet = {
    .name = "Gated DeltaNet",
    .init = deltanet_init,
    .fini = deltanet_fini,
    .forward = deltanet_forward,
    .state_bytes = deltanet_state_bytes,
    .split_align = CV_DN_CHUNK,
    .step_run = CV_DN_STEP_RUN,
};
