/* cmd_serve.c — `corvid serve MODEL`: parses and checks the flags, opens the
 * model as a cv_server_backend, and serves HTTP until SIGINT/SIGTERM
 * (cv_server_run: a graceful stop, then exit 0).
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
    const char *model;
    const char *served_name;
    int32_t n_ctx;      /* 0: the model's own */
    int parallel;       /* sequences decoded together */
    int threads;        /* compute threads; 0: all cores */
    int grace_ms;
    int64_t kv_bytes;   /* -1: a share of free memory (cv_sched_default_kv_bytes) */
    uint32_t kv_type;   /* CV_GGML_F16 (default), CV_GGML_F32 or CV_GGML_Q8_0 */
    int32_t batch_tokens;
    int32_t draft;      /* --draft: -1 unset (the scheduler's default), 0 off */
    bool no_prefix_cache;
    const char *cache_dir; /* NULL: cv_sched_default_cache_dir; "": no cache file */
    int64_t cache_max;
    int32_t max_queue;  /* 0: CV_MAX_SCHED_QUEUE */
    bool grammar_lazy;  /* tool_choice auto: lazy tool-call grammar */
} serve_opts;

static const char HELP[] =
    "  --host ADDR             bind address (default 127.0.0.1)\n"
    "  --port N                port (default 8000; 0 picks a free one)\n"
    "  --api-key KEY           require KEY as Bearer or x-api-key (or env CORVID_API_KEY)\n"
    "  --cors-origins LIST     comma-separated origins allowed by CORS, or *\n"
    "  --served-model-name N   the model id clients see (default: the file name)\n"
    "  --ctx N                 context length per sequence (default: the model's own, at most\n"
    "                          131072 and what --kv-memory holds)\n"
    "  --parallel N            sequences decoded together (default 4)\n"
    "  --threads N             compute threads (default: every CPU)\n"
    "  --kv-memory SIZE        KV cache memory, e.g. 2G or 512M, shared by every sequence and the\n"
    "                          prefix cache (default: half the free memory after the weights,\n"
    "                          at most 16M positions; never less than one context)\n"
    "  --kv-type f16|f32|q8_0  KV cache precision (default f16, as llama.cpp's: twice the positions\n"
    "                          in the same memory and half the reads of a long context; f32 is exact;\n"
    "                          q8_0 holds 1.9x f16's positions, int8 with a factor per 32 values)\n"
    "  --max-queue N           requests waiting for the engine at most; beyond it OpenAI clients\n"
    "                          get 503 and Anthropic clients 529, with Retry-After (default 256)\n"
    "  --batch-tokens N        tokens per scheduler step: running streams' next tokens plus\n"
    "                          prefill chunks (default 256)\n"
    "  --draft N               speculative decoding: tokens drafted per step from earlier text\n"
    "                          (prompt lookup) for a decoding stream; output is unchanged, edits\n"
    "                          that repeat what the model was shown come faster; deep in a long\n"
    "                          context only drafts likely enough to pay for their attention are\n"
    "                          verified (default 3; 0: off)\n"
    "  --no-prefix-cache       compute every prompt in full (no reuse, no cache file)\n"
    "  --cache-dir DIR         where the prefix cache is saved at shutdown and restored at start\n"
    "                          (default $XDG_CACHE_HOME/corvid or ~/.cache/corvid; '' for none)\n"
    "  --cache-max SIZE        the cache file's size at most (default 4G)\n"
    "  --response-store N      /v1/responses kept for previous_response_id (default 256)\n"
    "  --max-body BYTES        request body limit (default 32 MiB; 413 beyond)\n"
    "  --grace-ms N            on SIGINT/SIGTERM, let streams finish this long (default 10000)\n"
    "  --grammar-lazy          with tools and tool_choice auto, constrain a call once its marker starts\n";

/* "512M", "2G", "1.5GiB", "1048576": bytes, from 1 MiB to 1 PiB. */
static int parse_size(const cv_cmd *cmd, const char *flag, const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1048576.0; end++; break;
    case 'g': case 'G': mult = 1073741824.0; end++; break;
    case 't': case 'T': mult = 1099511627776.0; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    double bytes = x * mult;
    if (errno || end == v || *end || !(bytes >= 1048576.0) || bytes > 1125899906842624.0)
        return cv_cli_usage_error(cmd, "%s '%s' must be a size from 1M to 1024T (e.g. 512M, 2G)", flag, v);
    *out = (int64_t)bytes;
    return 0;
}

static int parse_int(const cv_cmd *cmd, const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return cv_cli_usage_error(cmd, "%s '%s' must be an integer from %ld to %ld", flag, v, lo, hi);
    *out = x;
    return 0;
}

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
    const cv_cmd *cmd = cv_cli_find("serve");
    cv_server_config cfg = { .host = "127.0.0.1", .port = 8000 };
    serve_opts o = { .parallel = 4, .grace_ms = 10000, .kv_bytes = -1, .kv_type = CV_GGML_F16, .draft = -1 };
    cfg.api_key = getenv("CORVID_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long x;
        if (a[0] != '-') {
            if (o.model)
                return cv_cli_usage_error(cmd, "one MODEL only (got '%s' and '%s')", o.model, a);
            o.model = a;
            continue;
        }
        if (!strcmp(a, "--grammar-lazy")) {
            o.grammar_lazy = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\n\nusage: %s\n\n%s", cmd->summary, cmd->usage, HELP);
            return 0;
        }
        if (!strcmp(a, "--no-prefix-cache")) {
            o.no_prefix_cache = true;
            continue;
        }
        if (i + 1 >= argc)
            return cv_cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--host")) cfg.host = v;
        else if (!strcmp(a, "--port")) {
            if (parse_int(cmd, a, v, 0, 65535, &x)) return 2;
            cfg.port = (int)x;
        } else if (!strcmp(a, "--api-key")) cfg.api_key = v;
        else if (!strcmp(a, "--cors-origins")) cfg.cors_origins = v;
        else if (!strcmp(a, "--ctx")) {
            if (parse_int(cmd, a, v, 16, 1 << 24, &x)) return 2;
            o.n_ctx = (int32_t)x;
        } else if (!strcmp(a, "--parallel")) {
            if (parse_int(cmd, a, v, 1, 1024, &x)) return 2;
            o.parallel = (int)x;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(cmd, a, v, 1, 1024, &x)) return 2;
            o.threads = (int)x;
        } else if (!strcmp(a, "--served-model-name")) o.served_name = v;
        else if (!strcmp(a, "--kv-memory") || !strcmp(a, "--kv-mem")) {
            if (parse_size(cmd, a, v, &o.kv_bytes)) return 2;
        } else if (!strcmp(a, "--kv-type")) {
            cv_err kerr = { 0 };
            if (cv_engine_kv_type_parse(v, &o.kv_type, &kerr))
                return cv_cli_usage_error(cmd, "--kv-type: %s", kerr.msg);
        } else if (!strcmp(a, "--cache-max")) {
            if (parse_size(cmd, a, v, &o.cache_max)) return 2;
        } else if (!strcmp(a, "--max-queue")) {
            if (parse_int(cmd, a, v, 1, CV_MAX_SCHED_QUEUE, &x)) return 2;
            o.max_queue = (int32_t)x;
        } else if (!strcmp(a, "--batch-tokens")) {
            if (parse_int(cmd, a, v, 1, CV_MAX_BATCH_TOKENS, &x)) return 2;
            o.batch_tokens = (int32_t)x;
        } else if (!strcmp(a, "--draft")) {
            if (parse_int(cmd, a, v, 0, CV_SCHED_DRAFT_MAX, &x)) return 2;
            o.draft = (int32_t)x;
        } else if (!strcmp(a, "--cache-dir")) o.cache_dir = v;
        else if (!strcmp(a, "--response-store")) {
            if (parse_int(cmd, a, v, 1, CV_MAX_RESPONSE_STORE, &x)) return 2;
            cfg.response_store_size = (int)x;
        } else if (!strcmp(a, "--max-body")) {
            if (parse_int(cmd, a, v, 1024, 1L << 31, &x)) return 2;
            cfg.max_body_bytes = (size_t)x;
        } else if (!strcmp(a, "--grace-ms")) {
            if (parse_int(cmd, a, v, 0, 600000, &x)) return 2;
            o.grace_ms = (int)x;
        } else
            return cv_cli_usage_error(cmd, "unknown flag '%s'", a);
    }
    if (!o.model)
        return cv_cli_usage_error(cmd, "MODEL is missing");
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
    int rc = cv_server_run(&cfg, be, o.grace_ms, on_listen, &cfg, &err);
    cv_server_backend_close(be);
    if (rc) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
