/* http.c — the HTTP layer over libmicrohttpd: listening, one thread per
 * connection, request bodies under a size limit (413) and an upload deadline
 * (408), routing through the table in routes.c, auth (Bearer or x-api-key,
 * compared in constant time), CORS, replies whole or streamed, client hang-up
 * detection, metrics per route and status, and the drain before a stop.
 *
 * Why thread-per-connection (see also server.h): a stream's body callback may
 * block, so each stream is a plain loop on its request's event queue that
 * wakes every POLL_MS to poll its own socket for a hang-up and every
 * keep-alive interval to send a comment; nothing else shares that thread.
 *
 * Order of checks on a request (each answered in the route's wire shape):
 * CORS preflight → route (404/405) → body size (413, from Content-Length
 * before a byte is read, or as a chunked body grows) → upload deadline (408)
 * → draining (503 for a request for the model) → auth (401; for a model
 * with a key of its own, once the body names it: gen.c) → handler.
 *
 * The drain (cv_server_stop): every request is counted from its first
 * callback to its completion (open_requests), and the drain flag is read
 * after that count went up, so a request is either refused or waited for. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/api.h"

/* How often a blocked stream wakes to look at its socket and the stop flag. */
#define POLL_MS 200

/* ---- per-request state ---- */

typedef struct conn_req {
    cv_server *srv;
    cv_buf body;
    uint64_t t0;
    int route;           /* index in cv_routes, or -1 */
    bool too_large;
    bool timed_out;
    bool queued;         /* a response went out early (413) */
} conn_req;

typedef struct stream_ctx {
    cv_server *srv;
    cv_stream *st;
    cv_buf buf;
    size_t off;
    int fd;
    bool finished;
    bool gone;
} stream_ctx;

/* ---- helpers for handlers ---- */

const char *cv_http_header(const cv_http_req *r, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn, MHD_HEADER_KIND, name);
}

const char *cv_http_query(const cv_http_req *r, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool cv_http_client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void cv_reply_json(cv_reply *rep, int status, json_t *json)
{
    rep->status = status;
    rep->content_type = "application/json";
    cv_buf_reset(&rep->body);
    cv_json_dump(&rep->body, json);
    json_decref(json);
}

void cv_reply_text(cv_reply *rep, int status, const char *content_type, const char *text)
{
    rep->status = status;
    rep->content_type = content_type;
    cv_buf_reset(&rep->body);
    cv_buf_puts(&rep->body, text);
}

void cv_reply_error(cv_reply *rep, cv_wire w, int code, const char *msg)
{
    rep->status = cv_wire_status(w, code);
    rep->content_type = "application/json";
    cv_buf_reset(&rep->body);
    cv_wire_error_body(w, code, msg, NULL, &rep->body);
}

int cv_http_body_json(const cv_http_req *r, json_t **out, cv_err *err)
{
    *out = NULL;
    if (r->body_len == 0)
        return cv_err_set(err, CV_EINVAL, "the request body is empty; expected a JSON object");
    json_t *v = cv_json_parse(r->body, r->body_len, err);
    if (!v) {
        cv_err_prefix(err, "request body: ");
        return err ? err->code : CV_EINVAL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        return cv_err_set(err, CV_EINVAL, "the request body must be a JSON object");
    }
    *out = v;
    return 0;
}

/* ---- routing ---- */

static int find_route(const char *method, const char *path, bool *method_mismatch)
{
    *method_mismatch = false;
    const char *m = !strcmp(method, "HEAD") ? "GET" : method;
    for (int i = 0; i < cv_n_routes; i++) {
        const cv_route *r = &cv_routes[i];
        bool match = r->prefix ? !strncmp(path, r->path, strlen(r->path)) && path[strlen(r->path)] != 0
                               : !strcmp(path, r->path);
        if (!match)
            continue;
        if (!strcmp(r->method, m))
            return i;
        *method_mismatch = true;
    }
    return -1;
}

/* The error shape for a path no route claims: Anthropic clients live under
 * /v1/messages, everyone else reads OpenAI's shape. */
static cv_wire wire_for(int route, const char *path)
{
    if (route >= 0)
        return cv_routes[route].wire;
    return !strncmp(path, "/v1/messages", 12) ? CV_WIRE_ANTHROPIC : CV_WIRE_OPENAI;
}

/* ---- auth and CORS ---- */

/* Constant time in the key's length whatever the candidate is, so the time
 * taken says nothing about how many leading bytes matched. */
static bool key_matches(const char *cand, const char *key)
{
    size_t lc = strlen(cand), lk = strlen(key);
    unsigned diff = (unsigned)(lc ^ lk);
    for (size_t i = 0; i < lk; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < lc ? cand[i] : 0);
    return diff == 0;
}

static bool authorized(struct MHD_Connection *c, const char *key);

bool cv_http_key_ok(const cv_http_req *r, const char *key)
{
    return authorized((struct MHD_Connection *)r->conn, key);
}

static bool authorized(struct MHD_Connection *c, const char *key)
{
    bool ok = false;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        const char *t = auth + 7;
        while (*t == ' ')
            t++;
        ok |= key_matches(t, key);
    }
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (x)
        ok |= key_matches(x, key);
    return ok;
}

static const char *cors_origin(cv_server *s, struct MHD_Connection *c)
{
    if (!s->n_cors)
        return NULL;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin)
        return NULL;
    for (int i = 0; i < s->n_cors; i++)
        if (!strcmp(s->cors[i], "*") || !strcmp(s->cors[i], origin))
            return origin;
    return NULL;
}

static void add_cors(struct MHD_Response *resp, const char *origin)
{
    if (!origin)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Vary", "Origin");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", "*");
}

/* ---- sending ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    stream_ctx *sc = cls;
    for (;;) {
        if (sc->off < sc->buf.len) {
            size_t n = CV_MIN(max, sc->buf.len - sc->off);
            memcpy(out, sc->buf.data + sc->off, n);
            sc->off += n;
            if (sc->off == sc->buf.len) {
                cv_buf_reset(&sc->buf);
                sc->off = 0;
            }
            return (ssize_t)n;
        }
        if (sc->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (!sc->gone && cv_http_client_gone(sc->fd)) {
            sc->gone = true;
            sc->st->cancel(sc->st);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (sc->st->pull(sc->st, &sc->buf, POLL_MS))
            sc->finished = true;
    }
}

static void stream_free(void *cls)
{
    stream_ctx *sc = cls;
    /* A write that failed ends the response without our poll having seen
     * the hang-up: the generation may still be running. */
    if (!sc->finished && !sc->gone)
        sc->st->cancel(sc->st);
    sc->st->destroy(sc->st);
    cv_buf_free(&sc->buf);
    free(sc);
}

static enum MHD_Result send_reply(conn_req *cr, struct MHD_Connection *c, cv_reply *rep, const char *origin,
                                  int fd)
{
    struct MHD_Response *resp;
    if (rep->stream) {
        stream_ctx *sc = cv_xcalloc(1, sizeof *sc);
        sc->srv = cr->srv;
        sc->st = rep->stream;
        sc->fd = fd;
        rep->stream = NULL;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, stream_read, sc, stream_free);
        if (!resp) {
            stream_free(sc);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    } else {
        resp = MHD_create_response_from_buffer(rep->body.len, rep->body.data ? rep->body.data : (void *)"",
                                               MHD_RESPMEM_MUST_COPY);
        if (!resp)
            return MHD_NO;
    }
    if (rep->content_type)
        MHD_add_response_header(resp, "Content-Type", rep->content_type);
    /* Overloaded (full queue) or not ready: tell clients when to come back;
     * the OpenAI and Anthropic SDKs honour it in their retry loops. */
    if (rep->status == 429 || rep->status == 503 || rep->status == 529)
        MHD_add_response_header(resp, "Retry-After", "1");
    add_cors(resp, origin);
    if (cr->too_large || cr->timed_out)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    cv_metrics_request(&cr->srv->metrics, cr->route, rep->status);
    return ok;
}

static enum MHD_Result send_error(conn_req *cr, struct MHD_Connection *c, cv_wire w, int code, const char *msg,
                                  const char *origin)
{
    cv_reply rep = { 0 };
    cv_reply_error(&rep, w, code, msg);
    enum MHD_Result ok = send_reply(cr, c, &rep, origin, -1);
    cv_buf_free(&rep.body);
    return ok;
}

/* ---- the access handler ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
    cv_server *s = cls;
    conn_req *cr = *state;
    bool mismatch;
    if (!cr) {
        cr = cv_xcalloc(1, sizeof *cr);
        cr->srv = s;
        cr->t0 = cv_now_ns();
        cr->route = find_route(method, url, &mismatch);
        *state = cr;
        atomic_fetch_add(&s->open_requests, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (*end == 0 && n > s->cfg.max_body_bytes) {
                /* Answer before reading a byte: with Expect: 100-continue the
                 * client never sends the body at all. */
                cr->too_large = cr->queued = true;
                char msg[160];
                snprintf(msg, sizeof msg, "request body of %llu bytes is over the limit of %zu bytes", n,
                         s->cfg.max_body_bytes);
                return send_error(cr, c, wire_for(cr->route, url), CV_SE_TOO_LARGE, msg, cors_origin(s, c));
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cr->too_large && !cr->timed_out) {
            if (cr->body.len + *upload_size > s->cfg.max_body_bytes)
                cr->too_large = true;
            else if ((cv_now_ns() - cr->t0) / 1000000 > (uint64_t)s->cfg.body_timeout_ms)
                cr->timed_out = true;
            else
                cv_buf_append(&cr->body, upload, *upload_size);
            if (cr->too_large || cr->timed_out)
                cv_buf_free(&cr->body);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->queued)
        return MHD_YES;

    const char *origin = cors_origin(s, c);
    cr->route = find_route(method, url, &mismatch);
    cv_wire w = wire_for(cr->route, url);
    if (!strcmp(method, "OPTIONS")) {
        /* CORS preflight: no auth (browsers never send credentials here). */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        add_cors(resp, origin);
        if (origin) {
            const char *rh = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, HEAD, OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                    rh ? rh : "authorization, content-type, x-api-key, anthropic-version");
            MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        }
        enum MHD_Result ok = MHD_queue_response(c, 204, resp);
        MHD_destroy_response(resp);
        return ok;
    }
    if (cr->route < 0) {
        char msg[256];
        if (mismatch)
            snprintf(msg, sizeof msg, "method %.16s is not allowed on %.128s", method, url);
        else
            snprintf(msg, sizeof msg, "no route for %.16s %.128s", method, url);
        return send_error(cr, c, w, mismatch ? CV_SE_METHOD : CV_SE_NO_ROUTE, msg, origin);
    }
    if (cr->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is over the limit of %zu bytes", s->cfg.max_body_bytes);
        return send_error(cr, c, w, CV_SE_TOO_LARGE, msg, origin);
    }
    if (cr->timed_out) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body took over %d ms to arrive", s->cfg.body_timeout_ms);
        return send_error(cr, c, w, CV_SE_TIMEOUT, msg, origin);
    }
    const cv_route *rt = &cv_routes[cr->route];
    /* Draining: what would reach the model is refused before any of it is
     * computed, so a balancer may send it to another replica (HAProxy's
     * retry-on 503); probes, metrics and listings still answer. */
    if (rt->parse && atomic_load(&s->stopping))
        return send_error(cr, c, w, CV_SE_UNAVAILABLE,
                          "the server is draining before it stops; send the request again (to another replica)",
                          origin);
    /* Models with keys of their own: a request for a model is let through
     * here and checked once its body names the model (gen.c,
     * cv_api_model_or_reply). */
    bool open = rt->open || (rt->fn == cv_api_metrics && s->cfg.open_metrics) ||
                (rt->parse && cv_model_set_has_keys(s->models));
    if (s->cfg.api_key && s->cfg.api_key[0] && !open && !authorized(c, s->cfg.api_key))
        return send_error(cr, c, w, CV_SE_AUTH,
                          "invalid or missing API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                          origin);

    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    cv_http_req req = {
        .srv = s,
        .method = method,
        .path = url,
        .body = cr->body.data ? cr->body.data : "",
        .body_len = cr->body.len,
        .conn = c,
        .fd = ci ? ci->connect_fd : -1,
        .route = rt,
    };
    cv_reply rep = { .status = 200 };
    rt->fn(&req, &rep);
    enum MHD_Result ok = send_reply(cr, c, &rep, origin, req.fd);
    cv_debug("%s %s -> %d (%.1f ms)", method, url, rep.status, (double)(cv_now_ns() - cr->t0) / 1e6);
    if (rep.stream)
        rep.stream->destroy(rep.stream);
    cv_buf_free(&rep.body);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode toe)
{
    conn_req *cr = *state;
    if (!cr)
        return;
    atomic_fetch_sub(&cr->srv->open_requests, 1);
    cv_buf_free(&cr->body);
    free(cr);
    *state = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
    cv_debug("http: %s", line);
}

/* ---- lifecycle ---- */

static void split_cors(cv_server *s, const char *list)
{
    if (!list || !*list)
        return;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        if (t > p) {
            s->cors = cv_xrealloc(s->cors, (size_t)(s->n_cors + 1) * sizeof *s->cors);
            s->cors[s->n_cors++] = cv_xstrndup(p, (size_t)(t - p));
        }
        p = e;
    }
}

void cv_server_new_id(cv_server *s, const char *prefix, char out[48])
{
    uint64_t n = atomic_fetch_add(&s->id_counter, 1);
    /* splitmix64 of salt+n: unique per process, not guessable across runs. */
    uint64_t z = s->id_salt + n * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    snprintf(out, 48, "%s%016llx%08llx", prefix, (unsigned long long)z, (unsigned long long)(n & 0xffffffffu));
}

int cv_server_start(const cv_server_config *cfg, const cv_server_backend *be, cv_server **out, cv_err *err)
{
    *out = NULL;
    if (!be && !cfg->models)
        return cv_err_set(err, CV_EINVAL, "a server needs a backend or a model set");
    cv_server *s = cv_xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    if (!s->cfg.host || !*s->cfg.host)
        s->cfg.host = "127.0.0.1";
    if (!s->cfg.max_body_bytes)
        s->cfg.max_body_bytes = CV_MAX_HTTP_BODY;
    if (s->cfg.keepalive_ms <= 0)
        s->cfg.keepalive_ms = CV_SSE_KEEPALIVE_MS;
    if (s->cfg.idle_timeout_s <= 0)
        s->cfg.idle_timeout_s = CV_HTTP_IDLE_TIMEOUT_S;
    if (s->cfg.body_timeout_ms <= 0)
        s->cfg.body_timeout_ms = CV_HTTP_BODY_TIMEOUT_MS;
    if (s->cfg.response_store_size <= 0)
        s->cfg.response_store_size = CV_RESPONSE_STORE_DEFAULT;
    if (s->cfg.response_store_size > CV_MAX_RESPONSE_STORE) {
        cv_err_set(err, CV_EINVAL, "response store size %d is over the limit of %d", s->cfg.response_store_size,
                   CV_MAX_RESPONSE_STORE);
        free(s);
        return CV_EINVAL;
    }
    if (be) {
        cv_model_set_opts mo = { 0 };
        if (cv_model_set_create(&mo, &s->own_models, err) || cv_model_set_add_backend(s->own_models, be, err) ||
            cv_model_set_default(s->own_models, be->model_id, err)) {
            cv_model_set_destroy(s->own_models);
            free(s);
            return err ? err->code : CV_EINVAL;
        }
    }
    s->models = be ? s->own_models : cfg->models;
    s->started = cv_unix_time();
    s->id_salt = cv_now_ns() ^ ((uint64_t)getpid() << 32);
    cv_metrics_init(&s->metrics);
    s->store = cv_resp_store_create(s->cfg.response_store_size);
    split_cors(s, cfg->cors_origins);

    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int rc = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        cv_err_set(err, CV_EINVAL, "cannot resolve host '%s': %s", s->cfg.host, gai_strerror(rc));
        goto fail;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
                              MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.idle_timeout_s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)CV_MAX_HTTP_CONNECTIONS,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CV_HTTP_CONN_MEMORY,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->mhd) {
        cv_err_set(err, CV_EIO, "cannot listen on %s:%d (address in use, or not an address of this machine)",
                   s->cfg.host, s->cfg.port);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->cfg.port;
    *out = s;
    return 0;
fail:
    cv_resp_store_destroy(s->store);
    cv_metrics_fini(&s->metrics);
    cv_model_set_destroy(s->own_models);
    for (int i = 0; i < s->n_cors; i++)
        free(s->cors[i]);
    free(s->cors);
    free(s);
    return err ? err->code : CV_EIO;
}

int cv_server_port(const cv_server *s) { return s->port; }

int64_t cv_server_n_client_cancels(const cv_server *s) { return atomic_load(&s->n_client_cancels); }

void cv_server_stop(cv_server *s, int grace_ms)
{
    if (!s || !s->mhd)
        return;
    atomic_store(&s->stopping, true);
    uint64_t t0 = cv_now_ns();
    while (atomic_load(&s->open_requests) > 0 && (cv_now_ns() - t0) / 1000000 < (uint64_t)grace_ms)
        usleep(20000);
    atomic_store(&s->cancel_all, true);
    /* Cut streams write their error frames within a poll interval. */
    t0 = cv_now_ns();
    while (atomic_load(&s->open_requests) > 0 && (cv_now_ns() - t0) / 1000000 < 5000)
        usleep(20000);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}

void cv_server_destroy(cv_server *s)
{
    if (!s)
        return;
    cv_server_stop(s, 0);
    cv_resp_store_destroy(s->store);
    cv_metrics_fini(&s->metrics);
    cv_model_set_destroy(s->own_models);
    for (int i = 0; i < s->n_cors; i++)
        free(s->cors[i]);
    free(s->cors);
    free(s);
}
