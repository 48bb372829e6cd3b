/* test_server_serve_cli.c — `corvid serve`'s scheduler flags as a user gives
 * them, on the release binary (make test builds it):
 *   - --help documents every flag, and bad values of the new ones are
 *     usage errors (exit 2) that name the flag; --kv-type f16 (default) and f32;
 *   - a served model (`corvid synth` tiny qwen2 with the gpt-2 vocabulary)
 *     stopped with SIGTERM saves its prefix cache in --cache-dir, and a
 *     restart with the same --cache-dir answers the first repeated prompt
 *     with cached tokens (OpenAI usage.prompt_tokens_details.cached_tokens)
 *     and the same greedy text; /v1/status shows --batch-tokens and the KV
 *     size --kv-mem asked for;
 *   - with --no-prefix-cache nothing is cached and no file is written;
 *   - the load generator (`corvid bench --serve`) drives a small agents
 *     case against it: every turn reported, later turns served from the
 *     prefix cache, --tool-ms accepted and a bad value refused, --in-flight 1;
 *   - tiny gpt-oss and gemma3 models (window layers): a second turn is
 *     served from the prefix cache and equals a cold server's answer, and
 *     /v1/status shows both KV layer groups. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>

#include <curl/curl.h>

#include "test.h"

/* proc.h's run() and start_server(); its fake_serve starter is not used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "cli/proc.h"
#pragma GCC diagnostic pop
#include "serve_http.h"

#ifndef CV_RELEASE_BIN
#define CV_RELEASE_BIN "build/corvid"
#endif

static char dir[256], model[512], cache[512];

static bool have_bin(void)
{
    struct stat st;
    return stat(CV_RELEASE_BIN, &st) == 0;
}

TEST(help_documents_the_scheduler_flags_and_bad_values_are_usage_errors)
{
    proc_out po;
    run((const char *const[]){ CV_RELEASE_BIN, "serve", "--help", NULL }, NULL, &po);
    CHECK_EQ_INT(po.status, 0);
    static const char *const flags[] = { "--kv-memory", "--max-queue", "--batch-tokens", "--no-prefix-cache", "--cache-dir",
                                         "--cache-max", "--ctx", "--parallel", "--kv-type", "--draft" };
    for (size_t i = 0; i < CV_ARRAY_LEN(flags); i++)
        CHECK_MSG(strstr(po.out.data, flags[i]), "--help does not mention %s", flags[i]);
    proc_out_free(&po);
    static const char *const bad[][2] = { { "--kv-mem", "12Q" }, { "--kv-mem", "100" }, { "--kv-memory", "-1G" },
                                          { "--max-queue", "0" }, { "--batch-tokens", "0" }, { "--batch-tokens", "999999" },
                                          { "--cache-max", "lots" }, { "--kv-type", "q4_0" }, { "--draft", "17" },
                                          { "--draft", "-1" } };
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        run((const char *const[]){ CV_RELEASE_BIN, "serve", "x.gguf", bad[i][0], bad[i][1], NULL }, NULL, &po);
        CHECK_MSG(po.status == 2 && strstr(po.err.data, bad[i][0]), "%s %s: exit %d, %s", bad[i][0], bad[i][1],
                  po.status, po.err.data);
        proc_out_free(&po);
    }
}

/* ---- a served model ---- */

static pid_t start(const char *const *extra, int *port)
{
    const char *argv[32];
    int n = 0;
    static const char *const fixed[] = { CV_RELEASE_BIN, "serve", NULL, "--port", "0", "--ctx", "1024", "--parallel",
                                         "2", "--threads", "1", "--kv-memory", "16M", "--batch-tokens", "64" };
    for (size_t i = 0; i < CV_ARRAY_LEN(fixed); i++)
        argv[n++] = fixed[i] ? fixed[i] : model;
    for (int i = 0; extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return start_server(argv, NULL, "/dev/null", port);
}

static int stop(pid_t pid) { return stop_server(pid); }

static json_t *get(int port, const char *path, const char *body)
{
    long status;
    cv_buf raw = { 0 };
    json_t *v = serve_http(port, path, body, NULL, &status, &raw);
    if (status != 200) {
        json_decref(v);
        v = NULL;
    }
    CHECK_MSG(v, "%s: HTTP %ld %.200s", path, status, raw.data ? raw.data : "");
    cv_buf_free(&raw);
    return v;
}

static const char *BODY = "{\"model\":\"m\",\"max_tokens\":8,\"temperature\":0,\"messages\":[{\"role\":\"user\","
                          "\"content\":\"A long and winding question about foxes, rivers, clouds and the weather "
                          "over the hills in the early morning, asked twice.\"}]}";

/* Cached tokens and text of a chat request. */
static int64_t ask_body(int port, const char *body, cv_buf *text)
{
    json_t *v = get(port, "/v1/chat/completions", body);
    json_t *m = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
    cv_buf_reset(text);
    const char *c = json_string_value(json_object_get(m, "content"));
    if (c)
        cv_buf_puts(text, c);
    int64_t cached = JSON_INT(json_object_get(json_object_get(v, "usage"), "prompt_tokens_details"), "cached_tokens");
    json_decref(v);
    return cached;
}

static int64_t ask(int port, cv_buf *text) { return ask_body(port, BODY, text); }

static int count_cache_files(void)
{
    int n = 0;
    DIR *d = opendir(cache);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".cvkv") != NULL;
    if (d)
        closedir(d);
    return n;
}

TEST(a_restart_with_the_same_cache_dir_reports_cached_tokens_for_a_repeated_prompt)
{
    cv_buf cold = { 0 }, warm = { 0 };
    int port;
    pid_t pid = start((const char *const[]){ "--cache-dir", cache, NULL }, &port);
    CHECK_MSG(pid, "corvid serve did not start");
    if (!pid)
        return;
    CHECK_EQ_INT(ask(port, &cold), 0);
    json_t *st = get(port, "/v1/status", NULL);
    CHECK_EQ_INT(JSON_INT(json_object_get(st, "totals"), "batch_tokens"), 64);
    /* 16 MiB of f16 KV (the default) at 1 KiB a position (tiny: 2 layers, 4 KV heads of 32) */
    CHECK_EQ_INT(JSON_INT(json_object_get(st, "kv"), "blocks"), 16384 / 16);
    json_decref(st);
    CHECK_EQ_INT(stop(pid), 0);
    CHECK_EQ_INT(count_cache_files(), 1);

    pid = start((const char *const[]){ "--cache-dir", cache, NULL }, &port);
    CHECK_MSG(pid, "corvid serve did not restart");
    if (!pid)
        return;
    int64_t cached = ask(port, &warm);
    CHECK_MSG(cached >= 16, "after a restart: %lld cached tokens", (long long)cached);
    CHECK_MSG(cold.len == warm.len && (!cold.len || !memcmp(cold.data, warm.data, cold.len)),
              "cached and uncached greedy text differ");
    CHECK_EQ_INT(stop(pid), 0);

    /* --no-prefix-cache: nothing reused, the file left as it was */
    struct stat before, after;
    char path[1024] = "";
    DIR *d = opendir(cache);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".cvkv"))
            snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
    if (d)
        closedir(d);
    CHECK(stat(path, &before) == 0);
    pid = start((const char *const[]){ "--cache-dir", cache, "--no-prefix-cache", NULL }, &port);
    if (pid) {
        ask(port, &warm);
        CHECK_EQ_INT(ask(port, &warm), 0);
        CHECK_EQ_INT(stop(pid), 0);
    }
    CHECK(stat(path, &after) == 0 && after.st_mtime == before.st_mtime && after.st_size == before.st_size);
    cv_buf_free(&cold);
    cv_buf_free(&warm);
}

TEST(kv_type_f32_holds_half_the_positions_q8_0_over_three_times_and_each_answers)
{
    cv_buf f16 = { 0 }, f32 = { 0 };
    int port;
    pid_t pid = start((const char *const[]){ "--cache-dir", "", NULL }, &port);
    CHECK_MSG(pid, "corvid serve did not start");
    if (!pid)
        return;
    CHECK_EQ_INT(ask(port, &f16), 0);
    CHECK_EQ_INT(stop(pid), 0);
    pid = start((const char *const[]){ "--cache-dir", "", "--kv-type", "f32", NULL }, &port);
    CHECK_MSG(pid, "corvid serve --kv-type f32 did not start");
    if (!pid)
        return;
    json_t *st = get(port, "/v1/status", NULL);
    CHECK_EQ_INT(JSON_INT(json_object_get(st, "kv"), "blocks"), 8192 / 16);
    json_decref(st);
    CHECK_EQ_INT(ask(port, &f32), 0);
    CHECK_EQ_INT(stop(pid), 0);
    /* greedy over a short prompt: f16 rounding of K/V does not move the argmax of this model */
    CHECK_MSG(f16.len && f16.len == f32.len && !memcmp(f16.data, f32.data, f16.len), "f16: '%.*s', f32: '%.*s'",
              (int)f16.len, f16.data ? f16.data : "", (int)f32.len, f32.data ? f32.data : "");
    /* q8_0: int8 plus a 2-byte factor per 32 values (or per head), over 3x f32's positions */
    cv_buf q8 = { 0 };
    pid = start((const char *const[]){ "--cache-dir", "", "--kv-type", "q8_0", NULL }, &port);
    CHECK_MSG(pid, "corvid serve --kv-type q8_0 did not start");
    if (pid) {
        st = get(port, "/v1/status", NULL);
        const json_int_t blocks = JSON_INT(json_object_get(st, "kv"), "blocks");
        CHECK_MSG(blocks >= 512 * 31 / 10, "q8_0 KV in 16M: %lld blocks", (long long)blocks);
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(st, "kv"), "type")), "q8_0");
        json_decref(st);
        CHECK_EQ_INT(ask(port, &q8), 0);
        CHECK(q8.len > 0);
        CHECK_EQ_INT(stop(pid), 0);
    }
    cv_buf_free(&q8);
    cv_buf_free(&f16);
    cv_buf_free(&f32);
}

TEST(the_load_generator_runs_agent_turns_against_the_server)
{
    int port;
    pid_t pid = start((const char *const[]){ "--cache-dir", "", NULL }, &port);
    CHECK_MSG(pid, "corvid serve did not start");
    if (!pid)
        return;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    proc_out po;
    run((const char *const[]){ CV_RELEASE_BIN, "bench", "--serve", url, "--case", "agents", "--agents", "2", "--turns",
                               "3", "--system", "64", "--turn-tokens", "16", "--reply", "4", "--tool-ms", "20", "--ban",
                               "50256", NULL },
        NULL, &po);
    CHECK_MSG(po.status == 0, "bench --serve: exit %d, %s", po.status, po.err.data);
    /* one line per turn: "agent turn prompt cached ..." rows start with two numbers */
    int rows = 0;
    for (const char *l = po.out.data; l && *l;) {
        int a, t;
        rows += sscanf(l, " %d %d ", &a, &t) == 2;
        const char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : NULL;
    }
    CHECK_EQ_INT(rows, 6);
    const char *hr = po.out.data ? strstr(po.out.data, "hit rate after each agent's first turn ") : NULL;
    CHECK_MSG(hr, "no hit rate in: %s", po.out.data);
    /* turns 2-3 re-send 64 + 20 or 64 + 40 ids; all full blocks but the last come from the cache */
    CHECK_MSG(hr && atof(hr + strlen("hit rate after each agent's first turn ")) >= 70.0, "%s", hr);
    CHECK(po.out.data && strstr(po.out.data, "tool runs of 0-40 ms"));
    proc_out_free(&po);
    /* one turn at a time, round robin: every turn after an agent's first finds its prefix */
    run((const char *const[]){ CV_RELEASE_BIN, "bench", "--serve", url, "--case", "agents", "--agents", "3", "--turns",
                               "2", "--system", "64", "--turn-tokens", "16", "--reply", "4", "--in-flight", "1",
                               "--seed", "2", "--ban", "50256", NULL },
        NULL, &po);
    CHECK_MSG(po.status == 0, "bench --serve --in-flight 1: exit %d, %s", po.status, po.err.data);
    CHECK_MSG(po.out.data && strstr(po.out.data, "at most 1 turn at once, round robin"), "%s", po.out.data);
    hr = po.out.data ? strstr(po.out.data, "hit rate after each agent's first turn ") : NULL;
    CHECK_MSG(hr && atof(hr + strlen("hit rate after each agent's first turn ")) >= 70.0, "%s", po.out.data);
    proc_out_free(&po);
    run((const char *const[]){ CV_RELEASE_BIN, "bench", "--serve", url, "--tool-ms", "-5", NULL }, NULL, &po);
    CHECK_MSG(po.status == 2 && strstr(po.err.data, "--tool-ms"), "--tool-ms -5: exit %d, %s", po.status, po.err.data);
    proc_out_free(&po);
    CHECK_EQ_INT(stop(pid), 0);
}

/* gpt-oss and gemma3 (window layers): a second turn, the first one's
 * question and answer plus a new question, is served from the prefix cache
 * (its window layers' blocks kept with the tree's) and answers what a cold
 * server answers; /v1/status shows the two layer groups' KV. */
TEST(a_second_turn_on_window_models_reuses_the_prefix_cache_and_equals_a_cold_server)
{
    static const char *const archs[] = { "gpt-oss", "gemma3" };
    char saved[sizeof model];
    memcpy(saved, model, sizeof model);
    for (size_t a = 0; a < CV_ARRAY_LEN(archs); a++) {
        snprintf(model, sizeof model, "%s/%s.gguf", dir, archs[a]);
        proc_out po;
        run((const char *const[]){ CV_RELEASE_BIN, "synth", "--arch", archs[a], "--shape", "tiny", "--dtype", "q8_0",
                                   "--vocab", test_data("vocab/ggml-vocab-gpt-2.gguf"), "--seed", "7", "-o", model,
                                   NULL },
            NULL, &po);
        CHECK_MSG(po.status == 0, "synth %s: %s", archs[a], po.err.data);
        proc_out_free(&po);
        int port;
        pid_t pid = start((const char *const[]){ "--cache-dir", "", NULL }, &port);
        CHECK_MSG(pid, "corvid serve %s did not start", archs[a]);
        if (!pid)
            continue;
        cv_buf one = { 0 }, two = { 0 }, cold = { 0 };
        ask(port, &one);
        json_t *turn2 = json_loads(BODY, 0, NULL), *msgs = json_object_get(turn2, "messages");
        json_array_append_new(msgs, json_pack("{s:s, s:s%}", "role", "assistant", "content", one.data ? one.data : "",
                                              one.len));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", "And what of the river?"));
        char *b2 = json_dumps(turn2, JSON_COMPACT);
        const int64_t cached = ask_body(port, b2, &two);
        CHECK_MSG(cached >= 32, "%s: the second turn had %lld cached tokens", archs[a], (long long)cached);
        json_t *st = get(port, "/v1/status", NULL);
        json_t *groups = json_object_get(json_object_get(st, "kv"), "groups");
        CHECK_MSG(json_array_size(groups) == 2, "%s: %zu KV groups in /v1/status", archs[a], json_array_size(groups));
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(groups, 1), "window")), 32);
        CHECK(json_real_value(json_object_get(json_object_get(st, "kv"), "bytes_used")) > 0);
        json_decref(st);
        CHECK_EQ_INT(stop(pid), 0);
        pid = start((const char *const[]){ "--cache-dir", "", NULL }, &port);
        if (pid) {
            CHECK_EQ_INT(ask_body(port, b2, &cold), 0);
            CHECK_MSG(two.len == cold.len && (!two.len || !memcmp(two.data, cold.data, two.len)),
                      "%s: the cached second turn says '%.*s', a cold server '%.*s'", archs[a], (int)two.len,
                      two.data ? two.data : "", (int)cold.len, cold.data ? cold.data : "");
            CHECK_EQ_INT(stop(pid), 0);
        }
        free(b2);
        json_decref(turn2);
        cv_buf_free(&one);
        cv_buf_free(&two);
        cv_buf_free(&cold);
    }
    memcpy(model, saved, sizeof model);
}

int main(void)
{
    if (!have_bin())
        test_skip(CV_RELEASE_BIN " is not built");
    test_require_data();
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(dir, sizeof dir, "/tmp/corvid-test-serve-cli-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(model, sizeof model, "%s/tiny.gguf", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    RUN(help_documents_the_scheduler_flags_and_bad_values_are_usage_errors);
    proc_out po;
    run((const char *const[]){ CV_RELEASE_BIN, "synth", "--arch", "qwen2", "--shape", "tiny", "--dtype", "q8_0",
                               "--vocab", test_data("vocab/ggml-vocab-gpt-2.gguf"), "--seed", "5", "-o", model, NULL },
        NULL, &po);
    CHECK_MSG(po.status == 0, "synth: %s", po.err.data);
    proc_out_free(&po);
    if (po.status == 0) {
        RUN(a_restart_with_the_same_cache_dir_reports_cached_tokens_for_a_repeated_prompt);
        RUN(kv_type_f32_holds_half_the_positions_q8_0_over_three_times_and_each_answers);
        RUN(the_load_generator_runs_agent_turns_against_the_server);
    }
    RUN(a_second_turn_on_window_models_reuses_the_prefix_cache_and_equals_a_cold_server);
    proc_out ro;
    run((const char *const[]){ "/bin/rm", "-rf", dir, NULL }, NULL, &ro);
    proc_out_free(&ro);
    curl_global_cleanup();
    return test_report();
}
