/* sampler.c — choosing the next token: logit bias, repetition / presence /
 * frequency penalties over a window, then greedy, or top-k, top-p, min-p,
 * temperature and a draw from a seeded xoshiro stream (engine.h gives the
 * order and its reasons). Everything is deterministic: candidates are
 * ranked by (logit descending, id ascending), so the same logits, params
 * and seed give the same token on every machine and thread count.
 *
 * Cost per token is O(n_vocab) (top-k adds O(n_vocab log k)): top-p never
 * sorts the vocabulary; a quickselect on probability mass finds its
 * boundary. All scratch is allocated at creation. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"

struct cv_sampler {
    cv_sample_params p;
    cv_logit_bias *bias;   /* owned copy of p.logit_bias */
    int32_t n_vocab;
    cv_rng rng;
    bool penalize;
    int32_t window;        /* penalty_last_n, <= 0: unbounded */
    int32_t *hist;         /* ring of the last `window` tokens */
    int32_t hist_len, hist_head;
    int32_t *counts;       /* [n_vocab] occurrences inside the window */
    int32_t *active;       /* tokens whose count may be > 0 */
    int32_t n_active;
    uint8_t *in_active;    /* [n_vocab] */
    float *work;           /* [n_vocab] adjusted logits */
    int32_t *cand;         /* [n_vocab] */
    float *prob;           /* [n_vocab] */
    float *weight;         /* [n_vocab] exp(l - max) by token id, for top-p */
};

/* ---- ranking ---- */

static inline bool better(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

/* The k best of ids[0..n) by `better`, written best first to out[0..k).
 * A heap holding the worst kept id on top: O(n log k). */
static void top_k_sorted(const float *l, const int32_t *ids, int32_t n, int32_t k, int32_t *out)
{
    int32_t h = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = ids ? ids[i] : i;
        int32_t c;
        if (h < k) {
            c = h++;
            while (c > 0) { /* sift up: parent must be worse than child */
                int32_t parent = (c - 1) / 2;
                if (!better(l, out[parent], id))
                    break;
                out[c] = out[parent];
                c = parent;
            }
            out[c] = id;
            continue;
        }
        if (!better(l, id, out[0]))
            continue;
        c = 0; /* replace the worst and sift down */
        for (;;) {
            int32_t a = 2 * c + 1, b = a + 1, w = c;
            int32_t wid = w == c ? id : out[w];
            if (a < h && better(l, wid, out[a])) { w = a; wid = out[a]; }
            if (b < h && better(l, wid, out[b])) { w = b; }
            if (w == c)
                break;
            out[c] = out[w];
            c = w;
        }
        out[c] = id;
    }
    /* Heap-sort in place: repeatedly move the worst to the end. */
    for (int32_t end = h - 1; end > 0; end--) {
        int32_t worst = out[0];
        int32_t id = out[end];
        int32_t c = 0;
        for (;;) {
            int32_t a = 2 * c + 1, b = a + 1, w = c;
            int32_t wid = id;
            if (a < end && better(l, wid, out[a])) { w = a; wid = out[a]; }
            if (b < end && better(l, wid, out[b])) { w = b; }
            if (w == c)
                break;
            out[c] = out[w];
            c = w;
        }
        out[c] = id;
        out[end] = worst;
    }
}

/* Reorders ids[0..n) so that ids[0..k) is the shortest prefix, in the
 * order of `better`, whose weights w[id] sum to at least target (which
 * must not exceed the total), and returns k. A quickselect on mass: each
 * round partitions around a median-of-three pivot and keeps only the side
 * the boundary is in, so it costs O(n) expected instead of a sort. The
 * kept ids are not sorted; the draw does not need them to be. */
static int32_t mass_select(const float *l, const float *w, int32_t *ids, int32_t n, double target)
{
    int32_t lo = 0, hi = n; /* ids[0..lo) are in; the boundary is in [lo, hi] */
    double need = target;   /* mass still missing after ids[0..lo) */
    while (hi - lo > 1) {
        int32_t a = ids[lo], b = ids[lo + (hi - lo) / 2], c = ids[hi - 1], pv;
        if (better(l, a, b))
            pv = better(l, b, c) ? b : better(l, a, c) ? c : a;
        else
            pv = better(l, a, c) ? a : better(l, b, c) ? c : b;
        int32_t i = lo, at = -1;
        for (int32_t j = lo; j < hi; j++) {
            if (ids[j] == pv) {
                at = j;
            } else if (better(l, ids[j], pv)) {
                int32_t t = ids[i];
                ids[i] = ids[j];
                ids[j] = t;
                if (at == i)
                    at = j;
                i++;
            }
        }
        ids[at] = ids[i];
        ids[i] = pv;
        double upper = 0;
        for (int32_t j = lo; j < i; j++)
            upper += w[ids[j]];
        if (upper >= need) {
            hi = i;
        } else if (upper + w[pv] >= need) {
            return i + 1;
        } else {
            need -= upper + w[pv];
            lo = i + 1;
        }
    }
    return CV_MAX(hi, 1);
}

int32_t cv_argmax(const float *l, int32_t n) { return (int32_t)cv_argmax_f32(l, n); }

/* ---- lifecycle ---- */

int cv_sampler_create(const cv_sample_params *p, int32_t n_vocab, cv_sampler **out, cv_err *err)
{
    *out = NULL;
    if (n_vocab < 1 || n_vocab > CV_MAX_VOCAB)
        return cv_err_set(err, CV_EINVAL, "sampler: vocabulary of %d tokens, must be 1..%d", n_vocab, CV_MAX_VOCAB);
    if (isnan(p->top_p))
        return cv_err_set(err, CV_EINVAL, "sampling: top_p is NaN, must be a number (>= 1 or <= 0: off)");
    if (!(p->min_p <= 1) || isnan(p->min_p))
        return cv_err_set(err, CV_EINVAL, "sampling: min_p = %g, must be <= 1 (<= 0: off)", p->min_p);
    if (!(p->repeat_penalty >= 0) || !isfinite(p->repeat_penalty))
        return cv_err_set(err, CV_EINVAL, "sampling: repeat_penalty = %g, must be a finite number >= 0 (0 or 1: off)",
                          p->repeat_penalty);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return cv_err_set(err, CV_EINVAL, "sampling: presence_penalty = %g, must be -2..2", p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return cv_err_set(err, CV_EINVAL, "sampling: frequency_penalty = %g, must be -2..2", p->frequency_penalty);
    if (p->n_logit_bias < 0 || p->n_logit_bias > CV_MAX_LOGIT_BIAS)
        return cv_err_set(err, p->n_logit_bias < 0 ? CV_EINVAL : CV_ELIMIT,
                          "sampling: %d logit_bias entries, must be 0..%d", p->n_logit_bias, CV_MAX_LOGIT_BIAS);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const cv_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return cv_err_set(err, CV_EINVAL, "sampling: logit_bias names token %d, must be 0..%d", b->token,
                              n_vocab - 1);
        if (isnan(b->bias) || b->bias == INFINITY)
            return cv_err_set(err, CV_EINVAL, "sampling: logit_bias for token %d is %g, must be finite or -infinity",
                              b->token, b->bias);
    }

    cv_sampler *s = cv_xcalloc(1, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    if (p->n_logit_bias) {
        s->bias = cv_xmalloc((size_t)p->n_logit_bias * sizeof *s->bias);
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    cv_rng_seed(&s->rng, p->seed);
    s->penalize = (p->repeat_penalty != 0 && p->repeat_penalty != 1) || p->presence_penalty != 0 ||
                  p->frequency_penalty != 0;
    if (s->penalize) {
        s->window = p->penalty_last_n > 0 ? CV_MIN(p->penalty_last_n, CV_MAX_CONTEXT) : 0;
        if (s->window)
            s->hist = cv_xmalloc((size_t)s->window * sizeof *s->hist);
        s->counts = cv_xcalloc((size_t)n_vocab, sizeof *s->counts);
        s->active = cv_xmalloc((size_t)n_vocab * sizeof *s->active);
        s->in_active = cv_xcalloc((size_t)n_vocab, 1);
    }
    s->work = cv_xmalloc((size_t)n_vocab * sizeof *s->work);
    s->cand = cv_xmalloc((size_t)n_vocab * sizeof *s->cand);
    s->prob = cv_xmalloc((size_t)n_vocab * sizeof *s->prob);
    s->weight = cv_xmalloc((size_t)n_vocab * sizeof *s->weight);
    *out = s;
    return 0;
}

void cv_sampler_destroy(cv_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->hist);
    free(s->counts);
    free(s->active);
    free(s->in_active);
    free(s->work);
    free(s->cand);
    free(s->prob);
    free(s->weight);
    free(s);
}

void cv_sampler_accept(cv_sampler *s, int32_t token)
{
    if (!s->penalize || token < 0 || token >= s->n_vocab)
        return;
    if (s->window) {
        if (s->hist_len == s->window)
            s->counts[s->hist[s->hist_head]]--; /* the oldest leaves the window */
        else
            s->hist_len++;
        s->hist[s->hist_head] = token;
        s->hist_head = (s->hist_head + 1) % s->window;
    }
    s->counts[token]++;
    if (!s->in_active[token]) {
        s->in_active[token] = 1;
        s->active[s->n_active++] = token;
    }
}

/* ---- sampling ---- */

static void apply_penalties(cv_sampler *s, float *l)
{
    const float rp = s->p.repeat_penalty;
    const bool rep = rp != 0 && rp != 1;
    int32_t kept = 0;
    for (int32_t i = 0; i < s->n_active; i++) {
        int32_t t = s->active[i];
        int32_t c = s->counts[t];
        if (c == 0) {
            s->in_active[t] = 0;
            continue;
        }
        s->active[kept++] = t;
        if (rep)
            l[t] = l[t] > 0 ? l[t] / rp : l[t] * rp;
        l[t] -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
    }
    s->n_active = kept;
}

int32_t cv_sampler_sample(cv_sampler *s, const float *logits)
{
    const int32_t V = s->n_vocab;
    const float *l = logits;
    if (s->p.n_logit_bias || s->penalize) {
        memcpy(s->work, logits, (size_t)V * sizeof(float));
        for (int32_t i = 0; i < s->p.n_logit_bias; i++)
            s->work[s->bias[i].token] += s->bias[i].bias;
        if (s->penalize)
            apply_penalties(s, s->work);
        l = s->work;
    }
    if (!(s->p.temperature > 0))
        return cv_argmax(l, V);

    /* Candidates: every token not banned (-inf). */
    int32_t *cand = s->cand;
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++)
        if (l[i] > -INFINITY)
            cand[n++] = i;
    if (n == 0)
        return cv_argmax(l, V);

    if (s->p.top_k > 0 && s->p.top_k < n) {
        /* top_k_sorted reads ids from cand while writing out: use prob's
         * memory as the output (same size, int32 and float alike). */
        int32_t *tmp = (int32_t *)s->prob;
        top_k_sorted(l, cand, n, s->p.top_k, tmp);
        n = s->p.top_k;
        memcpy(cand, tmp, (size_t)n * sizeof *cand);
    }

    if (s->p.top_p > 0 && s->p.top_p < 1) {
        float mx = -INFINITY;
        for (int32_t i = 0; i < n; i++)
            mx = l[cand[i]] > mx ? l[cand[i]] : mx;
        double z = 0;
        for (int32_t i = 0; i < n; i++) {
            float w = expf(l[cand[i]] - mx);
            s->weight[cand[i]] = w;
            z += w;
        }
        n = mass_select(l, s->weight, cand, n, s->p.top_p * z);
    }

    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        mx = l[cand[i]] > mx ? l[cand[i]] : mx;
    if (s->p.min_p > 0) {
        const float thr = mx + logf(s->p.min_p);
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
            if (l[cand[i]] >= thr)
                cand[kept++] = cand[i];
        n = kept; /* the best always survives: thr <= mx */
    }

    const float inv_t = 1.0f / s->p.temperature;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        s->prob[i] = expf((l[cand[i]] - mx) * inv_t);
        sum += s->prob[i];
    }
    double u = (double)cv_rng_f32(&s->rng) * sum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += s->prob[i];
        if (acc > u)
            return cand[i];
    }
    return cand[n - 1];
}

void cv_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top, float *lp_token,
                 int32_t *top_ids, float *top_lps)
{
    float mx = logits[cv_argmax(logits, n_vocab)];
    double z = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        z += exp((double)logits[i] - mx);
    const float lse = mx + (float)log(z);
    if (lp_token)
        *lp_token = token >= 0 && token < n_vocab ? logits[token] - lse : -INFINITY;
    if (n_top > 0) {
        n_top = CV_MIN(n_top, n_vocab);
        top_k_sorted(logits, NULL, n_vocab, n_top, top_ids);
        for (int32_t i = 0; i < n_top; i++)
            top_lps[i] = logits[top_ids[i]] - lse;
    }
}
