/* server — the face of the server layer: corvid's HTTP front door. It speaks
 * three wire APIs (OpenAI chat/completions/responses, Anthropic messages) plus
 * models, health and metrics over libmicrohttpd, and translates every request
 * into ONE neutral request (cv_chat_request, chat/chat_request.h) that goes
 * down the one data path (DESIGN.md): render → tokenize → scheduler →
 * detokenize → stop strings → output parser → neutral events → the wire's
 * SSE or JSON. Constrained decoding has its own face, sched/constrain.h.
 *
 * The model is reached through cv_server_backend, a small table of functions:
 * the server never learns how the prompt is rendered or the tokens produced.
 * The production backend wires the chat template, tokenizer and cv_sched; the
 * tests build others (a byte-level model whose generated text is scripted).
 *
 * Threads: one thread per HTTP connection (libmicrohttpd's
 * MHD_USE_THREAD_PER_CONNECTION). A streaming response blocks in its own
 * thread on the request's event queue, wakes at least every keep-alive
 * interval to send an SSE comment / Anthropic ping, and polls its socket for a
 * hang-up so a client that goes away cancels its generation at the next step.
 * Internal select with a pool would make every stream share a few threads and
 * need suspend/resume plus a wake-up per event; a thread per connection keeps
 * each stream a straight loop, and agent traffic is tens of connections. */
#ifndef CV_SERVER_H
#define CV_SERVER_H

#include "base/base.h"
#include "chat/chat.h"
#include "engine/engine.h"
#include "sched/sched.h"

/* ---- the model behind the server ---- */

/* Load of the scheduler, for /health, /health/ready and /metrics. */
typedef struct cv_server_load {
    int32_t queue_depth;  /* submitted, not yet running */
    int32_t running;      /* sequences being generated */
    int64_t kv_blocks_used;
    int64_t kv_blocks_free;
} cv_server_load;

/* The functions the server calls to serve one model. Every function is
 * called from HTTP threads, concurrently; implementations are thread-safe.
 * A NULL parser_create means generated text is all content. */
typedef struct cv_server_backend {
    void *ctx;
    const char *model_id;  /* the served model name (--served-model-name) */
    int32_t n_ctx;         /* context length in tokens */
    int64_t created;       /* unix time shown by /v1/models */
    /* What /v1/models says of the model (NULL / 0: not known). */
    const char *arch;            /* general.architecture */
    int64_t n_params, n_params_active; /* active: what one token multiplies by (MoE) */
    int32_t n_expert, n_expert_used;   /* 0: dense */
    int64_t kv_bytes_per_token;  /* KV cache bytes a position keeps (every attention layer's; an MLA model's
                                    latent rows) */
    /* True once the model is loaded and warmed (/health/ready). */
    bool (*ready)(void *ctx);
    /* Renders a conversation with the model's chat template and tokenizes it.
     * *ids is malloc'd (caller frees). CV_EINVAL names what the template
     * rejected. opener (may be NULL) receives the reasoning opener the
     * rendered prompt leaves open for the model to continue (e.g. "<think>\n",
     * cv_chat_parse_prompt_opener): empty when generation starts outside
     * reasoning. The server hands it to parser_create and submit. */
    int (*encode_chat)(void *ctx, const cv_chat_request *req, int32_t **ids, int32_t *n, cv_buf *opener,
                       cv_err *err);
    /* Tokenizes plain text (legacy completions), special tokens parsed. */
    int (*encode_text)(void *ctx, cv_str text, int32_t **ids, int32_t *n, cv_err *err);
    /* Streaming detokenizer: feed appends the bytes that token completes
     * (never a split UTF-8 sequence); flush appends what is held back. */
    void *(*detok_create)(void *ctx);
    void (*detok_feed)(void *d, int32_t token, cv_buf *out);
    void (*detok_flush)(void *d, cv_buf *out);
    void (*detok_destroy)(void *d);
    /* True for end-of-generation tokens (EOS, EOT, <|im_end|>): they end the
     * text and are never detokenized into it. NULL: none are special. */
    bool (*is_eog)(void *ctx, int32_t token);
    /* The text of one token alone (logprobs). */
    void (*token_text)(void *ctx, int32_t token, cv_buf *out);
    /* Output parser for this request (tools, thinking as rendered; opener as
     * encode_chat gave it): emits content / reasoning / tool-call events in
     * generation order. */
    void *(*parser_create)(void *ctx, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn, void *ud);
    void (*parser_feed)(void *p, cv_str text);
    void (*parser_finish)(void *p);
    void (*parser_destroy)(void *p);
    /* The scheduler (sched.h semantics). The backend adds its own end-of-
     * generation tokens when p->n_stop_tokens is 0. req is the request the
     * prompt came from and opener what encode_chat said of its end (empty
     * for raw prompts): constrained decoding (response_format, a required
     * tool call) needs both to build a grammar. */
    int (*submit)(void *ctx, const cv_chat_request *req, cv_str opener, const cv_sched_params *p,
                  cv_sched_req **out, cv_err *err);
    int (*next)(cv_sched_req *r, int timeout_ms, cv_sched_event *ev);
    void (*cancel)(cv_sched_req *r);
    void (*release)(cv_sched_req *r);
    void (*load)(void *ctx, cv_server_load *out);
    /* Optional (NULL: not available). status gives the body of GET
     * /v1/status (running and waiting requests, prefix-cache and KV
     * figures: cv_sched_status), which the caller decrefs; metrics appends
     * Prometheus lines to /metrics (cv_sched_metrics). */
    json_t *(*status)(void *ctx);
    void (*metrics)(void *ctx, cv_buf *out);
} cv_server_backend;

/* The production backend (backend.c): a GGUF model with its engine,
 * scheduler thread, tokenizer and chat template. */
typedef struct cv_server_backend_opts {
    const char *model_path;
    const char *served_name; /* NULL: the file name without .gguf */
    int32_t n_ctx;           /* 0: the model's trained context, at most CV_SERVE_DEFAULT_CTX and the KV pool */
    int32_t n_parallel;      /* sequences at once; 0: 1 */
    int32_t n_threads;       /* compute threads; 0: every CPU */
    uint32_t kv_type;        /* KV cache: CV_GGML_F32 (0: exact), CV_GGML_F16 (half the memory and reads) or
                              * CV_GGML_Q8_0 (about a quarter) */
    /* The scheduler (sched.h): */
    int64_t kv_bytes;        /* KV memory: > 0 these bytes (at least the context); 0: n_ctx x n_parallel
                              * positions; < 0: cv_sched_default_kv_bytes (capped at CV_SERVE_MAX_KV_TOKENS) */
    int32_t batch_tokens;    /* tokens per scheduler step; 0: the scheduler's default */
    int32_t draft_tokens;    /* speculative decoding: drafted tokens per step at most; 0: the scheduler's
                                default; < 0: off */
    int32_t max_queue;       /* requests waiting at most; 0: CV_MAX_SCHED_QUEUE */
    bool no_prefix_cache;    /* compute every prompt in full */
    const char *cache_dir;   /* where the prefix cache is saved at close and read at open; NULL or "": nowhere */
    int64_t cache_max_bytes; /* the cache file's size at most; 0: the scheduler's default */
    bool grammar_lazy;       /* tool_choice auto: lazy tool-call grammar (cv_constrain_opts.lazy) */
} cv_server_backend_opts;

/* Opens the model and starts its scheduler (with a cache_dir, the saved
 * prefix cache is read back first). Errors name the file and what is wrong
 * (CV_ECORRUPT, CV_EUNSUPPORTED, CV_ENOTFOUND, ...; CV_EINVAL when kv_bytes
 * holds fewer positions than the context). Close with
 * cv_server_backend_close after the server is destroyed: it saves the prefix
 * cache to cache_dir. */
int cv_server_backend_open(const cv_server_backend_opts *o, cv_server_backend **out, cv_err *err);
void cv_server_backend_close(cv_server_backend *be);

/* The production backend's output parser (cv_chat_parse in syntax f, NULL:
 * the default; either way with output detection on, so a call in another
 * known syntax is still recovered; over req's tools, tool_choice, parallel_tool_calls and
 * response_format, starting inside reasoning when opener is non-empty),
 * for backends that share it (the tests' scripted backend). Tool-call
 * events carry no id: each wire makes its own (call_ / toolu_ / fc_). The
 * four functions fit parser_create .. parser_destroy above; create returns
 * NULL only when the parser cannot start (then all text is content). */
void *cv_server_parser_create(const cv_tc_format *f, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn,
                              void *ud);
void cv_server_parser_feed(void *p, cv_str text);
void cv_server_parser_finish(void *p);
void cv_server_parser_destroy(void *p);

/* ---- the server ---- */

typedef struct cv_server_config {
    const char *host;          /* default "127.0.0.1" */
    int port;                  /* default 8000; 0 picks a free port */
    const char *api_key;       /* NULL or "": no auth */
    const char *cors_origins;  /* comma-separated origins or "*"; NULL: no CORS */
    size_t max_body_bytes;     /* default CV_MAX_HTTP_BODY */
    int keepalive_ms;          /* SSE keep-alive interval; default CV_SSE_KEEPALIVE_MS */
    int idle_timeout_s;        /* idle connection timeout; default CV_HTTP_IDLE_TIMEOUT_S */
    int body_timeout_ms;       /* whole-body upload deadline (408); default CV_HTTP_BODY_TIMEOUT_MS */
    int response_store_size;   /* /v1/responses kept for previous_response_id; default CV_RESPONSE_STORE_DEFAULT */
    bool open_metrics;         /* GET /metrics without the API key (Prometheus, gateways' endpoint pickers) */
} cv_server_config;

typedef struct cv_server cv_server;

/* Starts listening (threads start at once). The backend must outlive the
 * server. Fails with CV_EIO naming host:port when the bind fails. */
int cv_server_start(const cv_server_config *cfg, const cv_server_backend *be, cv_server **out, cv_err *err);
/* The bound port (useful with port 0). */
int cv_server_port(const cv_server *s);
/* Drains and stops: requests for the model get 503 + Retry-After (probes,
 * metrics and listings still answer; /health/ready says 503), requests
 * admitted before get grace_ms to finish, those still running then are cut
 * and end with their wire's error (never a normal finish: the client must
 * know the answer is partial), then the listener closes and every connection
 * thread is joined. Safe to call once. */
void cv_server_stop(cv_server *s, int grace_ms);
/* Stops (if needed) and frees. */
void cv_server_destroy(cv_server *s);

/* Starts a server and serves until SIGINT or SIGTERM, then drains it
 * (cv_server_stop with grace_ms) and returns 0. on_listen (may be
 * NULL) is called once listening, with the bound port. Call from the main
 * thread before creating other threads: it blocks both signals for the
 * threads it starts. */
int cv_server_run(const cv_server_config *cfg, const cv_server_backend *be, int grace_ms,
                  void (*on_listen)(void *ud, int port), void *ud, cv_err *err);

/* Number of generations cancelled because their client disconnected (tests
 * and metrics). */
int64_t cv_server_n_client_cancels(const cv_server *s);

#endif
