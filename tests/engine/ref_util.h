/* ref_util.h — helpers the engine and model tests share: reading the
 * reference oracle of ../shared/testdata/reference (logit files, greedy
 * files, token sequences, the manifest), running a model over a token
 * sequence, and the comparison metrics its README defines (max |Δ|, rms,
 * cosine, KL(ref ‖ ours) from softmax of raw logits). */
#ifndef CV_TEST_REF_UTIL_H
#define CV_TEST_REF_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "test.h"

static inline json_t *ref_json(const char *path)
{
    cv_buf b = { 0 };
    cv_err err = { 0 };
    if (cv_read_file(path, &b, 64u << 20, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    json_t *j = cv_json_parse(b.data, b.len, &err);
    if (!j)
        fprintf(stderr, "%s: %s\n", path, err.msg);
    cv_buf_free(&b);
    return j;
}

/* n floats from a raw little-endian f32 file; NULL if the size differs. */
static inline float *ref_f32(const char *path, int32_t n)
{
    cv_buf b = { 0 };
    cv_err err = { 0 };
    if (cv_read_file(path, &b, 64u << 20, &err) || b.len != (size_t)n * 4) {
        fprintf(stderr, "%s: %s (%zu bytes, expected %d)\n", path, err.msg, b.len, n * 4);
        cv_buf_free(&b);
        return NULL;
    }
    float *f = malloc((size_t)n * 4);
    memcpy(f, b.data, (size_t)n * 4);
    cv_buf_free(&b);
    return f;
}

/* 32 lines of "id margin". */
static inline int ref_greedy(const char *path, int32_t *ids, float *margins)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0;
    while (n < 32 && fscanf(f, "%d %f", &ids[n], &margins[n]) == 2)
        n++;
    fclose(f);
    return n == 32 ? 0 : -1;
}

/* The ids of sequences.json's sequences.<family>.<name>; caller frees. */
static inline int32_t *ref_seq(json_t *seqs, const char *family, const char *name, int32_t *n)
{
    json_t *a = json_object_get(json_object_get(json_object_get(seqs, "sequences"), family), name);
    *n = (int32_t)json_array_size(a);
    int32_t *ids = malloc((size_t)(*n ? *n : 1) * sizeof *ids);
    for (int32_t i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return ids;
}

typedef struct ref_metrics {
    double max_abs, rms, cos, kl;
    int32_t top1_a, top1_b;
} ref_metrics;

static inline ref_metrics ref_compare(const float *ref, const float *x, int32_t n)
{
    ref_metrics m = { 0 };
    double dot = 0, na = 0, nb = 0, ss = 0;
    float ma = -INFINITY, mb = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        double d = (double)ref[i] - x[i];
        m.max_abs = fmax(m.max_abs, fabs(d));
        ss += d * d;
        dot += (double)ref[i] * x[i];
        na += (double)ref[i] * ref[i];
        nb += (double)x[i] * x[i];
        if (ref[i] > ma) ma = ref[i];
        if (x[i] > mb) mb = x[i];
    }
    m.rms = sqrt(ss / n);
    m.cos = dot / sqrt(na * nb);
    double za = 0, zb = 0;
    for (int32_t i = 0; i < n; i++) {
        za += exp((double)ref[i] - ma);
        zb += exp((double)x[i] - mb);
    }
    double lza = log(za) + ma, lzb = log(zb) + mb;
    for (int32_t i = 0; i < n; i++) {
        double lpa = ref[i] - lza, lpb = x[i] - lzb;
        m.kl += exp(lpa) * (lpa - lpb);
    }
    m.top1_a = cv_argmax(ref, n);
    m.top1_b = cv_argmax(x, n);
    return m;
}

/* Runs ids through a fresh sequence in one forward call and copies the
 * logits of the rows asked for (want == NULL: the last) into out. */
static inline int ref_run(cv_engine *e, const int32_t *ids, int32_t n, const bool *want, float *out)
{
    int32_t seq;
    cv_err err = { 0 };
    if (cv_engine_seq_open(e, &seq, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seqs = malloc((size_t)n * sizeof *seqs);
    for (int32_t i = 0; i < n; i++)
        pos[i] = i, seqs[i] = seq;
    cv_batch b = { .n_tokens = n, .token = ids, .seq = seqs, .pos = pos, .want = want };
    const float *lg;
    int32_t nl;
    int rc = cv_engine_forward(e, &b, &lg, &nl, &err);
    if (rc)
        fprintf(stderr, "forward: %s\n", err.msg);
    else
        memcpy(out, lg, (size_t)nl * (size_t)cv_engine_model(e)->hp.n_vocab * sizeof(float));
    free(pos);
    free(seqs);
    cv_engine_seq_close(e, seq);
    return rc;
}

/* Greedy continuation: the prompt in one call, then n_gen - 1 single steps. */
static inline int ref_greedy_run(cv_engine *e, const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t *out)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    int32_t seq;
    cv_err err = { 0 };
    if (cv_engine_seq_open(e, &seq, &err))
        return -1;
    int32_t *pos = malloc((size_t)n_prompt * sizeof *pos), *seqs = malloc((size_t)n_prompt * sizeof *seqs);
    for (int32_t i = 0; i < n_prompt; i++)
        pos[i] = i, seqs[i] = seq;
    cv_batch b = { .n_tokens = n_prompt, .token = prompt, .seq = seqs, .pos = pos };
    const float *lg;
    int32_t nl;
    int rc = cv_engine_forward(e, &b, &lg, &nl, &err);
    for (int32_t k = 0; rc == 0 && k < n_gen; k++) {
        out[k] = cv_argmax(lg, V);
        if (k + 1 == n_gen)
            break;
        int32_t p = n_prompt + k;
        cv_batch s = { .n_tokens = 1, .token = &out[k], .seq = &seq, .pos = &p };
        rc = cv_engine_forward(e, &s, &lg, &nl, &err);
    }
    if (rc)
        fprintf(stderr, "greedy: %s\n", err.msg);
    free(pos);
    free(seqs);
    cv_engine_seq_close(e, seq);
    return rc;
}

/* A temp file path under $TMPDIR (the caller unlinks it). */
static inline void ref_tmp_path(char *out, size_t n, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    snprintf(out, n, "%s/corvid-test-%s-%d-XXXXXX", dir ? dir : "/tmp", tag, (int)getpid());
    int fd = mkstemp(out);
    if (fd >= 0)
        close(fd);
}

#endif
