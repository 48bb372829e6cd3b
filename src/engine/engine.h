/* engine — the face of the engine layer: batched forward passes over many
 * sequences at once, the paged KV cache, and sampling.
 *
 * (This header is being built; the sampling parameters below are fixed
 * first because the scheduler and server pass them through.) */
#ifndef CV_ENGINE_H
#define CV_ENGINE_H

#include "base/base.h"

/* ---- sampling ---- */

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

#endif
