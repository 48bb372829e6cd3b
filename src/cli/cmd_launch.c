/* cmd_launch.c — `corvid launch CLIENT [MODEL] [-- ARGS]`: one command from
 * nothing to an agent talking to a local model. It finds a corvid server on
 * --host/--port (GET /readyz), or starts `corvid serve MODEL` in the
 * background (pulling MODEL first when it is not in the store) and waits
 * until /readyz says the model is loaded; reads the served model id and
 * context from /v1/models; then sets the client's configuration from the same
 * table `corvid recipe` prints (clients.c) and execs the client with ARGS.
 *
 * With --small SMALL, the server it starts serves both models and routes
 * Claude Code's model names itself (claude-*haiku* to SMALL, every other
 * claude-* to MODEL), and the client is told the pair (Claude Code's haiku
 * variable, opencode's small_model), so background work (titles,
 * summaries, sub-agents that ask for haiku) runs on the small model while
 * the main loop runs on the large one.
 *
 * It writes no config file of the user's: everything goes through the
 * environment and flags of the exec'd process (see clients.c). A server it
 * starts keeps running after the client exits, like `ollama serve`, so the
 * next launch finds the model warm; its pid and log are printed. For the SDK
 * "clients" the command to run follows `--`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "cli/models.h"

typedef struct launch_opts {
    const char *host;
    int32_t port;
    const char *model;
    const char *small;
    const char *api_key;
    int64_t n_ctx;
    char **client_argv; /* after "--" */
    int client_argc;
} launch_opts;

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- finding the client ---- */

static bool on_path(const char *exe, char *out, size_t n)
{
    if (strchr(exe, '/')) {
        snprintf(out, n, "%s", exe);
        return access(exe, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)len, len ? path : ".", exe);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return true;
        path += len;
        path += *path == ':';
    }
    return false;
}

/* ---- starting a server ---- */

/* A server for MODEL alone (its file, served under its name), or with
 * --small for both, served under the names serve gives them (the specs as
 * typed: an alias keeps its name) with the routes of the pair. */
static int start_server(const launch_opts *o, const char *model_path, const char *served, const char *small_served,
                        long n_ctx, const char *base)
{
    char dir[PATH_MAX - 64], log[PATH_MAX], pidf[PATH_MAX];
    cv_err err = { 0 };
    if (cv_cli_state_dir(dir, sizeof dir, &err)) {
        fprintf(stderr, "corvid launch: %s\n", err.msg);
        return -1;
    }
    snprintf(log, sizeof log, "%s/serve-%d.log", dir, o->port);
    snprintf(pidf, sizeof pidf, "%s/serve-%d.pid", dir, o->port);
    cv_serve_child sc = { .model_path = model_path, .served_name = served, .host = o->host, .port = o->port,
                          .n_ctx = n_ctx, .api_key = o->api_key, .log_path = log };
    char haiku[300], rest[300];
    const char *extra[8];
    if (small_served) {
        snprintf(haiku, sizeof haiku, "claude-*haiku*=%s", small_served);
        snprintf(rest, sizeof rest, "claude-*=%s", served);
        const char *e[] = { o->small, "--route", haiku, "--route", rest, "--default-model", served };
        memcpy(extra, e, sizeof e);
        sc.model_path = o->model;
        sc.served_name = NULL;
        sc.extra = extra;
        sc.n_extra = (int)CV_ARRAY_LEN(e);
    }
    fprintf(stderr, "corvid launch: starting corvid serve %s on %s (log %s)\n", model_path, base, log);
    pid_t pid;
    if (cv_serve_child_start(&sc, CV_LAUNCH_READY_TIMEOUT_S, &pid, &err)) {
        fprintf(stderr, "corvid launch: %s\n", err.msg);
        return -1;
    }
    FILE *f = fopen(pidf, "w");
    if (f) {
        fprintf(f, "%d\n", (int)pid);
        fclose(f);
    }
    fprintf(stderr, "corvid launch: serving %s on %s; it keeps running after the client exits (stop it: kill %d)\n",
            served, base, (int)pid);
    return 0;
}

/* The served name for a model started here: the alias, else the file name
 * without .gguf. */
static void served_name(const char *spec, const char *path, char *out, size_t n)
{
    const cv_model_alias *a = cv_model_alias_find(spec);
    if (a) {
        snprintf(out, n, "%s", a->name);
        return;
    }
    const char *b = strrchr(path, '/');
    if (snprintf(out, n, "%s", b ? b + 1 : path) >= (int)n)
        out[n - 1] = 0; /* a 255-byte served name is still a name */
    size_t len = strlen(out);
    if (len > 5 && !strcasecmp(out + len - 5, ".gguf"))
        out[len - 5] = 0;
}

/* The entry of /v1/models's data with this id (case-insensitive), else
 * the first. */
static json_t *listed(json_t *data, const char *id)
{
    size_t i;
    json_t *m;
    json_array_foreach(data, i, m) {
        const char *mid = json_string_value(json_object_get(m, "id"));
        if (id && *id && mid && !strcasecmp(mid, id))
            return m;
    }
    return json_array_get(data, 0);
}

#define O(field) offsetof(launch_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--host", NULL, CV_FLAG_STR, O(host), 0, 0, "H",
      "where the server is, or listens when started (default 127.0.0.1)"),
    CV_FLAG_ROW("--port", NULL, CV_FLAG_I32, O(port), 1, 65535, "N", "its port (default 8000)"),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I64, O(n_ctx), 256, 1 << 24, "N",
      "the context of a server launch starts (default: serve's)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(api_key), 0, 0, "KEY",
      "the server's key (default: env CORVID_API_KEY)"),
    CV_FLAG_ROW("--small", NULL, CV_FLAG_STR, O(small), 0, 0, "MODEL",
      "a second, smaller model for background work, served beside MODEL:\nClaude Code's haiku requests (routed "
      "claude-*haiku*), opencode's\nsmall_model"),

};
#undef O
static const cv_cli_spec spec = {
    .name = "launch", .args = "CLIENT [MODEL] [-- CLIENT_ARGS...]", .max_args = 2, .flags = flags, .n_flags = CV_ARRAY_LEN(flags),
    .notes = "Without a server on --port, starts `corvid serve MODEL` there (pulling MODEL first); it keeps running."
};

int cv_cmd_launch(int argc, char **argv)
{
    launch_opts o = { .host = "127.0.0.1", .port = 8000, .api_key = getenv("CORVID_API_KEY") };
    /* Everything after "--" is the client's, untouched. */
    int ours = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            o.client_argv = argv + i + 1;
            o.client_argc = argc - i - 1;
            ours = i;
            break;
        }
    }
    int n, status;
    if (!cv_cli_parse(&spec, &o, ours, argv, &n, &status))
        return status;
    const char *client_name = n ? argv[1] : NULL;
    o.model = n > 1 ? argv[2] : NULL;
    if (!client_name)
        return cv_cli_usage_error(&spec, "CLIENT is missing (corvid recipe lists them)");
    const cv_client *c = cv_client_find(client_name);
    if (!c) {
        fprintf(stderr, "corvid launch: no client '%s'; known:", client_name);
        for (int i = 0; i < cv_n_clients; i++)
            fprintf(stderr, " %s", cv_clients[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    char exe[PATH_MAX];
    const char *want = c->exe ? c->exe : (o.client_argc ? o.client_argv[0] : NULL);
    if (!want)
        return cv_cli_usage_error(&spec, "%s is a library: give the program to run after --, e.g. %s", c->title,
                                  c->run_hint);
    if (!on_path(want, exe, sizeof exe)) {
        fprintf(stderr, "corvid launch: '%s' is not on PATH; install %s: %s\n", want, c->title, c->install);
        return 1;
    }
    const char *client_host = strcmp(o.host, "0.0.0.0") && strcmp(o.host, "::") ? o.host : "127.0.0.1";
    char served[256] = "", small_served[256] = "";
    char base[300], url[400];
    snprintf(base, sizeof base, "http://%s:%d", client_host, o.port);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* A server already there (ready, or still loading: 503)? */
    cv_buf body = { 0 };
    snprintf(url, sizeof url, "%s/readyz", base);
    long st = cv_cli_http_get(url, o.api_key, 2000, &body);
    if (st == 503) {
        fprintf(stderr, "corvid launch: the server on %s is loading its model; waiting\n", base);
        double t0 = cv_now_s();
        while ((st = cv_cli_http_get(url, o.api_key, 2000, &body)) == 503 && cv_now_s() - t0 < CV_LAUNCH_READY_TIMEOUT_S)
            sleep_ms(250);
    }
    int rc = 1;
    if (st == 0) {
        if (!o.model) {
            fprintf(stderr, "corvid launch: no corvid server answers on %s; name a MODEL to start one "
                            "(corvid launch %s qwen3-0.6b)\n", base, c->name);
            goto done;
        }
        cv_pull_opts po = { .progress = -1 };
        char path[PATH_MAX];
        cv_err err = { 0 };
        if (cv_model_ensure(o.model, &po, path, sizeof path, &err)) {
            fprintf(stderr, "corvid launch: %s\n", err.msg);
            goto done;
        }
        served_name(o.model, path, served, sizeof served);
        if (o.small) {
            char spath[PATH_MAX];
            if (cv_model_ensure(o.small, &po, spath, sizeof spath, &err)) {
                fprintf(stderr, "corvid launch: %s\n", err.msg);
                goto done;
            }
            served_name(o.small, spath, small_served, sizeof small_served);
        }
        long n_ctx = o.n_ctx;
        const cv_model_alias *al = cv_model_alias_find(o.model);
        if (!n_ctx && al)
            n_ctx = al->n_ctx;
        if (start_server(&o, path, served, o.small ? small_served : NULL, n_ctx, base) != 0)
            goto done;
    } else if (st != 200) {
        fprintf(stderr, "corvid launch: %s answered HTTP %ld; is it a corvid server?\n", url, st);
        goto done;
    } else if (o.model) {
        fprintf(stderr, "corvid launch: a server already answers on %s: using it (MODEL '%s' is not started; "
                        "pick another --port to serve it too)\n", base, o.model);
    }

    /* What the server serves. */
    snprintf(url, sizeof url, "%s/v1/models", base);
    st = cv_cli_http_get(url, o.api_key, 5000, &body);
    if (st == 401) {
        fprintf(stderr, "corvid launch: the server on %s requires an API key: set CORVID_API_KEY or pass --api-key\n",
                base);
        goto done;
    }
    json_t *j = st == 200 ? cv_json_parse(body.data, body.len, NULL) : NULL;
    json_t *data = json_object_get(j, "data"), *m0 = listed(data, served);
    const char *id = json_string_value(json_object_get(m0, "id"));
    if (!id) {
        fprintf(stderr, "corvid launch: %s did not list a model (HTTP %ld)\n", url, st);
        json_decref(j);
        goto done;
    }
    const char *small_id = o.small ? json_string_value(json_object_get(listed(data, *small_served ? small_served
                                                                                                     : o.small),
                                                                       "id"))
                                   : NULL;
    if (o.small && (!small_id || !strcmp(small_id, id))) {
        fprintf(stderr, "corvid launch: the server on %s does not serve '%s': background work goes to '%s'\n", base,
                o.small, id);
        small_id = NULL;
    }
    cv_client_params p = { .host = client_host, .port = o.port, .model = id, .small_model = small_id,
                           .api_key = o.api_key };
    json_t *ctx = json_object_get(m0, "context_length");
    if (json_is_integer(ctx) && json_integer_value(ctx) > 0)
        p.n_ctx = json_integer_value(ctx);

    cv_client_setup s = { 0 };
    c->setup(&p, &s);
    for (int i = 0; i < s.n_unset; i++)
        unsetenv(s.unset[i]);
    for (int i = 0; i < s.n_env; i++)
        setenv(s.env_name[i], s.env_value[i], 1);
    char **av = cv_xcalloc((size_t)(s.n_args + o.client_argc + 2), sizeof *av);
    int k = 0;
    if (c->exe) {
        av[k++] = (char *)c->exe;
        for (int i = 0; i < s.n_args; i++)
            av[k++] = s.args[i];
        for (int i = 0; i < o.client_argc; i++)
            av[k++] = o.client_argv[i];
    } else {
        for (int i = 0; i < o.client_argc; i++)
            av[k++] = o.client_argv[i];
    }
    av[k] = NULL;
    if (p.n_ctx)
        fprintf(stderr, "corvid launch: %s -> %s (model \"%s\", context %lld)\n", c->title, base, id,
                (long long)p.n_ctx);
    else
        fprintf(stderr, "corvid launch: %s -> %s (model \"%s\")\n", c->title, base, id);
    fflush(NULL);
    json_decref(j);
    cv_buf_free(&body);
    execv(exe, av);
    fprintf(stderr, "corvid launch: cannot run %s: %s\n", exe, strerror(errno));
    free(av);
    cv_client_setup_fini(&s);
    return 1;
done:
    cv_buf_free(&body);
    return rc;
}
