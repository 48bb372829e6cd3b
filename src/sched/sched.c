/* sched.c — the scheduler's public side: creating and destroying it (with
 * the cache file read at start and written at the end), submitting
 * requests (validated in the caller's thread, so a request that can never
 * run fails at once), each request's event queue, cancel and release, and
 * the statistics, /v1/status and /metrics views. The engine thread and its
 * step loop live in sched_step.c.
 *
 * A request is reference counted between its caller and the scheduler, so
 * either may let go first; the scheduler's reference ends with the final
 * event (DONE or ERROR), which every request gets exactly once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sched/sched_int.h"


/* ---- requests and their event queues ---- */

static void req_free(cv_sched_req *r)
{
    if (r->hook && r->hook->destroy)
        r->hook->destroy(r->hook_ud);
    cv_sampler_destroy(r->sampler);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r->tokens);
    free(r->stop);
    free(r->evs);
    free(r->scratch_logits);
    free(r->pool_acc);
    free(r->embd);
    free(r);
}

void cv_sched_req_unref(cv_sched_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        req_free(r);
}

void cv_sched_push_event(cv_sched_req *r, const cv_sched_event *ev)
{
    pthread_mutex_lock(&r->mu);
    if (r->head > 0 && r->head == r->n_evs)
        r->head = r->n_evs = 0;
    if (r->n_evs == r->cap_evs) {
        if (r->head > 0) { /* slide the unread tail down before growing */
            memmove(r->evs, r->evs + r->head, (size_t)(r->n_evs - r->head) * sizeof *r->evs);
            r->n_evs -= r->head;
            r->head = 0;
        }
        if (r->n_evs == r->cap_evs) {
            r->cap_evs = r->cap_evs ? 2 * r->cap_evs : 16;
            r->evs = cv_xrealloc(r->evs, (size_t)r->cap_evs * sizeof *r->evs);
        }
    }
    r->evs[r->n_evs++] = *ev;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

int cv_sched_next(cv_sched_req *r, int timeout_ms, cv_sched_event *ev)
{
    struct timespec deadline;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&r->mu);
    while (r->head == r->n_evs) {
        if (r->final_read) {
            pthread_mutex_unlock(&r->mu);
            return CV_EINVAL; /* nothing will ever come */
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&r->cond, &r->mu);
        } else if (pthread_cond_timedwait(&r->cond, &r->mu, &deadline) == ETIMEDOUT && r->head == r->n_evs) {
            pthread_mutex_unlock(&r->mu);
            return CV_EBUSY;
        }
    }
    *ev = r->evs[r->head++];
    if (ev->type == CV_SCHED_DONE || ev->type == CV_SCHED_ERROR)
        r->final_read = true;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void cv_sched_cancel(cv_sched_req *r)
{
    /* A flag only: the request may outlive its scheduler (released after
     * cv_sched_destroy). The engine thread never sleeps while a request
     * waits or runs, so the flag is read within a step. */
    if (r)
        atomic_store(&r->cancel, true);
}

void cv_sched_release(cv_sched_req *r)
{
    if (!r)
        return;
    cv_sched_cancel(r);
    cv_sched_req_unref(r);
}

/* ---- submit ---- */

int cv_sched_submit(cv_sched *s, const cv_sched_params *p, cv_sched_req **out, cv_err *err)
{
    *out = NULL;
    const cv_engine_params *ep = cv_engine_params_get(s->e);
    const int64_t pool_tokens = s->mem.max_positions;
    if (p->n_prompt < 1)
        return cv_err_set(err, CV_EINVAL, "request: the prompt is empty; at least one token is needed");
    const bool embed = p->pooling != CV_POOL_NONE;
    if (embed && p->pooling != CV_POOL_MEAN && p->pooling != CV_POOL_CLS && p->pooling != CV_POOL_LAST)
        return cv_err_set(err, CV_EINVAL, "request: pooling %d, must be mean (1), cls (2) or last (3)", (int)p->pooling);
    if (embed ? p->max_tokens != 0 : p->max_tokens < 1)
        return cv_err_set(err, CV_EINVAL, "request: max_tokens = %d, must be %s", p->max_tokens,
                          embed ? "0 for an embedding" : "at least 1");
    if ((int64_t)p->n_prompt + p->max_tokens > ep->n_ctx)
        return cv_err_set(err, CV_EINVAL, "request: prompt of %d tokens plus max_tokens %d exceeds the context "
                          "of %d tokens", p->n_prompt, p->max_tokens, ep->n_ctx);
    /* The prompt must fit the pool with everything else evicted or
     * preempted; generation beyond the pool ends with CV_FINISH_CONTEXT. */
    if (p->n_prompt >= pool_tokens)
        return cv_err_set(err, CV_EINVAL, "request: prompt of %d tokens exceeds the KV cache of %lld tokens",
                          p->n_prompt, (long long)pool_tokens);
    for (int32_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->n_vocab)
            return cv_err_set(err, CV_EINVAL, "request: prompt token %d has id %d, must be 0..%d", i, p->prompt[i],
                              s->n_vocab - 1);
    if (p->n_stop_tokens < 0 || p->n_stop_tokens > CV_MAX_STOP_TOKENS)
        return cv_err_set(err, CV_EINVAL, "request: %d stop tokens, must be 0..%d", p->n_stop_tokens,
                          CV_MAX_STOP_TOKENS);
    if (p->n_top_logprobs < 0 || p->n_top_logprobs > CV_MAX_TOP_LOGPROBS)
        return cv_err_set(err, CV_EINVAL, "request: top_logprobs = %d, must be 0..%d", p->n_top_logprobs,
                          CV_MAX_TOP_LOGPROBS);
    if (p->hook && !p->hook->choose)
        return cv_err_set(err, CV_EINVAL, "request: a sampling hook without a choose function");

    cv_sample_params sp = p->sample;
    if (!sp.has_seed) {
        pthread_mutex_lock(&s->mu);
        sp.seed = cv_rng_u64(&s->seeds);
        pthread_mutex_unlock(&s->mu);
        sp.has_seed = true;
    }
    cv_sampler *sampler = NULL;
    int rc = embed ? 0 : cv_sampler_create(&sp, s->n_vocab, &sampler, err);
    if (rc)
        return rc;

    cv_sched_req *r = cv_xcalloc(1, sizeof *r);
    r->s = s;
    r->sampler = sampler;
    if (embed) {
        r->pool = p->pooling;
        r->n_embd = cv_engine_model(s->e)->hp.n_embd;
        r->pool_acc = cv_xcalloc((size_t)r->n_embd, sizeof *r->pool_acc);
        r->embd = cv_xcalloc((size_t)r->n_embd, sizeof *r->embd);
    }
    r->n_prompt = p->n_prompt;
    r->max_tokens = p->max_tokens;
    r->tokens = cv_xmalloc(((size_t)p->n_prompt + (size_t)p->max_tokens) * sizeof *r->tokens);
    memcpy(r->tokens, p->prompt, (size_t)p->n_prompt * sizeof *r->tokens);
    r->n_tokens = p->n_prompt;
    r->draft_k = CV_SCHED_DRAFT_MAX; /* the scheduler's draft_max bounds it */
    r->draft_accept = CV_SCHED_DRAFT_PRIOR;
    r->n_stop = p->n_stop_tokens;
    if (r->n_stop) {
        r->stop = cv_xmalloc((size_t)r->n_stop * sizeof *r->stop);
        memcpy(r->stop, p->stop_tokens, (size_t)r->n_stop * sizeof *r->stop);
    }
    r->n_top = p->n_top_logprobs;
    r->logprobs = p->logprobs;
    r->seq = -1;
    r->phase = PHASE_WAITING;
    r->t_submit = cv_now_ns();
    atomic_init(&r->cancel, false);
    atomic_init(&r->refs, 2); /* the caller and the scheduler */
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_mutex_lock(&s->mu);
    if (s->quit || s->q_len >= s->queue_max) {
        bool quit = s->quit;
        s->st.busy_refusals += !quit;
        pthread_mutex_unlock(&s->mu);
        req_free(r); /* the hook's state still belongs to the caller */
        return quit ? cv_err_set(err, CV_EBUSY, "scheduler: shutting down")
                    : cv_err_set(err, CV_EBUSY, "scheduler: %d requests are already waiting; retry later",
                                 s->queue_max);
    }
    r->hook = p->hook;
    r->hook_ud = p->hook_ud;
    r->id = ++s->next_id;
    if (s->q_tail)
        s->q_tail->next = r;
    else
        s->q_head = r;
    s->q_tail = r;
    s->q_len++;
    s->st.submitted++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return 0;
}

/* ---- lifecycle ---- */

int cv_sched_create(cv_engine *e, const cv_sched_config *cfg, cv_sched **out, cv_err *err)
{
    *out = NULL;
    const cv_engine_params *ep = cv_engine_params_get(e);
    cv_sched *s = cv_xcalloc(1, sizeof *s);
    s->e = e;
    s->n_vocab = cv_engine_model(e)->hp.n_vocab;
    s->queue_max = cfg && cfg->queue_max > 0 ? CV_MIN(cfg->queue_max, CV_MAX_SCHED_QUEUE) : CV_MAX_SCHED_QUEUE;
    s->batch_tokens = cfg && cfg->batch_tokens > 0 ? cfg->batch_tokens : CV_SCHED_BATCH_TOKENS_DEFAULT;
    s->batch_tokens = CV_MIN(s->batch_tokens, ep->n_batch);
    /* Every running sequence puts one token in each step and wants one row
     * of logits, so the budget and the engine's rows bound them too. */
    s->max_running = CV_MIN(CV_MIN(ep->n_seq_max, s->batch_tokens), ep->n_logits);
    s->prefix_cache = !(cfg && cfg->no_prefix_cache);
    cv_engine_mem_info(e, &s->mem);
    s->snap_unit = CV_MAX(CV_KV_BLOCK, s->mem.split_align);
    if (s->prefix_cache && s->mem.state_bytes > 0) {
        const int64_t every = (int64_t)CV_MAX(CV_SCHED_SNAP_EVERY_MIN, s->mem.snapshot_blocks) * CV_KV_BLOCK;
        s->snap_every = (int32_t)CV_MIN((every + s->snap_unit - 1) / s->snap_unit * s->snap_unit, INT32_MAX / 2);
    }
    /* A prefill chunk of a model whose bits depend on its splits may run
     * past the budget to the next point of the split grid (build_batch):
     * the batch holds one grid chunk more, as far as the engine takes. */
    s->batch_cap = (int32_t)CV_MIN((int64_t)ep->n_batch,
                                   (int64_t)s->batch_tokens + (s->mem.split_align > 1 ? s->mem.split_align : 0));
    s->cache_max_bytes = cfg && cfg->cache_max_bytes > 0 ? cfg->cache_max_bytes : CV_SCHED_CACHE_FILE_DEFAULT;
    cv_rng_seed(&s->seeds, cfg && cfg->seed ? cfg->seed : cv_now_ns() ^ (uint64_t)(uintptr_t)s);
    s->running = cv_xcalloc((size_t)s->max_running, sizeof *s->running);
    s->b_tok = cv_xmalloc((size_t)s->batch_cap * sizeof *s->b_tok);
    s->b_seq = cv_xmalloc((size_t)s->batch_cap * sizeof *s->b_seq);
    s->b_pos = cv_xmalloc((size_t)s->batch_cap * sizeof *s->b_pos);
    s->b_want = cv_xmalloc((size_t)s->batch_cap * sizeof *s->b_want);
    s->b_req = cv_xmalloc((size_t)s->max_running * sizeof *s->b_req);
    s->b_n = cv_xmalloc((size_t)s->max_running * sizeof *s->b_n);
    s->b_draft = cv_xmalloc((size_t)s->max_running * sizeof *s->b_draft);
    s->n_logits = ep->n_logits;
    s->share = cfg ? cfg->share : NULL;
    s->draft_max = !cfg || cfg->draft_tokens == 0 ? CV_SCHED_DRAFT_DEFAULT
                   : cfg->draft_tokens < 0        ? 0
                                                  : CV_MIN(cfg->draft_tokens, CV_SCHED_DRAFT_MAX);
    /* Drafts are weighed against what attention and a step cost (a few
     * clock reads per layer). */
    cv_engine_set_profiling(e, s->draft_max > 0);
    s->path = cv_xmalloc(((size_t)ep->n_ctx / CV_KV_BLOCK + 1) * sizeof *s->path);
    s->spans = cv_xmalloc(((size_t)ep->n_ctx / CV_KV_BLOCK + 1) * sizeof *s->spans);
    rx_init(&s->tree, e);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);

    if (s->prefix_cache && cfg && cfg->cache_dir && *cfg->cache_dir) {
        char name[64];
        cv_sched_cache_file_name(e, name, sizeof name);
        cv_buf path = { 0 };
        cv_buf_printf(&path, "%s/%s", cfg->cache_dir, name);
        s->cache_path = cv_buf_steal(&path);
        int64_t loaded = 0;
        cv_err lerr = { 0 };
        int32_t max_blocks = (int32_t)((int64_t)cv_engine_kv_n_blocks(e) * CV_SCHED_CACHE_LOAD_PERCENT / 100);
        uint64_t t0 = cv_now_ns();
        int lrc = cv_sched_cache_load(&s->tree, s->cache_path, max_blocks, &loaded, &lerr);
        if (lrc == 0)
            cv_info("prefix cache: loaded %lld blocks (%lld tokens) from %s in %.0f ms", (long long)loaded,
                    (long long)loaded * CV_KV_BLOCK, s->cache_path, (double)(cv_now_ns() - t0) / 1e6);
        else if (lrc != CV_ENOTFOUND)
            cv_warn("prefix cache: ignoring %s: %s", s->cache_path, lerr.msg);
        s->st.file_blocks_loaded = loaded;
    }
    s->st.snapshots = s->tree.n_snaps;
    s->st.snapshot_blocks = (int64_t)s->tree.n_snaps * s->mem.snapshot_blocks;
    s->st.tree_blocks = s->tree.n_nodes + s->st.snapshot_blocks;
    s->st.state_bytes = (int64_t)s->mem.state_bytes;
    s->st.kv_blocks = cv_engine_kv_n_blocks(e);
    s->st.kv_blocks_free = cv_engine_kv_free_blocks(e);
    s->st.n_kv_groups = s->mem.n_groups;
    memcpy(s->st.kv_groups, s->mem.group, sizeof s->st.kv_groups);

    int rc = pthread_create(&s->thread, NULL, cv_sched_engine_main, s);
    if (rc) {
        rx_fini(&s->tree);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cond);
        free(s->cache_path);
        free(s->running);
        free(s->b_tok), free(s->b_seq), free(s->b_pos), free(s->b_want), free(s->b_req), free(s->b_n);
        free(s->b_draft);
        free(s->path);
        free(s->spans);
        free(s);
        return cv_err_set(err, CV_EIO, "scheduler: cannot start the engine thread: %s", strerror(rc));
    }
    *out = s;
    return 0;
}

void cv_sched_destroy(cv_sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->quit = true; /* from here submit refuses */
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* running requests end as canceled */
    /* What still waits (preempted ones included) ends here, never having
     * run; the engine thread is gone, so no lock is needed. */
    cv_sched_req *waiting = s->q_head;
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    while (waiting) {
        cv_sched_req *next = waiting->next;
        cv_sched_finish_waiting(waiting);
        waiting = next;
    }
    if (s->cache_path) {
        cv_err err = { 0 };
        int64_t saved = 0;
        uint64_t t0 = cv_now_ns();
        if (cv_sched_cache_save(&s->tree, s->cache_path, s->cache_max_bytes, &saved, &err))
            cv_warn("prefix cache: not saved: %s", err.msg);
        else if (saved)
            cv_info("prefix cache: saved %lld blocks to %s in %.0f ms", (long long)saved, s->cache_path,
                    (double)(cv_now_ns() - t0) / 1e6);
    }
    rx_fini(&s->tree);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s->cache_path);
    free(s->running);
    free(s->b_tok);
    free(s->b_seq);
    free(s->b_pos);
    free(s->b_want);
    free(s->b_req);
    free(s->b_n);
    free(s->b_draft);
    free(s->path);
    free(s->spans);
    free(s);
}

/* ---- statistics and status ---- */

static void stats_locked(cv_sched *s, cv_sched_stats *out)
{
    *out = s->st;
    out->running = s->n_running;
    out->queue_depth = s->q_len;
    out->kv_blocks_used = out->kv_blocks - out->kv_blocks_free;
}

void cv_sched_get_stats(cv_sched *s, cv_sched_stats *out)
{
    pthread_mutex_lock(&s->mu);
    stats_locked(s, out);
    pthread_mutex_unlock(&s->mu);
}

static const char *phase_name(req_phase p)
{
    return p == PHASE_PREFILL ? "prefill" : p == PHASE_DECODE ? "decode" : "waiting";
}

static json_t *req_json(const cv_sched_req *r, uint64_t now)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer((json_int_t)r->id));
    json_object_set_new(o, "phase", json_string(phase_name(r->phase)));
    json_object_set_new(o, "prompt_tokens", json_integer(r->n_prompt));
    json_object_set_new(o, "cached_tokens", json_integer(r->st_cached));
    json_object_set_new(o, "computed_tokens", json_integer(r->st_computed));
    json_object_set_new(o, "kv_positions", json_integer(r->st_done));
    json_object_set_new(o, "generated_tokens", json_integer(r->st_gen));
    json_object_set_new(o, "max_tokens", json_integer(r->max_tokens));
    /* what its sequence holds besides KV: the recurrent state (a waiting
     * request holds none) */
    json_object_set_new(o, "state_bytes",
                        json_integer(r->phase == PHASE_WAITING ? 0 : (json_int_t)r->s->mem.state_bytes));
    double tps = 0;
    if (r->t_first_token && r->t_last_token > r->t_first_token && r->st_gen > 1)
        tps = (r->st_gen - 1) / ((double)(r->t_last_token - r->t_first_token) / 1e9);
    json_object_set_new(o, "tokens_per_second", json_real(tps));
    if (r->t_first_token)
        json_object_set_new(o, "ttft_seconds", json_real((double)(r->t_first_token - r->t_submit) / 1e9));
    json_object_set_new(o, "age_seconds", json_real((double)(now - r->t_submit) / 1e9));
    return o;
}

json_t *cv_sched_status(cv_sched *s)
{
    uint64_t now = cv_now_ns();
    json_t *running = json_array(), *waiting = json_array();
    cv_sched_stats st;
    pthread_mutex_lock(&s->mu);
    for (int32_t i = 0; i < s->n_running; i++)
        json_array_append_new(running, req_json(s->running[i], now));
    for (const cv_sched_req *r = s->q_head; r; r = r->next)
        json_array_append_new(waiting, req_json(r, now));
    stats_locked(s, &st);
    pthread_mutex_unlock(&s->mu);

    json_t *o = json_object();
    json_object_set_new(o, "running", running);
    json_object_set_new(o, "waiting", waiting);
    json_t *cache = json_object();
    json_object_set_new(cache, "enabled", json_boolean(s->prefix_cache));
    json_object_set_new(cache, "lookups", json_integer(st.lookups));
    json_object_set_new(cache, "hits", json_integer(st.hits));
    json_object_set_new(cache, "hit_tokens", json_integer(st.cached_tokens));
    json_object_set_new(cache, "prompt_tokens", json_integer(st.prompt_tokens));
    json_object_set_new(cache, "hit_rate", json_real(st.prompt_tokens ? (double)st.cached_tokens / st.prompt_tokens : 0));
    json_object_set_new(cache, "evictions", json_integer(st.evictions));
    json_object_set_new(cache, "blocks_in_tree", json_integer(st.tree_blocks));
    json_object_set_new(cache, "file", s->cache_path ? json_string(s->cache_path) : json_null());
    json_object_set_new(cache, "file_blocks_loaded", json_integer(st.file_blocks_loaded));
    json_object_set_new(cache, "snapshots", json_integer(st.snapshots));
    json_object_set_new(cache, "snapshot_blocks", json_integer(st.snapshot_blocks));
    json_object_set_new(cache, "snapshots_taken", json_integer(st.snapshots_taken));
    json_object_set_new(cache, "snapshot_hits", json_integer(st.snapshot_hits));
    json_object_set_new(o, "cache", cache);
    json_t *kv = json_object();
    json_object_set_new(kv, "type", json_string(cv_engine_kv_type_name(cv_engine_params_get(s->e)->kv_type)));
    json_object_set_new(kv, "block_positions", json_integer(CV_KV_BLOCK));
    json_object_set_new(kv, "block_bytes", json_integer((json_int_t)s->mem.block_bytes));
    json_object_set_new(kv, "blocks", json_integer(st.kv_blocks));
    json_object_set_new(kv, "free", json_integer(st.kv_blocks_free));
    json_object_set_new(kv, "used", json_integer(st.kv_blocks_used));
    json_object_set_new(kv, "recurrent_layers", json_integer(s->mem.n_state_layers));
    json_object_set_new(kv, "state_bytes_per_sequence", json_integer(st.state_bytes));
    json_object_set_new(kv, "snapshot_bytes", json_integer((json_int_t)(st.snapshot_blocks *
                                                                        (int64_t)s->mem.group[0].format.block_bytes)));
    /* per layer group: a window group's blocks are what its windows hold */
    json_t *groups = json_array();
    double kv_bytes = 0;
    for (int32_t g = 0; g < st.n_kv_groups; g++) {
        const cv_mem_group_info *k = &st.kv_groups[g];
        const int32_t used = k->n_blocks - k->n_free;
        const double bytes = (double)used * (double)k->format.block_bytes;
        kv_bytes += bytes;
        json_array_append_new(groups, json_pack("{s:i, s:i, s:i, s:i, s:f}", "window", k->window, "layers",
                                                k->format.n_layer, "blocks", k->n_blocks, "used", used, "bytes_used",
                                                bytes));
    }
    json_object_set_new(kv, "bytes_used", json_real(kv_bytes));
    json_object_set_new(kv, "groups", groups);
    json_object_set_new(o, "kv", kv);
    json_t *tot = json_object();
    json_object_set_new(tot, "submitted", json_integer(st.submitted));
    json_object_set_new(tot, "finished", json_integer(st.n_requests));
    json_object_set_new(tot, "refused_busy", json_integer(st.busy_refusals));
    json_object_set_new(tot, "preemptions", json_integer(st.preemptions));
    json_object_set_new(tot, "steps", json_integer(st.steps));
    json_object_set_new(tot, "computed_tokens", json_integer(st.n_tokens_prompt));
    json_object_set_new(tot, "generated_tokens", json_integer(st.n_tokens_generated));
    json_object_set_new(tot, "batch_tokens", json_integer(s->batch_tokens));
    json_object_set_new(tot, "max_running", json_integer(s->max_running));
    json_t *spec = json_object();
    json_object_set_new(spec, "max_draft_tokens", json_integer(s->draft_max));
    json_object_set_new(spec, "draft_tokens", json_integer(st.draft_tokens));
    json_object_set_new(spec, "accepted_tokens", json_integer(st.draft_accepted));
    json_object_set_new(spec, "declined_tokens", json_integer(st.draft_declined));
    json_object_set_new(spec, "recomputed_tokens", json_integer(st.draft_recomputed));
    json_object_set_new(spec, "step_ms", json_real(st.step_base_s * 1e3));
    json_object_set_new(spec, "attention_ms_per_1k_positions", json_real(st.att_per_pos_s * 1e6));
    json_object_set_new(spec, "acceptance",
                        json_real(st.draft_tokens ? (double)st.draft_accepted / (double)st.draft_tokens : 0));
    json_object_set_new(o, "speculation", spec);
    json_object_set_new(o, "totals", tot);
    return o;
}

/* The figures /metrics shows, each a field of cv_sched_stats. */
typedef struct sched_metric {
    const char *name, *help, *type;
    size_t offset; /* of an int64_t in cv_sched_stats */
} sched_metric;

#define M(name, help, type, field) { name, help, type, offsetof(cv_sched_stats, field) }
static const sched_metric metrics[] = {
    M("corvid_sched_steps_total", "Scheduler steps (forward calls).", "counter", steps),
    M("corvid_sched_preemptions_total", "Sequences preempted for KV memory (recomputed later).", "counter",
      preemptions),
    M("corvid_sched_busy_refusals_total", "Submits refused because the queue was full.", "counter", busy_refusals),
    M("corvid_sched_computed_tokens_total", "Prompt tokens prefilled (recompute included).", "counter",
      n_tokens_prompt),
    M("corvid_prefix_cache_lookups_total", "Admissions that searched the prefix cache.", "counter", lookups),
    M("corvid_prefix_cache_hits_total", "Admissions that reused at least one cached block.", "counter", hits),
    M("corvid_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.", "counter",
      cached_tokens),
    M("corvid_prefix_cache_evictions_total", "Cached blocks evicted (least recently used first).", "counter",
      evictions),
    M("corvid_prefix_cache_blocks", "KV-pool blocks held by the prefix cache (its snapshots' included).", "gauge",
      tree_blocks),
    M("corvid_kv_blocks_total", "KV blocks in the pool.", "gauge", kv_blocks),
    M("corvid_state_bytes_per_sequence", "Recurrent-state bytes one sequence holds (0: no recurrent layers).",
      "gauge", state_bytes),
    M("corvid_prefix_cache_snapshots", "Recurrent-state snapshots held by the prefix cache.", "gauge", snapshots),
    M("corvid_prefix_cache_snapshot_blocks", "KV-pool blocks the prefix cache's snapshots take.", "gauge",
      snapshot_blocks),
    M("corvid_prefix_cache_snapshots_taken_total", "Recurrent-state snapshots taken.", "counter", snapshots_taken),
    M("corvid_prefix_cache_snapshot_hits_total", "Admissions that resumed from a recurrent-state snapshot.",
      "counter", snapshot_hits),
    M("corvid_spec_draft_tokens_total", "Tokens drafted by prompt lookup and verified.", "counter", draft_tokens),
    M("corvid_spec_accepted_tokens_total", "Drafted tokens the sampler chose (a step saved each).", "counter",
      draft_accepted),
    M("corvid_spec_declined_tokens_total",
      "Drafted tokens not verified: deep in the context, unlikely enough to be taken to pay for their attention.",
      "counter", draft_declined),
    M("corvid_spec_recomputed_tokens_total",
      "Positions recomputed after a partly taken draft (a recurrent state cut back to its checkpoint).", "counter",
      draft_recomputed),
};
#undef M

void cv_sched_metrics(const cv_sched_stats *const *st, const char *const *labels, int n, cv_buf *out)
{
    for (size_t k = 0; k < CV_ARRAY_LEN(metrics); k++) {
        const sched_metric *m = &metrics[k];
        cv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
        for (int i = 0; i < n; i++)
            cv_buf_printf(out, "%s%s%s%s %lld\n", m->name, labels ? "{" : "", labels ? labels[i] : "",
                          labels ? "}" : "", (long long)*(const int64_t *)((const char *)st[i] + m->offset));
    }
}

/* ---- sizing ---- */

int64_t cv_sched_kv_tokens_for_bytes(const cv_model *m, uint32_t kv_type, int64_t kv_bytes)
{
    const int64_t per_block = (int64_t)cv_engine_kv_block_bytes(m, kv_type);
    int64_t blocks = per_block > 0 ? kv_bytes / per_block : 0;
    return blocks * CV_KV_BLOCK;
}

int64_t cv_sched_default_kv_bytes(const cv_model *m)
{
    int64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
                avail = (int64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    int64_t weights = (int64_t)cv_gguf_file_bytes(m->gguf);
    int64_t share = (avail - weights) / 2;
    return CV_MAX(share, (int64_t)64 << 20);
}

int cv_sched_default_cache_dir(char *out, size_t n, cv_err *err)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && *xdg)
        w = snprintf(out, n, "%s/corvid", xdg);
    else if (home && *home)
        w = snprintf(out, n, "%s/.cache/corvid", home);
    else
        return cv_err_set(err, CV_ENOTFOUND, "cache directory: neither XDG_CACHE_HOME nor HOME is set");
    if (w < 0 || (size_t)w >= n)
        return cv_err_set(err, CV_ELIMIT, "cache directory: the path is longer than %zu bytes", n - 1);
    return 0;
}
