/* sched — the face of the scheduler: the one way requests reach the engine.
 * A caller (an HTTP thread) submits token ids with sampling parameters and
 * limits, then pulls events from the request's own queue until it is done.
 * The engine thread runs steps; each step can serve many requests at once
 * (continuous batching) and reuse cached prefixes. Cancellation from any
 * thread takes effect at the next step.
 *
 * Text is not this layer's business: stop strings, detokenization and
 * tool-call parsing happen above, on the events' token ids.
 *
 * The first implementation (sched_serial.c) is serial: one engine thread
 * runs requests one at a time in arrival order; the continuous-batching
 * scheduler replaces its internals behind this same interface. */
#ifndef CV_SCHED_H
#define CV_SCHED_H

#include "base/base.h"
#include "engine/engine.h"

typedef struct cv_sched cv_sched;
typedef struct cv_sched_req cv_sched_req; /* one submitted request */

typedef struct cv_sched_params {
    const int32_t *prompt; /* token ids, copied at submit */
    int32_t n_prompt;
    int32_t max_tokens;    /* generated tokens at most; > 0 */
    cv_sample_params sample;
    const int32_t *stop_tokens; /* generation ends after emitting one of these (EOS, EOT, ...) */
    int32_t n_stop_tokens;
    int32_t n_top_logprobs; /* 0: none; else the top-N alternatives per token (<= CV_MAX_TOP_LOGPROBS) */
    bool logprobs;          /* report the chosen token's logprob */
} cv_sched_params;

typedef enum cv_sched_event_type {
    CV_SCHED_PROMPT_DONE, /* prefill finished: n_prompt, n_cached are final */
    CV_SCHED_TOKEN,       /* one generated token */
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
    cv_err err;           /* ERROR */
} cv_sched_event;

/* ---- lifecycle (added with the serial scheduler) ---- */

typedef struct cv_sched_config {
    int32_t queue_max; /* requests waiting for the engine at most; <= 0: CV_MAX_SCHED_QUEUE */
    uint64_t seed;     /* seeds the seeds drawn for requests without one; 0: from the clock */
} cv_sched_config;

/* Starts the engine thread over e, which the scheduler then drives alone
 * until cv_sched_destroy (e must outlive it). cfg may be NULL. */
int cv_sched_create(cv_engine *e, const cv_sched_config *cfg, cv_sched **out, cv_err *err);
/* Cancels every request (each gets DONE with CV_FINISH_CANCELED), stops and
 * joins the engine thread. Requests still held must still be released. */
void cv_sched_destroy(cv_sched *s);

/* Load, for health checks and metrics. Thread-safe; a snapshot (the KV
 * counts are as of the engine's last step). */
typedef struct cv_sched_stats {
    int32_t queue_depth;      /* submitted, not yet running */
    int32_t running;          /* requests being generated */
    int64_t kv_blocks_used;
    int64_t kv_blocks_free;
    int64_t n_requests;       /* finished since creation (any reason) */
    int64_t n_tokens_prompt;  /* prompt tokens computed since creation */
    int64_t n_tokens_generated;
} cv_sched_stats;

void cv_sched_get_stats(cv_sched *s, cv_sched_stats *out);

/* ---- requests ---- */

/* Submits a request. Fails at once (CV_EINVAL) when the prompt can never fit
 * (prompt + max_tokens > context), when it is empty, names a token outside
 * the vocabulary or has bad sampling parameters (cv_sampler_create's
 * rules), or CV_EBUSY when the queue is full. The
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

#endif
