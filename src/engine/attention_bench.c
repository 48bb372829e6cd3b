/* attention_bench.c — decode attention alone, as `corvid bench-kernels
 * --case attention` measures it (engine.h): a real KV block pool filled
 * with random keys and values through kv_store, one decoding token's
 * query, and the engine's own tile runner over every (layer, KV head)
 * pair, handed out to the pool's threads through an atomic counter. The
 * blocks are a sequence's first ones in order, as a sequence that grew
 * alone holds them. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine/engine_int.h"

typedef struct ab_job {
    att_tile proto; /* layer and head set per item */
    att_tile_fn fn;
    int32_t n_items;
    float *scratch;
    size_t scratch_floats;
    _Atomic int32_t next;
} ab_job;

static void ab_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    ab_job *j = ctx;
    float *scr = j->scratch + (size_t)ith * j->scratch_floats;
    for (;;) {
        const int32_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->n_items)
            break;
        att_tile a = j->proto;
        a.layer = i / a.kv->n_head_kv;
        a.g = i % a.kv->n_head_kv;
        cv_att_tile_run(j->fn, &a, scr);
    }
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int cv_engine_bench_attention(const cv_att_bench *b, cv_pool *pool, cv_att_bench_result *res, cv_err *err)
{
    const att_tile_fn fn = b->tile ? cv_att_tile_named(b->tile, b->head_dim) : cv_att_tile_for(b->head_dim);
    if (!fn)
        return cv_err_set(err, CV_EUNSUPPORTED, "attention bench: no %s tile for head_dim %d on this CPU", b->tile,
                          b->head_dim);
    if (b->depth < 1 || b->n_rep < 1 || b->n_layer < 1 || b->n_head_kv < 1 || b->head_dim > CV_MAX_HEAD_DIM)
        return cv_err_set(err, CV_EINVAL, "attention bench: a shape with nothing to attend");
    const int32_t n_blocks = (b->depth + CV_KV_BLOCK - 1) / CV_KV_BLOCK, hd = b->head_dim;
    kv_pool kv;
    int rc = kv_pool_init(&kv, n_blocks, b->n_layer, 2, b->n_head_kv, hd, b->kv_type, err);
    if (rc)
        return rc;
    int32_t *blocks = cv_xmalloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t i = 0; i < n_blocks; i++)
        blocks[i] = kv_pool_alloc(&kv);
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    cv_rng r;
    cv_rng_seed(&r, 1);
    float k[CV_MAX_HEAD_DIM], v[CV_MAX_HEAD_DIM];
    for (int32_t blk = 0; blk < n_blocks; blk++)
        for (int32_t l = 0; l < b->n_layer; l++)
            for (int32_t h = 0; h < b->n_head_kv; h++)
                for (int32_t j = 0; j < CV_KV_BLOCK; j++) {
                    for (int32_t i = 0; i < hd; i++)
                        k[i] = cv_rng_f32(&r) * 2 - 1, v[i] = cv_rng_f32(&r) * 2 - 1;
                    kv_store(&kv, vec, kv_k(&kv, blocks[blk], l, h), kv_v(&kv, blocks[blk], l, h), j, k, v);
                }
    const int64_t n_q = (int64_t)b->n_head_kv * b->n_rep * hd;
    float *q = cv_xmalloc((size_t)n_q * sizeof *q), *out = cv_xmalloc((size_t)n_q * sizeof *out);
    for (int64_t i = 0; i < n_q; i++)
        q[i] = cv_rng_f32(&r) * 2 - 1;
    const int nth = cv_pool_size(pool);
    const size_t sf = (cv_att_scratch_floats(b->n_rep, hd) + 15) & ~(size_t)15;
    const int32_t row = 0;
    ab_job j = {
        .proto = { .kv = &kv, .blocks = blocks, .n_tok = 1, .pos0 = b->depth - 1, .rows = &row, .qkv = q,
                   .ld_qkv = n_q, .out = out, .ld_out = n_q, .n_rep = b->n_rep, .hd = hd, .hd_v = hd,
                   .scale = 1.0f / sqrtf((float)hd) },
        .fn = fn,
        .n_items = b->n_layer * b->n_head_kv,
        .scratch = cv_aligned_alloc(sf * sizeof(float) * (size_t)nth),
        .scratch_floats = sf,
    };
    const int repeats = CV_MAX(1, b->repeats);
    double *t = cv_xmalloc((size_t)repeats * sizeof *t);
    for (int rep = 0; rep < repeats; rep++) {
        atomic_store(&j.next, 0);
        const double t0 = cv_now_s();
        cv_pool_run(pool, ab_worker, &j);
        t[rep] = cv_now_s() - t0;
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp_double);
    *res = (cv_att_bench_result){
        .best_s = t[0],
        .median_s = repeats % 2 ? t[repeats / 2] : 0.5 * (t[repeats / 2 - 1] + t[repeats / 2]),
        .bytes = (double)n_blocks * b->n_layer * b->n_head_kv * 2 * (double)kv.head_bytes,
        .tile = cv_att_tile_name(fn),
    };
    free(t);
    cv_aligned_free(j.scratch);
    free(q);
    free(out);
    free(blocks);
    kv_pool_fini(&kv);
    return 0;
}
