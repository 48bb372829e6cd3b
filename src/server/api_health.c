/* api_health.c — the open probes and the metrics page:
 *   GET|HEAD /   200 "corvid" (Claude Code preconnects with HEAD /)
 *   GET /health  {status, model, model_loaded, queue_depth, running, active}
 *   GET /livez   200 while the process serves HTTP at all
 *   GET /readyz  200 once the model is loaded and warmed, else 503
 *   GET /metrics Prometheus text (metrics.c), plus the backend's own lines
 *   GET /v1/status the scheduler's view (backend status; behind the API key:
 *                it lists requests): running and waiting requests, prefix
 *                cache and KV figures
 * Probes answer in microseconds and never touch the scheduler's queue. */
#include "server/server_int.h"

static cv_server_load load_of(cv_server *s)
{
    cv_server_load l = { 0 };
    if (s->be->load)
        s->be->load(s->be->ctx, &l);
    return l;
}

static bool ready(cv_server *s) { return !s->be->ready || s->be->ready(s->be->ctx); }

int cv_api_root(cv_http_req *hr, cv_reply *rep)
{
    cv_reply_text(rep, 200, "text/plain; charset=utf-8", "corvid\n");
    return 0;
}

int cv_api_health(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    cv_server_load l = load_of(s);
    bool ok = ready(s) && !atomic_load(&s->stopping);
    cv_reply_json(rep, ok ? 200 : 503,
                  json_pack("{s:s, s:s, s:b, s:i, s:i, s:i}", "status", ok ? "ok" : "loading", "model",
                            s->be->model_id, "model_loaded", ready(s), "queue_depth", l.queue_depth, "running",
                            l.running, "active_requests", atomic_load(&s->active_streams)));
    return 0;
}

int cv_api_livez(cv_http_req *hr, cv_reply *rep)
{
    cv_reply_text(rep, 200, "text/plain; charset=utf-8", "ok\n");
    return 0;
}

int cv_api_readyz(cv_http_req *hr, cv_reply *rep)
{
    bool ok = ready(hr->srv) && !atomic_load(&hr->srv->stopping);
    cv_reply_text(rep, ok ? 200 : 503, "text/plain; charset=utf-8", ok ? "ready\n" : "not ready\n");
    return 0;
}

int cv_api_metrics(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    cv_server_load l = load_of(s);
    rep->status = 200;
    rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
    cv_metrics_render(&s->metrics, &l, atomic_load(&s->active_streams), &rep->body);
    if (s->be->metrics)
        s->be->metrics(s->be->ctx, &rep->body);
    return 0;
}

int cv_api_status(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    json_t *st = s->be->status ? s->be->status(s->be->ctx) : NULL;
    if (!st)
        st = json_object(); /* a backend without a scheduler view: the model only */
    json_object_set_new(st, "object", json_string("status"));
    json_object_set_new(st, "model", cv_json_strz(s->be->model_id));
    json_object_set_new(st, "active_requests", json_integer(atomic_load(&s->active_streams)));
    cv_reply_json(rep, 200, st);
    return 0;
}
