/* test_server_models.c — several models in one `corvid serve`, on the
 * release binary (make test builds it), with tiny synth models (qwen2 and
 * llama with the gpt-2 vocabulary, and a qwen3 embedding model: the same
 * with qwen3.pooling_type = last):
 *   - two chat models and the embedding model in one server: requests to
 *     both at once give exactly what a server of each alone gives for the
 *     same seed; names, aliases and --route globs pick the model (Claude
 *     Code's haiku and sonnet names); a name that matches nothing is a 404
 *     in each wire's own shape listing what is served; /v1/models lists
 *     every model and /metrics has a sample per model;
 *   - /v1/embeddings: unit vectors, a batch equals each input alone, base64
 *     decodes to the floats, token-id inputs equal their text, dimensions a
 *     model was not trained to be cut to and chat models are refused;
 *   - --model-key: a model's own key reaches that model only;
 *   - --max-loaded 1 with alternating requests: each is answered, the loads
 *     and unloads are counted in /v1/status, and the prefix cache a model
 *     saved when it was unloaded is read back at its next load (cached
 *     tokens in usage);
 *   - --keep-alive: an idle model is unloaded and the process's resident
 *     memory falls by at least half of what loading it added;
 *   - `corvid serve` over a store holding a corrupt file: requests for it
 *     get a 500 naming the file's problem, the other models keep serving,
 *     and `corvid ps` shows the failures. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
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

static char dir[256], model_a[512], model_b[512], model_e[512], store[512], cache[512];

/* ---- the server ---- */

/* Starts `corvid serve ARGS...` (with the common flags) with CORVID_MODELS
 * set to store_dir (may be NULL); returns its pid and port, or 0. */
static pid_t start(const char *const *args, const char *store_dir, int *port)
{
    const char *argv[48];
    int n = 0;
    static const char *const fixed[] = { CV_RELEASE_BIN, "serve", "--port", "0", "--ctx", "1024", "--parallel", "2",
                                         "--threads", "2", "--kv-memory", "16M", "--batch-tokens", "64" };
    for (size_t i = 0; i < CV_ARRAY_LEN(fixed); i++)
        argv[n++] = fixed[i];
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char log[600], env[600];
    snprintf(log, sizeof log, "%s/serve.log", dir);
    snprintf(env, sizeof env, "CORVID_MODELS=%s", store_dir ? store_dir : "");
    return start_server(argv, (const char *const[]){ store_dir ? env : "-CORVID_MODELS", NULL }, log, port);
}

static int stop(pid_t pid) { return stop_server(pid); }

static json_t *http(int port, const char *path, const char *body, const char *key, long *status)
{
    return serve_http(port, path, body, key, status, NULL);
}

static json_t *get_ok(int port, const char *path, const char *body)
{
    long st;
    json_t *v = http(port, path, body, NULL, &st);
    CHECK_MSG(st == 200 && v, "%s: HTTP %ld", path, st);
    return v;
}

/* A chat request for model; its text (NULL-terminated, caller frees) and
 * cached prompt tokens, or NULL on failure (*status says). */
static char *chat(int port, const char *model, const char *key, long *status, int64_t *cached)
{
    char body[700];
    snprintf(body, sizeof body,
             "{\"model\":\"%s\",\"max_tokens\":12,\"temperature\":0.9,\"seed\":11,\"messages\":[{\"role\":\"user\","
             "\"content\":\"A long and winding question about foxes, rivers, clouds and the weather over the hills "
             "in the early morning, asked again and again.\"}]}",
             model);
    long st;
    json_t *v = http(port, "/v1/chat/completions", body, key, &st);
    if (status)
        *status = st;
    char *text = NULL;
    if (st == 200 && v) {
        json_t *m = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
        const char *c = json_string_value(json_object_get(m, "content"));
        text = strdup(c ? c : "");
        if (cached)
            *cached = json_integer_value(
                json_object_get(json_object_get(json_object_get(v, "usage"), "prompt_tokens_details"), "cached_tokens"));
    }
    json_decref(v);
    return text;
}

/* ---- what a server of each model alone says ---- */

static char *alone_a, *alone_b;

static char *alone(const char *path)
{
    int port;
    pid_t pid = start((const char *const[]){ path, "--cache-dir", "", NULL }, NULL, &port);
    CHECK_MSG(pid, "corvid serve %s did not start", path);
    if (!pid)
        return strdup("");
    long st;
    char *t = chat(port, "whatever", NULL, &st, NULL);
    CHECK_MSG(t, "alone: HTTP %ld", st);
    CHECK_EQ_INT(stop(pid), 0);
    return t ? t : strdup("");
}

typedef struct asker {
    int port;
    const char *model;
    char *text;
} asker;

static void *ask_main(void *arg)
{
    asker *a = arg;
    long st;
    a->text = chat(a->port, a->model, NULL, &st, NULL);
    return NULL;
}

TEST(two_models_at_once_answer_as_each_alone_and_names_routes_and_globs_pick_the_model)
{
    int port;
    pid_t pid = start((const char *const[]){ model_a, model_b, model_e, "--cache-dir", "", "--route",
                                             "claude-*haiku*=b", "--route", "claude-*=a", NULL },
                      NULL, &port);
    CHECK_MSG(pid, "corvid serve a b e did not start");
    if (!pid)
        return;
    /* both at once, twice each */
    asker k[4] = { { port, "a", NULL }, { port, "b", NULL }, { port, "a", NULL }, { port, "b", NULL } };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, ask_main, &k[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) {
        const char *want = i % 2 ? alone_b : alone_a;
        CHECK_MSG(k[i].text && !strcmp(k[i].text, want), "model %s beside the other said '%s', alone '%s'",
                  k[i].model, k[i].text ? k[i].text : "(failed)", want);
        free(k[i].text);
    }
    CHECK_MSG(strcmp(alone_a, alone_b), "the two models say the same: the test cannot tell them apart");
    /* names: the file's name is an alias; routes by glob, case folded */
    static const struct {
        const char *name;
        int which; /* 0 a, 1 b */
    } names[] = { { "A", 0 }, { "b.gguf", -1 }, { "claude-3-5-haiku-20241022", 1 }, { "claude-haiku-4-5", 1 },
                  { "claude-sonnet-4-5", 0 }, { "Claude-Opus-4-1", 0 } };
    for (size_t i = 0; i < CV_ARRAY_LEN(names); i++) {
        long st;
        char *txt = chat(port, names[i].name, NULL, &st, NULL);
        if (names[i].which < 0) {
            CHECK_MSG(st == 404, "%s: HTTP %ld", names[i].name, st);
        } else {
            const char *want = names[i].which ? alone_b : alone_a;
            CHECK_MSG(txt && !strcmp(txt, want), "%s: '%s', want '%s'", names[i].name, txt ? txt : "(failed)", want);
        }
        free(txt);
    }
    /* an unknown name: OpenAI's 404 model_not_found, Anthropic's not_found_error, each listing the models */
    long st;
    json_t *v = http(port, "/v1/chat/completions",
                     "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", NULL, &st);
    CHECK_EQ_INT((int)st, 404);
    json_t *e = json_object_get(v, "error");
    CHECK_EQ_STR(json_string_value(json_object_get(e, "code")), "model_not_found");
    const char *msg = json_string_value(json_object_get(e, "message"));
    CHECK_MSG(msg && strstr(msg, "gpt-4o") && strstr(msg, "'a'") && strstr(msg, "'b'") && strstr(msg, "'e'"),
              "message: %s", msg ? msg : "(none)");
    json_decref(v);
    v = http(port, "/v1/messages",
             "{\"model\":\"mistral-large\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
             NULL, &st);
    CHECK_EQ_INT((int)st, 404);
    CHECK_EQ_STR(json_string_value(json_object_get(v, "type")), "error");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(v, "error"), "type")), "not_found_error");
    json_decref(v);
    /* /v1/models lists the three, loaded, the embedding model says so */
    v = get_ok(port, "/v1/models", NULL);
    json_t *data = json_object_get(v, "data");
    CHECK_EQ_INT((int)json_array_size(data), 3);
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *m = json_array_get(data, i);
        CHECK_EQ_STR(json_string_value(json_object_get(m, "status")), "loaded");
    }
    json_decref(v);
    /* /metrics: a sample per model */
    cv_buf mt = { 0 };
    json_decref(serve_http(port, "/metrics", NULL, NULL, &st, &mt));
    cv_buf_putc(&mt, 0);
    CHECK(mt.data && strstr(mt.data, "corvid_model_loaded{model=\"a\"} 1"));
    CHECK(mt.data && strstr(mt.data, "corvid_model_loaded{model=\"e\"} 1"));
    CHECK(mt.data && strstr(mt.data, "corvid_sched_steps_total{model=\"b\"}"));
    cv_buf_free(&mt);

    /* ---- embeddings ---- */
    v = get_ok(port, "/v1/embeddings",
               "{\"model\":\"e\",\"input\":[\"the fox crossed the river\",\"clouds over the hills\",\"weather\"]}");
    data = json_object_get(v, "data");
    CHECK_EQ_INT((int)json_array_size(data), 3);
    CHECK_EQ_STR(json_string_value(json_object_get(v, "object")), "list");
    CHECK(JSON_INT(json_object_get(v, "usage"), "prompt_tokens") > 3);
    json_t *first = json_object_get(json_array_get(data, 0), "embedding");
    const size_t E = json_array_size(first);
    CHECK_EQ_INT((int)E, 256);
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *vec = json_object_get(json_array_get(data, i), "embedding");
        CHECK_EQ_INT((int)JSON_INT(json_array_get(data, i), "index"), (int)i);
        double ss = 0;
        for (size_t d = 0; d < json_array_size(vec); d++)
            ss += json_real_value(json_array_get(vec, d)) * json_real_value(json_array_get(vec, d));
        CHECK_MSG(fabs(ss - 1) < 1e-5, "input %zu: length %g", i, sqrt(ss));
    }
    /* batch = alone, bit for bit; base64 is the same floats */
    json_t *one = get_ok(port, "/v1/embeddings", "{\"model\":\"e\",\"input\":\"clouds over the hills\"}");
    json_t *b64 = get_ok(port, "/v1/embeddings",
                         "{\"model\":\"e\",\"input\":[\"clouds over the hills\"],\"encoding_format\":\"base64\"}");
    json_t *alone_vec = json_object_get(json_array_get(json_object_get(one, "data"), 0), "embedding");
    json_t *batch_vec = json_object_get(json_array_get(data, 1), "embedding");
    CHECK(json_equal(alone_vec, batch_vec));
    const char *s64 = json_string_value(json_object_get(json_array_get(json_object_get(b64, "data"), 0), "embedding"));
    CHECK_MSG(s64 && strlen(s64) == (E * 4 + 2) / 3 * 4, "base64 of %zu floats: %zu chars", E, s64 ? strlen(s64) : 0);
    if (s64) {
        static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        unsigned char *raw = calloc(E * 4 + 3, 1);
        size_t nb = 0;
        for (size_t i = 0; s64[i] && s64[i] != '='; i += 4) {
            uint32_t w = 0;
            int got = 0;
            for (int j = 0; j < 4 && s64[i + j] && s64[i + j] != '='; j++, got++)
                w |= (uint32_t)(strchr(tab, s64[i + j]) - tab) << (18 - 6 * j);
            for (int j = 0; j < got - 1; j++)
                raw[nb++] = (unsigned char)(w >> (16 - 8 * j));
        }
        CHECK_EQ_INT((int)nb, (int)(E * 4));
        for (size_t d = 0; d < E && nb == E * 4; d++) {
            uint32_t u = (uint32_t)raw[4 * d] | (uint32_t)raw[4 * d + 1] << 8 | (uint32_t)raw[4 * d + 2] << 16 |
                         (uint32_t)raw[4 * d + 3] << 24;
            float f;
            memcpy(&f, &u, 4);
            if (f != (float)json_real_value(json_array_get(alone_vec, d))) {
                CHECK_MSG(0, "base64 value %zu is %g, the float %g", d, f, json_real_value(json_array_get(alone_vec, d)));
                break;
            }
        }
        free(raw);
    }
    json_decref(b64);
    /* token ids: GPT-2's ids of "Hello world" give that text's vector, alone and in a batch of id arrays */
    json_t *hw = get_ok(port, "/v1/embeddings", "{\"model\":\"e\",\"input\":\"Hello world\"}");
    json_t *byid = get_ok(port, "/v1/embeddings", "{\"model\":\"e\",\"input\":[15496,995]}");
    json_t *byids = get_ok(port, "/v1/embeddings", "{\"model\":\"e\",\"input\":[[15496,995],[995]]}");
    CHECK_EQ_INT((int)JSON_INT(json_object_get(hw, "usage"), "prompt_tokens"), 2);
    CHECK_EQ_INT((int)JSON_INT(json_object_get(byids, "usage"), "prompt_tokens"), 3);
    json_t *vt = json_object_get(json_array_get(json_object_get(hw, "data"), 0), "embedding");
    CHECK(json_equal(vt, json_object_get(json_array_get(json_object_get(byid, "data"), 0), "embedding")));
    CHECK(json_equal(vt, json_object_get(json_array_get(json_object_get(byids, "data"), 0), "embedding")));
    CHECK(!json_equal(vt, json_object_get(json_array_get(json_object_get(byids, "data"), 1), "embedding")));
    json_decref(hw), json_decref(byid), json_decref(byids);
    json_decref(one);
    json_decref(v);
    /* refused: a chat model, dimensions the model was not trained to be cut to, an empty input */
    static const char *const bad[][2] = {
        { "{\"model\":\"a\",\"input\":\"x\"}", "not an embedding model" },
        { "{\"model\":\"e\",\"input\":\"x\",\"dimensions\":64}", "dimensions" },
        { "{\"model\":\"e\",\"input\":\"x\",\"dimensions\":4096}", "dimensions" },
        { "{\"model\":\"e\",\"input\":[]}", "empty" },
        { "{\"model\":\"e\",\"input\":\"x\",\"encoding_format\":\"hex\"}", "encoding_format" },
        { "{\"model\":\"nope\",\"input\":\"x\"}", "not served" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        v = http(port, "/v1/embeddings", bad[i][0], NULL, &st);
        const char *m = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
        CHECK_MSG((st == 400 || st == 404) && m && strstr(m, bad[i][1]), "%s: HTTP %ld %s", bad[i][0], st,
                  m ? m : "(no message)");
        json_decref(v);
    }
    CHECK_EQ_INT(stop(pid), 0);
}

TEST(a_models_own_key_reaches_that_model_only)
{
    int port;
    pid_t pid = start((const char *const[]){ model_a, model_b, "--cache-dir", "", "--api-key", "server-key",
                                             "--model-key", "b=b-key", NULL },
                      NULL, &port);
    CHECK_MSG(pid, "corvid serve did not start");
    if (!pid)
        return;
    long st;
    char *t = chat(port, "b", "b-key", &st, NULL);
    CHECK_MSG(t && st == 200, "b with its key: HTTP %ld", st);
    free(t);
    t = chat(port, "a", "b-key", &st, NULL);
    CHECK_MSG(!t && st == 401, "a with b's key: HTTP %ld", st);
    free(t);
    t = chat(port, "a", "server-key", &st, NULL);
    CHECK_MSG(t && st == 200, "a with the server's key: HTTP %ld", st);
    free(t);
    t = chat(port, "b", NULL, &st, NULL);
    CHECK_MSG(!t && st == 401, "b without a key: HTTP %ld", st);
    free(t);
    CHECK_EQ_INT(stop(pid), 0);
}

/* The model entry of /v1/status with this name or alias. */
static json_t *status_of(json_t *st, const char *name)
{
    json_t *ms = json_object_get(st, "models");
    for (size_t i = 0; i < json_array_size(ms); i++) {
        json_t *m = json_array_get(ms, i), *al = json_object_get(m, "aliases");
        if (!strcmp(json_string_value(json_object_get(m, "name")), name))
            return m;
        for (size_t k = 0; k < json_array_size(al); k++)
            if (!strcmp(json_string_value(json_array_get(al, k)), name))
                return m;
    }
    CHECK_MSG(0, "/v1/status lists no model %s", name);
    return NULL;
}

/* The state /v1/status gives the model with this name or alias ("" when none). */
static const char *state_of(json_t *st, const char *name)
{
    const char *s = json_string_value(json_object_get(status_of(st, name), "state"));
    return s ? s : "";
}

TEST(max_loaded_one_alternates_models_and_reloads_the_saved_prefix_cache)
{
    int port;
    pid_t pid = start((const char *const[]){ model_a, model_b, "--cache-dir", cache, "--max-loaded", "1", NULL }, NULL,
                      &port);
    CHECK_MSG(pid, "corvid serve --max-loaded 1 did not start");
    if (!pid)
        return;
    static const char *const order[] = { "a", "b", "a", "b", "a" };
    int64_t cached[5] = { 0 };
    for (int i = 0; i < 5; i++) {
        long st;
        char *t = chat(port, order[i], NULL, &st, &cached[i]);
        const char *want = i % 2 ? alone_b : alone_a;
        CHECK_MSG(t && !strcmp(t, want), "request %d (%s): HTTP %ld '%s', alone '%s'", i, order[i], st,
                  t ? t : "(failed)", want);
        free(t);
        json_t *s = get_ok(port, "/v1/status", NULL);
        int loaded = 0;
        for (size_t k = 0; k < json_array_size(json_object_get(s, "models")); k++)
            loaded += !strcmp(json_string_value(json_object_get(json_array_get(json_object_get(s, "models"), k),
                                                                "state")),
                              "loaded");
        CHECK_MSG(loaded == 1, "after request %d: %d models loaded", i, loaded);
        json_decref(s);
    }
    json_t *s = get_ok(port, "/v1/status", NULL);
    json_t *set = json_object_get(s, "set");
    CHECK_EQ_INT((int)JSON_INT(set, "loads"), 5);   /* a at start, then one load per switch */
    CHECK_EQ_INT((int)JSON_INT(set, "unloads"), 4);
    CHECK_EQ_INT((int)JSON_INT(status_of(s, "a"), "loads"), 3);
    CHECK_EQ_INT((int)JSON_INT(status_of(s, "b"), "unloads"), 2);
    json_decref(s);
    /* the first request of each model computed its prompt; the later ones found it in the file saved at unload */
    CHECK_EQ_INT((int)cached[0], 0);
    CHECK_EQ_INT((int)cached[1], 0);
    for (int i = 2; i < 5; i++)
        CHECK_MSG(cached[i] >= 16, "request %d (%s) after a reload: %lld cached tokens", i, order[i],
                  (long long)cached[i]);
    CHECK_EQ_INT(stop(pid), 0);
}

/* VmRSS of pid in bytes. */
static int64_t rss(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

TEST(keep_alive_unloads_an_idle_model_and_returns_its_memory)
{
    int port;
    /* the store's models, none loaded until asked for */
    pid_t pid = start((const char *const[]){ "--cache-dir", "", "--keep-alive", "1s", NULL }, store, &port);
    CHECK_MSG(pid, "corvid serve (the store) --keep-alive 1s did not start");
    if (!pid)
        return;
    usleep(200 * 1000);
    const int64_t before = rss(pid);
    long st;
    char *t = chat(port, "a", NULL, &st, NULL);
    CHECK_MSG(t && !strcmp(t, alone_a), "a from the store: HTTP %ld '%s'", st, t ? t : "(failed)");
    free(t);
    const int64_t loaded = rss(pid);
    json_t *s = get_ok(port, "/v1/status", NULL);
    CHECK_EQ_STR(state_of(s, "a"), "loaded");
    const int64_t mem = JSON_INT(status_of(s, "a"), "memory_bytes");
    CHECK(mem > 0);
    json_decref(s);
    /* idle for the keep-alive: unloaded */
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        usleep(100 * 1000);
        s = get_ok(port, "/v1/status", NULL);
        gone = !strcmp(state_of(s, "a"), "unloaded");
        if (gone) {
            CHECK_EQ_INT((int)JSON_INT(status_of(s, "a"), "unloads"), 1);
            CHECK_EQ_INT((int)JSON_INT(status_of(s, "a"), "memory_bytes"), 0);
        }
        json_decref(s);
    }
    CHECK_MSG(gone, "a is still loaded 10 s after its last request (--keep-alive 1s)");
    const int64_t after = rss(pid);
    fprintf(stderr, "  resident: %.1f MiB before, %.1f MiB loaded (the model says it holds %.1f MiB), %.1f MiB "
                    "unloaded\n", before / 1048576.0, loaded / 1048576.0, mem / 1048576.0, after / 1048576.0);
    CHECK_MSG(loaded - before > 4 << 20, "loading a added only %lld bytes", (long long)(loaded - before));
    CHECK_MSG(after - before < (loaded - before) / 2, "unloading returned %lld of the %lld bytes loading added",
              (long long)(loaded - after), (long long)(loaded - before));
    /* asked again: loaded again */
    t = chat(port, "a", NULL, &st, NULL);
    CHECK_MSG(t && !strcmp(t, alone_a), "a reloaded: HTTP %ld", st);
    free(t);
    CHECK_EQ_INT(stop(pid), 0);
}

TEST(a_corrupt_file_in_the_store_fails_its_requests_and_the_others_keep_serving)
{
    int port;
    pid_t pid = start((const char *const[]){ "--cache-dir", "", NULL }, store, &port);
    CHECK_MSG(pid, "corvid serve (the store) did not start");
    if (!pid)
        return;
    for (int round = 0; round < 2; round++) {
        long st;
        json_t *v = http(port, "/v1/chat/completions",
                         "{\"model\":\"broken\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                         NULL, &st);
        CHECK_EQ_INT((int)st, 500);
        json_t *e = json_object_get(v, "error");
        const char *m = json_string_value(json_object_get(e, "message"));
        CHECK_MSG(m && strstr(m, "cannot be loaded") && strstr(m, "broken"), "message: %s", m ? m : "(none)");
        CHECK_EQ_STR(json_string_value(json_object_get(e, "code")), "model_load_failed");
        json_decref(v);
        char *t = chat(port, "b", NULL, &st, NULL);
        CHECK_MSG(t && !strcmp(t, alone_b), "b beside the broken one: HTTP %ld", st);
        free(t);
    }
    /* corvid ps: the failures, the loaded model */
    char portarg[16];
    snprintf(portarg, sizeof portarg, "%d", port);
    proc_out po;
    run((const char *const[]){ CV_RELEASE_BIN, "ps", "--port", portarg, "--json", NULL }, NULL, &po);
    CHECK_EQ_INT(po.status, 0);
    json_t *ps = json_loads(po.out.data ? po.out.data : "", 0, NULL);
    bool seen_broken = false, seen_b = false;
    for (size_t i = 0; i < json_array_size(ps); i++) {
        json_t *m = json_array_get(ps, i);
        const char *name = json_string_value(json_object_get(m, "name"));
        if (name && strstr(name, "broken")) {
            seen_broken = true;
            CHECK_EQ_INT((int)JSON_INT(m, "load_failures"), 2);
            CHECK(json_string_value(json_object_get(m, "last_error")) != NULL);
        }
        const char *state = json_string_value(json_object_get(m, "state"));
        if (name && state && !strcmp(state, "loaded"))
            seen_b = true;
    }
    CHECK(seen_broken && seen_b);
    json_decref(ps);
    proc_out_free(&po);
    run((const char *const[]){ CV_RELEASE_BIN, "ps", "--port", portarg, NULL }, NULL, &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_MSG(po.out.data && strstr(po.out.data, "NAME") && strstr(po.out.data, "loaded") &&
                  strstr(po.out.data, "unloaded"),
              "ps: %s", po.out.data ? po.out.data : "");
    proc_out_free(&po);
    CHECK_EQ_INT(stop(pid), 0);
}

/* ---- set-up ---- */

static bool synth(const char *arch, const char *seed, const char *pooling, const char *out)
{
    proc_out po;
    run((const char *const[]){ CV_RELEASE_BIN, "synth", "--arch", arch, "--shape", "tiny", "--dtype", "q8_0", "--vocab",
                               test_data("vocab/ggml-vocab-gpt-2.gguf"), "--seed", seed, "--pooling", pooling, "-o",
                               out, NULL },
        NULL, &po);
    CHECK_MSG(po.status == 0, "synth %s: %s", arch, po.err.data);
    bool ok = po.status == 0;
    proc_out_free(&po);
    return ok;
}

static bool copy_file(const char *from, const char *to, size_t max)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t k, total = 0;
    while (in && out && total < max && (k = fread(buf, 1, CV_MIN(sizeof buf, max - total), in)) > 0)
        total += fwrite(buf, 1, k, out);
    bool ok = in && out;
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return ok;
}

int main(void)
{
    if (access(CV_RELEASE_BIN, X_OK) != 0)
        test_skip(CV_RELEASE_BIN " is not built");
    test_require_data();
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(dir, sizeof dir, "/tmp/corvid-test-models-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(model_a, sizeof model_a, "%s/a.gguf", dir);
    snprintf(model_b, sizeof model_b, "%s/b.gguf", dir);
    snprintf(model_e, sizeof model_e, "%s/e.gguf", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    mkdir(cache, 0700);
    /* the store: local/test/{a,b,broken}.gguf; broken is a cut at half of a */
    char sub[600], sa[700], sb[700], sx[700];
    snprintf(store, sizeof store, "%s/store", dir);
    snprintf(sub, sizeof sub, "%s/local", store);
    mkdir(store, 0700);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/local/test", store);
    mkdir(sub, 0700);
    snprintf(sa, sizeof sa, "%s/a.gguf", sub);
    snprintf(sb, sizeof sb, "%s/b.gguf", sub);
    snprintf(sx, sizeof sx, "%s/broken.gguf", sub);
    if (synth("qwen2", "5", "0", model_a) && synth("llama", "6", "0", model_b) && synth("qwen3", "7", "3", model_e)) {
        struct stat st;
        stat(model_a, &st);
        CHECK(copy_file(model_a, sa, SIZE_MAX) && copy_file(model_b, sb, SIZE_MAX) &&
              copy_file(model_a, sx, (size_t)st.st_size / 2));
        alone_a = alone(model_a);
        alone_b = alone(model_b);
        RUN(two_models_at_once_answer_as_each_alone_and_names_routes_and_globs_pick_the_model);
        RUN(a_models_own_key_reaches_that_model_only);
        RUN(max_loaded_one_alternates_models_and_reloads_the_saved_prefix_cache);
        RUN(keep_alive_unloads_an_idle_model_and_returns_its_memory);
        RUN(a_corrupt_file_in_the_store_fails_its_requests_and_the_others_keep_serving);
        free(alone_a);
        free(alone_b);
    }
    proc_out ro;
    run((const char *const[]){ "/bin/rm", "-rf", dir, NULL }, NULL, &ro);
    proc_out_free(&ro);
    curl_global_cleanup();
    return test_report();
}
