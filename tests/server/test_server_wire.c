/* test_server_wire.c — the wire files' translation, without HTTP:
 *   - every recorded client request (testdata/clients) becomes a neutral
 *     request with the properties CLIENTS.md calls out (billing line gone,
 *     system messages folded, namespaces flattened, tool results as tool
 *     messages, text-part arrays as strings);
 *   - every top-level and first-message field of every fixture, replaced by
 *     a value of each wrong type, is either accepted or refused with a
 *     message, never a crash;
 *   - neutral event sequences (the fake backend's substituted output through
 *     the real pipeline) encode to each wire's documented frames;
 *   - the error tables give each wire's status and shape;
 *   - the response store keeps the most recent entries. */
#include <dirent.h>

#include "test.h"

#include "fake_backend.h"
#include "server/api.h"
#include "server/request.h"

/* ---- fixtures ---- */

typedef int (*parse_fn)(json_t *body, cv_chat_request *r, cv_err *err);

static int parse_chat(json_t *b, cv_chat_request *r, cv_err *e) { return cv_openai_chat_parse(b, r, e); }
static int parse_resp(json_t *b, cv_chat_request *r, cv_err *e) { return cv_openai_responses_parse(b, NULL, r, e); }
static int parse_msgs(json_t *b, cv_chat_request *r, cv_err *e) { return cv_anthropic_parse(b, false, r, e); }
static int parse_count(json_t *b, cv_chat_request *r, cv_err *e) { return cv_anthropic_parse(b, true, r, e); }

static parse_fn parser_for(const char *path)
{
    if (!strcmp(path, "/v1/chat/completions")) return parse_chat;
    if (!strcmp(path, "/v1/responses")) return parse_resp;
    if (!strcmp(path, "/v1/messages")) return parse_msgs;
    if (!strcmp(path, "/v1/messages/count_tokens")) return parse_count;
    return NULL;
}

typedef void (*fixture_fn)(const char *file, json_t *rec, parse_fn fn, void *ud);

static int for_each_fixture(fixture_fn cb, void *ud)
{
    int n = 0;
    const char *root = test_data("clients");
    char rootbuf[4096];
    snprintf(rootbuf, sizeof rootbuf, "%s", root);
    DIR *d = opendir(rootbuf);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char sub[4600];
        snprintf(sub, sizeof sub, "%s/%s", rootbuf, de->d_name);
        DIR *d2 = opendir(sub);
        if (!d2)
            continue;
        struct dirent *f;
        while ((f = readdir(d2))) {
            size_t l = strlen(f->d_name);
            if (l < 5 || strcmp(f->d_name + l - 5, ".json"))
                continue;
            char path[5000];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            json_t *rec = json_load_file(path, 0, NULL);
            const char *p = json_string_value(json_object_get(rec, "path"));
            parse_fn fn = p ? parser_for(p) : NULL;
            if (fn && json_is_object(json_object_get(rec, "body"))) {
                cb(path, rec, fn, ud);
                n++;
            }
            json_decref(rec);
        }
        closedir(d2);
    }
    closedir(d);
    return n;
}

static bool any_content_contains(json_t *msgs, const char *needle)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *c = json_string_value(json_object_get(m, "content"));
        if (c && strstr(c, needle))
            return true;
    }
    return false;
}

static void check_fixture(const char *file, json_t *rec, parse_fn fn, void *ud)
{
    json_t *body = json_object_get(rec, "body");
    const char *path = json_string_value(json_object_get(rec, "path"));
    cv_chat_request r;
    cv_chat_request_init(&r);
    cv_err err = { 0 };
    int rc = fn(body, &r, &err);
    CHECK_MSG(rc == 0, "%s: refused: %s", file, err.msg);
    if (rc) {
        cv_chat_request_fini(&r);
        return;
    }
    size_t i;
    json_t *m;
    /* Neutral shape: known roles, string content (never null: templates
     * use `in` on it), system only first, arguments as objects. */
    json_array_foreach(r.messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        CHECK_MSG(role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                           !strcmp(role, "tool")),
                  "%s: messages[%zu] role %s", file, i, role ? role : "(none)");
        if (role && !strcmp(role, "system"))
            CHECK_MSG(i == 0 || !strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/responses"),
                      "%s: a system message at %zu (must be folded into the first)", file, i);
        json_t *c = json_object_get(m, "content");
        CHECK_MSG(json_is_string(c), "%s: messages[%zu] content is not a string", file, i);
        size_t k;
        json_t *tc;
        json_array_foreach(json_object_get(m, "tool_calls"), k, tc)
            CHECK_MSG(json_is_object(json_object_get(json_object_get(tc, "function"), "arguments")),
                      "%s: messages[%zu].tool_calls[%zu] arguments not an object", file, i, k);
    }
    CHECK_MSG(!any_content_contains(r.messages, "x-anthropic-billing-header"), "%s: billing header line kept", file);
    /* Tool counts: every function tool kept, hosted ones dropped, namespaces flattened. */
    size_t want_tools = 0;
    json_t *t;
    json_array_foreach(json_object_get(body, "tools"), i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || !strcmp(type, "function") || !strcmp(type, "custom"))
            want_tools++;
        else if (!strcmp(type, "namespace"))
            want_tools += json_array_size(json_object_get(t, "tools"));
    }
    CHECK_MSG(json_array_size(r.tools) == want_tools, "%s: %zu tools, want %zu", file, json_array_size(r.tools),
              want_tools);
    /* A tool result in the request shows up as a tool message. */
    char *dump = json_dumps(body, 0);
    bool has_result = strstr(dump, "\"tool_result\"") || strstr(dump, "\"function_call_output\"") ||
                      strstr(dump, "\"role\": \"tool\"") || strstr(dump, "\"role\":\"tool\"");
    free(dump);
    bool tool_msg = false;
    json_array_foreach(r.messages, i, m)
        tool_msg |= !strcmp(json_string_value(json_object_get(m, "role")), "tool");
    CHECK_MSG(has_result == tool_msg, "%s: tool result in request %d, tool message %d", file, has_result, tool_msg);
    (*(int *)ud)++;
    cv_chat_request_fini(&r);
}

TEST(every_recorded_client_request_translates_to_the_neutral_shape)
{
    int ok = 0;
    int n = for_each_fixture(check_fixture, &ok);
    CHECK_MSG(n >= 30, "only %d client fixtures found", n);
    CHECK_EQ_INT(ok, n);
}

TEST(claude_code_system_prompt_loses_billing_line_and_gains_folded_system)
{
    json_t *rec = json_load_file(test_data("clients/claude-code/002-v1_messages.json"), 0, NULL);
    CHECK(rec != NULL);
    json_t *body = json_object_get(rec, "body");
    cv_chat_request r;
    cv_chat_request_init(&r);
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_anthropic_parse(body, false, &r, &err), 0);
    json_t *sys = json_array_get(r.messages, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(sys, "role")), "system");
    const char *s = json_string_value(json_object_get(sys, "content"));
    CHECK(s && !strncmp(s, "You are a Claude agent", 22));
    /* The mid-conversation system message (index 1 in the request) is part
     * of the system prompt now. */
    const char *mid = json_string_value(
        json_object_get(json_array_get(json_object_get(body, "messages"), 1), "content"));
    if (!mid) {
        json_t *blocks = json_object_get(json_array_get(json_object_get(body, "messages"), 1), "content");
        mid = json_string_value(json_object_get(json_array_get(blocks, 0), "text"));
    }
    CHECK(mid && s && strstr(s, mid) != NULL);
    CHECK_EQ_INT(r.max_tokens, 32000); /* kept; clamped to the context at submit */
    CHECK(r.stream);
    cv_chat_request_fini(&r);
    json_decref(rec);
}

TEST(codex_turn_two_carries_the_call_and_its_output)
{
    json_t *rec = json_load_file(test_data("clients/codex/002-v1_responses.json"), 0, NULL);
    CHECK(rec != NULL);
    cv_chat_request r;
    cv_chat_request_init(&r);
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_openai_responses_parse(json_object_get(rec, "body"), NULL, &r, &err), 0);
    size_t n = json_array_size(r.messages);
    json_t *call_msg = json_array_get(r.messages, n - 2), *out = json_array_get(r.messages, n - 1);
    CHECK_EQ_STR(json_string_value(json_object_get(call_msg, "role")), "assistant");
    json_t *call = json_array_get(json_object_get(call_msg, "tool_calls"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "exec_command");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_object_get(call, "function"), "arguments"), "cmd")),
                 "ls -la");
    CHECK_EQ_STR(json_string_value(json_object_get(out, "role")), "tool");
    CHECK_EQ_STR(json_string_value(json_object_get(out, "tool_call_id")), json_string_value(json_object_get(call, "id")));
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(r.messages, 0), "role")), "system");
    cv_chat_request_fini(&r);
    json_decref(rec);
}

/* ---- wrong types everywhere ---- */

static void try_all_types(const char *file, json_t *body, json_t *target, parse_fn fn, int *n)
{
    const char *wrong[] = { "null", "1", "-7.5", "\"x\"", "[]", "{}", "true", "[1,\"a\",null]", "{\"type\":5}",
                            "1e308", "\"\\u0000\"" };
    const char *key;
    json_t *orig;
    void *tmp;
    json_object_foreach_safe(target, tmp, key, orig) {
        json_incref(orig);
        for (size_t w = 0; w < CV_ARRAY_LEN(wrong); w++) {
            json_object_set_new(target, key, json_loads(wrong[w], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL));
            cv_chat_request r;
            cv_chat_request_init(&r);
            cv_err err = { 0 };
            int rc = fn(body, &r, &err);
            CHECK_MSG(rc == 0 || (rc < 0 && err.msg[0]), "%s: %s=%s: error %d without a message", file, key,
                      wrong[w], rc);
            cv_chat_request_fini(&r);
            (*n)++;
        }
        json_object_set_new(target, key, orig);
    }
}

static void hostile_fixture(const char *file, json_t *rec, parse_fn fn, void *ud)
{
    json_t *body = json_deep_copy(json_object_get(rec, "body"));
    try_all_types(file, body, body, fn, ud);
    json_t *msgs = json_object_get(body, "messages");
    if (!msgs)
        msgs = json_object_get(body, "input");
    for (size_t i = 0; i < json_array_size(msgs) && i < 3; i++)
        if (json_is_object(json_array_get(msgs, i)))
            try_all_types(file, body, json_array_get(msgs, i), fn, ud);
    json_decref(body);
}

TEST(every_field_of_every_fixture_with_a_wrong_type_is_refused_or_accepted_never_crashes)
{
    int n = 0;
    for_each_fixture(hostile_fixture, &n);
    CHECK_MSG(n > 1000, "only %d mutations ran", n);
}

typedef struct bad_case {
    const char *name;
    parse_fn fn;
    const char *body;
    int want;
    const char *msg_has;
} bad_case;

static const bad_case bad[] = {
    { "chat without messages is refused", parse_chat, "{\"model\":\"m\"}", CV_EINVAL, "messages" },
    { "chat with an unknown role names it", parse_chat, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}",
      CV_EINVAL, "wizard" },
    { "chat image input is refused clearly", parse_chat,
      "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
      CV_EUNSUPPORTED, "text only" },
    { "temperature out of range names both", parse_chat,
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":7}", CV_EINVAL, "temperature" },
    { "n above one is refused", parse_chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}",
      CV_EUNSUPPORTED, "'n'" },
    { "anthropic image block is refused clearly", parse_msgs,
      "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}",
      CV_EUNSUPPORTED, "vision" },
    { "anthropic unknown role names it", parse_msgs, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}",
      CV_EINVAL, "robot" },
    { "anthropic bad thinking type names it", parse_msgs,
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"sometimes\"}}", CV_EINVAL,
      "sometimes" },
    { "responses without input is refused", parse_resp, "{\"model\":\"m\"}", CV_EINVAL, "input" },
    { "responses unknown previous id is not found", NULL, "", 0, NULL },
};

TEST(malformed_requests_get_the_right_code_and_a_message_naming_the_field)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        if (!bad[i].fn)
            continue;
        json_t *b = json_loads(bad[i].body, 0, NULL);
        cv_chat_request r;
        cv_chat_request_init(&r);
        cv_err err = { 0 };
        int rc = bad[i].fn(b, &r, &err);
        CHECK_MSG(rc == bad[i].want, "%s: rc %d want %d (%s)", bad[i].name, rc, bad[i].want, err.msg);
        CHECK_MSG(strstr(err.msg, bad[i].msg_has) != NULL, "%s: message '%s' lacks '%s'", bad[i].name, err.msg,
                  bad[i].msg_has);
        cv_chat_request_fini(&r);
        json_decref(b);
    }
    cv_resp_store *st = cv_resp_store_create(4);
    json_t *b = json_loads("{\"input\":\"x\",\"previous_response_id\":\"resp_nope\"}", 0, NULL);
    cv_chat_request r;
    cv_chat_request_init(&r);
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_openai_responses_parse(b, st, &r, &err), CV_ENOTFOUND);
    CHECK(strstr(err.msg, "resp_nope") != NULL);
    cv_chat_request_fini(&r);
    json_decref(b);
    cv_resp_store_destroy(st);
}

/* ---- encoders through the real pipeline ---- */

static fake_backend fb;
static cv_server *srv;

/* cv_gen_start over the server's one model, held as a request holds it. */
static int start_gen(cv_chat_request *r, const cv_gen_enc *enc, void *ud, cv_gen **g, cv_err *err)
{
    const cv_server_backend *be;
    cv_model_slot *m = cv_model_set_find(srv->models, NULL, err);
    if (!m || cv_model_acquire(srv->models, m, -1, NULL, &be, err))
        return CV_EINVAL;
    return cv_gen_start(srv, m, be, r, enc, ud, g, err);
}

/* Runs a generation with the given reply and encoder; returns the output. */
static char *generate(cv_chat_request *r, const char *reply, const cv_gen_enc *enc, void *ud)
{
    fake_backend_set_reply(&fb, reply);
    cv_gen *g;
    cv_err err = { 0 };
    int rc = start_gen(r, enc, ud, &g, &err);
    CHECK_MSG(rc == 0, "start: %s", err.msg);
    if (rc)
        return strdup("");
    cv_gen_set_id(g, "test-id");
    cv_buf out = { 0 };
    int guard = 0;
    while (!cv_gen_pump(g, 100, &out) && guard++ < 100000) {
    }
    cv_gen_destroy(g);
    fake_backend_set_reply(&fb, NULL);
    return cv_buf_steal(&out);
}

static cv_chat_request *chat_req(bool stream, const char *user)
{
    cv_chat_request *r = cv_xmalloc(sizeof *r);
    cv_chat_request_init(r);
    r->stream = stream;
    json_array_append_new(r->messages, json_pack("{s:s, s:s}", "role", "user", "content", user));
    json_array_append_new(r->tools, json_pack("{s:s, s:{s:s, s:{}}}", "type", "function", "function", "name",
                                              "get_weather", "parameters"));
    return r;
}

/* SSE data lines as JSON values (skipping [DONE]); counts comments. */
static json_t *sse_events(const char *s, int *n_done, json_t **names)
{
    json_t *arr = json_array();
    *names = json_array();
    *n_done = 0;
    const char *p = s;
    const char *pending_name = NULL;
    size_t pending_len = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 7 && !strncmp(p, "event: ", 7)) {
            pending_name = p + 7;
            pending_len = n - 7;
        } else if (n > 6 && !strncmp(p, "data: ", 6)) {
            if (n == 12 && !strncmp(p + 6, "[DONE]", 6))
                (*n_done)++;
            else {
                json_t *v = json_loadb(p + 6, n - 6, 0, NULL);
                CHECK_MSG(v != NULL, "bad SSE data line: %.*s", (int)n, p);
                if (v)
                    json_array_append_new(arr, v);
                json_array_append_new(*names, pending_name ? json_stringn(pending_name, pending_len) : json_null());
            }
            pending_name = NULL;
        }
        p = e ? e + 1 : p + n;
    }
    return arr;
}

static const char *TOOL_REPLY = "<think>need weather</think>Let me check.<tool_call>\n{\"name\": \"get_weather\", "
                                "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST(openai_chat_stream_sends_role_reasoning_content_tool_deltas_finish_usage_done)
{
    cv_chat_request *r = chat_req(true, "hi");
    r->include_usage = true;
    char *out = generate(r, TOOL_REPLY, &cv_enc_openai_chat, cv_enc_openai_chat_new(true));
    int done;
    json_t *names;
    json_t *ev = sse_events(out, &done, &names);
    CHECK_EQ_INT(done, 1);
    size_t n = json_array_size(ev);
    CHECK(n >= 6);
    json_t *d0 = json_object_get(json_array_get(json_object_get(json_array_get(ev, 0), "choices"), 0), "delta");
    CHECK_EQ_STR(json_string_value(json_object_get(d0, "role")), "assistant");
    cv_buf content = { 0 }, reasoning = { 0 }, args = { 0 };
    const char *finish = NULL, *name = NULL, *id = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(ev, i);
        CHECK_EQ_STR(json_string_value(json_object_get(c, "object")), "chat.completion.chunk");
        json_t *ch = json_array_get(json_object_get(c, "choices"), 0);
        json_t *d = json_object_get(ch, "delta");
        if (json_is_string(json_object_get(d, "content")))
            cv_buf_puts(&content, json_string_value(json_object_get(d, "content")));
        if (json_is_string(json_object_get(d, "reasoning_content")))
            cv_buf_puts(&reasoning, json_string_value(json_object_get(d, "reasoning_content")));
        json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
        if (tc) {
            CHECK_EQ_INT(JSON_INT(tc, "index"), 0);
            json_t *f = json_object_get(tc, "function");
            if (json_object_get(f, "name")) {
                name = json_string_value(json_object_get(f, "name"));
                id = json_string_value(json_object_get(tc, "id"));
                CHECK_EQ_STR(json_string_value(json_object_get(tc, "type")), "function");
            }
            cv_buf_puts(&args, json_string_value(json_object_get(f, "arguments")));
        }
        if (json_is_string(json_object_get(ch, "finish_reason")))
            finish = json_string_value(json_object_get(ch, "finish_reason"));
    }
    CHECK_EQ_STR(content.data, "Let me check.");
    CHECK_EQ_STR(reasoning.data, "need weather");
    CHECK_EQ_STR(name, "get_weather");
    CHECK(id && !strncmp(id, "call_", 5));
    CHECK_EQ_STR(args.data, "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(finish, "tool_calls");
    json_t *last = json_array_get(ev, n - 1);
    CHECK_EQ_INT(json_array_size(json_object_get(last, "choices")), 0);
    json_t *u = json_object_get(last, "usage");
    CHECK(JSON_INT(u, "completion_tokens") == (json_int_t)strlen(TOOL_REPLY) + 1);
    CHECK(JSON_INT(json_object_get(u, "prompt_tokens_details"), "cached_tokens") > 0);
    cv_buf_free(&content);
    cv_buf_free(&reasoning);
    cv_buf_free(&args);
    json_decref(ev);
    json_decref(names);
    free(out);
}

TEST(openai_chat_json_assembles_the_same_events)
{
    cv_chat_request *r = chat_req(false, "hi");
    char *out = generate(r, TOOL_REPLY, &cv_enc_openai_chat, cv_enc_openai_chat_new(false));
    json_t *v = json_loads(out, 0, NULL);
    CHECK(v != NULL);
    json_t *ch = json_array_get(json_object_get(v, "choices"), 0);
    json_t *m = json_object_get(ch, "message");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "content")), "Let me check.");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "reasoning_content")), "need weather");
    json_t *f = json_object_get(json_array_get(json_object_get(m, "tool_calls"), 0), "function");
    CHECK_EQ_STR(json_string_value(json_object_get(f, "arguments")), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    CHECK_EQ_STR(json_string_value(json_object_get(v, "object")), "chat.completion");
    json_decref(v);
    free(out);
}

TEST(anthropic_stream_has_the_documented_event_order)
{
    cv_chat_request *r = chat_req(true, "hi");
    char *out = generate(r, TOOL_REPLY, &cv_enc_anthropic, cv_enc_anthropic_new(true));
    int done;
    json_t *names;
    json_t *ev = sse_events(out, &done, &names);
    CHECK_EQ_INT(done, 0);
    /* The event types with runs of the same delta type collapsed. */
    cv_buf order = { 0 };
    const char *prev = "";
    size_t n = json_array_size(ev);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        const char *type = json_string_value(json_object_get(e, "type"));
        CHECK_EQ_STR(json_string_value(json_array_get(names, i)), type);
        const char *dt = json_string_value(json_object_get(json_object_get(e, "delta"), "type"));
        const char *cb = json_string_value(json_object_get(json_object_get(e, "content_block"), "type"));
        char item[96];
        snprintf(item, sizeof item, "%s%s%s", type, dt || cb ? ":" : "", dt ? dt : cb ? cb : "");
        if (strcmp(item, prev) || !dt)
            cv_buf_printf(&order, "%s ", item);
        prev = dt ? json_string_value(json_object_get(json_object_get(e, "delta"), "type")) : "";
        if (dt) {
            static char last[96];
            snprintf(last, sizeof last, "%s", item);
            prev = last;
        }
    }
    CHECK_EQ_STR(order.data, "message_start ping content_block_start:thinking content_block_delta:thinking_delta "
                             "content_block_delta:signature_delta content_block_stop content_block_start:text "
                             "content_block_delta:text_delta content_block_stop content_block_start:tool_use "
                             "content_block_delta:input_json_delta content_block_stop "
                             "message_delta message_stop ");
    cv_buf_free(&order);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ev, n - 1), "type")), "message_stop");
    json_t *md = json_array_get(ev, n - 2);
    CHECK_EQ_STR(json_string_value(json_object_get(md, "type")), "message_delta");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(md, "delta"), "stop_reason")), "tool_use");
    /* the tool_use block's partial_json fragments join to the arguments */
    cv_buf args = { 0 };
    bool saw_tool = false;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        json_t *cb = json_object_get(e, "content_block");
        if (cb && !strcmp(json_string_value(json_object_get(cb, "type")), "tool_use")) {
            saw_tool = true;
            CHECK_EQ_STR(json_string_value(json_object_get(cb, "name")), "get_weather");
            CHECK(!strncmp(json_string_value(json_object_get(cb, "id")), "toolu_", 6));
        }
        json_t *d = json_object_get(e, "delta");
        if (d && json_object_get(d, "partial_json"))
            cv_buf_puts(&args, json_string_value(json_object_get(d, "partial_json")));
    }
    CHECK(saw_tool);
    CHECK_EQ_STR(args.data, "{\"city\":\"Paris\"}");
    cv_buf_free(&args);
    json_decref(ev);
    json_decref(names);
    free(out);
}

TEST(anthropic_json_has_thinking_text_and_tool_use_blocks_in_order)
{
    cv_chat_request *r = chat_req(false, "hi");
    char *out = generate(r, TOOL_REPLY, &cv_enc_anthropic, cv_enc_anthropic_new(false));
    json_t *v = json_loads(out, 0, NULL);
    json_t *c = json_object_get(v, "content");
    CHECK_EQ_INT(json_array_size(c), 3);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(c, 0), "type")), "thinking");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(c, 1), "text")), "Let me check.");
    json_t *tu = json_array_get(c, 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(tu, "input"), "city")), "Paris");
    CHECK(json_object_get(tu, "_index") == NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(v, "stop_reason")), "tool_use");
    json_t *u = json_object_get(v, "usage");
    CHECK(JSON_INT(u, "cache_read_input_tokens") > 0);
    json_decref(v);
    free(out);
}

TEST(responses_stream_items_follow_generation_order_with_sequence_numbers)
{
    cv_chat_request *r = chat_req(true, "hi");
    json_t *conv = json_copy(r->messages);
    char *out = generate(r, TOOL_REPLY, &cv_enc_openai_responses, cv_enc_openai_responses_new(true, conv, true));
    json_decref(conv);
    int done;
    json_t *names;
    json_t *ev = sse_events(out, &done, &names);
    size_t n = json_array_size(ev);
    CHECK(n > 10);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        CHECK_EQ_INT(JSON_INT(e, "sequence_number"), (long long)i);
        CHECK_EQ_STR(json_string_value(json_array_get(names, i)), json_string_value(json_object_get(e, "type")));
    }
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ev, 0), "type")), "response.created");
    json_t *fin = json_object_get(json_array_get(ev, n - 1), "response");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ev, n - 1), "type")), "response.completed");
    json_t *outp = json_object_get(fin, "output");
    CHECK_EQ_INT(json_array_size(outp), 3);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(outp, 0), "type")), "reasoning");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(outp, 1), "type")), "message");
    json_t *fc = json_array_get(outp, 2);
    CHECK_EQ_STR(json_string_value(json_object_get(fc, "type")), "function_call");
    CHECK_EQ_STR(json_string_value(json_object_get(fc, "arguments")), "{\"city\":\"Paris\"}");
    /* stored for previous_response_id, with the assistant turn appended */
    json_t *stored = cv_resp_store_get(srv->store, "test-id");
    CHECK(stored && json_array_size(stored) == 2);
    json_t *am = json_array_get(stored, 1);
    CHECK_EQ_STR(json_string_value(json_object_get(am, "role")), "assistant");
    CHECK(json_array_size(json_object_get(am, "tool_calls")) == 1);
    json_decref(stored);
    json_decref(ev);
    json_decref(names);
    free(out);
}

TEST(stop_strings_end_generation_on_every_wire_without_leaking)
{
    const cv_gen_enc *encs[] = { &cv_enc_openai_chat, &cv_enc_anthropic, &cv_enc_openai_completions };
    for (int w = 0; w < 3; w++) {
        cv_chat_request *r = chat_req(false, "hi");
        json_array_clear(r->tools);
        if (w == 2) {
            r->raw = true;
            cv_buf_puts(&r->prompt_text, "tell me");
        }
        cv_err err = { 0 };
        CHECK_EQ_INT(cv_chat_request_add_stop(r, "END", 3, &err), 0);
        void *ud = w == 0 ? cv_enc_openai_chat_new(false) : w == 1 ? cv_enc_anthropic_new(false)
                                                                   : cv_enc_openai_completions_new(false);
        char *out = generate(r, "alpha beta ENDgamma", encs[w], ud);
        CHECK_MSG(strstr(out, "alpha beta ") && !strstr(out, "beta END") && !strstr(out, "gamma"), "wire %d: %s", w,
                  out);
        if (w == 1)
            CHECK(strstr(out, "\"stop_sequence\":\"END\"") != NULL);
        free(out);
    }
}

TEST(max_tokens_ends_with_length_on_every_wire)
{
    cv_chat_request *r = chat_req(false, "hi");
    r->max_tokens = 5;
    char *out = generate(r, "a long answer that will not fit", &cv_enc_anthropic, cv_enc_anthropic_new(false));
    json_t *v = json_loads(out, 0, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(v, "stop_reason")), "max_tokens");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(v, "content"), 0), "text")), "a lon");
    json_decref(v);
    free(out);
    r = chat_req(false, "hi");
    r->max_tokens = 5;
    out = generate(r, "a long answer", &cv_enc_openai_chat, cv_enc_openai_chat_new(false));
    CHECK(strstr(out, "\"finish_reason\":\"length\"") != NULL);
    free(out);
}

TEST(a_prompt_that_fills_the_context_is_refused_with_both_numbers)
{
    cv_chat_request *r = chat_req(false, "hi");
    cv_buf big = { 0 };
    for (int i = 0; i < 5000; i++)
        cv_buf_puts(&big, "word ");
    json_object_set_new(json_array_get(r->messages, 0), "content", json_string(big.data));
    cv_buf_free(&big);
    cv_gen *g;
    cv_err err = { 0 };
    int rc = start_gen(r, &cv_enc_openai_chat, cv_enc_openai_chat_new(false), &g, &err);
    CHECK_EQ_INT(rc, CV_EINVAL);
    CHECK(strstr(err.msg, "context is 4096 tokens") != NULL);
    CHECK(strstr(err.msg, "prompt is 25") != NULL);
}

TEST(logprobs_are_reported_per_token_when_asked)
{
    cv_chat_request *r = chat_req(false, "hi");
    json_array_clear(r->tools);
    r->logprobs = true;
    r->top_logprobs = 2;
    char *out = generate(r, "abc", &cv_enc_openai_chat, cv_enc_openai_chat_new(false));
    json_t *v = json_loads(out, 0, NULL);
    json_t *lp = json_object_get(json_object_get(json_array_get(json_object_get(v, "choices"), 0), "logprobs"),
                                 "content");
    CHECK_EQ_INT(json_array_size(lp), 3); /* a, b, c; the end token is not text */
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(lp, 0), "token")), "a");
    CHECK_EQ_INT(json_array_size(json_object_get(json_array_get(lp, 0), "top_logprobs")), 2);
    json_decref(v);
    free(out);
}

/* ---- errors and the store ---- */

TEST(error_tables_give_each_wire_its_status_and_shape)
{
    struct { int code, oai, anth; } rows[] = {
        { CV_EINVAL, 400, 400 },        { CV_SE_AUTH, 401, 401 },     { CV_ENOTFOUND, 404, 404 },
        { CV_SE_TOO_LARGE, 413, 413 },  { CV_SE_TIMEOUT, 408, 408 }, { CV_EBUSY, 503, 529 },
        { CV_SE_UNAVAILABLE, 503, 503 }, { -999, 500, 500 },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        CHECK_EQ_INT(cv_wire_status(CV_WIRE_OPENAI, rows[i].code), rows[i].oai);
        CHECK_EQ_INT(cv_wire_status(CV_WIRE_ANTHROPIC, rows[i].code), rows[i].anth);
        cv_buf b = { 0 };
        cv_wire_error_body(CV_WIRE_OPENAI, rows[i].code, "bad \xff thing", "p", &b);
        json_t *v = json_loads(b.data, 0, NULL);
        json_t *e = json_object_get(v, "error");
        CHECK(json_is_string(json_object_get(e, "message")) && json_is_string(json_object_get(e, "type")) &&
              json_object_get(e, "param") && json_object_get(e, "code"));
        json_decref(v);
        cv_buf_reset(&b);
        cv_wire_error_body(CV_WIRE_ANTHROPIC, rows[i].code, "bad thing", NULL, &b);
        v = json_loads(b.data, 0, NULL);
        CHECK_EQ_STR(json_string_value(json_object_get(v, "type")), "error");
        CHECK(json_is_string(json_object_get(json_object_get(v, "error"), "type")));
        json_decref(v);
        cv_buf_free(&b);
    }
}

TEST(response_store_keeps_the_most_recently_used)
{
    cv_resp_store *s = cv_resp_store_create(3);
    char id[16];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "r%d", i);
        json_t *v = json_pack("[i]", i);
        cv_resp_store_put(s, id, v);
        json_decref(v);
    }
    json_decref(cv_resp_store_get(s, "r0")); /* r0 becomes most recent */
    json_t *v = json_pack("[i]", 3);
    cv_resp_store_put(s, "r3", v);
    json_decref(v);
    CHECK_EQ_INT(cv_resp_store_count(s), 3);
    json_t *g = cv_resp_store_get(s, "r1");
    CHECK(g == NULL);
    g = cv_resp_store_get(s, "r0");
    CHECK(g && json_integer_value(json_array_get(g, 0)) == 0);
    json_decref(g);
    cv_resp_store_destroy(s);
}

TEST(billing_line_is_stripped_only_at_the_start)
{
    cv_str s = cv_req_strip_billing(cv_str_of("x-anthropic-billing-header: cc_version=1; cch=ab;\nYou are"));
    CHECK(s.len == 7 && !memcmp(s.ptr, "You are", 7));
    s = cv_req_strip_billing(cv_str_of("You are\nx-anthropic-billing-header: a"));
    CHECK(s.len == strlen("You are\nx-anthropic-billing-header: a"));
    s = cv_req_strip_billing(cv_str_of("x-anthropic-billing-header: only"));
    CHECK_EQ_INT(s.len, 0);
}

int main(void)
{
    test_require_data();
    fake_backend_init(&fb, 4096);
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0 };
    cv_err err = { 0 };
    if (cv_server_start(&cfg, &fb.be, &srv, &err)) {
        fprintf(stderr, "cannot start: %s\n", err.msg);
        return 1;
    }
    RUN(every_recorded_client_request_translates_to_the_neutral_shape);
    RUN(claude_code_system_prompt_loses_billing_line_and_gains_folded_system);
    RUN(codex_turn_two_carries_the_call_and_its_output);
    RUN(every_field_of_every_fixture_with_a_wrong_type_is_refused_or_accepted_never_crashes);
    RUN(malformed_requests_get_the_right_code_and_a_message_naming_the_field);
    RUN(openai_chat_stream_sends_role_reasoning_content_tool_deltas_finish_usage_done);
    RUN(openai_chat_json_assembles_the_same_events);
    RUN(anthropic_stream_has_the_documented_event_order);
    RUN(anthropic_json_has_thinking_text_and_tool_use_blocks_in_order);
    RUN(responses_stream_items_follow_generation_order_with_sequence_numbers);
    RUN(stop_strings_end_generation_on_every_wire_without_leaking);
    RUN(max_tokens_ends_with_length_on_every_wire);
    RUN(a_prompt_that_fills_the_context_is_refused_with_both_numbers);
    RUN(logprobs_are_reported_per_token_when_asked);
    RUN(error_tables_give_each_wire_its_status_and_shape);
    RUN(response_store_keeps_the_most_recently_used);
    RUN(billing_line_is_stripped_only_at_the_start);
    cv_server_destroy(srv);
    fake_backend_fini(&fb);
    return test_report();
}
