/* cpu_layer.c — the CPU backend's layer passes: the per-row work of a
 * layer kind between its matmuls, one table operation each (the attention
 * mixer's Q/K/V preparation and K/V store). Each is the loop the engine
 * ran before it moved behind the table, over the kernels layer's vector
 * loops of the process's level, so a row's bits are the same as they
 * were, alone or in a batch, on one thread or several (rows split whole,
 * cpu_run_rows). */
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
