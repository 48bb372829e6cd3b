/* kv_cache.c — the paged KV cache: a pool of fixed-size blocks with
 * reference counts, and each sequence's block table (open, close, truncate,
 * fork, and growing a table before a forward call). Blocks are shared by
 * reference; a sequence about to write into a block someone else also
 * holds copies it first (copy on write), so sharing is invisible to the
 * forward pass. Invariant: refs[b] equals the number of tables holding b,
 * and a block with refs 0 is on the free stack exactly once.
 *
 * A hybrid model's sequence also holds a recurrent state (rec_state.c),
 * which these operations keep in step: close clears it, fork copies it. It
 * sums every position, so it cannot be cut back the way a block table can:
 * truncate keeps it only at the whole length or at 0, and a sequence
 * truncated elsewhere (or handed shared blocks without the state that goes
 * with them) is marked rec_lost and refused by the next forward call, with
 * a line in the log saying why. (Issue 19's sequence-memory interface
 * answers "not possible" up front and restores snapshots instead.) */
#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/engine_int.h"

/* ---- block pool ---- */

static size_t head_bytes(int32_t head_dim, uint32_t type)
{
    if (type == CV_GGML_Q8_0)
        return (size_t)CV_KV_BLOCK * ((size_t)head_dim + (size_t)(head_dim / kv_q8_group(head_dim)) * 2);
    return (size_t)CV_KV_BLOCK * (size_t)head_dim * (type == CV_GGML_F16 ? 2 : 4);
}

size_t kv_block_bytes(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, uint32_t type)
{
    return (size_t)n_layer * 2 * (size_t)n_head_kv * head_bytes(head_dim, type);
}

int kv_pool_init(kv_pool *p, int32_t n_blocks, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, uint32_t type,
                 cv_err *err)
{
    memset(p, 0, sizeof *p);
    p->n_blocks = n_blocks;
    p->n_layer = n_layer;
    p->n_head_kv = n_head_kv;
    p->head_dim = head_dim;
    p->type = type;
    p->qgroup = kv_q8_group(head_dim);
    p->elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4;
    p->head_bytes = head_bytes(head_dim, type);
    p->block_bytes = (size_t)n_layer * 2 * (size_t)n_head_kv * p->head_bytes;
    /* Sizes are bounded by the limits the engine checked, so this product
     * fits; the OS may still refuse it. Anonymous pages are committed on
     * first touch, so a large cache costs only what sequences use. */
    size_t total = p->block_bytes * (size_t)n_blocks;
    void *d = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED)
        return cv_err_set(err, CV_ENOMEM, "KV cache: cannot map %.1f MiB for %d blocks of %d positions",
                          total / 1048576.0, n_blocks, CV_KV_BLOCK);
    p->data = d;
    p->refs = cv_xcalloc((size_t)n_blocks, sizeof *p->refs);
    p->free_ids = cv_xmalloc((size_t)n_blocks * sizeof *p->free_ids);
    /* Lowest ids on top of the stack: sequences fill the pool from its start. */
    for (int32_t i = 0; i < n_blocks; i++)
        p->free_ids[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    return 0;
}

void kv_pool_fini(kv_pool *p)
{
    if (p->data)
        munmap(p->data, p->block_bytes * (size_t)p->n_blocks);
    free(p->refs);
    free(p->free_ids);
    memset(p, 0, sizeof *p);
}

int32_t kv_pool_alloc(kv_pool *p)
{
    if (p->n_free == 0)
        return -1;
    int32_t b = p->free_ids[--p->n_free];
    assert(p->refs[b] == 0);
    p->refs[b] = 1;
    return b;
}

void kv_pool_ref(kv_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    p->refs[b]++;
}

void kv_pool_unref(kv_pool *p, int32_t b)
{
    assert(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    if (--p->refs[b] == 0)
        p->free_ids[p->n_free++] = b;
}

/* ---- writing a position ---- */

/* x (n floats) as int8 at q[0], q[stride], ... with the factor d returned
 * in f16: d = max|x| / 127, q = round(x / d), rounding the factor first so
 * that d * q is what the readers compute. A NaN (a model that overflowed)
 * stores 0 rather than an undefined conversion. */
static uint16_t quantize_q8(const float *x, int32_t n, int8_t *q, size_t stride)
{
    float amax = 0;
    for (int32_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const uint16_t dh = cv_fp32_to_fp16(amax / 127.0f);
    const float d = cv_fp16_to_fp32(dh), id = d > 0 && d < INFINITY ? 1.0f / d : 0.0f;
    for (int32_t i = 0; i < n; i++) {
        const float t = x[i] * id;
        q[(size_t)i * stride] = (int8_t)(t >= 127.0f ? 127.0f : t <= -127.0f ? -127.0f : t == t ? nearbyintf(t) : 0.0f);
    }
    return dh;
}

void kv_store(const kv_pool *p, const cv_vec_ops *vec, void *K, void *V, int32_t j, const float *k, const float *v)
{
    const int32_t hd = p->head_dim;
    /* The key goes in transposed: one element per dimension's row. */
    switch (p->type) {
    case CV_GGML_Q8_0: {
        uint16_t *ks = (uint16_t *)kv_q8_scales(p, K), *vs = (uint16_t *)kv_q8_scales(p, V);
        int8_t *kq = K, *vq = (int8_t *)V + kv_v_at(hd, j, 0);
        for (int32_t i = 0; i < hd; i += p->qgroup) {
            ks[kv_scale_at(p, j, i)] = quantize_q8(k + i, p->qgroup, kq + kv_k_at(j, i), CV_KV_BLOCK);
            vs[kv_scale_at(p, j, i)] = quantize_q8(v + i, p->qgroup, vq + i, 1);
        }
        break;
    }
    case CV_GGML_F16: {
        uint16_t kh[CV_MAX_HEAD_DIM];
        vec->f32_to_f16(k, kh, hd);
        for (int32_t i = 0; i < hd; i++)
            ((uint16_t *)K)[kv_k_at(j, i)] = kh[i];
        vec->f32_to_f16(v, (uint16_t *)V + kv_v_at(hd, j, 0), hd);
        break;
    }
    default:
        for (int32_t i = 0; i < hd; i++)
            ((float *)K)[kv_k_at(j, i)] = k[i];
        memcpy((float *)V + kv_v_at(hd, j, 0), v, (size_t)hd * sizeof(float));
    }
}

/* ---- sequences ---- */

static kv_seq *seq_get(const cv_engine *e, int32_t seq)
{
    if (seq < 0 || seq >= e->p.n_seq_max || !e->seqs[seq].open)
        return NULL;
    return &e->seqs[seq];
}

int cv_engine_seq_open(cv_engine *e, int32_t *seq, cv_err *err)
{
    for (int32_t i = 0; i < e->p.n_seq_max; i++) {
        kv_seq *s = &e->seqs[i];
        if (!s->open) {
            s->open = true;
            s->len = 0;
            s->n_blocks = 0;
            *seq = i;
            return 0;
        }
    }
    return cv_err_set(err, CV_EBUSY, "engine: all %d sequence slots are in use", e->p.n_seq_max);
}

void cv_engine_seq_close(cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    if (!s)
        return;
    for (int32_t i = 0; i < s->n_blocks; i++)
        kv_pool_unref(&e->kv, s->blocks[i]);
    eng_rec_clear(e, seq, true);
    s->n_blocks = 0;
    s->len = 0;
    s->rec_lost = false;
    s->open = false;
}

int32_t cv_engine_seq_len(const cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    return s ? s->len : 0;
}

void cv_engine_seq_truncate(cv_engine *e, int32_t seq, int32_t len)
{
    kv_seq *s = seq_get(e, seq);
    if (!s || len >= s->len)
        return;
    if (len < 0)
        len = 0;
    if (e->rec.n_layer > 0) {
        if (len == 0) {
            eng_rec_clear(e, seq, false);
            s->rec_lost = false;
        } else if (!s->rec_lost) {
            cv_error("engine: sequence %d truncated from %d to %d positions, which its recurrent (Gated DeltaNet) "
                     "state cannot follow (only 0 or the whole length); its next forward call is refused", seq,
                     s->len, len);
            s->rec_lost = true;
        }
    }
    int32_t keep = (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    for (int32_t i = keep; i < s->n_blocks; i++)
        kv_pool_unref(&e->kv, s->blocks[i]);
    s->n_blocks = keep;
    s->len = len;
}

int cv_engine_seq_fork(cv_engine *e, int32_t src, int32_t *dst, cv_err *err)
{
    kv_seq *s = seq_get(e, src);
    if (!s)
        return cv_err_set(err, CV_EINVAL, "engine: cannot fork sequence %d: it is not open", src);
    int32_t d = -1;
    int rc = cv_engine_seq_open(e, &d, err);
    if (rc)
        return rc;
    s = &e->seqs[src]; /* (the array does not move, but be explicit) */
    kv_seq *t = &e->seqs[d];
    for (int32_t i = 0; i < s->n_blocks; i++) {
        t->blocks[i] = s->blocks[i];
        kv_pool_ref(&e->kv, s->blocks[i]);
    }
    t->n_blocks = s->n_blocks;
    t->len = s->len;
    t->rec_lost = s->rec_lost;
    eng_rec_copy(e, d, src);
    *dst = d;
    return 0;
}

int32_t cv_engine_kv_free_blocks(const cv_engine *e) { return e->kv.n_free; }

/* Blocks sequence s needs before it can grow to new_len: new table entries
 * plus one copy when its partly filled last block is shared. */
int32_t cv_engine_kv_blocks_needed(const cv_engine *e, int32_t seq, int32_t new_len)
{
    const kv_seq *s = &e->seqs[seq];
    int32_t want = (new_len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    int32_t need = want > s->n_blocks ? want - s->n_blocks : 0;
    if (s->len % CV_KV_BLOCK && e->kv.refs[s->blocks[s->len / CV_KV_BLOCK]] > 1)
        need++;
    return need;
}

/* Grows the table of seq for positions up to new_len; the caller checked
 * cv_engine_kv_blocks_needed against the free count, so this cannot fail. */
void cv_engine_kv_grow(cv_engine *e, int32_t seq, int32_t new_len)
{
    kv_seq *s = &e->seqs[seq];
    kv_pool *p = &e->kv;
    if (s->len % CV_KV_BLOCK) {
        int32_t i = s->len / CV_KV_BLOCK;
        int32_t old = s->blocks[i];
        if (p->refs[old] > 1) {
            int32_t b = kv_pool_alloc(p);
            assert(b >= 0);
            for (size_t r = 0; r < kv_regions(p); r++)
                memcpy(kv_piece(p, r, b), kv_piece(p, r, old), p->head_bytes);
            kv_pool_unref(p, old);
            s->blocks[i] = b;
        }
    }
    int32_t want = (new_len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    while (s->n_blocks < want) {
        int32_t b = kv_pool_alloc(p);
        assert(b >= 0);
        s->blocks[s->n_blocks++] = b;
    }
}

/* ---- blocks held outside sequences (prefix cache, cache file) ---- */

int32_t cv_engine_kv_n_blocks(const cv_engine *e) { return e->kv.n_blocks; }

const int32_t *cv_engine_seq_blocks(const cv_engine *e, int32_t seq, int32_t *n)
{
    kv_seq *s = seq_get(e, seq);
    *n = s ? s->n_blocks : 0;
    return s ? s->blocks : NULL;
}

int32_t cv_engine_seq_blocks_needed(const cv_engine *e, int32_t seq, int32_t n_new)
{
    kv_seq *s = seq_get(e, seq);
    return s ? cv_engine_kv_blocks_needed(e, seq, s->len + n_new) : 0;
}

int cv_engine_seq_share(cv_engine *e, int32_t seq, const int32_t *blocks, int32_t n, int32_t len, cv_err *err)
{
    kv_seq *s = seq_get(e, seq);
    if (!s || s->len != 0 || s->n_blocks != 0)
        return cv_err_set(err, CV_EINVAL, "engine: cannot share blocks into sequence %d: it is not open and empty",
                          seq);
    if (n < 1 || n > e->max_blocks || len <= (n - 1) * CV_KV_BLOCK || len > n * CV_KV_BLOCK || len > e->p.n_ctx)
        return cv_err_set(err, CV_EINVAL, "engine: %d shared blocks cannot hold a length of %d (context %d)", n, len,
                          e->p.n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (blocks[i] < 0 || blocks[i] >= e->kv.n_blocks || e->kv.refs[blocks[i]] == 0)
            return cv_err_set(err, CV_EINVAL, "engine: shared block %d is %d, not a block in use", i, blocks[i]);
    for (int32_t i = 0; i < n; i++) {
        s->blocks[i] = blocks[i];
        kv_pool_ref(&e->kv, blocks[i]);
    }
    s->n_blocks = n;
    s->len = len;
    if (e->rec.n_layer > 0) {
        cv_error("engine: sequence %d was given %d shared KV blocks (%d positions) without the recurrent state that "
                 "goes with them; its next forward call is refused", seq, n, len);
        s->rec_lost = true;
    }
    return 0;
}

int32_t cv_engine_kv_refs(const cv_engine *e, int32_t b)
{
    return b >= 0 && b < e->kv.n_blocks ? e->kv.refs[b] : 0;
}

void cv_engine_kv_ref(cv_engine *e, int32_t b) { kv_pool_ref(&e->kv, b); }
void cv_engine_kv_unref(cv_engine *e, int32_t b) { kv_pool_unref(&e->kv, b); }
int32_t cv_engine_kv_alloc(cv_engine *e) { return kv_pool_alloc(&e->kv); }

void cv_engine_kv_format(const cv_engine *e, cv_kv_format *out)
{
    *out = (cv_kv_format){
        .n_layer = e->kv.n_layer,
        .n_head_kv = e->kv.n_head_kv,
        .head_dim = e->kv.head_dim,
        .type = e->kv.type,
        .block_positions = CV_KV_BLOCK,
        .block_bytes = e->kv.block_bytes,
    };
}

void cv_engine_kv_block_read(const cv_engine *e, int32_t b, void *dst)
{
    const kv_pool *p = &e->kv;
    assert(b >= 0 && b < p->n_blocks);
    for (size_t r = 0; r < kv_regions(p); r++)
        memcpy((uint8_t *)dst + r * p->head_bytes, kv_piece(p, r, b), p->head_bytes);
}

void cv_engine_kv_block_write(cv_engine *e, int32_t b, const void *src)
{
    const kv_pool *p = &e->kv;
    assert(b >= 0 && b < p->n_blocks);
    for (size_t r = 0; r < kv_regions(p); r++)
        memcpy(kv_piece(p, r, b), (const uint8_t *)src + r * p->head_bytes, p->head_bytes);
}

int32_t eng_kv_layers(const cv_model *m, int32_t *map)
{
    int32_t n = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const bool kv = m->layers[il].mixer == CV_MIXER_ATTN;
        if (map)
            map[il] = kv ? n : -1;
        n += kv;
    }
    return n;
}

size_t cv_engine_kv_block_bytes(const cv_model *m, uint32_t kv_type)
{
    return kv_block_bytes(eng_kv_layers(m, NULL), m->hp.n_head_kv, m->hp.head_dim, kv_type);
}

const char *cv_engine_kv_type_name(uint32_t kv_type)
{
    return kv_type == CV_GGML_Q8_0 ? "q8_0" : kv_type == CV_GGML_F16 ? "f16" : "f32";
}
