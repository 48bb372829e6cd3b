/* test_server_http.c — the HTTP layer against a live in-process server (the
 * fake backend behind it) driven by libcurl: open and protected routes with
 * both auth header styles, error shapes per wire, 404/405/413, hostile
 * bodies (malformed JSON, 100 MB, 10k messages, invalid UTF-8, deep
 * nesting, NaN), keep-alives during a long prefill, a client that drops a
 * stream after 3 tokens (cancelled at the next step, counted in /metrics,
 * the server keeps serving), mid-stream failures, CORS, the drain (requests
 * for the model 503 + Retry-After on every wire while probes, metrics and
 * listings answer and running streams finish) and a stop whose grace ends
 * first (running answers cut with their wire's error, never a finish
 * reason). No timing assertions: waits are bounded loops on observable
 * state. */
#include <pthread.h>
#include <unistd.h>

#include <curl/curl.h>

#include "test.h"

#include "fake_backend.h"
#include "server/server_int.h"

static fake_backend fb;
static cv_server *srv;
static char base[64];
static const char *KEY = "sekrit-key";

typedef struct resp {
    long status;
    cv_buf body;
    cv_buf headers;
    int abort_after;  /* abort the transfer after this many content deltas (0: never) */
    int deltas;
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    cv_buf_append(&r->body, p, sz * n);
    if (r->abort_after) {
        const char *s = r->body.data;
        int k = 0;
        while ((s = strstr(s, "\"content\":\"")))
            k++, s++;
        r->deltas = k;
        if (k >= r->abort_after + 1) /* +1: the role chunk carries content "" */
            return 0;
    }
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    cv_buf_append(&((resp *)ud)->headers, p, sz * n);
    return sz * n;
}

typedef struct big_body {
    size_t left;
} big_body;

static size_t read_big(char *p, size_t sz, size_t n, void *ud)
{
    big_body *b = ud;
    size_t k = CV_MIN(sz * n, b->left);
    memset(p, ' ', k);
    b->left -= k;
    return k;
}

/* One request; hdrs is a NULL-terminated list of "Name: value". */
static CURLcode http_ex(const char *method, const char *path, const char *const *hdrs, const char *body, size_t len,
                        resp *r, big_body *big)
{
    CURL *c = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    struct curl_slist *h = NULL;
    for (int i = 0; hdrs && hdrs[i]; i++)
        h = curl_slist_append(h, hdrs[i]);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (big) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, read_big);
        curl_easy_setopt(c, CURLOPT_READDATA, big);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)big->left);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc;
}

static long http(const char *method, const char *path, const char *const *hdrs, const char *body, resp *r)
{
    memset(r, 0, sizeof *r);
    http_ex(method, path, hdrs, body, body ? strlen(body) : 0, r, NULL);
    return r->status;
}

static void resp_free(resp *r)
{
    cv_buf_free(&r->body);
    cv_buf_free(&r->headers);
}

static const char *const BEARER[] = { "Authorization: Bearer sekrit-key", NULL };
static const char *const XKEY[] = { "x-api-key: sekrit-key", "anthropic-version: 2099-01-01", NULL };

/* The error object of an OpenAI or Anthropic error body, or NULL. */
static bool is_openai_error(const resp *r)
{
    json_t *v = json_loads(r->body.data ? r->body.data : "", 0, NULL);
    json_t *e = json_object_get(v, "error");
    bool ok = json_is_string(json_object_get(e, "message")) && json_is_string(json_object_get(e, "type"));
    json_decref(v);
    return ok;
}

static bool is_anthropic_error(const resp *r)
{
    json_t *v = json_loads(r->body.data ? r->body.data : "", 0, NULL);
    bool ok = json_is_string(json_object_get(v, "type")) && !strcmp(json_string_value(json_object_get(v, "type")), "error") &&
              json_is_string(json_object_get(json_object_get(v, "error"), "message"));
    json_decref(v);
    return ok;
}

#define CHAT "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]%s}"

static char *chat_body(const char *content, const char *extra)
{
    cv_buf b = { 0 };
    cv_buf_printf(&b, CHAT, content, extra ? extra : "");
    return cv_buf_steal(&b);
}

/* ---- routes and auth ---- */

TEST(open_routes_answer_without_the_key)
{
    const char *paths[] = { "/", "/health", "/health/live", "/health/ready", "/livez", "/readyz" };
    for (size_t i = 0; i < CV_ARRAY_LEN(paths); i++) {
        resp r;
        CHECK_MSG(http("GET", paths[i], NULL, NULL, &r) == 200, "GET %s", paths[i]);
        resp_free(&r);
    }
    resp r;
    CHECK_EQ_INT(http("HEAD", "/", NULL, NULL, &r), 200);
    resp_free(&r);
}

TEST(protected_routes_need_the_key_in_either_header_and_answer_401_in_their_wire_shape)
{
    resp r;
    CHECK_EQ_INT(http("GET", "/v1/models", NULL, NULL, &r), 401);
    CHECK(is_openai_error(&r));
    resp_free(&r);
    CHECK_EQ_INT(http("POST", "/v1/messages", NULL, "{}", &r), 401);
    CHECK(is_anthropic_error(&r));
    resp_free(&r);
    const char *const wrong[] = { "Authorization: Bearer sekrit-kez", NULL };
    CHECK_EQ_INT(http("GET", "/v1/models", wrong, NULL, &r), 401);
    resp_free(&r);
    const char *const prefix[] = { "x-api-key: sekrit-ke", NULL };
    CHECK_EQ_INT(http("GET", "/v1/models", prefix, NULL, &r), 401);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/models", BEARER, NULL, &r), 200);
    json_t *v = json_loads(r.body.data, 0, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(v, "data"), 0), "id")), "fake-bytes");
    json_decref(v);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/models", XKEY, NULL, &r), 200);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/models/fake-bytes", XKEY, NULL, &r), 200);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/models/gpt-9", XKEY, NULL, &r), 404);
    CHECK(is_openai_error(&r));
    resp_free(&r);
}

TEST(unknown_paths_are_404_and_wrong_methods_405_in_the_wire_shape)
{
    resp r;
    CHECK_EQ_INT(http("GET", "/v1/nope", BEARER, NULL, &r), 404);
    CHECK(is_openai_error(&r));
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/chat/completions", BEARER, NULL, &r), 405);
    CHECK(is_openai_error(&r));
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/messages", BEARER, NULL, &r), 405);
    CHECK(is_anthropic_error(&r));
    resp_free(&r);
}

/* Every row of the route table (routes.c), so a new route is covered the
 * day it is added: its own method is answered (a GET with 200, a POST of
 * an empty object with the 400 its translator gives, in its wire's shape),
 * and another method is 405 in its wire's shape. */
TEST(every_route_answers_its_method_and_refuses_another_with_405_in_its_wire_shape)
{
    for (int i = 0; i < cv_n_routes; i++) {
        const cv_route *rt = &cv_routes[i];
        char path[128];
        snprintf(path, sizeof path, "%s%s", rt->path, rt->prefix ? "fake-bytes" : "");
        const char *const *auth = rt->wire == CV_WIRE_ANTHROPIC ? XKEY : BEARER;
        bool (*shaped)(const resp *) = rt->wire == CV_WIRE_ANTHROPIC ? is_anthropic_error : is_openai_error;
        bool get = !strcmp(rt->method, "GET");
        resp r;
        long st = http(rt->method, path, auth, get ? NULL : "{}", &r);
        CHECK_MSG(st == (get ? 200 : 400), "%s %s: %ld, want %d", rt->method, path, st, get ? 200 : 400);
        CHECK_MSG(get || shaped(&r), "%s %s: the 400 is not in the %s error shape: %.200s", rt->method, path,
                  rt->wire == CV_WIRE_ANTHROPIC ? "Anthropic" : "OpenAI", r.body.data ? r.body.data : "");
        resp_free(&r);
        const char *wrong[] = { get ? "POST" : "GET", "DELETE" };
        for (size_t k = 0; k < CV_ARRAY_LEN(wrong); k++) {
            st = http(wrong[k], path, auth, NULL, &r);
            CHECK_MSG(st == 405 && shaped(&r), "%s %s (a %s route): %ld %.200s", wrong[k], path, rt->method, st,
                      r.body.data ? r.body.data : "");
            resp_free(&r);
        }
    }
}

/* ---- hostile bodies ---- */

typedef struct hostile {
    const char *name;
    const char *path;
    const char *body;
    long status;
    const char *msg_has;
} hostile;

static const hostile hostiles[] = {
    { "malformed JSON names line and column", "/v1/chat/completions", "{\"messages\": [", 400, "line 1" },
    { "an empty body is refused", "/v1/chat/completions", "", 400, "empty" },
    { "a JSON array body is refused", "/v1/messages", "[1,2]", 400, "JSON object" },
    { "NaN is not JSON", "/v1/chat/completions", "{\"messages\":[],\"temperature\":NaN}", 400, "invalid JSON" },
    { "Infinity is not JSON", "/v1/messages", "{\"max_tokens\":Infinity}", 400, "invalid JSON" },
    { "invalid UTF-8 in a string is refused", "/v1/chat/completions",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "invalid JSON" },
    { "wrong type for messages", "/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages" },
    { "wrong type for max_tokens", "/v1/messages",
      "{\"max_tokens\":\"lots\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "max_tokens" },
    { "an absurd max_tokens is refused", "/v1/chat/completions",
      "{\"max_tokens\":1e30,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "max_tokens" },
    { "wrong type for input", "/v1/responses", "{\"input\":42}", 400, "input" },
    { "wrong type for tools", "/v1/responses", "{\"input\":\"x\",\"tools\":{}}", 400, "tools" },
    { "completions without a prompt", "/v1/completions", "{\"model\":\"m\"}", 400, "prompt" },
    { "count_tokens with a bad message", "/v1/messages/count_tokens", "{\"messages\":[7]}", 400, "messages[0]" },
};

TEST(hostile_bodies_get_400_in_the_wire_shape_and_the_server_keeps_serving)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(hostiles); i++) {
        const hostile *h = &hostiles[i];
        resp r;
        http("POST", h->path, BEARER, h->body, &r);
        CHECK_MSG(r.status == h->status, "%s: status %ld", h->name, r.status);
        bool anth = !strncmp(h->path, "/v1/messages", 12);
        CHECK_MSG(anth ? is_anthropic_error(&r) : is_openai_error(&r), "%s: body %s", h->name, r.body.data);
        CHECK_MSG(r.body.data && strstr(r.body.data, h->msg_has), "%s: '%s' lacks '%s'", h->name, r.body.data,
                  h->msg_has);
        resp_free(&r);
    }
    resp r;
    CHECK_EQ_INT(http("GET", "/health", NULL, NULL, &r), 200);
    resp_free(&r);
}

TEST(json_nested_ten_thousand_deep_is_refused_not_a_stack_overflow)
{
    cv_buf b = { 0 };
    cv_buf_puts(&b, "{\"messages\":");
    for (int i = 0; i < 10000; i++)
        cv_buf_putc(&b, '[');
    for (int i = 0; i < 10000; i++)
        cv_buf_putc(&b, ']');
    cv_buf_putc(&b, '}');
    resp r;
    http("POST", "/v1/chat/completions", BEARER, b.data, &r);
    CHECK(r.status == 400);
    CHECK(is_openai_error(&r));
    resp_free(&r);
    cv_buf_free(&b);
}

TEST(ten_thousand_messages_are_refused_with_the_limit)
{
    cv_buf b = { 0 };
    cv_buf_puts(&b, "{\"max_tokens\":5,\"messages\":[");
    for (int i = 0; i < 10000; i++)
        cv_buf_printf(&b, "%s{\"role\":\"%s\",\"content\":\"m%d\"}", i ? "," : "", i % 2 ? "assistant" : "user", i);
    cv_buf_puts(&b, "]}");
    const char *paths[] = { "/v1/chat/completions", "/v1/messages" };
    for (int k = 0; k < 2; k++) {
        resp r;
        http("POST", paths[k], BEARER, b.data, &r);
        CHECK_EQ_INT(r.status, 400);
        CHECK(r.body.data && strstr(r.body.data, "10000 messages") && strstr(r.body.data, "8192"));
        resp_free(&r);
    }
    cv_buf_free(&b);
}

TEST(a_100_mb_body_gets_413_before_it_is_read)
{
    big_body big = { 100u << 20 };
    resp r = { 0 };
    http_ex("POST", "/v1/chat/completions", BEARER, NULL, 0, &r, &big);
    CHECK_EQ_INT(r.status, 413);
    CHECK(is_openai_error(&r));
    CHECK_MSG(big.left > (90u << 20), "%zu bytes were sent before the 413", (size_t)((100u << 20) - big.left));
    resp_free(&r);
    big.left = 100u << 20;
    memset(&r, 0, sizeof r);
    http_ex("POST", "/v1/messages", XKEY, NULL, 0, &r, &big);
    CHECK_EQ_INT(r.status, 413);
    CHECK(is_anthropic_error(&r));
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/health", NULL, NULL, &r), 200);
    resp_free(&r);
}

/* ---- generation over HTTP ---- */

TEST(chat_stream_and_json_over_http)
{
    char *body = chat_body("[[say:hello there]]", ",\"stream\":true");
    resp r;
    CHECK_EQ_INT(http("POST", "/v1/chat/completions", BEARER, body, &r), 200);
    CHECK(strstr(r.headers.data, "text/event-stream") != NULL);
    CHECK(strstr(r.body.data, "data: [DONE]\n\n") != NULL);
    CHECK(strstr(r.body.data, "\"finish_reason\":\"stop\"") != NULL);
    resp_free(&r);
    free(body);
    body = chat_body("[[say:hello there]]", NULL);
    CHECK_EQ_INT(http("POST", "/v1/chat/completions", BEARER, body, &r), 200);
    json_t *v = json_loads(r.body.data, 0, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(
                     json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message"), "content")),
                 "hello there");
    json_decref(v);
    resp_free(&r);
    free(body);
}

TEST(keep_alives_flow_while_a_long_prefill_runs)
{
    /* The server under test sends keep-alives every 100 ms; the fake
     * prefill takes 800 ms. */
    char *body = chat_body("[[prefill:800]][[say:ok]]", ",\"stream\":true");
    resp r;
    http("POST", "/v1/chat/completions", BEARER, body, &r);
    const char *ka = strstr(r.body.data, ": keep-alive\n\n");
    const char *content = strstr(r.body.data, "\"content\":\"o\"");
    CHECK(ka && content && ka < content);
    resp_free(&r);
    free(body);
    cv_buf b = { 0 };
    cv_buf_puts(&b, "{\"max_tokens\":50,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
                    "\"[[prefill:800]][[say:ok]]\"}]}");
    http("POST", "/v1/messages", XKEY, b.data, &r);
    int pings = 0;
    for (const char *p = r.body.data; (p = strstr(p, "event: ping\n")); p++)
        pings++;
    CHECK_MSG(pings >= 3, "only %d pings", pings);
    resp_free(&r);
    cv_buf_free(&b);
}

static long long metric(const char *name)
{
    resp r;
    http("GET", "/metrics", BEARER, NULL, &r);
    long long v = -1;
    const char *p = r.body.data ? strstr(r.body.data, name) : NULL;
    while (p && p > r.body.data && p[-1] != '\n')
        p = strstr(p + 1, name);
    if (p)
        v = atoll(p + strlen(name) + 1);
    resp_free(&r);
    return v;
}

TEST(a_client_that_drops_a_stream_after_3_tokens_cancels_it_and_the_server_keeps_serving)
{
    long long cancels0 = metric("corvid_client_cancels_total");
    long long canceled0 = atomic_load(&fb.n_canceled);
    char *body = chat_body("[[slow:40]][[say:one two three four five six seven eight nine ten eleven twelve "
                           "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty]]",
                           ",\"stream\":true");
    resp r = { 0 };
    r.abort_after = 3;
    CURLcode rc = http_ex("POST", "/v1/chat/completions", BEARER, body, strlen(body), &r, NULL);
    CHECK(rc == CURLE_WRITE_ERROR);
    CHECK_EQ_INT(r.deltas, 4);
    long long emitted_at_drop = atomic_load(&fb.tokens_emitted);
    /* Bounded wait on state, not on time: the server notices within a poll. */
    for (int i = 0; i < 500 && atomic_load(&fb.n_canceled) == canceled0; i++)
        usleep(10000);
    CHECK_EQ_INT(atomic_load(&fb.n_canceled), canceled0 + 1);
    long long emitted_after = atomic_load(&fb.tokens_emitted);
    /* At 40 ms a token and a 200 ms poll, a handful more tokens at most;
     * the reply is 120 bytes long, so a cancel that did not happen shows. */
    CHECK_MSG(emitted_after - emitted_at_drop < 20, "%lld tokens after the drop", emitted_after - emitted_at_drop);
    CHECK_EQ_INT(metric("corvid_client_cancels_total"), cancels0 + 1);
    CHECK_EQ_INT(cv_server_n_client_cancels(srv), cancels0 + 1);
    resp_free(&r);
    free(body);
    body = chat_body("[[say:still here]]", NULL);
    CHECK_EQ_INT(http("POST", "/v1/chat/completions", BEARER, body, &r), 200);
    CHECK(strstr(r.body.data, "still here") != NULL);
    resp_free(&r);
    free(body);
}

TEST(a_failure_mid_stream_is_an_error_frame_in_the_wire_shape)
{
    char *body = chat_body("[[fail]][[say:abcdef]]", ",\"stream\":true");
    resp r;
    CHECK_EQ_INT(http("POST", "/v1/chat/completions", BEARER, body, &r), 200);
    CHECK(strstr(r.body.data, "data: {\"error\":{") != NULL);
    resp_free(&r);
    free(body);
    const char *ab = "{\"max_tokens\":9,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"[[fail]]\"}]}";
    CHECK_EQ_INT(http("POST", "/v1/messages", XKEY, ab, &r), 200);
    CHECK(strstr(r.body.data, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"") != NULL);
    resp_free(&r);
    body = chat_body("[[fail]]", NULL);
    CHECK_EQ_INT(http("POST", "/v1/chat/completions", BEARER, body, &r), 500);
    CHECK(is_openai_error(&r));
    resp_free(&r);
    free(body);
}

TEST(count_tokens_answers_with_the_rendered_prompt_length)
{
    const char *b = "{\"model\":\"claude-haiku\",\"messages\":[{\"role\":\"user\",\"content\":\"foo\"}]}";
    resp r;
    CHECK_EQ_INT(http("POST", "/v1/messages/count_tokens?beta=true", XKEY, b, &r), 200);
    json_t *v = json_loads(r.body.data, 0, NULL);
    /* "<|user|>foo\n<|assistant|>" in the fake's byte rendering */
    CHECK_EQ_INT(JSON_INT(v, "input_tokens"), 25);
    json_decref(v);
    resp_free(&r);
}

TEST(metrics_count_requests_by_route_and_status_in_prometheus_text)
{
    resp r;
    http("GET", "/metrics", BEARER, NULL, &r);
    CHECK(strstr(r.headers.data, "text/plain; version=0.0.4") != NULL);
    CHECK(strstr(r.body.data, "corvid_http_requests_total{route=\"chat_completions\",status=\"200\"}") != NULL);
    CHECK(strstr(r.body.data, "corvid_http_requests_total{route=\"chat_completions\",status=\"400\"}") != NULL);
    CHECK(strstr(r.body.data, "corvid_time_to_first_token_seconds_bucket{le=\"+Inf\"}") != NULL);
    CHECK(strstr(r.body.data, "# TYPE corvid_kv_blocks_free gauge") != NULL);
    /* Readiness, KV usage and the hit rate, and the same figures under the
     * names the endpoint picker and vLLM-compatible routers read. */
    static const char *const lines[] = {
        "\ncorvid_ready 1\n",
        "\ncorvid_draining 0\n",
        "\ncorvid_kv_usage_ratio ",
        "\ncorvid_prefix_cache_hit_ratio ",
        "\nvllm:num_requests_waiting{model_name=\"fake-bytes\"} ",
        "\nvllm:num_requests_running{model_name=\"fake-bytes\"} ",
        "\nvllm:kv_cache_usage_perc{model_name=\"fake-bytes\"} ",
        "\nvllm:time_to_first_token_seconds_bucket{model_name=\"fake-bytes\",le=\"+Inf\"} ",
        "\nvllm:cache_config_info{block_size=\"16\"",
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(lines); i++)
        CHECK_MSG(strstr(r.body.data, lines[i]), "/metrics lacks %s", lines[i] + 1);
    resp_free(&r);
}

TEST(metrics_need_the_key_unless_open_metrics)
{
    resp r;
    CHECK_EQ_INT(http("GET", "/metrics", NULL, NULL, &r), 401);
    resp_free(&r);
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0, .api_key = KEY, .open_metrics = true };
    cv_server *s2;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_server_start(&cfg, &fb.be, &s2, &err), 0);
    char saved[64];
    memcpy(saved, base, sizeof base);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cv_server_port(s2));
    CHECK_EQ_INT(http("GET", "/metrics", NULL, NULL, &r), 200);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/status", NULL, NULL, &r), 401);
    resp_free(&r);
    memcpy(base, saved, sizeof base);
    cv_server_destroy(s2);
}

/* ---- CORS and stopping (their own servers) ---- */

TEST(cors_preflight_allows_listed_origins_only)
{
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0, .cors_origins = "http://a.example, http://b.example" };
    cv_server *s2;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_server_start(&cfg, &fb.be, &s2, &err), 0);
    char saved[64];
    memcpy(saved, base, sizeof base);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cv_server_port(s2));
    const char *const ok[] = { "Origin: http://b.example", "Access-Control-Request-Method: POST", NULL };
    const char *const bad[] = { "Origin: http://evil.example", NULL };
    resp r;
    CHECK_EQ_INT(http("OPTIONS", "/v1/chat/completions", ok, NULL, &r), 204);
    CHECK(strstr(r.headers.data, "Access-Control-Allow-Origin: http://b.example") != NULL);
    resp_free(&r);
    CHECK_EQ_INT(http("OPTIONS", "/v1/chat/completions", bad, NULL, &r), 204);
    CHECK(strstr(r.headers.data, "Access-Control-Allow-Origin") == NULL);
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/v1/models", ok, NULL, &r), 200);
    CHECK(strstr(r.headers.data, "Access-Control-Allow-Origin: http://b.example") != NULL);
    resp_free(&r);
    memcpy(base, saved, sizeof base);
    cv_server_destroy(s2);
}

typedef struct bg {
    const char *path;
    const char *body;
    resp r;
} bg;

static void *bg_request(void *ud)
{
    bg *b = ud;
    http("POST", b->path, NULL, b->body, &b->r);
    return NULL;
}

typedef struct stopper {
    cv_server *s;
    int grace_ms;
} stopper;

static void *bg_stop(void *ud)
{
    stopper *st = ud;
    cv_server_stop(st->s, st->grace_ms);
    return NULL;
}

/* A second server for a stop; base points at it until restore_base. */
static cv_server *start_own(char saved[64])
{
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0 };
    cv_server *s2 = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_server_start(&cfg, &fb.be, &s2, &err), 0);
    memcpy(saved, base, 64);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cv_server_port(s2));
    return s2;
}

static void wait_streams(cv_server *s2, int n)
{
    for (int i = 0; i < 500 && atomic_load(&s2->active_streams) < n; i++)
        usleep(10000);
    CHECK_EQ_INT(atomic_load(&s2->active_streams), n);
}

TEST(a_drain_refuses_work_for_the_model_with_503_while_probes_answer_and_running_streams_finish)
{
    char saved[64];
    cv_server *s2 = start_own(saved);
    /* 100 tokens 40 ms apart: the stream outlives the checks below by far. */
    char text[160] = "[[slow:40]][[say:";
    memset(text + strlen(text), 'x', 100);
    strcat(text, "]]");
    char *cb = chat_body(text, ",\"stream\":true");
    bg a = { "/v1/chat/completions", cb, { 0 } };
    pthread_t t1, t2;
    pthread_create(&t1, NULL, bg_request, &a);
    wait_streams(s2, 1);
    stopper st = { s2, 60000 };
    pthread_create(&t2, NULL, bg_stop, &st);
    for (int i = 0; i < 500 && !atomic_load(&s2->stopping); i++)
        usleep(10000);
    resp r;
    static const char *const model_paths[][2] = {
        { "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" },
        { "/v1/completions", "{\"model\":\"m\",\"prompt\":\"hi\"}" },
        { "/v1/responses", "{\"model\":\"m\",\"input\":\"hi\"}" },
        { "/v1/messages", "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(model_paths); i++) {
        CHECK_MSG(http("POST", model_paths[i][0], NULL, model_paths[i][1], &r) == 503, "%s: %ld", model_paths[i][0],
                  r.status);
        CHECK_MSG(r.headers.data && strstr(r.headers.data, "Retry-After: 1"), "%s has no Retry-After",
                  model_paths[i][0]);
        CHECK(i == 3 ? is_anthropic_error(&r) : is_openai_error(&r));
        resp_free(&r);
    }
    static const char *const probes[][2] = { { "/health/live", "200" }, { "/livez", "200" },
                                             { "/health/ready", "503" }, { "/readyz", "503" },
                                             { "/health", "503" },       { "/v1/models", "200" } };
    for (size_t i = 0; i < CV_ARRAY_LEN(probes); i++) {
        CHECK_MSG(http("GET", probes[i][0], NULL, NULL, &r) == atol(probes[i][1]), "GET %s: %ld", probes[i][0],
                  r.status);
        resp_free(&r);
    }
    CHECK_EQ_INT(http("GET", "/health", NULL, NULL, &r), 503);
    CHECK(r.body.data && strstr(r.body.data, "\"status\":\"draining\""));
    resp_free(&r);
    CHECK_EQ_INT(http("GET", "/metrics", NULL, NULL, &r), 200);
    CHECK(r.body.data && strstr(r.body.data, "\ncorvid_draining 1\n") && strstr(r.body.data, "\ncorvid_ready 0\n"));
    resp_free(&r);
    /* Every check above ran while the stream was still being served. */
    CHECK_EQ_INT(atomic_load(&s2->active_streams), 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(a.r.body.data && strstr(a.r.body.data, "\"finish_reason\":\"stop\""));
    CHECK(a.r.body.data && strstr(a.r.body.data, "data: [DONE]"));
    CHECK(a.r.body.data && !strstr(a.r.body.data, "\"error\""));
    resp_free(&a.r);
    free(cb);
    memcpy(base, saved, sizeof base);
    cv_server_destroy(s2);
}

TEST(answers_still_running_when_the_grace_ends_are_cut_with_their_wire_error_not_a_finish)
{
    char saved[64];
    cv_server *s2 = start_own(saved);
    bg a = { "/v1/chat/completions", NULL, { 0 } }, m = { "/v1/messages", NULL, { 0 } },
       j = { "/v1/chat/completions", NULL, { 0 } };
    char *cb = chat_body("[[slow:30]][[say:a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j "
                         "k l m n o p]]",
                         ",\"stream\":true");
    char *jb = chat_body("[[slow:30]][[say:a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j "
                         "k l m n o p]]",
                         NULL);
    a.body = cb;
    j.body = jb;
    m.body = "{\"max_tokens\":500,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
             "\"[[slow:30]][[say:0123456789012345678901234567890123456789012345678901234567890123456789]]\"}]}";
    pthread_t t1, t2, t3;
    long long c0 = atomic_load(&fb.n_canceled);
    pthread_create(&t1, NULL, bg_request, &a);
    pthread_create(&t2, NULL, bg_request, &m);
    pthread_create(&t3, NULL, bg_request, &j);
    wait_streams(s2, 3);
    cv_server_stop(s2, 100);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    CHECK_EQ_INT(atomic_load(&fb.n_canceled), c0 + 3);
    /* OpenAI: an error data frame (the SDK raises APIError), then [DONE];
     * no finish_reason ever said the answer was whole. */
    CHECK(a.r.body.data && strstr(a.r.body.data, "data: {\"error\":") && strstr(a.r.body.data, "cut after"));
    CHECK(a.r.body.data && strstr(a.r.body.data, "data: [DONE]\n\n"));
    CHECK(a.r.body.data && !strstr(a.r.body.data, "\"finish_reason\":\""));
    /* Anthropic: an error event instead of message_delta/message_stop. */
    CHECK(m.r.body.data && strstr(m.r.body.data, "event: error\n") && !strstr(m.r.body.data, "event: message_stop"));
    CHECK(m.r.body.data && !strstr(m.r.body.data, "\"stop_reason\":\""));
    /* Not streamed: 503 (with Retry-After) and the error body. */
    CHECK_EQ_INT(j.r.status, 503);
    CHECK(j.r.headers.data && strstr(j.r.headers.data, "Retry-After: 1"));
    CHECK(is_openai_error(&j.r));
    resp_free(&a.r);
    resp_free(&m.r);
    resp_free(&j.r);
    free(cb);
    free(jb);
    memcpy(base, saved, sizeof base);
    cv_server_destroy(s2);
}

static void *bg_stream(void *ud)
{
    bg *b = ud;
    http("POST", b->path, BEARER, b->body, &b->r);
    return NULL;
}

TEST(sixteen_concurrent_streams_each_get_their_own_complete_answer)
{
    enum { N = 16 };
    bg reqs[N];
    char *bodies[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        char text[64];
        snprintf(text, sizeof text, "[[slow:5]][[say:answer number %d]]", i);
        bodies[i] = chat_body(text, ",\"stream\":true");
        reqs[i] = (bg){ "/v1/chat/completions", bodies[i], { 0 } };
        pthread_create(&t[i], NULL, bg_stream, &reqs[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        /* reassemble the content deltas */
        cv_buf text = { 0 };
        const char *p = reqs[i].r.body.data ? reqs[i].r.body.data : "";
        while ((p = strstr(p, "\"content\":\""))) {
            p += 11;
            const char *e = strchr(p, '"');
            cv_buf_append(&text, p, (size_t)(e - p));
            p = e;
        }
        char want[64];
        snprintf(want, sizeof want, "answer number %d", i);
        CHECK_EQ_INT(reqs[i].r.status, 200);
        CHECK_EQ_STR(text.data ? text.data : "", want);
        CHECK(strstr(reqs[i].r.body.data, "data: [DONE]") != NULL);
        cv_buf_free(&text);
        resp_free(&reqs[i].r);
        free(bodies[i]);
    }
}

TEST(a_client_that_gives_up_on_a_non_streaming_request_cancels_it)
{
    long long canceled0 = atomic_load(&fb.n_canceled);
    char *body = chat_body("[[slow:50]][[say:a slow answer that takes seconds to write out in full, byte by byte]]",
                           NULL);
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/v1/chat/completions", base);
    struct curl_slist *h = curl_slist_append(NULL, BEARER[0]);
    resp r = { 0 };
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 400L);
    CHECK(curl_easy_perform(c) == CURLE_OPERATION_TIMEDOUT);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    for (int i = 0; i < 500 && atomic_load(&fb.n_canceled) == canceled0; i++)
        usleep(10000);
    CHECK_EQ_INT(atomic_load(&fb.n_canceled), canceled0 + 1);
    resp_free(&r);
    free(body);
}

int main(void)
{
    test_require_data();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fake_backend_init(&fb, 1 << 20);
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0, .api_key = KEY, .keepalive_ms = 100 };
    cv_err err = { 0 };
    if (cv_server_start(&cfg, &fb.be, &srv, &err)) {
        fprintf(stderr, "cannot start: %s\n", err.msg);
        return 1;
    }
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cv_server_port(srv));
    RUN(open_routes_answer_without_the_key);
    RUN(protected_routes_need_the_key_in_either_header_and_answer_401_in_their_wire_shape);
    RUN(unknown_paths_are_404_and_wrong_methods_405_in_the_wire_shape);
    RUN(every_route_answers_its_method_and_refuses_another_with_405_in_its_wire_shape);
    RUN(hostile_bodies_get_400_in_the_wire_shape_and_the_server_keeps_serving);
    RUN(json_nested_ten_thousand_deep_is_refused_not_a_stack_overflow);
    RUN(ten_thousand_messages_are_refused_with_the_limit);
    RUN(a_100_mb_body_gets_413_before_it_is_read);
    RUN(chat_stream_and_json_over_http);
    RUN(keep_alives_flow_while_a_long_prefill_runs);
    RUN(a_client_that_drops_a_stream_after_3_tokens_cancels_it_and_the_server_keeps_serving);
    RUN(a_failure_mid_stream_is_an_error_frame_in_the_wire_shape);
    RUN(sixteen_concurrent_streams_each_get_their_own_complete_answer);
    RUN(a_client_that_gives_up_on_a_non_streaming_request_cancels_it);
    RUN(count_tokens_answers_with_the_rendered_prompt_length);
    RUN(metrics_count_requests_by_route_and_status_in_prometheus_text);
    RUN(metrics_need_the_key_unless_open_metrics);
    RUN(cors_preflight_allows_listed_origins_only);
    RUN(a_drain_refuses_work_for_the_model_with_503_while_probes_answer_and_running_streams_finish);
    RUN(answers_still_running_when_the_grace_ends_are_cut_with_their_wire_error_not_a_finish);
    cv_server_destroy(srv);
    fake_backend_fini(&fb);
    curl_global_cleanup();
    return test_report();
}
