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
 * (kernels/deltanet.c).
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
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

_Static_assert(CV_DN_STEP_RUN > CV_SCHED_DRAFT_MAX, "a speculative step (a token and its drafts) takes the step form");

struct dn_scratch {
    const dn_kernels *kn;
    int32_t C, inner, H_v, H_k, d, K;
    bool grouped;       /* value head j reads key head j / (H_v / H_k), not j mod H_k */
    int64_t ld_in;      /* C + inner + 2 H_v */
    float *in;          /* [n_batch][ld_in] conv input | z | beta | alpha (beta, g once gated) */
    float *u;           /* [n_batch][C] the conv's output: q | k of the key heads, v of the value heads */
    float *o;           /* [n_batch][inner] the heads' outputs, then the gated ones */
    float *work;        /* per thread: a chunk's gathered rows and the chunk kernel's scratch */
    size_t work_floats;
    int32_t *seqs;      /* [n_seq_max] sequences of this call */
    int32_t n_seqs;
};

/* ---- the layer ---- */

typedef struct dn_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t layer;
    int32_t n_rows;
} dn_job;

static inline int32_t run_begin(const cv_engine *e, int32_t s) { return s ? e->att_seq_start[s - 1] : 0; }

static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Layer il's state in sequence s's slot: its conv part, then the heads'
 * DeltaNet states (the layout at the top). */
static inline float *conv_state(cv_engine *e, int32_t s, int32_t il) { return eng_state(e, s, il); }

static size_t deltanet_state_bytes(const cv_engine *e, int32_t il)
{
    (void)il;
    const dn_scratch *dn = e->dn;
    return ((size_t)(dn->K - 1) * (size_t)dn->C + (size_t)dn->H_v * (size_t)dn->d * (size_t)dn->d) * sizeof(float);
}

/* Per row: the causal conv over this and the K - 1 earlier positions of
 * its sequence (rows of this call, or the conv state for positions before
 * it), SiLU, the L2 norms of q and k, and the gates beta and g. Rows only
 * read the other rows' conv input, which nothing writes here. */
static void rows_conv(void *ctx, int ith, int nth)
{
    dn_job *j = ctx;
    cv_engine *e = j->e;
    dn_scratch *dn = e->dn;
    const cv_layer *L = &e->m->layers[j->layer];
    const cv_vec_ops *vec = e->vec;
    const int32_t C = dn->C, K = dn->K, d = dn->d;
    const float eps = e->m->hp.rms_eps, qscale = 1.0f / sqrtf((float)d);
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const int32_t s = j->b->seq[t], p = j->b->pos[t], p0 = e->seqs[s].len, begin = run_begin(e, s);
        const float *state = conv_state(e, s, j->layer);
        const float *x[CV_MAX_SSM_CONV];
        for (int32_t tap = 0; tap < K; tap++) {
            const int32_t at = p - (K - 1) + tap; /* >= p0 - (K - 1) */
            x[tap] = at >= p0 ? dn->in + (int64_t)e->att_rows[begin + at - p0] * dn->ld_in
                              : state + (int64_t)(at - p0 + K - 1) * C;
        }
        float *u = dn->u + t * C;
        for (int32_t c = 0; c < C; c++) {
            const float *w = L->ssm_conv1d + (int64_t)c * K;
            float acc = 0;
            for (int32_t tap = 0; tap < K; tap++)
                acc += w[tap] * x[tap][c];
            u[c] = acc;
        }
        vec->sigmoid_mul(u, u, u, C); /* silu */
        for (int32_t h = 0; h < 2 * dn->H_k; h++) {
            float *r = u + (int64_t)h * d;
            const float n2 = vec->dot_f32(r, r, d);
            vec->scale(r, (h < dn->H_k ? qscale : 1.0f) / fmaxf(sqrtf(n2), eps), d);
        }
        float *beta = dn->in + t * dn->ld_in + C + dn->inner, *gate = beta + dn->H_v;
        for (int32_t h = 0; h < dn->H_v; h++) {
            beta[h] = 1.0f / (1.0f + expf(-beta[h]));
            gate[h] = softplus(gate[h] + L->ssm_dt_bias[h]) * L->ssm_a[h];
        }
    }
}

/* Each sequence's conv state becomes the inputs of its last K - 1
 * positions (once every row has read the old one). */
static void update_conv_state(cv_engine *e, int32_t il)
{
    dn_scratch *dn = e->dn;
    const int32_t C = dn->C, K = dn->K;
    for (int32_t i = 0; i < dn->n_seqs; i++) {
        const int32_t s = dn->seqs[i], begin = run_begin(e, s), n = e->att_seq_start[s] - begin;
        const int32_t p0 = e->seqs[s].len, end = p0 + n;
        float *state = conv_state(e, s, il);
        /* Row r holds position end - (K - 1) + r; an old row moves down by
         * n, so rows are rewritten upward, each from a later one. */
        for (int32_t r = 0; r < K - 1; r++) {
            const int32_t at = end - (K - 1) + r;
            const float *src = at >= p0 ? dn->in + (int64_t)e->att_rows[begin + at - p0] * dn->ld_in
                                        : state + (int64_t)(at - p0 + K - 1) * C;
            memmove(state + (int64_t)r * C, src, (size_t)C * sizeof(float));
        }
    }
}

/* One work item: value head h of sequence dn->seqs[i / H_v], every token
 * of it in this call, in chunks aligned to CV_DN_CHUNK positions. */
static void run_head(cv_engine *e, int32_t il, int32_t item, float *work)
{
    dn_scratch *dn = e->dn;
    const int32_t d = dn->d, C = dn->C, hv = item % dn->H_v, s = dn->seqs[item / dn->H_v];
    const int32_t hk = dn->grouped ? hv / (dn->H_v / dn->H_k) : hv % dn->H_k, begin = run_begin(e, s), n = e->att_seq_start[s] - begin;
    /* offsets in a conv-output row: q of key head hk, its k, v of value head hv */
    const int64_t q_at = (int64_t)hk * d, k_at = (int64_t)(dn->H_k + hk) * d;
    const int64_t v_at = (int64_t)(2 * dn->H_k + hv) * d;
    float *S = conv_state(e, s, il) + (size_t)(dn->K - 1) * C + (size_t)hv * d * d;
    enum { N = CV_DN_CHUNK };
    float *Q = work, *Kc = Q + (size_t)N * d, *V = Kc + (size_t)N * d, *O = V + (size_t)N * d, *B = O + (size_t)N * d;
    float *Gt = B + N, *chunk = Gt + N;
    const int32_t p0 = e->seqs[s].len;
    for (int32_t r = 0; r < n;) {
        const int32_t len = CV_MIN(n - r, N - (p0 + r) % N);
        if (len <= CV_DN_STEP_RUN) {
            for (int32_t i = 0; i < len; i++) {
                const int64_t t = e->att_rows[begin + r + i];
                const float *u = dn->u + t * C, *gb = dn->in + t * dn->ld_in + C + dn->inner;
                float *o = dn->o + t * dn->inner + (int64_t)hv * d;
                dn->kn->step(d, S, u + q_at, u + k_at, u + v_at, gb[hv], gb[dn->H_v + hv], o, chunk);
            }
        } else {
            for (int32_t i = 0; i < len; i++) {
                const int64_t t = e->att_rows[begin + r + i];
                const float *u = dn->u + t * C, *gb = dn->in + t * dn->ld_in + C + dn->inner;
                memcpy(Q + (size_t)i * d, u + q_at, (size_t)d * sizeof(float));
                memcpy(Kc + (size_t)i * d, u + k_at, (size_t)d * sizeof(float));
                memcpy(V + (size_t)i * d, u + v_at, (size_t)d * sizeof(float));
                B[i] = gb[hv];
                Gt[i] = gb[dn->H_v + hv];
            }
            cv_dn_chunk(dn->kn, e->vec, d, len, S, Q, Kc, V, B, Gt, O, chunk);
            for (int32_t i = 0; i < len; i++) {
                const int64_t t = e->att_rows[begin + r + i];
                memcpy(dn->o + t * dn->inner + (int64_t)hv * d, O + (size_t)i * d, (size_t)d * sizeof(float));
            }
        }
        r += len;
    }
}

static void head_item(void *ctx, int64_t i, int ith)
{
    const dn_job *j = ctx;
    run_head(j->e, j->layer, (int32_t)i, j->e->dn->work + (size_t)ith * j->e->dn->work_floats);
}

/* Per row and value head: y = rmsnorm(o) * ssm_norm * silu(z). */
static void rows_out(void *ctx, int ith, int nth)
{
    dn_job *j = ctx;
    cv_engine *e = j->e;
    dn_scratch *dn = e->dn;
    const cv_layer *L = &e->m->layers[j->layer];
    const int32_t d = dn->d;
    int64_t lo, hi;
    cv_split_range(j->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *z = dn->in + t * dn->ld_in + dn->C;
        for (int32_t h = 0; h < dn->H_v; h++) {
            float *o = dn->o + t * dn->inner + (int64_t)h * d;
            e->vec->rmsnorm(o, o, L->ssm_norm, d, e->m->hp.rms_eps);
            e->vec->swiglu(o, z + (int64_t)h * d, o, d);
        }
    }
}

static void deltanet_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    dn_scratch *dn = e->dn;
    const int32_t T = b->n_tokens;
    for (int32_t i = 0; i < L->n_ssm_in; i++)
        eng_matmul(e, L->ssm_in[i].w, T, e->xn, e->ld_x, dn->in + L->ssm_in[i].col, dn->ld_in);
    dn->n_seqs = 0;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        if (e->new_len[s] >= 0)
            dn->seqs[dn->n_seqs++] = s;

    dn_job j = { .e = e, .b = b, .layer = il, .n_rows = T };
    eng_run_rows(e, T, rows_conv, &j);
    update_conv_state(e, il);

    const uint64_t t0 = eng_tick(e);
    cv_pool_run_items(e->pool, (int64_t)dn->n_seqs * dn->H_v, head_item, &j);
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;

    eng_run_rows(e, T, rows_out, &j);
    eng_matmul(e, L->ssm_out, T, dn->o, dn->inner, e->tmp, e->ld_x);
}

static int deltanet_init(cv_engine *e, cv_err *err)
{
    (void)err;
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
    dn->kn = cv_dn_kernels_for(dn->d);
    const size_t T = (size_t)e->p.n_batch;
    dn->in = cv_aligned_alloc_committed(T * (size_t)dn->ld_in * sizeof(float));
    dn->u = cv_aligned_alloc_committed(T * (size_t)dn->C * sizeof(float));
    dn->o = cv_aligned_alloc_committed(T * (size_t)dn->inner * sizeof(float));
    /* Q, K, V, O [CV_DN_CHUNK][d], beta and g [CV_DN_CHUNK], then the chunk
     * kernel's scratch (which also covers the step's d floats). */
    dn->work_floats = ((4 * (size_t)CV_DN_CHUNK * dn->d + 2 * CV_DN_CHUNK + cv_dn_chunk_floats(dn->d)) + 15) &
                      ~(size_t)15;
    dn->work = cv_aligned_alloc_committed(dn->work_floats * (size_t)e->n_threads * sizeof(float));
    dn->seqs = cv_xmalloc((size_t)e->p.n_seq_max * sizeof *dn->seqs);
    return 0;
}

static void deltanet_fini(cv_engine *e)
{
    dn_scratch *dn = e->dn;
    if (!dn)
        return;
    cv_aligned_free(dn->in);
    cv_aligned_free(dn->u);
    cv_aligned_free(dn->o);
    cv_aligned_free(dn->work);
    free(dn->seqs);
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
