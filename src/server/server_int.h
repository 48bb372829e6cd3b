/* server_int.h — the server layer's private core: the HTTP request and
 * reply as handlers see them, the route table, per-wire error tables and the
 * server object. What only some files need has a header of its own, named
 * by its file: gen.h (the generation pipeline and the encoder interface),
 * request.h (the wires' shared translation helpers), api.h (the wire files'
 * entry points), stop.h, metrics.h, resp_store.h and model_set.h. Only
 * files in src/server/ (and their tests) include these. */
#ifndef CV_SERVER_INT_H
#define CV_SERVER_INT_H

#include <stdatomic.h>

#include "chat/chat.h"
#include "server/metrics.h"
#include "server/model_set.h"
#include "server/resp_store.h"
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

#endif
