/* api_health.c — the open probes and the metrics page:
 *   GET|HEAD /          200 "corvid" (Claude Code preconnects with HEAD /)
 *   GET /health         {status: ok | loading | draining, model, model_loaded,
 *                       queue_depth, running, active_requests}; 200 only when ok
 *   GET /health/live    200 while the process serves HTTP at all, draining
 *                       included (a liveness probe that failed during a drain
 *                       would kill the answers it is waiting for); /livez too
 *   GET /health/ready   200 once the model is loaded and warmed and while not
 *                       draining, else 503: balancers stop sending on it;
 *                       /readyz too
 *   GET /metrics        Prometheus text (metrics.c), plus the backend's own
 *                       lines; behind the API key unless open_metrics
 *   GET /v1/status      the scheduler's view (backend status; behind the API
 *                       key: it lists requests): running and waiting requests,
 *                       prefix cache and KV figures
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
    bool loaded = ready(s), draining = atomic_load(&s->stopping);
    const char *status = draining ? "draining" : loaded ? "ok" : "loading";
    cv_reply_json(rep, loaded && !draining ? 200 : 503,
                  json_pack("{s:s, s:s, s:b, s:i, s:i, s:i}", "status", status, "model", s->be->model_id,
                            "model_loaded", loaded, "queue_depth", l.queue_depth, "running", l.running,
                            "active_requests", atomic_load(&s->active_streams)));
    return 0;
}

int cv_api_live(cv_http_req *hr, cv_reply *rep)
{
    cv_reply_text(rep, 200, "text/plain; charset=utf-8", "ok\n");
    return 0;
}

int cv_api_ready(cv_http_req *hr, cv_reply *rep)
{
    bool loaded = ready(hr->srv), draining = atomic_load(&hr->srv->stopping);
    cv_reply_text(rep, loaded && !draining ? 200 : 503, "text/plain; charset=utf-8",
                  draining ? "draining\n" : loaded ? "ready\n" : "loading\n");
    return 0;
}

int cv_api_metrics(cv_http_req *hr, cv_reply *rep)
{
    cv_server *s = hr->srv;
    cv_server_load l = load_of(s);
    rep->status = 200;
    rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
    cv_metrics_render(s, &l, &rep->body);
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
