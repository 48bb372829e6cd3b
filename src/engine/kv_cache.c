/* kv_cache.c — the paged KV cache: pools of fixed-size blocks with
 * reference counts, one per layer group (engine_int.h "layer groups": the
 * full layers, the window layers), and each sequence's block table (open,
 * close, truncate, fork, and growing a table before a forward call).
 * Blocks are shared by reference; a sequence about to write into a block
 * someone else also holds copies it first (copy on write), so sharing is
 * invisible to the forward pass. Before a sequence grows it lets go of the
 * window layers' parts no position from its length on can see, so a window
 * layer holds about its window per sequence. Invariants: refs[b] equals the
 * number of holders of b (tables and others), and a block with refs 0 is
 * on its pool's free stack exactly once; a group-1 part's holders all hold
 * its logical block too, so a free logical block has no group-1 part. */
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
     * first touch, so a large cache costs only what sequences use (freed
     * blocks are reused first, so it stays at what they used at most). A
     * pool of no layer has ids and references only. */
    size_t total = p->block_bytes * (size_t)n_blocks;
    if (total > 0) {
        void *d = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (d == MAP_FAILED)
            return cv_err_set(err, CV_ENOMEM, "KV cache: cannot map %.1f MiB for %d blocks of %d positions",
                              total / 1048576.0, n_blocks, CV_KV_BLOCK);
        p->data = d;
    }
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

/* ---- group-1 parts ---- */

/* One reference less on logical block b's group-1 part wb; the part goes
 * back to group 1's pool at 0 and b has none from then on. */
static void win_unref(cv_engine *e, int32_t b, int32_t wb)
{
    kv_pool_unref(&e->kv_win, wb);
    if (e->kv_win.refs[wb] == 0)
        e->win_of[b] = -1;
}

/* A logical block with its group-1 part (refs 1 each); the caller checked
 * group 0's free count, which bounds group 1's (every part belongs to a
 * live logical block, and the pools are as large). */
static int32_t alloc_logical(cv_engine *e)
{
    const int32_t b = kv_pool_alloc(&e->kv);
    if (b >= 0 && e->win_of) {
        const int32_t wb = kv_pool_alloc(&e->kv_win);
        assert(wb >= 0);
        e->win_of[b] = wb;
    }
    return b;
}

/* Lets go of the group-1 parts of s's entries that no position from its
 * length on sees (before its window's first block). */
static void release_passed(cv_engine *e, kv_seq *s)
{
    if (!e->win_of || e->p.kv_keep_window)
        return;
    const int32_t first = CV_MIN(cv_att_first_block(s->len, e->kv_window), s->n_blocks);
    for (int32_t i = s->win_lo; i < first; i++) {
        if (s->wblocks[i] >= 0)
            win_unref(e, s->blocks[i], s->wblocks[i]);
        s->wblocks[i] = -1;
    }
    s->win_lo = CV_MAX(s->win_lo, first);
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
            s->win_lo = 0;
            *seq = i;
            return 0;
        }
    }
    return cv_err_set(err, CV_EBUSY, "engine: all %d sequence slots are in use", e->p.n_seq_max);
}

/* Drops s's table entries from keep on: the group-1 reference an entry
 * holds, then the block. */
static void drop_from(cv_engine *e, kv_seq *s, int32_t keep)
{
    for (int32_t i = keep; i < s->n_blocks; i++) {
        if (e->win_of && i >= s->win_lo && s->wblocks[i] >= 0)
            win_unref(e, s->blocks[i], s->wblocks[i]);
        kv_pool_unref(&e->kv, s->blocks[i]);
    }
    s->n_blocks = CV_MIN(s->n_blocks, keep);
    s->win_lo = CV_MIN(s->win_lo, keep);
}

void cv_engine_seq_close(cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    if (!s)
        return;
    drop_from(e, s, 0);
    s->len = 0;
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
    /* positions from len on see from its window's first block: it must
     * still have its group-1 part */
    if (e->win_of && cv_att_first_block(len, e->kv_window) < s->win_lo)
        len = 0;
    drop_from(e, s, (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK);
    s->len = len;
}

/* Takes t's references on its table (copied from another holder's): every
 * block, and the group-1 parts from win_lo on. */
static void ref_table(cv_engine *e, kv_seq *t)
{
    for (int32_t i = 0; i < t->n_blocks; i++) {
        kv_pool_ref(&e->kv, t->blocks[i]);
        if (e->win_of) {
            t->wblocks[i] = i >= t->win_lo ? e->win_of[t->blocks[i]] : -1;
            if (t->wblocks[i] >= 0)
                kv_pool_ref(&e->kv_win, t->wblocks[i]);
        }
    }
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
    memcpy(t->blocks, s->blocks, (size_t)s->n_blocks * sizeof *t->blocks);
    t->n_blocks = s->n_blocks;
    t->len = s->len;
    t->win_lo = s->win_lo;
    ref_table(e, t);
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

/* Copies block old's bytes (every group's) into new block b. */
static void copy_block(cv_engine *e, int32_t b, int32_t old)
{
    const kv_pool *p = &e->kv;
    for (size_t r = 0; r < kv_regions(p); r++)
        memcpy(kv_piece(p, r, b), kv_piece(p, r, old), p->head_bytes);
    if (e->win_of && e->win_of[old] >= 0) {
        const kv_pool *w = &e->kv_win;
        for (size_t r = 0; r < kv_regions(w); r++)
            memcpy(kv_piece(w, r, e->win_of[b]), kv_piece(w, r, e->win_of[old]), w->head_bytes);
    }
}

/* Grows the table of seq for positions up to new_len; the caller checked
 * cv_engine_kv_blocks_needed against the free count, so this cannot fail. */
void cv_engine_kv_grow(cv_engine *e, int32_t seq, int32_t new_len)
{
    kv_seq *s = &e->seqs[seq];
    kv_pool *p = &e->kv;
    release_passed(e, s);
    if (s->len % CV_KV_BLOCK) {
        int32_t i = s->len / CV_KV_BLOCK;
        int32_t old = s->blocks[i];
        if (p->refs[old] > 1) {
            /* the last block is inside the window: s holds its group-1 part */
            int32_t b = alloc_logical(e);
            assert(b >= 0);
            copy_block(e, b, old);
            if (e->win_of) {
                win_unref(e, old, s->wblocks[i]);
                s->wblocks[i] = e->win_of[b];
            }
            kv_pool_unref(p, old);
            s->blocks[i] = b;
        }
    }
    int32_t want = (new_len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    while (s->n_blocks < want) {
        int32_t b = alloc_logical(e);
        assert(b >= 0);
        if (e->win_of)
            s->wblocks[s->n_blocks] = e->win_of[b];
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

int32_t cv_engine_kv_resumable(const cv_engine *e, const int32_t *blocks, int32_t n, int32_t len)
{
    len = CV_MAX(0, CV_MIN(len, n * CV_KV_BLOCK));
    if (!e->win_of)
        return len;
    /* Positions from L on see from first_block(L): every block from there
     * to L's own must have its part. A shorter length's window starts no
     * later, so past a block missing one only lengths that end before it
     * (its start) can do. */
    int32_t L = len;
    while (L > 0) {
        const int32_t lo = cv_att_first_block(L, e->kv_window), hi = (L + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
        int32_t gap = -1;
        for (int32_t i = hi - 1; i >= lo && gap < 0; i--)
            if (e->win_of[blocks[i]] < 0)
                gap = i;
        if (gap < 0)
            break;
        L = gap * CV_KV_BLOCK;
    }
    return L;
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
    if (cv_engine_kv_resumable(e, blocks, n, len) != len)
        return cv_err_set(err, CV_EINVAL, "engine: cannot resume at %d positions: a window layer's blocks it "
                          "sees are gone", len);
    memcpy(s->blocks, blocks, (size_t)n * sizeof *s->blocks);
    s->n_blocks = n;
    s->len = len;
    s->win_lo = e->win_of ? cv_att_first_block(len, e->kv_window) : 0;
    ref_table(e, s);
    return 0;
}

int32_t cv_engine_kv_refs(const cv_engine *e, int32_t b)
{
    return b >= 0 && b < e->kv.n_blocks ? e->kv.refs[b] : 0;
}

void cv_engine_kv_ref(cv_engine *e, int32_t b)
{
    kv_pool_ref(&e->kv, b);
    if (e->win_of && e->win_of[b] >= 0)
        kv_pool_ref(&e->kv_win, e->win_of[b]);
}

void cv_engine_kv_unref(cv_engine *e, int32_t b)
{
    assert(b >= 0 && b < e->kv.n_blocks);
    if (e->win_of && e->win_of[b] >= 0)
        win_unref(e, b, e->win_of[b]);
    kv_pool_unref(&e->kv, b);
}

int32_t cv_engine_kv_alloc(cv_engine *e) { return alloc_logical(e); }

int32_t cv_engine_kv_groups(const cv_engine *e, cv_kv_group out[2])
{
    out[0] = (cv_kv_group){ .n_layer = e->kv.n_layer, .n_blocks = e->kv.n_blocks,
                            .n_used = e->kv.n_blocks - e->kv.n_free, .block_bytes = e->kv.block_bytes };
    if (!e->win_of)
        return 1;
    out[1] = (cv_kv_group){ .window = e->kv_window, .n_layer = e->kv_win.n_layer, .n_blocks = e->kv_win.n_blocks,
                            .n_used = e->kv_win.n_blocks - e->kv_win.n_free, .block_bytes = e->kv_win.block_bytes };
    return 2;
}

void cv_engine_kv_format(const cv_engine *e, cv_kv_format *out)
{
    *out = (cv_kv_format){
        .n_layer = e->kv.n_layer + e->kv_win.n_layer,
        .n_head_kv = e->kv.n_head_kv,
        .head_dim = e->kv.head_dim,
        .type = e->kv.type,
        .block_positions = CV_KV_BLOCK,
        .block_bytes = e->kv.block_bytes + e->kv_win.block_bytes,
    };
}

void cv_engine_kv_block_read(const cv_engine *e, int32_t b, void *dst)
{
    const kv_pool *p = &e->kv, *w = &e->kv_win;
    assert(b >= 0 && b < p->n_blocks);
    uint8_t *o = dst;
    for (size_t r = 0; r < kv_regions(p); r++, o += p->head_bytes)
        memcpy(o, kv_piece(p, r, b), p->head_bytes);
    if (!e->win_of)
        return;
    for (size_t r = 0; r < kv_regions(w); r++, o += w->head_bytes) {
        if (e->win_of[b] >= 0)
            memcpy(o, kv_piece(w, r, e->win_of[b]), w->head_bytes);
        else
            memset(o, 0, w->head_bytes);
    }
}

void cv_engine_kv_block_write(cv_engine *e, int32_t b, const void *src)
{
    const kv_pool *p = &e->kv, *w = &e->kv_win;
    assert(b >= 0 && b < p->n_blocks);
    const uint8_t *in = src;
    for (size_t r = 0; r < kv_regions(p); r++, in += p->head_bytes)
        memcpy(kv_piece(p, r, b), in, p->head_bytes);
    if (!e->win_of || e->win_of[b] < 0)
        return;
    for (size_t r = 0; r < kv_regions(w); r++, in += w->head_bytes)
        memcpy(kv_piece(w, r, e->win_of[b]), in, w->head_bytes);
}

eng_kv_groups eng_kv_group_layers(const cv_model *m, int32_t *group, int32_t *index)
{
    eng_kv_groups g = { { 0, 0 }, 0 };
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        const int32_t k = L->mixer != CV_MIXER_ATTN ? -1 : L->n_swa > 0 ? 1 : 0;
        if (group)
            group[il] = k;
        if (index)
            index[il] = k < 0 ? -1 : g.n_layer[k];
        if (k >= 0)
            g.n_layer[k]++;
        if (k == 1)
            g.window = CV_MAX(g.window, L->n_swa);
    }
    return g;
}

size_t cv_engine_kv_block_bytes(const cv_model *m, uint32_t kv_type)
{
    const eng_kv_groups g = eng_kv_group_layers(m, NULL, NULL);
    return kv_block_bytes(g.n_layer[0] + g.n_layer[1], m->hp.n_head_kv, m->hp.head_dim, kv_type);
}

const char *cv_engine_kv_type_name(uint32_t kv_type)
{
    return kv_type == CV_GGML_Q8_0 ? "q8_0" : kv_type == CV_GGML_F16 ? "f16" : "f32";
}
