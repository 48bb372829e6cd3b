/* attention.c — causal attention over paged KV blocks with an online
 * softmax (one pass over the keys: a running maximum and sum per query
 * head, rescaling the accumulated values when the maximum grows), so no
 * score row of the full context is ever materialised. One work item is a
 * (token, kv head) pair: the n_rep query heads that share a kv head are
 * computed together, so each key and value row is read once per group
 * (GQA). Items are handed out through an atomic counter, because tokens at
 * later positions cost more than early ones.
 *
 * Scale 1/sqrt(head_dim); token t at position p sees positions 0..p of its
 * own sequence, which the forward pass wrote to the cache before calling. */
#include <math.h>
#include <stdatomic.h>

#include "engine/engine_int.h"

typedef struct att_job {
    cv_engine *e;
    const cv_batch *b;
    int32_t layer;
    int64_t n_items;
    _Atomic int64_t next;
} att_job;

static void att_item(cv_engine *e, const cv_batch *b, int32_t layer, int32_t t, int32_t g, float *scr)
{
    const cv_hparams *hp = &e->m->hp;
    const kv_pool *kv = &e->kv;
    const cv_vec_ops *vec = e->vec;
    const int32_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const bool f16 = kv->type == CV_GGML_F16;

    float *acc = scr;                      /* [n_rep][hd] */
    float *s = acc + (size_t)n_rep * hd;   /* [n_rep][BLOCK] */
    float *mx = s + (size_t)n_rep * CV_KV_BLOCK;
    float *sum = mx + n_rep;
    memset(acc, 0, (size_t)n_rep * hd * sizeof(float));
    for (int32_t r = 0; r < n_rep; r++) {
        mx[r] = -INFINITY;
        sum[r] = 0;
    }

    const float *q0 = e->qkv + (int64_t)t * e->ld_qkv + (int64_t)g * n_rep * hd;
    const int32_t n_pos = b->pos[t] + 1;
    const int32_t *blocks = e->seqs[b->seq[t]].blocks;
    for (int32_t blk = 0; blk * CV_KV_BLOCK < n_pos; blk++) {
        const int32_t n = CV_MIN(CV_KV_BLOCK, n_pos - blk * CV_KV_BLOCK);
        const char *K = kv_k(kv, blocks[blk], layer, g);
        const char *V = kv_v(kv, blocks[blk], layer, g);
        const size_t row = (size_t)hd * kv->elt_bytes;
        for (int32_t r = 0; r < n_rep; r++) {
            const float *q = q0 + (size_t)r * hd;
            float *sr = s + (size_t)r * CV_KV_BLOCK;
            float bm = -INFINITY;
            for (int32_t j = 0; j < n; j++) {
                float d = f16 ? vec->dot_f16((const uint16_t *)(K + j * row), q, hd)
                              : vec->dot_f32((const float *)(K + j * row), q, hd);
                sr[j] = d * scale;
                bm = sr[j] > bm ? sr[j] : bm;
            }
            float *ar = acc + (size_t)r * hd;
            if (bm > mx[r]) {
                /* exp(-inf) = 0 on the first block, when acc and sum are 0 anyway. */
                float c = expf(mx[r] - bm);
                sum[r] *= c;
                vec->scale(ar, c, hd);
                mx[r] = bm;
            }
            for (int32_t j = 0; j < n; j++) {
                float pj = expf(sr[j] - mx[r]);
                sum[r] += pj;
                if (f16)
                    vec->axpy_f16(ar, pj, (const uint16_t *)(V + j * row), hd);
                else
                    vec->axpy(ar, pj, (const float *)(V + j * row), hd);
            }
        }
    }
    float *o0 = e->attn + (int64_t)t * e->ld_q + (int64_t)g * n_rep * hd;
    for (int32_t r = 0; r < n_rep; r++) {
        const float inv = 1.0f / sum[r];
        for (int32_t i = 0; i < hd; i++)
            o0[(size_t)r * hd + i] = acc[(size_t)r * hd + i] * inv;
    }
}

static void att_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    att_job *j = ctx;
    cv_engine *e = j->e;
    float *scr = e->att_scratch + (size_t)ith * e->att_scratch_floats;
    const int32_t n_kv = e->m->hp.n_head_kv;
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->n_items)
            break;
        att_item(e, j->b, j->layer, (int32_t)(i / n_kv), (int32_t)(i % n_kv), scr);
    }
}

void cv_engine_attention(cv_engine *e, const cv_batch *b, int32_t layer)
{
    att_job j = { .e = e, .b = b, .layer = layer, .n_items = (int64_t)b->n_tokens * e->m->hp.n_head_kv };
    atomic_init(&j.next, 0);
    if (j.n_items == 1)
        att_worker(&j, 0, 1);
    else
        cv_pool_run(e->pool, att_worker, &j);
}
