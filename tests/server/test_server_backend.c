/* test_server_backend.c — the production backend (backend.c) end to end:
 * a random-weight qwen2 model (`corvid synth`'s code) with a real
 * vocabulary (testdata/vocab/ggml-vocab-gpt-2.gguf) and a real chat
 * template (testdata/templates/Qwen-QwQ-32B.jinja, whose generation prompt
 * opens <think> when thinking is on), served over HTTP by the real server:
 *   - a request with tools works on every wire, streamed and not, and the
 *     answer is well-formed (random weights: no call is expected); greedy
 *     streamed and whole answers are the same text;
 *   - a forced tool call and a JSON schema are obeyed (the grammar hook);
 *   - the reasoning opener reaches the parser: with thinking on, what the
 *     model generates is reasoning, with it off it is content;
 *   - /health, /v1/status and /metrics show the scheduler's real figures;
 *   - a conversation's second turn is served from the prefix cache and
 *     equals a cold server's answer, with speculation on or off, and after
 *     a restart from the cache file;
 *   - a repeated prompt is served from the prefix cache, and after a
 *     restart with the same cache directory the first request reports its
 *     cached tokens and generates the same tokens as uncached;
 *   - with the prefix cache off nothing is cached.
 * The template and vocabulary are read in place and written into a
 * temporary model file; nothing from testdata enters the repository. The
 * architecture is qwen2, or the one named as the first argument, with the
 * shape named as the second (default tiny) and the chat template of
 * testdata/templates named as the third (default QwQ's; CTest runs the file again over
 * qwen3moe, the same guarantees on an MoE, over gpt-oss, window layers and
 * sinks, over qwen35 and qwen35moe, hybrids whose cache resumes from state
 * snapshots, over mistral3 with its YaRN and query temperature, and over
 * gemma4's two layouts: per-layer inputs and shared K/V, and the dense FFN
 * beside experts), and the template named as the third (default
 * Qwen-QwQ-32B.jinja: deepseek2 runs with GLM-4.7-Flash's and Kimi-K2's,
 * mistral3 with Ministral 3's, gemma4 with Gemma 4's, qwen3next also with
 * Qwen3-Coder-Next's (Qwen3-Coder's XML calls), their tool-call
 * syntaxes end to end: a forced call written by the grammar in the
 * template's syntax and read back by its parser). */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include <curl/curl.h>

#include "test.h"

#include "gguf/gguf.h"
#include "model/synth.h"
#include "server/server.h"

static char model_path[512], dir_path[256];
static const char *g_arch = "qwen2", *g_shape = "tiny", *g_template = "Qwen-QwQ-32B.jinja";

/* ---- the model ---- */

/* A vocab-only GGUF with the template added (synth copies tokenizer.*). */
static bool write_vocab(const char *out)
{
    cv_err err = { 0 };
    cv_gguf *g = NULL;
    cv_buf tmpl = { 0 };
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s", g_template);
    if (cv_gguf_open(test_data("vocab/ggml-vocab-gpt-2.gguf"), &g, &err) ||
        cv_read_file(test_data(rel), &tmpl, 1u << 20, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        if (g)
            cv_gguf_close(g);
        return false;
    }
    cv_gguf_writer *w = cv_gguf_writer_create();
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        cv_str k = cv_gguf_kv_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(g, i));
    }
    cv_gguf_writer_set_str(w, "tokenizer.chat_template", (cv_str){ tmpl.data, tmpl.len });
    int rc = cv_gguf_writer_write(w, out, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    cv_gguf_writer_destroy(w);
    cv_gguf_close(g);
    cv_buf_free(&tmpl);
    return rc == 0;
}

static bool make_model(void)
{
    snprintf(dir_path, sizeof dir_path, "/tmp/corvid-test-backend-%d", (int)getpid());
    if (mkdir(dir_path, 0700) && errno != EEXIST)
        return false;
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir_path);
    snprintf(model_path, sizeof model_path, "%s/qwq-tiny.gguf", dir_path);
    if (!write_vocab(vocab))
        return false;
    cv_synth_params sp = { .arch = g_arch, .shape = g_shape, .dtype = "q8_0", .vocab = vocab, .seed = 7 };
    cv_err err = { 0 };
    if (cv_model_synth(&sp, model_path, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return false;
    }
    unlink(vocab);
    return true;
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        remove_tree(p);
        unlink(p);
    }
    closedir(d);
    rmdir(path);
}

/* ---- a served backend ---- */

typedef struct served {
    cv_server_backend *be;
    cv_server *srv;
    char base[64];
} served;

/* The backend of these options, served on a free port. */
static bool serve_opts(served *s, const cv_server_backend_opts *o)
{
    memset(s, 0, sizeof *s);
    cv_err err = { 0 };
    if (cv_server_backend_open(o, &s->be, &err)) {
        CHECK_MSG(0, "backend: %s", err.msg);
        return false;
    }
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0 };
    if (cv_server_start(&cfg, s->be, &s->srv, &err)) {
        CHECK_MSG(0, "server: %s", err.msg);
        cv_server_backend_close(s->be);
        return false;
    }
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", cv_server_port(s->srv));
    return true;
}

/* draft: the backend's draft_tokens (0: the default, speculation on; < 0: off). */
static bool serve_with(served *s, const char *cache_dir, bool no_prefix_cache, int32_t draft)
{
    cv_server_backend_opts o = { .model_path = model_path, .n_ctx = 1024, .n_parallel = 2, .n_threads = 2,
                                 .kv_bytes = 16 << 20, .batch_tokens = 64, .cache_dir = cache_dir,
                                 .no_prefix_cache = no_prefix_cache, .draft_tokens = draft };
    return serve_opts(s, &o);
}

static bool serve(served *s, const char *cache_dir, bool no_prefix_cache)
{
    return serve_with(s, cache_dir, no_prefix_cache, 0);
}

static void unserve(served *s)
{
    cv_server_destroy(s->srv);
    cv_server_backend_close(s->be); /* writes the cache file */
    memset(s, 0, sizeof *s);
}

/* ---- HTTP ---- */

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    cv_buf_append(ud, p, sz * n);
    return sz * n;
}

static long http(const served *s, const char *path, json_t *body, cv_buf *out)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (txt)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(txt);
    return status;
}

/* POSTs body (decref'd) and parses a JSON answer; NULL unless 200. */
static json_t *post_json(const served *s, const char *path, json_t *body)
{
    cv_buf out = { 0 };
    long st = http(s, path, body, &out);
    json_decref(body);
    json_t *v = st == 200 ? json_loadb(out.data ? out.data : "", out.len, 0, NULL) : NULL;
    CHECK_MSG(v, "%s: HTTP %ld %.300s", path, st, out.data ? out.data : "");
    cv_buf_free(&out);
    return v;
}

/* The "data:" payloads of an SSE answer, as a JSON array; [DONE] counted. */
static json_t *post_sse(const served *s, const char *path, json_t *body, int *n_done)
{
    cv_buf out = { 0 };
    long st = http(s, path, body, &out);
    json_decref(body);
    CHECK_MSG(st == 200, "%s (stream): HTTP %ld %.300s", path, st, out.data ? out.data : "");
    json_t *frames = json_array();
    *n_done = 0;
    char *txt = cv_xstrndup(out.data ? out.data : "", out.len);
    for (char *line = txt; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (!strcmp(line, "data: [DONE]"))
            (*n_done)++;
        else if (!strncmp(line, "data: ", 6)) {
            json_t *v = json_loads(line + 6, 0, NULL);
            CHECK_MSG(v, "%s: a frame that is not JSON: %.200s", path, line);
            if (v)
                json_array_append_new(frames, v);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(txt);
    cv_buf_free(&out);
    return frames;
}

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_t *tools_openai(void)
{
    return json_pack("[{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}]", "type", "function", "function", "name",
                     "get_weather", "description", "Weather in a city", "parameters", "type", "object",
                     "properties", "city", "type", "string", "required", "city");
}

static json_t *chat_body(const char *user, bool stream, bool tools, int thinking)
{
    json_t *b = json_pack("{s:s, s:[{s:s, s:s}], s:i, s:f, s:b}", "model", "qwq", "messages", "role", "user",
                          "content", user, "max_tokens", 12, "temperature", 0.0, "stream", stream);
    if (tools)
        json_object_set_new(b, "tools", tools_openai());
    if (thinking >= 0)
        json_object_set_new(b, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", thinking));
    if (stream)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    return b;
}

static const char *USER = "What is the weather in Paris today? Answer briefly.";

/* ---- tests ---- */

static served S;

TEST(a_request_with_tools_is_answered_well_formed_on_every_wire_streamed_or_not)
{
    /* chat completions, whole and streamed: the same greedy text */
    json_t *v = post_json(&S, "/v1/chat/completions", chat_body(USER, false, true, -1));
    json_t *ch = json_array_get(json_object_get(v, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    const char *fr = jstr(ch, "finish_reason");
    CHECK_MSG(fr && (!strcmp(fr, "stop") || !strcmp(fr, "length") || !strcmp(fr, "tool_calls")), "finish_reason %s",
              fr ? fr : "(none)");
    CHECK_EQ_STR(jstr(msg, "role"), "assistant");
    json_t *usage = json_object_get(v, "usage");
    CHECK(JSON_INT(usage, "prompt_tokens") > 20);
    CHECK(JSON_INT(usage, "completion_tokens") >= 1);
    CHECK(JSON_INT(usage, "completion_tokens") <= 12);
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc) {
        /* A call is not expected from random weights; if one came, it must be whole. */
        CHECK_EQ_STR(jstr(json_object_get(tc, "function"), "name"), "get_weather");
        CHECK(json_loads(jstr(json_object_get(tc, "function"), "arguments"), 0, NULL) != NULL);
    }
    cv_buf whole = { 0 };
    if (jstr(msg, "content"))
        cv_buf_puts(&whole, jstr(msg, "content"));
    if (jstr(msg, "reasoning_content"))
        cv_buf_puts(&whole, jstr(msg, "reasoning_content"));

    int n_done = 0;
    json_t *frames = post_sse(&S, "/v1/chat/completions", chat_body(USER, true, true, -1), &n_done);
    CHECK_EQ_INT(n_done, 1);
    cv_buf streamed = { 0 };
    bool usage_seen = false;
    json_t *f;
    json_array_foreach(frames, i, f) {
        CHECK_EQ_STR(jstr(f, "object"), "chat.completion.chunk");
        json_t *d = json_object_get(json_array_get(json_object_get(f, "choices"), 0), "delta");
        if (jstr(d, "content"))
            cv_buf_puts(&streamed, jstr(d, "content"));
        if (jstr(d, "reasoning_content"))
            cv_buf_puts(&streamed, jstr(d, "reasoning_content"));
        usage_seen |= json_is_object(json_object_get(f, "usage"));
    }
    CHECK(usage_seen);
    CHECK_MSG(whole.len == streamed.len && (!whole.len || !memcmp(whole.data, streamed.data, whole.len)),
              "greedy text differs: \"%.*s\" vs streamed \"%.*s\"", (int)whole.len, whole.data ? whole.data : "",
              (int)streamed.len, streamed.data ? streamed.data : "");
    cv_buf_free(&whole);
    cv_buf_free(&streamed);
    json_decref(frames);
    json_decref(v);

    /* responses */
    v = post_json(&S, "/v1/responses",
                  json_pack("{s:s, s:s, s:i, s:f, s:[{s:s, s:s, s:{s:s, s:{}}}]}", "model", "qwq", "input", USER,
                            "max_output_tokens", 12, "temperature", 0.0, "tools", "type", "function", "name",
                            "get_weather", "parameters", "type", "object", "properties"));
    CHECK_EQ_STR(jstr(v, "object"), "response");
    CHECK(json_array_size(json_object_get(v, "output")) >= 1);
    CHECK(JSON_INT(json_object_get(v, "usage"), "input_tokens") > 20);
    json_decref(v);
    frames = post_sse(&S, "/v1/responses",
                      json_pack("{s:s, s:s, s:i, s:b, s:[{s:s, s:s, s:{s:s, s:{}}}]}", "model", "qwq", "input", USER,
                                "max_output_tokens", 12, "stream", 1, "tools", "type", "function", "name",
                                "get_weather", "parameters", "type", "object", "properties"),
                      &n_done);
    f = json_array_get(frames, json_array_size(frames) - 1);
    const char *last = jstr(f, "type");
    CHECK_MSG(last && (!strcmp(last, "response.completed") || !strcmp(last, "response.incomplete")),
              "the responses stream ended with %s", last ? last : "(none)");
    CHECK(JSON_INT(json_object_get(json_object_get(f, "response"), "usage"), "input_tokens") > 20);
    json_decref(frames);

    /* Anthropic messages */
    json_t *atools = json_pack("[{s:s, s:s, s:{s:s, s:{s:{s:s}}}}]", "name", "get_weather", "description", "Weather",
                               "input_schema", "type", "object", "properties", "city", "type", "string");
    v = post_json(&S, "/v1/messages",
                  json_pack("{s:s, s:i, s:[{s:s, s:s}], s:O}", "model", "claude-x", "max_tokens", 12, "messages",
                            "role", "user", "content", USER, "tools", atools));
    CHECK_EQ_STR(jstr(v, "type"), "message");
    const char *sr = jstr(v, "stop_reason");
    CHECK_MSG(sr && (!strcmp(sr, "end_turn") || !strcmp(sr, "max_tokens") || !strcmp(sr, "tool_use")),
              "stop_reason %s", sr ? sr : "(none)");
    CHECK(JSON_INT(json_object_get(v, "usage"), "input_tokens") > 20);
    json_decref(v);
    frames = post_sse(&S, "/v1/messages",
                      json_pack("{s:s, s:i, s:b, s:[{s:s, s:s}], s:O}", "model", "claude-x", "max_tokens", 12,
                                "stream", 1, "messages", "role", "user", "content", USER, "tools", atools),
                      &n_done);
    CHECK_EQ_STR(jstr(json_array_get(frames, 0), "type"), "message_start");
    CHECK_EQ_STR(jstr(json_array_get(frames, json_array_size(frames) - 1), "type"), "message_stop");
    json_decref(frames);
    json_decref(atools);
}

TEST(a_forced_tool_call_and_a_json_schema_hold_on_the_real_model)
{
    /* Nothing but the grammar makes random weights call a tool or write
     * JSON: the hook steers the scheduler's sampling on this architecture
     * (drafts included: speculation is on by default). GLM's syntax spells
     * its markers in more of the gpt-2 vocabulary's tokens than Hermes's
     * JSON (measured: the call whole and </tool_call> cut at 48). */
    json_t *b = chat_body(USER, false, true, 0);
    json_object_set_new(b, "max_tokens", json_integer(96));
    json_object_set_new(b, "tool_choice", json_string("required"));
    json_t *v = post_json(&S, "/v1/chat/completions", b);
    json_t *ch = json_array_get(json_object_get(v, "choices"), 0);
    json_t *tc = json_array_get(json_object_get(json_object_get(ch, "message"), "tool_calls"), 0);
    CHECK_EQ_STR(jstr(ch, "finish_reason"), "tool_calls");
    CHECK_EQ_STR(jstr(json_object_get(tc, "function"), "name"), "get_weather");
    json_t *args = json_loads(jstr(json_object_get(tc, "function"), "arguments") ?: "", 0, NULL);
    CHECK_MSG(json_is_string(json_object_get(args, "city")), "arguments without a city: %s",
              jstr(json_object_get(tc, "function"), "arguments"));
    json_decref(args);
    json_decref(v);

    b = chat_body(USER, false, false, 0);
    json_object_set_new(b, "max_tokens", json_integer(48));
    json_object_set_new(b, "response_format",
                        json_pack("{s:s, s:{s:s, s:{s:s, s:{s:{s:s, s:i}}, s:[s]}}}", "type", "json_schema",
                                  "json_schema", "name", "answer", "schema", "type", "object", "properties", "answer",
                                  "type", "string", "maxLength", 16, "required", "answer"));
    v = post_json(&S, "/v1/chat/completions", b);
    const char *content = jstr(json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message"), "content");
    json_t *doc = json_loads(content ? content : "", 0, NULL);
    CHECK_MSG(json_is_string(json_object_get(doc, "answer")), "content is not the schema's document: %s",
              content ? content : "(none)");
    json_decref(doc);
    json_decref(v);
}

TEST(the_prompt_opened_reasoning_so_generated_text_is_reasoning_with_thinking_on)
{
    /* QwQ's generation prompt ends "<think>\n" with thinking on, and closes
     * it ("</think>") with thinking off: the backend's opener decides where
     * the same kind of random text goes (GLM-4.7-Flash's alike). Kimi-K2's,
     * Gemma 4's and Ministral 3's templates open nothing (the model writes
     * <think>, <|channel>thought or [THINK] itself), nor does Qwen3-Coder's
     * (a model that does not reason): its text is content either way. */
    const bool opens = !strstr(g_template, "Kimi") && !strstr(g_template, "gemma-4") &&
                       !strstr(g_template, "Ministral") && !strstr(g_template, "Qwen3-Coder");
    json_t *on = post_json(&S, "/v1/chat/completions", chat_body(USER, false, false, 1));
    json_t *off = post_json(&S, "/v1/chat/completions", chat_body(USER, false, false, 0));
    json_t *m_on = json_object_get(json_array_get(json_object_get(on, "choices"), 0), "message");
    json_t *m_off = json_object_get(json_array_get(json_object_get(off, "choices"), 0), "message");
    int64_t g_on = JSON_INT(json_object_get(on, "usage"), "completion_tokens");
    int64_t g_off = JSON_INT(json_object_get(off, "usage"), "completion_tokens");
    const char *r_on = jstr(m_on, "reasoning_content"), *c_on = jstr(m_on, "content");
    const char *r_off = jstr(m_off, "reasoning_content"), *c_off = jstr(m_off, "content");
    /* Random weights may end at once (an end token): then there is nothing to place. */
    if (opens)
        CHECK_MSG(g_on <= 1 || (r_on && *r_on && (!c_on || !*c_on)), "thinking on: reasoning \"%s\" content \"%s\"",
                  r_on ? r_on : "(null)", c_on ? c_on : "(null)");
    else
        CHECK_MSG(g_on <= 1 || (c_on && *c_on && (!r_on || !*r_on)), "thinking on, a template that opens no "
                  "reasoning: reasoning \"%s\" content \"%s\"", r_on ? r_on : "(null)", c_on ? c_on : "(null)");
    CHECK_MSG(g_off <= 1 || (c_off && *c_off && (!r_off || !*r_off)), "thinking off: reasoning \"%s\" content \"%s\"",
              r_off ? r_off : "(null)", c_off ? c_off : "(null)");
    CHECK_MSG(g_on > 1 || g_off > 1, "the model generated %lld and %lld tokens: nothing was placed",
              (long long)g_on, (long long)g_off);
    json_decref(on);
    json_decref(off);
}

/* ---- a conversation's second turn ---- */

static const char *SYSTEM_LONG =
    "You are a careful assistant for a team that maintains a command-line tool written in C. You answer in plain "
    "sentences, you never invent options the tool does not have, and when a question is ambiguous you say which "
    "reading you chose. Keep answers short unless asked for detail, quote file names exactly, and prefer the "
    "project's own terms: the engine, the scheduler, the prefix cache, the cache file.";

/* A greedy chat request of the conversation: the system prompt, the first
 * user message, and, given the first reply, that reply and a second user
 * message. Its text and cached prompt tokens. */
static void converse(const served *s, const char *reply1, cv_buf *text, int64_t *cached)
{
    json_t *msgs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", SYSTEM_LONG, "role", "user",
                             "content", "What does the prefix cache keep between requests?");
    if (reply1) {
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply1));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", "And after a restart?"));
    }
    json_t *b = json_pack("{s:s, s:o, s:i, s:f}", "model", "qwq", "messages", msgs, "max_tokens", 16, "temperature",
                          0.0);
    json_t *v = post_json(s, "/v1/chat/completions", b);
    json_t *m = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
    cv_buf_reset(text);
    if (jstr(m, "content"))
        cv_buf_puts(text, jstr(m, "content"));
    cv_buf_putc(text, 0);
    *cached = json_integer_value(
        json_object_get(json_object_get(json_object_get(v, "usage"), "prompt_tokens_details"), "cached_tokens"));
    json_decref(v);
}

static bool same_text(const cv_buf *a, const cv_buf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* The agent's case: a second turn extends the first (its prompt, its
 * reply, a new message). It is served from the prefix cache (on a hybrid,
 * from the first turn's snapshot of the recurrent state) and says, token
 * for token, what a cold server with speculation off says; so does a
 * server with speculation off and the cache on, and one restarted from
 * the cache file. */
TEST(a_second_turn_is_served_from_the_cache_and_equals_a_cold_server)
{
    cv_buf first = { 0 }, warm = { 0 }, cold = { 0 }, nodraft = { 0 }, restarted = { 0 };
    int64_t c1, c_warm, c_cold, c_nodraft, c_restarted;
    converse(&S, NULL, &first, &c1);
    converse(&S, first.data, &warm, &c_warm);
    CHECK_MSG(c_warm >= 64, "the second turn had %lld cached tokens", (long long)c_warm);
    served t;
    if (!serve_with(&t, NULL, true, -1))
        return;
    converse(&t, first.data, &cold, &c_cold);
    unserve(&t);
    CHECK_EQ_INT(c_cold, 0);
    CHECK_MSG(same_text(&warm, &cold), "served from the cache: \"%s\"; cold: \"%s\"", warm.data, cold.data);
    if (!serve_with(&t, NULL, false, -1))
        return;
    converse(&t, NULL, &nodraft, &c_nodraft);
    converse(&t, first.data, &nodraft, &c_nodraft);
    unserve(&t);
    CHECK(c_nodraft >= 64 && same_text(&nodraft, &cold));
    char cache[512];
    snprintf(cache, sizeof cache, "%s/turns", dir_path);
    mkdir(cache, 0700);
    if (!serve(&t, cache, false))
        return;
    converse(&t, NULL, &restarted, &c_restarted);
    unserve(&t);
    if (!serve(&t, cache, false))
        return;
    converse(&t, first.data, &restarted, &c_restarted);
    unserve(&t);
    CHECK_MSG(c_restarted >= 64, "after a restart the second turn had %lld cached tokens", (long long)c_restarted);
    CHECK_MSG(same_text(&restarted, &cold), "after a restart: \"%s\"; cold: \"%s\"", restarted.data, cold.data);
    cv_buf_free(&first);
    cv_buf_free(&warm);
    cv_buf_free(&cold);
    cv_buf_free(&nodraft);
    cv_buf_free(&restarted);
}

static double metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, name, n) && p[n] == ' ')
            return atof(p + n + 1);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

/* Waits (at most 5 s) until every submitted request has finished and the
 * scheduler took no step for 100 ms: a reply reaches its client before the
 * engine thread's last step of it is done, and on a loaded machine that
 * step may land between two reads of the figures below. */
static void wait_idle(const served *s)
{
    int64_t last_steps = -1;
    for (int i = 0; i < 50; i++) {
        cv_buf out = { 0 };
        http(s, "/v1/status", NULL, &out);
        json_t *st = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
        json_t *tot = json_object_get(st, "totals");
        int64_t steps = json_integer_value(json_object_get(tot, "steps"));
        bool idle = json_integer_value(json_object_get(tot, "submitted")) ==
                        json_integer_value(json_object_get(tot, "finished")) &&
                    steps == last_steps;
        last_steps = steps;
        json_decref(st);
        cv_buf_free(&out);
        if (idle)
            return;
        usleep(100 * 1000);
    }
}

TEST(health_status_and_metrics_show_the_schedulers_figures_after_requests)
{
    cv_buf out = { 0 };
    wait_idle(&S);
    CHECK_EQ_INT(http(&S, "/health", NULL, &out), 200);
    json_t *h = json_loadb(out.data, out.len, 0, NULL);
    CHECK(json_is_true(json_object_get(h, "model_loaded")));
    CHECK_EQ_INT(JSON_INT(h, "queue_depth"), 0);
    CHECK_EQ_INT(JSON_INT(h, "running"), 0);
    json_decref(h);
    cv_buf_reset(&out);

    /* /v1/models says what the model is: for an MoE, its experts and the
     * parameters one token uses. */
    CHECK_EQ_INT(http(&S, "/v1/models", NULL, &out), 200);
    json_t *ml = json_loadb(out.data, out.len, 0, NULL), *mo = json_array_get(json_object_get(ml, "data"), 0);
    CHECK_EQ_STR(jstr(mo, "architecture"), g_arch);
    const int64_t kv_per_token = json_integer_value(json_object_get(mo, "kv_bytes_per_token"));
    json_t *moe = json_object_get(mo, "moe");
    int64_t params = json_integer_value(json_object_get(mo, "parameters"));
    CHECK(params > 1000000);
    const cv_arch *arch = cv_arch_find(cv_str_of(g_arch));
    cv_model *m = NULL;
    CHECK(cv_model_open(model_path, NULL, &m, NULL) == 0);
    if (m && m->hp.n_expert > 0) { /* the tiny shapes' 8 experts, 2 used */
        CHECK_EQ_INT(json_integer_value(json_object_get(moe, "experts")), 8);
        CHECK_EQ_INT(json_integer_value(json_object_get(moe, "experts_used")), 2);
        int64_t active = json_integer_value(json_object_get(moe, "active_parameters"));
        CHECK_MSG(active > 0 && active < params, "active %lld of %lld", (long long)active, (long long)params);
    } else {
        CHECK(moe == NULL);
    }
    json_decref(ml);
    cv_buf_reset(&out);

    CHECK_EQ_INT(http(&S, "/v1/status", NULL, &out), 200);
    json_t *st = json_loadb(out.data, out.len, 0, NULL);
    json_t *tot = json_object_get(st, "totals"), *kv = json_object_get(st, "kv"), *cache = json_object_get(st, "cache");
    CHECK_EQ_STR(jstr(st, "object"), "status");
    CHECK(json_array_size(json_object_get(st, "running")) == 0);
    CHECK(JSON_INT(tot, "finished") >= 8); /* the requests of the tests above */
    CHECK(JSON_INT(tot, "generated_tokens") >= 8);
    CHECK(JSON_INT(tot, "computed_tokens") > 20);
    CHECK_EQ_INT(JSON_INT(tot, "batch_tokens"), 64);
    /* 16 MiB of f32 KV: for the tiny shape's attention layers, 2 x 4 heads
     * x 32 x 4 bytes = 1 KiB a position each (2 layers, or 1 in a hybrid);
     * latent attention keeps its latent row, 64 + 16 floats = 320 bytes a
     * position and layer, and no per-head K/V (deepseek2); for another
     * shape than tiny, 2 x its heads x 4 bytes of each layer that keeps its
     * own K/V (gemma4's shared layers keep none) */
    const int64_t block_bytes = JSON_INT(kv, "block_bytes");
    const int64_t n_blocks = JSON_INT(kv, "blocks");
    const bool hybrid = arch && arch->hybrid, mla = arch && arch->mixer == CV_MIXER_MLA;
    const cv_model_shape *tiny = cv_model_shape_find("tiny");
    const int64_t per_layer = mla ? (int64_t)(tiny->n_lora_kv + tiny->mla_rope) * 4
                                  : 2 * (int64_t)tiny->n_head_kv * tiny->head_dim * 4;
    CHECK_EQ_INT(per_layer, mla ? 320 : 1024);
    int64_t pos_bytes = (hybrid ? 1 : 2) * per_layer;
    if (m && strcmp(g_shape, "tiny")) {
        pos_bytes = 0;
        for (int32_t il = 0; il < m->hp.n_layer; il++)
            if (m->layers[il].mixer == CV_MIXER_ATTN && m->layers[il].kv_src == il)
                pos_bytes += 2 * m->layers[il].n_head_kv * m->layers[il].head_dim * 4;
    }
    if (m)
        cv_model_close(m);
    CHECK_EQ_INT(block_bytes, pos_bytes * CV_KV_BLOCK);
    CHECK_EQ_INT(kv_per_token, block_bytes / CV_KV_BLOCK); /* /v1/models says the same */
    CHECK_EQ_INT(n_blocks, block_bytes ? (16 << 20) / block_bytes : 0);
    CHECK(JSON_INT(kv, "used") > 0); /* the prefix cache keeps finished prompts */
    /* a hybrid's sequences also hold a recurrent state, and its cache snapshots of it */
    const int64_t state_bytes = JSON_INT(kv, "state_bytes_per_sequence");
    CHECK(hybrid ? state_bytes > 0 : state_bytes == 0);
    CHECK(hybrid ? JSON_INT(cache, "snapshot_hits") >= 1 : JSON_INT(cache, "snapshots") == 0);
    CHECK(json_is_true(json_object_get(cache, "enabled")));
    CHECK(JSON_INT(cache, "hits") >= 1); /* the conversation's second turns */
    CHECK(JSON_INT(cache, "blocks_in_tree") > 0);
    int64_t kv_used = JSON_INT(kv, "used");
    int64_t hit_tokens = JSON_INT(cache, "hit_tokens");
    /* speculation is on by default; what it drafted and had taken add up */
    json_t *spec = json_object_get(st, "speculation");
    CHECK_EQ_INT(JSON_INT(spec, "max_draft_tokens"), CV_SCHED_DRAFT_DEFAULT);
    int64_t drafted = JSON_INT(spec, "draft_tokens");
    int64_t taken = JSON_INT(spec, "accepted_tokens");
    CHECK(taken >= 0 && taken <= drafted);
    int64_t declined = JSON_INT(spec, "declined_tokens");
    CHECK(declined >= 0);
    /* decode steps were timed (the costs drafts are weighed by) */
    CHECK(JSON_NUM(spec, "step_ms") > 0);
    CHECK(json_is_real(json_object_get(spec, "attention_ms_per_1k_positions")));
    json_decref(st);
    cv_buf_reset(&out);

    CHECK_EQ_INT(http(&S, "/metrics", NULL, &out), 200);
    cv_buf_putc(&out, 0);
    CHECK_EQ_INT(metric(out.data, "corvid_kv_blocks_used"), kv_used);
    CHECK(metric(out.data, "corvid_kv_blocks_free") > 0);
    CHECK_EQ_INT(metric(out.data, "corvid_kv_blocks_total"), n_blocks);
    CHECK_EQ_INT(metric(out.data, "corvid_state_bytes_per_sequence"), state_bytes);
    CHECK(metric(out.data, "corvid_sched_steps_total") > 8);
    CHECK_EQ_INT(metric(out.data, "corvid_prefix_cache_hit_tokens_total"), hit_tokens);
    CHECK(metric(out.data, "corvid_cached_prompt_tokens_total") > 0);
    CHECK_EQ_INT(metric(out.data, "corvid_queue_depth"), 0);
    CHECK_EQ_INT(metric(out.data, "corvid_spec_draft_tokens_total"), drafted);
    CHECK_EQ_INT(metric(out.data, "corvid_spec_accepted_tokens_total"), taken);
    CHECK_EQ_INT(metric(out.data, "corvid_spec_declined_tokens_total"), declined);
    cv_buf_free(&out);
}

/* One greedy chat request: its text and cached prompt tokens; and the same
 * over Anthropic (cache_read_input_tokens). */
static void ask(const served *s, const char *user, cv_buf *text, int64_t *cached, int64_t *cached_anthropic)
{
    json_t *b = chat_body(user, false, false, -1);
    json_t *v = post_json(s, "/v1/chat/completions", b);
    json_t *m = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
    cv_buf_reset(text);
    if (jstr(m, "content"))
        cv_buf_puts(text, jstr(m, "content"));
    *cached = JSON_INT(json_object_get(json_object_get(v, "usage"), "prompt_tokens_details"), "cached_tokens");
    json_decref(v);
    if (cached_anthropic) {
        v = post_json(s, "/v1/messages",
                      json_pack("{s:s, s:i, s:[{s:s, s:s}]}", "model", "claude-x", "max_tokens", 4, "messages", "role",
                                "user", "content", user));
        *cached_anthropic = JSON_INT(json_object_get(v, "usage"), "cache_read_input_tokens");
        json_decref(v);
    }
}

/* The sequence-memory figures of one server, from /v1/status and /metrics. */
typedef struct mem_figures {
    bool present;          /* every field and metric was there, a number */
    int64_t recurrent_layers, state_bytes, snapshot_bytes, snapshots, snapshot_blocks, taken, hits, recomputed;
    int64_t m_state_bytes, m_snapshots, m_snapshot_blocks, m_taken, m_hits, m_recomputed;
} mem_figures;

static int64_t field(json_t *o, const char *key, bool *present)
{
    json_t *v = json_object_get(o, key);
    *present = *present && json_is_integer(v);
    return json_integer_value(v);
}

static int64_t metric_field(const char *text, const char *name, bool *present)
{
    const double v = metric(text, name);
    *present = *present && v >= 0;
    return (int64_t)v;
}

static mem_figures mem_figures_of(const served *s)
{
    mem_figures f = { .present = true };
    wait_idle(s);
    cv_buf out = { 0 };
    CHECK_EQ_INT(http(s, "/v1/status", NULL, &out), 200);
    json_t *st = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
    json_t *kv = json_object_get(st, "kv"), *cache = json_object_get(st, "cache");
    json_t *spec = json_object_get(st, "speculation");
    f.recurrent_layers = field(kv, "recurrent_layers", &f.present);
    f.state_bytes = field(kv, "state_bytes_per_sequence", &f.present);
    f.snapshot_bytes = field(kv, "snapshot_bytes", &f.present);
    f.snapshots = field(cache, "snapshots", &f.present);
    f.snapshot_blocks = field(cache, "snapshot_blocks", &f.present);
    f.taken = field(cache, "snapshots_taken", &f.present);
    f.hits = field(cache, "snapshot_hits", &f.present);
    f.recomputed = field(spec, "recomputed_tokens", &f.present);
    json_decref(st);
    cv_buf_reset(&out);
    CHECK_EQ_INT(http(s, "/metrics", NULL, &out), 200);
    cv_buf_putc(&out, 0);
    f.m_state_bytes = metric_field(out.data, "corvid_state_bytes_per_sequence", &f.present);
    f.m_snapshots = metric_field(out.data, "corvid_prefix_cache_snapshots", &f.present);
    f.m_snapshot_blocks = metric_field(out.data, "corvid_prefix_cache_snapshot_blocks", &f.present);
    f.m_taken = metric_field(out.data, "corvid_prefix_cache_snapshots_taken_total", &f.present);
    f.m_hits = metric_field(out.data, "corvid_prefix_cache_snapshot_hits_total", &f.present);
    f.m_recomputed = metric_field(out.data, "corvid_spec_recomputed_tokens_total", &f.present);
    cv_buf_free(&out);
    return f;
}

/* /v1/status and /metrics report the recurrent state a sequence holds,
 * the snapshots the prefix cache holds and takes, and its snapshot hits,
 * on every model (zero without recurrent layers) and in agreement; on a
 * hybrid, a first turn takes snapshots and a second turn resumes from one:
 * the hit counts move by one and the cached tokens are reported. */
TEST(sequence_memory_figures_are_reported_and_move_with_a_snapshot_hit)
{
    served t;
    if (!serve(&t, NULL, false))
        return;
    const cv_arch *arch = cv_arch_find(cv_str_of(g_arch));
    const bool hybrid = arch && arch->hybrid;
    mem_figures f[3];
    cv_buf first = { 0 }, second = { 0 };
    int64_t c1, c2;
    f[0] = mem_figures_of(&t);
    converse(&t, NULL, &first, &c1);
    f[1] = mem_figures_of(&t);
    converse(&t, first.data, &second, &c2);
    f[2] = mem_figures_of(&t);
    unserve(&t);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(f[i].present, "reading %d: a sequence-memory field or metric is missing", i);
        CHECK_EQ_INT(f[i].m_state_bytes, f[i].state_bytes);
        CHECK_EQ_INT(f[i].m_snapshots, f[i].snapshots);
        CHECK_EQ_INT(f[i].m_snapshot_blocks, f[i].snapshot_blocks);
        CHECK_EQ_INT(f[i].m_taken, f[i].taken);
        CHECK_EQ_INT(f[i].m_hits, f[i].hits);
        CHECK_EQ_INT(f[i].m_recomputed, f[i].recomputed);
        CHECK_EQ_INT(f[i].recurrent_layers, hybrid ? 1 : 0);
        CHECK(hybrid ? f[i].state_bytes > 0 : f[i].state_bytes == 0);
    }
    CHECK(f[0].snapshots == 0 && f[0].taken == 0 && f[0].hits == 0);
    CHECK(c1 == 0 && c2 >= 64);
    if (hybrid) {
        CHECK(f[1].taken >= 1 && f[1].snapshots >= 1 && f[1].snapshot_blocks >= f[1].snapshots);
        CHECK(f[1].snapshot_bytes >= f[1].snapshots * f[1].state_bytes);
        CHECK_EQ_INT(f[1].hits, 0);
        CHECK_EQ_INT(f[2].hits, 1); /* the second turn resumed from the first's snapshot */
        CHECK(f[2].taken >= f[1].taken);
        printf("  %lld bytes of state a sequence; after turn 1: %lld snapshots (%lld blocks), after turn 2: %lld "
               "hit, %lld cached tokens\n", (long long)f[2].state_bytes, (long long)f[1].snapshots,
               (long long)f[1].snapshot_blocks, (long long)f[2].hits, (long long)c2);
    } else {
        for (int i = 0; i < 3; i++)
            CHECK(f[i].snapshots == 0 && f[i].snapshot_bytes == 0 && f[i].taken == 0 && f[i].hits == 0 &&
                  f[i].recomputed == 0);
    }
    cv_buf_free(&first);
    cv_buf_free(&second);
}

TEST(a_restart_with_the_same_cache_dir_serves_the_first_repeated_prompt_from_the_cache)
{
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", dir_path);
    mkdir(cache, 0700);
    /* long enough (over 64 tokens) for a hybrid to keep a snapshot of it */
    const char *prompt = "Tell me a story about a fox who learns to read the weather from the clouds over the hills, "
                         "a fox who lives near a river that floods every spring, who watches the shepherds and the "
                         "birds and the smoke from the chimneys, and who finally understands why the swallows fly low "
                         "before the rain comes over the valley from the sea.";
    cv_buf cold = { 0 }, again = { 0 }, warm = { 0 }, nocache = { 0 };
    int64_t c_cold, c_again, c_warm, c_warm_a, c_none;
    served s;
    if (!serve(&s, cache, false))
        return;
    ask(&s, prompt, &cold, &c_cold, NULL);
    ask(&s, prompt, &again, &c_again, NULL);
    unserve(&s); /* SIGTERM's path: the backend closes and writes the file */
    CHECK_EQ_INT(c_cold, 0);
    CHECK_MSG(c_again >= 16, "a repeated prompt had %lld cached tokens", (long long)c_again);
    int n_files = 0;
    DIR *d = opendir(cache);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n_files += strstr(e->d_name, ".cvkv") != NULL;
    if (d)
        closedir(d);
    CHECK_EQ_INT(n_files, 1);

    if (!serve(&s, cache, false))
        return;
    ask(&s, prompt, &warm, &c_warm, &c_warm_a);
    unserve(&s);
    CHECK_MSG(c_warm >= 16, "after a restart the prompt had %lld cached tokens", (long long)c_warm);
    CHECK_MSG(c_warm_a > 0, "Anthropic cache_read_input_tokens %lld after a restart", (long long)c_warm_a);
    CHECK_MSG(cold.len == warm.len && (!cold.len || !memcmp(cold.data, warm.data, cold.len)),
              "cached and uncached greedy text differ: \"%.*s\" vs \"%.*s\"", (int)cold.len, cold.data ? cold.data : "",
              (int)warm.len, warm.data ? warm.data : "");
    CHECK(again.len == cold.len && (!cold.len || !memcmp(cold.data, again.data, cold.len)));

    /* --no-prefix-cache: the same directory, nothing looked up */
    if (!serve(&s, cache, true))
        return;
    ask(&s, prompt, &nocache, &c_none, NULL);
    ask(&s, prompt, &nocache, &c_none, NULL);
    unserve(&s);
    CHECK_EQ_INT(c_none, 0);
    CHECK(nocache.len == cold.len && (!cold.len || !memcmp(cold.data, nocache.data, cold.len)));
    cv_buf_free(&cold);
    cv_buf_free(&again);
    cv_buf_free(&warm);
    cv_buf_free(&nocache);
}

/* The bytes of f32 KV a position of the test model takes (0: the model
 * does not open), and its hyper-parameters. */
static int64_t kv_bytes_per_position(cv_hparams *hp)
{
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(model_path, NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return 0;
    }
    const int64_t per_pos = (int64_t)(cv_engine_kv_block_bytes(m, CV_GGML_F32) / CV_KV_BLOCK);
    *hp = m->hp;
    cv_model_close(m);
    return per_pos;
}

TEST(a_kv_memory_smaller_than_the_context_is_refused_with_both_numbers)
{
    /* room for 512 positions of f32 KV, whatever the model's attention layers */
    cv_hparams hp;
    const int64_t kv_bytes = 512 * kv_bytes_per_position(&hp);
    if (kv_bytes == 0)
        return;
    cv_err err = { 0 };
    cv_server_backend_opts o = { .model_path = model_path, .n_ctx = 1024, .n_threads = 1, .kv_bytes = kv_bytes };
    cv_server_backend *be = NULL;
    int rc = cv_server_backend_open(&o, &be, &err);
    CHECK_EQ_INT(rc, CV_EINVAL);
    CHECK_MSG(strstr(err.msg, "1024") && strstr(err.msg, "512"), "message: %s", err.msg);
    if (!rc)
        cv_server_backend_close(be);
}

/* The start-up line states the pool as what it is: the default pool of a
 * tiny model is millions of positions (GiBs) mapped without reserve, of
 * which nothing is committed until sequences write it; the line gives the
 * bytes a position and a context take, and the bound as mapped memory. */
TEST(the_kv_start_up_line_says_what_is_committed_not_only_the_mapping)
{
    cv_hparams hp;
    const int64_t per_pos = kv_bytes_per_position(&hp);
    if (per_pos == 0)
        return;
    char log_path[] = "/tmp/corvid_kvlog_XXXXXX";
    const int fd = mkstemp(log_path), saved = dup(2);
    CHECK(fd >= 0 && saved >= 0);
    const cv_log_level level = cv_log_get_level();
    cv_log_set_level(CV_LOG_INFO);
    fflush(stderr);
    dup2(fd, 2);
    cv_err err = { 0 };
    cv_server_backend_opts o = { .model_path = model_path, .n_ctx = 512, .n_threads = 1, .kv_bytes = -1,
                                 .kv_type = CV_GGML_F32 };
    cv_server_backend *be = NULL;
    const int rc = cv_server_backend_open(&o, &be, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cv_log_set_level(level);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (be)
        cv_server_backend_close(be);
    cv_buf log = { 0 };
    CHECK(cv_read_file(log_path, &log, 1 << 20, NULL) == 0);
    cv_buf_putc(&log, 0);
    const char *line = strstr(log.data, "KV cache (f32): ");
    char want[128];
    snprintf(want, sizeof want, "%.1f KiB a position", per_pos / 1024.0);
    CHECK_MSG(line && strstr(line, want), "no \"%s\" in: %s", want, log.data);
    snprintf(want, sizeof want, "(%.1f MiB a full context of 512)", per_pos * 512.0 / 1048576.0);
    CHECK_MSG(line && strstr(line, want), "no \"%s\" in: %s", want, log.data);
    /* the first sequence's run of blocks (1,024 positions) is committed at load */
    snprintf(want, sizeof want, "mapped, %.1f MiB committed at load: the first sequence's)",
             per_pos * 1024.0 / 1048576.0);
    CHECK_MSG(line && strstr(line, want), "no \"%s\" in: %s", want, log.data);
    cv_buf_free(&log);
    close(fd);
    unlink(log_path);
}

/* --kv-memory counts what a position keeps: a budget of 1100 positions of
 * this model's cache serves a 1024-token context and a conversation that
 * goes deep into it, its prefix cached between turns, within the budget.
 * With latent attention (deepseek2) a position keeps one latent row a
 * layer, 64 + 16 floats, and the same bytes hold 8 x fewer positions of
 * per-head K/V (8 heads of 48 + 32): such accounting would refuse the
 * context outright. */
TEST(a_deep_conversation_runs_in_the_kv_memory_its_positions_take)
{
    cv_hparams hp;
    const int64_t per_pos = kv_bytes_per_position(&hp);
    if (per_pos == 0)
        return;
    if (hp.n_recurrent > 0) {
        /* a hybrid resumes at its snapshots and they take blocks too:
         * sequence_memory_figures_are_reported_... counts those */
        printf("  %s: a hybrid, whose turns resume at state snapshots (counted by the test above)\n", g_arch);
        return;
    }
    if (hp.n_lora_kv > 0) {
        const int64_t latent = (int64_t)hp.n_layer * (hp.n_lora_kv + hp.n_rot) * 4;
        const int64_t per_head = (int64_t)hp.n_layer * hp.n_head * (hp.k_mla + hp.v_mla) * 4;
        CHECK_EQ_INT(per_pos, latent);
        CHECK_MSG(1100 * per_pos / per_head < 1024, "per-head K/V would hold %lld positions of the budget",
                  (long long)(1100 * per_pos / per_head));
    }
    served t;
    cv_server_backend_opts o = { .model_path = model_path, .n_ctx = 1024, .n_parallel = 1, .n_threads = 2,
                                 .kv_bytes = 1100 * per_pos, .batch_tokens = 256 };
    if (!serve_opts(&t, &o))
        return;
    /* four turns of two paragraphs each, each turn's prompt the
     * conversation so far: ~250 to ~900 tokens of the gpt-2 vocabulary */
    cv_buf convo = { 0 };
    int64_t prompt = 0, cached = 0;
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "system", "content", SYSTEM_LONG);
    for (int turn = 0; turn < 4; turn++) {
        cv_buf_reset(&convo);
        for (int i = 0; i < 2; i++)
            cv_buf_printf(&convo, "Turn %d, part %d: %s ", turn, i, SYSTEM_LONG);
        json_array_append_new(msgs, json_pack("{s:s, s:s#}", "role", "user", "content", convo.data, convo.len));
        json_t *v = post_json(&t, "/v1/chat/completions",
                              json_pack("{s:s, s:O, s:i, s:f}", "model", "qwq", "messages", msgs, "max_tokens", 8,
                                        "temperature", 0.0));
        json_t *u = json_object_get(v, "usage"), *msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0),
                                                                        "message");
        prompt = JSON_INT(u, "prompt_tokens");
        cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
        if (turn > 0)
            CHECK_MSG(cached >= prompt / 2, "turn %d: %lld of %lld prompt tokens cached", turn, (long long)cached,
                      (long long)prompt);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content",
                                              jstr(msg, "content") ? jstr(msg, "content") : ""));
        json_decref(v);
    }
    CHECK_MSG(prompt > 700 && prompt < 1024, "the last turn's prompt: %lld tokens", (long long)prompt);
    cv_buf out = { 0 };
    CHECK_EQ_INT(http(&t, "/v1/status", NULL, &out), 200);
    json_t *st = json_loadb(out.data, out.len, 0, NULL), *kv = json_object_get(st, "kv");
    const int64_t block_bytes = JSON_INT(kv, "block_bytes"), blocks = JSON_INT(kv, "blocks");
    printf("  %s: %lld bytes a position, %lld blocks in %lld bytes of KV memory, %lld used after a %lld-token "
           "turn\n", g_arch, (long long)per_pos, (long long)blocks, (long long)o.kv_bytes,
           (long long)JSON_INT(kv, "used"), (long long)prompt);
    CHECK_EQ_INT(block_bytes, per_pos * CV_KV_BLOCK);
    CHECK_EQ_INT(blocks, 1100 / CV_KV_BLOCK);
    CHECK(JSON_INT(kv, "used") * block_bytes <= o.kv_bytes && JSON_INT(kv, "used") >= prompt / CV_KV_BLOCK);
    json_decref(st);
    json_decref(msgs);
    cv_buf_free(&out);
    cv_buf_free(&convo);
    unserve(&t);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_arch = argv[1];
    if (argc > 2)
        g_shape = argv[2];
    if (argc > 3)
        g_template = argv[3];
    test_require_data();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!make_model()) {
        fprintf(stderr, "could not build the test model\n");
        remove_tree(dir_path);
        return 1;
    }
    if (serve(&S, NULL, false)) {
        RUN(a_request_with_tools_is_answered_well_formed_on_every_wire_streamed_or_not);
        RUN(a_forced_tool_call_and_a_json_schema_hold_on_the_real_model);
        RUN(the_prompt_opened_reasoning_so_generated_text_is_reasoning_with_thinking_on);
        RUN(a_second_turn_is_served_from_the_cache_and_equals_a_cold_server);
        RUN(health_status_and_metrics_show_the_schedulers_figures_after_requests);
        unserve(&S);
    }
    RUN(sequence_memory_figures_are_reported_and_move_with_a_snapshot_hit);
    RUN(a_restart_with_the_same_cache_dir_serves_the_first_repeated_prompt_from_the_cache);
    RUN(a_kv_memory_smaller_than_the_context_is_refused_with_both_numbers);
    RUN(the_kv_start_up_line_says_what_is_committed_not_only_the_mapping);
    RUN(a_deep_conversation_runs_in_the_kv_memory_its_positions_take);
    remove_tree(dir_path);
    curl_global_cleanup();
    return test_report();
}
