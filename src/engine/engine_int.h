/* engine_int.h — the engine layer's guts, shared by its files only: the
 * KV block pools (kv_cache.c), the per-sequence block tables and recurrent
 * state slots, snapshots (seq_mem.c), the engine struct with its scratch,
 * the traits row each layer kind implements (mix_*.c, ffn_*.c), the
 * attention entry (attention.c) and the Gated DeltaNet kernels
 * (mix_deltanet.c). */
#ifndef CV_ENGINE_INT_H
#define CV_ENGINE_INT_H

#include <assert.h>

#include "engine/engine.h"
#include "engine/engine_bench.h"

/* ---- KV block pool ---- */

/* Block b holds, for every layer, the keys then the values of CV_KV_BLOCK
 * positions: keys as [n_head_kv][head_dim][CV_KV_BLOCK] (transposed: one
 * dimension of the block's 16 positions is one contiguous row, so the
 * scores of a block are a small GEMM read straight from the cache), values
 * as [n_head_kv][CV_KV_BLOCK][head_dim] (one position's values contiguous,
 * as the weighted sum reads them). The pool is head-major: one region per
 * (layer, keys or values, head), holding that head's half of every block
 * in block order:
 *   data + (((layer * 2 + kv) * n_head_kv + head) * n_blocks + b) * head_bytes
 * A sequence's blocks come from the pool's start in order, so a decode
 * step's tile reads one head's consecutive blocks as one forward stream
 * (block-major, with a head's 2 KB of a block 196 KB from the next one,
 * ran decode attention at depth 1.8x slower), which the tiles prefetch
 * ahead of themselves (cv_att_prefetch_l2). A block's bytes for saving or
 * sharing are its pieces in (layer, kv, head) order
 * (cv_engine_kv_block_read / _write). refs[b]
 * counts the block tables that hold b; 0 means free.
 *
 * A latent pool (n_parts 1: multi-head latent attention) keeps one row of
 * head_dim values a position, the key and, in its first n_lora_kv dims, the
 * value of every head: one piece per layer, the region
 * (layer * n_parts + kv) * n_head_kv + head with kv 0, holding the block's
 * rows position by position ([CV_KV_BLOCK][head_dim]; q8_0: the int8 rows,
 * then their factors as [CV_KV_BLOCK][head_dim / qgroup]). Its layout is
 * mix_mla.c's, which alone reads and writes it.
 *
 * Elements are f32, f16 or q8_0: int8 values, each group of qgroup
 * dimensions of one position scaled by its own f16 factor d (the value is
 * d * q, |q| <= 127; qgroup is 32, or head_dim when 32 does not divide it).
 * A q8_0 head's half holds its int8 values in the layout above, then its
 * factors as [head_dim / qgroup][CV_KV_BLOCK], keys and values alike (a
 * group's 16 positions contiguous: one vector pair scales a block's
 * scores, or its probabilities, for one group). */
typedef struct kv_pool {
    int32_t n_blocks;
    int32_t n_layer, n_head_kv, head_dim;
    int32_t n_parts;      /* 2: keys and values; 1: latent rows (cv_kv_parts) */
    uint32_t type;        /* CV_GGML_F32, CV_GGML_F16 or CV_GGML_Q8_0 */
    int32_t qgroup;       /* q8_0: dimensions per scale factor */
    size_t elt_bytes;     /* 4, 2 or 1 (q8_0's values, factors apart) */
    size_t head_bytes;    /* one head's keys (or values) of a block, q8_0 factors included */
    size_t block_bytes;   /* n_layer * n_parts * n_head_kv * head_bytes */
    char *data;
    int32_t *refs;
    int32_t *free_ids;    /* stack of free blocks */
    int32_t n_free;
} kv_pool;

/* Anonymous memory for the KV pools and the recurrent states: committed
 * on first touch (MAP_NORESERVE), and asked to come in transparent huge
 * pages (a hint the OS may decline): a deep decode streams megabytes of
 * K/V a layer, and in 4 KiB pages every page crossing is a TLB walk that
 * also stalls the tile's prefetches (docs/PERF.md "Decode attention at
 * depth: huge pages"). NULL when the OS refuses the mapping; free with
 * munmap. */
void *eng_map(size_t bytes);
int kv_pool_init(kv_pool *p, int32_t n_blocks, int32_t n_layer, int32_t n_parts, int32_t n_head_kv, int32_t head_dim,
                 uint32_t type, cv_err *err);
void kv_pool_fini(kv_pool *p);
/* A free block with refs = 1, or -1 when none is left. */
int32_t kv_pool_alloc(kv_pool *p);
void kv_pool_ref(kv_pool *p, int32_t b);
void kv_pool_unref(kv_pool *p, int32_t b);
/* q8_0's dimensions per factor: 32 (as the q8_0 weight format), or the
 * whole head when 32 does not divide it. */
static inline int32_t kv_q8_group(int32_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }
/* Bytes of one block for a type (what kv_pool_init sizes blocks by). */
size_t kv_block_bytes(int32_t n_layer, int32_t n_parts, int32_t n_head_kv, int32_t head_dim, uint32_t type);

/* ---- layer groups ----
 * The layers whose mixer keeps K/V are grouped by what they must keep
 * (engine.h, "sequence memory"): group 0 the full ones (every position, as
 * long as the sequence lives), group 1 the window ones (only the last W
 * positions, W the largest window of theirs). Each group has a pool of its
 * own, e->kv[g], as many blocks in each, and a sequence a table per group
 * (kv_seq.blocks[g]). Every holder of a block of positions holds its
 * group-0 block (a group 0 without layers still has the ids and the
 * references), and the window group's block as long as it needs it: a
 * sequence lets go of the window blocks before its window when it next
 * grows (kv_seq.win_lo), a prefix-cache span keeps what it took. So a
 * window layer's memory is the windows of the sequences plus what other
 * holders keep, and group 1's pool never runs out before group 0's. */
typedef struct eng_kv_groups {
    int32_t n_layer[2];  /* each group's layers that keep K/V */
    int32_t n_head_kv[2], head_dim[2]; /* the heads of each group's layers (the model's for an empty group) */
    int32_t window;      /* group 1's window; 0 when there is no group 1 */
    int32_t odd_layer;   /* a layer whose heads differ from its group's, which a pool cannot hold; -1: none */
} eng_kv_groups;

/* The layers' groups: group[il] (0, 1, or -1 for a layer without K/V) and
 * their index in it, index[il] (either array may be NULL). A layer that
 * attends over an earlier layer's K/V (cv_layer.kv_src, gemma4's shared
 * layers) keeps none of its own: it has that layer's group and index and
 * is not counted, which is the memory sharing saves. */
eng_kv_groups eng_kv_group_layers(const cv_model *m, int32_t *group, int32_t *index);

/* Block b's piece in region r = (layer * n_parts + kv) * n_head_kv + head: one
 * head's keys (kv 0) or values (kv 1) in one layer. A block's pieces in
 * region order are its bytes as saved or shared. */
static inline char *kv_piece(const kv_pool *p, size_t r, int32_t b)
{
    return p->data + (r * (size_t)p->n_blocks + (size_t)b) * p->head_bytes;
}
static inline size_t kv_regions(const kv_pool *p) { return p->block_bytes / p->head_bytes; }
static inline void *kv_k(const kv_pool *p, int32_t b, int32_t layer, int32_t head)
{
    return kv_piece(p, (size_t)layer * (size_t)p->n_parts * (size_t)p->n_head_kv + (size_t)head, b);
}
static inline void *kv_v(const kv_pool *p, int32_t b, int32_t layer, int32_t head)
{
    assert(p->n_parts == 2);
    return kv_piece(p, ((size_t)layer * 2 + 1) * (size_t)p->n_head_kv + (size_t)head, b);
}
/* Element offsets, within one head's half, of dimension i of the key and
 * of the value at position j of the block (hd: head_dim). Keys are
 * transposed: f32 and f16 one row of 16 positions per dimension; q8_0 one
 * row of 16 positions per four dimensions, each position's four bytes
 * together (kv_k8_at), the layout of an integer dot product with positions
 * in lanes (vpdpbusd, vpmaddubsw). Values are by position. */
static inline size_t kv_k_at(int32_t j, int32_t i) { return (size_t)i * CV_KV_BLOCK + (size_t)j; }
static inline size_t kv_k8_at(int32_t j, int32_t i)
{
    return (size_t)(i / 4) * 4 * CV_KV_BLOCK + (size_t)j * 4 + (size_t)(i % 4);
}
static inline size_t kv_v_at(int32_t hd, int32_t j, int32_t i) { return (size_t)j * hd + (size_t)i; }
/* q8_0: the factors of a head's half (K or V from kv_k / kv_v), and the
 * index among them of position j's factor for dimension i. */
static inline const uint16_t *kv_q8_scales(const kv_pool *p, const void *half)
{
    return (const uint16_t *)((const char *)half + (size_t)CV_KV_BLOCK * p->head_dim);
}
static inline size_t kv_scale_at(const kv_pool *p, int32_t j, int32_t i)
{
    return (size_t)(i / p->qgroup) * CV_KV_BLOCK + (size_t)j;
}
/* q8_0 keys are stored offset by 128, as unsigned bytes (1..255 for
 * -127..127): vpdpbusd multiplies unsigned by signed bytes, and the offset
 * costs each query row one correction per group (128 x the sum of its
 * int8 values) instead of one per key vector. Values are signed. */
static inline int32_t kv_k8_value(const void *K, int32_t j, int32_t i)
{
    return (int32_t)((const uint8_t *)K)[kv_k8_at(j, i)] - 128;
}
/* Element `at` of a head's values as f32, any type: position j, dimension
 * i. */
static inline float kv_get(const kv_pool *p, const void *half, size_t at, int32_t j, int32_t i)
{
    if (p->type == CV_GGML_Q8_0)
        return cv_fp16_to_fp32(kv_q8_scales(p, half)[kv_scale_at(p, j, i)]) * ((const int8_t *)half)[at];
    return p->type == CV_GGML_F16 ? cv_fp16_to_fp32(((const uint16_t *)half)[at]) : ((const float *)half)[at];
}
/* Dimension i of position j's key (K from kv_k) or value (V from kv_v) as
 * f32. The tests read the cache by these. */
static inline float kv_k_get(const kv_pool *p, const void *K, int32_t j, int32_t i)
{
    if (p->type == CV_GGML_Q8_0)
        return cv_fp16_to_fp32(kv_q8_scales(p, K)[kv_scale_at(p, j, i)]) * (float)kv_k8_value(K, j, i);
    return kv_get(p, K, kv_k_at(j, i), j, i);
}
static inline float kv_v_get(const kv_pool *p, const void *V, int32_t j, int32_t i)
{
    return kv_get(p, V, kv_v_at(p->head_dim, j, i), j, i);
}
/* x (n floats) as int8 q[0..n) with the factor d returned in f16:
 * d = max|x| / 127, q = round(x / d), rounding the factor first so that
 * d * q is what the readers compute. A NaN (a model that overflowed)
 * stores 0 rather than an undefined conversion. */
uint16_t kv_quantize_q8(const float *x, int32_t n, int8_t *q);
/* Stores one position's key k and value v (head_dim floats each) at
 * position j of a head's halves K and V, converted to the pool's type. */
void kv_store(const kv_pool *p, const cv_vec_ops *vec, void *K, void *V, int32_t j, const float *k, const float *v);

/* ---- sequences ---- */

typedef struct kv_seq {
    bool open;
    int32_t len;        /* positions held */
    int32_t n_blocks;   /* blocks in the table: ceil(len / CV_KV_BLOCK) once a forward has run */
    int32_t *blocks[CV_MEM_MAX_GROUPS]; /* [n_groups][max_blocks] group g's table; a window group's
                                           entries below win_lo are let go of (-1) */
    int32_t win_lo;     /* the window group's entries from here on are held */
    int32_t ckpt_len;   /* the length its checkpoint slot holds the recurrent state of; -1: none */
} kv_seq;

/* ---- recurrent state (seq_mem.c) ----
 * A mixer kind with per-sequence state says how many bytes a layer of it
 * keeps (eng_kind.state_bytes); the engine lays those layers' states out
 * one after another (each 64-byte aligned) in a slot of state_bytes, and
 * keeps 2 * n_seq_max slots: slot s is sequence s's live state, slot
 * n_seq_max + s its checkpoint. A sequence's live slot is zeroed when it
 * opens; snapshots, checkpoints, forks and restores copy whole slots, so a
 * kind never sees them: its forward reads and updates, in place, the state
 * eng_state gives for each sequence in the batch. */

/* A snapshot: a slot's bytes at length len, stored in n_blocks blocks of
 * group 0's pool (pieces of head_bytes in (block, region) order), so the
 * memory budget and the prefix cache's eviction count it like KV. */
struct cv_snapshot {
    int32_t len;
    int32_t n_blocks;
    int32_t blocks[];
};

/* Adds to *acc the blocks per group s needs before it can grow to new_len
 * (new table entries, plus one copy of its partly filled last block where
 * that is shared). */
void kv_table_need(const cv_engine *e, const kv_seq *s, int32_t new_len, cv_mem_need *acc);
/* Grows s's tables for positions up to new_len (copying a shared last
 * block first), after letting go of the window blocks no position from its
 * length on can see; the caller checked the free counts. */
void kv_table_grow(cv_engine *e, kv_seq *s, int32_t new_len);
/* Drops s's table entries past what len positions need and sets its
 * length (the recurrent state is the caller's). */
void kv_table_cut(cv_engine *e, kv_seq *s, int32_t len);
/* The first entry of its tables a sequence of length len still needs in
 * the window group (its window's first block; 0 without a window group or
 * when the window is kept). */
int32_t kv_win_first(const cv_engine *e, int32_t len);
/* Group g's kind, window, format and counts (cv_engine_mem_info's rows). */
void kv_group_info(const cv_engine *e, int32_t g, cv_mem_group_info *out);

/* ---- attention (attention.c, attention_avx2.c) ---- */

/* One unit of attention work: n_tok consecutive positions pos0.. of one
 * sequence (batch rows rows[0..n_tok)) against kv head g, all n_rep query
 * heads of that head. Reads q from qkv (row stride ld_qkv, head h of the
 * group at (g * n_rep + h) * hd) and writes out (stride ld_out, same
 * columns). With a window W > 0, position p sees only p - W + 1 .. p, so
 * blocks before the first token's window are never read (a sliding layer's
 * table may no longer hold them). With sinks, query head q's softmax has
 * one more logit sinks[q] that takes probability and adds no value. */
typedef struct att_tile {
    const kv_pool *kv;
    const int32_t *blocks;
    int32_t layer, g;
    int32_t n_tok, pos0;
    const int32_t *rows;
    const float *qkv;
    int64_t ld_qkv;
    float *out;
    int64_t ld_out;
    int32_t n_rep, hd;
    int32_t hd_v;        /* the values' and so the output's width: hd, or fewer (MLA's latent rows: the
                            first hd_v dims of the key are the value; only its own tile reads those) */
    float scale;
    int32_t window;      /* 0: every earlier position */
    const float *sinks;  /* [n_head] or NULL */
    int32_t blk0, blk1;  /* the kernels attend blocks [blk0, blk1) of the context */
    bool q8_ready;       /* q8_0: the query rows are already in scratch (cv_att_q8_rows),
                          * quantized once for the chunks of one run */
} att_tile;

/* Attention is computed chunk by chunk: CV_ATT_CHUNK_BLOCKS blocks of
 * positions from the start of the sequence, each with an online softmax of
 * its own, then the chunks' states merged in order. A deep context's chunks
 * can so run on different threads (when a step has fewer tiles x kv heads
 * than threads, as a decoding agent has) with the bits they get in one. */
#define CV_ATT_CHUNK_BLOCKS 64

/* The kernels: tile a over blocks [blk0, blk1) (clipped to what its first
 * token's window and its last token see), from a fresh state, left in scratch as each row's state:
 * acc [R][hd_v] (values weighted by exp(score - max), not yet divided by
 * sum), then max [R], then sum [R], R = n_tok * n_rep; a row that sees
 * none of the blocks keeps max = -inf, sum = 0, acc = 0. */
typedef void (*att_tile_fn)(const att_tile *a, float *scratch);
/* The fast tiles prefetch the block CV_ATT_PREFETCH_BLOCKS ahead into L2
 * (prefetcht1), a few lines at a time: its keys between this block's score
 * steps, its values between its value steps, one take per 16 dimensions
 * (or columns) a loop covers. Aimed at L2, the stream keeps out of the
 * loops' L1 fill slots; spread out, it never fills the core's miss buffers
 * at once, which a whole piece per block did, stalling the tile on its own
 * prefetches (a sequence's blocks in order, tables a fork or the prefix
 * cache reordered alike; docs/PERF.md "Decode attention at depth:
 * prefetching into L2" and "... spread out"). */
#define CV_ATT_PREFETCH_BLOCKS 4
typedef struct att_pf {
    const char *p; /* the next line */
    size_t left;   /* bytes of the piece not yet prefetched */
    size_t step;   /* bytes a take prefetches */
} att_pf;
/* Bytes a take prefetches for loops over hd dimensions: a piece (one
 * head's keys or values of a block, head_bytes) in ceil(hd / 16) takes.
 * The same for keys and values; a tile computes it once. */
static inline size_t cv_att_pf_step(const kv_pool *kv, int32_t hd)
{
    const size_t lines = (kv->head_bytes + 63) / 64, takes = (size_t)(hd + 15) / 16;
    return (lines + takes - 1) / takes * 64;
}
/* A cursor over piece (kv_k / kv_v; NULL: nothing to prefetch). Each
 * ISA's loops take exactly ceil(hd / 16) times a block, so a block's
 * cursors end spent (the tile asserts it). */
static inline att_pf cv_att_pf(const kv_pool *kv, const char *piece, size_t step)
{
    return (att_pf){ piece, piece ? kv->head_bytes : 0, step };
}
static inline __attribute__((always_inline)) void cv_att_pf_take(att_pf *f)
{
    const size_t m = CV_MIN(f->step, f->left);
    if (m == 0) /* spent, or no piece (p NULL: no arithmetic on it) */
        return;
    for (size_t o = 0; o < m; o += 64)
        __builtin_prefetch(f->p + o, 0, 2);
    f->p += m, f->left -= m;
}
/* n takes: a loop step that covers n x 16 dimensions (or columns). */
static inline __attribute__((always_inline)) void cv_att_pf_takes(att_pf *f, int32_t n)
{
    for (int32_t t = 0; t < n; t++)
        cv_att_pf_take(f);
}
void cv_att_tile_scalar(const att_tile *a, float *scratch);
void cv_att_tile_avx2(const att_tile *a, float *scratch);   /* needs hd % 8 == 0 */
void cv_att_tile_avx512(const att_tile *a, float *scratch); /* needs hd % 16 == 0 */
/* The fastest tile this process runs for head_dim hd (the process level,
 * else the next level down with a tile for hd), and its name. */
att_tile_fn cv_att_tile_for(int32_t hd);
const char *cv_att_tile_name(att_tile_fn fn);
/* The tile named "scalar", "avx2" or "avx512" when this CPU runs it for
 * head_dim hd ($CORVID_ISA aside: tests and benchmarks set tiles side by
 * side), else NULL. */
att_tile_fn cv_att_tile_named(const char *name, int32_t hd);
/* q8_0 caches score in integers, as q8_0 weights do: each query row is
 * quantized per group of qgroup dimensions (d = max|x| / 127 in f32,
 * q = round(x / d)), a group's score is d_key x d_query x the exact int32
 * sum of q x k, and a row's score the sum of its groups' in order
 * (fmaf(isum, d_key * d_query, s), from s = 0). Every tile computes this,
 * so their scores differ only where their fused multiply-adds round. */
typedef struct att_q8 {
    int8_t *q;    /* [R][hd] */
    uint8_t *qa;  /* [R][hd]: |q|, what AVX2's vpmaddubsw takes as its unsigned side */
    float *d;     /* [R][groups] */
    int32_t *sum; /* [R][groups]: the sum of a group's q, for the keys' offset */
} att_q8;
/* Where tile a's quantized query rows sit in scratch (the part the q8_0
 * tiles keep for them, after the scalar and fast tiles' own floats), and
 * those rows quantized there; a tile with q8_ready takes them as they are. */
att_q8 cv_att_q8_at(const att_tile *a, float *scratch);
att_q8 cv_att_q8_rows(const att_tile *a, float *scratch);
/* Floats of scratch one thread needs for tiles of max_rows = n_tok * n_rep:
 * a kernel's, plus one state for cv_att_tile_run. */
size_t cv_att_scratch_floats(int32_t max_rows, int32_t hd);
/* Floats of one state (acc, max, sum) of R rows. */
static inline size_t cv_att_state_floats(int32_t R, int32_t hd) { return (size_t)R * ((size_t)hd + 2); }
/* Chunks of a context whose last position is last (the end of the chunk
 * range: chunk indices below it). */
static inline int32_t cv_att_chunks(int32_t last) { return last / CV_KV_BLOCK / CV_ATT_CHUNK_BLOCKS + 1; }
/* The first block position pos sees with window w (0: none). */
static inline int32_t cv_att_first_block(int32_t pos, int32_t w)
{
    return w > 0 && pos >= w ? (pos - w + 1) / CV_KV_BLOCK : 0;
}
/* The first chunk of tile a's context: chunks are counted from position 0
 * whatever the window, so a row meets the same chunks alone or in a tile
 * whose first token's window starts earlier. */
static inline int32_t cv_att_chunk0(const att_tile *a)
{
    return cv_att_first_block(a->pos0, a->window) / CV_ATT_CHUNK_BLOCKS;
}
/* State b (of the same rows) merged into state a, which becomes the state
 * of both sets of positions. */
void cv_att_state_merge(float *a, const float *b, int32_t R, int32_t hd);
/* A state divided through by its sums (each sum with its head's sink term,
 * when a has sinks) into a's output rows. */
void cv_att_state_write(const att_tile *a, const float *st);
/* Tile a, its whole context (blk0/blk1 are set here), chunk by chunk in
 * order with fn, into its output rows. */
void cv_att_tile_run(att_tile_fn fn, att_tile *a, float *scratch);

/* One item of a layer's attention work: a tile against kv head g, its
 * whole context (chunk -1), or one chunk of it whose state goes to a slot. */
typedef struct att_item {
    int32_t tile, g, chunk, slot;
} att_item;

/* A tile x kv head cut into chunks: its states in slots slot0.. */
typedef struct att_split_pair {
    int32_t tile, g, slot0, n_chunks;
} att_split_pair;

typedef struct att_plan_tile {
    int32_t seq, first, n_tok, pos0; /* first: index into att_rows */
} att_plan_tile;

/* The work items of one forward call's attention for the layers of one
 * window and kv head count (each distinct pair of the model has its own: a
 * window changes which chunks a tile reads, so which pairs are worth
 * cutting). */
typedef struct att_plan {
    int32_t window;             /* 0: full attention */
    int32_t n_head_kv;          /* of its layers (gemma4's window and full layers have their own) */
    att_item *items;            /* [n_batch * n_head_kv + att_n_slots] */
    int32_t n_items;
    att_split_pair *split;      /* [att_n_slots] pairs cut into chunks this call */
    int32_t n_split;
} att_plan;
/* ---- multi-head latent attention (mix_mla.c) ---- */

/* Position j's latent row (head_dim floats) into a latent pool's block
 * piece (kv_k of its layer, head 0), converted to the pool's type. */
void eng_mla_store(const kv_pool *p, const cv_vec_ops *vec, void *piece, int32_t j, const float *row);
/* The latent attention tile (an att_tile_fn over a latent pool: hd the
 * row, hd_v its value part, n_rep the query heads), its two GEMMs by the
 * scalar or the AVX2 kernels of the Gated DeltaNet kind. */
void eng_mla_tile_scalar(const att_tile *a, float *scratch);
void eng_mla_tile_avx2(const att_tile *a, float *scratch);
/* Floats of scratch one thread needs for those tiles of R query rows over
 * rows of D: the generic tile scratch (cv_att_tile_run's running state at
 * its end), then the tile's own temporaries. */
size_t eng_mla_scratch_floats(int32_t R, int32_t D);

/* ---- Gated DeltaNet kernels (mix_deltanet.c, mix_deltanet_avx2.c) ---- */

/* Positions per chunk of the chunked (parallel) form. Chunks start at
 * multiples of it in the sequence, whatever the calls' boundaries, so a
 * prompt fed in pieces runs the same chunks as in one call. */
#define CV_DN_CHUNK 64
/* Pieces of a call of at most this many tokens (within one chunk) take the
 * step form, token by token: a speculative step of a decoding token and
 * up to CV_SCHED_DRAFT_MAX drafts computes what decoding them does. */
#define CV_DN_STEP_RUN 32

/* The two inner loops the mixer runs per value head, per ISA. */
typedef struct dn_kernels {
    /* C[M][N] = (acc ? C : 0) + alpha * A[M][K] B[K][N]; rows lda, ldb,
     * ldc floats apart; C overlaps neither A nor B. */
    void (*gemm)(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float *C, int64_t ldc, bool acc);
    /* One token through one value head (the recurrent form): S [d][d] is
     * decayed by exp(g), corrected toward v along k with strength beta, and
     * read by q into o [d]. q is already scaled by 1/sqrt(d). scratch holds
     * d floats. */
    void (*step)(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g, float *o,
                 float *scratch);
} dn_kernels;

extern const dn_kernels eng_dn_kernels_scalar;
extern const dn_kernels eng_dn_kernels_avx2; /* needs d % 8 == 0 */

/* n (1..CV_DN_CHUNK) consecutive tokens of one value head through S by the
 * chunked form (the derivation heads mix_deltanet.c): q, k, v [n][d]
 * contiguous (q scaled by 1/sqrt(d)), beta and g [n]; writes o [n][d] and
 * leaves S as the step form would after the n tokens, up to rounding.
 * scratch holds eng_dn_chunk_floats(d) floats. */
void eng_dn_chunk(const dn_kernels *kn, const cv_vec_ops *vec, int32_t d, int32_t n, float *S, const float *q,
                  const float *k, const float *v, const float *beta, const float *g, float *o, float *scratch);
size_t eng_dn_chunk_floats(int32_t d);

/* ---- layer kinds ---- */

/* What one kind of sub-block does, as a row of functions (docs/ENGINE.md).
 * The forward pass calls, for each layer, its mixer's row and then its
 * FFN's; a kind's file owns its math and its scratch. */
typedef struct eng_kind {
    const char *name;
    /* Allocates the kind's scratch for steps of up to p.n_batch tokens; runs
     * once at engine creation when some layer has the kind. May fail only
     * on a limit (CV_ELIMIT), before the engine is used. */
    int (*init)(cv_engine *e, cv_err *err);
    void (*fini)(cv_engine *e);
    /* The sub-block of layer il for the batch's T rows: reads the normed
     * input e->xn, writes its output rows (ld_x apart) to e->tmp, which the
     * caller adds to the residual stream. */
    void (*forward)(cv_engine *e, const cv_batch *b, int32_t il);
    /* Bytes of per-sequence recurrent state layer il keeps (eng_state);
     * NULL for a kind without any. Called once, after init. */
    size_t (*state_bytes)(const cv_engine *e, int32_t il);
    /* How its bits depend on the way a sequence's positions are split into
     * calls (cv_mem_info.split_align / .step_run; 0: not at all): splits at
     * multiples of split_align change nothing, and a run of at most
     * step_run tokens in one call computes what one call per token does. */
    int32_t split_align, step_run;
} eng_kind;

extern const eng_kind eng_mix_attn;
extern const eng_kind eng_mix_deltanet;
extern const eng_kind eng_mix_mla;
extern const eng_kind eng_ffn_dense;
extern const eng_kind eng_ffn_moe;
/* The rows by kind (forward.c). */
extern const eng_kind *const eng_mixers[CV_MIXER_COUNT];
extern const eng_kind *const eng_ffns[CV_FFN_COUNT];

/* The model's gated activation (cv_glu) of n gate values g and up values u
 * into y. */
void eng_glu(const cv_engine *e, float *y, const float *g, const float *u, int64_t n);
/* rows[t] += bias for t < n_rows, rows ld apart, n values each (on the
 * pool). */
void eng_add_bias(cv_engine *e, float *rows, int64_t ld, int32_t n_rows, const float *bias, int64_t n);
/* Runs fn(ctx, ith, nth) over n_rows rows of per-token work on the pool,
 * inline for a handful of rows (waking the pool costs more). */
void eng_run_rows(cv_engine *e, int32_t n_rows, cv_pool_fn fn, void *ctx);
/* A matmul of the forward pass, timed when profiling. */
void eng_matmul(cv_engine *e, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y, int64_t ldy);
/* An expert-routed matmul of the forward pass (cv_be_matmul_experts over
 * the n_w matrices w: route r multiplies X row src[r] by w[which[r]]),
 * timed when profiling; the caller counts the bytes its routes read. */
void eng_matmul_experts(cv_engine *e, cv_bmat *const *w, int32_t n_w, int64_t n_x, const float *x, int64_t ldx,
                        int64_t n_rows, const int32_t *which, const int32_t *src, float *y, int64_t ldy,
                        cv_experts_ws *ws);

typedef struct ffn_moe_scratch ffn_moe_scratch;
typedef struct dn_scratch dn_scratch;
typedef struct mla_scratch mla_scratch;
typedef struct eng_pl_scratch eng_pl_scratch;

/* ---- per-layer inputs (per_layer_in.c; gemma4 E2B/E4B) ---- */

/* Scratch for steps of n_batch tokens (engine creation, when the model
 * has per-layer inputs); fini tolerates none. */
int eng_pl_init(cv_engine *e);
void eng_pl_fini(cv_engine *e);
/* Every layer's input for the batch's tokens, from their ids and the
 * scaled embeddings in e->x (before layer 0). */
void eng_pl_prepare(cv_engine *e, const cv_batch *b);
/* Layer il's input gated into the stream e->x (after its FFN). */
void eng_pl_layer(cv_engine *e, const cv_batch *b, int32_t il);

/* ---- the engine ---- */

struct cv_engine {
    const cv_model *m;
    cv_engine_params p;
    cv_bstream *st;       /* every operation of the forward pass goes to it, on the model's backend */
    cv_pool *pool;       /* the CPU stream's threads, for what has not moved behind the table yet */
    const cv_vec_ops *vec;
    kv_pool kv[CV_MEM_MAX_GROUPS]; /* per layer group (layer groups above): [0] the full layers (maybe
                                      none: ids and references only), [1] the window layers */
    int32_t n_groups;    /* 1, or 2 with window layers */
    int32_t kv_window;   /* group 1's window; 0: no group 1 */
    int8_t *kv_group;    /* [n_layer] the layer's group; -1: no K/V */
    int32_t *kv_layer;   /* [n_layer] the layer's index among its group's layers */
    uint32_t kinds_used[2]; /* bit k: some layer has mixer kind k ([0]) / FFN kind k ([1]) */
    kv_seq *seqs;        /* [n_seq_max] */
    int32_t max_blocks;  /* per sequence: ceil(n_ctx / CV_KV_BLOCK) */
    size_t *state_off;   /* [n_layer] a layer's offset in a state slot; SIZE_MAX: no state */
    size_t state_bytes;  /* one slot; 0: no layer keeps state */
    int32_t n_state_layers;
    int32_t snap_blocks; /* pool blocks one snapshot takes */
    char *state;         /* [2 * n_seq_max][state_bytes]: live slots, then checkpoints */

    /* Scratch, sized at creation for n_batch tokens; rows are ld floats. */
    int64_t ld_x;        /* n_embd */
    int64_t ld_qkv;      /* n_q + 2 n_kv */
    int64_t ld_q;        /* n_q */
    int64_t ld_gu;       /* 2 n_ff */
    int64_t ld_ff;       /* n_ff */
    float *x;            /* [n_batch][ld_x] residual stream */
    float *xn;           /* [n_batch][ld_x] normed input of a block; after the last one, every row's
                            hidden state when keep_hidden (cv_engine_hidden) */
    float *qkv;          /* [n_batch][ld_qkv] */
    float *attn;         /* [n_batch][ld_q] attention output */
    float *gate;         /* [n_batch][ld_q] gated attention's per-head output gates (NULL: no layer has them) */
    dn_scratch *dn;      /* the Gated DeltaNet mixer's */
    mla_scratch *mla;    /* the latent attention mixer's (which also sets qkv and attn) */
    float *gu;           /* [n_batch][ld_gu] dense FFN */
    float *ff;           /* [n_batch][ld_ff] dense FFN */
    ffn_moe_scratch *moe;
    eng_pl_scratch *pl;  /* per-layer inputs (NULL: the model has none) */
    float *tmp;          /* [n_batch][ld_x] a projection's result before the residual add */
    float *xo;           /* [n_logits][ld_x] normed rows that want logits */
    float *logits;       /* [n_logits][n_vocab] */
    int32_t *rows;       /* [n_logits] batch index of each logits row */
    att_tile_fn att_tile;       /* the ISA's tile kernel */
    int32_t att_tile_tokens;    /* tokens per tile: keeps a tile's rows in L1 */
    att_plan_tile *att_tiles;   /* [n_batch] this forward call's tiles */
    int32_t att_n_tiles;
    int32_t *att_rows;          /* [n_batch] batch rows grouped by sequence, in position order; the
                                   recurrent mixer reads each sequence's rows through it too */
    int32_t *att_seq_start;     /* [n_seq_max + 1] after planning: [s] ends sequence s's run in att_rows
                                   (it starts at [s - 1], or 0) */
    float *att_scratch;         /* per thread */
    size_t att_scratch_floats;
    att_plan *att_plans;        /* [att_n_plans] one per distinct window of the attention layers */
    int32_t att_n_plans;
    int32_t *att_plan_of;       /* [n_layer] the plan of each attention layer */
    float *att_slots;           /* [att_n_slots][att_slot_floats] cut pairs' chunk states (each layer's
                                   attention reuses them) */
    int32_t att_n_slots;        /* 32 per thread (none with one thread) */
    size_t att_slot_floats;
    int32_t *new_len;    /* [n_seq_max] forward bookkeeping; -1: not in the batch */
    int n_threads;

    bool profiling;
    bool keep_hidden;    /* forward calls leave every row's final hidden state in xn */
    uint64_t prof_mm_ns, prof_att_ns; /* this call's matmul and attention time, when profiling */
    int32_t prof_runs;                /* and its pool launches */
    double prof_bytes;                /* this call's weight bytes read (always counted) */
    int32_t prof_experts;             /* and the (layer, expert) pairs read */
    cv_engine_stats stats;
};

static inline uint64_t eng_tick(const cv_engine *e) { return e->profiling ? cv_now_ns() : 0; }

/* The pool and the table of sequence s that model layer il's K/V live in. */
static inline const kv_pool *eng_layer_pool(const cv_engine *e, int32_t il)
{
    return &e->kv[e->kv_group[il]];
}
static inline int32_t *eng_layer_table(const cv_engine *e, int32_t il, const kv_seq *s)
{
    return s->blocks[e->kv_group[il]];
}

/* Layer il's recurrent state of open sequence seq (il must keep state). */
static inline void *eng_state(cv_engine *e, int32_t seq, int32_t il)
{
    assert(e->state_off[il] != SIZE_MAX && seq >= 0 && seq < e->p.n_seq_max);
    return e->state + (size_t)seq * e->state_bytes + e->state_off[il];
}
/* Lays out the state slots of the layers whose mixer keeps state and maps
 * them (engine creation, after the kinds' init). */
int eng_state_init(cv_engine *e, cv_err *err);
void eng_state_fini(cv_engine *e);

/* Cuts the batch into attention tiles (once per forward call). */
void cv_engine_att_plan(cv_engine *e, const cv_batch *b);
/* Attention for every token of the planned batch at model layer il (its
 * window and sinks): reads q from e->qkv, keys/values from the cache
 * (already holding this batch's positions), writes e->attn. Runs on the
 * pool. */
void cv_engine_attention(cv_engine *e, int32_t il);
/* Allocates the per-window plans (engine creation). */
void cv_engine_att_plans_init(cv_engine *e);
void cv_engine_att_plans_fini(cv_engine *e);

#endif
