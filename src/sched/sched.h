/* sched — the face of the scheduler: the one way requests reach the engine.
 * A caller (an HTTP thread) submits token ids with sampling parameters and
 * limits, then pulls events from the request's own queue until it is done.
 * The engine thread runs steps; each step serves many requests at once
 * (continuous batching: the next token of every running sequence plus
 * prefill chunks of new ones under a token budget) and reuses cached
 * prefixes (a radix tree over KV blocks shared by every request, saved to a
 * cache file at shutdown and loaded at start). Cancellation from any thread
 * takes effect at the next step.
 *
 * Exactness: a request's tokens do not depend on what else runs with it
 * (batching, prefix hits, preemption and recompute, a restored cache file):
 * the engine computes each row independently of the batch, and the
 * scheduler keeps each request's sampler (its RNG) for its whole life.
 *
 * Text is not this layer's business: stop strings, detokenization and
 * tool-call parsing happen above, on the events' token ids.
 *
 * Embeddings go through the same steps: an embedding request's prompt is
 * computed in prefill chunks beside everyone else's tokens, its hidden
 * states are pooled as it goes, and it leaves with one vector and nothing
 * in the KV cache. Several models in one process (a server with several
 * loaded) each have a scheduler; a cv_sched_share divides the compute
 * threads among those with work, step by step.
 *
 * Files: sched.c (lifecycle, submit and events, statistics and status),
 * sched_step.c (one step: admission, batch, forward, sampling, pooling),
 * radix.c (the prefix tree), draft.c (prompt-lookup drafts), cache_file.c
 * (the file the tree is saved to), share.c (threads shared by several
 * schedulers); their shared state is in sched_int.h. */
#ifndef CV_SCHED_H
#define CV_SCHED_H

#include "base/base.h"
#include "engine/engine.h"

typedef struct cv_sched cv_sched;
typedef struct cv_sched_req cv_sched_req; /* one submitted request */

/* A per-request sampling hook: the slot constrained decoding plugs into
 * (sched/constrain.h, over src/grammar/). choose runs on the engine thread for every token of its
 * request, with the raw logits [n_vocab] of that request's row (not to be
 * modified) and the request's own sampler; it picks the token (typically by
 * masking a copy of the logits and calling cv_sampler_sample on it) and
 * keeps its own state in step with the tokens it returns. The scheduler
 * then feeds the token to cv_sampler_accept as usual. A nonzero return
 * fails the request with err. destroy (may be NULL) runs once, before
 * the request's final event is queued (so after reading DONE/ERROR the
 * caller knows it ran). Without a hook: cv_sampler_sample on the raw
 * logits. */
typedef struct cv_sched_hook {
    int (*choose)(void *ud, cv_sampler *smp, const float *logits, int32_t n_vocab, int32_t *token, cv_err *err);
    void (*destroy)(void *ud);
} cv_sched_hook;

/* How an embedding request turns its prompt's hidden states (the final
 * norm's output at each position, cv_engine_hidden) into one vector; the
 * values are GGUF's {arch}.pooling_type (llama.cpp's numbering). */
typedef enum cv_pooling {
    CV_POOL_NONE = 0, /* not an embedding: a generation request */
    CV_POOL_MEAN = 1, /* the mean over every position */
    CV_POOL_CLS = 2,  /* the first position's */
    CV_POOL_LAST = 3, /* the last position's (decoder embedders: Qwen3-Embedding) */
} cv_pooling;

typedef struct cv_sched_params {
    const int32_t *prompt; /* token ids, copied at submit */
    int32_t n_prompt;
    int32_t max_tokens;    /* generated tokens at most; > 0 (0 for an embedding) */
    /* Not NONE: an embedding request. Its prompt is computed and its hidden
     * states pooled and scaled to unit length (L2) into one
     * CV_SCHED_EMBEDDING event, then DONE (CV_FINISH_STOP); nothing is
     * sampled. It neither reads nor leaves anything in the prefix cache
     * (its KV goes with it), and the fields below it do not apply. */
    cv_pooling pooling;
    cv_sample_params sample;
    const int32_t *stop_tokens; /* generation ends after emitting one of these (EOS, EOT, ...) */
    int32_t n_stop_tokens;
    int32_t n_top_logprobs; /* 0: none; else the top-N alternatives per token (<= CV_MAX_TOP_LOGPROBS) */
    bool logprobs;          /* report the chosen token's logprob */
    const cv_sched_hook *hook; /* NULL: plain sampling; the table must outlive the request */
    void *hook_ud;             /* owned by the request once submit succeeds (hook->destroy frees it) */
} cv_sched_params;

typedef enum cv_sched_event_type {
    CV_SCHED_PROMPT_DONE, /* prefill finished: n_prompt, n_cached are final */
    CV_SCHED_TOKEN,       /* one generated token */
    CV_SCHED_EMBEDDING,   /* an embedding request's vector (embedding, n_embd) */
    CV_SCHED_DONE,        /* finished; finish says why; no more events */
    CV_SCHED_ERROR,       /* failed; err says why; no more events */
} cv_sched_event_type;

typedef enum cv_finish_reason {
    CV_FINISH_NONE,
    CV_FINISH_STOP,     /* a stop token was generated */
    CV_FINISH_LENGTH,   /* max_tokens reached */
    CV_FINISH_CANCELED, /* cv_sched_cancel */
    CV_FINISH_CONTEXT,  /* the context window is full */
} cv_finish_reason;

#ifndef CV_MAX_TOP_LOGPROBS
#define CV_MAX_TOP_LOGPROBS 20
#endif

typedef struct cv_sched_event {
    cv_sched_event_type type;
    int32_t token;        /* TOKEN */
    float logprob;        /* TOKEN, when asked */
    int32_t n_top;
    int32_t top_tokens[CV_MAX_TOP_LOGPROBS];
    float top_logprobs[CV_MAX_TOP_LOGPROBS];
    cv_finish_reason finish; /* DONE */
    int32_t n_prompt;     /* prompt tokens */
    int32_t n_cached;     /* prompt tokens served from the prefix cache */
    int32_t n_generated;  /* tokens generated so far */
    const float *embedding; /* EMBEDDING: [n_embd] of unit length, the request's own until it is released */
    int32_t n_embd;
    cv_err err;           /* ERROR */
} cv_sched_event;

/* ---- several schedulers on one machine ----
 * A share divides n_threads compute threads among the schedulers that use
 * it (one per model a server has loaded): before each step a scheduler
 * with work computes with n_threads / k of them, k being the schedulers
 * with work at that moment (the earliest to join get the remainder, one
 * each; never fewer than one), through its engine's stream
 * (cv_engine_set_threads); one without work takes none. Two models decoding
 * at once each compute on their part, concurrently, and one model's long
 * prefill slows another's decode to its part of the machine instead of
 * stalling it; a model alone gets every thread. The parts change between
 * steps, and a step is at most batch_tokens tokens. Thread-safe. */
typedef struct cv_sched_share cv_sched_share;

cv_sched_share *cv_sched_share_create(int32_t n_threads); /* <= 0: every CPU */
/* After every scheduler that used it is destroyed. */
void cv_sched_share_destroy(cv_sched_share *sh);
int32_t cv_sched_share_threads(const cv_sched_share *sh);
/* Schedulers with work now. */
int32_t cv_sched_share_busy(cv_sched_share *sh);
/* Called by an engine thread (who is its scheduler) before a step: joins
 * the busy ones if it was not among them, and returns the threads its step
 * computes with. */
int32_t cv_sched_share_enter(cv_sched_share *sh, const void *who);
/* ... and when it runs out of work. */
void cv_sched_share_leave(cv_sched_share *sh, const void *who);

/* ---- lifecycle ---- */

typedef struct cv_sched_config {
    int32_t queue_max; /* requests waiting for the engine at most; <= 0: CV_MAX_SCHED_QUEUE */
    uint64_t seed;     /* seeds the seeds drawn for requests without one; 0: from the clock */
    /* Zero means the default for each of these: */
    int32_t batch_tokens;   /* tokens per step (decode + prefill chunks); <= 0: CV_SCHED_BATCH_TOKENS_DEFAULT,
                             * clamped to the engine's n_batch. On a model whose bits depend on how a
                             * sequence is split into calls (cv_mem_info.split_align > 1: a hybrid) one
                             * prefill chunk a step may run up to split_align past it to end on the
                             * grid (within n_batch) */
    bool no_prefix_cache;   /* no lookups, no tree: every prompt is computed (benchmarks, tests) */
    /* The cache file (cv_sched_cache_file_name inside it): read at create
     * when present and valid, written at destroy. NULL or "": none. */
    const char *cache_dir;
    int64_t cache_max_bytes; /* the file's size at most; <= 0: CV_SCHED_CACHE_FILE_DEFAULT */
    /* Speculative decoding (prompt lookup): tokens drafted per step for a
     * decoding sequence at most; 0: CV_SCHED_DRAFT_DEFAULT; < 0: off.
     * Clamped to CV_SCHED_DRAFT_MAX. Never changes a token: every token is
     * still chosen by the request's own sampler (or hook) from the logits
     * of its position, and a draft only saves the steps its accepted
     * tokens would have taken. */
    int32_t draft_tokens;
    cv_sched_share *share; /* NULL: the engine's threads are its own */
} cv_sched_config;

/* Starts the engine thread over e, which the scheduler then drives alone
 * until cv_sched_destroy (e must outlive it). cfg may be NULL. With a
 * cache_dir, loads the cache file first: a missing file is silent; a
 * corrupt, truncated or foreign one (another model, KV format, ISA or
 * numerics) is reported in one warning line and ignored; neither fails the
 * create. Fails only when the thread cannot start (CV_EIO). */
int cv_sched_create(cv_engine *e, const cv_sched_config *cfg, cv_sched **out, cv_err *err);
/* Cancels every request (each gets DONE with CV_FINISH_CANCELED), stops and
 * joins the engine thread, writes the cache file when configured (atomic:
 * a temp file renamed over the old one; a failure is a warning line), and
 * frees the tree. Requests still held must still be released. */
void cv_sched_destroy(cv_sched *s);

/* ---- requests ---- */

/* Submits a request. Fails at once (CV_EINVAL) when the prompt can never fit
 * (prompt + max_tokens > context), when it is empty, names a token outside
 * the vocabulary or has bad sampling parameters (cv_sampler_create's
 * rules), when an embedding asks for tokens (max_tokens must be 0) or a
 * pooling the layer does not know, or CV_EBUSY when the queue is full. The
 * request must be released with cv_sched_release after its last event (or
 * earlier, which cancels it). Thread-safe. */
int cv_sched_submit(cv_sched *s, const cv_sched_params *p, cv_sched_req **out, cv_err *err);
/* Waits up to timeout_ms (< 0: forever) for the next event. Returns 0 with
 * *ev filled, or CV_EBUSY when the time ran out with no event (callers use
 * this to send keep-alives). Called by one thread per request. */
int cv_sched_next(cv_sched_req *r, int timeout_ms, cv_sched_event *ev);
/* Asks the engine thread to stop the request at its next step; a DONE event
 * with CV_FINISH_CANCELED follows. Thread-safe, idempotent. */
void cv_sched_cancel(cv_sched_req *r);
/* Drops the caller's reference (cancelling it if still running). */
void cv_sched_release(cv_sched_req *r);

/* ---- statistics and status ---- */

/* Load and totals, for health checks, metrics and /v1/status. */
typedef struct cv_sched_stats {
    int32_t queue_depth;      /* submitted, not yet running */
    int32_t running;          /* requests being generated */
    int64_t kv_blocks_used;   /* not free: running sequences' and the prefix cache's (tree_blocks of them) */
    int64_t kv_blocks_free;
    int64_t n_requests;       /* finished since creation (any reason) */
    int64_t n_tokens_prompt;  /* prompt tokens computed since creation (recompute after preemption included) */
    int64_t n_tokens_generated;
    int64_t kv_blocks;        /* the engine's pool */
    int64_t tree_blocks;      /* blocks held by the prefix tree (shared with running sequences or not; its
                               * snapshots' blocks included) */
    int64_t steps;            /* forward calls */
    int64_t submitted, busy_refusals, preemptions;
    int64_t prompt_tokens;    /* prompt tokens of admitted requests (first admission) */
    int64_t cached_tokens;    /* of those, served from the prefix cache */
    int64_t lookups, hits;    /* admissions that searched the tree / found a block */
    int64_t evictions;        /* tree blocks evicted (LRU) */
    int64_t file_blocks_loaded;
    /* Speculative decoding: */
    int64_t draft_tokens;     /* drafted tokens verified */
    int64_t draft_accepted;   /* of those, the ones the sampler chose (each saved a step) */
    int64_t draft_declined;   /* drafted but not verified: too deep in the context for their chance */
    /* What drafts are weighed by (seconds; 0 until measured): a decode step
     * besides attention, and attention per position a row attends. */
    double step_base_s, att_per_pos_s;
    /* Sequence memory (zero on a model without recurrent state): */
    int64_t state_bytes;      /* one sequence's recurrent state */
    int64_t snapshots;        /* snapshots of it held by the prefix tree */
    int64_t snapshot_blocks;  /* pool blocks they take (a part of tree_blocks) */
    int64_t snapshots_taken;  /* since creation */
    int64_t snapshot_hits;    /* admissions that resumed from a snapshot */
    int64_t draft_recomputed; /* positions recomputed after a partly taken draft (a state that cut back to
                               * its checkpoint) */
    /* The KV layer groups (full; window), each with its pool's counts. */
    int32_t n_kv_groups;
    cv_mem_group_info kv_groups[CV_MEM_MAX_GROUPS];
} cv_sched_stats;

/* A consistent snapshot: the figures settle before a request's final event
 * is queued, so after reading DONE the caller sees them include it.
 * Thread-safe. */
void cv_sched_get_stats(cv_sched *s, cv_sched_stats *out);
/* The body of GET /v1/status: {"running": [...], "waiting": [...],
 * "cache": {...}, "kv": {..., "bytes_used", "groups": [{window, layers,
 * blocks, used, bytes_used}]}, "totals": {...}}; each request shows its
 * id, phase (waiting | prefill | decode), prompt, cached, computed and
 * generated tokens, tokens/s since its first token and age. Caller decrefs.
 * Thread-safe. */
json_t *cv_sched_status(cv_sched *s);
/* Appends the statistics of n schedulers in Prometheus text format
 * (corvid_sched_*, corvid_prefix_cache_*, corvid_spec_*, ...): each metric
 * once, with one sample per scheduler carrying labels[i] (a `k="v",...`
 * list without braces, escaped as the format wants: the server's
 * model="NAME"); labels NULL: n is 1 and the samples have none. */
void cv_sched_metrics(const cv_sched_stats *const *st, const char *const *labels, int n, cv_buf *out);

/* ---- sizing and the cache file ---- */

/* KV positions that kv_bytes of memory hold for model m with KV element
 * type kv_type (CV_GGML_F32 / F16 / Q8_0), rounded down to whole blocks. */
int64_t cv_sched_kv_tokens_for_bytes(const cv_model *m, uint32_t kv_type, int64_t kv_bytes);
/* The default KV memory: half of what /proc/meminfo calls available after
 * the weights (which are mapped, so counted as available until touched),
 * at least 64 MiB. */
int64_t cv_sched_default_kv_bytes(const cv_model *m);
/* $XDG_CACHE_HOME/corvid, else $HOME/.cache/corvid; CV_ENOTFOUND when
 * neither variable is set. */
int cv_sched_default_cache_dir(char *out, size_t n, cv_err *err);
/* The cache file's name for this engine's model and KV format:
 * "kv-<16 hex digits>.cvkv" (a hash of the model file, the KV format and
 * the ISA). */
void cv_sched_cache_file_name(cv_engine *e, char *out, size_t n);

#endif
