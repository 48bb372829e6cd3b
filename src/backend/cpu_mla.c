/* cpu_mla.c — the CPU backend's multi-head latent attention passes
 * (backend.h's cv_bmla_rows and cv_bmla_dec): the loops the engine's
 * latent kind ran around its projections (engine/mix_mla.c owns the layer,
 * its projections and which tokens take which form; the tile and the
 * decompressed form's attention are the kernels layer's, kernels/mla.h),
 * moved here whole so their bits are the same: the rows' norm, RoPE and
 * cache store per row split whole over the pool (cpu_run_rows); the
 * context's latent rows read as f32; and the decompressed form one work
 * item per head, whose pieces run in order on one thread, so a query's
 * bits depend on its position and the context only. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_int.h"
#include "kernels/mla.h"

/* ---- the rows ---- */

typedef struct mla_rows_job {
    const cv_vec_ops *vec;
    const cv_bmla_rows *a;
} mla_rows_job;

static void rows_part(void *ctx, int ith, int nth)
{
    const mla_rows_job *j = ctx;
    const cv_bmla_rows *a = j->a;
    const cv_vec_ops *vec = j->vec;
    const int32_t C = a->C, rot = a->rot, D = C + rot, nope = a->k_mla - rot;
    int64_t lo, hi;
    cv_split_range(a->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const int32_t pos = a->pos[t];
        float *row = a->latent + t * a->ld_latent, *q = a->q + t * a->ld_q, *qa = a->qa + t * a->ld_qa;
        vec->rmsnorm(row, row, a->kv_norm, C, a->eps);
        vec->rope(a->rope, row + C, 1, rot, pos);
        for (int32_t h = 0; h < a->n_head; h++) {
            float *pe = q + (int64_t)h * a->k_mla + nope;
            vec->rope(a->rope, pe, 1, rot, pos);
            memcpy(qa + (int64_t)h * D + C, pe, (size_t)rot * sizeof(float));
        }
        cv_mla_store(a->kv, vec, kv_k(a->kv, a->kv_block[t], a->kv_layer, 0), pos % CV_KV_BLOCK, row);
    }
}

void cpu_mla_rows(cv_bstream *s, const cv_bmla_rows *a)
{
    assert(a->kv->n_parts == 1 && a->kv->head_dim == a->C + a->rot);
    mla_rows_job j = { .vec = cpu_stream_of(s)->vec, .a = a };
    cpu_run_rows(s, a->n_rows, rows_part, &j);
}

void cpu_mla_latent(cv_bstream *s, const kv_pool *kv, int32_t layer, const int32_t *table, int32_t base, int32_t n,
                    float *y)
{
    (void)s;
    assert(base % CV_KV_BLOCK == 0);
    const int32_t D = kv->head_dim;
    for (int32_t b = 0; b < n; b += CV_KV_BLOCK) {
        const int32_t m = CV_MIN(CV_KV_BLOCK, n - b);
        float *dst = y + (size_t)b * D;
        const float *rows = cv_mla_rows(kv, kv_k(kv, table[(base + b) / CV_KV_BLOCK], layer, 0), m, dst);
        if (rows != dst)
            memcpy(dst, rows, (size_t)m * D * sizeof(float));
    }
}

/* ---- the decompressed form ---- */

static inline size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

struct cv_mla_ws {
    int32_t max_q, n_head, nope, rot, v;
    const dn_kernels *kn;  /* the GEMMs of the process's level */
    mla_dec_head *heads;   /* [n_head] */
    float *state;          /* [n_head][state_floats] the heads' queries and softmax state */
    size_t state_floats;
    float *scratch;        /* per thread */
    size_t scratch_floats;
};

cv_mla_ws *cpu_mla_ws_create(cv_bstream *s, int32_t max_q, int32_t n_head, int32_t nope, int32_t rot, int32_t v)
{
    cv_mla_ws *ws = cv_xcalloc(1, sizeof *ws);
    *ws = (cv_mla_ws){ .max_q = max_q, .n_head = n_head, .nope = nope, .rot = rot, .v = v,
                       .kn = cv_dn_kernels_for(16) };
    ws->heads = cv_xcalloc((size_t)n_head, sizeof *ws->heads);
    ws->state_floats = cv_mla_dec_state_floats(max_q, nope, rot, v);
    ws->state = cv_aligned_alloc_committed(ws->state_floats * (size_t)n_head * sizeof(float));
    ws->scratch_floats = round16(cv_mla_dec_scratch_floats(max_q, nope, rot, v));
    ws->scratch = cv_aligned_alloc_committed(ws->scratch_floats * sizeof(float) *
                                             (size_t)cv_pool_size(cpu_stream_of(s)->pool));
    return ws;
}

void cpu_mla_ws_destroy(cv_bstream *s, cv_mla_ws *ws)
{
    (void)s;
    free(ws->heads);
    cv_aligned_free(ws->state);
    cv_aligned_free(ws->scratch);
    free(ws);
}

typedef struct dec_job {
    const cv_bmla_dec *a;
    cv_mla_ws *ws;
} dec_job;

/* Head h over the chunk, a piece of CV_MLA_PIECE at a time: from its
 * queries at the first chunk, into its outputs after the last. */
static void dec_head(void *ctx, int64_t h, int ith)
{
    const dec_job *j = ctx;
    const cv_bmla_dec *a = j->a;
    cv_mla_ws *ws = j->ws;
    mla_dec_head *hd = &ws->heads[h];
    const int32_t K = a->nope + a->rot;
    if (a->base == 0) {
        *hd = (mla_dec_head){ .nope = a->nope, .rot = a->rot, .v = a->v, .n_q = a->n_q, .pos0 = a->pos0,
                              .scale = a->scale };
        cv_mla_dec_start(hd, ws->state + (size_t)h * ws->state_floats, a->q + h * K, a->ld_q, a->rows);
    }
    for (int32_t at = 0; at < a->n_ctx; at += CV_MLA_PIECE) {
        const mla_dec_piece p = {
            .base = a->base + at,
            .n = CV_MIN(CV_MLA_PIECE, a->n_ctx - at),
            .k = a->kd + at * a->ld_kd + h * a->nope,
            .ld_k = a->ld_kd,
            .pe = a->pe + at * a->ld_pe,
            .ld_pe = a->ld_pe,
            .val = a->vd + at * a->ld_vd + h * a->v,
            .ld_v = a->ld_vd,
        };
        cv_mla_dec_piece(ws->kn, hd, &p, ws->scratch + (size_t)ith * ws->scratch_floats);
    }
    if (a->base + a->n_ctx == a->pos0 + a->n_q)
        cv_mla_dec_finish(hd, a->rows, a->out + h * a->v, a->ld_out);
}

void cpu_mla_dec(cv_bstream *s, const cv_bmla_dec *a, cv_mla_ws *ws)
{
    assert(a->n_q <= ws->max_q && a->n_head == ws->n_head && a->nope == ws->nope && a->rot == ws->rot &&
           a->v == ws->v && a->base % CV_MLA_PIECE == 0);
    dec_job j = { .a = a, .ws = ws };
    cv_pool_run_items(cpu_stream_of(s)->pool, a->n_head, dec_head, &j);
}
