/* sched_serial.c — the first scheduler: one engine thread serves requests
 * one at a time, in arrival order. HTTP threads submit (validated at once:
 * a request that can never run fails in the caller's thread) and then read
 * their request's own event queue; cancellation is a flag the engine thread
 * reads before every step. A request is reference counted between its
 * caller and the engine thread, so either may let go first.
 *
 * Invariants: the engine (and its sequence slot 0) is touched only by the
 * engine thread; every request gets exactly one final event (DONE or
 * ERROR), after which the engine thread drops its reference. Continuous
 * batching (issue 7) replaces run_request with a step loop over many
 * requests; the request and queue code stays. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "sched/sched.h"

struct cv_sched_req {
    cv_sched *s;
    int32_t *prompt;
    int32_t n_prompt;
    int32_t max_tokens;
    int32_t *stop;
    int32_t n_stop;
    int32_t n_top;
    bool logprobs;
    cv_sampler *sampler;
    _Atomic bool cancel;
    _Atomic int refs;
    cv_sched_req *next; /* in the scheduler's waiting queue */

    pthread_mutex_t mu;
    pthread_cond_t cond;
    cv_sched_event *evs; /* pending events: evs[head..n) */
    int32_t n_evs, head, cap_evs;
    bool final_read;     /* the caller has consumed DONE/ERROR */
};

struct cv_sched {
    cv_engine *e;
    int32_t queue_max;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    cv_sched_req *q_head, *q_tail;
    int32_t q_len;
    cv_sched_req *running;
    bool quit;
    cv_rng seeds;
    /* counters for cv_sched_get_stats, written under mu */
    int64_t kv_total, kv_free;
    int64_t n_done, n_prompt_tokens, n_gen_tokens;
};

/* ---- requests and their event queues ---- */

static void req_free(cv_sched_req *r)
{
    cv_sampler_destroy(r->sampler);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r->prompt);
    free(r->stop);
    free(r->evs);
    free(r);
}

static void req_unref(cv_sched_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        req_free(r);
}

static void push_event(cv_sched_req *r, const cv_sched_event *ev)
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

static void push_final(cv_sched_req *r, cv_sched_event *ev)
{
    push_event(r, ev);
    req_unref(r); /* the engine thread's reference */
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
    if (r)
        atomic_store(&r->cancel, true);
}

void cv_sched_release(cv_sched_req *r)
{
    if (!r)
        return;
    atomic_store(&r->cancel, true);
    req_unref(r);
}

/* ---- the engine thread ---- */

static cv_sched_event base_event(const cv_sched_req *r, cv_sched_event_type type, int32_t n_gen)
{
    cv_sched_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.n_prompt = r->n_prompt;
    ev.n_generated = n_gen;
    return ev;
}

static void count(cv_sched *s, int32_t n_prompt, int32_t n_gen)
{
    pthread_mutex_lock(&s->mu);
    s->n_done++;
    s->n_prompt_tokens += n_prompt;
    s->n_gen_tokens += n_gen;
    s->kv_free = cv_engine_kv_free_blocks(s->e);
    pthread_mutex_unlock(&s->mu);
}

static void finish(cv_sched_req *r, cv_finish_reason why, int32_t n_gen)
{
    cv_sched_event ev = base_event(r, CV_SCHED_DONE, n_gen);
    ev.finish = why;
    push_final(r, &ev);
}

static void fail(cv_sched_req *r, const cv_err *err, int32_t n_gen)
{
    cv_sched_event ev = base_event(r, CV_SCHED_ERROR, n_gen);
    ev.err = *err;
    push_final(r, &ev);
}

static bool is_stop(const cv_sched_req *r, int32_t tok)
{
    for (int32_t i = 0; i < r->n_stop; i++)
        if (r->stop[i] == tok)
            return true;
    return false;
}

/* Runs one request to its end. The final event goes out last, after the
 * sequence is closed and the counters are updated, so a caller that has
 * read DONE sees the scheduler's stats and KV pool already settled. */
static void run_request(cv_sched *s, cv_sched_req *r)
{
    cv_engine *e = s->e;
    const cv_engine_params *ep = cv_engine_params_get(e);
    const int32_t n_vocab = cv_engine_model(e)->hp.n_vocab;
    cv_err err = { 0 };
    cv_finish_reason why = CV_FINISH_NONE; /* NONE at the end: err holds a failure */
    int32_t seq = -1, n_gen = 0, *pos = NULL, *seqs = NULL;
    bool prompt_done = false;
    const float *logits = NULL;
    int32_t n_logits;
    if (atomic_load(&r->cancel)) {
        why = CV_FINISH_CANCELED;
        goto out;
    }
    if (cv_engine_seq_open(e, &seq, &err))
        goto out;
    /* Prefill in chunks of the engine's batch; logits of the last token only. */
    pos = cv_xmalloc((size_t)ep->n_batch * sizeof *pos);
    seqs = cv_xmalloc((size_t)ep->n_batch * sizeof *seqs);
    for (int32_t i = 0; i < ep->n_batch; i++)
        seqs[i] = seq;
    for (int32_t done = 0; done < r->n_prompt;) {
        if (atomic_load(&r->cancel)) {
            why = CV_FINISH_CANCELED;
            goto out;
        }
        int32_t n = CV_MIN(ep->n_batch, r->n_prompt - done);
        for (int32_t i = 0; i < n; i++)
            pos[i] = done + i;
        cv_batch b = { .n_tokens = n, .token = r->prompt + done, .seq = seqs, .pos = pos, .want = NULL };
        if (cv_engine_forward(e, &b, &logits, &n_logits, &err))
            goto out;
        done += n;
    }
    prompt_done = true;
    for (int32_t i = 0; i < r->n_prompt; i++)
        cv_sampler_accept(r->sampler, r->prompt[i]);
    cv_sched_event ev = base_event(r, CV_SCHED_PROMPT_DONE, 0);
    push_event(r, &ev);

    for (;;) {
        int32_t tok = cv_sampler_sample(r->sampler, logits);
        cv_sampler_accept(r->sampler, tok);
        n_gen++;
        ev = base_event(r, CV_SCHED_TOKEN, n_gen);
        ev.token = tok;
        if (r->logprobs || r->n_top > 0) {
            ev.n_top = r->n_top;
            cv_logprobs(logits, n_vocab, tok, r->n_top, &ev.logprob, ev.top_tokens, ev.top_logprobs);
        }
        push_event(r, &ev);
        int32_t p = cv_engine_seq_len(e, seq);
        if (is_stop(r, tok))
            why = CV_FINISH_STOP;
        else if (n_gen >= r->max_tokens)
            why = CV_FINISH_LENGTH;
        else if (atomic_load(&r->cancel))
            why = CV_FINISH_CANCELED;
        else if (p >= ep->n_ctx)
            why = CV_FINISH_CONTEXT;
        if (why != CV_FINISH_NONE)
            break;
        cv_batch b = { .n_tokens = 1, .token = &tok, .seq = &seq, .pos = &p, .want = NULL };
        if (cv_engine_forward(e, &b, &logits, &n_logits, &err))
            break;
    }
out:
    free(pos);
    free(seqs);
    cv_engine_seq_close(e, seq);
    count(s, prompt_done ? r->n_prompt : 0, n_gen);
    if (why != CV_FINISH_NONE)
        finish(r, why, n_gen);
    else
        fail(r, &err, n_gen);
}

static void *engine_main(void *arg)
{
    cv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->q_head && !s->quit)
            pthread_cond_wait(&s->cond, &s->mu);
        if (s->quit) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        cv_sched_req *r = s->q_head;
        s->q_head = r->next;
        if (!s->q_head)
            s->q_tail = NULL;
        s->q_len--;
        s->running = r;
        pthread_mutex_unlock(&s->mu);

        run_request(s, r);

        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        pthread_mutex_unlock(&s->mu);
    }
}

/* ---- submit ---- */

int cv_sched_submit(cv_sched *s, const cv_sched_params *p, cv_sched_req **out, cv_err *err)
{
    *out = NULL;
    const cv_engine_params *ep = cv_engine_params_get(s->e);
    const int32_t n_vocab = cv_engine_model(s->e)->hp.n_vocab;
    if (p->n_prompt < 1)
        return cv_err_set(err, CV_EINVAL, "request: the prompt is empty; at least one token is needed");
    if (p->max_tokens < 1)
        return cv_err_set(err, CV_EINVAL, "request: max_tokens = %d, must be at least 1", p->max_tokens);
    if ((int64_t)p->n_prompt + p->max_tokens > ep->n_ctx)
        return cv_err_set(err, CV_EINVAL, "request: prompt of %d tokens plus max_tokens %d exceeds the context "
                          "of %d tokens", p->n_prompt, p->max_tokens, ep->n_ctx);
    if ((int64_t)p->n_prompt + p->max_tokens > ep->n_kv_tokens)
        return cv_err_set(err, CV_EINVAL, "request: prompt of %d tokens plus max_tokens %d exceeds the KV cache "
                          "of %d tokens", p->n_prompt, p->max_tokens, ep->n_kv_tokens);
    for (int32_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= n_vocab)
            return cv_err_set(err, CV_EINVAL, "request: prompt token %d has id %d, must be 0..%d", i, p->prompt[i],
                              n_vocab - 1);
    if (p->n_stop_tokens < 0 || p->n_stop_tokens > CV_MAX_STOP_TOKENS)
        return cv_err_set(err, CV_EINVAL, "request: %d stop tokens, must be 0..%d", p->n_stop_tokens,
                          CV_MAX_STOP_TOKENS);
    if (p->n_top_logprobs < 0 || p->n_top_logprobs > CV_MAX_TOP_LOGPROBS)
        return cv_err_set(err, CV_EINVAL, "request: top_logprobs = %d, must be 0..%d", p->n_top_logprobs,
                          CV_MAX_TOP_LOGPROBS);

    cv_sample_params sp = p->sample;
    if (!sp.has_seed) {
        pthread_mutex_lock(&s->mu);
        sp.seed = cv_rng_u64(&s->seeds);
        pthread_mutex_unlock(&s->mu);
        sp.has_seed = true;
    }
    cv_sampler *sampler;
    int rc = cv_sampler_create(&sp, n_vocab, &sampler, err);
    if (rc)
        return rc;

    cv_sched_req *r = cv_xcalloc(1, sizeof *r);
    r->s = s;
    r->sampler = sampler;
    r->n_prompt = p->n_prompt;
    r->prompt = cv_xmalloc((size_t)p->n_prompt * sizeof *r->prompt);
    memcpy(r->prompt, p->prompt, (size_t)p->n_prompt * sizeof *r->prompt);
    r->max_tokens = p->max_tokens;
    r->n_stop = p->n_stop_tokens;
    if (r->n_stop) {
        r->stop = cv_xmalloc((size_t)r->n_stop * sizeof *r->stop);
        memcpy(r->stop, p->stop_tokens, (size_t)r->n_stop * sizeof *r->stop);
    }
    r->n_top = p->n_top_logprobs;
    r->logprobs = p->logprobs;
    atomic_init(&r->cancel, false);
    atomic_init(&r->refs, 2); /* the caller and the engine thread */
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);

    pthread_mutex_lock(&s->mu);
    if (s->quit || s->q_len >= s->queue_max) {
        bool quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        req_free(r);
        return quit ? cv_err_set(err, CV_EBUSY, "scheduler: shutting down")
                    : cv_err_set(err, CV_EBUSY, "scheduler: %d requests are already waiting; retry later",
                                 s->queue_max);
    }
    if (s->q_tail)
        s->q_tail->next = r;
    else
        s->q_head = r;
    s->q_tail = r;
    s->q_len++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return 0;
}

void cv_sched_get_stats(cv_sched *s, cv_sched_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = (cv_sched_stats){
        .queue_depth = s->q_len,
        .running = s->running ? 1 : 0,
        .kv_blocks_used = s->kv_total - s->kv_free,
        .kv_blocks_free = s->kv_free,
        .n_requests = s->n_done,
        .n_tokens_prompt = s->n_prompt_tokens,
        .n_tokens_generated = s->n_gen_tokens,
    };
    pthread_mutex_unlock(&s->mu);
}

/* ---- lifecycle ---- */

int cv_sched_create(cv_engine *e, const cv_sched_config *cfg, cv_sched **out, cv_err *err)
{
    *out = NULL;
    cv_sched *s = cv_xcalloc(1, sizeof *s);
    s->e = e;
    s->queue_max = cfg && cfg->queue_max > 0 ? CV_MIN(cfg->queue_max, CV_MAX_SCHED_QUEUE) : CV_MAX_SCHED_QUEUE;
    cv_rng_seed(&s->seeds, cfg && cfg->seed ? cfg->seed : cv_now_ns() ^ (uint64_t)(uintptr_t)s);
    s->kv_total = s->kv_free = cv_engine_kv_free_blocks(e);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    int rc = pthread_create(&s->thread, NULL, engine_main, s);
    if (rc) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cond);
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
    s->quit = true;
    cv_sched_req *waiting = s->q_head;
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    if (s->running)
        atomic_store(&s->running->cancel, true);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* the running request finishes as canceled */
    while (waiting) {
        cv_sched_req *next = waiting->next;
        finish(waiting, CV_FINISH_CANCELED, 0);
        waiting = next;
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}
