/* sampler.h — the sampling section of the engine face (engine.h includes
 * it): how the next token is chosen from a row of logits, per sequence, and
 * the log-probabilities reported with it (sampler.c). It needs nothing of the
 * compute stack, so the chat layer's neutral request includes this header
 * alone for its sampling parameters. */
#ifndef CV_ENGINE_SAMPLER_H
#define CV_ENGINE_SAMPLER_H

#include "base/base.h"

typedef struct cv_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
} cv_logit_bias;

/* How the next token is chosen. Zero-initialised means greedy with no
 * penalties. Order of application (as the common servers do): logit bias,
 * repetition/presence/frequency penalties over the last penalty_last_n
 * tokens, then greedy if temperature <= 0, else top-k, top-p, min-p,
 * temperature, and a draw from the seeded RNG. Identical parameters and seed
 * give identical tokens. */
typedef struct cv_sample_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1 or <= 0: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1 or 0: off (llama.cpp-style divide/multiply) */
    float presence_penalty;  /* OpenAI-style, 0: off */
    float frequency_penalty; /* OpenAI-style, 0: off */
    int32_t penalty_last_n;  /* window for penalties; <= 0: whole sequence */
    uint64_t seed;           /* used when has_seed; otherwise the scheduler draws one */
    bool has_seed;
    int32_t n_logit_bias;
    const cv_logit_bias *logit_bias;
} cv_sample_params;

/* A sampler holds one sequence's sampling state: its parameters (logit
 * bias copied), its RNG, the penalty window, and scratch sized once for the
 * vocabulary, so sampling allocates nothing. */
typedef struct cv_sampler cv_sampler;

/* Validates p against the vocabulary (CV_EINVAL naming the field: a NaN or
 * negative temperature is fine — it means greedy — but a NaN top_p, a
 * min_p above 1, a negative repeat_penalty, presence/frequency outside
 * -2..2, a bias token outside 0..n_vocab-1 or a NaN/+inf bias are not;
 * CV_ELIMIT beyond CV_MAX_LOGIT_BIAS entries). Seeds the RNG with p->seed
 * (the caller draws one when !has_seed). Caller destroys *out. */
int cv_sampler_create(const cv_sample_params *p, int32_t n_vocab, cv_sampler **out, cv_err *err);
void cv_sampler_destroy(cv_sampler *s);
/* Adds a token to the penalty history (callers feed the prompt too, so a
 * repetition penalty sees it, as llama.cpp's server does). */
void cv_sampler_accept(cv_sampler *s, int32_t token);
/* Chooses the next token from logits [n_vocab] (not modified). */
int32_t cv_sampler_sample(cv_sampler *s, const float *logits);

/* Log-probabilities of the model's own distribution (log-softmax of the raw
 * logits, before bias, penalties and temperature, as OpenAI reports them):
 * *lp_token for `token`, and the n_top best tokens (ties: lower id first)
 * in top_ids/top_lps. n_top may be 0. */
void cv_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top, float *lp_token,
                 int32_t *top_ids, float *top_lps);
/* argmax; the lowest id wins a tie (the reference files' convention). */
int32_t cv_argmax(const float *logits, int32_t n_vocab);

#endif
