/* engine — the face of the engine layer: batched forward passes over many
 * sequences at once, the paged KV cache, and sampling.
 *
 * One forward call takes a batch of tokens that belong to several sequences
 * at different positions (the shape continuous batching needs) and returns
 * logits only for the rows asked for. Each sequence's keys and values live
 * in fixed-size blocks of CV_KV_BLOCK positions drawn from one pool; a
 * sequence holds a block table. Blocks are reference counted, so a fork (and
 * later a prefix cache) shares them; a write into a shared block copies it
 * first. Attention walks a sequence's blocks with an online softmax.
 *
 * Threads: a cv_engine is driven by one thread at a time (the engine
 * thread); it runs its matmuls and attention on its own compute pool. The
 * sampler is per sequence and single-threaded. The cv_model it runs is
 * shared and read-only. */
#ifndef CV_ENGINE_H
#define CV_ENGINE_H

#include "base/base.h"
#include "model/model.h"

/* ---- sampling ---- */

typedef struct cv_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
} cv_logit_bias;

/* How the next token is chosen. Zero-initialised means greedy with no
 * penalties. Order of application (as the common servers do): logit bias,
 * repetition/presence/frequency penalties over the last penalty_last_n
 * tokens, then greedy if temperature <= 0, else top-k, top-p, min-p,
 * temperature, and a draw from the seeded RNG. Identical parameters and seed
 * give identical tokens. */
typedef struct cv_sample_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1 or <= 0: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1 or 0: off (llama.cpp-style divide/multiply) */
    float presence_penalty;  /* OpenAI-style, 0: off */
    float frequency_penalty; /* OpenAI-style, 0: off */
    int32_t penalty_last_n;  /* window for penalties; <= 0: whole sequence */
    uint64_t seed;           /* used when has_seed; otherwise the scheduler draws one */
    bool has_seed;
    int32_t n_logit_bias;
    const cv_logit_bias *logit_bias;
} cv_sample_params;

/* A sampler holds one sequence's sampling state: its parameters (logit
 * bias copied), its RNG, the penalty window, and scratch sized once for the
 * vocabulary, so sampling allocates nothing. */
typedef struct cv_sampler cv_sampler;

/* Validates p against the vocabulary (CV_EINVAL naming the field: a NaN or
 * negative temperature is fine — it means greedy — but a NaN top_p, a
 * min_p above 1, a negative repeat_penalty, presence/frequency outside
 * -2..2, a bias token outside 0..n_vocab-1 or a NaN/+inf bias are not;
 * CV_ELIMIT beyond CV_MAX_LOGIT_BIAS entries). Seeds the RNG with p->seed
 * (the caller draws one when !has_seed). Caller destroys *out. */
int cv_sampler_create(const cv_sample_params *p, int32_t n_vocab, cv_sampler **out, cv_err *err);
void cv_sampler_destroy(cv_sampler *s);
/* Adds a token to the penalty history (callers feed the prompt too, so a
 * repetition penalty sees it, as llama.cpp's server does). */
void cv_sampler_accept(cv_sampler *s, int32_t token);
/* Chooses the next token from logits [n_vocab] (not modified). */
int32_t cv_sampler_sample(cv_sampler *s, const float *logits);

/* Log-probabilities of the model's own distribution (log-softmax of the raw
 * logits, before bias, penalties and temperature, as OpenAI reports them):
 * *lp_token for `token`, and the n_top best tokens (ties: lower id first)
 * in top_ids/top_lps. n_top may be 0. */
void cv_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top, float *lp_token,
                 int32_t *top_ids, float *top_lps);
/* argmax; the lowest id wins a tie (the reference files' convention). */
int32_t cv_argmax(const float *logits, int32_t n_vocab);

/* ---- engine ---- */

/* Positions per KV block. 16 keeps the waste of a sequence's last block
 * small and lets a prefix cache share at a fine grain (vLLM's default). */
#define CV_KV_BLOCK 16

typedef struct cv_engine_params {
    int32_t n_threads;   /* compute threads; <= 0: every CPU */
    int32_t n_ctx;       /* positions one sequence may hold; <= 0: min(training context, 4096) */
    int32_t n_seq_max;   /* sequences open at once; <= 0: 1 */
    int32_t n_kv_tokens; /* KV capacity shared by all sequences; <= 0: n_ctx (rounded up to whole
                            blocks) * n_seq_max */
    int32_t n_batch;     /* tokens per forward call at most; <= 0: 512 */
    int32_t n_logits;    /* logit rows per forward call at most; <= 0: max(n_seq_max, 8) */
    uint32_t kv_type;    /* CV_GGML_F32 (0, default: exact), CV_GGML_F16 (half the memory) or
                            CV_GGML_Q8_0 (int8 with an f16 factor per 32 dimensions: 0.53x f16's at head
                            sizes 32-128) */
} cv_engine_params;

/* Bytes one KV block (CV_KV_BLOCK positions, every layer) of model m takes
 * in a cache of type kv_type; "f32", "f16" or "q8_0" names the type. */
size_t cv_engine_kv_block_bytes(const cv_model *m, uint32_t kv_type);
const char *cv_engine_kv_type_name(uint32_t kv_type);

typedef struct cv_engine cv_engine;

/* Creates an engine over m (which must outlive it): validates the
 * parameters against the model and base/limits.h (CV_EINVAL / CV_ELIMIT
 * naming the field), allocates the KV pool and every scratch buffer once
 * (forward calls allocate nothing of their own), and starts the compute
 * pool. params may be NULL. Caller destroys *out. */
int cv_engine_create(const cv_model *m, const cv_engine_params *params, cv_engine **out, cv_err *err);
void cv_engine_destroy(cv_engine *e);

const cv_model *cv_engine_model(const cv_engine *e);
/* The parameters in effect (defaults resolved). */
const cv_engine_params *cv_engine_params_get(const cv_engine *e);
cv_pool *cv_engine_pool(cv_engine *e);

/* Opens an empty sequence and gives its id (0 <= id < n_seq_max).
 * CV_EBUSY when every slot is open. */
int cv_engine_seq_open(cv_engine *e, int32_t *seq, cv_err *err);
/* Releases the sequence's blocks (shared ones stay with their other
 * owners) and frees the slot. Closing a closed or invalid id is a no-op. */
void cv_engine_seq_close(cv_engine *e, int32_t seq);
/* Positions the sequence holds (the next token goes at this position). */
int32_t cv_engine_seq_len(const cv_engine *e, int32_t seq);
/* Forgets positions >= len (rewind: a rejected draft, an edited prompt).
 * len > current length is clamped. A hybrid model's sequence (recurrent
 * layers: cv_hparams.n_recurrent > 0) carries a state that sums every
 * position and can only go back to 0: any other shorter length is logged
 * as an error and leaves the sequence refused by cv_engine_forward
 * (CV_EUNSUPPORTED) until it is closed or truncated to 0. */
void cv_engine_seq_truncate(cv_engine *e, int32_t seq, int32_t len);
/* Opens a new sequence that shares every block of src (no copy; a later
 * write into a shared block copies that block first) and a copy of its
 * recurrent state, if the model has one. CV_EBUSY when no slot is free. */
int cv_engine_seq_fork(cv_engine *e, int32_t src, int32_t *dst, cv_err *err);
/* KV blocks free in the pool (for admission control). */
int32_t cv_engine_kv_free_blocks(const cv_engine *e);

/* ---- KV blocks held outside sequences (added for the scheduler's prefix
 * cache and its cache file, issue 7) ----
 * A block's content depends only on the tokens at and before its positions
 * (the forward pass is row-for-row independent of what else is in the
 * batch), so a block computed for one sequence serves every sequence with
 * the same prefix. Holders other than sequences (the prefix cache) take
 * references of their own with cv_engine_kv_ref; a block returns to the
 * pool when its last holder lets go. Block ids are 0..n_blocks-1. */

/* Blocks in the pool. */
int32_t cv_engine_kv_n_blocks(const cv_engine *e);
/* The block table of an open sequence, in position order: *n =
 * ceil(len / CV_KV_BLOCK) entries, valid until the sequence next changes.
 * NULL with *n = 0 for a closed or invalid id. */
const int32_t *cv_engine_seq_blocks(const cv_engine *e, int32_t seq, int32_t *n);
/* Blocks seq must draw from the pool to grow by n_new positions (new table
 * entries, plus a copy when its partly filled last block is shared). */
int32_t cv_engine_seq_blocks_needed(const cv_engine *e, int32_t seq, int32_t n_new);
/* Makes blocks[0..n) the table of seq, which must be open and empty, with
 * length len ((n - 1) * CV_KV_BLOCK < len <= n * CV_KV_BLOCK, len <= n_ctx),
 * taking one reference on each block. A later write into a shared partly
 * used last block copies it first, as after a fork. CV_EINVAL (nothing
 * changed) for a sequence that is not open and empty, a free or invalid
 * block id, or a length that does not match n. On a hybrid model the
 * blocks alone do not make a usable sequence (its recurrent state for
 * those positions is missing): the sequence is refused by
 * cv_engine_forward as after a truncate it cannot follow. */
int cv_engine_seq_share(cv_engine *e, int32_t seq, const int32_t *blocks, int32_t n, int32_t len, cv_err *err);
/* References of block b (0: free). */
int32_t cv_engine_kv_refs(const cv_engine *e, int32_t b);
/* One more reference on a block in use / one less (the block returns to
 * the pool at 0). b must be in use: a bad id is a caller bug (assert). */
void cv_engine_kv_ref(cv_engine *e, int32_t b);
void cv_engine_kv_unref(cv_engine *e, int32_t b);
/* Takes a free block for the caller (refs 1, content undefined); -1 when
 * the pool is empty. */
int32_t cv_engine_kv_alloc(cv_engine *e);

/* What one block's bytes mean: blocks with equal formats (and equal
 * models) are interchangeable byte for byte. */
typedef struct cv_kv_format {
    int32_t n_layer, n_head_kv, head_dim;
    uint32_t type;          /* CV_GGML_F32, CV_GGML_F16 or CV_GGML_Q8_0 */
    int32_t block_positions; /* CV_KV_BLOCK */
    size_t block_bytes;
} cv_kv_format;

void cv_engine_kv_format(const cv_engine *e, cv_kv_format *out);
/* Block b's block_bytes, for saving and restoring it: read copies them
 * out, write copies them in (only while the caller holds the block's only
 * reference). The bytes are the block's pieces in (layer, keys then
 * values, head) order, whatever the pool's own layout. */
void cv_engine_kv_block_read(const cv_engine *e, int32_t b, void *dst);
void cv_engine_kv_block_write(cv_engine *e, int32_t b, const void *src);

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

/* Statistics of the last forward call, for `corvid bench` and profiling. */
typedef struct cv_engine_stats {
    double t_total;     /* seconds */
    double t_matmul;    /* in cv_matmul calls */
    double t_attention;
    double t_other;     /* norms, RoPE, cache writes, embedding */
    int32_t n_tokens;
    int32_t n_pool_runs; /* compute-pool launches */
} cv_engine_stats;

/* Turns per-phase timing on (off by default: it costs clock reads). */
void cv_engine_set_profiling(cv_engine *e, bool on);
const cv_engine_stats *cv_engine_last_stats(const cv_engine *e);

#endif
