/* attention_bench.c — decode attention alone, as `corvid bench-kernels
 * --case attention` measures it (engine.h): a real KV block pool filled
 * with random keys and values through kv_store, one decoding token's
 * query, and the engine's own tile runner over every (layer, KV head)
 * pair, handed out to the pool's threads as a work queue (cv_pool_run_items). The
 * blocks are a sequence's first ones in order, as a sequence that grew
 * alone holds them. And multi-head latent attention (`--case mla`): both
 * of its forms over a latent pool, decode at depth and prefill chunks. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

typedef struct ab_job {
    att_tile proto; /* layer and head set per item */
    att_tile_fn fn;
    float *scratch;
    size_t scratch_floats;
} ab_job;

static void ab_item(void *ctx, int64_t i, int ith)
{
    const ab_job *j = ctx;
    att_tile a = j->proto;
    a.layer = (int32_t)i / a.kv->n_head_kv;
    a.g = (int32_t)i % a.kv->n_head_kv;
    cv_att_tile_run(j->fn, &a, j->scratch + (size_t)ith * j->scratch_floats);
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
        .scratch = cv_aligned_alloc(sf * sizeof(float) * (size_t)nth),
        .scratch_floats = sf,
    };
    const int repeats = CV_MAX(1, b->repeats);
    double *t = cv_xmalloc((size_t)repeats * sizeof *t);
    for (int rep = 0; rep < repeats; rep++) {
        const double t0 = cv_now_s();
        cv_pool_run_items(pool, (int64_t)b->n_layer * b->n_head_kv, ab_item, &j);
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

/* ---- multi-head latent attention ---- */

typedef struct mb_job {
    att_tile proto;
    att_tile_fn fn;
    int32_t n_items;  /* tiles of the prefill's tokens, or chunks of the one decoding token's context */
    int32_t n_tok;    /* the prefill's tokens (the last tile may hold fewer than proto's) */
    bool chunks;
    float *scratch, *slots;
    size_t scratch_floats, slot_floats;
} mb_job;

static void mb_item(void *ctx, int64_t i, int ith)
{
    const mb_job *j = ctx;
    float *scr = j->scratch + (size_t)ith * j->scratch_floats;
    att_tile a = j->proto;
    if (!j->chunks) {
        a.pos0 += (int32_t)i * a.n_tok;
        a.rows += i * a.n_tok;
        a.n_tok = CV_MIN(a.n_tok, j->n_tok - (int32_t)i * a.n_tok);
        cv_att_tile_run(j->fn, &a, scr);
        return;
    }
    a.blk0 = (int32_t)i * CV_ATT_CHUNK_BLOCKS;
    a.blk1 = a.blk0 + CV_ATT_CHUNK_BLOCKS;
    j->fn(&a, scr);
    memcpy(j->slots + (size_t)i * j->slot_floats, scr, cv_att_state_floats(a.n_tok * a.n_rep, a.hd_v) * sizeof(float));
}

static double median_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The decompressed form's items: head h over a chunk of n positions from
 * base, whose keys and values (all heads') are in kv [n][H (nope + v)]. */
typedef struct mbd_job {
    mla_dec_head *heads;
    int32_t H, up, base, n;
    float *kv;
    const float *pe; /* [depth][rope] */
    float *scratch;
    size_t scratch_floats;
} mbd_job;

static void mbd_item(void *ctx, int64_t h, int ith)
{
    const mbd_job *j = ctx;
    mla_dec_head *hd = &j->heads[h];
    const int64_t ld = (int64_t)j->H * j->up;
    for (int32_t at = 0; at < j->n; at += CV_MLA_PIECE) {
        const mla_dec_piece p = { .base = j->base + at, .n = CV_MIN(CV_MLA_PIECE, j->n - at),
                                  .k = j->kv + at * ld + h * j->up, .ld_k = ld,
                                  .pe = j->pe + (size_t)(j->base + at) * hd->rot, .ld_pe = hd->rot,
                                  .val = j->kv + at * ld + h * j->up + hd->nope, .ld_v = ld };
        cv_mla_dec_piece(cv_dn_kernels_for(16), hd, &p, j->scratch + (size_t)ith * j->scratch_floats);
    }
}

int cv_engine_bench_mla(const cv_mla_bench *b, cv_pool *pool, cv_mla_bench_result *res, cv_err *err)
{
    const int32_t H = b->n_head, C = b->kv_lora, D = C + b->rope, up = b->nope + b->v, K = b->nope + b->rope;
    if (H < 1 || C < 1 || b->rope < 0 || b->nope < 1 || b->v < 1 || b->n_tok < 1 || b->depth < b->n_tok ||
        (int64_t)H * D > CV_MAX_MODEL_DIM)
        return cv_err_set(err, CV_EINVAL, "mla bench: a shape with nothing to attend");
    /* a decode step cuts its context into chunks, a prefill its tokens into tiles */
    const bool chunks = b->n_tok == 1, dec = b->n_tok >= CV_MLA_GROUP;
    const int32_t tt = chunks ? 1 : eng_mla_tile_tokens(H);
    const int32_t n_blocks = (b->depth + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    kv_pool kv;
    int rc = kv_pool_init(&kv, n_blocks, 1, 1, 1, D, b->kv_type, err);
    if (rc)
        return rc;
    int32_t *blocks = cv_xmalloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t i = 0; i < n_blocks; i++)
        blocks[i] = kv_pool_alloc(&kv);
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    cv_rng r;
    cv_rng_seed(&r, 1);
    /* the latent rows; the last n_tok also as the tokens' rows the
     * absorbed form's up-projections take (their shape, not their values) */
    float *lat = cv_aligned_alloc((size_t)b->depth * C * sizeof(float)), row[CV_MAX_HEAD_DIM];
    for (int32_t p = 0; p < b->depth; p++) {
        for (int32_t i = 0; i < D; i++)
            row[i] = cv_rng_f32(&r) * 2 - 1;
        memcpy(lat + (size_t)p * C, row, (size_t)C * sizeof(float));
        cv_mla_store(&kv, vec, kv_k(&kv, blocks[p / CV_KV_BLOCK], 0, 0), p % CV_KV_BLOCK, row);
    }
    const int64_t ld_q = (int64_t)H * D, ld_o = (int64_t)H * C;
    float *q = cv_aligned_alloc((size_t)b->n_tok * ld_q * sizeof(float));
    float *out = cv_aligned_alloc((size_t)b->n_tok * ld_o * sizeof(float));
    for (int64_t i = 0; i < b->n_tok * ld_q; i++)
        q[i] = cv_rng_f32(&r) * 2 - 1;
    int32_t *rows = cv_xmalloc((size_t)b->n_tok * sizeof *rows);
    for (int32_t i = 0; i < b->n_tok; i++)
        rows[i] = i;
    const att_tile_fn fn = cv_mla_tile_for();
    const int nth = cv_pool_size(pool);
    const int32_t n_chunks = cv_att_chunks(b->depth - 1);
    const float scale = 1.0f / sqrtf((float)K);
    mb_job j = {
        .proto = { .kv = &kv, .blocks = blocks, .n_tok = tt, .pos0 = b->depth - b->n_tok, .rows = rows, .qkv = q,
                   .ld_qkv = ld_q, .out = out, .ld_out = ld_o, .n_rep = H, .hd = D, .hd_v = C, .scale = scale },
        .fn = fn,
        .n_items = chunks ? n_chunks : (b->n_tok + tt - 1) / tt,
        .n_tok = b->n_tok,
        .chunks = chunks,
        .scratch_floats = cv_mla_scratch_floats(H * tt, D),
        .slot_floats = (cv_att_state_floats(H, C) + 15) & ~(size_t)15,
    };
    j.scratch = cv_aligned_alloc(j.scratch_floats * sizeof(float) * (size_t)nth);
    j.slots = cv_aligned_alloc(j.slot_floats * sizeof(float) * (size_t)n_chunks);
    /* the heads' key (nope) and value up-projections stacked, n_in = kv_lora */
    const size_t rb = cv_ggml_row_bytes(b->up_type, C);
    char *w_data = cv_aligned_alloc(rb * (size_t)H * up);
    for (int64_t o = 0; o < (int64_t)H * up; o++) {
        for (int32_t i = 0; i < C; i++)
            row[i] = (cv_rng_f32(&r) * 2 - 1) / sqrtf((float)C);
        if ((rc = cv_quantize_row(b->up_type, row, w_data + (size_t)o * rb, C, err)))
            goto out;
    }
    cv_wmat *w = NULL;
    if ((rc = cv_wmat_create(b->up_type, C, (int64_t)H * up, w_data, rb * (size_t)H * up, &w, err)))
        goto out;
    float *absorb = cv_aligned_alloc((size_t)b->n_tok * H * up * sizeof(float));
    /* the decompressed form: chunks of 256 positions' keys and values (the
     * engine's DEC_CHUNK), each head's state over its queries (the same
     * rows, read as [H][nope + rope]), the RoPE part of every position */
    enum { CHUNK = 256 };
    const size_t sf = (cv_mla_dec_state_floats(b->n_tok, b->nope, b->rope, b->v) + 15) & ~(size_t)15;
    mla_dec_head *heads = cv_xcalloc((size_t)H, sizeof *heads);
    float *state = dec ? cv_aligned_alloc(sf * H * sizeof(float)) : NULL;
    float *pe = cv_aligned_alloc(((size_t)b->depth * b->rope + 1) * sizeof(float));
    for (int64_t i = 0; i < (int64_t)b->depth * b->rope; i++)
        pe[i] = cv_rng_f32(&r) * 2 - 1;
    float *dout = cv_aligned_alloc((size_t)b->n_tok * H * b->v * sizeof(float));
    mbd_job dj = { .heads = heads, .H = H, .up = up, .pe = pe,
                   .kv = dec ? cv_aligned_alloc((size_t)CHUNK * H * up * sizeof(float)) : NULL,
                   .scratch_floats = (cv_mla_dec_scratch_floats(b->n_tok, b->nope, b->rope, b->v) + 15) & ~(size_t)15 };
    dj.scratch = dec ? cv_aligned_alloc(dj.scratch_floats * sizeof(float) * (size_t)nth) : NULL;
    const int repeats = CV_MAX(1, b->repeats);
    double *ta = cv_xmalloc((size_t)repeats * sizeof *ta), *td = cv_xmalloc((size_t)repeats * sizeof *td);
    double (*now)(void) = b->clock ? b->clock : cv_now_s;
    for (int rep = 0; rep < repeats; rep++) {
        double t0 = now();
        cv_pool_run_items(pool, j.n_items, mb_item, &j);
        if (chunks) {
            att_tile a = j.proto;
            for (int32_t c = 1; c < n_chunks; c++)
                cv_att_state_merge(j.slots, j.slots + (size_t)c * j.slot_floats, H, C);
            cv_att_state_write(&a, j.slots);
        }
        cv_matmul(pool, w, b->n_tok, lat + (size_t)(b->depth - b->n_tok) * C, absorb);
        ta[rep] = now() - t0;
        td[rep] = 0;
        if (!dec)
            continue;
        t0 = now();
        for (int32_t h = 0; h < H; h++) {
            heads[h] = (mla_dec_head){ .nope = b->nope, .rot = b->rope, .v = b->v, .n_q = b->n_tok,
                                       .pos0 = b->depth - b->n_tok, .scale = scale };
            cv_mla_dec_start(&heads[h], state + (size_t)h * sf, q + (int64_t)h * K, (int64_t)H * K, rows);
        }
        for (dj.base = 0; dj.base < b->depth; dj.base += CHUNK) {
            dj.n = CV_MIN(CHUNK, b->depth - dj.base);
            cv_matmul(pool, w, dj.n, lat + (size_t)dj.base * C, dj.kv);
            cv_pool_run_items(pool, H, mbd_item, &dj);
        }
        for (int32_t h = 0; h < H; h++)
            cv_mla_dec_finish(&heads[h], rows, dout + (int64_t)h * b->v, (int64_t)H * b->v);
        td[rep] = now() - t0;
    }
    double pairs = 0;
    for (int32_t t = 0; t < b->n_tok; t++)
        pairs += b->depth - b->n_tok + t + 1;
    *res = (cv_mla_bench_result){
        .absorbed_s = median_of(ta, repeats),
        .decompressed_s = median_of(td, repeats),
        .absorbed_macs = pairs * H * (D + C) + (double)b->n_tok * H * up * C,
        .decompressed_macs = pairs * H * (K + b->v) + (double)b->depth * H * up * C,
        .tile = cv_mla_tile_name(fn),
    };
    free(ta);
    free(td);
    cv_aligned_free(absorb);
    cv_aligned_free(state);
    free(heads);
    cv_aligned_free(pe);
    cv_aligned_free(dout);
    cv_aligned_free(dj.kv);
    cv_aligned_free(dj.scratch);
    cv_wmat_destroy(w);
out:
    cv_aligned_free(w_data);
    cv_aligned_free(j.scratch);
    cv_aligned_free(j.slots);
    cv_aligned_free(lat);
    cv_aligned_free(q);
    cv_aligned_free(out);
    free(rows);
    free(blocks);
    kv_pool_fini(&kv);
    return rc;
}
