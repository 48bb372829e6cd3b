/* sched_util.h — what the scheduler tests share: a random-weight model
 * written once per test binary (`corvid synth`'s code: the tiny shape, or
 * the one $CV_TEST_SHAPE names, q8_0, so the int8 tiles run; llama, or the
 * architecture $CV_TEST_ARCH names, so that CTest runs the same scheduler
 * tests over an MoE model too), an
 * engine + scheduler rig, requests made from a seed, and reading a request
 * to its end. */
#ifndef CV_SCHED_UTIL_H
#define CV_SCHED_UTIL_H

#include <pthread.h>

#include "../engine/ref_util.h"
#include "model/synth.h"
#include "sched/sched.h"

typedef struct rig {
    cv_model *m;
    cv_engine *e;
    cv_sched *s;
} rig;

/* The vocabulary of the test model (set by util_synth): prompts draw from it. */
static int32_t g_vocab;

/* Writes the test model to path (caller unlinks) and sets g_vocab. */
static inline bool util_synth(char *path, size_t n, const char *tag, const char *dtype, uint64_t seed)
{
    ref_tmp_path(path, n, tag);
    cv_err err = { 0 };
    const char *arch = getenv("CV_TEST_ARCH"), *shape = getenv("CV_TEST_SHAPE");
    cv_synth_params sp = { .arch = arch && *arch ? arch : "llama", .shape = shape && *shape ? shape : "tiny",
                           .dtype = dtype, .seed = seed };
    cv_model *m;
    if (cv_model_synth(&sp, path, &err) || cv_model_open(path, NULL, &m, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return false;
    }
    g_vocab = m->hp.n_vocab;
    cv_model_close(m);
    return true;
}

static inline bool rig_open_with(rig *r, const char *model, const cv_engine_params *ep, const cv_sched_config *sc)
{
    cv_err err = { 0 };
    memset(r, 0, sizeof *r);
    if (cv_model_open(model, NULL, &r->m, &err) || cv_engine_create(r->m, ep, &r->e, &err) ||
        cv_sched_create(r->e, sc, &r->s, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        if (r->e)
            cv_engine_destroy(r->e);
        if (r->m)
            cv_model_close(r->m);
        memset(r, 0, sizeof *r);
        return false;
    }
    return true;
}

/* Where a request resumes on engine e when plain KV would resume at `plain`
 * positions of a cached path: there, without recurrent state; with it, at
 * the snapshot point at or below (snapshots lie on the grid of whole
 * blocks and split_align positions; the scheduler keeps one where a
 * prompt leaves a cached path and at its last grid point, which is what
 * these tests' paths resume from). */
static inline int32_t util_resume_at(const cv_engine *e, int32_t plain)
{
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    const int32_t unit = CV_MAX(CV_KV_BLOCK, mi.split_align);
    return mi.state_bytes ? plain / unit * unit : plain;
}

/* The blocks the prefix tree takes of a request with an n_prompt-token
 * prompt that has computed n positions (sched_step.c's tree_limit): its
 * whole blocks, or, on a model whose bits depend on how its positions were
 * split into calls, those of its prompt's whole chunks of the split grid. */
static inline int32_t util_tree_blocks(const cv_engine *e, int32_t n, int32_t n_prompt)
{
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    if (mi.split_align == 1 && mi.step_run == INT32_MAX)
        return n / CV_KV_BLOCK;
    return CV_MIN(n, n_prompt / mi.split_align * mi.split_align) / CV_KV_BLOCK;
}

static inline void rig_close(rig *r)
{
    cv_sched_destroy(r->s);
    cv_engine_destroy(r->e);
    cv_model_close(r->m);
    memset(r, 0, sizeof *r);
}

/* The outcome of one request read to its end. */
typedef struct outcome {
    int32_t tokens[512];
    int32_t n;
    cv_sched_event last;   /* DONE or ERROR */
    int32_t n_cached;      /* from PROMPT_DONE (-1: none came) */
    bool order_ok;         /* PROMPT_DONE first, then TOKENs numbered 1, 2, ... */
} outcome;

/* Reads events until the final one. stop_after > 0: returns after that many
 * tokens (the request keeps running; call again to continue). */
static inline void read_events(cv_sched_req *q, outcome *o, int32_t stop_after)
{
    cv_sched_event ev;
    for (;;) {
        if (cv_sched_next(q, -1, &ev)) {
            o->order_ok = false;
            o->last.type = CV_SCHED_ERROR;
            return;
        }
        if (ev.type == CV_SCHED_PROMPT_DONE) {
            o->order_ok = o->order_ok && o->n_cached < 0 && o->n == 0;
            o->n_cached = ev.n_cached;
        } else if (ev.type == CV_SCHED_TOKEN) {
            o->order_ok = o->order_ok && o->n_cached >= 0 && ev.n_generated == o->n + 1;
            if (o->n < (int32_t)CV_ARRAY_LEN(o->tokens))
                o->tokens[o->n] = ev.token;
            o->n++;
            if (stop_after > 0 && o->n >= stop_after)
                return;
        } else {
            o->last = ev;
            return;
        }
    }
}

static inline void outcome_init(outcome *o)
{
    memset(o, 0, sizeof *o);
    o->n_cached = -1;
    o->order_ok = true;
}

/* Submits and reads to the end. */
static inline int run_one(cv_sched *s, const cv_sched_params *p, outcome *o)
{
    outcome_init(o);
    cv_sched_req *q;
    cv_err err = { 0 };
    int rc = cv_sched_submit(s, p, &q, &err);
    if (rc) {
        fprintf(stderr, "submit: %s\n", err.msg);
        return rc;
    }
    read_events(q, o, 0);
    cv_sched_release(q);
    return 0;
}

/* n pseudo-random ids in [lo, n_vocab) from seed. */
static inline void fill_ids(int32_t *ids, int32_t n, uint64_t seed, int32_t n_vocab)
{
    cv_rng rng;
    cv_rng_seed(&rng, seed);
    for (int32_t i = 0; i < n; i++)
        ids[i] = 3 + (int32_t)cv_rng_below(&rng, (uint64_t)n_vocab - 3);
}

static inline bool same_tokens(const outcome *a, const outcome *b)
{
    return a->n == b->n && memcmp(a->tokens, b->tokens, (size_t)CV_MIN(a->n, 512) * sizeof(int32_t)) == 0;
}

#endif
