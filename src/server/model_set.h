/* model_set.h — the server's side of cv_model_set (models.c), private to
 * src/server/: how a request finds its model, holds it while it runs, and
 * what the probes, /v1/status and /metrics read of every model. The face
 * (creating a set, adding models, routes, limits) is in server.h. */
#ifndef CV_SERVER_MODEL_SET_H
#define CV_SERVER_MODEL_SET_H

#include "server/server.h"

/* One model of a set. Its name and backend never change while a request
 * holds it. */
typedef struct cv_model_slot cv_model_slot;

/* The model a request's name picks: a model's name or one of its aliases
 * (case-insensitive), else the first route whose pattern matches, else
 * the default model. NULL when none does: err is CV_SE_NO_MODEL naming the
 * name and what the server serves. name NULL or "" asks for the default. */
cv_model_slot *cv_model_set_find(cv_model_set *s, const char *name, cv_err *err);
/* The model named exactly (a name or an alias; no routes, no default), or NULL. */
cv_model_slot *cv_model_set_named(cv_model_set *s, const char *name);

/* Takes m for one request, loading it first when it is not loaded (the
 * calling thread loads; other requests for it wait, requests for models
 * already loaded go on), after unloading the least recently used idle
 * models that --max-loaded and --memory-limit leave no room for (waiting
 * for one to become idle when all are busy). While it waits it polls fd
 * for a hang-up (-1: none) and *stop (may be NULL). Returns 0 with *be;
 * CV_ECANCELED when the client left or *stop was set; the load's own error
 * (naming the file) when the model cannot be opened; CV_ELIMIT when the
 * model alone needs more than the memory limit. Release with
 * cv_model_release once the request is done with *be. */
int cv_model_acquire(cv_model_set *s, cv_model_slot *m, int fd, const atomic_bool *stop,
                     const cv_server_backend **be, cv_err *err);
void cv_model_release(cv_model_set *s, cv_model_slot *m);

const char *cv_model_slot_name(const cv_model_slot *m);
/* m's own request counters (tokens, latencies: /metrics per model); the
 * server keeps the totals. */
typedef struct cv_metrics cv_metrics;
cv_metrics *cv_model_slot_metrics(cv_model_slot *m);
/* The API keys that reach m besides the server's own (NULL: none). */
const char *cv_model_slot_key(const cv_model_slot *m);
/* True when some model has a key of its own (auth is then checked per model, after the body names it). */
bool cv_model_set_has_keys(const cv_model_set *s);

/* ---- what the probes and pages read ---- */

/* True once the models started with the set have loaded (cv_model_set_preload,
 * or a set made of one open backend that says it is ready). */
bool cv_model_set_ready(cv_model_set *s);
/* True when m is loaded and ready. */
bool cv_model_slot_loaded(cv_model_set *s, cv_model_slot *m);
/* The set's one model when it has exactly one (a single-model server), else NULL. */
cv_model_slot *cv_model_set_single(cv_model_set *s);
/* The default model's name, or NULL. */
const char *cv_model_set_default_name(cv_model_set *s);

/* Calls fn for every model, in the order they were added, with its backend
 * when loaded (NULL otherwise), holding it for the call (it is not
 * unloaded meanwhile); fn must not acquire models. */
typedef void (*cv_model_visit_fn)(void *ud, cv_model_slot *m, const cv_server_backend *be);
void cv_model_set_visit(cv_model_set *s, cv_model_visit_fn fn, void *ud);

/* {name, aliases, path, state, default, memory_bytes, idle_s,
 * active_requests, loads, unloads, load_failures, last_load_ms,
 * last_error, embedding} for m (state: loaded | loading | unloading |
 * unloaded). New reference. */
json_t *cv_model_slot_json(cv_model_set *s, cv_model_slot *m);
/* The set's own figures for /v1/status: {max_loaded, memory_limit_bytes,
 * memory_bytes, keep_alive_s, loads, unloads, routes: [{pattern, model}]}.
 * New reference. */
json_t *cv_model_set_json(cv_model_set *s);
/* Appends corvid_model_* (loaded, memory, idle seconds, active requests,
 * loads, unloads, load failures: one sample per model, model="NAME") and
 * corvid_models_memory_limit_bytes to out. */
void cv_model_set_metrics(cv_model_set *s, cv_buf *out);

#endif
