/* cmd_serve.c — `corvid serve MODEL`: parses and checks the flags, opens the
 * model as a cv_server_backend, and serves HTTP until SIGINT/SIGTERM
 * (cv_server_run: a graceful stop, then exit 0).
 *
 * The backend (server/backend.c) is where the layers below the server meet:
 * the GGUF model, the engine and cv_sched, the tokenizer's streaming
 * detokenizer and the model's chat template. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "server/server.h"

typedef struct serve_opts {
    const char *model;
    const char *served_name;
    int32_t n_ctx;      /* 0: the model's own */
    int parallel;       /* sequences decoded together */
    int threads;        /* compute threads; 0: all cores */
    int grace_ms;
    bool grammar_lazy;  /* tool_choice auto: lazy tool-call grammar */
} serve_opts;

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
    serve_opts o = { .parallel = 4, .grace_ms = 10000 };
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
            printf("%s\n\nusage: %s\n", cmd->summary, cmd->usage);
            return 0;
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
    cv_server_backend *be;
    cv_server_backend_opts bo = { .model_path = o.model, .served_name = o.served_name, .n_ctx = o.n_ctx,
                                  .n_parallel = o.parallel, .n_threads = o.threads,
                                  .grammar_lazy = o.grammar_lazy };
    if (cv_server_backend_open(&bo, &be, &err)) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    cv_info("loaded %s: context %d tokens, %d parallel sequences", be->model_id, be->n_ctx, o.parallel);
    int rc = cv_server_run(&cfg, be, o.grace_ms, on_listen, &cfg, &err);
    cv_server_backend_close(be);
    if (rc) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
