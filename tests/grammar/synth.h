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

#define SYNTH_H 8

/* The model is test scaffolding run ~600k times per suite: it is left out of
 * the sanitizers so that the sanitized grammar code dominates the run time. */
#define SYNTH_FAST __attribute__((no_sanitize("address", "undefined")))

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

SYNTH_FAST static void synth_feed(synth *m, int32_t tok)
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

/* exp(x) for x <= 0 to about 1e-4 relative: the sampler needs the shape
 * of the distribution, not libm's last bit, and runs for every allowed
 * token of every step of thousands of generations. */
SYNTH_FAST static inline float synth_exp(float x)
{
    if (x < -80.0f)
        return 0.0f;
    float t = x * 1.44269504f; /* log2(e) */
    float fi = floorf(t), f = t - fi;
    float p = 1.0f + f * (0.69314718f + f * (0.24022651f + f * (0.05550411f + f * (0.00961813f + f * 0.00133336f))));
    union { float f; int32_t i; } u = { p };
    u.i += (int32_t)((uint32_t)(int32_t)fi << 23);
    return u.f;
}

/* Computes the weights of the allowed tokens at temperature temp into
 * m->logits and returns their sum (0 when none is allowed). */
SYNTH_FAST static double synth_weigh(synth *m, const uint64_t *allowed, float temp)
{
    float mx = -INFINITY;
    int32_t words = (m->n_vocab + 63) / 64;
    for (int32_t w = 0; w < words; w++) {
        for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
            int32_t t = w * 64 + __builtin_ctzll(bits);
            const float *u = m->U + (size_t)t * SYNTH_H;
            float a = 0;
            for (int j = 0; j < SYNTH_H; j++)
                a += u[j] * m->h[j];
            a /= temp;
            m->logits[t] = a;
            if (a > mx)
                mx = a;
        }
    }
    if (mx == -INFINITY)
        return 0;
    double sum = 0;
    for (int32_t w = 0; w < words; w++)
        for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
            int32_t t = w * 64 + __builtin_ctzll(bits);
            m->logits[t] = synth_exp(m->logits[t] - mx);
            sum += m->logits[t];
        }
    return sum;
}

/* Draws one allowed token by the weights of synth_weigh; -1 if none. */
SYNTH_FAST static int32_t synth_draw(synth *m, const uint64_t *allowed, double sum)
{
    int32_t words = (m->n_vocab + 63) / 64, last = -1;
    double r = cv_rng_f32(&m->rng) * sum;
    for (int32_t w = 0; w < words; w++)
        for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
            int32_t t = w * 64 + __builtin_ctzll(bits);
            last = t;
            r -= m->logits[t];
            if (r <= 0)
                return t;
        }
    return last;
}

#endif
