/* attention.h — attention over paged K/V blocks on the CPU: the layout of
 * a pool of K/V blocks in memory, storing a position into it, and the
 * tiles that attend a run of one sequence's tokens to its blocks (the
 * scalar reference in attention.c; attention_avx2.c and attention_avx512.c
 * at their ISA levels, with the block loop they share in attention_tile.h),
 * with the chunked online softmax they run in. The engine owns which blocks
 * a sequence holds and plans the tiles of a forward call
 * (engine/attention.c); everything about a block's bytes is here. */
#ifndef CV_KERNELS_ATTENTION_H
#define CV_KERNELS_ATTENTION_H

#include <assert.h>

#include "kernels/kernels.h"

/* Block b holds, for every layer, the keys then the values of CV_KV_BLOCK
 * positions: keys as [n_head_kv][head_dim][CV_KV_BLOCK] (transposed: one
 * dimension of the block's 16 positions is one contiguous row, so the
 * scores of a block are a small GEMM read straight from the cache), values
 * as [n_head_kv][CV_KV_BLOCK][head_dim] (one position's values contiguous,
 * as the weighted sum reads them). The pool is head-major in runs of
 * RUN = 2^run_shift blocks: run u holds, for each region r = (layer * 2 +
 * kv) * n_head_kv + head in turn, that head's half of the run's blocks in
 * block order:
 *   data + (b / RUN) * RUN * block_bytes + (r * RUN + b % RUN) * head_bytes
 * kv_pool_init makes runs of CV_KV_RUN_BLOCKS; run_shift 0 means one run
 * over the whole pool (RUN = n_blocks), as most pools the backends' tests
 * build by hand have it (the CUDA backend's kv_addr.cuh addresses both).
 * A sequence's blocks come from the pool's start in order, so a decode
 * step's tile reads one head's consecutive blocks as a forward stream, a
 * run at a time (block-major, with a head's 2 KB of a block 196 KB
 * from the next one, ran decode attention at depth 1.8x slower), which the
 * tiles prefetch ahead of themselves (cv_att_prefetch_l2). Runs rather
 * than one region over the whole pool because the pool is committed on
 * first touch in 2 MiB huge pages: a fresh sequence then commits what its
 * runs take, not a huge page in every region (a 24-layer, 2-KV-head model's
 * first token committed 96 of them, 192 MiB, and its first forward call
 * paid for zeroing them; docs/PERF.md "Several models in one server"). A
 * block's bytes for saving or sharing are its pieces in (layer, kv, head)
 * order (cv_engine_kv_block_read / _write). refs[b] counts the block tables
 * that hold b; 0 means free.
 *
 * A latent pool (n_parts 1: multi-head latent attention) keeps one row of
 * head_dim values a position, the key and, in its first n_lora_kv dims, the
 * value of every head: one piece per layer, the region
 * (layer * n_parts + kv) * n_head_kv + head with kv 0, holding the block's
 * rows position by position ([CV_KV_BLOCK][head_dim]; q8_0: the int8 rows,
 * then their factors as [CV_KV_BLOCK][head_dim / qgroup]). Its layout is
 * the engine's mix_mla.c's, which alone reads and writes it.
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
    int32_t run_shift;    /* log2 of the blocks of a run (the layout above); 0: one run of n_blocks */
    char *data;           /* kv_pool_bytes: whole runs */
    int32_t *refs;
    int32_t *free_ids;    /* stack of free blocks */
    int32_t n_free;
} kv_pool;

/* q8_0's dimensions per factor: 32 (as the q8_0 weight format), or the
 * whole head when 32 does not divide it. */
static inline int32_t kv_q8_group(int32_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }
/* Bytes of one head's keys (or values) of a block, and of one block of
 * n_layer layers (what kv_pool_init sizes blocks by). */
size_t kv_head_bytes(int32_t head_dim, uint32_t type);
size_t kv_block_bytes(int32_t n_layer, int32_t n_parts, int32_t n_head_kv, int32_t head_dim, uint32_t type);
/* The runs kv_pool_init makes (the layout above): as many blocks as an
 * attention chunk (CV_ATT_CHUNK_BLOCKS, below), so a sequence whose blocks
 * came in order reads each head's keys or values 1,024 positions at a time
 * as one stream (128 KiB of an f16 head of 64 dimensions). */
#define CV_KV_RUN_SHIFT 6
#define CV_KV_RUN_BLOCKS (1 << CV_KV_RUN_SHIFT)
/* Block b's piece in region r = (layer * n_parts + kv) * n_head_kv + head: one
 * head's keys (kv 0) or values (kv 1) in one layer. A block's pieces in
 * region order are its bytes as saved or shared. */
static inline char *kv_piece(const kv_pool *p, size_t r, int32_t b)
{
    const int s = p->run_shift;
    if (s == 0) /* one run */
        return p->data + (r * (size_t)p->n_blocks + (size_t)b) * p->head_bytes;
    const size_t run = (size_t)b >> s, at = (size_t)b & (((size_t)1 << s) - 1);
    return p->data + ((run * p->block_bytes) << s) + ((r << s) + at) * p->head_bytes;
}
static inline size_t kv_regions(const kv_pool *p) { return p->block_bytes / p->head_bytes; }
/* Bytes the pool's data spans: whole runs. */
static inline size_t kv_pool_bytes(const kv_pool *p)
{
    const int s = p->run_shift;
    if (s == 0)
        return (size_t)p->n_blocks * p->block_bytes;
    return ((((size_t)p->n_blocks + ((size_t)1 << s) - 1) >> s) * p->block_bytes) << s;
}
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
/* Why level isa runs no tile of its own for head_dim hd, in words (the
 * CPU's reason, the head size, a level without one), or NULL when it
 * does: `corvid doctor`'s operations list. */
const char *cv_att_tile_why_not(cv_isa isa, int32_t hd);
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

#endif
