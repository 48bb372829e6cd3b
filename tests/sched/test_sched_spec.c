/* test_sched_spec.c — speculative decoding by prompt lookup: the drafter
 * finds what it should (longest, then newest match; never a lone token),
 * and speculation never changes a token. The same requests, greedy and
 * sampled with fixed seeds, alone and 8 at a time, with and without the
 * prefix cache, across preemptions, give token for token what they give
 * with speculation off, while drafts are taken (fewer steps). Runs on the
 * random-weight tiny llama of the other scheduler tests (q8_0), fed
 * prompts that repeat themselves so that lookups find drafts. A sampling
 * hook is called once per emitted token, drafts or not, and logprobs keep
 * every bit, also when a hook's script makes drafts partly taken on every
 * architecture (a recurrent state goes back to its checkpoint and the taken
 * tokens are fed again). */
#include "sched_util.h"
#include "sched/sched_int.h"

#define N_REQ 8

static char g_model[512];

/* Whether the test model's own replies continue its repeated prompts, so
 * that lookup drafts get taken: the tiny llama's and MoE's do; the tiny
 * hybrid (a random recurrent layer) and the tiny gpt-oss (window and sinks)
 * do not, seen on these seeds. Their outputs still match speculation off,
 * and the scripted test takes and rolls back drafts on any architecture. */
static bool g_takes_drafts;

/* ---- the drafter ---- */

TEST(drafter_takes_the_longest_then_newest_match)
{
    int32_t out[8];
    /* 5 6 after "3 4" twice: the newer one (followed by 9) wins */
    const int32_t a[] = { 3, 4, 5, 6, 1, 3, 4, 9, 8, 2, 3, 4 };
    CHECK_EQ_INT(cv_sched_draft(a, 12, 3, out), 3);
    CHECK_EQ_INT(out[0], 9);
    CHECK_EQ_INT(out[1], 8);
    CHECK_EQ_INT(out[2], 2);
    /* a longer match beats a newer shorter one: "2 3 4" occurs first */
    const int32_t b[] = { 2, 3, 4, 7, 7, 0, 3, 4, 9, 1, 2, 3, 4 };
    CHECK_EQ_INT(cv_sched_draft(b, 13, 2, out), 2);
    CHECK_EQ_INT(out[0], 7);
    CHECK_EQ_INT(out[1], 7);
    /* k_max bounds the draft; past the known tokens it repeats itself */
    CHECK_EQ_INT(cv_sched_draft(a, 12, 1, out), 1);
    const int32_t c[] = { 5, 6, 7, 5, 6 };
    const int32_t c_want[] = { 7, 5, 6, 7, 5, 6, 7, 5 };
    CHECK_EQ_INT(cv_sched_draft(c, 5, 8, out), 8);
    CHECK(memcmp(out, c_want, sizeof c_want) == 0);
    /* a run of one token drafts more of it */
    const int32_t d[] = { 1, 2, 2, 2, 2 };
    CHECK_EQ_INT(cv_sched_draft(d, 5, 4, out), 4);
    CHECK(out[0] == 2 && out[1] == 2 && out[2] == 2 && out[3] == 2);
    /* a lone matching token is no match; nothing earlier, no draft */
    const int32_t e[] = { 1, 5, 2, 3, 5 };
    CHECK_EQ_INT(cv_sched_draft(e, 5, 4, out), 0);
    const int32_t f[] = { 1, 2, 3, 4 };
    CHECK_EQ_INT(cv_sched_draft(f, 4, 4, out), 0);
    CHECK_EQ_INT(cv_sched_draft(f, 1, 4, out), 0);
    CHECK_EQ_INT(cv_sched_draft(a, 12, 0, out), 0);
}

/* Drafted tokens are verified while their chance of being taken beats
 * what they cost against the step they may save. */
TEST(drafts_are_weighed_against_their_cost)
{
    /* costs unknown (nothing measured yet): everything drafted */
    CHECK_EQ_INT(cv_sched_draft_worth(0, 0, 0.1f, 3), 3);
    /* shallow: a drafted token costs ~nothing against a step */
    CHECK_EQ_INT(cv_sched_draft_worth(0.0005, 0.020, 0.6f, 3), 3);
    CHECK_EQ_INT(cv_sched_draft_worth(0.0005, 0.020, 0.2f, 3), 2); /* 0.2, 0.04 > 0.025 > 0.008 */
    /* 12k positions of a 0.5B model: attention 18 ms of a 34 ms step */
    CHECK_EQ_INT(cv_sched_draft_worth(0.018, 0.034, 0.98f, 3), 3);
    CHECK_EQ_INT(cv_sched_draft_worth(0.018, 0.034, 0.6f, 3), 1);
    CHECK_EQ_INT(cv_sched_draft_worth(0.018, 0.034, 0.5f, 3), 0);
    CHECK_EQ_INT(cv_sched_draft_worth(0.018, 0.034, 0.98f, 0), 0);
    /* a draft that costs a whole step is never worth it */
    CHECK_EQ_INT(cv_sched_draft_worth(0.034, 0.034, 1.0f, 3), 0);
}

/* ---- speculation never changes a token ---- */

typedef struct req_spec {
    int32_t prompt[200];
    int32_t n_prompt;
    int32_t max_tokens;
    cv_sample_params sample;
} req_spec;

static req_spec g_reqs[2][N_REQ]; /* [greedy, sampled] */
static outcome g_off[2][N_REQ];   /* speculation off, one at a time */

static void make_specs(int32_t n_vocab)
{
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N_REQ; i++) {
            req_spec *q = &g_reqs[mode][i];
            /* a stretch of 10..40 tokens, said 2..4 times over, cut anywhere */
            int32_t unit = 10 + (i * 7) % 31, reps = 2 + i % 3;
            fill_ids(q->prompt, unit, 500 + (uint64_t)i, n_vocab);
            q->n_prompt = CV_MIN(unit * reps - i, 200);
            for (int32_t j = unit; j < q->n_prompt; j++)
                q->prompt[j] = q->prompt[j - unit];
            q->max_tokens = 40 + (i * 11) % 60;
            memset(&q->sample, 0, sizeof q->sample);
            if (mode == 1)
                q->sample = (cv_sample_params){ .temperature = 0.7f, .top_k = 20, .top_p = 0.9f,
                                                .seed = 77 + (uint64_t)i, .has_seed = true };
        }
}

static cv_sched_params params_of(const req_spec *q)
{
    return (cv_sched_params){ .prompt = q->prompt, .n_prompt = q->n_prompt, .max_tokens = q->max_tokens,
                              .sample = q->sample };
}

/* One compute thread, as in test_sched_batch: the tiny model's matmuls
 * cost less than the pool's wake-ups. */
static const cv_engine_params g_ep = { .n_threads = 1, .n_ctx = 512, .n_seq_max = 8, .n_batch = 256,
                                       .n_logits = 24 };

static void reopen(rig *r, const cv_sched_config *sc)
{
    cv_err err = { 0 };
    cv_sched_destroy(r->s);
    r->s = NULL;
    CHECK_MSG(cv_sched_create(r->e, sc, &r->s, &err) == 0, "%s", err.msg);
}

/* Requests 0..n-1 of mode submitted together, read to the end. */
static bool run_all(cv_sched *s, int mode, int n, outcome *out)
{
    cv_sched_req *q[N_REQ] = { 0 };
    cv_err err = { 0 };
    bool ok = true;
    for (int i = 0; i < n; i++) {
        outcome_init(&out[i]);
        cv_sched_params p = params_of(&g_reqs[mode][i]);
        if (cv_sched_submit(s, &p, &q[i], &err)) {
            CHECK_MSG(0, "submit %d: %s", i, err.msg);
            return false;
        }
    }
    for (int i = 0; i < n; i++) {
        read_events(q[i], &out[i], 0);
        ok = ok && out[i].order_ok && out[i].last.type == CV_SCHED_DONE;
        cv_sched_release(q[i]);
    }
    return ok;
}

static int count_differing(const outcome *out, int mode, const char *what)
{
    int bad = 0;
    for (int i = 0; i < N_REQ; i++)
        if (!same_tokens(&out[i], &g_off[mode][i])) {
            bad++;
            CHECK_MSG(0, "%s: request %d (mode %d) differs from speculation off (%d vs %d tokens)", what, i, mode,
                      out[i].n, g_off[mode][i].n);
        }
    return bad;
}

static void compute_off(rig *r)
{
    reopen(r, &(cv_sched_config){ .no_prefix_cache = true, .draft_tokens = -1, .seed = 1 });
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N_REQ; i++) {
            cv_sched_params p = params_of(&g_reqs[mode][i]);
            CHECK(run_one(r->s, &p, &g_off[mode][i]) == 0);
            CHECK_EQ_INT(g_off[mode][i].last.finish, CV_FINISH_LENGTH);
        }
    cv_sched_stats st;
    cv_sched_get_stats(r->s, &st);
    CHECK_EQ_INT((int)st.draft_tokens, 0);
}

TEST(speculation_gives_the_tokens_of_no_speculation_alone)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    compute_off(&r);
    for (int max = 1; max <= 8; max += 7) {
        reopen(&r, &(cv_sched_config){ .no_prefix_cache = true, .draft_tokens = max, .seed = 2 });
        outcome out[N_REQ];
        for (int mode = 0; mode < 2; mode++) {
            for (int i = 0; i < N_REQ; i++) {
                cv_sched_params p = params_of(&g_reqs[mode][i]);
                CHECK(run_one(r.s, &p, &out[i]) == 0);
                CHECK_MSG(out[i].order_ok, "max %d mode %d request %d: events out of order", max, mode, i);
            }
            CHECK_EQ_INT(count_differing(out, mode, "alone"), 0);
        }
        cv_sched_stats st;
        cv_sched_get_stats(r.s, &st);
        printf("  alone, up to %d drafted: %lld steps for %lld tokens; %lld of %lld drafted tokens taken\n", max,
               (long long)st.steps, (long long)st.n_tokens_generated, (long long)st.draft_accepted,
               (long long)st.draft_tokens);
        /* Drafts were proposed and taken, and each taken one saved a step. */
        CHECK(st.draft_accepted <= st.draft_tokens && (st.draft_accepted > 0 || !g_takes_drafts));
        CHECK(st.steps <= st.n_tokens_generated - st.draft_accepted + 2 * N_REQ);
    }
    rig_close(&r);
}

TEST(speculation_gives_the_tokens_of_no_speculation_batched_cached_preempted)
{
    cv_engine_params ep = g_ep;
    for (int pool = 0; pool < 2; pool++) {
        /* pool 1: 20 blocks for 8 requests of up to 19 blocks each */
        ep.n_kv_tokens = pool ? 20 * CV_KV_BLOCK : 0;
        rig r;
        if (!rig_open_with(&r, g_model, &ep, NULL))
            return;
        compute_off(&r);
        for (int cache = 0; cache < 2; cache++) {
            reopen(&r, &(cv_sched_config){ .no_prefix_cache = !cache, .batch_tokens = 48, .seed = 3 });
            for (int mode = 0; mode < 2; mode++) {
                outcome out[N_REQ];
                CHECK(run_all(r.s, mode, N_REQ, out));
                CHECK_EQ_INT(count_differing(out, mode, pool ? "small pool" : "batched"), 0);
            }
            cv_sched_stats st;
            cv_sched_get_stats(r.s, &st);
            printf("  8 together, cache %s, pool %s: %lld steps, %lld of %lld drafted taken, %lld preemptions\n",
                   cache ? "on" : "off", pool ? "small" : "ample", (long long)st.steps,
                   (long long)st.draft_accepted, (long long)st.draft_tokens, (long long)st.preemptions);
            CHECK(st.draft_accepted > 0 || !g_takes_drafts);
            if (pool)
                CHECK(st.preemptions > 0);
            /* Nothing leaked: drafted positions went back with their blocks. */
            CHECK_EQ_INT(st.kv_blocks_free + st.tree_blocks, st.kv_blocks);
        }
        rig_close(&r);
    }
}

/* When attention makes a drafted token cost about a whole step (as deep in
 * a long context), drafts are declined, not verified; the output is the
 * same either way. The tiny model's contexts are too short for the
 * scheduler to time attention, so the test sets that cost. */
TEST(drafts_that_cost_a_step_are_declined)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    compute_off(&r);
    reopen(&r, &(cv_sched_config){ .no_prefix_cache = true, .seed = 4 });
    r.s->att_per_pos = 1.0; /* seconds per position: every draft costs far more than a step */
    outcome out[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        cv_sched_params p = params_of(&g_reqs[0][i]);
        CHECK(run_one(r.s, &p, &out[i]) == 0);
    }
    CHECK_EQ_INT(count_differing(out, 0, "declined"), 0);
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK_EQ_INT((int)st.draft_tokens, 0);
    CHECK(st.draft_declined > 0 || !g_takes_drafts);
    CHECK(st.step_base_s > 0); /* decode steps were timed */
    rig_close(&r);
}

/* Reads q to its end, keeping each token's logprob and top-3 (bits). */
typedef struct lp_trace {
    int32_t n;
    int32_t tok[512], top[512][3];
    float lp[512], top_lp[512][3];
} lp_trace;

static bool read_logprobs(cv_sched_req *q, lp_trace *t)
{
    cv_sched_event ev;
    t->n = 0;
    for (;;) {
        if (cv_sched_next(q, -1, &ev))
            return false;
        if (ev.type == CV_SCHED_TOKEN && t->n < 512) {
            t->tok[t->n] = ev.token;
            t->lp[t->n] = ev.logprob;
            for (int j = 0; j < 3; j++)
                t->top[t->n][j] = ev.top_tokens[j], t->top_lp[t->n][j] = ev.top_logprobs[j];
            t->n++;
        } else if (ev.type == CV_SCHED_DONE || ev.type == CV_SCHED_ERROR) {
            return ev.type == CV_SCHED_DONE;
        }
    }
}

/* Every drafted row's logits are the bits the token gets alone: the
 * logprobs (chosen token and top 3) agree exactly, not just the choices. */
TEST(speculation_keeps_every_logprob_bit_for_bit)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    static lp_trace tr[2][2 * N_REQ]; /* greedy and sampled */
    for (int on = 0; on < 2; on++) {
        reopen(&r, &(cv_sched_config){ .no_prefix_cache = true, .draft_tokens = on ? 8 : -1, .seed = 7 });
        for (int i = 0; i < 2 * N_REQ; i++) {
            cv_sched_params p = params_of(&g_reqs[i / N_REQ][i % N_REQ]);
            p.logprobs = true;
            p.n_top_logprobs = 3;
            cv_sched_req *q;
            cv_err err = { 0 };
            CHECK_MSG(cv_sched_submit(r.s, &p, &q, &err) == 0, "%s", err.msg);
            CHECK(read_logprobs(q, &tr[on][i]));
            cv_sched_release(q);
        }
    }
    for (int i = 0; i < 2 * N_REQ; i++) {
        const lp_trace *a = &tr[0][i], *b = &tr[1][i];
        bool same = a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof a->tok[0]) &&
                    !memcmp(a->lp, b->lp, (size_t)a->n * sizeof a->lp[0]) &&
                    !memcmp(a->top, b->top, (size_t)a->n * sizeof a->top[0]) &&
                    !memcmp(a->top_lp, b->top_lp, (size_t)a->n * sizeof a->top_lp[0]);
        CHECK_MSG(same, "request %d: logprobs differ with speculation (%d vs %d tokens)", i, a->n, b->n);
    }
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK(st.draft_accepted > 0 || !g_takes_drafts);
    rig_close(&r);
}

/* A hook that emits a script instead of choosing: the request's prompt
 * said again from its start, every fifth token replaced by another id.
 * Lookup then drafts the prompt's continuation, whatever the model would
 * choose, and the draft is taken up to a replaced token and cut there. */
typedef struct script {
    const int32_t *prompt;
    int32_t n_prompt, at, n_vocab;
} script;

static int script_choose(void *ud, cv_sampler *smp, const float *logits, int32_t n_vocab, int32_t *token, cv_err *err)
{
    script *h = ud;
    (void)smp, (void)logits, (void)n_vocab, (void)err;
    const int32_t t = h->prompt[h->at % h->n_prompt];
    *token = h->at % 5 == 4 ? 3 + (t - 3 + 1) % (h->n_vocab - 3) : t;
    h->at++;
    return 0;
}

static const cv_sched_hook g_script = { script_choose, NULL };

/* Partly taken drafts on any architecture, alone and 8 at a time: every
 * emitted token's logprobs (from its own row's logits) are the bits they
 * are with speculation off. On a model with recurrent state the rollback
 * goes to the checkpoint taken before the drafted step and feeds the taken
 * tokens again (speculation.recomputed_tokens), which must compute them
 * exactly as decoding did. */
TEST(a_partly_taken_draft_rolls_back_exactly)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    cv_mem_info mi;
    cv_engine_mem_info(r.e, &mi);
    static lp_trace tr[2][2][N_REQ]; /* [speculation][together][request] */
    script sc[N_REQ];
    cv_sched_stats st = { 0 };
    for (int on = 0; on < 2; on++) {
        reopen(&r, &(cv_sched_config){ .no_prefix_cache = true, .draft_tokens = on ? 8 : -1, .seed = 9 });
        for (int together = 0; together < 2; together++) {
            cv_sched_req *q[N_REQ] = { 0 };
            for (int i = 0; i < N_REQ; i++) {
                const req_spec *rq = &g_reqs[0][i];
                sc[i] = (script){ rq->prompt, rq->n_prompt, 0, g_vocab };
                cv_sched_params p = params_of(rq);
                p.logprobs = true;
                p.n_top_logprobs = 3;
                p.hook = &g_script;
                p.hook_ud = &sc[i];
                cv_err err = { 0 };
                CHECK_MSG(cv_sched_submit(r.s, &p, &q[i], &err) == 0, "%s", err.msg);
                if (!together && q[i]) {
                    CHECK(read_logprobs(q[i], &tr[on][together][i]));
                    cv_sched_release(q[i]);
                }
            }
            for (int i = 0; together && i < N_REQ; i++)
                if (q[i]) {
                    CHECK(read_logprobs(q[i], &tr[on][together][i]));
                    cv_sched_release(q[i]);
                }
        }
        cv_sched_get_stats(r.s, &st);
    }
    for (int together = 0; together < 2; together++)
        for (int i = 0; i < N_REQ; i++) {
            const lp_trace *a = &tr[0][together][i], *b = &tr[1][together][i];
            bool same = a->n == b->n && a->n == g_reqs[0][i].max_tokens &&
                        !memcmp(a->tok, b->tok, (size_t)a->n * sizeof a->tok[0]) &&
                        !memcmp(a->lp, b->lp, (size_t)a->n * sizeof a->lp[0]) &&
                        !memcmp(a->top_lp, b->top_lp, (size_t)a->n * sizeof a->top_lp[0]);
            CHECK_MSG(same, "%s request %d: logprobs differ with partly taken drafts (%d vs %d tokens)",
                      together ? "together" : "alone", i, a->n, b->n);
        }
    printf("  scripted: %lld of %lld drafted tokens taken, %lld positions recomputed after a rollback\n",
           (long long)st.draft_accepted, (long long)st.draft_tokens, (long long)st.draft_recomputed);
    CHECK(st.draft_accepted > 0 && st.draft_accepted < st.draft_tokens);
    CHECK(mi.state_bytes == 0 ? st.draft_recomputed == 0 : st.draft_recomputed > 0);
    rig_close(&r);
}

/* A sampling hook (what constrained decoding plugs in) with state, as a
 * grammar has: ids that are multiples of 3 are never allowed, nor the id it
 * chose last, and every call is logged. With drafts it must be called
 * exactly once per emitted token, in order, and choose what it chooses
 * without them (a call for a token that is then dropped would move its
 * state and change what follows). */
typedef struct hook_log {
    int32_t calls[512];
    int32_t n_calls;
    float work[4096];
} hook_log;

static int hook_choose(void *ud, cv_sampler *smp, const float *logits, int32_t n_vocab, int32_t *token, cv_err *err)
{
    hook_log *h = ud;
    if (n_vocab > (int32_t)CV_ARRAY_LEN(h->work))
        return cv_err_set(err, CV_EINVAL, "test hook: %d logits", n_vocab);
    const int32_t last = h->n_calls ? h->calls[CV_MIN(h->n_calls, (int32_t)CV_ARRAY_LEN(h->calls)) - 1] : -1;
    for (int32_t i = 0; i < n_vocab; i++)
        h->work[i] = i % 3 && i != last ? logits[i] : -INFINITY;
    *token = cv_sampler_sample(smp, h->work);
    if (h->n_calls < (int32_t)CV_ARRAY_LEN(h->calls))
        h->calls[h->n_calls] = *token;
    h->n_calls++;
    return 0;
}

static void hook_destroy(void *ud) { (void)ud; }

static const cv_sched_hook g_hook = { hook_choose, hook_destroy };

TEST(a_sampling_hook_sees_each_emitted_token_once_with_drafts)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    static hook_log logs[2][2][N_REQ]; /* [speculation][mode][request] */
    outcome out[2][2][N_REQ];
    for (int on = 0; on < 2; on++) {
        reopen(&r, &(cv_sched_config){ .no_prefix_cache = true, .draft_tokens = on ? 8 : -1, .seed = 6 });
        for (int mode = 0; mode < 2; mode++)
            for (int i = 0; i < N_REQ; i++) {
                cv_sched_params p = params_of(&g_reqs[mode][i]);
                p.hook = &g_hook;
                p.hook_ud = &logs[on][mode][i];
                CHECK(run_one(r.s, &p, &out[on][mode][i]) == 0);
                const hook_log *h = &logs[on][mode][i];
                const outcome *o = &out[on][mode][i];
                bool same = h->n_calls == o->n && !memcmp(h->calls, o->tokens, (size_t)o->n * sizeof(int32_t));
                CHECK_MSG(same, "speculation %d mode %d request %d: %d hook calls for %d tokens", on, mode, i,
                          h->n_calls, o->n);
                for (int32_t j = 0; j < o->n; j++)
                    CHECK(o->tokens[j] % 3 != 0);
            }
        cv_sched_stats st;
        cv_sched_get_stats(r.s, &st);
        if (on) {
            printf("  with a hook: %lld of %lld drafted tokens taken\n", (long long)st.draft_accepted,
                   (long long)st.draft_tokens);
            CHECK(st.draft_accepted > 0 || !g_takes_drafts);
        }
    }
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N_REQ; i++)
            CHECK_MSG(same_tokens(&out[0][mode][i], &out[1][mode][i]), "hook, mode %d request %d: drafts changed it",
                      mode, i);
    rig_close(&r);
}

/* The real trained stories260K, greedy from BOS for 256 tokens: its
 * stories repeat their phrases ("didn't know what to do"), which is what
 * lookup drafts from. The ids are llama2.c's documented ones with and
 * without speculation, their logprobs the same bits, and each taken draft
 * token saves a step. */
TEST(stories260k_speculates_its_documented_story)
{
    char path[512];
    ref_tmp_path(path, sizeof path, "spec-stories");
    cv_err err = { 0 };
    json_t *expect = ref_json(test_data("models/stories260K.greedy_t0.token_ids.json"));
    if (cv_import_llama2c(test_data("models/stories260K.bin"), test_data("models/tok512.bin"), path, &err) ||
        !expect) {
        CHECK_MSG(0, "stories260K: %s", err.msg);
        json_decref(expect);
        return;
    }
    const cv_engine_params ep = { .n_threads = 1, .n_ctx = 512, .n_seq_max = 1, .n_logits = 16 };
    const int32_t bos = 1;
    cv_sched_params p = { .prompt = &bos, .n_prompt = 1, .max_tokens = 256, .logprobs = true, .n_top_logprobs = 3 };
    long long steps[2] = { 0 };
    static lp_trace tr[2];
    for (int on = 0; on < 2; on++) {
        rig r;
        if (!rig_open_with(&r, path, &ep, &(cv_sched_config){ .draft_tokens = on ? 8 : -1, .seed = 5 }))
            break;
        cv_sched_req *q;
        CHECK_MSG(cv_sched_submit(r.s, &p, &q, &err) == 0, "%s", err.msg);
        CHECK(read_logprobs(q, &tr[on]));
        cv_sched_release(q);
        const lp_trace *o = &tr[on];
        int same = 0;
        while (same < o->n && same < 256 && o->tok[same] == (int32_t)json_integer_value(json_array_get(expect, same)))
            same++;
        CHECK_MSG(o->n == 256 && same == 256, "speculation %s: %d ids, the first %d as documented",
                  on ? "on" : "off", o->n, same);
        cv_sched_stats st;
        cv_sched_get_stats(r.s, &st);
        steps[on] = st.steps;
        if (on) {
            printf("  stories260K, 256 tokens: %lld steps without speculation, %lld with; %lld of %lld drafted "
                   "tokens taken\n",
                   steps[0], steps[1], (long long)st.draft_accepted, (long long)st.draft_tokens);
            CHECK(st.draft_accepted >= 40);
            CHECK_EQ_INT((int)(steps[0] - steps[1]), (int)st.draft_accepted);
            /* the drafted rows' logprobs are the bits of the rows computed one at a time */
            CHECK(!memcmp(tr[0].lp, tr[1].lp, sizeof tr[0].lp));
            CHECK(!memcmp(tr[0].top_lp, tr[1].top_lp, sizeof tr[0].top_lp));
        }
        rig_close(&r);
    }
    json_decref(expect);
    unlink(path);
}

int main(void)
{
    RUN(drafter_takes_the_longest_then_newest_match);
    RUN(drafts_are_weighed_against_their_cost);
    if (!util_synth(g_model, sizeof g_model, "sched-spec", "q8_0", 11))
        return 1;
    make_specs(g_vocab);
    {
        cv_model *m;
        cv_err err = { 0 };
        if (cv_model_open(g_model, NULL, &m, &err) == 0) {
            g_takes_drafts = m->hp.n_recurrent == 0 && m->hp.n_swa == 0;
            cv_model_close(m);
        }
    }
    RUN(speculation_gives_the_tokens_of_no_speculation_alone);
    RUN(speculation_gives_the_tokens_of_no_speculation_batched_cached_preempted);
    RUN(drafts_that_cost_a_step_are_declined);
    RUN(a_sampling_hook_sees_each_emitted_token_once_with_drafts);
    RUN(speculation_keeps_every_logprob_bit_for_bit);
    RUN(a_partly_taken_draft_rolls_back_exactly);
    unlink(g_model);
    RUN(stories260k_speculates_its_documented_story);
    return test_report();
}
