/* engine_int.h — the engine layer's guts, shared by its files only: the
 * KV block pool (kv_cache.c), the per-sequence block tables, the
 * recurrent-state slots of hybrid models (rec_state.c), the engine struct
 * with its scratch, the traits row each layer kind implements (mix_*.c,
 * ffn_*.c), the attention entry (attention.c) and the Gated DeltaNet
 * kernels (mix_deltanet.c). */
#ifndef CV_ENGINE_INT_H
#define CV_ENGINE_INT_H

#include <assert.h>

#include "engine/engine.h"

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
 * step's tile reads one head's consecutive blocks as one forward stream,
 * which the hardware prefetcher follows (block-major, with a head's 2 KB
 * of a block 196 KB from the next one, ran decode attention at depth 1.8x
 * slower). A block's bytes for saving or sharing are its pieces in
 * (layer, kv, head) order (cv_engine_kv_block_read / _write). refs[b]
 * counts the block tables that hold b; 0 means free.
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
    uint32_t type;        /* CV_GGML_F32, CV_GGML_F16 or CV_GGML_Q8_0 */
    int32_t qgroup;       /* q8_0: dimensions per scale factor */
    size_t elt_bytes;     /* 4, 2 or 1 (q8_0's values, factors apart) */
    size_t head_bytes;    /* one head's keys (or values) of a block, q8_0 factors included */
    size_t block_bytes;   /* n_layer * 2 * n_head_kv * head_bytes */
    char *data;
    int32_t *refs;
    int32_t *free_ids;    /* stack of free blocks */
    int32_t n_free;
} kv_pool;

int kv_pool_init(kv_pool *p, int32_t n_blocks, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, uint32_t type,
                 cv_err *err);
void kv_pool_fini(kv_pool *p);
/* A free block with refs = 1, or -1 when none is left. */
int32_t kv_pool_alloc(kv_pool *p);
void kv_pool_ref(kv_pool *p, int32_t b);
void kv_pool_unref(kv_pool *p, int32_t b);
/* q8_0's dimensions per factor: 32 (as the q8_0 weight format), or the
 * whole head when 32 does not divide it. */
static inline int32_t kv_q8_group(int32_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }
/* Bytes of one block for a type (what kv_pool_init sizes blocks by). */
size_t kv_block_bytes(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, uint32_t type);
/* The layers whose mixer keeps K/V in the pool, numbered in order into
 * map[n_layer] (-1 for the others; map may be NULL); returns their count. */
int32_t eng_kv_layers(const cv_model *m, int32_t *map);

/* Block b's piece in region r = (layer * 2 + kv) * n_head_kv + head: one
 * head's keys (kv 0) or values (kv 1) in one layer. A block's pieces in
 * region order are its bytes as saved or shared. */
static inline char *kv_piece(const kv_pool *p, size_t r, int32_t b)
{
    return p->data + (r * (size_t)p->n_blocks + (size_t)b) * p->head_bytes;
}
static inline size_t kv_regions(const kv_pool *p) { return p->block_bytes / p->head_bytes; }
static inline void *kv_k(const kv_pool *p, int32_t b, int32_t layer, int32_t head)
{
    return kv_piece(p, (size_t)layer * 2 * (size_t)p->n_head_kv + (size_t)head, b);
}
static inline void *kv_v(const kv_pool *p, int32_t b, int32_t layer, int32_t head)
{
    return kv_piece(p, ((size_t)layer * 2 + 1) * (size_t)p->n_head_kv + (size_t)head, b);
}
/* Element offsets, within one head's half, of dimension i of the key and
 * of the value at position j of the block (hd: head_dim). */
static inline size_t kv_k_at(int32_t j, int32_t i) { return (size_t)i * CV_KV_BLOCK + (size_t)j; }
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
/* One element as f32, any type: element `at` of a head's half, dimension
 * i of position j (keys and values differ only in where `at` is). */
static inline float kv_get(const kv_pool *p, const void *half, size_t at, int32_t j, int32_t i)
{
    if (p->type == CV_GGML_Q8_0)
        return cv_fp16_to_fp32(kv_q8_scales(p, half)[kv_scale_at(p, j, i)]) * ((const int8_t *)half)[at];
    return p->type == CV_GGML_F16 ? cv_fp16_to_fp32(((const uint16_t *)half)[at]) : ((const float *)half)[at];
}
/* Dimension i of position j's key (K from kv_k) or value (V from kv_v). The
 * scalar tile and the tests read by these. */
static inline float kv_k_get(const kv_pool *p, const void *K, int32_t j, int32_t i)
{
    return kv_get(p, K, kv_k_at(j, i), j, i);
}
static inline float kv_v_get(const kv_pool *p, const void *V, int32_t j, int32_t i)
{
    return kv_get(p, V, kv_v_at(p->head_dim, j, i), j, i);
}
/* Stores one position's key k and value v (head_dim floats each) at
 * position j of a head's halves K and V, converted to the pool's type. */
void kv_store(const kv_pool *p, const cv_vec_ops *vec, void *K, void *V, int32_t j, const float *k, const float *v);

/* ---- sequences ---- */

typedef struct kv_seq {
    bool open;
    /* A hybrid model's sequence whose recurrent state no longer matches
     * len: truncated to a length the state cannot return to, or given
     * shared KV blocks without it. Its next forward call is refused; a
     * truncate to 0 or a close clears it. */
    bool rec_lost;
    int32_t len;        /* positions held */
    int32_t n_blocks;   /* blocks in the table: ceil(len / CV_KV_BLOCK) once a forward has run */
    int32_t *blocks;    /* [max_blocks] */
} kv_seq;

/* Blocks sequence seq needs before it can grow to new_len (new table
 * entries, plus one copy when its partly filled last block is shared). */
int32_t cv_engine_kv_blocks_needed(const cv_engine *e, int32_t seq, int32_t new_len);
/* Grows seq's table for positions up to new_len (copying a shared last
 * block first); the caller checked the free count. */
void cv_engine_kv_grow(cv_engine *e, int32_t seq, int32_t new_len);

/* ---- recurrent state (rec_state.c): the other half of a hybrid's
 * sequence memory ----
 * Every sequence slot (0..n_seq_max-1) owns a fixed region that holds, for
 * each Gated DeltaNet layer in layer order, its conv state then its
 * DeltaNet state:
 *   conv [ssm_conv - 1][C]  the conv's inputs at the K - 1 positions before
 *                           the sequence's next one, oldest first
 *                           (C = 2 * ssm_group * ssm_state + ssm_inner);
 *   ssm  [ssm_heads][d][d]  value head j's state S_j[i][m] (i: key index,
 *                           m: value index), d = ssm_state.
 * Zero is the state of an empty sequence. A slot is one contiguous run of
 * seq_bytes whatever the layer count, so a snapshot of a sequence is one
 * copy of eng_rec_state(e, seq) and a restore one copy back; the state at a
 * position depends only on the tokens before it (the forward pass keeps
 * sequences independent), so a snapshot serves every sequence with that
 * prefix. Slots are allocated for every sequence at engine creation (an
 * anonymous mapping: untouched slots cost no memory) and are zero while
 * closed: close gives the pages back. */
typedef struct rec_pool {
    int32_t n_layer;      /* recurrent layers; 0: the model has none (nothing below is set) */
    size_t conv_floats;   /* (ssm_conv - 1) * C per layer */
    size_t ssm_floats;    /* ssm_heads * d * d per layer */
    size_t layer_floats;  /* conv + ssm, rounded up to 16 floats (64-byte aligned) */
    size_t seq_bytes;     /* one slot: n_layer * layer_floats floats, rounded up to whole pages */
    char *data;           /* [n_seq_max][seq_bytes] */
    int32_t *layer;       /* [n_layer of the model] index among the recurrent layers; -1: not recurrent */
} rec_pool;

/* Sizes the pool for m's recurrent layers and n_seq slots; CV_ELIMIT when
 * the slots would not be addressable, CV_ENOMEM when the OS refuses the
 * mapping. A model without recurrent layers gets an empty pool. */
int rec_pool_init(rec_pool *p, const cv_model *m, int32_t n_seq, cv_err *err);
void rec_pool_fini(rec_pool *p, int32_t n_seq);
/* Bytes of one sequence's recurrent state (0 without recurrent layers):
 * what a snapshot holds. */
size_t eng_rec_bytes(const cv_engine *e);
/* Sequence seq's whole slot, eng_rec_bytes long (NULL without recurrent
 * layers). Valid for the engine's lifetime; the caller keeps it consistent
 * with the sequence's length (a restore must match the positions held). */
void *eng_rec_state(const cv_engine *e, int32_t seq);
/* Layer il's conv state [(ssm_conv - 1)][C] and DeltaNet state
 * [ssm_heads][d][d] inside seq's slot; il must be a recurrent layer. */
float *eng_rec_conv(const cv_engine *e, int32_t seq, int32_t il);
float *eng_rec_ssm(const cv_engine *e, int32_t seq, int32_t il);
/* Zeroes seq's state (an empty sequence's); for a closed slot also gives
 * its pages back to the OS. */
void eng_rec_clear(cv_engine *e, int32_t seq, bool closing);
/* dst's state becomes a copy of src's (a fork). */
void eng_rec_copy(cv_engine *e, int32_t dst, int32_t src);

/* ---- attention (attention.c, attention_avx2.c) ---- */

/* One unit of attention work: n_tok consecutive positions pos0.. of one
 * sequence (batch rows rows[0..n_tok)) against kv head g, all n_rep query
 * heads of that head. Reads q from qkv (row stride ld_qkv, head h of the
 * group at (g * n_rep + h) * hd) and writes out (stride ld_out, same
 * columns). */
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
    float scale;
    int32_t blk0, blk1;  /* the kernels attend blocks [blk0, blk1) of the context */
} att_tile;

/* Attention is computed chunk by chunk: CV_ATT_CHUNK_BLOCKS blocks of
 * positions from the start of the sequence, each with an online softmax of
 * its own, then the chunks' states merged in order. A deep context's chunks
 * can so run on different threads (when a step has fewer tiles x kv heads
 * than threads, as a decoding agent has) with the bits they get in one. */
#define CV_ATT_CHUNK_BLOCKS 64

/* The kernels: tile a over blocks [blk0, blk1) (clipped to what its last
 * token sees), from a fresh state, left in scratch as each row's state:
 * acc [R][hd] (values weighted by exp(score - max), not yet divided by
 * sum), then max [R], then sum [R], R = n_tok * n_rep; a row that sees
 * none of the blocks keeps max = -inf, sum = 0, acc = 0. */
typedef void (*att_tile_fn)(const att_tile *a, float *scratch);
void cv_att_tile_scalar(const att_tile *a, float *scratch);
void cv_att_tile_avx2(const att_tile *a, float *scratch);  /* needs hd % 8 == 0 */
/* Floats of scratch one thread needs for tiles of max_rows = n_tok * n_rep:
 * a kernel's, plus one state for cv_att_tile_run. */
size_t cv_att_scratch_floats(int32_t max_rows, int32_t hd);
/* Floats of one state (acc, max, sum) of R rows. */
static inline size_t cv_att_state_floats(int32_t R, int32_t hd) { return (size_t)R * ((size_t)hd + 2); }
/* Chunks of a context whose last position is last. */
static inline int32_t cv_att_chunks(int32_t last) { return last / CV_KV_BLOCK / CV_ATT_CHUNK_BLOCKS + 1; }
/* State b (of the same rows) merged into state a, which becomes the state
 * of both sets of positions. */
void cv_att_state_merge(float *a, const float *b, int32_t R, int32_t hd);
/* A state divided through by its sums into a's output rows. */
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

/* ---- Gated DeltaNet kernels (mix_deltanet.c, mix_deltanet_avx2.c) ---- */

/* Positions per chunk of the chunked (parallel) form. Chunks start at
 * multiples of it in the sequence, whatever the calls' boundaries, so a
 * prompt fed in pieces runs the same chunks as in one call. */
#define CV_DN_CHUNK 64

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
} eng_kind;

extern const eng_kind eng_mix_attn;
extern const eng_kind eng_mix_deltanet;
extern const eng_kind eng_ffn_dense;
extern const eng_kind eng_ffn_moe;
/* The rows by kind (forward.c). */
extern const eng_kind *const eng_mixers[CV_MIXER_COUNT];
extern const eng_kind *const eng_ffns[CV_FFN_COUNT];

/* Runs fn(ctx, ith, nth) over n_rows rows of per-token work on the pool,
 * inline for a handful of rows (waking the pool costs more). */
void eng_run_rows(cv_engine *e, int32_t n_rows, cv_pool_fn fn, void *ctx);
/* A matmul of the forward pass, timed when profiling. */
void eng_matmul(cv_engine *e, const cv_wmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y, int64_t ldy);

typedef struct ffn_moe_scratch ffn_moe_scratch;
typedef struct dn_scratch dn_scratch;

/* ---- the engine ---- */

struct cv_engine {
    const cv_model *m;
    cv_engine_params p;
    cv_pool *pool;
    const cv_vec_ops *vec;
    kv_pool kv;
    int32_t *kv_layer;   /* [n_layer] the layer's index among the KV pool's layers; -1: none */
    uint32_t kinds_used[2]; /* bit k: some layer has mixer kind k ([0]) / FFN kind k ([1]) */
    rec_pool rec;        /* recurrent layers' per-sequence state */
    kv_seq *seqs;        /* [n_seq_max] */
    int32_t max_blocks;  /* per sequence: ceil(n_ctx / CV_KV_BLOCK) */

    /* Scratch, sized at creation for n_batch tokens; rows are ld floats. */
    int64_t ld_x;        /* n_embd */
    int64_t ld_qkv;      /* n_q + 2 n_kv */
    int64_t ld_q;        /* n_q */
    int64_t ld_gu;       /* 2 n_ff */
    int64_t ld_ff;       /* n_ff */
    float *x;            /* [n_batch][ld_x] residual stream */
    float *xn;           /* [n_batch][ld_x] normed input of a block */
    float *qkv;          /* [n_batch][ld_qkv] */
    float *attn;         /* [n_batch][ld_q] attention output */
    float *gate;         /* [n_batch][ld_q] gated attention's per-head output gates (NULL: no layer has them) */
    dn_scratch *dn;      /* the Gated DeltaNet mixer's */
    float *gu;           /* [n_batch][ld_gu] dense FFN */
    float *ff;           /* [n_batch][ld_ff] dense FFN */
    ffn_moe_scratch *moe;
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
    att_item *att_items;        /* [n_batch * n_head_kv + att_n_slots] this call's work */
    int32_t att_n_items;
    att_split_pair *att_split;  /* [att_n_slots] pairs cut into chunks this call */
    int32_t att_n_split;
    float *att_slots;           /* [att_n_slots][att_slot_floats] their chunks' states */
    int32_t att_n_slots;        /* 32 per thread (none with one thread) */
    size_t att_slot_floats;
    int32_t *new_len;    /* [n_seq_max] forward bookkeeping; -1: not in the batch */
    int n_threads;

    bool profiling;
    uint64_t prof_mm_ns, prof_att_ns; /* this call's matmul and attention time, when profiling */
    int32_t prof_runs;                /* and its pool launches */
    cv_engine_stats stats;
};

static inline uint64_t eng_tick(const cv_engine *e) { return e->profiling ? cv_now_ns() : 0; }

/* Cuts the batch into attention tiles (once per forward call). */
void cv_engine_att_plan(cv_engine *e, const cv_batch *b);
/* Attention for every token of the planned batch at one layer: reads q from
 * e->qkv, keys/values from the cache (already holding this batch's
 * positions), writes e->attn. Runs on the pool. */
void cv_engine_attention(cv_engine *e, int32_t layer);

#endif
