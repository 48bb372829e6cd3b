/* test_backend_cpu_deltanet.c — the CPU backend's Gated DeltaNet pass
 * (deltanet), for tiled and grouped key heads, one thread and two:
 *   - three sequences in one call (a prompt of 70 tokens from an empty
 *     state: a chunk of 64 by the chunked form, then 6 steps; 3 tokens from
 *     position 62, across a chunk edge; one decoding token at 5), their rows
 *     interleaved in the batch, give each sequence's bits of a call of its
 *     own: outputs, gates written back and the states left behind;
 *   - a prompt fed in two calls split on the chunk grid gives the bits of
 *     one call, and a run of up to step_run tokens those of one call a token;
 *   - every output and state is within rounding of a plain reference that
 *     runs each sequence token by token with the scalar loops (conv, SiLU,
 *     L2 norms, gates, the recurrence written out, the gated norm).
 *
 * tests/backend/CMakeLists.txt runs it once more under CORVID_ISA=scalar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/deltanet.h"
#include "test.h"

enum { H_K = 2, H_V = 4, D = 16, K = 4, C = 2 * H_K * D + H_V * D, INNER = H_V * D, LD_IN = C + INNER + 2 * H_V + 3,
       LD_OUT = INNER + 2, N_SEQ = 3, MAX_ROWS = 74, STATE = (K - 1) * C + H_V * D * D, STEP_RUN = 32 };

static const int32_t g_p0[N_SEQ] = { 0, 62, 5 }, g_n[N_SEQ] = { 70, 3, 1 };

/* A layer's vectors, the rows' projections and the sequences' first
 * states. */
typedef struct layer {
    bool grouped;
    float conv[C * K], dt_bias[H_V], a[H_V], norm[D];
    float in[MAX_ROWS * LD_IN];      /* by sequence, then position */
    float state0[N_SEQ][STATE];
} layer;

static void fill(float *x, int64_t n, cv_rng *r, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * cv_rng_f32(r);
}

static void layer_make(layer *L, bool grouped)
{
    cv_rng r;
    cv_rng_seed(&r, grouped ? 7 : 3);
    L->grouped = grouped;
    fill(L->conv, C * K, &r, -0.6f, 0.6f);
    fill(L->dt_bias, H_V, &r, -1, 1);
    fill(L->a, H_V, &r, -1.5f, -0.1f);
    fill(L->norm, D, &r, 0.5f, 1.5f);
    fill(L->in, MAX_ROWS * LD_IN, &r, -2, 2);
    for (int s = 0; s < N_SEQ; s++) /* an empty sequence's state is zero */
        if (g_p0[s] == 0)
            memset(L->state0[s], 0, sizeof L->state0[s]);
        else
            fill(L->state0[s], STATE, &r, -0.5f, 0.5f);
}

/* Sequence s's rows [r0, r1) of the layer's (by position) as one call's
 * rows: in and out rows, the call's plan, the states. */
typedef struct call {
    int32_t n_rows, n_seqs;
    int32_t rows[MAX_ROWS], begin[N_SEQ + 1], p0[N_SEQ], row_seq[MAX_ROWS], pos[MAX_ROWS];
    int32_t src[MAX_ROWS];           /* each batch row's index into the layer's rows */
    float *state[N_SEQ];
} call;

/* The layer's row index of sequence s's j-th position. */
static int32_t layer_row(int32_t s, int32_t j)
{
    int32_t at = 0;
    for (int32_t i = 0; i < s; i++)
        at += g_n[i];
    return at + j;
}

/* A call of the sequences in `which` (each its positions [from[s], to[s])
 * of the layer's), rows interleaved round-robin in the batch. */
static void call_make(call *c, const bool *which, const int32_t *from, const int32_t *to, float *const *state)
{
    memset(c, 0, sizeof *c);
    int32_t next[N_SEQ], n_left = 0;
    for (int32_t s = 0; s < N_SEQ; s++)
        next[s] = from[s], n_left += which[s] ? to[s] - from[s] : 0;
    /* batch order: one row of each sequence in turn */
    int32_t t = 0;
    while (t < n_left)
        for (int32_t s = 0; s < N_SEQ; s++)
            if (which[s] && next[s] < to[s]) {
                c->src[t] = layer_row(s, next[s]);
                c->pos[t] = g_p0[s] + next[s];
                c->row_seq[t] = s; /* the sequence number, renumbered below */
                next[s]++, t++;
            }
    c->n_rows = t;
    /* the plan: each sequence's rows in position order, sequences in turn */
    int32_t at = 0;
    for (int32_t s = 0; s < N_SEQ; s++) {
        if (!which[s])
            continue;
        const int32_t i = c->n_seqs++;
        c->begin[i] = at;
        c->p0[i] = g_p0[s] + from[s];
        c->state[i] = state[s];
        for (int32_t r = 0; r < c->n_rows; r++)
            if (c->row_seq[r] == s)
                c->rows[at++] = r;
        c->begin[i + 1] = at;
    }
    for (int32_t r = 0; r < c->n_rows; r++) {
        int32_t i = 0;
        while (c->state[i] != state[c->row_seq[r]])
            i++;
        c->row_seq[r] = i;
    }
}

/* Runs call c of layer L on stream s: the layer's rows' outputs into out
 * (by layer row) and their gates written back into in_after. */
static void run_call(cv_bstream *s, cv_dn_ws *ws, const layer *L, const call *c, float *out, float *in_after)
{
    float *in = cv_be_rows_alloc(cv_backend_cpu(), (size_t)c->n_rows * LD_IN * sizeof(float));
    float *o = cv_be_rows_alloc(cv_backend_cpu(), (size_t)c->n_rows * LD_OUT * sizeof(float));
    for (int32_t t = 0; t < c->n_rows; t++) {
        memcpy(in + (int64_t)t * LD_IN, L->in + (int64_t)c->src[t] * LD_IN, LD_IN * sizeof(float));
        for (int32_t i = 0; i < LD_OUT; i++)
            o[(int64_t)t * LD_OUT + i] = -9.0f;
    }
    const cv_bdeltanet a = { .n_rows = c->n_rows, .in = in, .ld_in = LD_IN, .out = o, .ld_out = LD_OUT, .H_k = H_K,
                             .H_v = H_V, .d = D, .K = K, .grouped = L->grouped, .conv = L->conv,
                             .dt_bias = L->dt_bias, .a = L->a, .norm = L->norm, .eps = 1e-6f, .step_run = STEP_RUN,
                             .n_seqs = c->n_seqs, .rows = c->rows, .begin = c->begin, .p0 = c->p0,
                             .state = c->state, .row_seq = c->row_seq, .pos = c->pos };
    cv_be_deltanet(s, &a, ws);
    for (int32_t t = 0; t < c->n_rows; t++) {
        memcpy(out + (int64_t)c->src[t] * LD_OUT, o + (int64_t)t * LD_OUT, LD_OUT * sizeof(float));
        memcpy(in_after + (int64_t)c->src[t] * LD_IN, in + (int64_t)t * LD_IN, LD_IN * sizeof(float));
    }
    cv_be_rows_free(cv_backend_cpu(), in);
    cv_be_rows_free(cv_backend_cpu(), o);
}

/* The whole layer as calls of the given pieces: split[s] cuts sequence s
 * into calls of its positions [0, split[s]) and [split[s], n) (0: one
 * call), every sequence in each call when together, else one sequence a
 * call. */
typedef struct result {
    float out[MAX_ROWS * LD_OUT];
    float in[MAX_ROWS * LD_IN];
    float state[N_SEQ][STATE];
} result;

static void run_layer(cv_bstream *s, cv_dn_ws *ws, const layer *L, bool together, const int32_t *split, result *res)
{
    float *state[N_SEQ];
    for (int32_t q = 0; q < N_SEQ; q++) {
        state[q] = cv_be_rows_alloc(cv_backend_cpu(), STATE * sizeof(float));
        memcpy(state[q], L->state0[q], STATE * sizeof(float));
    }
    for (int piece = 0; piece < 2; piece++)
        for (int32_t q = 0; q < N_SEQ; q++) {
            if (together && q > 0)
                break;
            bool which[N_SEQ];
            int32_t from[N_SEQ], to[N_SEQ];
            bool any = false;
            for (int32_t r = 0; r < N_SEQ; r++) {
                const int32_t cut = split[r] ? split[r] : g_n[r];
                from[r] = piece ? cut : 0;
                to[r] = piece ? g_n[r] : cut;
                which[r] = (together || r == q) && to[r] > from[r];
                any |= which[r];
            }
            if (!any)
                continue;
            call c;
            call_make(&c, which, from, to, state);
            run_call(s, ws, L, &c, res->out, res->in);
        }
    for (int32_t q = 0; q < N_SEQ; q++) {
        memcpy(res->state[q], state[q], STATE * sizeof(float));
        cv_be_rows_free(cv_backend_cpu(), state[q]);
    }
}

/* The reference: each sequence token by token with the scalar loops. */
static void reference(const layer *L, result *res)
{
    const cv_vec_ops *vec = cv_vec_ops_for(CV_ISA_SCALAR);
    for (int32_t s = 0; s < N_SEQ; s++) {
        float *st = res->state[s], *S = st + (K - 1) * C;
        memcpy(st, L->state0[s], STATE * sizeof(float));
        for (int32_t j = 0; j < g_n[s]; j++) {
            const int32_t row = layer_row(s, j);
            const float *in = L->in + (int64_t)row * LD_IN;
            float u[C], tmp[D], beta[H_V], g[H_V];
            for (int32_t c = 0; c < C; c++) {
                float acc = 0;
                for (int32_t tap = 0; tap < K; tap++)
                    acc += L->conv[c * K + tap] * (tap < K - 1 ? st[tap * C + c] : in[c]);
                u[c] = acc / (1.0f + expf(-acc));
            }
            memmove(st, st + C, (size_t)(K - 2) * C * sizeof(float));
            memcpy(st + (K - 2) * C, in, C * sizeof(float));
            for (int32_t h = 0; h < 2 * H_K; h++) {
                float n2 = 0;
                for (int32_t i = 0; i < D; i++)
                    n2 += u[h * D + i] * u[h * D + i];
                const float f = (h < H_K ? 1.0f / sqrtf((float)D) : 1.0f) / fmaxf(sqrtf(n2), 1e-6f);
                for (int32_t i = 0; i < D; i++)
                    u[h * D + i] *= f;
            }
            for (int32_t h = 0; h < H_V; h++) {
                const float x = in[C + INNER + H_V + h] + L->dt_bias[h];
                beta[h] = 1.0f / (1.0f + expf(-in[C + INNER + h]));
                g[h] = (x > 20.0f ? x : log1pf(expf(x))) * L->a[h];
            }
            float *o = res->out + (int64_t)row * LD_OUT;
            for (int32_t h = 0; h < H_V; h++) {
                const int32_t hk = L->grouped ? h / (H_V / H_K) : h % H_K;
                cv_dn_kernels_scalar.step(D, S + h * D * D, u + hk * D, u + (H_K + hk) * D, u + (2 * H_K + h) * D,
                                          beta[h], g[h], o + h * D, tmp);
                vec->rmsnorm(o + h * D, o + h * D, L->norm, D, 1e-6f);
                vec->swiglu(o + h * D, in + C + h * D, o + h * D, D);
            }
        }
    }
}

static int differ(const result *a, const result *b)
{
    int n = 0;
    for (int32_t r = 0; r < MAX_ROWS; r++)
        n += memcmp(a->out + r * LD_OUT, b->out + r * LD_OUT, INNER * sizeof(float)) != 0 ||
             memcmp(a->in + r * LD_IN, b->in + r * LD_IN, LD_IN * sizeof(float)) != 0;
    return n + (memcmp(a->state, b->state, sizeof a->state) != 0);
}

TEST(deltanet_gives_each_sequence_its_bits_in_any_batch_and_split)
{
    static const int32_t no_split[N_SEQ] = { 0, 0, 0 }, on_grid[N_SEQ] = { 64, 0, 0 }, steps[N_SEQ] = { 0, 1, 0 };
    static layer L;
    static result together, alone, split, ref;
    for (int grouped = 0; grouped < 2; grouped++) {
        layer_make(&L, grouped);
        reference(&L, &ref);
        for (int threads = 1; threads <= 2; threads++) {
            cv_bstream *s;
            cv_err err = { 0 };
            CHECK_EQ_INT(cv_bstream_create(cv_backend_cpu(), threads, &s, &err), 0);
            cv_dn_ws *ws = cv_be_deltanet_ws_create(s, MAX_ROWS, H_K, H_V, D);
            CHECK(ws != NULL);
            run_layer(s, ws, &L, true, no_split, &together);
            run_layer(s, ws, &L, false, no_split, &alone);
            CHECK_MSG(differ(&together, &alone) == 0, "grouped %d, %d threads: sequences batched differ from alone",
                      grouped, threads);
            run_layer(s, ws, &L, true, on_grid, &split);
            CHECK_MSG(differ(&together, &split) == 0,
                      "grouped %d, %d threads: a prompt split on the chunk grid differs from one call", grouped,
                      threads);
            run_layer(s, ws, &L, true, steps, &split);
            CHECK_MSG(differ(&together, &split) == 0,
                      "grouped %d, %d threads: a run of step-form tokens cut in two differs from one call", grouped,
                      threads);
            int bad = 0;
            double worst = 0;
            for (int32_t r = 0; r < MAX_ROWS; r++)
                for (int32_t i = 0; i < INNER; i++) {
                    const double w = ref.out[r * LD_OUT + i], e = fabs(together.out[r * LD_OUT + i] - w);
                    worst = fmax(worst, e / (1 + fabs(w)));
                    bad += !(e <= 2e-4 * (1 + fabs(w)));
                }
            for (int32_t q = 0; q < N_SEQ; q++)
                for (int32_t i = 0; i < STATE; i++) {
                    const double w = ref.state[q][i], e = fabs(together.state[q][i] - w);
                    bad += !(e <= 2e-4 * (1 + fabs(w)));
                }
            CHECK_MSG(bad == 0, "grouped %d, %d threads: %d values off the scalar reference (worst relative %g)",
                      grouped, threads, bad, worst);
            for (int32_t r = 0; r < MAX_ROWS; r++)
                for (int32_t i = INNER; i < LD_OUT; i++)
                    bad += together.out[r * LD_OUT + i] != -9.0f;
            CHECK_MSG(bad == 0, "grouped %d: the output rows' gaps were written", grouped);
            cv_be_deltanet_ws_destroy(s, ws);
            cv_bstream_destroy(s);
        }
    }
}

int main(void)
{
    printf("  recurrence loops at %s\n", cv_dn_kernels_name(cv_dn_kernels_for(D)));
    RUN(deltanet_gives_each_sequence_its_bits_in_any_batch_and_split);
    return test_report();
}
