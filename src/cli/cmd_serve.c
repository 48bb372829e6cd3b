/* cmd_serve.c — `corvid serve MODEL`: parses and checks the flags, opens the
 * model as a cv_server_backend, and serves HTTP until SIGINT/SIGTERM
 * (cv_server_run: a drain of --drain-timeout seconds, the prefix cache saved,
 * then exit 0).
 *
 * The backend (server/backend.c) is where the layers below the server meet:
 * the GGUF model, the engine and cv_sched, the tokenizer's streaming
 * detokenizer and the model's chat template. The scheduler flags (--kv-memory,
 * --batch-tokens, --draft, --no-prefix-cache, --cache-dir, --cache-max) go to it;
 * defaults that need the environment (the cache directory) are resolved
 * here, those that need the model (KV memory) in the backend. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "server/server.h"

typedef struct serve_opts {
    cv_server_config cfg;
    const char *model;
    const char *served_name;
    int32_t n_ctx;      /* 0: the model's own */
    int32_t parallel;   /* sequences decoded together */
    int32_t threads;    /* compute threads; 0: all cores */
    double drain_s;     /* --drain-timeout */
    int64_t kv_bytes;   /* -1: a share of free memory (cv_sched_default_kv_bytes) */
    uint32_t kv_type;   /* CV_GGML_F16 (default), CV_GGML_F32 or CV_GGML_Q8_0 */
    int32_t batch_tokens;
    int32_t draft;      /* --draft: -1 unset (the scheduler's default), 0 off */
    bool no_prefix_cache;
    const char *cache_dir; /* NULL: cv_sched_default_cache_dir; "": no cache file */
    int64_t cache_max;
    int32_t max_queue;  /* 0: CV_MAX_SCHED_QUEUE */
    int64_t max_body;   /* 0: the server's default */
    bool grammar_lazy;  /* tool_choice auto: lazy tool-call grammar */
} serve_opts;

static int kv_type(void *opts, const char *v, cv_err *err)
{
    return cv_engine_kv_type_parse(v, &((serve_opts *)opts)->kv_type, err);
}

#define O(field) offsetof(serve_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--host", NULL, CV_FLAG_STR, O(cfg.host), 0, 0, "ADDR", "bind address (default 127.0.0.1)"),
    CV_FLAG_ROW("--port", NULL, CV_FLAG_I32, O(cfg.port), 0, 65535, "N", "port (default 8000; 0 picks a free one)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(cfg.api_key), 0, 0, "KEY",
      "require KEY as Bearer or x-api-key (or env CORVID_API_KEY)"),
    CV_FLAG_ROW("--cors-origins", NULL, CV_FLAG_STR, O(cfg.cors_origins), 0, 0, "LIST",
      "comma-separated origins allowed by CORS, or *"),
    CV_FLAG_ROW("--served-model-name", NULL, CV_FLAG_STR, O(served_name), 0, 0, "NAME",
      "the model id clients see (default: the alias, else the file name)"),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I32, O(n_ctx), 16, 1 << 24, "N",
      "context length per sequence (default: the model's own, at most\n131072 and what --kv-memory holds)"),
    CV_FLAG_ROW("--parallel", NULL, CV_FLAG_I32, O(parallel), 1, 1024, "N", "sequences decoded together (default 4)"),
    CV_FLAG_ROW("--threads", NULL, CV_FLAG_I32, O(threads), 1, 1024, "N", "compute threads (default: every CPU)"),
    CV_FLAG_ROW("--kv-memory", "--kv-mem", CV_FLAG_SIZE, O(kv_bytes), 1048576.0, 1125899906842624.0, "SIZE",
      "KV cache memory, e.g. 2G or 512M, shared by every sequence and the\nprefix cache (default: half the free "
      "memory after the weights,\nat most 16M positions; never less than one context)"),
    CV_FLAG_FN_ROW("--kv-type", NULL, "f16|f32|q8_0",
      "KV cache precision (default f16, as llama.cpp's: twice the positions\nin the same memory and half the reads "
      "of a long context; f32 is exact;\nq8_0 holds 1.9x f16's positions, int8 with a factor per 32 values)", kv_type,
      false),
    CV_FLAG_ROW("--max-queue", NULL, CV_FLAG_I32, O(max_queue), 1, CV_MAX_SCHED_QUEUE, "N",
      "requests waiting for the engine at most; beyond it OpenAI clients\nget 503 and Anthropic clients 529, with "
      "Retry-After (default 256)"),
    CV_FLAG_ROW("--batch-tokens", NULL, CV_FLAG_I32, O(batch_tokens), 1, CV_MAX_BATCH_TOKENS, "N",
      "tokens per scheduler step: running streams' next tokens plus\nprefill chunks (default 256)"),
    CV_FLAG_ROW("--draft", NULL, CV_FLAG_I32, O(draft), 0, CV_SCHED_DRAFT_MAX, "N",
      "speculative decoding: tokens drafted per step from earlier text\n(prompt lookup) for a decoding stream; "
      "output is unchanged, edits\nthat repeat what the model was shown come faster; deep in a long\ncontext only "
      "drafts likely enough to pay for their attention are\nverified (default 3; 0: off)"),
    CV_FLAG_ROW("--no-prefix-cache", NULL, CV_FLAG_BOOL, O(no_prefix_cache), 0, 0, NULL,
      "compute every prompt in full (no reuse, no cache file)"),
    CV_FLAG_ROW("--cache-dir", NULL, CV_FLAG_STR, O(cache_dir), 0, 0, "DIR",
      "where the prefix cache is saved at shutdown and restored at start\n(default $XDG_CACHE_HOME/corvid or "
      "~/.cache/corvid; '' for none)"),
    CV_FLAG_ROW("--cache-max", NULL, CV_FLAG_SIZE, O(cache_max), 1048576.0, 1125899906842624.0, "SIZE",
      "the cache file's size at most (default 4G)"),
    CV_FLAG_ROW("--response-store", NULL, CV_FLAG_I32, O(cfg.response_store_size), 1, CV_MAX_RESPONSE_STORE, "N",
      "/v1/responses kept for previous_response_id (default 256)"),
    CV_FLAG_ROW("--max-body", NULL, CV_FLAG_I64, O(max_body), 1024, 2147483648.0, "BYTES",
      "request body limit (default 32 MiB; 413 beyond)"),
    CV_FLAG_ROW("--open-metrics", NULL, CV_FLAG_BOOL, O(cfg.open_metrics), 0, 0, NULL,
      "serve GET /metrics without the API key (Prometheus, gateways'\nendpoint pickers)"),
    CV_FLAG_ROW("--drain-timeout", NULL, CV_FLAG_F64, O(drain_s), 0, 3600, "SECONDS",
      "on SIGTERM/SIGINT: refuse new requests (503 + Retry-After,\n/health/ready 503), let running ones finish this "
      "long, cut the rest\n(their wire's error), save the prefix cache, exit 0 (default 10)"),
    CV_FLAG_ROW("--grammar-lazy", NULL, CV_FLAG_BOOL, O(grammar_lazy), 0, 0, NULL,
      "with tools and tool_choice auto, constrain a call once its marker starts"),

};
#undef O
static const cv_cli_spec spec = {
    .name = "serve", .args = "MODEL", .min_args = 1, .max_args = 1, .flags = flags, .n_flags = CV_ARRAY_LEN(flags),
    .notes = "MODEL: a .gguf path, an alias (corvid ls --aliases), ORG/REPO[:QUANT], a URL or a name in the store;\n"
             "a remote one not yet pulled is downloaded first."
};

static void on_listen(void *ud, int port)
{
    const cv_server_config *cfg = ud;
    /* stdout, whatever the log level: scripts (and the tests) read the port. */
    printf("corvid serve: listening on http://%s:%d\n", cfg->host, port);
    fflush(stdout);
    cv_info("serving on http://%s:%d (OpenAI: /v1/chat/completions, /v1/completions, /v1/responses; "
            "Anthropic: /v1/messages)%s",
            cfg->host, port, cfg->api_key && *cfg->api_key ? "; API key required" : "");
}

int cv_cmd_serve(int argc, char **argv)
{
    serve_opts o = { .cfg = { .host = "127.0.0.1", .port = 8000, .api_key = getenv("CORVID_API_KEY") },
                     .parallel = 4, .drain_s = 10, .kv_bytes = -1, .kv_type = CV_GGML_F16, .draft = -1 };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    o.model = argv[1];
    cv_server_config cfg = o.cfg;
    if (o.max_body)
        cfg.max_body_bytes = (size_t)o.max_body;
    /* MODEL may be a path, an alias, ORG/REPO[:QUANT], a URL or a name in
     * the store (cli/models.h); a remote one not yet pulled is downloaded. */
    char model_path[PATH_MAX];
    cv_pull_opts po = { .progress = -1 };
    cv_err merr = { 0 };
    if (cv_model_ensure(o.model, &po, model_path, sizeof model_path, &merr)) {
        fprintf(stderr, "corvid serve: %s\n", merr.msg);
        return 1;
    }
    const cv_model_alias *alias = cv_model_alias_find(o.model);
    if (!o.served_name && alias)
        o.served_name = alias->name; /* clients ask for the name the user typed */
    o.model = model_path;
    cv_err err = { 0 };
    char cache_dir[PATH_MAX];
    if (!o.cache_dir && !o.no_prefix_cache) {
        /* No HOME and no XDG_CACHE_HOME (a bare container): serve without
         * a cache file rather than refuse. */
        if (cv_sched_default_cache_dir(cache_dir, sizeof cache_dir, &err) == 0)
            o.cache_dir = cache_dir;
        else
            cv_warn("%s; the prefix cache will not be saved (give --cache-dir)", err.msg);
        cv_err_clear(&err);
    }
    if (o.cache_dir && *o.cache_dir && !o.no_prefix_cache && mkdir(o.cache_dir, 0700) && errno != EEXIST)
        cv_warn("cannot create the cache directory %s (%s); the prefix cache will not be saved", o.cache_dir,
                strerror(errno));
    cv_server_backend *be;
    cv_server_backend_opts bo = { .model_path = o.model, .served_name = o.served_name, .n_ctx = o.n_ctx,
                                  .n_parallel = o.parallel, .n_threads = o.threads, .kv_bytes = o.kv_bytes,
                                  .kv_type = o.kv_type,
                                  .batch_tokens = o.batch_tokens, .no_prefix_cache = o.no_prefix_cache,
                                  .draft_tokens = o.draft < 0 ? 0 : o.draft == 0 ? -1 : o.draft,
                                  .cache_dir = o.cache_dir, .cache_max_bytes = o.cache_max, .max_queue = o.max_queue,
                                  .grammar_lazy = o.grammar_lazy };
    if (cv_server_backend_open(&bo, &be, &err)) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    const bool saved = o.cache_dir && *o.cache_dir && !o.no_prefix_cache;
    const int draft = o.draft < 0 ? CV_SCHED_DRAFT_DEFAULT : o.draft;
    char spec[48] = "off";
    if (draft > 0)
        snprintf(spec, sizeof spec, "up to %d drafted tokens a step", draft);
    cv_info("loaded %s: context %d tokens, %d parallel sequences; prefix cache %s%s%s; speculation %s", be->model_id,
            be->n_ctx, o.parallel, o.no_prefix_cache ? "off" : "on", saved ? ", saved in " : "",
            saved ? o.cache_dir : "", spec);
    int rc = cv_server_run(&cfg, be, (int)(o.drain_s * 1000), on_listen, &cfg, &err);
    cv_server_backend_close(be);
    if (rc) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
