/* cmd_run.c — `corvid run MODEL -p PROMPT`: one generation straight on the
 * engine (no scheduler, no server), streaming the continuation to stdout
 * and timings to stderr. A text prompt goes through the model's own
 * tokenizer (BOS as the vocabulary says, special tokens written in the
 * prompt parsed, so a rendered chat prompt works) and the continuation is
 * streamed as text (special tokens skipped). With --ids the prompt is token
 * ids and so is the output (a model without a tokenizer, or a check of
 * exact tokens). Generation stops at n tokens or at an end-of-generation
 * token. With --json-schema FILE the output is one JSON document valid for
 * the schema, constrained token by token by the same sampling hook the
 * server uses (server/constrain.c), and it ends complete within n tokens. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "server/constrain.h"
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

/* End-of-generation ids the file names (EOS, EOT, EOM). */
static int32_t eog_ids(const cv_gguf *g, int32_t *out)
{
    static const char *const keys[] = { "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                        "tokenizer.ggml.eom_token_id" };
    int32_t n = 0;
    for (size_t i = 0; i < CV_ARRAY_LEN(keys); i++) {
        int64_t v;
        if (cv_gguf_get_int(g, keys[i], &v, NULL) == 0 && v >= 0 && v < INT32_MAX)
            out[n++] = (int32_t)v;
    }
    return n;
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
    } else {
        if ((rc = cv_tok_load(m->gguf, &tok, &err))) {
            cv_err_prefix(&err, "%s has no usable tokenizer (pass token ids with --ids): ", o->model);
            goto fail;
        }
        cv_tok_ids v = { 0 };
        rc = cv_tok_encode(tok, o->prompt, strlen(o->prompt), CV_TOK_ADD_SPECIAL | CV_TOK_PARSE_SPECIAL, &v, &err);
        prompt = v.ids;
        n_prompt = (int32_t)v.n;
        if (rc)
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
    int32_t eog[3], n_eog = o->ignore_eos || tok ? 0 : eog_ids(m->gguf, eog);
    /* A prompt of special tokens only (BOS) starts the text: SentencePiece's
     * leading space of the first word is dropped, as its decoders do. */
    bool at_start = true;
    for (int32_t i = 0; tok && i < n_prompt; i++)
        at_start = at_start && cv_tok_is_special(tok, prompt[i]);
    cv_tok_stream ts;
    if (tok)
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
        bool stop = tok && (!o->ignore_eos || hook) && cv_tok_is_eog(tok, id);
        for (int32_t i = 0; i < n_eog; i++)
            stop = stop || id == eog[i];
        if (stop)
            break;
        if (tok) {
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
    if (tok) {
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

static int parse_num(const cv_cmd *cmd, const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi))
        return cv_cli_usage_error(cmd, "%s '%s' must be a number from %g to %g", flag, v, lo, hi);
    *out = x;
    return 0;
}

int cv_cmd_run(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("run");
    /* llama.cpp's defaults, so outputs are comparable. */
    run_opts o = { .n_predict = 128,
                   .sp = { .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f } };
    static const struct option opts[] = {
        { "prompt", required_argument, 0, 'p' }, { "n-predict", required_argument, 0, 'n' },
        { "temp", required_argument, 0, 'T' },   { "top-p", required_argument, 0, 'P' },
        { "top-k", required_argument, 0, 'K' },  { "min-p", required_argument, 0, 'M' },
        { "seed", required_argument, 0, 'S' },   { "threads", required_argument, 0, 't' },
        { "ctx", required_argument, 0, 'c' },    { "ids", no_argument, 0, 'i' },
        { "exact", no_argument, 0, 'x' },        { "ignore-eos", no_argument, 0, 'E' },
        { "repeat-penalty", required_argument, 0, 'R' }, { "help", no_argument, 0, 'h' },
        { "json-schema", required_argument, 0, 'J' },
        { 0, 0, 0, 0 },
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "p:n:t:h", opts, NULL)) != -1) {
        double x;
        switch (c) {
        case 'p': o.prompt = optarg; break;
        case 'n': if (parse_num(cmd, "-n", optarg, 1, CV_MAX_CONTEXT, &x)) return 2; o.n_predict = (int32_t)x; break;
        case 'T': if (parse_num(cmd, "--temp", optarg, 0, 100, &x)) return 2; o.sp.temperature = (float)x; break;
        case 'P': if (parse_num(cmd, "--top-p", optarg, 0, 1, &x)) return 2; o.sp.top_p = (float)x; break;
        case 'K': if (parse_num(cmd, "--top-k", optarg, 0, CV_MAX_VOCAB, &x)) return 2; o.sp.top_k = (int32_t)x; break;
        case 'M': if (parse_num(cmd, "--min-p", optarg, 0, 1, &x)) return 2; o.sp.min_p = (float)x; break;
        case 'R': if (parse_num(cmd, "--repeat-penalty", optarg, 0, 100, &x)) return 2;
            o.sp.repeat_penalty = (float)x;
            o.sp.penalty_last_n = 64;
            break;
        case 'S': if (parse_num(cmd, "--seed", optarg, 0, 1e18, &x)) return 2;
            o.sp.seed = (uint64_t)x;
            o.sp.has_seed = true;
            break;
        case 't': if (parse_num(cmd, "--threads", optarg, 1, 1024, &x)) return 2; o.threads = (int32_t)x; break;
        case 'c': if (parse_num(cmd, "--ctx", optarg, 1, CV_MAX_CONTEXT, &x)) return 2; o.n_ctx = (int32_t)x; break;
        case 'i': o.ids = true; break;
        case 'x': o.exact = true; break;
        case 'E': o.ignore_eos = true; break;
        case 'J': o.json_schema = optarg; break;
        case 'h': printf("%s\n\nusage: %s\n", cmd->summary, cmd->usage); return 0;
        default: return cv_cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cv_cli_usage_error(cmd, "needs one MODEL");
    o.model = argv[optind];
    if (!o.prompt)
        return cv_cli_usage_error(cmd, "-p PROMPT is required");
    return run(&o);
}
