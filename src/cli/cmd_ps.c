/* cmd_ps.c — `corvid ps`: what a running corvid server has loaded, as
 * `ollama ps` shows it: each model's state, the memory it holds, how long
 * it has been idle, the requests using it and waiting for it, and how often
 * it was loaded and unloaded. It reads GET /v1/status (the `models` list
 * and the set's limits) from --host/--port with the server's key; --json
 * prints that list as the server gave it. */
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/cli_int.h"

typedef struct ps_opts {
    const char *host;
    int32_t port;
    const char *api_key;
    bool json;
} ps_opts;

#define O(field) offsetof(ps_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--host", NULL, CV_FLAG_STR, O(host), 0, 0, "H", "the server (default 127.0.0.1)"),
    CV_FLAG_ROW("--port", NULL, CV_FLAG_I32, O(port), 1, 65535, "N", "its port (default 8000)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(api_key), 0, 0, "KEY",
      "the server's key (default: env CORVID_API_KEY)"),
    CV_FLAG_ROW("--json", NULL, CV_FLAG_BOOL, O(json), 0, 0, NULL, "the server's list of models as JSON"),
};
#undef O
static const cv_cli_spec spec = { .name = "ps", .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

/* "12s", "4m", "2h", "-" */
static void human_time(json_t *secs, char *out, size_t n)
{
    if (!json_is_number(secs)) {
        snprintf(out, n, "-");
        return;
    }
    double s = json_number_value(secs);
    if (s < 120)
        snprintf(out, n, "%.0fs", s);
    else if (s < 7200)
        snprintf(out, n, "%.0fm", s / 60);
    else
        snprintf(out, n, "%.1fh", s / 3600);
}

int cv_cmd_ps(int argc, char **argv)
{
    ps_opts o = { .host = "127.0.0.1", .port = 8000, .api_key = getenv("CORVID_API_KEY") };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    char url[400];
    snprintf(url, sizeof url, "http://%s:%d/v1/status", o.host, o.port);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    cv_buf body = { 0 };
    long code = cv_cli_http_get(url, o.api_key, 5000, &body);
    int rc = 1;
    json_t *j = NULL;
    if (code == 0) {
        fprintf(stderr, "corvid ps: no corvid server answers on %s:%d\n", o.host, o.port);
        goto done;
    }
    if (code == 401) {
        fprintf(stderr, "corvid ps: the server requires an API key: set CORVID_API_KEY or pass --api-key\n");
        goto done;
    }
    json_t *models = NULL;
    if (code != 200 || !(j = cv_json_parse(body.data, body.len, NULL)) ||
        !json_is_array(models = json_object_get(j, "models"))) {
        fprintf(stderr, "corvid ps: %s answered HTTP %ld without a list of models; is it a corvid server?\n", url,
                code);
        goto done;
    }
    if (o.json) {
        cv_buf out = { 0 };
        cv_json_dump(&out, models);
        printf("%s\n", out.data);
        cv_buf_free(&out);
        rc = 0;
        goto done;
    }
    printf("%-32s %-9s %9s %6s %6s %6s %6s %7s\n", "NAME", "STATE", "MEMORY", "IDLE", "ACTIVE", "QUEUE", "LOADS",
           "UNLOADS");
    size_t i;
    json_t *m;
    json_array_foreach(models, i, m) {
        char mem[32] = "-", idle[32];
        const json_int_t bytes = json_integer_value(json_object_get(m, "memory_bytes"));
        if (bytes > 0)
            cv_human_bytes(bytes, mem, sizeof mem);
        human_time(json_object_get(m, "idle_s"), idle, sizeof idle);
        const char *name = json_string_value(json_object_get(m, "name"));
        printf("%-32s %-9s %9s %6s %6lld %6lld %6lld %7lld%s\n", name ? name : "?",
               json_string_value(json_object_get(m, "state")) ? json_string_value(json_object_get(m, "state")) : "?",
               mem, idle, (long long)json_integer_value(json_object_get(m, "active_requests")),
               (long long)json_integer_value(json_object_get(m, "queue_depth")),
               (long long)json_integer_value(json_object_get(m, "loads")),
               (long long)json_integer_value(json_object_get(m, "unloads")),
               json_is_true(json_object_get(m, "default")) ? "  (default)" : "");
    }
    json_t *set = json_object_get(j, "set");
    if (set) {
        char used[32], limit[32] = "none";
        cv_human_bytes(json_integer_value(json_object_get(set, "memory_bytes")), used, sizeof used);
        if (json_integer_value(json_object_get(set, "memory_limit_bytes")) > 0)
            cv_human_bytes(json_integer_value(json_object_get(set, "memory_limit_bytes")), limit, sizeof limit);
        printf("memory %s of %s; %lld loads, %lld unloads since start\n", used, limit,
               (long long)json_integer_value(json_object_get(set, "loads")),
               (long long)json_integer_value(json_object_get(set, "unloads")));
    }
    rc = 0;
done:
    json_decref(j);
    cv_buf_free(&body);
    return rc;
}
