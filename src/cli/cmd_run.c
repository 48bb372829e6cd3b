/* cmd_run.c — `corvid run MODEL -p PROMPT`: one generation straight on the
 * engine, streaming the continuation to stdout and timings to stderr. A
 * text prompt is encoded as the server encodes a completions prompt
 * (cv_chat_encode_text: BOS as the vocabulary says, special tokens written
 * in the prompt parsed, so a rendered chat prompt works), it stops at the
 * tokenizer's end-of-generation ids as the server does, and the
 * continuation is streamed as text (special tokens skipped). With --ids the
 * prompt is token ids and so is the output (a model without a tokenizer, or
 * a check of exact tokens). Generation stops at n tokens or at an
 * end-of-generation token. With --json-schema FILE the output is one JSON
 * document valid for the schema, constrained token by token by the same
 * sampling hook the server uses (sched/constrain.c), and it ends complete
 * within n tokens.
 *
 * Why not the server's scheduler: run is the engine's own harness. Its
 * loop is one sequence, one forward per token, with no prefix cache, no
 * batching and no speculation between the model and the output, so its
 * tokens and prefill/decode timings are the engine's alone; the reference
 * tests compare them with llama2.c's, and a scheduler bug cannot hide an
 * engine bug there (or the reverse). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "sched/constrain.h"
#include "tokenizer/tokenizer.h"

typedef struct run_opts {
    const char *model, *prompt;
    const char *json_schema; /* file */
    int32_t n_predict, n_ctx, threads;
    bool ids, exact, ignore_eos;
    cv_sample_params sp;
} run_opts;

static int parse_ids(const char *s, int32_t n_vocab, int32_t **out, int32_t *n, cv_err *err)
{
    int32_t cap = 64, k = 0;
    int32_t *ids = cv_xmalloc((size_t)cap * sizeof *ids);
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= n_vocab) {
            free(ids);
            return cv_err_set(err, CV_EINVAL, "--ids prompt: '%.20s' is not a token id in 0..%d", p, n_vocab - 1);
        }
        if (k == CV_MAX_CONTEXT) {
            free(ids);
            return cv_err_set(err, CV_ELIMIT, "--ids prompt: more than %d ids", CV_MAX_CONTEXT);
        }
        if (k == cap)
            ids = cv_xrealloc(ids, (size_t)(cap *= 2) * sizeof *ids);
        ids[k++] = (int32_t)v;
        p = end;
    }
    if (k == 0) {
        free(ids);
        return cv_err_set(err, CV_EINVAL, "--ids prompt holds no token ids");
    }
    *out = ids;
    *n = k;
    return 0;
}

static int run(const run_opts *o)
{
    cv_err err = { 0 };
    cv_model *m = NULL;
    cv_engine *e = NULL;
    cv_sampler *smp = NULL;
    cv_tok *tok = NULL;
    cv_constrain *cons = NULL;
    void *hook = NULL;
    json_t *schema = NULL;
    int32_t *prompt = NULL, n_prompt = 0;
    int rc;
    if (o->json_schema) {
        if (o->ids) {
            rc = cv_err_set(&err, CV_EINVAL, "--json-schema needs a text prompt (not --ids): the schema is over text");
            goto fail;
        }
        json_error_t je;
        if (!(schema = json_load_file(o->json_schema, JSON_DECODE_ANY, &je))) {
            rc = cv_err_set(&err, CV_EINVAL, "--json-schema %s: line %d column %d: %s", o->json_schema, je.line,
                            je.column, je.text);
            goto fail;
        }
    }
    cv_model_params mp = { .dequantize = o->exact };
    if ((rc = cv_model_open(o->model, &mp, &m, &err)))
        goto fail;
    if (o->ids) {
        if ((rc = parse_ids(o->prompt, m->hp.n_vocab, &prompt, &n_prompt, &err)))
            goto fail;
        /* its end-of-generation ids, when the file has a tokenizer */
        if (cv_tok_load(m->gguf, &tok, NULL))
            tok = NULL;
    } else {
        if ((rc = cv_tok_load(m->gguf, &tok, &err))) {
            cv_err_prefix(&err, "%s has no usable tokenizer (pass token ids with --ids): ", o->model);
            goto fail;
        }
        if ((rc = cv_chat_encode_text(tok, cv_str_of(o->prompt), &prompt, &n_prompt, &err)))
            goto fail;
        if (n_prompt == 0) {
            rc = cv_err_set(&err, CV_EINVAL, "the prompt encodes to no tokens (and the vocabulary adds no BOS)");
            goto fail;
        }
        for (int32_t i = 0; i < n_prompt; i++)
            if (prompt[i] >= m->hp.n_vocab) {
                rc = cv_err_set(&err, CV_ECORRUPT, "%s: the tokenizer has ids up to %d but the model only %d",
                                o->model, prompt[i], m->hp.n_vocab - 1);
                goto fail;
            }
    }
    cv_engine_params ep = { .n_threads = o->threads, .n_ctx = o->n_ctx, .n_batch = 512 };
    if (ep.n_ctx <= 0)
        ep.n_ctx = (int32_t)CV_MIN((int64_t)m->hp.n_ctx_train, (int64_t)n_prompt + o->n_predict);
    if ((int64_t)n_prompt + o->n_predict > ep.n_ctx) {
        rc = cv_err_set(&err, CV_EINVAL, "prompt of %d tokens plus -n %d exceeds the context of %d", n_prompt,
                        o->n_predict, ep.n_ctx);
        goto fail;
    }
    if ((rc = cv_engine_create(m, &ep, &e, &err)))
        goto fail;
    cv_sample_params sp = o->sp;
    if (!sp.has_seed)
        sp.seed = cv_now_ns();
    if ((rc = cv_sampler_create(&sp, m->hp.n_vocab, &smp, &err)))
        goto fail;
    if (schema) {
        if ((rc = cv_constrain_create(tok, NULL, &cons, &err)) ||
            (rc = cv_constrain_for_schema(cons, schema, (cv_str){ "", 0 }, o->n_predict, &hook, &err))) {
            cv_err_prefix(&err, "--json-schema %s: ", o->json_schema);
            goto fail;
        }
    }
    /* A prompt of special tokens only (BOS) starts the text: SentencePiece's
     * leading space of the first word is dropped, as its decoders do. */
    bool at_start = true;
    for (int32_t i = 0; !o->ids && i < n_prompt; i++)
        at_start = at_start && cv_tok_is_special(tok, prompt[i]);
    cv_tok_stream ts;
    if (!o->ids)
        cv_tok_stream_init(&ts, tok, CV_TOK_SKIP_SPECIAL | (at_start ? CV_TOK_AT_START : 0));
    cv_buf text = { 0 };

    int32_t seq;
    if ((rc = cv_engine_seq_open(e, &seq, &err)))
        goto fail;
    const float *logits = NULL;
    int32_t nl;
    int32_t pos[512], sq[512];
    for (int i = 0; i < 512; i++)
        sq[i] = seq;
    double t0 = cv_now_s();
    for (int32_t done = 0; done < n_prompt;) {
        int32_t n = CV_MIN(512, n_prompt - done);
        for (int32_t i = 0; i < n; i++)
            pos[i] = done + i;
        if ((rc = cv_engine_forward(e, &(cv_batch){ n, prompt + done, sq, pos, NULL }, &logits, &nl, &err)))
            goto fail;
        done += n;
    }
    for (int32_t i = 0; i < n_prompt; i++)
        cv_sampler_accept(smp, prompt[i]);
    double t1 = cv_now_s();
    int32_t n_gen = 0;
    while (n_gen < o->n_predict) {
        int32_t id;
        if (hook) {
            if ((rc = cv_constrain_hook.choose(hook, smp, logits, m->hp.n_vocab, &id, &err))) {
                cv_buf_free(&text);
                goto fail;
            }
        } else {
            id = cv_sampler_sample(smp, logits);
        }
        if (tok && (!o->ignore_eos || hook) && cv_tok_is_eog(tok, id))
            break;
        if (!o->ids) {
            cv_buf_reset(&text);
            cv_tok_stream_feed(&ts, id, &text, NULL);
            fwrite(text.data, 1, text.len, stdout);
        } else {
            printf("%s%d", n_gen ? " " : "", id);
        }
        fflush(stdout);
        cv_sampler_accept(smp, id);
        if (++n_gen == o->n_predict)
            break;
        int32_t p = n_prompt + n_gen - 1;
        if ((rc = cv_engine_forward(e, &(cv_batch){ 1, &id, &seq, &p, NULL }, &logits, &nl, &err))) {
            cv_buf_free(&text);
            goto fail;
        }
    }
    if (!o->ids) {
        cv_buf_reset(&text);
        cv_tok_stream_flush(&ts, &text);
        fwrite(text.data, 1, text.len, stdout);
    }
    cv_buf_free(&text);
    printf("\n");
    if (hook && !cv_constrain_hook_done(hook))
        fprintf(stderr, "corvid run: the document is incomplete after %d tokens (raise -n)\n", n_gen);
    double t2 = cv_now_s();
    fprintf(stderr, "corvid run: prompt %d tokens in %.3f s (%.1f tok/s); generated %d tokens in %.3f s (%.1f tok/s)\n",
            n_prompt, t1 - t0, n_prompt / fmax(t1 - t0, 1e-9), n_gen, t2 - t1, n_gen / fmax(t2 - t1, 1e-9));
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "corvid run: %s\n", err.msg);
    free(prompt);
    if (hook)
        cv_constrain_hook.destroy(hook);
    cv_constrain_destroy(cons);
    json_decref(schema);
    cv_tok_destroy(tok);
    cv_sampler_destroy(smp);
    cv_engine_destroy(e);
    cv_model_close(m);
    return rc == 0 ? 0 : rc == CV_EINVAL ? 2 : 1;
}

/* --repeat-penalty also sets the window it looks back over (llama.cpp's 64). */
static int repeat_penalty(void *opts, const char *v, cv_err *err)
{
    run_opts *o = opts;
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !(x >= 0 && x <= 100))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a number from 0 to 100", v);
    o->sp.repeat_penalty = (float)x;
    o->sp.penalty_last_n = 64;
    return 0;
}

static int seed(void *opts, const char *v, cv_err *err)
{
    run_opts *o = opts;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-' || x > 1000000000000000000ull)
        return cv_err_set(err, CV_EINVAL, "'%s' must be an integer from 0 to 1e18", v);
    o->sp.seed = (uint64_t)x;
    o->sp.has_seed = true;
    return 0;
}

#define O(field) offsetof(run_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--prompt", "-p", CV_FLAG_STR, O(prompt), 0, 0, "PROMPT",
      "the text to continue (token ids with --ids; required)"),
    CV_FLAG_ROW("--n-predict", "-n", CV_FLAG_I32, O(n_predict), 1, CV_MAX_CONTEXT, "N",
      "tokens to generate (default 128)"),
    CV_FLAG_ROW("--temp", NULL, CV_FLAG_F32, O(sp.temperature), 0, 100, "T", "temperature; 0 is greedy (default 0.8)"),
    CV_FLAG_ROW("--top-p", NULL, CV_FLAG_F32, O(sp.top_p), 0, 1, "P", "nucleus sampling (default 0.95)"),
    CV_FLAG_ROW("--top-k", NULL, CV_FLAG_I32, O(sp.top_k), 0, CV_MAX_VOCAB, "K",
      "the K most likely tokens only (default 40)"),
    CV_FLAG_ROW("--min-p", NULL, CV_FLAG_F32, O(sp.min_p), 0, 1, "P",
      "drop tokens below P x the top probability (default 0.05)"),
    CV_FLAG_FN_ROW("--repeat-penalty", NULL, "R", "penalise the last 64 tokens (default: off)", repeat_penalty, false),
    CV_FLAG_FN_ROW("--seed", NULL, "S", "the sampler's seed (default: from the clock)", seed, false),
    CV_FLAG_ROW("--threads", "-t", CV_FLAG_I32, O(threads), 1, 1024, "N", "compute threads (default: every CPU)"),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I32, O(n_ctx), 1, CV_MAX_CONTEXT, "N",
      "context length (default: the prompt plus N, at most the trained context)"),
    CV_FLAG_ROW("--ids", NULL, CV_FLAG_BOOL, O(ids), 0, 0, NULL, "the prompt is token ids, and ids are printed"),
    CV_FLAG_ROW("--exact", NULL, CV_FLAG_BOOL, O(exact), 0, 0, NULL,
      "dequantize every weight to f32 at load (the reference path)"),
    CV_FLAG_ROW("--ignore-eos", NULL, CV_FLAG_BOOL, O(ignore_eos), 0, 0, NULL, "go on past end-of-generation tokens"),
    CV_FLAG_ROW("--json-schema", NULL, CV_FLAG_STR, O(json_schema), 0, 0, "FILE",
      "constrain the output to this JSON Schema (constrained decoding)"),

};
#undef O
static const cv_cli_spec spec = { .name = "run", .args = "MODEL", .min_args = 1, .max_args = 1, .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_run(int argc, char **argv)
{
    /* llama.cpp's defaults, so outputs are comparable. */
    run_opts o = { .n_predict = 128,
                   .sp = { .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f } };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    o.model = argv[1];
    if (!o.prompt)
        return cv_cli_usage_error(&spec, "-p PROMPT is required");
    return run(&o);
}
