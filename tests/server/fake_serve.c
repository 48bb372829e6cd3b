/* fake_serve.c — a test-only server process: the real cv_server (the same
 * cv_server_run that `corvid serve` uses) over the fake byte-level backend
 * (fake_backend.h). The end-to-end tests under tests/js start it, read
 * "listening on PORT" from stdout, talk to it with the official SDKs, and stop
 * it with SIGTERM. Flags:
 *   --port N  --api-key KEY  --keepalive-ms N  --max-body BYTES
 *   --store N  --cors LIST  --ctx N  --grace-ms N
 *   --model GGUF   wrap a real model: its template, tokenizer and
 *                  detokenizer serve, only the sampled tokens are substituted
 *   --parser NAME  the production tool-call parser (cv_server_parser_create)
 *                  in syntax NAME, or "auto" for none known (output detection
 *                  finds it), instead of the fake's own hermes parser */
#include <stdio.h>
#include <stdlib.h>

#include "fake_backend.h"

static void on_listen(void *ud, int port)
{
    printf("fake_serve: listening on http://127.0.0.1:%d\n", port);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0 };
    int32_t n_ctx = 1 << 20;
    int grace = 2000;
    const char *model = NULL, *parser = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--port")) cfg.port = atoi(v);
        else if (!strcmp(k, "--api-key")) cfg.api_key = v;
        else if (!strcmp(k, "--keepalive-ms")) cfg.keepalive_ms = atoi(v);
        else if (!strcmp(k, "--max-body")) cfg.max_body_bytes = (size_t)atoll(v);
        else if (!strcmp(k, "--store")) cfg.response_store_size = atoi(v);
        else if (!strcmp(k, "--cors")) cfg.cors_origins = v;
        else if (!strcmp(k, "--ctx")) n_ctx = atoi(v);
        else if (!strcmp(k, "--grace-ms")) grace = atoi(v);
        else if (!strcmp(k, "--model")) model = v;
        else if (!strcmp(k, "--parser")) parser = v;
        else {
            fprintf(stderr, "fake_serve: unknown flag %s\n", k);
            return 2;
        }
    }
    fake_backend f;
    fake_backend_init(&f, n_ctx);
    cv_err err = { 0 };
    cv_server_backend *real = NULL;
    if (model) {
        cv_server_backend_opts o = { .model_path = model, .n_ctx = n_ctx < (1 << 20) ? n_ctx : 0, .n_threads = 1 };
        if (cv_server_backend_open(&o, &real, &err)) {
            fprintf(stderr, "fake_serve: %s\n", err.msg);
            return 1;
        }
        fake_backend_wrap(&f, real);
    }
    if (parser) {
        const cv_tc_format *fmt = strcmp(parser, "auto") ? cv_tc_format_find(parser) : NULL;
        if (!fmt && strcmp(parser, "auto")) {
            fprintf(stderr, "fake_serve: unknown tool-call syntax %s\n", parser);
            return 2;
        }
        fake_backend_use_parser(&f, fmt, NULL);
    }
    int rc = cv_server_run(&cfg, &f.be, grace, on_listen, NULL, &err);
    if (rc)
        fprintf(stderr, "fake_serve: %s\n", err.msg);
    fake_backend_fini(&f);
    cv_server_backend_close(real);
    return rc ? 1 : 0;
}
