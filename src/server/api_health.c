/* api_health.c — the open probes and the pages about the models:
 *   GET|HEAD /          200 "corvid" (Claude Code preconnects with HEAD /)
 *   GET /health         {status: ok | loading | draining, model, model_loaded,
 *                       queue_depth, running, active_requests, models:
 *                       [{name, state}]}; 200 only when ok
 *   GET /health/live    200 while the process serves HTTP at all, draining
 *                       included (a liveness probe that failed during a drain
 *                       would kill the answers it is waiting for); /livez too
 *   GET /health/ready   200 once the models the server started with are
 *                       loaded and warmed and while not draining, else 503:
 *                       balancers stop sending on it; /readyz too. With
 *                       ?model=NAME: 200 only while that model is loaded
 *                       (a model not loaded still answers: it loads when
 *                       asked for; the probe says whether it would wait)
 *   GET /metrics        Prometheus text (metrics.c); behind the API key
 *                       unless open_metrics
 *   GET /v1/status      every model: its state, memory, idle time, loads and
 *                       queue (models), the set's limits and routes (set); a
 *                       single model's scheduler view at the top as before,
 *                       or the one ?model=NAME names (behind the API key: it
 *                       lists requests)
 * Probes answer in microseconds and never touch a scheduler's queue or load
 * a model. Loads are summed over the loaded models. */
#include "server/api.h"
#include "server/request.h"

static void add_load(void *ud, cv_model_slot *m, const cv_server_backend *be)
{
    cv_server_load *sum = ud, l = { 0 };
    if (!be || !be->load)
        return;
    be->load(be->ctx, &l);
    sum->queue_depth += l.queue_depth;
    sum->running += l.running;
    sum->kv_blocks_used += l.kv_blocks_used;
    sum->kv_blocks_free += l.kv_blocks_free;
}

void cv_server_loads(cv_server *s, cv_server_load *out)
{
    memset(out, 0, sizeof *out);
    cv_model_set_visit(s->models, add_load, out);
}

/* The model ?model= names (NULL when there is no such argument); *bad when
 * it names none. */
static cv_model_slot *asked_model(cv_http_req *hr, bool *bad)
{
    const char *name = cv_http_query(hr, "model");
    cv_model_slot *m = name ? cv_model_set_named(hr->srv->models, name) : NULL;
    *bad = name && !m;
    return m;
}

static void state_one(void *ud, cv_model_slot *m, const cv_server_backend *be)
{
    json_array_append_new(ud, json_pack("{s:s, s:s}", "name", cv_model_slot_name(m), "state",
                                        be ? "loaded" : "unloaded"));
}

int cv_api_root(cv_http_req *hr, cv_reply *rep)
{
    cv_reply_text(rep, 200, "text/plain; charset=utf-8", "corvid\n");
    return 0;
}

int cv_api_health(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    cv_server_load l;
    cv_server_loads(s, &l);
    bool loaded = cv_model_set_ready(s->models), draining = atomic_load(&s->stopping);
    const char *status = draining ? "draining" : loaded ? "ok" : "loading";
    const char *def = cv_model_set_default_name(s->models);
    json_t *models = json_array();
    cv_model_set_visit(s->models, state_one, models);
    json_t *o = json_pack("{s:s, s:b, s:i, s:i, s:i, s:o}", "status", status, "model_loaded", loaded, "queue_depth",
                          l.queue_depth, "running", l.running, "active_requests", atomic_load(&s->active_streams),
                          "models", models);
    json_object_set_new(o, "model", def ? json_string(def) : json_null());
    cv_reply_json(rep, loaded && !draining ? 200 : 503, o);
    return 0;
}

int cv_api_live(cv_http_req *hr, cv_reply *rep)
{
    cv_reply_text(rep, 200, "text/plain; charset=utf-8", "ok\n");
    return 0;
}

int cv_api_ready(cv_http_req *hr, cv_reply *rep)
{
    bool bad;
    cv_model_slot *m = asked_model(hr, &bad);
    if (bad) {
        cv_reply_text(rep, 404, "text/plain; charset=utf-8", "no such model\n");
        return CV_ENOTFOUND;
    }
    bool loaded = m ? cv_model_slot_loaded(hr->srv->models, m) : cv_model_set_ready(hr->srv->models);
    bool draining = atomic_load(&hr->srv->stopping);
    cv_reply_text(rep, loaded && !draining ? 200 : 503, "text/plain; charset=utf-8",
                  draining ? "draining\n" : loaded ? "ready\n" : m ? "unloaded\n" : "loading\n");
    return 0;
}

int cv_api_metrics(cv_http_req *hr, cv_reply *rep)
{
    rep->status = 200;
    rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
    cv_metrics_render(hr->srv, &rep->body);
    return 0;
}

typedef struct status_walk {
    cv_server *s;
    cv_model_slot *top;  /* whose scheduler view goes at the top level */
    json_t *top_status;
    json_t *models;
} status_walk;

static void status_one(void *ud, cv_model_slot *m, const cv_server_backend *be)
{
    status_walk *w = ud;
    json_t *o = cv_model_slot_json(w->s->models, m);
    if (be && be->load) {
        cv_server_load l = { 0 };
        be->load(be->ctx, &l);
        json_object_set_new(o, "queue_depth", json_integer(l.queue_depth));
        json_object_set_new(o, "running", json_integer(l.running));
    }
    json_array_append_new(w->models, o);
    if (m == w->top && be && be->status)
        w->top_status = be->status(be->ctx);
}

int cv_api_status(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    bool bad;
    cv_model_slot *m = asked_model(hr, &bad);
    if (bad) {
        cv_reply_error(rep, CV_WIRE_OPENAI, CV_SE_NO_MODEL, "no model of that name (GET /v1/models lists them)");
        return CV_ENOTFOUND;
    }
    status_walk w = { s, m ? m : cv_model_set_single(s->models), NULL, json_array() };
    cv_model_set_visit(s->models, status_one, &w);
    /* the one model's scheduler view at the top, as a single-model server
     * has always answered; otherwise the models and the set only */
    json_t *st = w.top_status ? w.top_status : json_object();
    json_object_set_new(st, "object", json_string("status"));
    if (w.top)
        json_object_set_new(st, "model", cv_json_strz(cv_model_slot_name(w.top)));
    json_object_set_new(st, "active_requests", json_integer(atomic_load(&s->active_streams)));
    json_object_set_new(st, "models", w.models);
    json_object_set_new(st, "set", cv_model_set_json(s->models));
    cv_reply_json(rep, 200, st);
    return 0;
}
