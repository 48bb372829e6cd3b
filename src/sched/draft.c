/* draft.c — drafts for speculative decoding by prompt lookup: the tokens
 * that followed the most recent earlier occurrence of the sequence's last
 * few tokens. An agent's edit re-emits code it was shown (a file, a diff,
 * its own earlier reply), so once a few tokens of a line match, the rest
 * of the line usually follows as it stood. No draft model: the search is
 * one backward pass over the known tokens per step (O(n): 26-28 us at 32k
 * tokens on the Zen 3 machine, 0.1% of a 25 ms step), and verifying a
 * draft costs one forward call of 1 + k tokens, which on a CPU reads the
 * weights once, as a single token does. */
#include "sched/sched_int.h"

/* The i-th drafted token saves a step when it and every one before it are
 * taken (chance accept^i), so it is worth verifying while accept^i beats
 * draft_s / step_s. A drafted token costs its attention over the context
 * (within the step's room the weights cost nothing more: build_batch):
 * near the start of a context that ratio is ~0 and every token is drafted;
 * at 12k positions of a 0.5B model it is ~0.3 (docs/PERF.md, "Speculative
 * decoding"). */
int32_t cv_sched_draft_worth(double draft_s, double step_s, float accept, int32_t k_max)
{
    if (step_s <= 0)
        return k_max;
    const double ratio = draft_s / step_s;
    double p = 1;
    int32_t k = 0;
    while (k < k_max && (p *= accept) > ratio)
        k++;
    return k;
}

int32_t cv_sched_draft(const int32_t *tokens, int32_t n, int32_t k_max, int32_t *out)
{
    if (k_max <= 0 || n < CV_SCHED_DRAFT_NGRAM_MIN + 1)
        return 0;
    /* Earlier positions m whose token equals the last one, newest first;
     * the longest match backwards wins (CV_SCHED_DRAFT_NGRAM_MAX at most),
     * the newest among equals. m + 1 < n: something follows it. */
    const int32_t last = tokens[n - 1];
    int32_t best_m = -1, best_len = 0;
    for (int32_t m = n - 2; m >= 0 && best_len < CV_SCHED_DRAFT_NGRAM_MAX; m--) {
        if (tokens[m] != last)
            continue;
        int32_t len = 1;
        while (len < CV_SCHED_DRAFT_NGRAM_MAX && m - len >= 0 && tokens[m - len] == tokens[n - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_m = m;
        }
    }
    if (best_len < CV_SCHED_DRAFT_NGRAM_MIN)
        return 0;
    /* What followed the match; where that runs into the end of the known
     * tokens, the draft continues from its own start, as the repetition
     * would (a loop, a run of one token, a table's rows). */
    for (int32_t k = 0; k < k_max; k++) {
        const int32_t i = best_m + 1 + k;
        out[k] = i < n ? tokens[i] : out[i - n];
    }
    return k_max;
}
