/* synth.h — test helper: a random-weight language model small enough to run
 * thousands of constrained generations inside the test suite. It is a
 * one-layer recurrent network (h' = tanh(W h + E[token]), logits = U h) with
 * seeded Gaussian weights over a real vocabulary; sampling is the usual
 * softmax at a temperature over the allowed tokens only. With random weights
 * it has no idea of JSON, which is the point: every structural token it
 * produces is there because the mask forced it. */
#ifndef CV_TEST_SYNTH_H
#define CV_TEST_SYNTH_H

#include <math.h>

#include "base/base.h"

#define SYNTH_H 24

typedef struct synth {
    int32_t n_vocab;
    float *E, *U; /* [n_vocab][SYNTH_H] */
    float W[SYNTH_H][SYNTH_H];
    float h[SYNTH_H];
    float *logits;
    cv_rng rng;
} synth;

static void synth_init(synth *m, int32_t n_vocab, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->n_vocab = n_vocab;
    cv_rng_seed(&m->rng, seed);
    m->E = malloc((size_t)n_vocab * SYNTH_H * sizeof(float));
    m->U = malloc((size_t)n_vocab * SYNTH_H * sizeof(float));
    m->logits = malloc((size_t)n_vocab * sizeof(float));
    for (size_t i = 0; i < (size_t)n_vocab * SYNTH_H; i++) {
        m->E[i] = cv_rng_normal(&m->rng);
        m->U[i] = cv_rng_normal(&m->rng) * 0.7f;
    }
    for (int i = 0; i < SYNTH_H; i++)
        for (int j = 0; j < SYNTH_H; j++)
            m->W[i][j] = cv_rng_normal(&m->rng) / sqrtf((float)SYNTH_H);
}

static void synth_free(synth *m)
{
    free(m->E);
    free(m->U);
    free(m->logits);
}

static void synth_reset(synth *m, uint64_t seed)
{
    memset(m->h, 0, sizeof m->h);
    cv_rng_seed(&m->rng, seed);
}

static void synth_feed(synth *m, int32_t tok)
{
    float nh[SYNTH_H];
    for (int i = 0; i < SYNTH_H; i++) {
        float a = m->E[(size_t)tok * SYNTH_H + i];
        for (int j = 0; j < SYNTH_H; j++)
            a += m->W[i][j] * m->h[j];
        nh[i] = tanhf(a);
    }
    memcpy(m->h, nh, sizeof nh);
}

/* Samples among the tokens set in allowed at temperature temp; -1 if none. */
static int32_t synth_sample(synth *m, const uint64_t *allowed, float temp)
{
    float mx = -INFINITY;
    for (int32_t t = 0; t < m->n_vocab; t++) {
        if (!(allowed[t >> 6] >> (t & 63) & 1))
            continue;
        float a = 0;
        const float *u = m->U + (size_t)t * SYNTH_H;
        for (int j = 0; j < SYNTH_H; j++)
            a += u[j] * m->h[j];
        m->logits[t] = a / temp;
        if (a / temp > mx)
            mx = a / temp;
    }
    if (mx == -INFINITY)
        return -1;
    double sum = 0;
    for (int32_t t = 0; t < m->n_vocab; t++)
        if (allowed[t >> 6] >> (t & 63) & 1)
            sum += exp(m->logits[t] - mx);
    double r = cv_rng_f32(&m->rng) * sum;
    int32_t last = -1;
    for (int32_t t = 0; t < m->n_vocab; t++) {
        if (!(allowed[t >> 6] >> (t & 63) & 1))
            continue;
        last = t;
        r -= exp(m->logits[t] - mx);
        if (r <= 0)
            return t;
    }
    return last;
}

#endif
