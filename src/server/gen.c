/* gen.c — the one generation pipeline every wire shares (DESIGN.md "the one
 * data path"):
 *
 *   scheduler events ─► streaming detokenizer ─► stop strings (held back
 *   while one may be starting) ─► output parser (content / reasoning / tool
 *   calls) ─► the wire's encoder ─► bytes for the client
 *
 * A stream and a non-streaming response run the same pump; the encoder
 * decides whether events become SSE frames at once or one JSON at the end.
 * The pump waits on the request's event queue no longer than the keep-alive
 * interval allows, so a long prefill still sends a comment or ping every
 * keep-alive interval. Cancellation (client gone, server stopping, a stop string
 * hit) goes to the scheduler, which stops the sequence at its next step. A
 * generation the server's stop cuts ends with the wire's error (503), never
 * with a finish reason: a client that read "stop" would act on half a reply.
 *
 * Every generating route is served by one handler here (cv_api_generate):
 * the route row's parse turns the body into the neutral request, its
 * encoder makes the wire's state, and the pump does the rest.
 *
 * Thread: a cv_gen belongs to the one HTTP thread serving its request. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/gen.h"
#include "server/request.h"
#include "server/stop.h"

struct cv_gen {
    cv_server *srv;
    cv_model_slot *slot;    /* held for the gen's life */
    const cv_server_backend *be;
    cv_chat_request *req;
    const cv_gen_enc *enc;
    void *enc_ud;
    cv_sched_req *sr;
    void *detok;
    void *parser;
    cv_stop stop;
    cv_buf piece;   /* detokenized bytes of the current token */
    cv_buf safe;    /* what the stop matcher released */
    cv_buf *out;    /* where encoder output goes during a pump */
    cv_buf opener;  /* reasoning the prompt left open (encode_chat) */
    char id[48];
    int64_t created;
    int32_t n_prompt, n_cached, n_gen, n_reasoning;
    int n_tools;
    cv_gen_finish finish;
    const char *stop_seq;
    int err_code;   /* of the failure, when finish is CV_GEN_ERROR */
    bool begun, done, canceled, cut, tok_reasoning;
    uint64_t t_submit, t_last_token, t_last_out;
    json_t *lp_pending;
};

/* ---- accessors ---- */

const cv_chat_request *cv_gen_request(const cv_gen *g) { return g->req; }
cv_server *cv_gen_server(const cv_gen *g) { return g->srv; }
const cv_server_backend *cv_gen_backend(const cv_gen *g) { return g->be; }
const char *cv_gen_id(const cv_gen *g) { return g->id; }
const char *cv_gen_model(const cv_gen *g) { return g->req->model && *g->req->model ? g->req->model : g->be->model_id; }
void cv_gen_set_id(cv_gen *g, const char *id) { snprintf(g->id, sizeof g->id, "%s", id); }
int64_t cv_gen_created(const cv_gen *g) { return g->created; }
int32_t cv_gen_n_prompt(const cv_gen *g) { return g->n_prompt; }
int32_t cv_gen_n_cached(const cv_gen *g) { return g->n_cached; }
int32_t cv_gen_n_generated(const cv_gen *g) { return g->n_gen; }
int32_t cv_gen_n_reasoning(const cv_gen *g) { return g->n_reasoning; }
int cv_gen_n_tool_calls(const cv_gen *g) { return g->n_tools; }
cv_gen_finish cv_gen_finish_reason(const cv_gen *g) { return g->finish; }
const char *cv_gen_stop_seq(const cv_gen *g) { return g->stop_seq; }

json_t *cv_gen_take_logprobs(cv_gen *g)
{
    json_t *v = g->lp_pending;
    g->lp_pending = NULL;
    return v;
}

/* ---- text through stop strings and the parser ---- */

static void on_parse(void *ud, const cv_chat_event *ev)
{
    cv_gen *g = ud;
    if (ev->type == CV_CHAT_TOOL_BEGIN || ev->type == CV_CHAT_TOOL_ARGS || ev->type == CV_CHAT_TOOL_END) {
        /* parallel_tool_calls:false keeps the first call only. */
        if (!g->req->parallel_tool_calls && ev->index > 0)
            return;
        if (ev->type == CV_CHAT_TOOL_BEGIN)
            g->n_tools++;
    }
    if (ev->type == CV_CHAT_REASONING)
        g->tok_reasoning = true;
    g->enc->event(g->enc_ud, g, ev, g->out);
}

static void to_parser(cv_gen *g, cv_str text)
{
    if (!text.len)
        return;
    if (g->parser) {
        g->be->parser_feed(g->parser, text);
        return;
    }
    cv_chat_event ev = { .type = CV_CHAT_CONTENT, .text = text };
    on_parse(g, &ev);
}

/* Returns true when a stop string ended the generation. */
static bool on_text(cv_gen *g, cv_str text)
{
    cv_buf_reset(&g->safe);
    int hit = cv_stop_feed(&g->stop, text, &g->safe);
    to_parser(g, (cv_str){ g->safe.data, g->safe.len });
    if (hit < 0)
        return false;
    g->stop_seq = g->req->stop[hit];
    return true;
}

static void finish(cv_gen *g, cv_gen_finish why)
{
    if (g->done)
        return;
    /* Drain what the detokenizer and the stop matcher hold: at the end of
     * generation a partial stop string is just text. A stop string already
     * hit drops everything after it. */
    if (why != CV_GEN_STOP_SEQ) {
        if (g->detok && g->be->detok_flush) {
            cv_buf_reset(&g->piece);
            g->be->detok_flush(g->detok, &g->piece);
            if (g->piece.len && on_text(g, (cv_str){ g->piece.data, g->piece.len }))
                why = CV_GEN_STOP_SEQ;
        }
        if (why != CV_GEN_STOP_SEQ) {
            cv_buf_reset(&g->safe);
            cv_stop_flush(&g->stop, &g->safe);
            to_parser(g, (cv_str){ g->safe.data, g->safe.len });
        }
    }
    if (g->parser && g->be->parser_finish)
        g->be->parser_finish(g->parser);
    if (g->n_tools > 0 && (why == CV_GEN_STOP || why == CV_GEN_STOP_SEQ))
        why = CV_GEN_TOOL;
    g->finish = why;
    g->done = true;
    cv_metrics_tokens(&g->srv->metrics, g->n_prompt, g->n_cached, g->n_gen);
    cv_metrics_tokens(cv_model_slot_metrics(g->slot), g->n_prompt, g->n_cached, g->n_gen);
    g->enc->finish(g->enc_ud, g, g->out);
}

static void fail(cv_gen *g, const cv_err *e)
{
    if (g->done)
        return;
    g->finish = CV_GEN_ERROR;
    g->err_code = e->code ? e->code : CV_SE_INTERNAL;
    g->done = true;
    cv_warn("generation %s failed: %s", g->id, e->msg);
    g->enc->error(g->enc_ud, g, e, g->out);
}

/* ---- logprobs ---- */

static json_t *lp_entry(cv_gen *g, int32_t token, float lp)
{
    cv_buf t = { 0 };
    if (g->be->token_text)
        g->be->token_text(g->be->ctx, token, &t);
    json_t *bytes = json_array();
    for (size_t i = 0; i < t.len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)t.data[i]));
    json_t *e = json_object();
    json_object_set_new(e, "token", cv_json_str(t.data, t.len));
    json_object_set_new(e, "logprob", json_real(isfinite(lp) ? lp : -9999.0));
    json_object_set_new(e, "bytes", bytes);
    cv_buf_free(&t);
    return e;
}

static void record_logprobs(cv_gen *g, const cv_sched_event *ev)
{
    if (!g->req->logprobs)
        return;
    json_t *e = lp_entry(g, ev->token, ev->logprob);
    json_t *top = json_array();
    for (int i = 0; i < ev->n_top && i < CV_MAX_TOP_LOGPROBS; i++)
        json_array_append_new(top, lp_entry(g, ev->top_tokens[i], ev->top_logprobs[i]));
    json_object_set_new(e, "top_logprobs", top);
    if (!g->lp_pending)
        g->lp_pending = json_array();
    json_array_append_new(g->lp_pending, e);
}

/* ---- events ---- */

static void on_token(cv_gen *g, const cv_sched_event *ev)
{
    uint64_t now = cv_now_ns();
    cv_metrics *per[2] = { &g->srv->metrics, cv_model_slot_metrics(g->slot) }; /* totals, the model's */
    for (int i = 0; i < 2; i++)
        if (g->n_gen == 0)
            cv_metrics_ttft(per[i], (double)(now - g->t_submit) / 1e9);
        else
            cv_metrics_tpot(per[i], (double)(now - g->t_last_token) / 1e9);
    g->t_last_token = now;
    g->n_gen++;
    if (g->be->is_eog && g->be->is_eog(g->be->ctx, ev->token))
        return;
    record_logprobs(g, ev);
    g->tok_reasoning = false;
    cv_buf_reset(&g->piece);
    g->be->detok_feed(g->detok, ev->token, &g->piece);
    bool stopped = on_text(g, (cv_str){ g->piece.data, g->piece.len });
    if (g->tok_reasoning)
        g->n_reasoning++;
    if (stopped) {
        g->be->cancel(g->sr);
        finish(g, CV_GEN_STOP_SEQ);
    }
}

static void on_event(cv_gen *g, const cv_sched_event *ev)
{
    switch (ev->type) {
    case CV_SCHED_PROMPT_DONE:
        g->n_prompt = ev->n_prompt;
        g->n_cached = ev->n_cached;
        break;
    case CV_SCHED_TOKEN:
        on_token(g, ev);
        break;
    case CV_SCHED_DONE:
        if (ev->n_prompt)
            g->n_prompt = ev->n_prompt;
        g->n_cached = ev->n_cached;
        switch (ev->finish) {
        case CV_FINISH_STOP: finish(g, CV_GEN_STOP); break;
        case CV_FINISH_LENGTH:
        case CV_FINISH_CONTEXT: finish(g, CV_GEN_LENGTH); break;
        default:
            if (g->cut) {
                cv_err e = { 0 };
                cv_err_set(&e, CV_SE_UNAVAILABLE,
                           "the server stopped before this answer was finished: it was cut after %d tokens; "
                           "send the request again",
                           g->n_gen);
                fail(g, &e);
            } else {
                finish(g, CV_GEN_CANCELED);
            }
            break;
        }
        break;
    case CV_SCHED_ERROR:
        fail(g, &ev->err);
        break;
    case CV_SCHED_EMBEDDING: /* embedding requests only (api_embeddings.c) */
        break;
    }
}

int cv_gen_pump(cv_gen *g, int wait_ms, cv_buf *out)
{
    if (g->done)
        return 1;
    g->out = out;
    size_t before = out->len;
    if (!g->begun) {
        g->begun = true;
        g->enc->begin(g->enc_ud, g, out);
        g->t_last_out = cv_now_ns();
        if (out->len > before)
            return 0;
    }
    if (atomic_load(&g->srv->cancel_all) && !g->canceled) {
        g->cut = true;
        cv_gen_cancel(g, false);
    }
    int ka = g->srv->cfg.keepalive_ms;
    int64_t since = (int64_t)((cv_now_ns() - g->t_last_out) / 1000000);
    int wait = (int)CV_MIN((int64_t)wait_ms, CV_MAX((int64_t)0, (int64_t)ka - since));
    cv_sched_event ev;
    int rc = g->be->next(g->sr, wait, &ev);
    /* Batch whatever else is already queued into the same write. */
    while (rc == 0) {
        on_event(g, &ev);
        if (g->done || out->len - before >= 8192)
            break;
        rc = g->be->next(g->sr, 0, &ev);
    }
    uint64_t now = cv_now_ns();
    if (!g->done && out->len == before && (int64_t)((now - g->t_last_out) / 1000000) >= ka) {
        g->enc->keepalive(g->enc_ud, g, out);
    }
    if (out->len > before)
        g->t_last_out = now;
    return g->done ? 1 : 0;
}

void cv_gen_cancel(cv_gen *g, bool client_gone)
{
    if (g->canceled || g->done)
        return;
    g->canceled = true;
    if (g->sr)
        g->be->cancel(g->sr);
    if (client_gone) {
        atomic_fetch_add(&g->srv->n_client_cancels, 1);
        cv_metrics_client_cancel(&g->srv->metrics);
        cv_info("client disconnected: cancelled %s after %d tokens", g->id, g->n_gen);
    }
}

/* ---- start and end ---- */

static void free_gen(cv_gen *g)
{
    if (g->sr)
        g->be->release(g->sr);
    if (g->parser)
        g->be->parser_destroy(g->parser);
    if (g->detok)
        g->be->detok_destroy(g->detok);
    if (g->enc && g->enc->destroy)
        g->enc->destroy(g->enc_ud);
    cv_stop_fini(&g->stop);
    cv_buf_free(&g->piece);
    cv_buf_free(&g->safe);
    cv_buf_free(&g->opener);
    json_decref(g->lp_pending);
    if (g->req) {
        cv_chat_request_fini(g->req);
        free(g->req);
    }
    if (g->slot) /* last: everything above may still call the backend */
        cv_model_release(g->srv->models, g->slot);
    free(g);
}

void cv_gen_destroy(cv_gen *g)
{
    if (!g)
        return;
    atomic_fetch_sub(&g->srv->active_streams, 1);
    free_gen(g);
}

static int encode_prompt(cv_gen *g, int32_t **ids, int32_t *n, cv_err *err)
{
    const cv_chat_request *r = g->req;
    if (!r->raw)
        return g->be->encode_chat(g->be->ctx, r, ids, n, &g->opener, err);
    if (r->prompt_ids) {
        *ids = cv_xmalloc((size_t)r->n_prompt_ids * sizeof **ids);
        memcpy(*ids, r->prompt_ids, (size_t)r->n_prompt_ids * sizeof **ids);
        *n = r->n_prompt_ids;
        return 0;
    }
    return g->be->encode_text(g->be->ctx, (cv_str){ r->prompt_text.data ? r->prompt_text.data : "", r->prompt_text.len },
                              ids, n, err);
}

int cv_gen_start(cv_server *srv, cv_model_slot *slot, const cv_server_backend *be, cv_chat_request *req,
                 const cv_gen_enc *enc, void *enc_ud, cv_gen **out, cv_err *err)
{
    *out = NULL;
    cv_gen *g = cv_xcalloc(1, sizeof *g);
    g->srv = srv;
    g->slot = slot;
    g->be = be;
    g->req = req;
    g->enc = enc;
    g->enc_ud = enc_ud;
    g->created = cv_unix_time();
    cv_stop_init(&g->stop, req->stop, req->n_stop);
    int32_t *ids = NULL, n = 0;
    int rc;
    if (req->tool_choice == CV_TOOL_CHOICE_NONE)
        json_array_clear(req->tools); /* nothing to call: render and parse without tools */
    if ((rc = cv_req_check_limits(req, err)))
        goto fail;
    if (g->be->ready && !g->be->ready(g->be->ctx)) {
        rc = cv_err_set(err, CV_SE_UNAVAILABLE, "the model is still loading; retry shortly");
        goto fail;
    }
    if ((rc = encode_prompt(g, &ids, &n, err)))
        goto fail;
    if (n <= 0) {
        rc = cv_err_set(err, CV_EINVAL, "the prompt is empty");
        goto fail;
    }
    int32_t n_ctx = g->be->n_ctx;
    if (n >= n_ctx) {
        rc = cv_err_set(err, CV_EINVAL,
                        "the prompt is %d tokens and the context is %d tokens: no room to generate (requested "
                        "max_tokens %d); shorten the conversation",
                        n, n_ctx, req->max_tokens);
        goto fail;
    }
    int32_t room = n_ctx - n;
    int32_t max_tokens = req->max_tokens > 0 ? CV_MIN(req->max_tokens, room) : room;
    cv_sched_params p = {
        .prompt = ids,
        .n_prompt = n,
        .max_tokens = max_tokens,
        .sample = req->sample,
        .logprobs = req->logprobs,
        .n_top_logprobs = req->logprobs ? CV_MIN(req->top_logprobs, CV_MAX_TOP_LOGPROBS) : 0,
    };
    p.sample.logit_bias = req->logit_bias;
    cv_str opener = { g->opener.data ? g->opener.data : "", g->opener.len };
    if ((rc = g->be->submit(g->be->ctx, req, opener, &p, &g->sr, err)))
        goto fail;
    free(ids);
    ids = NULL;
    g->n_prompt = n;
    g->t_submit = cv_now_ns();
    g->detok = g->be->detok_create(g->be->ctx);
    if (!req->raw && g->be->parser_create)
        g->parser = g->be->parser_create(g->be->ctx, req, opener, on_parse, g);
    atomic_fetch_add(&srv->active_streams, 1);
    *out = g;
    return 0;
fail:
    free(ids);
    free_gen(g);
    return rc;
}

/* ---- bodies ---- */

typedef struct gen_stream {
    cv_stream base;
    cv_gen *g;
} gen_stream;

static int gs_pull(cv_stream *s, cv_buf *out, int wait_ms) { return cv_gen_pump(((gen_stream *)s)->g, wait_ms, out); }
static void gs_cancel(cv_stream *s) { cv_gen_cancel(((gen_stream *)s)->g, true); }
static void gs_destroy(cv_stream *s)
{
    cv_gen_destroy(((gen_stream *)s)->g);
    free(s);
}

cv_stream *cv_gen_stream(cv_gen *g)
{
    gen_stream *s = cv_xcalloc(1, sizeof *s);
    s->base.pull = gs_pull;
    s->base.cancel = gs_cancel;
    s->base.destroy = gs_destroy;
    s->g = g;
    return &s->base;
}

int cv_gen_run(cv_gen *g, int fd, cv_buf *out)
{
    int rc = 0;
    while (!cv_gen_pump(g, 200, out)) {
        if (cv_http_client_gone(fd)) {
            cv_gen_cancel(g, true);
            rc = CV_ECANCELED;
            break;
        }
    }
    if (!rc && g->finish == CV_GEN_ERROR)
        rc = g->err_code;
    cv_gen_destroy(g);
    return rc;
}

/* ---- the generic API handler ---- */

cv_chat_request *cv_api_request_or_reply(cv_http_req *hr, cv_reply *rep, json_t **body)
{
    cv_err err = { 0 };
    json_t *b;
    if (body)
        *body = NULL;
    if (cv_http_body_json(hr, &b, &err)) {
        cv_reply_err(rep, hr->route->wire, &err);
        return NULL;
    }
    cv_chat_request *r = cv_xmalloc(sizeof *r);
    cv_chat_request_init(r);
    if (hr->route->parse(hr, b, r, &err)) {
        json_decref(b);
        cv_chat_request_fini(r);
        free(r);
        cv_reply_err(rep, hr->route->wire, &err);
        return NULL;
    }
    if (body)
        *body = b;
    else
        json_decref(b);
    return r;
}

cv_model_slot *cv_api_model_or_reply(cv_http_req *hr, cv_reply *rep, const char *name,
                                     const cv_server_backend **be)
{
    cv_server *s = hr->srv;
    const cv_wire w = hr->route->wire;
    cv_err err = { 0 };
    cv_model_slot *m = cv_model_set_find(s->models, name, &err);
    if (!m) {
        cv_reply_err(rep, w, &err);
        return NULL;
    }
    /* With keys per model, http.c left auth to this point: the server's key
     * reaches every model, a model's own key that model only. */
    const char *key = cv_model_slot_key(m), *server_key = s->cfg.api_key;
    if (cv_model_set_has_keys(s->models) && ((server_key && *server_key) || key) &&
        !((server_key && *server_key && cv_http_key_ok(hr, server_key)) || (key && cv_http_key_ok(hr, key)))) {
        char msg[400];
        snprintf(msg, sizeof msg, "invalid or missing API key for model '%.200s': send it as 'Authorization: "
                 "Bearer KEY' or 'x-api-key: KEY'", cv_model_slot_name(m));
        cv_reply_error(rep, w, CV_SE_AUTH, msg);
        return NULL;
    }
    if (cv_model_acquire(s->models, m, hr->fd, &s->stopping, be, &err)) {
        cv_reply_err(rep, w, &err);
        return NULL;
    }
    return m;
}

int cv_api_generate(cv_http_req *hr, cv_reply *rep)
{
    const cv_route *rt = hr->route;
    json_t *body;
    cv_chat_request *r = cv_api_request_or_reply(hr, rep, &body);
    if (!r)
        return CV_EINVAL;
    cv_err err = { 0 };
    void *ud = NULL;
    int rc = 0;
    if (rt->enc->create_for)
        rc = rt->enc->create_for(hr, body, r, &ud, &err);
    else
        ud = rt->enc->create(r->stream);
    json_decref(body);
    const cv_server_backend *be = NULL;
    cv_model_slot *slot = rc ? NULL : cv_api_model_or_reply(hr, rep, r->model, &be);
    if (rc || !slot) {
        cv_chat_request_fini(r);
        free(r);
        if (ud && rt->enc->destroy)
            rt->enc->destroy(ud);
        if (rc)
            cv_reply_err(rep, rt->wire, &err);
        return rc ? rc : CV_EINVAL;
    }
    bool stream = r->stream;
    cv_gen *g;
    if (cv_gen_start(hr->srv, slot, be, r, rt->enc, ud, &g, &err)) {
        cv_reply_err(rep, rt->wire, &err);
        return err.code;
    }
    char id[48];
    cv_server_new_id(hr->srv, rt->enc->id_prefix, id);
    cv_gen_set_id(g, id);
    if (stream) {
        rep->status = 200;
        rep->content_type = "text/event-stream; charset=utf-8";
        rep->stream = cv_gen_stream(g);
        return 0;
    }
    rc = cv_gen_run(g, hr->fd, &rep->body);
    rep->content_type = "application/json";
    rep->status = rc == 0 ? 200 : cv_wire_status(rt->wire, rc);
    return rc;
}
