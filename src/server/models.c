/* models.c — the models one server serves (server.h, cv_model_set): which
 * model a request's name picks (names and aliases, glob routes, a
 * default), and each model's life: opened by the first request that asks
 * for it, held by every request that uses it, closed when it has been idle
 * for the keep-alive or when a model not loaded needs its room under
 * --max-loaded / --memory-limit (least recently used idle model first).
 *
 * States: UNLOADED → LOADING (the requesting thread opens the file, the set
 * unlocked) → LOADED → UNLOADING (closing saves the prefix cache; unlocked)
 * → UNLOADED. Only the thread that moved a model into LOADING or UNLOADING
 * moves it out, so a model is opened or closed by one thread at a time;
 * everyone else waits on the set's condition variable, which every change
 * of state, release and failure broadcasts. A request that needs room while
 * every loaded model is busy marks the least recently used one `evicting`:
 * new requests for that one wait instead of joining it, so it drains and
 * the two models take turns rather than the busy one starving the other.
 *
 * Memory is what each model holds by its own account (mem_bytes: weights,
 * KV pool, recurrent-state slots), estimated before its first load as its
 * file's size plus the KV memory it will be given. Closing returns the
 * freed heap to the OS (malloc_trim): the mapped weights and KV pools go
 * with their munmap, and what the allocator kept would otherwise stay in
 * the process's resident size. */
#include <fnmatch.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "server/request.h"
#include "server/server_int.h"

typedef enum mstate { M_UNLOADED, M_LOADING, M_LOADED, M_UNLOADING } mstate;

static const char *const state_names[] = { "unloaded", "loading", "loaded", "unloading" };

struct cv_model_slot {
    char *name, *path, *key;
    char **aliases;
    int n_aliases;
    int32_t pooling, min_dims;
    bool preload;
    bool fixed;                 /* an open backend the set was given: always loaded */
    mstate state;
    const cv_server_backend *be; /* LOADED, UNLOADING */
    cv_server_backend *opened;   /* what the set opened (it closes it) */
    int active;                  /* requests holding it */
    bool evicting;               /* a request waits for its room: new requests wait too */
    int64_t bytes;               /* held when loaded; before a load, the estimate */
    uint64_t last_used;          /* ns, monotonic */
    int64_t n_loads, n_unloads, n_failures;
    double last_load_ms;
    uint64_t load_seq, fail_seq; /* the load under way / the last that failed */
    cv_err fail;                 /* its error */
    cv_metrics metrics;          /* its requests' counters (gen.c) */
};

typedef struct route {
    char *pattern;
    cv_model_slot *to;
} route;

struct cv_model_set {
    cv_model_set_opts o;
    cv_sched_share *share;
    pthread_mutex_t mu;
    pthread_cond_t cond;         /* any change: state, release, failure, quit */
    cv_model_slot **m;
    int n;
    route *routes;
    int n_routes;
    cv_model_slot *def;
    bool ready, has_keys, quit;
    int room_waiters;            /* requests waiting for a busy model to drain (they marked it evicting) */
    int64_t loads, unloads;
    pthread_t reaper;            /* keep-alive */
    bool reaper_on;
};

/* ---- names ---- */

static bool has_name(const cv_model_slot *m, const char *name)
{
    if (!strcasecmp(m->name, name))
        return true;
    for (int i = 0; i < m->n_aliases; i++)
        if (!strcasecmp(m->aliases[i], name))
            return true;
    return false;
}

cv_model_slot *cv_model_set_named(cv_model_set *s, const char *name)
{
    for (int i = 0; name && i < s->n; i++)
        if (has_name(s->m[i], name))
            return s->m[i];
    return NULL;
}

cv_model_slot *cv_model_set_find(cv_model_set *s, const char *name, cv_err *err)
{
    if (name && *name) {
        cv_model_slot *m = cv_model_set_named(s, name);
        if (m)
            return m;
        for (int i = 0; i < s->n_routes; i++)
            if (fnmatch(s->routes[i].pattern, name, FNM_CASEFOLD) == 0)
                return s->routes[i].to;
    }
    if (s->def)
        return s->def;
    cv_buf list = { 0 };
    for (int i = 0; i < s->n && list.len < 300; i++)
        cv_buf_printf(&list, "%s'%s'", i ? ", " : "", s->m[i]->name);
    if (s->n > 0 && list.len >= 300)
        cv_buf_puts(&list, ", ...");
    if (name && *name)
        cv_err_set(err, CV_SE_NO_MODEL, "model '%.200s' is not served here; this server serves %s (GET /v1/models)",
                   name, s->n ? list.data : "no model");
    else
        cv_err_set(err, CV_SE_NO_MODEL, "the request names no model and this server has no default; it serves %s",
                   s->n ? list.data : "no model");
    cv_buf_free(&list);
    return NULL;
}

const char *cv_model_slot_name(const cv_model_slot *m) { return m->name; }
cv_metrics *cv_model_slot_metrics(cv_model_slot *m) { return &m->metrics; }
const char *cv_model_slot_key(const cv_model_slot *m) { return m->key; }
bool cv_model_set_has_keys(const cv_model_set *s) { return s->has_keys; }

/* ---- memory ---- */

static int64_t held_bytes(const cv_model_set *s)
{
    int64_t b = 0;
    for (int i = 0; i < s->n; i++)
        if (!s->m[i]->fixed && s->m[i]->state != M_UNLOADED)
            b += s->m[i]->bytes;
    return b;
}

static int n_held(const cv_model_set *s)
{
    int k = 0;
    for (int i = 0; i < s->n; i++)
        k += !s->m[i]->fixed && s->m[i]->state != M_UNLOADED;
    return k;
}

static int64_t file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The options m is opened with: the set's, with its file, name, share and
 * embedding facts, and under a memory limit an automatic KV pool sized to
 * a share of it (server.h, cv_model_set_create). */
static cv_server_backend_opts opts_for(const cv_model_set *s, const cv_model_slot *m)
{
    cv_server_backend_opts o = s->o.backend;
    o.model_path = m->path;
    o.served_name = m->name;
    o.share = s->share;
    o.pooling = m->pooling;
    o.min_dims = m->min_dims;
    if (o.kv_bytes < 0 && s->o.memory_limit > 0) {
        const int64_t slots = s->o.max_loaded > 0 ? s->o.max_loaded : 2;
        o.kv_bytes = CV_MAX((s->o.memory_limit - file_bytes(m->path)) / (2 * slots), (int64_t)64 << 20);
    }
    return o;
}

/* ---- loading and unloading (mu held on entry and exit) ---- */

static void close_model(cv_model_set *s, cv_model_slot *m)
{
    m->state = M_UNLOADING;
    cv_server_backend *be = m->opened;
    pthread_mutex_unlock(&s->mu);
    const uint64_t t0 = cv_now_ns();
    if (s->o.close)
        s->o.close(s->o.open_ud, be);
    else
        cv_server_backend_close(be);
    malloc_trim(0);
    cv_info("model %s: unloaded in %.0f ms", m->name, (double)(cv_now_ns() - t0) / 1e6);
    pthread_mutex_lock(&s->mu);
    m->opened = NULL;
    m->be = NULL;
    m->state = M_UNLOADED;
    m->evicting = false;
    m->n_unloads++;
    s->unloads++;
    pthread_cond_broadcast(&s->cond);
}

/* Opens m (UNLOADED) in this thread; on success it is LOADED and held once
 * for the caller. */
static int open_model(cv_model_set *s, cv_model_slot *m, cv_err *err)
{
    m->state = M_LOADING;
    const uint64_t seq = ++m->load_seq;
    cv_server_backend_opts o = opts_for(s, m);
    pthread_mutex_unlock(&s->mu);
    const uint64_t t0 = cv_now_ns();
    cv_server_backend *be = NULL;
    cv_err e = { 0 };
    int rc = s->o.open ? s->o.open(s->o.open_ud, &o, &be, &e) : cv_server_backend_open(&o, &be, &e);
    const double ms = (double)(cv_now_ns() - t0) / 1e6;
    if (rc)
        cv_warn("model %s: cannot be loaded: %s", m->name, e.msg);
    else
        cv_info("model %s: loaded in %.0f ms (%.0f MiB)", m->name, ms, (double)be->mem_bytes / 1048576.0);
    pthread_mutex_lock(&s->mu);
    if (rc) {
        m->state = M_UNLOADED;
        m->n_failures++;
        m->fail_seq = seq;
        cv_err_set(&m->fail, CV_SE_LOAD, "model '%s' cannot be loaded: %s", m->name, e.msg);
        if (err)
            *err = m->fail;
    } else {
        m->state = M_LOADED;
        m->opened = be;
        m->be = be;
        if (be->mem_bytes > 0)
            m->bytes = be->mem_bytes;
        m->active = 1;
        m->last_used = cv_now_ns();
        m->last_load_ms = ms;
        m->n_loads++;
        s->loads++;
    }
    pthread_cond_broadcast(&s->cond);
    return rc ? CV_SE_LOAD : 0;
}

/* The least recently used model other than m that the set may close:
 * idle ones (busy false), or the busy ones (busy true). */
static cv_model_slot *lru(cv_model_set *s, const cv_model_slot *m, bool busy)
{
    cv_model_slot *best = NULL;
    for (int i = 0; i < s->n; i++) {
        cv_model_slot *c = s->m[i];
        if (c == m || c->fixed || c->state != M_LOADED || (c->active > 0) != busy)
            continue;
        if (!best || c->last_used < best->last_used)
            best = c;
    }
    return best;
}

typedef enum room { ROOM_OK, ROOM_WAIT, ROOM_CHANGED, ROOM_NEVER } room;

/* Whether m fits beside what is loaded; closes an idle model when that
 * makes room (the set was unlocked meanwhile: ROOM_CHANGED, look again),
 * marks a busy one to drain when none is idle (ROOM_WAIT), ROOM_NEVER when
 * m alone is over the memory limit. */
static room make_room(cv_model_set *s, cv_model_slot *m, cv_err *err)
{
    const int64_t limit = s->o.memory_limit;
    if (limit > 0 && m->bytes > limit) {
        cv_err_set(err, CV_ELIMIT, "model '%s' needs %.0f MiB (weights, KV cache and states) and the memory limit "
                   "is %.0f MiB (--memory-limit)", m->name, (double)m->bytes / 1048576.0, (double)limit / 1048576.0);
        return ROOM_NEVER;
    }
    const bool over_count = s->o.max_loaded > 0 && n_held(s) >= s->o.max_loaded;
    const bool over_bytes = limit > 0 && held_bytes(s) + m->bytes > limit;
    if (!over_count && !over_bytes)
        return ROOM_OK;
    cv_model_slot *v = lru(s, m, false);
    if (v) {
        cv_info("model %s: unloading %s to make room (%s)", m->name, v->name,
                over_count ? "--max-loaded" : "--memory-limit");
        close_model(s, v);
        return ROOM_CHANGED;
    }
    v = lru(s, m, true);
    if (v)
        v->evicting = true;
    /* else: the others are loading or unloading; wait for them */
    return ROOM_WAIT;
}

/* ---- requests ---- */

int cv_model_acquire(cv_model_set *s, cv_model_slot *m, int fd, const atomic_bool *stop,
                     const cv_server_backend **be, cv_err *err)
{
    *be = NULL;
    pthread_mutex_lock(&s->mu);
    const uint64_t t0 = cv_now_ns();
    uint64_t waited_seq = 0; /* the load this request saw under way */
    bool room_waiter = false;
    int rc = 0;
    for (;;) {
        if (s->quit) {
            rc = cv_err_set(err, CV_SE_UNAVAILABLE, "the server is stopping");
            break;
        }
        if (m->state == M_LOADED && m->evicting && s->room_waiters == 0)
            m->evicting = false; /* whoever wanted its room is gone */
        if (m->state == M_LOADED && !m->evicting) {
            m->active++;
            m->last_used = cv_now_ns();
            *be = m->be;
            break;
        }
        if (m->state == M_UNLOADED && waited_seq && m->fail_seq == waited_seq) {
            if (err) /* the load this request waited for failed: its error is this request's */
                *err = m->fail;
            rc = CV_SE_LOAD;
            break;
        }
        if (m->state == M_LOADING)
            waited_seq = m->load_seq;
        if (m->state == M_UNLOADED) {
            room r = make_room(s, m, err);
            if (r == ROOM_NEVER) {
                rc = CV_ELIMIT;
                break;
            }
            if (r == ROOM_CHANGED)
                continue;
            if (r == ROOM_OK) {
                if ((rc = open_model(s, m, err)) == 0)
                    *be = m->be;
                break;
            }
            if (!room_waiter)
                s->room_waiters++;
            room_waiter = true;
        }
        if ((cv_now_ns() - t0) / 1000000 > CV_MODEL_WAIT_MS) {
            rc = cv_err_set(err, CV_SE_UNAVAILABLE,
                            "model '%s' could not be loaded within %d s: the models loaded are busy and the limits "
                            "leave no room for it; retry later", m->name, CV_MODEL_WAIT_MS / 1000);
            break;
        }
        /* Wait for any change, looking at the client and the stop flag
         * every poll interval. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += CV_MODEL_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
        if ((stop && atomic_load(stop)) || cv_http_client_gone(fd)) {
            rc = cv_err_set(err, CV_ECANCELED, "the client left while model '%s' was loading", m->name);
            break;
        }
    }
    if (room_waiter)
        s->room_waiters--;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void cv_model_release(cv_model_set *s, cv_model_slot *m)
{
    pthread_mutex_lock(&s->mu);
    m->active--;
    m->last_used = cv_now_ns();
    if (m->active == 0)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* ---- keep-alive ---- */

static void *reaper_main(void *arg)
{
    cv_model_set *s = arg;
    const int64_t ka = s->o.keep_alive_ms;
    const long tick_ms = (long)CV_MAX((int64_t)20, CV_MIN(ka / 4, (int64_t)1000));
    pthread_mutex_lock(&s->mu);
    while (!s->quit) {
        const uint64_t now = cv_now_ns();
        cv_model_slot *idle = NULL;
        for (int i = 0; i < s->n && !idle; i++) {
            cv_model_slot *m = s->m[i];
            if (!m->fixed && m->state == M_LOADED && m->active == 0 && (int64_t)((now - m->last_used) / 1000000) >= ka)
                idle = m;
        }
        if (idle) {
            cv_info("model %s: idle for %lld ms (--keep-alive): unloading", idle->name, (long long)ka);
            close_model(s, idle);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += tick_ms / 1000;
        ts.tv_nsec += (tick_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the set ---- */

int cv_model_set_create(const cv_model_set_opts *o, cv_model_set **out, cv_err *err)
{
    *out = NULL;
    if (o->max_loaded < 0 || o->memory_limit < 0 || o->keep_alive_ms < 0)
        return cv_err_set(err, CV_EINVAL, "model set: max_loaded %d, memory_limit %lld, keep_alive %lld ms: none "
                          "may be negative", o->max_loaded, (long long)o->memory_limit, (long long)o->keep_alive_ms);
    cv_model_set *s = cv_xcalloc(1, sizeof *s);
    s->o = *o;
    s->share = cv_sched_share_create(o->n_threads > 0 ? o->n_threads : o->backend.n_threads);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (o->keep_alive_ms > 0) {
        int prc = pthread_create(&s->reaper, NULL, reaper_main, s);
        if (prc) {
            cv_model_set_destroy(s);
            return cv_err_set(err, CV_EIO, "model set: cannot start the keep-alive thread: %s", strerror(prc));
        }
        s->reaper_on = true;
    }
    *out = s;
    return 0;
}

void cv_model_set_destroy(cv_model_set *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->reaper_on)
        pthread_join(s->reaper, NULL);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        cv_model_slot *m = s->m[i];
        if (m->opened && m->state == M_LOADED)
            close_model(s, m);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        cv_model_slot *m = s->m[i];
        free(m->name), free(m->path), free(m->key);
        for (int k = 0; k < m->n_aliases; k++)
            free(m->aliases[k]);
        free(m->aliases);
        cv_metrics_fini(&m->metrics);
        free(m);
    }
    for (int i = 0; i < s->n_routes; i++)
        free(s->routes[i].pattern);
    free(s->routes);
    free(s->m);
    cv_sched_share_destroy(s->share);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int check_free(cv_model_set *s, const char *name, cv_err *err)
{
    if (!name || !*name)
        return cv_err_set(err, CV_EINVAL, "a model needs a name");
    if (strlen(name) > CV_MAX_MODEL_NAME)
        return cv_err_set(err, CV_ELIMIT, "model name '%.40s...' is longer than %d bytes", name, CV_MAX_MODEL_NAME);
    if (cv_model_set_named(s, name))
        return cv_err_set(err, CV_EINVAL, "two models are called '%s'; give them other names", name);
    if (s->n >= CV_MAX_SERVED_MODELS)
        return cv_err_set(err, CV_ELIMIT, "more than %d models", CV_MAX_SERVED_MODELS);
    return 0;
}

static cv_model_slot *add_slot(cv_model_set *s, const char *name)
{
    cv_model_slot *m = cv_xcalloc(1, sizeof *m);
    m->name = cv_xstrdup(name);
    cv_metrics_init(&m->metrics);
    pthread_mutex_lock(&s->mu);
    s->m = cv_xrealloc(s->m, (size_t)(s->n + 1) * sizeof *s->m);
    s->m[s->n++] = m;
    pthread_mutex_unlock(&s->mu);
    return m;
}

int cv_model_set_add(cv_model_set *s, const cv_model_spec *spec, cv_err *err)
{
    int rc;
    if ((rc = check_free(s, spec->name, err)))
        return rc;
    for (int i = 0; i < spec->n_aliases; i++)
        if (strcasecmp(spec->aliases[i], spec->name) && (rc = check_free(s, spec->aliases[i], err)))
            return rc;
    if (!spec->path || !*spec->path)
        return cv_err_set(err, CV_EINVAL, "model '%s' has no file", spec->name);
    cv_model_slot *m = add_slot(s, spec->name);
    m->path = cv_xstrdup(spec->path);
    m->aliases = cv_xcalloc((size_t)CV_MAX(spec->n_aliases, 1), sizeof *m->aliases);
    for (int i = 0; i < spec->n_aliases; i++)
        if (strcasecmp(spec->aliases[i], spec->name))
            m->aliases[m->n_aliases++] = cv_xstrdup(spec->aliases[i]);
    m->pooling = spec->pooling;
    m->min_dims = spec->min_dims;
    m->preload = spec->preload;
    cv_server_backend_opts o = opts_for(s, m);
    m->bytes = file_bytes(m->path) + CV_MAX(o.kv_bytes, (int64_t)0);
    return 0;
}

int cv_model_set_add_backend(cv_model_set *s, const cv_server_backend *be, cv_err *err)
{
    int rc = check_free(s, be->model_id, err);
    if (rc)
        return rc;
    cv_model_slot *m = add_slot(s, be->model_id);
    m->fixed = true;
    m->state = M_LOADED;
    m->be = be;
    m->bytes = be->mem_bytes;
    m->last_used = cv_now_ns();
    return 0;
}

int cv_model_set_route(cv_model_set *s, const char *pattern, const char *model, cv_err *err)
{
    cv_model_slot *m = cv_model_set_named(s, model);
    if (!m)
        return cv_err_set(err, CV_EINVAL, "route '%s': no model is called '%s'", pattern, model);
    if (!*pattern)
        return cv_err_set(err, CV_EINVAL, "route to '%s': the pattern is empty", model);
    if (s->n_routes >= CV_MAX_MODEL_ROUTES)
        return cv_err_set(err, CV_ELIMIT, "more than %d routes", CV_MAX_MODEL_ROUTES);
    s->routes = cv_xrealloc(s->routes, (size_t)(s->n_routes + 1) * sizeof *s->routes);
    s->routes[s->n_routes++] = (route){ cv_xstrdup(pattern), m };
    return 0;
}

int cv_model_set_key(cv_model_set *s, const char *model, const char *key, cv_err *err)
{
    cv_model_slot *m = cv_model_set_named(s, model);
    if (!m)
        return cv_err_set(err, CV_EINVAL, "model key: no model is called '%s'", model);
    if (!key || !*key)
        return cv_err_set(err, CV_EINVAL, "model key for '%s': the key is empty", model);
    free(m->key);
    m->key = cv_xstrdup(key);
    s->has_keys = true;
    return 0;
}

int cv_model_set_default(cv_model_set *s, const char *model, cv_err *err)
{
    cv_model_slot *m = model ? cv_model_set_named(s, model) : NULL;
    if (model && !m)
        return cv_err_set(err, CV_EINVAL, "default model: no model is called '%s'", model);
    s->def = m;
    return 0;
}

int cv_model_set_preload(cv_model_set *s, cv_err *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    for (int i = 0; i < s->n && !rc; i++) {
        cv_model_slot *m = s->m[i];
        if (!m->preload || m->state != M_UNLOADED)
            continue;
        if ((s->o.max_loaded > 0 && n_held(s) >= s->o.max_loaded) ||
            (s->o.memory_limit > 0 && held_bytes(s) + m->bytes > s->o.memory_limit)) {
            cv_info("model %s: not loaded at start (the limits hold no more); it loads when asked for", m->name);
            continue;
        }
        if ((rc = open_model(s, m, err)) == 0)
            m->active--; /* open_model held it for a request */
    }
    s->ready = rc == 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- what the probes and pages read ---- */

bool cv_model_set_ready(cv_model_set *s)
{
    cv_model_slot *one = cv_model_set_single(s);
    if (one && one->fixed)
        return !one->be->ready || one->be->ready(one->be->ctx);
    return s->ready;
}

bool cv_model_slot_loaded(cv_model_set *s, cv_model_slot *m)
{
    pthread_mutex_lock(&s->mu);
    bool ok = m->state == M_LOADED && (!m->be->ready || m->be->ready(m->be->ctx));
    pthread_mutex_unlock(&s->mu);
    return ok;
}

cv_model_slot *cv_model_set_single(cv_model_set *s) { return s->n == 1 ? s->m[0] : NULL; }
const char *cv_model_set_default_name(cv_model_set *s) { return s->def ? s->def->name : NULL; }

void cv_model_set_visit(cv_model_set *s, cv_model_visit_fn fn, void *ud)
{
    for (int i = 0;; i++) {
        pthread_mutex_lock(&s->mu);
        if (i >= s->n) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        cv_model_slot *m = s->m[i];
        const cv_server_backend *be = m->state == M_LOADED ? m->be : NULL;
        if (be)
            m->active++; /* held: it is not closed while fn reads it */
        pthread_mutex_unlock(&s->mu);
        fn(ud, m, be);
        if (be) {
            pthread_mutex_lock(&s->mu);
            m->active--;
            if (m->active == 0)
                pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->mu);
        }
    }
}

json_t *cv_model_slot_json(cv_model_set *s, cv_model_slot *m)
{
    pthread_mutex_lock(&s->mu);
    json_t *al = json_array();
    for (int i = 0; i < m->n_aliases; i++)
        json_array_append_new(al, json_string(m->aliases[i]));
    const bool held = m->state == M_LOADED;
    json_t *o = json_pack("{s:s, s:o, s:s, s:b, s:I, s:i, s:I, s:I, s:I, s:f}", "name", m->name, "aliases", al,
                          "state", state_names[m->state], "default", m == s->def, "memory_bytes",
                          (json_int_t)(held || m->state == M_UNLOADING ? m->bytes : 0), "active_requests", m->active,
                          "loads", (json_int_t)m->n_loads, "unloads", (json_int_t)m->n_unloads, "load_failures",
                          (json_int_t)m->n_failures, "last_load_ms", m->last_load_ms);
    json_object_set_new(o, "path", m->path ? json_string(m->path) : json_null());
    json_object_set_new(o, "idle_s", held && m->active == 0 ? json_real((double)(cv_now_ns() - m->last_used) / 1e9)
                                                            : json_null());
    json_object_set_new(o, "last_error", m->n_failures ? cv_json_strz(m->fail.msg) : json_null());
    if (held)
        json_object_set_new(o, "embedding", json_boolean(m->be->pooling != CV_POOL_NONE));
    pthread_mutex_unlock(&s->mu);
    return o;
}

json_t *cv_model_set_json(cv_model_set *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *routes = json_array();
    for (int i = 0; i < s->n_routes; i++)
        json_array_append_new(routes, json_pack("{s:s, s:s}", "pattern", s->routes[i].pattern, "model",
                                                s->routes[i].to->name));
    json_t *o = json_pack("{s:i, s:I, s:I, s:f, s:I, s:I, s:o}", "max_loaded", s->o.max_loaded,
                          "memory_limit_bytes", (json_int_t)s->o.memory_limit, "memory_bytes",
                          (json_int_t)held_bytes(s), "keep_alive_s", (double)s->o.keep_alive_ms / 1e3, "loads",
                          (json_int_t)s->loads, "unloads", (json_int_t)s->unloads, "routes", routes);
    json_object_set_new(o, "default", s->def ? json_string(s->def->name) : json_null());
    pthread_mutex_unlock(&s->mu);
    return o;
}

/* One metric with a sample per model: what of m it shows. */
typedef double (*slot_value)(const cv_model_slot *m, uint64_t now);

static double v_loaded(const cv_model_slot *m, uint64_t now) { return m->state == M_LOADED; }
static double v_bytes(const cv_model_slot *m, uint64_t now)
{
    return m->state == M_LOADED || m->state == M_UNLOADING ? (double)m->bytes : 0;
}
static double v_idle(const cv_model_slot *m, uint64_t now)
{
    return m->state == M_LOADED && m->active == 0 ? (double)(now - m->last_used) / 1e9 : 0;
}
static double v_active(const cv_model_slot *m, uint64_t now) { return m->active; }
static double v_loads(const cv_model_slot *m, uint64_t now) { return (double)m->n_loads; }
static double v_unloads(const cv_model_slot *m, uint64_t now) { return (double)m->n_unloads; }
static double v_failures(const cv_model_slot *m, uint64_t now) { return (double)m->n_failures; }

static const struct {
    const char *name, *help, *type;
    slot_value v;
} slot_metrics[] = {
    { "corvid_model_loaded", "1 while the model is loaded.", "gauge", v_loaded },
    { "corvid_model_memory_bytes", "What the model holds while loaded: weights, KV pool, states.", "gauge", v_bytes },
    { "corvid_model_idle_seconds", "Since the loaded model's last request ended (0 while in use or unloaded).",
      "gauge", v_idle },
    { "corvid_model_active_requests", "Requests holding the model now.", "gauge", v_active },
    { "corvid_model_loads_total", "Times the model was loaded.", "counter", v_loads },
    { "corvid_model_unloads_total", "Times the model was unloaded (idle, or to make room).", "counter", v_unloads },
    { "corvid_model_load_failures_total", "Loads of the model that failed.", "counter", v_failures },
};

void cv_model_set_metrics(cv_model_set *s, cv_buf *out)
{
    pthread_mutex_lock(&s->mu);
    const uint64_t now = cv_now_ns();
    for (size_t k = 0; k < CV_ARRAY_LEN(slot_metrics); k++) {
        cv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", slot_metrics[k].name, slot_metrics[k].help,
                      slot_metrics[k].name, slot_metrics[k].type);
        for (int i = 0; i < s->n; i++) {
            cv_buf_printf(out, "%s{", slot_metrics[k].name);
            cv_metrics_label(out, "model", s->m[i]->name);
            const double v = slot_metrics[k].v(s->m[i], now);
            cv_buf_printf(out, v == (double)(int64_t)v ? "} %.0f\n" : "} %.3f\n", v);
        }
    }
    cv_buf_printf(out, "# HELP corvid_models_memory_limit_bytes --memory-limit (0: none).\n"
                       "# TYPE corvid_models_memory_limit_bytes gauge\ncorvid_models_memory_limit_bytes %lld\n",
                  (long long)s->o.memory_limit);
    pthread_mutex_unlock(&s->mu);
}
