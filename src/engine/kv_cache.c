/* kv_cache.c — the paged KV cache: pools of fixed-size blocks with
 * reference counts, one per layer group (engine_int.h "layer groups": the
 * full layers, the window layers), and growing and cutting a sequence's
 * block tables (a block's layout and writing a position into it are the
 * kernels layer's: kernels/attention.h). Blocks are shared by
 * reference; a sequence about to write into a block someone else also
 * holds copies it first (copy on write), so sharing is invisible to the
 * forward pass. Before a sequence grows it lets go of the window blocks no
 * position from its length on can see, so a window layer holds about its
 * window per sequence. What a sequence is as a whole (its tables, its
 * recurrent state, snapshots, what a held prefix resumes at) is
 * seq_mem.c's. Invariant: refs[b] equals the number of holders of b in its
 * group (tables, prefix-cache spans, snapshots), and a block with refs 0 is
 * on its pool's free stack exactly once. */
#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/engine_int.h"

/* ---- block pool ---- */

void *eng_map(size_t bytes)
{
    void *d = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED)
        return NULL;
    madvise(d, bytes, MADV_HUGEPAGE);
    return d;
}

int kv_pool_init(kv_pool *p, int32_t n_blocks, int32_t n_layer, int32_t n_parts, int32_t n_head_kv, int32_t head_dim,
                 uint32_t type, cv_err *err)
{
    memset(p, 0, sizeof *p);
    if (type == CV_GGML_Q8_0 && head_dim % 4)
        return cv_err_set(err, CV_EINVAL, "a q8_0 KV cache needs head_dim a multiple of 4 (this model's is %d); use f16",
                          head_dim);
    p->n_blocks = n_blocks;
    p->n_layer = n_layer;
    p->n_head_kv = n_head_kv;
    p->n_parts = n_parts;
    p->head_dim = head_dim;
    p->type = type;
    p->qgroup = kv_q8_group(head_dim);
    p->elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4;
    p->head_bytes = kv_head_bytes(head_dim, type);
    p->block_bytes = kv_block_bytes(n_layer, n_parts, n_head_kv, head_dim, type);
    p->run_shift = CV_KV_RUN_SHIFT;
    /* Sizes are bounded by the limits the engine checked, so this product
     * fits; the OS may still refuse it. Anonymous pages are committed on
     * first touch, so a large cache costs only what sequences use (freed
     * blocks are reused first, so it stays at what they used at most),
     * rounded up to whole huge pages (2 MiB) over the runs they touch
     * (attention.h: the layout). A pool of no layer has ids and references
     * only. */
    const size_t total = kv_pool_bytes(p);
    if (total > 0) {
        void *d = eng_map(total);
        if (!d)
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

size_t kv_pool_commit_first_run(kv_pool *p)
{
    if (!p->data || !p->run_shift)
        return 0;
    const size_t run = CV_MIN(p->block_bytes << p->run_shift, kv_pool_bytes(p));
    cv_pages_commit(p->data, run);
    return run;
}

void kv_pool_fini(kv_pool *p)
{
    if (p->data)
        munmap(p->data, kv_pool_bytes(p));
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

/* ---- block tables ---- */

int32_t kv_win_first(const cv_engine *e, int32_t len)
{
    return e->n_groups > 1 && !e->p.kv_keep_window ? cv_att_first_block(len, e->kv_window) : 0;
}

void kv_table_need(const cv_engine *e, const kv_seq *s, int32_t new_len, cv_mem_need *acc)
{
    const int32_t want = (new_len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    const int32_t add = want > s->n_blocks ? want - s->n_blocks : 0;
    for (int32_t g = 0; g < e->n_groups; g++) {
        acc->blocks[g] += add;
        /* the partly filled last block is inside the window: every group holds it */
        if (s->len % CV_KV_BLOCK && e->kv[g].refs[s->blocks[g][s->len / CV_KV_BLOCK]] > 1)
            acc->blocks[g]++;
    }
}

/* Lets go of the window blocks of s's entries that no position from its
 * length on sees (before its window's first block). */
static void release_passed(cv_engine *e, kv_seq *s)
{
    if (e->n_groups < 2)
        return;
    const int32_t first = CV_MIN(kv_win_first(e, s->len), s->n_blocks);
    for (int32_t i = s->win_lo; i < first; i++) {
        kv_pool_unref(&e->kv[1], s->blocks[1][i]);
        s->blocks[1][i] = -1;
    }
    s->win_lo = CV_MAX(s->win_lo, first);
}

void kv_table_grow(cv_engine *e, kv_seq *s, int32_t new_len)
{
    release_passed(e, s);
    for (int32_t g = 0; g < e->n_groups; g++) {
        kv_pool *p = &e->kv[g];
        if (s->len % CV_KV_BLOCK) {
            const int32_t i = s->len / CV_KV_BLOCK, old = s->blocks[g][i];
            if (p->refs[old] > 1) {
                const int32_t b = kv_pool_alloc(p);
                assert(b >= 0);
                for (size_t r = 0; r < kv_regions(p); r++)
                    memcpy(kv_piece(p, r, b), kv_piece(p, r, old), p->head_bytes);
                kv_pool_unref(p, old);
                s->blocks[g][i] = b;
            }
        }
    }
    const int32_t want = (new_len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    for (; s->n_blocks < want; s->n_blocks++)
        for (int32_t g = 0; g < e->n_groups; g++) {
            const int32_t b = kv_pool_alloc(&e->kv[g]);
            assert(b >= 0);
            s->blocks[g][s->n_blocks] = b;
        }
}

void kv_table_cut(cv_engine *e, kv_seq *s, int32_t len)
{
    const int32_t keep = (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    for (int32_t i = keep; i < s->n_blocks; i++)
        for (int32_t g = 0; g < e->n_groups; g++)
            if (s->blocks[g][i] >= 0)
                kv_pool_unref(&e->kv[g], s->blocks[g][i]);
    s->n_blocks = CV_MIN(s->n_blocks, keep);
    s->win_lo = CV_MIN(s->win_lo, s->n_blocks);
    s->len = len;
}

/* ---- blocks by id (the cache file) ---- */

int32_t cv_engine_kv_n_blocks(const cv_engine *e) { return e->kv[0].n_blocks; }
int32_t cv_engine_kv_free_blocks(const cv_engine *e) { return e->kv[0].n_free; }

int32_t cv_engine_kv_refs(const cv_engine *e, int32_t g, int32_t b)
{
    return g >= 0 && g < e->n_groups && b >= 0 && b < e->kv[g].n_blocks ? e->kv[g].refs[b] : 0;
}

int32_t cv_engine_kv_alloc(cv_engine *e, int32_t g)
{
    assert(g >= 0 && g < e->n_groups);
    return kv_pool_alloc(&e->kv[g]);
}

static cv_kv_format pool_format(const kv_pool *p)
{
    return (cv_kv_format){
        .n_layer = p->n_layer,
        .n_head_kv = p->n_head_kv,
        .head_dim = p->head_dim,
        .type = p->type,
        .block_positions = CV_KV_BLOCK,
        .block_bytes = p->block_bytes,
    };
}

void cv_engine_kv_format(const cv_engine *e, cv_kv_format *out) { *out = pool_format(&e->kv[0]); }

void kv_group_info(const cv_engine *e, int32_t g, cv_mem_group_info *out)
{
    *out = (cv_mem_group_info){
        .kind = g == 0 ? CV_MEM_GROUP_FULL : CV_MEM_GROUP_WINDOW,
        .window = g == 0 ? 0 : e->kv_window,
        .format = pool_format(&e->kv[g]),
        .n_blocks = e->kv[g].n_blocks,
        .n_free = e->kv[g].n_free,
    };
}

void cv_engine_kv_block_read(const cv_engine *e, int32_t g, int32_t b, void *dst)
{
    assert(g >= 0 && g < e->n_groups);
    const kv_pool *p = &e->kv[g];
    assert(b >= 0 && b < p->n_blocks);
    for (size_t r = 0; r < kv_regions(p); r++)
        memcpy((uint8_t *)dst + r * p->head_bytes, kv_piece(p, r, b), p->head_bytes);
}

void cv_engine_kv_block_write(cv_engine *e, int32_t g, int32_t b, const void *src)
{
    assert(g >= 0 && g < e->n_groups);
    const kv_pool *p = &e->kv[g];
    assert(b >= 0 && b < p->n_blocks);
    for (size_t r = 0; r < kv_regions(p); r++)
        memcpy(kv_piece(p, r, b), (const uint8_t *)src + r * p->head_bytes, p->head_bytes);
}

eng_kv_groups eng_kv_group_layers(const cv_model *m, int32_t *group, int32_t *index)
{
    eng_kv_groups g = { { 0, 0 }, { m->hp.n_head_kv, m->hp.n_head_kv }, { m->hp.head_dim, m->hp.head_dim }, 0, -1 };
    int32_t counted = 0; /* the first k's (2 bits) that have a layer */
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        const bool kv = L->mixer == CV_MIXER_ATTN || L->mixer == CV_MIXER_MLA;
        const int32_t k = !kv ? -1 : L->n_swa > 0 ? 1 : 0;
        if (group)
            group[il] = k;
        if (k < 0 || L->kv_src != il) {
            if (index)
                index[il] = k < 0 ? -1 : index[L->kv_src];
            continue;
        }
        if (index)
            index[il] = g.n_layer[k];
        if (!(counted >> k & 1)) {
            g.n_head_kv[k] = L->n_head_kv;
            g.head_dim[k] = L->head_dim;
            counted |= 1 << k;
        } else if ((L->n_head_kv != g.n_head_kv[k] || L->head_dim != g.head_dim[k]) && g.odd_layer < 0) {
            g.odd_layer = il;
        }
        g.n_layer[k]++;
        if (k == 1)
            g.window = CV_MAX(g.window, L->n_swa);
    }
    return g;
}

size_t cv_engine_kv_block_bytes(const cv_model *m, uint32_t kv_type)
{
    const eng_kv_groups g = eng_kv_group_layers(m, NULL, NULL);
    return kv_block_bytes(g.n_layer[0], cv_kv_parts(&m->hp), g.n_head_kv[0], g.head_dim[0], kv_type) +
           kv_block_bytes(g.n_layer[1], cv_kv_parts(&m->hp), g.n_head_kv[1], g.head_dim[1], kv_type);
}
/* The KV element types by name: the one table the CLI's --kv-type, the
 * logs and /v1/status read. */
static const struct {
    uint32_t type;
    const char *name;
} kv_types[] = { { CV_GGML_F32, "f32" }, { CV_GGML_F16, "f16" }, { CV_GGML_Q8_0, "q8_0" } };

const char *cv_engine_kv_type_name(uint32_t kv_type)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(kv_types); i++)
        if (kv_types[i].type == kv_type)
            return kv_types[i].name;
    return "unknown";
}

int cv_engine_kv_type_parse(const char *name, uint32_t *out, cv_err *err)
{
    cv_buf names = { 0 };
    for (size_t i = 0; i < CV_ARRAY_LEN(kv_types); i++) {
        if (!strcmp(kv_types[i].name, name)) {
            *out = kv_types[i].type;
            cv_buf_free(&names);
            return 0;
        }
        cv_buf_printf(&names, "%s%s", i ? i + 1 < CV_ARRAY_LEN(kv_types) ? ", " : " or " : "", kv_types[i].name);
    }
    cv_err_set(err, CV_EINVAL, "'%.40s' is not a KV cache type (%s)", name, names.data);
    cv_buf_free(&names);
    return CV_EINVAL;
}
