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
 * A server serves one backend, or a cv_model_set: several models by name,
 * each opened on first use and closed when idle or to make room, picked per
 * request by its model field (names, aliases, glob routes, a default).
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
    int64_t mem_bytes;           /* what it holds: weights, KV pool and recurrent-state slots (--memory-limit
                                    counts this; 0: not known) */
    /* Embeddings (/v1/embeddings): an embedding model's pooling (sched.h,
     * cv_pooling; CV_POOL_NONE: not an embedding model), the length of its
     * vectors, and the shortest it may be cut to (Matryoshka-trained
     * models; 0: no cutting). submit takes a request with p->pooling set
     * (req NULL, opener empty). */
    int32_t pooling, n_embd, min_dims;
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
     * figures: cv_sched_status), which the caller decrefs; stats fills the
     * scheduler's figures, which /metrics renders for every loaded model
     * at once (cv_sched_metrics). */
    json_t *(*status)(void *ctx);
    void (*stats)(void *ctx, cv_sched_stats *out);
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
    cv_sched_share *share;   /* compute threads shared with other models' schedulers; NULL: its own */
    int32_t pooling;         /* a file without {arch}.pooling_type is an embedding model with this pooling
                                (cv_pooling; 0: it is not one); the file's key wins */
    int32_t min_dims;        /* an embedding model's vectors may be cut to this length at least (0: not at all) */
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

/* ---- several models ---- */

/* The models one server serves. Each is opened (cv_server_backend_open, or
 * the opener given) when a request first asks for it, while the others
 * keep serving, and closed (its prefix cache saved to its cache file, read
 * back at its next load) when it has been idle for keep_alive_ms, or when
 * a model not loaded is asked for and max_loaded or memory_limit leaves no
 * room: then the least recently used idle models go first, and when every
 * loaded model is busy the request waits for one to finish (requests for
 * the model being made room from wait too, so the two take turns). A load
 * that fails is the error of the requests that asked for it; the file is
 * tried again on the next. The loaded models' schedulers share n_threads
 * compute threads (sched.h, cv_sched_share). Thread-safe. */
typedef struct cv_model_set cv_model_set;

typedef struct cv_model_set_opts {
    cv_server_backend_opts backend; /* every model's options; model_path, served_name, share, pooling and
                                       min_dims are set per model */
    int32_t max_loaded;        /* models loaded at once at most; 0: no limit */
    int64_t memory_limit;      /* bytes the loaded models hold at most (cv_server_backend.mem_bytes:
                                  weights, KV pool, states); 0: no limit */
    int64_t keep_alive_ms;     /* a model idle this long is closed; 0: never */
    int32_t n_threads;         /* compute threads the models share; 0: every CPU */
    /* How a model is opened and closed; NULL: cv_server_backend_open and
     * cv_server_backend_close (tests give their own). */
    int (*open)(void *ud, const cv_server_backend_opts *o, cv_server_backend **out, cv_err *err);
    void (*close)(void *ud, cv_server_backend *be);
    void *open_ud;
} cv_model_set_opts;

/* One model to serve. */
typedef struct cv_model_spec {
    const char *name;              /* the id clients see and /v1/models lists */
    const char *path;              /* its GGUF */
    const char *const *aliases;    /* other names that reach it (n_aliases of them) */
    int n_aliases;
    int32_t pooling, min_dims;     /* cv_server_backend_opts' */
    bool preload;                  /* loaded by cv_model_set_preload (the models named at start) */
} cv_model_spec;

/* A set with no models yet. The memory an automatic KV pool takes per
 * model (backend.kv_bytes < 0) is, under a memory limit, half of what the
 * limit leaves after the model's weights, shared by the models that may be
 * loaded at once (max_loaded, else 2). */
int cv_model_set_create(const cv_model_set_opts *o, cv_model_set **out, cv_err *err);
/* Closes every model it opened (each saves its prefix cache), after the
 * servers over it are destroyed. */
void cv_model_set_destroy(cv_model_set *s);
/* Adds a model (strings copied). CV_EINVAL when its name or an alias is
 * taken already. */
int cv_model_set_add(cv_model_set *s, const cv_model_spec *m, cv_err *err);
/* Adds a backend already open (the caller closes it after the set is
 * destroyed): always loaded, never closed by the set; it counts towards
 * neither limit. */
int cv_model_set_add_backend(cv_model_set *s, const cv_server_backend *be, cv_err *err);
/* Requests whose model name matches the glob pattern (fnmatch, case
 * folded: `claude-*haiku*`) go to the model named model; routes are tried
 * in the order added, after exact names. CV_EINVAL when model is not in
 * the set. */
int cv_model_set_route(cv_model_set *s, const char *pattern, const char *model, cv_err *err);
/* key reaches model besides the server's own key (cv_server_config.api_key,
 * which reaches every model); with one, the server checks a request's key
 * once its body has named the model. CV_EINVAL when model is not in the
 * set. */
int cv_model_set_key(cv_model_set *s, const char *model, const char *key, cv_err *err);
/* Requests whose model name matches nothing go to this model (a single
 * model's set: that model, without asking). NULL: they get the wire's
 * 404 listing what is served. CV_EINVAL when not in the set. */
int cv_model_set_default(cv_model_set *s, const char *model, cv_err *err);
/* Loads the models added with preload, in order, as far as the limits
 * hold them without closing any; then the set reports ready. Fails with
 * the first load's error (the file and what is wrong). */
int cv_model_set_preload(cv_model_set *s, cv_err *err);

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
    cv_model_set *models;      /* the models served, when no single backend is given (must outlive the server) */
} cv_server_config;

typedef struct cv_server cv_server;

/* Starts listening (threads start at once) over be, or cfg->models when be
 * is NULL; either must outlive the server. Fails with CV_EIO naming
 * host:port when the bind fails. */
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

/* Starts a server (over be, or cfg->models when be is NULL) and serves
 * until SIGINT or SIGTERM, then drains it (cv_server_stop with grace_ms)
 * and returns 0. on_listen (may be
 * NULL) is called once listening, with the bound port. Call from the main
 * thread before creating other threads: it blocks both signals for the
 * threads it starts. */
int cv_server_run(const cv_server_config *cfg, const cv_server_backend *be, int grace_ms,
                  void (*on_listen)(void *ud, int port), void *ud, cv_err *err);

/* Number of generations cancelled because their client disconnected (tests
 * and metrics). */
int64_t cv_server_n_client_cancels(const cv_server *s);

#endif
