/* test_engine_sampler.c — every sampling knob on hand-made logits whose
 * answer is known, the seeded draw (same seed, same tokens; the empirical
 * distribution follows softmax(l / T)), the top-p ranking on a large flat
 * vocabulary against a brute-force sort, logprobs, and the validation of
 * hostile parameters. Draw counts are fixed, so the work is bounded. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "test.h"

static cv_sampler *make(cv_sample_params p, int32_t V)
{
    cv_sampler *s = NULL;
    cv_err err = { 0 };
    int rc = cv_sampler_create(&p, V, &s, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    return s;
}

/* Counts of each token over n draws. */
static void histogram(cv_sampler *s, const float *l, int32_t V, int n, int *counts)
{
    memset(counts, 0, (size_t)V * sizeof *counts);
    for (int i = 0; i < n; i++) {
        int32_t t = cv_sampler_sample(s, l);
        CHECK(t >= 0 && t < V);
        if (t >= 0 && t < V)
            counts[t]++;
    }
}

/* probabilities 0.5, 0.3, 0.15, 0.05 */
static void four(float *l)
{
    l[0] = logf(0.5f), l[1] = logf(0.3f), l[2] = logf(0.15f), l[3] = logf(0.05f);
}

TEST(greedy_takes_the_argmax_and_the_lowest_id_on_ties)
{
    float l[5] = { 1, 3, 3, -2, 0 };
    cv_sampler *s = make((cv_sample_params){ 0 }, 5);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    s = make((cv_sample_params){ .temperature = -1 }, 5); /* negative temperature: greedy */
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    CHECK_EQ_INT(cv_argmax(l, 5), 1);
}

TEST(temperature_draws_follow_the_softmax)
{
    float l[4];
    four(l);
    int counts[4];
    const int n = 20000;
    for (int ti = 0; ti < 3; ti++) {
        float T = (float[]){ 1.0f, 0.5f, 2.0f }[ti];
        cv_sampler *s = make((cv_sample_params){ .temperature = T, .seed = 7 }, 4);
        histogram(s, l, 4, n, counts);
        double z = 0, p[4];
        for (int i = 0; i < 4; i++) z += exp(l[i] / T);
        for (int i = 0; i < 4; i++) {
            p[i] = exp(l[i] / T) / z;
            /* 5 standard deviations of a binomial count. */
            double sd = sqrt(n * p[i] * (1 - p[i]));
            CHECK_MSG(fabs(counts[i] - n * p[i]) <= 5 * sd + 1, "T=%g token %d: %d draws, expected %.0f ± %.0f", T, i,
                      counts[i], n * p[i], 5 * sd);
        }
        cv_sampler_destroy(s);
    }
}

TEST(top_k_keeps_only_the_k_best)
{
    float l[4];
    four(l);
    int counts[4];
    cv_sampler *s = make((cv_sample_params){ .temperature = 5, .top_k = 1, .seed = 1 }, 4);
    histogram(s, l, 4, 500, counts);
    CHECK_EQ_INT(counts[0], 500);
    cv_sampler_destroy(s);
    s = make((cv_sample_params){ .temperature = 5, .top_k = 2, .seed = 1 }, 4);
    histogram(s, l, 4, 2000, counts);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] == 0 && counts[3] == 0);
    cv_sampler_destroy(s);
}

TEST(top_p_keeps_the_smallest_set_reaching_p)
{
    float l[4];
    four(l);
    int counts[4];
    /* 0.5 + 0.3 = 0.8 >= 0.7: two tokens; 0.8 < 0.9 <= 0.95: three. */
    cv_sampler *s = make((cv_sample_params){ .temperature = 1, .top_p = 0.7f, .seed = 3 }, 4);
    histogram(s, l, 4, 3000, counts);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] == 0 && counts[3] == 0);
    cv_sampler_destroy(s);
    s = make((cv_sample_params){ .temperature = 1, .top_p = 0.9f, .seed = 3 }, 4);
    histogram(s, l, 4, 3000, counts);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] > 0 && counts[3] == 0);
    cv_sampler_destroy(s);
    /* top_p >= 1 is off: every token appears. */
    s = make((cv_sample_params){ .temperature = 1, .top_p = 1, .seed = 3 }, 4);
    histogram(s, l, 4, 3000, counts);
    CHECK(counts[3] > 0);
    cv_sampler_destroy(s);
}

static int cmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

TEST(top_p_on_a_large_flat_vocabulary_matches_a_full_sort)
{
    /* 50000 tokens with slowly decaying logits: the 0.9 mass needs
     * thousands of tokens, so the ranking has to grow past its first tries. */
    const int32_t V = 50000;
    float *l = malloc((size_t)V * sizeof *l);
    cv_rng r;
    cv_rng_seed(&r, 11);
    for (int32_t i = 0; i < V; i++)
        l[i] = cv_rng_normal(&r) * 0.5f;
    /* Brute force: the cut-off logit of the 0.9 set. */
    float *sorted = malloc((size_t)V * sizeof *sorted);
    memcpy(sorted, l, (size_t)V * sizeof *sorted);
    qsort(sorted, (size_t)V, sizeof *sorted, cmp);
    double z = 0, cum = 0;
    for (int32_t i = 0; i < V; i++) z += exp(sorted[i] - sorted[0]);
    int32_t keep = 0;
    while (cum < 0.9 * z) cum += exp(sorted[keep++] - sorted[0]);
    float cutoff = sorted[keep - 1];
    CHECK(keep > 1000);
    cv_sampler *s = make((cv_sample_params){ .temperature = 1, .top_p = 0.9f, .seed = 5 }, V);
    int below = 0, distinct = 0;
    uint8_t *seen = calloc((size_t)V, 1);
    for (int i = 0; i < 1000; i++) {
        int32_t t = cv_sampler_sample(s, l);
        below += l[t] < cutoff;
        distinct += !seen[t];
        seen[t] = 1;
    }
    free(seen);
    CHECK_MSG(below == 0, "%d of 1000 draws fell outside the top-p set", below);
    /* The set holds > 1000 tokens of similar weight: a set cut too short
     * would repeat itself. */
    CHECK_MSG(distinct > 900, "1000 draws gave only %d distinct tokens from a set of %d", distinct, keep);
    cv_sampler_destroy(s);
    free(sorted);
    free(l);
}

TEST(min_p_drops_tokens_below_a_fraction_of_the_best)
{
    float l[4];
    four(l);
    int counts[4];
    /* p_max 0.5 x 0.25 = 0.125: 0.15 stays, 0.05 goes. */
    cv_sampler *s = make((cv_sample_params){ .temperature = 1, .min_p = 0.25f, .seed = 9 }, 4);
    histogram(s, l, 4, 3000, counts);
    CHECK(counts[2] > 0 && counts[3] == 0);
    cv_sampler_destroy(s);
}

TEST(repetition_penalty_divides_positive_and_multiplies_negative_logits)
{
    float l[3] = { 2.0f, 1.9f, -1.0f };
    cv_sampler *s = make((cv_sample_params){ .repeat_penalty = 1.2f }, 3);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 0);
    cv_sampler_accept(s, 0); /* 2.0 / 1.2 = 1.67 < 1.9 */
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    float m[2] = { -1.0f, -1.1f };
    s = make((cv_sample_params){ .repeat_penalty = 1.2f }, 2);
    cv_sampler_accept(s, 0); /* -1.0 x 1.2 = -1.2 < -1.1 */
    CHECK_EQ_INT(cv_sampler_sample(s, m), 1);
    cv_sampler_destroy(s);
}

TEST(presence_and_frequency_penalties_subtract_per_occurrence)
{
    float l[2] = { 1.0f, 0.0f };
    /* frequency 0.3: one occurrence 0.7 > 0, three occurrences 0.1 > 0, four -0.2 < 0. */
    cv_sampler *s = make((cv_sample_params){ .frequency_penalty = 0.3f }, 2);
    for (int i = 0; i < 3; i++) cv_sampler_accept(s, 0);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 0);
    cv_sampler_accept(s, 0);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    /* presence 1.5: once is enough, repeats add nothing more. */
    s = make((cv_sample_params){ .presence_penalty = 1.5f }, 2);
    cv_sampler_accept(s, 0);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    s = make((cv_sample_params){ .presence_penalty = 0.9f }, 2);
    for (int i = 0; i < 10; i++) cv_sampler_accept(s, 0);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 0);
    cv_sampler_destroy(s);
}

TEST(penalty_window_forgets_tokens_that_left_it)
{
    float l[3] = { 1.0f, 0.5f, 0.0f };
    cv_sampler *s = make((cv_sample_params){ .presence_penalty = 2, .penalty_last_n = 2 }, 3);
    cv_sampler_accept(s, 0);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_accept(s, 2);
    cv_sampler_accept(s, 2); /* window is now {2, 2}: 0 left it */
    CHECK_EQ_INT(cv_sampler_sample(s, l), 0);
    cv_sampler_destroy(s);
}

TEST(logit_bias_bans_and_promotes)
{
    float l[3] = { 3, 2, 1 };
    cv_logit_bias ban[] = { { 0, -INFINITY } }, promote[] = { { 2, 5 } };
    cv_sampler *s = make((cv_sample_params){ .n_logit_bias = 1, .logit_bias = ban }, 3);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 1);
    cv_sampler_destroy(s);
    s = make((cv_sample_params){ .n_logit_bias = 1, .logit_bias = promote }, 3);
    CHECK_EQ_INT(cv_sampler_sample(s, l), 2);
    cv_sampler_destroy(s);
    /* A banned token is never drawn, even at high temperature. */
    int counts[3];
    s = make((cv_sample_params){ .temperature = 10, .n_logit_bias = 1, .logit_bias = ban, .seed = 2 }, 3);
    histogram(s, l, 3, 2000, counts);
    CHECK(counts[0] == 0 && counts[1] > 0 && counts[2] > 0);
    cv_sampler_destroy(s);
    /* The caller's array may go away after create: it was copied. */
    cv_logit_bias *heap = malloc(sizeof *heap);
    heap[0] = (cv_logit_bias){ 1, -INFINITY };
    s = make((cv_sample_params){ .n_logit_bias = 1, .logit_bias = heap }, 3);
    heap[0].token = 0;
    free(heap);
    l[0] = 0;
    CHECK_EQ_INT(cv_sampler_sample(s, l), 2);
    cv_sampler_destroy(s);
}

TEST(same_seed_gives_the_same_tokens_and_another_seed_does_not)
{
    const int32_t V = 1000;
    float *l = malloc((size_t)V * sizeof *l);
    for (int32_t i = 0; i < V; i++)
        l[i] = sinf((float)i) * 2;
    cv_sample_params p = { .temperature = 0.9f, .top_k = 200, .top_p = 0.95f, .min_p = 0.01f, .repeat_penalty = 1.1f,
                           .presence_penalty = 0.2f, .frequency_penalty = 0.1f, .seed = 1234 };
    int32_t a[200], b[200], c[200];
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 4321 : 1234;
        cv_sampler *s = make(p, V);
        int32_t *out = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < 200; i++) {
            out[i] = cv_sampler_sample(s, l);
            cv_sampler_accept(s, out[i]);
        }
        cv_sampler_destroy(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    free(l);
}

TEST(logprobs_are_the_log_softmax_of_raw_logits)
{
    float l[6] = { 1, 4, 2, 4, -1, 0 };
    float lp, top_lp[3];
    int32_t top[3];
    cv_logprobs(l, 6, 2, 3, &lp, top, top_lp);
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(l[i]);
    CHECK_NEAR(lp, 2 - log(z), 1e-5);
    CHECK(top[0] == 1 && top[1] == 3 && top[2] == 2); /* ties: lower id first */
    CHECK_NEAR(top_lp[0], 4 - log(z), 1e-5);
    CHECK(top_lp[0] >= top_lp[1] && top_lp[1] >= top_lp[2]);
}

TEST(hostile_sampling_parameters_are_refused_with_the_field_named)
{
    cv_logit_bias out_of_range[] = { { 10, 1 } }, nan_bias[] = { { 1, NAN } }, inf_bias[] = { { 1, INFINITY } };
    struct {
        cv_sample_params p;
        int code;
        const char *field;
    } cases[] = {
        { { .top_p = NAN }, CV_EINVAL, "top_p" },
        { { .min_p = 1.5f }, CV_EINVAL, "min_p" },
        { { .min_p = NAN }, CV_EINVAL, "min_p" },
        { { .repeat_penalty = -1 }, CV_EINVAL, "repeat_penalty" },
        { { .repeat_penalty = INFINITY }, CV_EINVAL, "repeat_penalty" },
        { { .presence_penalty = 3 }, CV_EINVAL, "presence_penalty" },
        { { .frequency_penalty = -2.5f }, CV_EINVAL, "frequency_penalty" },
        { { .frequency_penalty = NAN }, CV_EINVAL, "frequency_penalty" },
        { { .n_logit_bias = 1, .logit_bias = out_of_range }, CV_EINVAL, "token 10" },
        { { .n_logit_bias = 1, .logit_bias = nan_bias }, CV_EINVAL, "logit_bias" },
        { { .n_logit_bias = 1, .logit_bias = inf_bias }, CV_EINVAL, "logit_bias" },
        { { .n_logit_bias = -1 }, CV_EINVAL, "logit_bias" },
        { { .n_logit_bias = CV_MAX_LOGIT_BIAS + 1 }, CV_ELIMIT, "logit_bias" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_sampler *s = (cv_sampler *)1;
        cv_err err = { 0 };
        int rc = cv_sampler_create(&cases[i].p, 10, &s, &err);
        CHECK_MSG(rc == cases[i].code && s == NULL && strstr(err.msg, cases[i].field), "case %zu: rc %d, \"%s\"", i,
                  rc, err.msg);
    }
}

int main(void)
{
    RUN(greedy_takes_the_argmax_and_the_lowest_id_on_ties);
    RUN(temperature_draws_follow_the_softmax);
    RUN(top_k_keeps_only_the_k_best);
    RUN(top_p_keeps_the_smallest_set_reaching_p);
    RUN(top_p_on_a_large_flat_vocabulary_matches_a_full_sort);
    RUN(min_p_drops_tokens_below_a_fraction_of_the_best);
    RUN(repetition_penalty_divides_positive_and_multiplies_negative_logits);
    RUN(presence_and_frequency_penalties_subtract_per_occurrence);
    RUN(penalty_window_forgets_tokens_that_left_it);
    RUN(logit_bias_bans_and_promotes);
    RUN(same_seed_gives_the_same_tokens_and_another_seed_does_not);
    RUN(logprobs_are_the_log_softmax_of_raw_logits);
    RUN(hostile_sampling_parameters_are_refused_with_the_field_named);
    return test_report();
}
