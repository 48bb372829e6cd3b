/* engine — the face of the engine layer: batched forward passes over many
 * sequences at once, the paged KV cache, and sampling.
 *
 * One forward call takes a batch of tokens that belong to several sequences
 * at different positions (the shape continuous batching needs) and returns
 * logits only for the rows asked for. Each sequence's keys and values live
 * in fixed-size blocks of CV_KV_BLOCK positions drawn from a pool per layer
 * group (the full layers; the window layers, whose blocks a window has
 * passed go back to their pool); a sequence holds a block table per layer
 * group, and a recurrent state when the model has recurrent layers
 * ("sequence memory" below). Blocks are
 * reference counted, so a fork and the prefix cache share them; a write
 * into a shared block copies it first. Attention walks a sequence's blocks
 * with an online softmax.
 *
 * Threads: a cv_engine is driven by one thread at a time (the engine
 * thread); it runs its matmuls and attention on its own compute pool. The
 * sampler is per sequence and single-threaded. The cv_model it runs is
 * shared and read-only.
 *
 * Sections of this face: the sampler (engine/sampler.h, included here: what
 * a request asks of it is all the chat layer needs from the engine) and the
 * attention benchmark hook (engine/engine_bench.h, for bench-kernels only). */
#ifndef CV_ENGINE_H
#define CV_ENGINE_H

#include "base/base.h"
#include "model/model.h"

#include "engine/sampler.h"

/* ---- engine ---- */

typedef struct cv_engine_params {
    int32_t n_threads;   /* compute threads; <= 0: every CPU */
    int32_t n_ctx;       /* positions one sequence may hold; <= 0: min(training context, 4096) */
    int32_t n_seq_max;   /* sequences open at once; <= 0: 1 */
    int32_t n_kv_tokens; /* KV capacity shared by all sequences (and by snapshots of recurrent state,
                            which take blocks of this pool); <= 0: n_ctx (rounded up to whole blocks) *
                            n_seq_max */
    int32_t n_batch;     /* tokens per forward call at most; <= 0: 512 */
    int32_t n_logits;    /* logit rows per forward call at most; <= 0: max(n_seq_max, 8) */
    uint32_t kv_type;    /* CV_GGML_F32 (0, default: exact), CV_GGML_F16 (half the memory) or
                            CV_GGML_Q8_0 (int8 with an f16 factor per 32 dimensions: 0.53x f16's at head
                            sizes 32-128) */
    bool kv_keep_window; /* keep the K/V of window layers' positions their window has passed, as if
                            they were full layers (to compare against: the outputs are the same) */
    bool mla_decompress; /* multi-head latent attention: a prefill's whole groups of CV_MLA_GROUP (128)
                            positions in the decompressed form (docs/ENGINE.md, "Latent attention"),
                            faster from about that many tokens a call; a sequence's bits then depend on
                            how its positions are split off that grid (cv_mem_info.split_align), so the
                            prefix cache keeps only prompts' whole groups, not replies. false: the
                            absorbed form everywhere, any split exact */
} cv_engine_params;

/* Bytes one block of CV_KV_BLOCK positions takes over every layer group
 * (window layers included) of model m in a cache of type kv_type: what the
 * KV budget is divided by. "f32", "f16" or "q8_0" names the type. */
size_t cv_engine_kv_block_bytes(const cv_model *m, uint32_t kv_type);
const char *cv_engine_kv_type_name(uint32_t kv_type);
/* The type a name stands for, or CV_EINVAL with the names in the message. */
int cv_engine_kv_type_parse(const char *name, uint32_t *out, cv_err *err);

typedef struct cv_engine cv_engine;

/* Creates an engine over m (which must outlive it): validates the
 * parameters against the model and base/limits.h (CV_EINVAL / CV_ELIMIT
 * naming the field), allocates the KV pool, two recurrent-state slots per
 * sequence when the model has recurrent layers (its state and its
 * checkpoint) and every scratch buffer once (forward calls allocate nothing
 * of their own), and starts the compute pool. params may be NULL. Caller
 * destroys *out. */
int cv_engine_create(const cv_model *m, const cv_engine_params *params, cv_engine **out, cv_err *err);
void cv_engine_destroy(cv_engine *e);

const cv_model *cv_engine_model(const cv_engine *e);
/* The parameters in effect (defaults resolved). */
const cv_engine_params *cv_engine_params_get(const cv_engine *e);
cv_pool *cv_engine_pool(cv_engine *e);
/* Forward calls from now on compute with at most n of the engine's
 * n_threads (1..n_threads), through its backend stream, with the same bits:
 * the engines of several models in one process share the cores this way
 * (sched.h, cv_sched_share). Called by the thread that drives the engine. */
void cv_engine_set_threads(cv_engine *e, int32_t n);

/* ---- sequence memory ----
 * What a sequence holds is its memory, in two parts:
 *  - KV blocks, per layer group: a group is the attention layers that keep
 *    the same positions. Group 0 is CV_MEM_GROUP_FULL (the full-attention
 *    layers, every position; it exists even without layers, as the ids and
 *    references of the blocks of positions); a model with sliding-window
 *    layers has group 1, CV_MEM_GROUP_WINDOW, whose blocks its window has
 *    passed go back to the pool as the sequence grows. Each group has a
 *    pool of blocks of CV_KV_BLOCK positions, reference
 *    counted: a block's content depends only on the tokens at and before
 *    its positions, so one computed for a sequence serves every sequence
 *    with the same prefix, and holders other than sequences (the prefix
 *    cache) take references of their own.
 *  - A recurrent state, when the model has recurrent layers (a Gated
 *    DeltaNet layer's conv and delta-rule state): fixed bytes per sequence
 *    that summarise every position so far. It exists at the sequence's
 *    current length only; a copy kept for later is a snapshot (a
 *    cv_snapshot a holder owns) or the sequence's checkpoint (one, kept
 *    for speculation).
 * KV can be cut back to any length; a recurrent state only to its
 * checkpoint (or to nothing). So callers never do block arithmetic or ask
 * what the model is: they ask where a sequence can be cut back
 * (cv_engine_seq_truncatable), where a held prefix can be resumed
 * (cv_engine_resume_len), and what growing takes (cv_engine_seq_need).
 * docs/ENGINE.md, "Sequence memory", has the picture. */

#define CV_MEM_MAX_GROUPS 4

typedef enum cv_mem_group_kind {
    CV_MEM_GROUP_FULL,   /* every position stays visible: blocks are freed only with the sequence */
    CV_MEM_GROUP_WINDOW, /* position p sees p - W + 1 .. p: a sequence lets go of the blocks before the
                          * window of its length when it next grows (other holders keep theirs) */
} cv_mem_group_kind;

/* What one block's bytes mean: blocks with equal formats (and equal
 * models) are interchangeable byte for byte. */
typedef struct cv_kv_format {
    int32_t n_layer, n_head_kv, head_dim; /* n_layer: the group's layers */
    uint32_t type;          /* CV_GGML_F32, CV_GGML_F16 or CV_GGML_Q8_0 */
    int32_t block_positions; /* CV_KV_BLOCK */
    size_t block_bytes;
} cv_kv_format;

typedef struct cv_mem_group_info {
    cv_mem_group_kind kind;
    int32_t window;          /* W of a window group (the largest of its layers'); 0 for the full group */
    cv_kv_format format;     /* format.n_layer: the group's layers (0 for a full group without any) */
    int32_t n_blocks;        /* the group's pool */
    int32_t n_free;          /* free now */
} cv_mem_group_info;

typedef struct cv_mem_info {
    int32_t n_groups;        /* 1, or 2 when the model has window layers */
    cv_mem_group_info group[CV_MEM_MAX_GROUPS];
    int32_t n_state_layers;  /* layers with recurrent state (0: a plain transformer) */
    size_t state_bytes;      /* one sequence's recurrent state, every such layer; 0: none, and then
                              * any held prefix resumes at any length and truncation always succeeds */
    int32_t snapshot_blocks; /* group-0 blocks one snapshot takes (it lives in that pool, so the
                              * memory budget counts it); 0 when state_bytes is 0 */
    int64_t max_positions;   /* positions one sequence could hold with every block to itself */
    size_t block_bytes;      /* one block of positions over every group (the groups' formats summed) */
    size_t committed_bytes;  /* KV bytes committed when the engine was made (each pool's first run,
                              * which a first sequence writes); the rest commits as sequences write it */
    /* How a sequence's bits depend on the way its positions are split into
     * forward calls (the scheduler's exactness rests on these): calls that
     * split it only at multiples of split_align compute the same bits
     * however they split it (1: anywhere; a Gated DeltaNet layer's prefill
     * works in chunks of 64 positions), and a run of at most step_run of
     * its tokens in one call gives the bits of one call per token, as
     * decoding does (INT32_MAX: any run). */
    int32_t split_align;
    int32_t step_run;
} cv_mem_info;

void cv_engine_mem_info(const cv_engine *e, cv_mem_info *out);
/* Group 0's block format (what cv_mem_info.group[0].format says). */
void cv_engine_kv_format(const cv_engine *e, cv_kv_format *out);
/* Blocks in group 0's pool / free in it. Every block of positions held
 * holds a group-0 block (and snapshots take theirs), so these count what is
 * held in blocks of positions, whatever the other groups keep: status
 * lines and leak checks. Admission asks cv_engine_mem_short. */
int32_t cv_engine_kv_n_blocks(const cv_engine *e);
int32_t cv_engine_kv_free_blocks(const cv_engine *e);

/* Opens an empty sequence (no blocks, a zero recurrent state) and gives
 * its id (0 <= id < n_seq_max). CV_EBUSY when every slot is open. */
int cv_engine_seq_open(cv_engine *e, int32_t *seq, cv_err *err);
/* Releases the sequence's blocks (shared ones stay with their other
 * owners), drops its checkpoint and frees the slot. Closing a closed or
 * invalid id is a no-op. */
void cv_engine_seq_close(cv_engine *e, int32_t seq);
/* Positions the sequence holds (the next token goes at this position). */
int32_t cv_engine_seq_len(const cv_engine *e, int32_t seq);
/* Opens a new sequence with src's memory: every block shared (no copy; a
 * later write into a shared block copies that block first), the recurrent
 * state copied (not the checkpoint). CV_EBUSY when no slot is free,
 * CV_EINVAL when src is not open. */
int cv_engine_seq_fork(cv_engine *e, int32_t src, int32_t *dst, cv_err *err);

/* ---- cutting back ---- */

/* The length cv_engine_seq_truncate(e, seq, len) would leave: min(len,
 * length) when the sequence has no recurrent state (or len >= its length);
 * otherwise its checkpoint's length when that is <= len, else 0 (the state
 * can only restart). Either way 0 when that length's window reaches
 * before a window block the sequence has let go of (a length at or past
 * the one before its last forward call always keeps them). 0 for a closed
 * or invalid id. */
int32_t cv_engine_seq_truncatable(const cv_engine *e, int32_t seq, int32_t len);
/* Forgets positions past what cv_engine_seq_truncatable(e, seq, len) says
 * and returns that length (rewind: a rejected draft, an edited prompt,
 * bench's repeats at depth); the caller recomputes the positions between
 * it and len. A negative len is 0; cutting back to below the checkpoint
 * drops it. */
int32_t cv_engine_seq_truncate(cv_engine *e, int32_t seq, int32_t len);
/* Keeps the sequence's memory at its current length so that a later
 * cv_engine_seq_truncate to any length from here on reaches it: a copy of
 * the recurrent state (state_bytes copied; nothing for a model without
 * recurrent layers, whose KV truncates anywhere). Replaces an earlier
 * checkpoint. Speculation takes one before every drafted step. */
void cv_engine_seq_checkpoint(cv_engine *e, int32_t seq);

/* ---- memory held outside sequences (the prefix cache, its file) ----
 * A span is what a holder keeps of one block of positions [16 i, 16 i + 16)
 * of some sequence: the block of each group, and optionally the recurrent
 * state at the span's end (position 16 i + 16). A holder of spans 0..n-1 of
 * a prefix holds that prefix; where it can resume depends on what the
 * spans hold, which only the engine judges. */

typedef struct cv_snapshot cv_snapshot; /* a copy of a sequence's recurrent state at some length */

typedef struct cv_mem_span {
    int32_t kv[CV_MEM_MAX_GROUPS]; /* block of group g (0..n_groups-1); -1: not held */
    cv_snapshot *snap;             /* the state at the span's end; NULL: none. Owned by the span's holder */
} cv_mem_span;

/* Span i of open sequence seq (its blocks; snap NULL; a window group's
 * block -1 once the sequence let go of it), without taking references;
 * false when seq is not open or does not reach into span i. */
bool cv_engine_seq_span(const cv_engine *e, int32_t seq, int32_t i, cv_mem_span *out);
/* One more reference on each block of s (every block must be in use: a bad
 * id is a caller bug, asserted). */
void cv_engine_span_ref(cv_engine *e, const cv_mem_span *s);
/* Lets go of s: one reference less on each block (a block returns to its
 * pool at 0) and its snapshot freed; s is left empty. */
void cv_engine_span_release(cv_engine *e, cv_mem_span *s);
/* True when releasing s would return each of its blocks to its pool (the
 * holder's is the only reference). */
bool cv_engine_span_sole(const cv_engine *e, const cv_mem_span *s);
/* A span's KV bytes, for saving and restoring it: every group's block
 * (cv_engine_kv_block_read's bytes), group 0 first, cv_mem_info.block_bytes
 * in all. read is false (nothing written) when s lacks some group's block
 * (dst may be NULL: only that check);
 * make takes a new block in every group filled from src (refs 1 each, the
 * caller's; snap NULL) and is false, nothing taken, when a pool is empty. */
bool cv_engine_span_read(const cv_engine *e, const cv_mem_span *s, void *dst);
bool cv_engine_span_make(cv_engine *e, const void *src, cv_mem_span *out);

/* The deepest length L <= max_len at which a sequence restored from spans
 * [0..n) of a prefix (spans[i] covers block i) continues exactly as the
 * sequence that computed them would: any L up to 16 n without recurrent
 * state; with it, only 0 or the end of a span that holds a snapshot. Every
 * group must hold the blocks L needs: the full group every block below L,
 * a window group those L's window sees. */
int32_t cv_engine_resume_len(const cv_engine *e, const cv_mem_span *const *spans, int32_t n, int32_t max_len);
/* Makes open, empty seq hold the prefix up to len, which must be one
 * cv_engine_resume_len accepts for these spans: a reference on each block
 * the positions from len on see (a window group's from len's window on),
 * and the snapshot at len copied into its
 * state. A later write into a shared partly used last block copies it
 * first, as after a fork. CV_EINVAL (nothing changed) for a sequence that
 * is not open and empty, a block that is not in use, or a length the spans
 * cannot resume at. */
int cv_engine_seq_restore(cv_engine *e, int32_t seq, const cv_mem_span *const *spans, int32_t n, int32_t len,
                          cv_err *err);

/* Copies seq's recurrent state at its current length, which must be a
 * whole number of blocks, into a new snapshot drawn from group 0's pool
 * (snapshot_blocks blocks). CV_ELIMIT when the pool has fewer free,
 * CV_EINVAL for a closed sequence, a length inside a block or a model
 * without recurrent state; nothing taken then. Free with
 * cv_engine_snapshot_free (or with the span holding it). */
int cv_engine_snapshot_take(cv_engine *e, int32_t seq, cv_snapshot **out, cv_err *err);
/* Its blocks go back to the pool. NULL is a no-op. */
void cv_engine_snapshot_free(cv_engine *e, cv_snapshot *s);
/* The sequence length it was taken at. */
int32_t cv_engine_snapshot_len(const cv_snapshot *s);
/* Its state_bytes out (saving it), or a new one made from them (loading:
 * CV_ELIMIT when the pool is short, CV_EINVAL for a len that is not a
 * whole positive number of blocks within the context). */
void cv_engine_snapshot_read(const cv_engine *e, const cv_snapshot *s, void *dst);
int cv_engine_snapshot_make(cv_engine *e, int32_t len, const void *src, cv_snapshot **out, cv_err *err);

/* ---- what growing takes ----
 * Blocks per group, so that a caller sums what several sequences (and
 * snapshots) will draw and asks whether the pools hold it. */
typedef struct cv_mem_need {
    int32_t blocks[CV_MEM_MAX_GROUPS];
} cv_mem_need;

/* Adds to *acc what seq draws to grow by n_new positions, per group (new
 * table entries, plus a copy when its partly filled last block is shared;
 * window blocks it lets go of first are not counted). Nothing for a closed
 * or invalid id. */
void cv_engine_seq_need(const cv_engine *e, int32_t seq, int32_t n_new, cv_mem_need *acc);
/* Adds one snapshot's blocks to *acc. */
void cv_engine_snapshot_need(const cv_engine *e, cv_mem_need *acc);
/* Adds what releasing span s would return to the pools (its blocks whose
 * only reference is the holder's, its snapshot's) to *acc. */
void cv_engine_span_frees(const cv_engine *e, const cv_mem_span *s, cv_mem_need *acc);
/* Blocks missing, over every group, for the pools to give *need, counting
 * *more as free too (more may be NULL): 0 when it fits. */
int32_t cv_engine_mem_short(const cv_engine *e, const cv_mem_need *need, const cv_mem_need *more);

/* Block b of group g, for saving and restoring it: read copies its
 * block_bytes out, write copies them in (only while the caller holds the
 * block's only reference). The bytes are the block's pieces in (layer,
 * keys then values, head) order, whatever the pool's own layout. alloc
 * takes a free block for the caller (refs 1, content undefined; -1 when
 * the pool is empty), which a span then holds. refs: its references (0:
 * free or a bad id). */
void cv_engine_kv_block_read(const cv_engine *e, int32_t g, int32_t b, void *dst);
void cv_engine_kv_block_write(cv_engine *e, int32_t g, int32_t b, const void *src);
int32_t cv_engine_kv_alloc(cv_engine *e, int32_t g);
int32_t cv_engine_kv_refs(const cv_engine *e, int32_t g, int32_t b);

/* One forward call. Token i goes to sequence seq[i] at position pos[i].
 * Tokens of one sequence must come in order with consecutive positions
 * starting at that sequence's current length; sequences may interleave.
 * want[i] asks for the logits of row i (want == NULL: only the last token).
 * On success *logits points to n_want rows of n_vocab floats, in batch
 * order, owned by the engine and valid until the next call, and each
 * sequence has grown by its tokens. On failure (CV_EINVAL: a bad token id,
 * sequence or position, too many tokens or rows; CV_ELIMIT: the KV pool or
 * a sequence's context is full) nothing has changed. */
typedef struct cv_batch {
    int32_t n_tokens;
    const int32_t *token;
    const int32_t *seq;
    const int32_t *pos;
    const bool *want;
} cv_batch;

int cv_engine_forward(cv_engine *e, const cv_batch *b, const float **logits, int32_t *n_logits, cv_err *err);
/* Forward calls from now on (on) also keep the final hidden state of every
 * row of their batch: what embeddings pool. Off by default. */
void cv_engine_keep_hidden(cv_engine *e, bool on);
/* After a forward call made with cv_engine_keep_hidden on: the final hidden
 * state of each row of its batch, in batch order ([n_tokens][n_embd], the
 * output norm applied: what the output matrix multiplies into logits),
 * owned by the engine and valid until the next call. */
const float *cv_engine_hidden(const cv_engine *e);

/* Statistics of the last forward call, for `corvid bench` and profiling. */
typedef struct cv_engine_stats {
    double t_total;     /* seconds */
    double t_matmul;    /* in cv_matmul calls */
    double t_attention;
    double t_other;     /* norms, RoPE, cache writes, embedding */
    int32_t n_tokens;
    int32_t n_pool_runs; /* compute-pool launches */
    /* What the call's matmuls read (counted whether profiling or not): the
     * bytes of every matrix it multiplied by, an MoE layer's experts only
     * where some token was routed to them, and those (layer, expert)
     * pairs' count. A decode step of one token reads the model's
     * active_bytes; a batch reads the union of its tokens' experts. */
    double weight_bytes;
    int32_t experts_read;
} cv_engine_stats;

/* Turns per-phase timing on (off by default: it costs clock reads). The
 * byte and expert counts are kept either way. */
void cv_engine_set_profiling(cv_engine *e, bool on);
const cv_engine_stats *cv_engine_last_stats(const cv_engine *e);

#endif
