/* test_sched_batch.c — continuous batching is exact: N requests running
 * together give, token for token, what each gives alone, for N = 1..16,
 * greedy and sampled with fixed seeds, with mixed prompt lengths (1..160
 * tokens: single-token prompts, prompts of whole blocks, prompts of many
 * chunks) and staggered arrivals (half submitted, then the rest once the
 * first stream is decoding), without and with prefix-cache hits, and
 * across preemptions forced by a pool far smaller than the work.
 *
 * "Alone" is the same request on a scheduler with the prefix cache off and
 * nothing else submitted. Runs on a random-weight tiny llama (q8_0: the
 * int8 tiles), whose greedy choices have small margins — exactness here
 * is not luck of wide margins. */
#include "sched_util.h"

#define N_REQ 16

static char g_model[512];

typedef struct req_spec {
    int32_t prompt[256];
    int32_t n_prompt;
    int32_t max_tokens;
    cv_sample_params sample;
} req_spec;

static req_spec g_reqs[2][N_REQ];        /* [greedy, sampled] */
static outcome g_alone[2][N_REQ];

static void make_specs(int32_t n_vocab)
{
    int32_t shared[48];
    fill_ids(shared, 48, 4242, n_vocab);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N_REQ; i++) {
            req_spec *q = &g_reqs[mode][i];
            q->n_prompt = 1 + (i * 53) % 160;
            if (i == 5)
                q->n_prompt = 32; /* whole blocks: a full hit must still compute its last token */
            fill_ids(q->prompt, q->n_prompt, 100 + (uint64_t)i, n_vocab);
            if (i % 2 == 0) /* half share a 3-block system prompt */
                memcpy(q->prompt, shared, (size_t)CV_MIN(q->n_prompt, 48) * sizeof(int32_t));
            q->max_tokens = 8 + (i * 5) % 17;
            memset(&q->sample, 0, sizeof q->sample);
            if (mode == 1)
                q->sample = (cv_sample_params){ .temperature = 0.9f, .top_k = 40, .top_p = 0.95f,
                                                .seed = 1000 + (uint64_t)i, .has_seed = true };
        }
}

static cv_sched_params params_of(const req_spec *q)
{
    return (cv_sched_params){ .prompt = q->prompt, .n_prompt = q->n_prompt, .max_tokens = q->max_tokens,
                              .sample = q->sample };
}

/* One compute thread: on a loaded 2-core machine the pool's wake-ups cost
 * more than these tiny matmuls (measured: 2.5 s vs 36 s of CPU). */
static const cv_engine_params g_ep = { .n_threads = 1, .n_ctx = 512, .n_seq_max = 16, .n_batch = 256 };

/* Runs requests 0..n-1 together: the first half at once, the rest after
 * request 0 streamed two tokens. Returns false if anything failed. */
static bool run_together(cv_sched *s, int mode, int n, outcome *out)
{
    cv_sched_req *q[N_REQ] = { 0 };
    cv_err err = { 0 };
    const int first = (n + 1) / 2;
    for (int i = 0; i < n; i++)
        outcome_init(&out[i]);
    for (int i = 0; i < first; i++) {
        cv_sched_params p = params_of(&g_reqs[mode][i]);
        if (cv_sched_submit(s, &p, &q[i], &err)) {
            CHECK_MSG(0, "submit %d: %s", i, err.msg);
            return false;
        }
    }
    read_events(q[0], &out[0], 2);
    for (int i = first; i < n; i++) {
        cv_sched_params p = params_of(&g_reqs[mode][i]);
        if (cv_sched_submit(s, &p, &q[i], &err)) {
            CHECK_MSG(0, "submit %d: %s", i, err.msg);
            return false;
        }
    }
    bool ok = true;
    for (int i = 0; i < n; i++) {
        read_events(q[i], &out[i], 0); /* request 0 continues where it stopped */
        if (!out[i].order_ok || out[i].last.type != CV_SCHED_DONE || out[i].last.finish != CV_FINISH_LENGTH)
            printf("  request %d of %d: order %s, final event %d, finish %d, %d tokens: %s\n", i, n,
                   out[i].order_ok ? "ok" : "bad", out[i].last.type, out[i].last.finish, out[i].n,
                   out[i].last.err.msg);
        ok = ok && out[i].order_ok && out[i].last.type == CV_SCHED_DONE;
        cv_sched_release(q[i]);
    }
    return ok;
}

static void compute_alone(rig *r)
{
    cv_sched_config sc = { .no_prefix_cache = true, .seed = 1 };
    cv_err err = { 0 };
    cv_sched_destroy(r->s);
    CHECK(cv_sched_create(r->e, &sc, &r->s, &err) == 0);
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < N_REQ; i++) {
            cv_sched_params p = params_of(&g_reqs[mode][i]);
            CHECK(run_one(r->s, &p, &g_alone[mode][i]) == 0);
            CHECK_EQ_INT(g_alone[mode][i].last.finish, CV_FINISH_LENGTH);
            CHECK_EQ_INT(g_alone[mode][i].n_cached, 0);
        }
    /* Sampling really ran: the sampled streams differ from the greedy ones. */
    int differ = 0;
    for (int i = 0; i < N_REQ; i++)
        differ += !same_tokens(&g_alone[0][i], &g_alone[1][i]);
    CHECK_MSG(differ >= N_REQ / 2, "only %d of %d sampled streams differ from greedy", differ, N_REQ);
}

/* N = 1..16 together; returns the number of streams that differed. */
static int sweep(rig *r, int mode, const char *what)
{
    int bad = 0;
    outcome out[N_REQ];
    for (int n = 1; n <= N_REQ; n++) {
        if (!run_together(r->s, mode, n, out)) {
            CHECK_MSG(0, "%s: N = %d: a request failed", what, n);
            return N_REQ;
        }
        for (int i = 0; i < n; i++)
            if (!same_tokens(&out[i], &g_alone[mode][i])) {
                bad++;
                CHECK_MSG(0, "%s: N = %d: request %d (prompt %d) differs from alone (%d vs %d tokens)", what, n, i,
                          g_reqs[mode][i].n_prompt, out[i].n, g_alone[mode][i].n);
            }
    }
    return bad;
}

TEST(n_concurrent_requests_match_each_alone_without_prefix_hits)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    compute_alone(&r);
    cv_sched_config sc = { .no_prefix_cache = true, .batch_tokens = 64, .seed = 2 };
    cv_err err = { 0 };
    cv_sched_destroy(r.s);
    CHECK(cv_sched_create(r.e, &sc, &r.s, &err) == 0);
    CHECK_EQ_INT(sweep(&r, 0, "greedy, no cache"), 0);
    CHECK_EQ_INT(sweep(&r, 1, "sampled, no cache"), 0);
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK_EQ_INT((int)st.cached_tokens, 0);
    CHECK_EQ_INT((int)st.lookups, 0);
    /* Batching happened: fewer steps than tokens computed. */
    printf("  no cache: %lld steps for %lld prompt + %lld generated tokens\n", (long long)st.steps,
           (long long)st.n_tokens_prompt, (long long)st.n_tokens_generated);
    CHECK(st.steps * 2 < st.n_tokens_prompt + st.n_tokens_generated);
    rig_close(&r);
}

TEST(n_concurrent_requests_match_each_alone_with_prefix_hits)
{
    rig r;
    if (!rig_open_with(&r, g_model, &g_ep, NULL))
        return;
    compute_alone(&r);
    cv_sched_config sc = { .batch_tokens = 64, .seed = 3 };
    cv_err err = { 0 };
    cv_sched_destroy(r.s);
    CHECK(cv_sched_create(r.e, &sc, &r.s, &err) == 0);
    /* Every round resubmits the earlier prompts: from N = 2 on, most
     * prompts come from the cache, the shared system prompt first. */
    CHECK_EQ_INT(sweep(&r, 1, "sampled, cache"), 0);
    CHECK_EQ_INT(sweep(&r, 0, "greedy, cache"), 0);
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    printf("  cache: %lld of %lld prompt tokens cached, %lld hits in %lld lookups\n", (long long)st.cached_tokens,
           (long long)st.prompt_tokens, (long long)st.hits, (long long)st.lookups);
    CHECK(st.hits > N_REQ);
    CHECK(st.cached_tokens * 2 > st.prompt_tokens);
    rig_close(&r);
}

TEST(n_concurrent_requests_match_each_alone_across_preemptions)
{
    /* 24 blocks for 16 requests of up to 14 blocks each: sequences are
     * preempted (their blocks given to older ones) and recomputed. */
    cv_engine_params ep = g_ep;
    ep.n_kv_tokens = 24 * CV_KV_BLOCK;
    rig r;
    if (!rig_open_with(&r, g_model, &ep, NULL))
        return;
    compute_alone(&r);
    for (int cache = 0; cache < 2; cache++) {
        cv_sched_config sc = { .no_prefix_cache = !cache, .batch_tokens = 64, .seed = 4 };
        cv_err err = { 0 };
        cv_sched_destroy(r.s);
        CHECK(cv_sched_create(r.e, &sc, &r.s, &err) == 0);
        for (int mode = 0; mode < 2; mode++) {
            outcome out[N_REQ];
            CHECK(run_together(r.s, mode, N_REQ, out));
            for (int i = 0; i < N_REQ; i++)
                CHECK_MSG(same_tokens(&out[i], &g_alone[mode][i]), "cache %d mode %d: request %d differs", cache,
                          mode, i);
        }
        cv_sched_stats st;
        cv_sched_get_stats(r.s, &st);
        printf("  24-block pool, cache %s: %lld preemptions, %lld evictions, %lld tokens computed\n",
               cache ? "on" : "off", (long long)st.preemptions, (long long)st.evictions,
               (long long)st.n_tokens_prompt);
        CHECK(st.preemptions > 0);
        /* Nothing leaked: with no request left, every block is free or the tree's. */
        CHECK_EQ_INT(st.kv_blocks_free + st.tree_blocks, st.kv_blocks);
    }
    rig_close(&r);
}

int main(void)
{
    if (!util_synth(g_model, sizeof g_model, "sched-batch", "q8_0", 7))
        return 1;
    make_specs(g_vocab);
    RUN(n_concurrent_requests_match_each_alone_without_prefix_hits);
    RUN(n_concurrent_requests_match_each_alone_with_prefix_hits);
    RUN(n_concurrent_requests_match_each_alone_across_preemptions);
    unlink(g_model);
    return test_report();
}
