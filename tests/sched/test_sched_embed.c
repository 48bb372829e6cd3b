/* test_sched_embed.c — embeddings through the scheduler, and schedulers of
 * several models sharing the compute threads (over qwen3 as ctest runs it,
 * CV_TEST_ARCH; the architecture of Qwen3-Embedding):
 *   - an embedding request's vector is its prompt's hidden states (an
 *     engine's own, the prompt alone in one call) pooled by mean, first or
 *     last position and scaled to unit length in double (a float64
 *     computation of this test's own), to the float;
 *   - embeddings submitted together, prefilled in chunks beside each other
 *     and beside generations, get the vector each gets alone, and the
 *     generations the tokens they get alone (batch = alone);
 *   - nothing of an embedding stays: the prefix cache holds no block of it
 *     and the KV pool is whole again; a repeated one is computed again;
 *   - malformed embedding requests fail at submit;
 *   - two schedulers on two engines with one share of 2 threads, both
 *     generating at once: each request gets the tokens it gets alone, both
 *     count as busy while they work and neither once they are done. */
#include "sched_util.h"

static char g_model[512];

enum { N_EMB = 3 };
static const int32_t lens[N_EMB] = { 40, 75, 130 };
static int32_t *prompts[N_EMB];

/* The vector of prompt p under pooling: the engine's hidden states of the
 * prompt in one call, pooled and normalised as the scheduler documents. */
static float *reference(const rig *r, const int32_t *p, int32_t n, cv_pooling pooling)
{
    cv_engine_params ep = { .n_threads = 1, .n_ctx = 256, .n_batch = 256 };
    cv_engine *e;
    cv_err err = { 0 };
    if (cv_engine_create(r->m, &ep, &e, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return NULL;
    }
    const int32_t E = r->m->hp.n_embd;
    int32_t seq, *sq = malloc((size_t)n * sizeof *sq), *pos = malloc((size_t)n * sizeof *pos), nl;
    CHECK(cv_engine_seq_open(e, &seq, &err) == 0);
    for (int32_t i = 0; i < n; i++)
        sq[i] = seq, pos[i] = i;
    const float *lg;
    cv_engine_keep_hidden(e, true);
    CHECK(cv_engine_forward(e, &(cv_batch){ n, p, sq, pos, NULL }, &lg, &nl, &err) == 0);
    const float *h = cv_engine_hidden(e);
    double *acc = calloc((size_t)E, sizeof *acc);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < E; i++)
            if (pooling == CV_POOL_MEAN)
                acc[i] += h[(size_t)t * E + i];
            else if ((pooling == CV_POOL_CLS && t == 0) || (pooling == CV_POOL_LAST && t == n - 1))
                acc[i] = h[(size_t)t * E + i];
    const double scale = pooling == CV_POOL_MEAN ? 1.0 / n : 1.0;
    double ss = 0;
    for (int32_t i = 0; i < E; i++)
        ss += (acc[i] * scale) * (acc[i] * scale);
    float *v = malloc((size_t)E * sizeof *v);
    for (int32_t i = 0; i < E; i++)
        v[i] = (float)(acc[i] * scale / sqrt(ss));
    free(acc), free(sq), free(pos);
    cv_engine_destroy(e);
    return v;
}

/* An embedding request's events: one EMBEDDING (copied to out), then DONE. */
static bool read_embedding(cv_sched_req *q, float *out, int32_t n_embd)
{
    cv_sched_event ev;
    bool got = false;
    while (cv_sched_next(q, -1, &ev) == 0) {
        if (ev.type == CV_SCHED_EMBEDDING) {
            CHECK_EQ_INT(ev.n_embd, n_embd);
            memcpy(out, ev.embedding, (size_t)n_embd * sizeof *out);
            got = true;
        } else if (ev.type == CV_SCHED_DONE) {
            CHECK_EQ_INT((int)ev.finish, CV_FINISH_STOP);
            return got;
        } else {
            CHECK_MSG(0, "unexpected event %d", (int)ev.type);
            return false;
        }
    }
    return false;
}

static cv_sched_params embed_params(int i, cv_pooling pooling)
{
    return (cv_sched_params){ .prompt = prompts[i], .n_prompt = lens[i], .pooling = pooling };
}

static bool rig_for_embeddings(rig *r)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 4, .n_kv_tokens = 1024 };
    cv_sched_config sc = { .batch_tokens = 64, .seed = 5 };
    return rig_open_with(r, g_model, &ep, &sc);
}

TEST(embedding_is_the_prompts_pooled_hidden_state_at_unit_length)
{
    rig r;
    if (!rig_for_embeddings(&r))
        return;
    const int32_t E = r.m->hp.n_embd;
    float *got = malloc((size_t)E * sizeof *got);
    static const cv_pooling poolings[] = { CV_POOL_MEAN, CV_POOL_CLS, CV_POOL_LAST };
    for (size_t k = 0; k < CV_ARRAY_LEN(poolings); k++)
        for (int i = 0; i < N_EMB; i++) {
            float *want = reference(&r, prompts[i], lens[i], poolings[k]);
            cv_sched_params p = embed_params(i, poolings[k]);
            cv_sched_req *q;
            cv_err err = { 0 };
            CHECK(cv_sched_submit(r.s, &p, &q, &err) == 0);
            CHECK(read_embedding(q, got, E));
            cv_sched_release(q);
            double worst = 0, norm = 0, dot = 0, ww = 0;
            for (int32_t d = 0; d < E; d++) {
                worst = fmax(worst, fabs((double)got[d] - want[d])), norm += (double)got[d] * got[d];
                dot += (double)got[d] * want[d], ww += (double)want[d] * want[d];
            }
            /* the bound is 1e-5 and cosine 0.99999; the same
             * arithmetic on the same rows gives the same bits */
            CHECK_MSG(worst == 0, "pooling %d, prompt %d: differs by %g from the engine's hidden states",
                      (int)poolings[k], lens[i], worst);
            CHECK_MSG(dot / sqrt(norm * ww) >= 0.99999, "cosine %.7f", dot / sqrt(norm * ww));
            CHECK_MSG(fabs(norm - 1) < 1e-6, "length %g", sqrt(norm));
            free(want);
        }
    /* nothing stays: no tree block, every KV block free; not a cache hit */
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK_EQ_INT((int)st.tree_blocks, 0);
    CHECK_EQ_INT((int)st.kv_blocks_free, (int)st.kv_blocks);
    CHECK_EQ_INT((int)st.cached_tokens, 0);
    CHECK_EQ_INT((int)st.lookups, 0);
    free(got);
    rig_close(&r);
}

typedef struct job {
    cv_sched *s;
    cv_sched_params p;
    float *vec;      /* embeddings */
    int32_t n_embd;
    outcome out;     /* generations */
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    cv_sched_req *q;
    cv_err err = { 0 };
    if (cv_sched_submit(j->s, &j->p, &q, &err)) {
        CHECK_MSG(0, "submit: %s", err.msg);
        return NULL;
    }
    if (j->p.pooling) {
        CHECK(read_embedding(q, j->vec, j->n_embd));
    } else {
        outcome_init(&j->out);
        read_events(q, &j->out, 0);
    }
    cv_sched_release(q);
    return NULL;
}

/* Runs jobs [0, n) at once, one thread each. */
static void run_together(job *jobs, int n)
{
    pthread_t t[16];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, run_job, &jobs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

TEST(embeddings_batched_with_each_other_and_with_generations_equal_each_alone)
{
    rig r;
    if (!rig_for_embeddings(&r))
        return;
    const int32_t E = r.m->hp.n_embd;
    enum { N_GEN = 2 };
    int32_t gen_prompt[N_GEN][50];
    job alone[N_EMB + N_GEN], together[N_EMB + N_GEN];
    for (int i = 0; i < N_EMB + N_GEN; i++) {
        cv_sched_params p;
        if (i < N_EMB) {
            p = embed_params(i, i == 1 ? CV_POOL_LAST : CV_POOL_MEAN);
        } else {
            fill_ids(gen_prompt[i - N_EMB], 50, 100 + (uint64_t)i, g_vocab);
            p = (cv_sched_params){ .prompt = gen_prompt[i - N_EMB], .n_prompt = 50, .max_tokens = 24,
                                   .sample = { .temperature = 0.8f, .seed = (uint64_t)i, .has_seed = true } };
        }
        alone[i] = (job){ .s = r.s, .p = p, .vec = calloc((size_t)E, sizeof(float)), .n_embd = E };
        together[i] = alone[i];
        together[i].vec = calloc((size_t)E, sizeof(float));
        run_together(&alone[i], 1);
    }
    run_together(together, N_EMB + N_GEN);
    for (int i = 0; i < N_EMB + N_GEN; i++) {
        if (i < N_EMB)
            CHECK_MSG(!memcmp(alone[i].vec, together[i].vec, (size_t)E * sizeof(float)),
                      "embedding %d differs batched from alone", i);
        else
            CHECK_MSG(same_tokens(&alone[i].out, &together[i].out) && alone[i].out.n == 24,
                      "generation %d differs batched with embeddings from alone", i);
        free(alone[i].vec), free(together[i].vec);
    }
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK_MSG(st.kv_blocks_free + st.tree_blocks == st.kv_blocks, "%lld free + %lld cached of %lld",
              (long long)st.kv_blocks_free, (long long)st.tree_blocks, (long long)st.kv_blocks);
    rig_close(&r);
}

TEST(malformed_embedding_requests_fail_at_submit)
{
    rig r;
    if (!rig_for_embeddings(&r))
        return;
    cv_sched_req *q;
    cv_err err = { 0 };
    cv_sched_params p = embed_params(0, CV_POOL_LAST);
    p.max_tokens = 4;
    CHECK_EQ_INT(cv_sched_submit(r.s, &p, &q, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "max_tokens") != NULL);
    p = embed_params(0, (cv_pooling)7);
    CHECK_EQ_INT(cv_sched_submit(r.s, &p, &q, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "pooling") != NULL);
    p = embed_params(0, CV_POOL_MEAN);
    p.n_prompt = 0;
    CHECK_EQ_INT(cv_sched_submit(r.s, &p, &q, &err), CV_EINVAL);
    rig_close(&r);
}

TEST(two_schedulers_sharing_threads_give_what_each_gives_alone)
{
    rig a, b;
    cv_sched_share *sh = cv_sched_share_create(2);
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 2 };
    cv_sched_config sc = { .batch_tokens = 32, .seed = 9, .share = sh };
    if (!rig_open_with(&a, g_model, &ep, &sc) || !rig_open_with(&b, g_model, &ep, &sc)) {
        cv_sched_share_destroy(sh);
        return;
    }
    CHECK_EQ_INT(cv_sched_share_threads(sh), 2);
    int32_t pa[120], pb[90];
    fill_ids(pa, 120, 31, g_vocab);
    fill_ids(pb, 90, 32, g_vocab);
    cv_sched_params qa = { .prompt = pa, .n_prompt = 120, .max_tokens = 40,
                           .sample = { .temperature = 0.7f, .seed = 1, .has_seed = true } };
    cv_sched_params qb = { .prompt = pb, .n_prompt = 90, .max_tokens = 40,
                           .sample = { .temperature = 0.7f, .seed = 2, .has_seed = true } };
    job alone[2] = { { .s = a.s, .p = qa }, { .s = b.s, .p = qb } };
    run_together(&alone[0], 1);
    run_together(&alone[1], 1);
    job both[2] = { alone[0], alone[1] };
    run_together(both, 2);
    for (int i = 0; i < 2; i++)
        CHECK_MSG(same_tokens(&alone[i].out, &both[i].out) && both[i].out.n == 40,
                  "model %d: other tokens while the other model ran", i);
    /* both engine threads leave the share once their work is done */
    for (int k = 0; k < 200 && cv_sched_share_busy(sh) > 0; k++)
        usleep(10000);
    CHECK_EQ_INT(cv_sched_share_busy(sh), 0);
    rig_close(&a);
    rig_close(&b);
    cv_sched_share_destroy(sh);
}

TEST(a_share_gives_each_busy_scheduler_its_part_of_the_threads)
{
    cv_sched_share *sh = cv_sched_share_create(5);
    int a, b, c;
    CHECK_EQ_INT(cv_sched_share_enter(sh, &a), 5);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &b), 2); /* 5 / 2, the remainder to the first */
    CHECK_EQ_INT(cv_sched_share_enter(sh, &a), 3);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &c), 1);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &a), 2);
    CHECK_EQ_INT(cv_sched_share_busy(sh), 3);
    cv_sched_share_leave(sh, &a);
    cv_sched_share_leave(sh, &a); /* twice: nothing more */
    CHECK_EQ_INT(cv_sched_share_enter(sh, &b), 3);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &c), 2);
    cv_sched_share_leave(sh, &b);
    cv_sched_share_leave(sh, &c);
    CHECK_EQ_INT(cv_sched_share_busy(sh), 0);
    cv_sched_share_destroy(sh);
    sh = cv_sched_share_create(1);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &a), 1);
    CHECK_EQ_INT(cv_sched_share_enter(sh, &b), 1); /* never none */
    cv_sched_share_destroy(sh);
}

int main(void)
{
    if (!util_synth(g_model, sizeof g_model, "sched-embed", "q8_0", 11))
        return 1;
    for (int i = 0; i < N_EMB; i++) {
        prompts[i] = malloc((size_t)lens[i] * sizeof(int32_t));
        fill_ids(prompts[i], lens[i], 50 + (uint64_t)i, g_vocab);
    }
    RUN(embedding_is_the_prompts_pooled_hidden_state_at_unit_length);
    RUN(embeddings_batched_with_each_other_and_with_generations_equal_each_alone);
    RUN(malformed_embedding_requests_fail_at_submit);
    RUN(two_schedulers_sharing_threads_give_what_each_gives_alone);
    RUN(a_share_gives_each_busy_scheduler_its_part_of_the_threads);
    for (int i = 0; i < N_EMB; i++)
        free(prompts[i]);
    unlink(g_model);
    return test_report();
}
