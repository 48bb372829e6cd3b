/* engine_int.h — the engine layer's guts, shared by its files only: the
 * KV block pools' memory and references (kv_cache.c), the per-sequence
 * block tables and recurrent state slots, snapshots (seq_mem.c), the
 * engine struct with its scratch, the traits row each layer kind
 * implements (mix_*.c, ffn_*.c) and the attention plan (attention.c; the
 * backend runs it). The bytes of a K/V block, the attention tiles, the
 * latent attention's and the Gated DeltaNet kernels are the kernels
 * layer's (kernels/attention.h, kernels/mla.h, kernels/deltanet.h). */
#ifndef CV_ENGINE_INT_H
#define CV_ENGINE_INT_H

#include <assert.h>

#include "engine/engine.h"
#include "engine/engine_bench.h"
#include "kernels/attention.h"
#include "kernels/deltanet.h"
#include "kernels/mla.h"

/* ---- KV block pools (kv_cache.c; their layout: kernels/attention.h) ---- */

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
/* Commits the pool's first run now (the blocks a first sequence takes, in
 * huge pages all of it whatever the sequence's length): fresh memory's
 * first touch is slow (250-500 MB/s on a VM, docs/PERF.md "A model's first
 * request"), and done at load it is not in the first request's time.
 * Returns the bytes committed (0: no pool). */
size_t kv_pool_commit_first_run(kv_pool *p);
/* A free block with refs = 1, or -1 when none is left. */
int32_t kv_pool_alloc(kv_pool *p);
void kv_pool_ref(kv_pool *p, int32_t b);
void kv_pool_unref(kv_pool *p, int32_t b);

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

/* ---- attention planning (attention.c; the plan's types and its runner:
 * backend.h's cv_batt) ---- */

/* The work items of one forward call's attention for the layers of one
 * window and kv head count (each distinct pair of the model has its own: a
 * window changes which chunks a tile reads, so which pairs are worth
 * cutting). */
typedef struct att_plan {
    int32_t window;             /* 0: full attention */
    int32_t n_head_kv;          /* of its layers (gemma4's window and full layers have their own) */
    cv_batt_item *items;        /* [n_batch * n_head_kv + att_n_slots] */
    int32_t n_items;
    cv_batt_split *split;       /* [att_n_slots] pairs cut into chunks this call */
    int32_t n_split;
} att_plan;

/* ---- multi-head latent attention (mix_mla.c; its kernels: kernels/mla.h) ---- */

/* Tokens a latent tile takes (a prefill's tiles; a decode step's is its
 * token): about 48 query rows, so both GEMMs run whole 16-column blocks
 * and a block's rows serve several tokens (at 20 heads 2 tokens ran a
 * 512-token prefill 1.15x faster than 1, 8 slower: docs/PERF.md). */
int32_t eng_mla_tile_tokens(int32_t n_head);

/* The decompressed form (mix_mla.c, "the decompressed form"), when the
 * engine takes it, takes per sequence in a call the tokens of the whole
 * groups of CV_MLA_GROUP positions (from position 0) the call holds; the
 * others, and every decode step, take the absorbed one. Below a group's
 * tokens a call at depth loses (docs/PERF.md, "Latent attention in
 * prefill, both forms"), and by groups a sequence's bits depend on how its
 * positions are split into calls only off the grid. */
#define CV_MLA_GROUP 128
/* Whether this engine takes the decompressed form (cv_engine_params.
 * mla_decompress): its sequences' bits then depend on their splits off the
 * grid of CV_MLA_GROUP (cv_engine_mem_info). */
bool eng_mla_decompresses(const cv_engine *e);

/* ---- Gated DeltaNet (mix_deltanet.c; its kernels: kernels/deltanet.h) ---- */

/* Pieces of a call of at most this many tokens (within one chunk) take the
 * step form, token by token: a speculative step of a decoding token and
 * up to CV_SCHED_DRAFT_MAX drafts computes what decoding them does. */
#define CV_DN_STEP_RUN 32

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

/* rows[t] += bias for t < n_rows, rows ld apart, n values each. */
void eng_add_bias(cv_engine *e, float *rows, int64_t ld, int32_t n_rows, const float *bias, int64_t n);
/* n_bytes of the backend's activation memory (what its operations read
 * and write: an op's int32 ids as well as its rows), n_rows rows of ld
 * floats of it, and back; NULL (an error set) when the backend is out of
 * memory. */
void *eng_mem_alloc(cv_engine *e, size_t n_bytes, cv_err *err);
float *eng_rows_alloc(cv_engine *e, int64_t n_rows, int64_t ld, cv_err *err);
void eng_rows_free(cv_engine *e, void *rows);
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
int eng_pl_init(cv_engine *e, cv_err *err);
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
    cv_pool *pool;       /* the CPU stream's threads, for corvid bench's attention probe (cv_engine_pool) */
    cv_bact act;          /* the model's gated activation, as the table's glu takes it */
    kv_pool kv[CV_MEM_MAX_GROUPS]; /* per layer group (layer groups above): [0] the full layers (maybe
                                      none: ids and references only), [1] the window layers */
    int32_t n_groups;    /* 1, or 2 with window layers */
    size_t kv_committed; /* the pools' bytes committed at load (kv_pool_commit_first_run) */
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
    int32_t *att_kv_block; /* [n_batch] the cache block each row's K/V goes to (the attention mixer) */
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
    cv_att_ws *att_ws;          /* the backend's attention workspace (the attention kind's, or the latent
                                   one's) */
    int32_t att_tile_tokens;    /* tokens per tile: keeps a tile's rows in L1 */
    cv_batt_tile *att_tiles;    /* [n_batch] this forward call's tiles */
    int32_t att_n_tiles;
    int32_t *att_rows;          /* [n_batch] batch rows grouped by sequence, in position order; the
                                   recurrent mixer reads each sequence's rows through it too */
    int32_t *att_seq_start;     /* [n_seq_max + 1] after planning: [s] ends sequence s's run in att_rows
                                   (it starts at [s - 1], or 0) */
    att_plan *att_plans;        /* [att_n_plans] one per distinct window of the attention layers */
    int32_t att_n_plans;
    int32_t *att_plan_of;       /* [n_layer] the plan of each attention layer */
    int32_t att_n_slots;        /* the workspace's chunk states for cut pairs: 32 per thread (none with one
                                   thread) */
    const int32_t **att_tables[CV_MEM_MAX_GROUPS]; /* [n_seq_max] each sequence's block table of the group */
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
/* Layer il's attention by the call's plan, as the backend takes it (its
 * window, sinks and cache; q from e->qkv, the output to e->attn; a kind
 * that runs some of the tiles itself changes the items: mix_mla.c). */
cv_batt eng_att_call(const cv_engine *e, int32_t il);
/* Attention for every token of the planned batch at model layer il:
 * reads q from e->qkv, keys/values from the cache (already holding this
 * batch's positions), writes e->attn. */
void cv_engine_attention(cv_engine *e, int32_t il);
/* Allocates the per-window plans (engine creation). */
void cv_engine_att_plans_init(cv_engine *e);
void cv_engine_att_plans_fini(cv_engine *e);

#endif
