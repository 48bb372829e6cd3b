/* cpu_deltanet.c — the CPU backend's Gated DeltaNet pass (backend.h's
 * cv_bdeltanet, deltanet): the loops the engine's mixer ran between its
 * projections (engine/mix_deltanet.c owns the layer, its projections and
 * the state slots; the recurrence's step and chunked forms are the kernels
 * layer's, kernels/deltanet.h), moved here whole so their bits are the
 * same: the conv and gates per row and the gated norm per row split whole
 * over the pool (cpu_run_rows); each (sequence, value head) one work item
 * whose chunks run in order on one thread, so a token's output is the same
 * bits alone or in any batch and on any thread count. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_int.h"
#include "kernels/deltanet.h"

struct cv_dn_ws {
    float *u;            /* [max_rows][C] the conv's output: q | k of the key heads, v of the value heads */
    int64_t max_rows;
    int32_t C, d;
    float *work;         /* per thread: a chunk's gathered rows and the chunk kernel's scratch */
    size_t work_floats;
};

/* Committed at creation (cv_aligned_alloc_committed): every forward call
 * writes it, and a model's first request should not pay its first touch. */
cv_dn_ws *cpu_deltanet_ws_create(cv_bstream *s, int64_t max_rows, int32_t H_k, int32_t H_v, int32_t d)
{
    cv_dn_ws *ws = cv_xcalloc(1, sizeof *ws);
    ws->max_rows = max_rows;
    ws->C = 2 * H_k * d + H_v * d;
    ws->d = d;
    ws->u = cv_aligned_alloc_committed((size_t)max_rows * (size_t)ws->C * sizeof(float));
    /* Q, K, V, O [CV_DN_CHUNK][d], beta and g [CV_DN_CHUNK], then the chunk
     * kernel's scratch (which also covers the step's d floats). */
    ws->work_floats = ((4 * (size_t)CV_DN_CHUNK * d + 2 * CV_DN_CHUNK + cv_dn_chunk_floats(d)) + 15) & ~(size_t)15;
    ws->work = cv_aligned_alloc_committed(ws->work_floats * (size_t)cv_pool_size(cpu_stream_of(s)->pool) * sizeof(float));
    return ws;
}

void cpu_deltanet_ws_destroy(cv_bstream *s, cv_dn_ws *ws)
{
    (void)s;
    cv_aligned_free(ws->u);
    cv_aligned_free(ws->work);
    free(ws);
}

typedef struct dn_job {
    const cv_vec_ops *vec;
    const dn_kernels *kn;
    const cv_bdeltanet *a;
    cv_dn_ws *ws;
} dn_job;

static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Per row: the causal conv over this and the K - 1 earlier positions of
 * its sequence (rows of this call, or the conv state for positions before
 * it), SiLU, the L2 norms of q and k, and the gates beta and g. Rows only
 * read the other rows' conv input, which nothing writes here. */
static void rows_conv(void *ctx, int ith, int nth)
{
    const dn_job *j = ctx;
    const cv_bdeltanet *a = j->a;
    const cv_vec_ops *vec = j->vec;
    const int32_t C = j->ws->C, K = a->K, d = a->d, inner = a->H_v * d;
    const float qscale = 1.0f / sqrtf((float)d);
    int64_t lo, hi;
    cv_split_range(a->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const int32_t i = a->row_seq[t], p = a->pos[t], p0 = a->p0[i], begin = a->begin[i];
        const float *state = a->state[i];
        const float *x[CV_MAX_SSM_CONV];
        for (int32_t tap = 0; tap < K; tap++) {
            const int32_t at = p - (K - 1) + tap; /* >= p0 - (K - 1) */
            x[tap] = at >= p0 ? a->in + (int64_t)a->rows[begin + at - p0] * a->ld_in
                              : state + (int64_t)(at - p0 + K - 1) * C;
        }
        float *u = j->ws->u + t * C;
        for (int32_t c = 0; c < C; c++) {
            const float *w = a->conv + (int64_t)c * K;
            float acc = 0;
            for (int32_t tap = 0; tap < K; tap++)
                acc += w[tap] * x[tap][c];
            u[c] = acc;
        }
        vec->sigmoid_mul(u, u, u, C); /* silu */
        for (int32_t h = 0; h < 2 * a->H_k; h++) {
            float *r = u + (int64_t)h * d;
            const float n2 = vec->dot_f32(r, r, d);
            vec->scale(r, (h < a->H_k ? qscale : 1.0f) / fmaxf(sqrtf(n2), a->eps), d);
        }
        float *beta = a->in + t * a->ld_in + C + inner, *gate = beta + a->H_v;
        for (int32_t h = 0; h < a->H_v; h++) {
            beta[h] = 1.0f / (1.0f + expf(-beta[h]));
            gate[h] = softplus(gate[h] + a->dt_bias[h]) * a->a[h];
        }
    }
}

/* Each sequence's conv state becomes the inputs of its last K - 1
 * positions (once every row has read the old one). */
static void update_conv_state(const cv_bdeltanet *a, int32_t C)
{
    const int32_t K = a->K;
    for (int32_t i = 0; i < a->n_seqs; i++) {
        const int32_t begin = a->begin[i], n = a->begin[i + 1] - begin, p0 = a->p0[i], end = p0 + n;
        float *state = a->state[i];
        /* Row r holds position end - (K - 1) + r; an old row moves down by
         * n, so rows are rewritten upward, each from a later one. */
        for (int32_t r = 0; r < K - 1; r++) {
            const int32_t at = end - (K - 1) + r;
            const float *src = at >= p0 ? a->in + (int64_t)a->rows[begin + at - p0] * a->ld_in
                                        : state + (int64_t)(at - p0 + K - 1) * C;
            memmove(state + (int64_t)r * C, src, (size_t)C * sizeof(float));
        }
    }
}

/* One work item: value head item % H_v of sequence item / H_v, every token
 * of it in this call, in chunks aligned to CV_DN_CHUNK positions. */
static void run_head(const dn_job *j, int32_t item, float *work)
{
    const cv_bdeltanet *a = j->a;
    const int32_t d = a->d, C = j->ws->C, inner = a->H_v * d, hv = item % a->H_v, i = item / a->H_v;
    const int32_t hk = a->grouped ? hv / (a->H_v / a->H_k) : hv % a->H_k, begin = a->begin[i];
    const int32_t n = a->begin[i + 1] - begin;
    /* offsets in a conv-output row: q of key head hk, its k, v of value head hv */
    const int64_t q_at = (int64_t)hk * d, k_at = (int64_t)(a->H_k + hk) * d;
    const int64_t v_at = (int64_t)(2 * a->H_k + hv) * d;
    float *S = a->state[i] + (size_t)(a->K - 1) * C + (size_t)hv * d * d;
    enum { N = CV_DN_CHUNK };
    float *Q = work, *Kc = Q + (size_t)N * d, *V = Kc + (size_t)N * d, *O = V + (size_t)N * d, *B = O + (size_t)N * d;
    float *Gt = B + N, *chunk = Gt + N;
    const int32_t p0 = a->p0[i];
    for (int32_t r = 0; r < n;) {
        const int32_t len = CV_MIN(n - r, N - (p0 + r) % N);
        if (len <= a->step_run) {
            for (int32_t k = 0; k < len; k++) {
                const int64_t t = a->rows[begin + r + k];
                const float *u = j->ws->u + t * C, *gb = a->in + t * a->ld_in + C + inner;
                float *o = a->out + t * a->ld_out + (int64_t)hv * d;
                j->kn->step(d, S, u + q_at, u + k_at, u + v_at, gb[hv], gb[a->H_v + hv], o, chunk);
            }
        } else {
            for (int32_t k = 0; k < len; k++) {
                const int64_t t = a->rows[begin + r + k];
                const float *u = j->ws->u + t * C, *gb = a->in + t * a->ld_in + C + inner;
                memcpy(Q + (size_t)k * d, u + q_at, (size_t)d * sizeof(float));
                memcpy(Kc + (size_t)k * d, u + k_at, (size_t)d * sizeof(float));
                memcpy(V + (size_t)k * d, u + v_at, (size_t)d * sizeof(float));
                B[k] = gb[hv];
                Gt[k] = gb[a->H_v + hv];
            }
            cv_dn_chunk(j->kn, j->vec, d, len, S, Q, Kc, V, B, Gt, O, chunk);
            for (int32_t k = 0; k < len; k++) {
                const int64_t t = a->rows[begin + r + k];
                memcpy(a->out + t * a->ld_out + (int64_t)hv * d, O + (size_t)k * d, (size_t)d * sizeof(float));
            }
        }
        r += len;
    }
}

static void head_item(void *ctx, int64_t i, int ith)
{
    const dn_job *j = ctx;
    run_head(j, (int32_t)i, j->ws->work + (size_t)ith * j->ws->work_floats);
}

/* Per row and value head: y = rmsnorm(o) * norm * silu(z). */
static void rows_out(void *ctx, int ith, int nth)
{
    const dn_job *j = ctx;
    const cv_bdeltanet *a = j->a;
    const int32_t d = a->d;
    int64_t lo, hi;
    cv_split_range(a->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *z = a->in + t * a->ld_in + j->ws->C;
        for (int32_t h = 0; h < a->H_v; h++) {
            float *o = a->out + t * a->ld_out + (int64_t)h * d;
            j->vec->rmsnorm(o, o, a->norm, d, a->eps);
            j->vec->swiglu(o, z + (int64_t)h * d, o, d);
        }
    }
}

void cpu_deltanet(cv_bstream *s, const cv_bdeltanet *a, cv_dn_ws *ws)
{
    assert(a->n_rows <= ws->max_rows && a->d == ws->d && a->K <= CV_MAX_SSM_CONV &&
           ws->C == 2 * a->H_k * a->d + a->H_v * a->d);
    if (a->n_rows < 1)
        return;
    dn_job j = { .vec = cpu_stream_of(s)->vec, .kn = cv_dn_kernels_for(a->d), .a = a, .ws = ws };
    cpu_run_rows(s, a->n_rows, rows_conv, &j);
    update_conv_state(a, ws->C);
    cv_pool_run_items(cpu_stream_of(s)->pool, (int64_t)a->n_seqs * a->H_v, head_item, &j);
    cpu_run_rows(s, a->n_rows, rows_out, &j);
}
