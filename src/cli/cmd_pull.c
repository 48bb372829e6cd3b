/* cmd_pull.c — `corvid pull MODEL...`: resolves each MODEL (alias, repo,
 * URL) and downloads it into the store with download.c. Progress and notes go
 * to stderr; each model's path goes to stdout, so `m=$(corvid pull x)` gives
 * a script the file. Ctrl-C stops the transfer and keeps the partial file for
 * the next pull to resume. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/models.h"

static volatile int interrupted;

static void on_sigint(int sig)
{
    CV_UNUSED(sig);
    interrupted = 1;
}

static void describe(const cv_model_ref *r, cv_buf *b)
{
    if (r->url[0])
        cv_buf_puts(b, r->url);
    else if (r->file[0])
        cv_buf_printf(b, "%s/%s", r->repo, r->file);
    else
        cv_buf_printf(b, "%s:%s", r->repo, r->quant[0] ? r->quant : "(default quant)");
}

int cv_cmd_pull(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("pull");
    cv_pull_opts o = { .progress = -1, .cancel = &interrupted };
    const char *models[64];
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s\n\nusage: %s\n", cmd->summary, cmd->usage);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.progress = 0;
        } else if (!strcmp(a, "--progress")) {
            if (++i >= argc)
                return cv_cli_usage_error(cmd, "--progress needs bar, lines or none");
            const char *v = argv[i];
            if (!strcmp(v, "bar")) o.progress = 1;
            else if (!strcmp(v, "lines")) o.progress = 2;
            else if (!strcmp(v, "none")) o.progress = 0;
            else return cv_cli_usage_error(cmd, "--progress '%s' must be bar, lines or none", v);
        } else if (a[0] == '-' && a[1]) {
            return cv_cli_usage_error(cmd, "unknown flag '%s'", a);
        } else {
            if (n_models == (int)CV_ARRAY_LEN(models))
                return cv_cli_usage_error(cmd, "at most %d models at once", (int)CV_ARRAY_LEN(models));
            models[n_models++] = a;
        }
    }
    if (!n_models)
        return cv_cli_usage_error(cmd, "MODEL is missing (an alias such as qwen3-0.6b, ORG/REPO[:QUANT] or a URL)");
    struct sigaction sa = { .sa_handler = on_sigint };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int failed = 0;
    for (int i = 0; i < n_models && !interrupted; i++) {
        cv_model_ref ref;
        cv_err err = { 0 };
        cv_pull_result res;
        cv_buf what = { 0 };
        if (cv_model_resolve(models[i], &ref, &err) != 0) {
            fprintf(stderr, "corvid pull: %s\n", err.msg);
            failed++;
            continue;
        }
        if (ref.kind != CV_MODEL_REMOTE) {
            fprintf(stderr, "corvid pull: '%s' is already a local file (%s): nothing to pull\n", models[i], ref.path);
            printf("%s\n", ref.path);
            continue;
        }
        describe(&ref, &what);
        if (o.progress && !ref.local)
            fprintf(stderr, "pulling %s%s%s\n", models[i], strcmp(models[i], what.data) ? ": " : "",
                    strcmp(models[i], what.data) ? what.data : "");
        if (cv_model_pull(&ref, &o, &res, &err) != 0) {
            fprintf(stderr, "corvid pull: %s\n", err.msg);
            failed++;
            cv_buf_free(&what);
            continue;
        }
        if (o.progress) {
            if (res.already_present) {
                fprintf(stderr, "%s is already in the store\n", models[i]);
            } else {
                cv_model_facts f;
                cv_model_facts_read(ref.path, &f, NULL);
                fprintf(stderr, "%s: %lld bytes, %s, GGUF %s %s\n", models[i], (long long)res.bytes,
                        res.sha256_checked ? "sha256 verified" : "size checked (the server published no sha256)",
                        f.arch[0] ? f.arch : "?", f.quant[0] ? f.quant : "?");
            }
        }
        printf("%s\n", ref.path);
        fflush(stdout);
        cv_buf_free(&what);
    }
    if (interrupted && !failed)
        failed = 1;
    return failed ? 1 : 0;
}
