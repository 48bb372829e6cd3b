/* server_int.h — the server layer's private guts: the HTTP request and reply
 * as handlers see them, the route table, per-wire error tables, the one
 * generation pipeline (gen.c) and the encoders wire files plug into it, the
 * stop-string matcher, metrics and the /v1/responses store. Only files in
 * src/server/ (and their tests) include this. */
#ifndef CV_SERVER_INT_H
#define CV_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat/chat.h"
#include "sched/constrain.h"
#include "server/model_set.h"
#include "server/server.h"

/* ---- wires and errors ---- */

typedef enum cv_wire {
    CV_WIRE_OPENAI,    /* {"error":{"message","type","param","code"}} */
    CV_WIRE_ANTHROPIC, /* {"type":"error","error":{"type","message"}} */
} cv_wire;

/* HTTP-level failures that have no CV_E* code of their own; they go through
 * the same per-wire tables (errors.c). */
enum {
    CV_SE_AUTH = -100,        /* 401 */
    CV_SE_NO_ROUTE = -101,    /* 404 for an unknown path */
    CV_SE_METHOD = -102,      /* 405 */
    CV_SE_TOO_LARGE = -103,   /* 413 */
    CV_SE_TIMEOUT = -104,     /* 408 */
    CV_SE_UNAVAILABLE = -105, /* 503: shutting down or not ready */
    CV_SE_INTERNAL = -106,    /* 500 */
    CV_SE_NO_MODEL = -107,    /* 404: the request's model is not served (OpenAI's model_not_found) */
    CV_SE_LOAD = -108,        /* 500: the model's file could not be loaded */
};

/* Status and body (in the wire's own shape) for a failure. msg is one
 * sentence; param may be NULL (OpenAI's "param"). */
int cv_wire_status(cv_wire w, int code);
void cv_wire_error_body(cv_wire w, int code, const char *msg, const char *param, cv_buf *out);
/* The Anthropic error type / OpenAI error type for a code (SSE error events). */
const char *cv_wire_error_type(cv_wire w, int code);

/* ---- requests and replies ---- */

typedef struct cv_server cv_server;
typedef struct cv_stream cv_stream;
typedef struct cv_route cv_route;
typedef struct cv_gen_enc cv_gen_enc;

/* A streaming body: pull appends bytes to out, blocking at most wait_ms
 * (it returns with nothing appended when that passes). Returns 0 while more
 * may come, 1 when finished. cancel is called (from the connection's thread)
 * when the client is gone or the server stops; destroy frees. */
struct cv_stream {
    int (*pull)(cv_stream *s, cv_buf *out, int wait_ms);
    void (*cancel)(cv_stream *s);
    void (*destroy)(cv_stream *s);
};

typedef struct cv_reply {
    int status;
    const char *content_type; /* static string */
    cv_buf body;              /* the whole body when stream is NULL */
    cv_stream *stream;        /* else: sent chunked as it is pulled */
} cv_reply;

typedef struct cv_http_req {
    cv_server *srv;
    const char *method;
    const char *path;
    const char *body; /* NUL-terminated copy, body_len bytes */
    size_t body_len;
    void *conn;       /* struct MHD_Connection */
    int fd;           /* the client socket, for hang-up detection */
    const cv_route *route; /* the row that matched */
} cv_http_req;

/* A request header (case-insensitive name) or query argument; NULL when absent. */
const char *cv_http_header(const cv_http_req *r, const char *name);
const char *cv_http_query(const cv_http_req *r, const char *name);
/* True when the client has hung up (non-blocking poll of the socket). */
bool cv_http_client_gone(int fd);
/* True when the request carries key as 'Authorization: Bearer KEY' or
 * 'x-api-key: KEY' (compared in constant time). */
bool cv_http_key_ok(const cv_http_req *r, const char *key);

/* Reply helpers: json is consumed (decref'd). */
void cv_reply_json(cv_reply *rep, int status, json_t *json);
void cv_reply_text(cv_reply *rep, int status, const char *content_type, const char *text);
void cv_reply_error(cv_reply *rep, cv_wire w, int code, const char *msg);
/* Error from a cv_err (code and message). */
static inline void cv_reply_err(cv_reply *rep, cv_wire w, const cv_err *e)
{
    cv_reply_error(rep, w, e->code ? e->code : CV_SE_INTERNAL, e->msg[0] ? e->msg : "internal error");
}

/* Parses the request body as one JSON object (CV_EINVAL naming line and
 * column, or "must be a JSON object"). */
int cv_http_body_json(const cv_http_req *r, json_t **out, cv_err *err);

typedef int (*cv_route_fn)(cv_http_req *req, cv_reply *rep);
/* A wire's request body → the neutral request. Fails with err naming the
 * field (the route's wire shapes the 4xx). */
typedef int (*cv_api_parse_fn)(const cv_http_req *req, json_t *body, cv_chat_request *r, cv_err *err);

/* One row of the route table (routes.c). A generating API is a row with
 * parse and enc, served by cv_api_generate; a row of its own (probes,
 * models, count_tokens) names only fn and may still use parse. */
struct cv_route {
    const char *method;     /* "GET", "POST" */
    const char *path;       /* exact path, or a prefix when prefix is true */
    bool prefix;
    cv_wire wire;           /* error shape for this route */
    bool open;              /* served without the API key */
    cv_route_fn fn;
    const char *name;       /* metrics label */
    cv_api_parse_fn parse;  /* body → neutral request, or NULL */
    const cv_gen_enc *enc;  /* neutral events → the wire, or NULL */
};

extern const cv_route cv_routes[];
extern const int cv_n_routes;

/* The one handler of every generating API: the body parsed by the route's
 * parse, the encoder's state made by its enc, then a stream (r->stream) or
 * the whole JSON; every failure answered in the route's wire shape. */
int cv_api_generate(cv_http_req *req, cv_reply *rep);
/* The first half of cv_api_generate for rows that answer themselves
 * (count_tokens): a heap request parsed by the route's parse (free it with
 * cv_chat_request_fini and free), or NULL with the error already in rep.
 * body (may be NULL) receives the parsed body (caller decrefs). */
cv_chat_request *cv_api_request_or_reply(cv_http_req *req, cv_reply *rep, json_t **body);
/* The model a request names (cv_model_set_find), its own API key checked
 * when it has one, held for the request (loaded first when it is not:
 * cv_model_acquire): the slot to release with cv_model_release, and its
 * backend in *be; or NULL with the error already in rep, in the route's
 * wire. */
cv_model_slot *cv_api_model_or_reply(cv_http_req *req, cv_reply *rep, const char *name,
                                     const cv_server_backend **be);

/* ---- metrics ---- */

#define CV_METRIC_STATUS_SLOTS 256
#define CV_TTFT_BUCKETS 12
#define CV_TPOT_BUCKETS 12

typedef struct cv_metrics {
    pthread_mutex_t mu;
    struct { int16_t route; int16_t status; int64_t n; } by_status[CV_METRIC_STATUS_SLOTS];
    int n_by_status;
    int64_t prompt_tokens, generated_tokens, cached_tokens;
    int64_t client_cancels, stop_cancels;
    int64_t ttft_counts[CV_TTFT_BUCKETS + 1];
    double ttft_sum;
    int64_t ttft_n;
    int64_t tpot_counts[CV_TPOT_BUCKETS + 1];
    double tpot_sum;
    int64_t tpot_n;
} cv_metrics;

void cv_metrics_init(cv_metrics *m);
void cv_metrics_fini(cv_metrics *m);
void cv_metrics_request(cv_metrics *m, int route, int status);
void cv_metrics_tokens(cv_metrics *m, int64_t prompt, int64_t cached, int64_t generated);
void cv_metrics_ttft(cv_metrics *m, double seconds);
void cv_metrics_tpot(cv_metrics *m, double seconds);
void cv_metrics_client_cancel(cv_metrics *m);
/* The loaded models' load, summed (api_health.c). */
void cv_server_loads(cv_server *s, cv_server_load *out);
/* Appends key="value" to out, the value escaped as the text format wants. */
void cv_metrics_label(cv_buf *out, const char *key, const char *value);
/* Prometheus text exposition (version 0.0.4) of the server s: its counters,
 * the loaded models' load (summed, and per model), its readiness, each
 * model's life (loaded, memory, idle time, loads), the schedulers'
 * figures, and the same figures under the names gateways and routers read
 * by default (vllm:*, one sample per loaded model). */
void cv_metrics_render(cv_server *s, cv_buf *out);

/* ---- the /v1/responses store ---- */

typedef struct cv_resp_store cv_resp_store;

cv_resp_store *cv_resp_store_create(int capacity);
void cv_resp_store_destroy(cv_resp_store *s);
/* Keeps (id → conversation so far, messages in chat.h shape, including the
 * response's own output). The store takes a reference to messages. The
 * least recently used entry goes when full. */
void cv_resp_store_put(cv_resp_store *s, const char *id, json_t *messages);
/* A new reference (caller decrefs) or NULL when absent or evicted. */
json_t *cv_resp_store_get(cv_resp_store *s, const char *id);
int cv_resp_store_count(cv_resp_store *s);

/* ---- the server object ---- */

struct cv_server {
    cv_server_config cfg;
    cv_model_set *models;   /* what it serves: cfg.models, or own_models */
    cv_model_set *own_models; /* the set made around a single backend (cv_server_start's be) */
    struct MHD_Daemon *mhd;
    int port;
    atomic_bool stopping;   /* draining: requests for the model get 503 */
    atomic_bool cancel_all; /* running streams are cut now */
    atomic_int active_streams;
    atomic_int open_requests; /* requests begun and not yet completed (the drain waits for them) */
    atomic_llong n_client_cancels;
    atomic_ullong id_counter;
    uint64_t id_salt;
    int64_t started;        /* unix time (what /v1/models says of models not loaded) */
    cv_metrics metrics;
    cv_resp_store *store;
    char **cors;            /* allowed origins; "*" allows any */
    int n_cors;
};

/* A fresh id: prefix + 24 hex digits, unique within the process. */
void cv_server_new_id(cv_server *s, const char *prefix, char out[48]);

/* ---- stop strings ---- */

/* Holds back generated text while it may be the start of a stop string, so
 * a stop string never reaches the client, not even in part. */
typedef struct cv_stop {
    char *const *stops;
    int n_stops;
    cv_buf pending;
} cv_stop;

void cv_stop_init(cv_stop *s, char *const *stops, int n_stops);
void cv_stop_fini(cv_stop *s);
/* Adds text; appends to out what can no longer be part of a stop string.
 * Returns the index of the stop string found (out then holds everything
 * before it, the rest is dropped), or -1. */
int cv_stop_feed(cv_stop *s, cv_str text, cv_buf *out);
/* End of generation: appends what was held back. */
void cv_stop_flush(cv_stop *s, cv_buf *out);

/* ---- the generation pipeline (gen.c) ---- */

typedef struct cv_gen cv_gen;

/* One wire's encoder: its state for one parsed request comes from create
 * (given whether the request streams), or from create_for when the encoder
 * reads more of the request (Responses: the store flag in body and the
 * conversation to store; its failures are the request's 4xx). Then gen.c
 * calls the rest in order — begin once, event per parser event, logprobs
 * per generated token when asked, then finish or error once; keepalive
 * whenever nothing was sent for the keep-alive interval. Each appends its
 * bytes (SSE frames, or for non-streaming the whole JSON at finish) to out. */
struct cv_gen_enc {
    const char *id_prefix; /* of the response ids: "chatcmpl-", "msg_", ... */
    void *(*create)(bool stream);
    int (*create_for)(const cv_http_req *req, json_t *body, const cv_chat_request *r, void **ud, cv_err *err);
    void (*begin)(void *ud, cv_gen *g, cv_buf *out);
    void (*event)(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out);
    void (*finish)(void *ud, cv_gen *g, cv_buf *out);
    void (*error)(void *ud, cv_gen *g, const cv_err *e, cv_buf *out);
    void (*keepalive)(void *ud, cv_gen *g, cv_buf *out);
    void (*destroy)(void *ud);
};

/* Why generation ended, as the wires distinguish it. */
typedef enum cv_gen_finish {
    CV_GEN_RUNNING,
    CV_GEN_STOP,      /* end of generation token */
    CV_GEN_STOP_SEQ,  /* a stop string (cv_gen_stop_seq says which) */
    CV_GEN_LENGTH,    /* max_tokens or the context */
    CV_GEN_TOOL,      /* stopped after tool calls */
    CV_GEN_CANCELED,
    CV_GEN_ERROR,
} cv_gen_finish;

/* Renders and tokenizes req with be (the model slot holds, released with
 * the gen), checks the context, submits. Takes ownership of req (a heap
 * cv_chat_request, freed with the gen), of enc_ud (freed through
 * enc->destroy) and of the hold on slot even on failure. CV_EINVAL when the prompt leaves no
 * room in the context (the message says both numbers); CV_EBUSY when the
 * queue is full. max_tokens above the room left is clamped, not rejected:
 * agents send 32000-64000 whatever the context (CLIENTS.md). */
int cv_gen_start(cv_server *srv, cv_model_slot *slot, const cv_server_backend *be, cv_chat_request *req,
                 const cv_gen_enc *enc, void *enc_ud, cv_gen **out, cv_err *err);
/* Moves the generation on: waits up to wait_ms for scheduler events,
 * handles what arrived and appends encoded bytes to out. Returns 1 once
 * finished (finish or error frames written), else 0. */
int cv_gen_pump(cv_gen *g, int wait_ms, cv_buf *out);
/* Asks the scheduler to stop; the next pump finishes with CV_GEN_CANCELED. */
void cv_gen_cancel(cv_gen *g, bool client_gone);
void cv_gen_destroy(cv_gen *g);

/* A streaming body over a started generation (takes ownership of g). */
cv_stream *cv_gen_stream(cv_gen *g);
/* Runs a non-streaming generation to its end in the calling thread,
 * polling fd for a hang-up; appends the encoder's output to out. Returns 0,
 * or CV_ECANCELED when the client left. Takes ownership of g. */
int cv_gen_run(cv_gen *g, int fd, cv_buf *out);

const cv_chat_request *cv_gen_request(const cv_gen *g);
cv_server *cv_gen_server(const cv_gen *g);
/* The model's backend the gen runs on. */
const cv_server_backend *cv_gen_backend(const cv_gen *g);
/* The model name a response carries: the one the client asked for, else the served one. */
const char *cv_gen_model(const cv_gen *g);
const char *cv_gen_id(const cv_gen *g);        /* the response id the wire made */
void cv_gen_set_id(cv_gen *g, const char *id);
int64_t cv_gen_created(const cv_gen *g);
int32_t cv_gen_n_prompt(const cv_gen *g);
int32_t cv_gen_n_cached(const cv_gen *g);
int32_t cv_gen_n_generated(const cv_gen *g);
int32_t cv_gen_n_reasoning(const cv_gen *g);
int cv_gen_n_tool_calls(const cv_gen *g);
cv_gen_finish cv_gen_finish_reason(const cv_gen *g);
const char *cv_gen_stop_seq(const cv_gen *g);  /* the stop string hit, or NULL */
/* Log probabilities of tokens generated since the last call, as OpenAI
 * chat entries [{token, logprob, bytes, top_logprobs:[...]}] (new
 * reference, or NULL when none or not asked). */
json_t *cv_gen_take_logprobs(cv_gen *g);

/* ---- shared translation helpers (request.c) ---- */

/* Parses a sampling number member; rejects NaN/Inf and values outside
 * [lo, hi] naming the field. */
int cv_req_num(json_t *obj, const char *key, double lo, double hi, double *out, bool *present, cv_err *err);
int cv_req_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *present, cv_err *err);
/* Stop strings: a string or an array of strings. */
int cv_req_stops(cv_chat_request *r, json_t *v, const char *what, cv_err *err);

/* One number member of a request that lands in a cv_chat_request field:
 * set only when the member is present (and not null), range-checked as
 * cv_req_num / cv_req_int do. A wire lists its fields in a table, in the
 * order their errors are reported. */
typedef enum cv_req_kind {
    CV_REQ_F32, /* a float field (temperature, top_p, penalties) */
    CV_REQ_I32, /* an int32_t field (top_k, max_tokens, top_logprobs) */
} cv_req_kind;
typedef struct cv_req_field {
    const char *key;
    cv_req_kind kind;
    double lo, hi;
    size_t offset; /* offsetof(cv_chat_request, ...) */
} cv_req_field;
#define CV_REQ_FIELD(key, kind, lo, hi, field) { key, kind, lo, hi, offsetof(cv_chat_request, field) }
int cv_req_fields(json_t *obj, const cv_req_field *f, size_t n, cv_chat_request *r, cv_err *err);

/* How a wire spells content: the part (block) types whose "text" is kept,
 * and the media types it refuses (NULL: every other type is refused; else
 * the rest are skipped, logged at debug). */
typedef struct cv_req_parts {
    const char *noun;                /* "content part" | "content block", for messages */
    const char *const *text_types;   /* NULL-terminated */
    const char *const *media_types;  /* NULL-terminated, or NULL */
} cv_req_parts;
/* One part c (the i-th of what) appended to out: its text after a newline
 * when out is not empty (the parts of one message are joined so words stay
 * apart). CV_EINVAL for a malformed part, CV_EUNSUPPORTED for media. */
int cv_req_part_text(json_t *p, const char *what, size_t i, const cv_req_parts *k, cv_buf *out, cv_err *err);
/* Content c (a string, an array of parts, or null / absent: nothing) of
 * what appended to out, parts joined as above. */
int cv_req_content_text(json_t *c, const char *what, const cv_req_parts *k, cv_buf *out, cv_err *err);

/* The same as a JSON string (new reference; "" for null content), or NULL
 * with err filled. */
json_t *cv_req_content_json(json_t *c, const char *what, const cv_req_parts *k, cv_err *err);
/* The tools array of a request: NULL / null (0, *n = 0), or an array of at
 * most CV_MAX_TOOLS; *n its length. */
int cv_req_tools_array(json_t *tools, size_t *n, cv_err *err);
/* Appends one function tool to r->tools in the neutral shape (chat.h) from
 * def's string 'name' (non-empty), optional string 'description' and the
 * JSON Schema object under params_key (absent or null: no parameters). what
 * names def in errors ("tools[3].function"). CV_ELIMIT past CV_MAX_TOOLS. */
int cv_req_add_tool(cv_chat_request *r, json_t *def, const char *what, const char *params_key, cv_err *err);
/* How a wire lists its tools: the type it serves (an untyped tool is that
 * type; others are skipped with a log line), where a served tool keeps its
 * definition (a member, or NULL: the tool itself) and its schema. */
typedef struct cv_req_tool_spec {
    const char *wire;       /* for the log line */
    const char *served_type;
    const char *def_key;
    const char *params_key;
} cv_req_tool_spec;
/* The tools member of a request (cv_req_tools_array) appended to r->tools. */
int cv_req_tools(cv_chat_request *r, json_t *tools, const cv_req_tool_spec *spec, cv_err *err);
/* tool_choice as a word: auto, none or required (OpenAI chat and Responses). */
int cv_req_tool_choice_word(const char *s, cv_chat_request *r, cv_err *err);
/* A tool call in the neutral shape: {id, type:"function", function:{name,
 * arguments}}; args (an object) is consumed. New reference. */
json_t *cv_req_call(const char *id, const char *name, json_t *args);
/* Arguments JSON string → object for the neutral shape (chat.h): invalid or
 * non-object JSON is kept as {} plus a warning, since templates iterate it.
 * New reference. */
json_t *cv_req_args_object(const char *args, size_t len);
/* Strips Claude Code's per-request "x-anthropic-billing-header: ..." line
 * from the start of a system prompt (it changes every request and would
 * defeat the prefix cache). Returns the text without it. */
cv_str cv_req_strip_billing(cv_str system);
/* Checks the counts in a finished request against limits.h. */
int cv_req_check_limits(const cv_chat_request *r, cv_err *err);

/* A JSON string from bytes that may not be valid UTF-8 (client input echoed
 * in an error, model text): invalid sequences become U+FFFD, so jansson never
 * returns NULL. New reference. */
json_t *cv_json_str(const char *s, size_t len);
static inline json_t *cv_json_strz(const char *z) { return cv_json_str(z, z ? strlen(z) : 0); }

/* Writes one SSE frame: `event: NAME\n` (when name) + `data: JSON\n\n`.
 * json is consumed. */
void cv_sse(cv_buf *out, const char *name, json_t *json);

/* Tool calls as an encoder accumulates them, by the parser's index. */
typedef struct cv_call {
    char id[64];
    char *name;
    cv_buf args;
    bool ended;
} cv_call;

typedef struct cv_calls {
    cv_call *v;
    int n;
} cv_calls;

/* The call at index (created with an id from prefix when new; the parser's
 * id is kept when it gave one). NULL for an index past CV_MAX_TOOL_CALLS. */
cv_call *cv_calls_at(cv_calls *c, cv_server *srv, const cv_chat_event *ev, const char *prefix);
void cv_calls_free(cv_calls *c);
/* The calls in the neutral shape (cv_req_call), arguments as the JSON text
 * generated (objects false: OpenAI's wire) or parsed into objects (true: a
 * stored conversation). New reference. */
json_t *cv_calls_json(const cv_calls *c, bool objects);
static inline bool cv_event_is_tool(const cv_chat_event *ev)
{
    return ev->type == CV_CHAT_TOOL_BEGIN || ev->type == CV_CHAT_TOOL_ARGS || ev->type == CV_CHAT_TOOL_END;
}

/* ---- route handlers (one wire file each) ---- */

int cv_api_anthropic_count_tokens(cv_http_req *req, cv_reply *rep);
int cv_api_models_list(cv_http_req *req, cv_reply *rep);
int cv_api_models_get(cv_http_req *req, cv_reply *rep);
int cv_api_root(cv_http_req *req, cv_reply *rep);
int cv_api_health(cv_http_req *req, cv_reply *rep);
int cv_api_live(cv_http_req *req, cv_reply *rep);
int cv_api_ready(cv_http_req *req, cv_reply *rep);
int cv_api_metrics(cv_http_req *req, cv_reply *rep);
int cv_api_status(cv_http_req *req, cv_reply *rep);
int cv_api_embeddings(cv_http_req *req, cv_reply *rep);

/* Sampling, limits and switches shared by OpenAI chat and completions. */
int cv_openai_sampling(json_t *body, cv_chat_request *r, cv_err *err);
/* A failure once generation has started, as OpenAI chat and completions
 * send it: in a stream a data frame carrying "error" (the openai SDK raises
 * APIError for it) then [DONE]; else the error body. */
void cv_openai_error(bool stream, const cv_err *err, cv_buf *out);

/* Translators (request bodies → neutral), called by the route table's parse
 * functions and by the unit tests. */
int cv_openai_chat_parse(json_t *body, cv_chat_request *r, cv_err *err);
int cv_openai_completions_parse(json_t *body, cv_chat_request *r, cv_err *err);
int cv_openai_responses_parse(json_t *body, cv_resp_store *store, cv_chat_request *r, cv_err *err);
int cv_anthropic_parse(json_t *body, bool count_only, cv_chat_request *r, cv_err *err);
/* /v1/embeddings: only the model name goes to the neutral request (the
 * handler reads the rest of the body itself). */
int cv_openai_embeddings_parse(json_t *body, cv_chat_request *r, cv_err *err);

/* Encoders, exposed for the unit tests (neutral events → wire bytes). The
 * returned ud is freed through the encoder's destroy. */
extern const cv_gen_enc cv_enc_openai_chat;
extern const cv_gen_enc cv_enc_openai_completions;
extern const cv_gen_enc cv_enc_openai_responses;
extern const cv_gen_enc cv_enc_anthropic;
void *cv_enc_openai_chat_new(bool stream);
void *cv_enc_openai_completions_new(bool stream);
void *cv_enc_openai_responses_new(bool stream, json_t *conversation, bool store);
void *cv_enc_anthropic_new(bool stream);

#endif
