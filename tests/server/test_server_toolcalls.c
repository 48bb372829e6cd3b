/* test_server_toolcalls.c — the production tool-call and reasoning parser
 * (cv_server_parser_create over cv_chat_parse, what backend.c serves with)
 * behind the real HTTP server, fed the recorded model outputs of every case
 * in ../shared/testdata/toolcalls (39 syntaxes). The scripted test backend
 * (fake_backend.h) substitutes each case's text for the sampler's, one byte
 * per token, so the text crosses the detokenizer, the stop matcher, the
 * parser and each wire's encoder exactly as generated text does.
 *
 * Every case goes over /v1/chat/completions, /v1/responses and /v1/messages,
 * streamed (the SSE deltas reassembled here) and not. For each of the six
 * answers:
 *   - content, reasoning and tool calls (names, arguments as JSON values)
 *     equal cv_chat_parse_text over the same text with the same options
 *     (the parser's own non-streaming result): the server adds nothing,
 *     loses nothing and streams what it returns whole;
 *   - streamed and whole answers of one wire carry identical calls, argument
 *     text byte for byte where the wire sends text;
 *   - call ids are the wire's own (call_, toolu_, fc_ + call_), unique;
 *   - cases whose `match` is exact (and not in judged_wrong.txt, not
 *     partial) give the fixture's expected calls.
 * The cases whose every answer holds a call are counted, so a server that
 * lost calls everywhere cannot pass.
 *
 * All of it twice: with each case's syntax named (as a template names it),
 * and with none known (a model without a template), where output detection
 * must find every syntax alike on all three wires, streamed or not. corvid's
 * own detection cases (tests/chat/toolcall/fixtures) run in the first pass,
 * in the format they name. */
#include <dirent.h>

#include <curl/curl.h>

#include "test.h"

#include "chat/chat.h"
#include "fake_backend.h"
#include "../chat/toolcall/tc_harness.h" /* loose JSON comparison, as the parser tests compare */

#define MAX_CASES 700

typedef struct tcase {
    char key[80]; /* "<format>#<index in file>" */
    json_t *j;
} tcase;

static tcase cases[MAX_CASES];
static int n_cases;
static json_t *judged_wrong;
static fake_backend fb;
static cv_server *srv;
static char base[64];

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Loads every *.jsonl of dir as cases keyed "<file>#<index>"; returns the
 * number of files. */
static int load_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char *names[64];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 64) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jsonl"))
            names[nn++] = cv_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, by_name);
    for (int i = 0; i < nn; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        cv_buf b = { 0 };
        if (cv_read_file(path, &b, 16u << 20, NULL) == 0) {
            int index = 0;
            for (char *line = b.data; line && *line && n_cases < MAX_CASES;) {
                char *nl = strchr(line, '\n');
                if (nl)
                    *nl = 0;
                json_t *j = *line ? json_loads(line, 0, NULL) : NULL;
                if (j) {
                    names[i][strlen(names[i]) - 6] = 0;
                    snprintf(cases[n_cases].key, sizeof cases[n_cases].key, "%s#%d", names[i], index);
                    names[i][strlen(names[i])] = '.';
                    cases[n_cases++].j = j;
                    index++;
                }
                line = nl ? nl + 1 : NULL;
            }
        }
        cv_buf_free(&b);
        free(names[i]);
    }
    return nn;
}

/* The peers' corpus and corvid's own detection cases (their "format" is
 * the one chosen before the output is seen, "auto" for none). */
static void load_cases(void)
{
    if (!load_dir(test_data("toolcalls")))
        test_skip("toolcalls fixtures absent");
    CHECK(load_dir("tests/chat/toolcall/fixtures") > 0);
    judged_wrong = json_object();
    cv_buf b = { 0 };
    if (cv_read_file("tests/chat/toolcall/judged_wrong.txt", &b, 1u << 20, NULL) == 0) {
        for (char *line = b.data; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            char *sp = *line != '#' ? strchr(line, ' ') : NULL;
            if (sp) {
                *sp = 0;
                json_object_set_new(judged_wrong, line, json_true());
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    cv_buf_free(&b);
}

/* ---- HTTP ---- */

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    cv_buf_append(ud, p, sz * n);
    return sz * n;
}

static long post(const char *path, json_t *body, cv_buf *out)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    char *s = json_dumps(body, JSON_COMPACT);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, s);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(s);
    return status;
}

/* ---- one answer, whatever the wire ---- */

typedef struct call {
    char name[128];
    char id[64];
    char item_id[64]; /* responses: the function_call item's id */
    cv_buf args;      /* as the wire sent it (text; Anthropic: the input object dumped) */
} call;

typedef struct answer {
    cv_buf content, reasoning;
    call calls[16];
    int n_calls;
    bool ok;          /* 200 and parsed */
} answer;

static void answer_fini(answer *a)
{
    cv_buf_free(&a->content);
    cv_buf_free(&a->reasoning);
    for (int i = 0; i < a->n_calls; i++)
        cv_buf_free(&a->calls[i].args);
    memset(a, 0, sizeof *a);
}

static call *new_call(answer *a, const char *name, const char *id)
{
    if (a->n_calls >= 16)
        return NULL;
    call *c = &a->calls[a->n_calls++];
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
    snprintf(c->id, sizeof c->id, "%s", id ? id : "");
    return c;
}

static void put(cv_buf *b, const json_t *v)
{
    if (json_is_string(v))
        cv_buf_append(b, json_string_value(v), json_string_length(v));
}

/* Calls fn(ud, event name or NULL, data) for every SSE frame. */
static void each_sse(const cv_buf *body, void (*fn)(void *, const char *, json_t *), void *ud)
{
    char *s = cv_xstrndup(body->data ? body->data : "", body->len);
    for (char *f = s; f && *f;) {
        char *end = strstr(f, "\n\n");
        if (end)
            *end = 0;
        const char *ev = NULL;
        json_t *data = NULL;
        for (char *line = f; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            if (!strncmp(line, "event: ", 7))
                ev = line + 7;
            else if (!strncmp(line, "data: ", 6) && strcmp(line + 6, "[DONE]"))
                data = json_loads(line + 6, 0, NULL);
            line = nl ? nl + 1 : NULL;
        }
        if (data)
            fn(ud, ev, data);
        json_decref(data);
        f = end ? end + 2 : NULL;
    }
    free(s);
}

static void chat_frame(void *ud, const char *ev, json_t *d)
{
    answer *a = ud;
    json_t *delta = json_object_get(json_array_get(json_object_get(d, "choices"), 0), "delta");
    put(&a->content, json_object_get(delta, "content"));
    put(&a->reasoning, json_object_get(delta, "reasoning_content"));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, t) {
        int idx = (int)json_integer_value(json_object_get(t, "index"));
        json_t *fn = json_object_get(t, "function");
        if (idx == a->n_calls)
            new_call(a, jstr(fn, "name"), jstr(t, "id"));
        if (idx >= 0 && idx < a->n_calls)
            put(&a->calls[idx].args, json_object_get(fn, "arguments"));
        else
            a->ok = false; /* a delta for a call that was never started */
    }
}

static void responses_frame(void *ud, const char *ev, json_t *d)
{
    answer *a = ud;
    const char *type = jstr(d, "type");
    if (!type)
        return;
    if (!strcmp(type, "response.output_text.delta"))
        put(&a->content, json_object_get(d, "delta"));
    else if (!strcmp(type, "response.reasoning_summary_text.delta"))
        put(&a->reasoning, json_object_get(d, "delta"));
    else if (!strcmp(type, "response.output_item.added")) {
        json_t *it = json_object_get(d, "item");
        if (jstr(it, "type") && !strcmp(jstr(it, "type"), "function_call")) {
            call *c = new_call(a, jstr(it, "name"), jstr(it, "call_id"));
            if (c)
                snprintf(c->item_id, sizeof c->item_id, "%s", jstr(it, "id") ? jstr(it, "id") : "");
        }
    } else if (!strcmp(type, "response.function_call_arguments.delta")) {
        if (a->n_calls)
            put(&a->calls[a->n_calls - 1].args, json_object_get(d, "delta"));
        else
            a->ok = false;
    }
}

static void anthropic_frame(void *ud, const char *ev, json_t *d)
{
    answer *a = ud;
    const char *type = jstr(d, "type");
    if (!type)
        return;
    if (!strcmp(type, "content_block_start")) {
        json_t *b = json_object_get(d, "content_block");
        if (jstr(b, "type") && !strcmp(jstr(b, "type"), "tool_use"))
            new_call(a, jstr(b, "name"), jstr(b, "id"));
    } else if (!strcmp(type, "content_block_delta")) {
        json_t *dl = json_object_get(d, "delta");
        const char *dt = jstr(dl, "type");
        if (!dt)
            return;
        if (!strcmp(dt, "text_delta"))
            put(&a->content, json_object_get(dl, "text"));
        else if (!strcmp(dt, "thinking_delta"))
            put(&a->reasoning, json_object_get(dl, "thinking"));
        else if (!strcmp(dt, "input_json_delta") && a->n_calls)
            put(&a->calls[a->n_calls - 1].args, json_object_get(dl, "partial_json"));
    }
}

enum { W_CHAT, W_RESPONSES, W_MESSAGES, N_WIRES };
static const char *const wire_name[N_WIRES] = { "chat", "responses", "messages" };
static const char *const wire_path[N_WIRES] = { "/v1/chat/completions", "/v1/responses", "/v1/messages" };

static void read_whole(int w, json_t *v, answer *a)
{
    size_t i;
    json_t *x;
    if (w == W_CHAT) {
        json_t *m = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "message");
        put(&a->content, json_object_get(m, "content"));
        put(&a->reasoning, json_object_get(m, "reasoning_content"));
        json_array_foreach(json_object_get(m, "tool_calls"), i, x) {
            json_t *fn = json_object_get(x, "function");
            call *c = new_call(a, jstr(fn, "name"), jstr(x, "id"));
            if (c)
                put(&c->args, json_object_get(fn, "arguments"));
        }
    } else if (w == W_RESPONSES) {
        json_array_foreach(json_object_get(v, "output"), i, x) {
            const char *t = jstr(x, "type");
            size_t k;
            json_t *part;
            if (!t)
                continue;
            if (!strcmp(t, "message")) {
                json_array_foreach(json_object_get(x, "content"), k, part) put(&a->content, json_object_get(part, "text"));
            } else if (!strcmp(t, "reasoning")) {
                json_array_foreach(json_object_get(x, "summary"), k, part) put(&a->reasoning, json_object_get(part, "text"));
            } else if (!strcmp(t, "function_call")) {
                call *c = new_call(a, jstr(x, "name"), jstr(x, "call_id"));
                if (c) {
                    put(&c->args, json_object_get(x, "arguments"));
                    snprintf(c->item_id, sizeof c->item_id, "%s", jstr(x, "id") ? jstr(x, "id") : "");
                }
            }
        }
    } else {
        json_array_foreach(json_object_get(v, "content"), i, x) {
            const char *t = jstr(x, "type");
            if (!t)
                continue;
            if (!strcmp(t, "text"))
                put(&a->content, json_object_get(x, "text"));
            else if (!strcmp(t, "thinking"))
                put(&a->reasoning, json_object_get(x, "thinking"));
            else if (!strcmp(t, "tool_use")) {
                call *c = new_call(a, jstr(x, "name"), jstr(x, "id"));
                if (c)
                    cv_json_dump(&c->args, json_object_get(x, "input"));
            }
        }
    }
}

/* The request body for wire w with the case's tools (OpenAI shape). */
static json_t *request_body(int w, bool stream, const json_t *tools, bool parallel)
{
    json_t *b = json_object();
    json_object_set_new(b, "model", json_string("m"));
    json_object_set_new(b, "stream", json_boolean(stream));
    json_t *wt = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        json_t *params = json_object_get(fn, "parameters");
        json_t *p = params ? json_incref(params) : json_pack("{s:s, s:{}}", "type", "object", "properties");
        const char *name = jstr(fn, "name");
        if (w == W_CHAT)
            json_array_append_new(wt, json_pack("{s:s, s:{s:s, s:o}}", "type", "function", "function", "name", name,
                                                "parameters", p));
        else if (w == W_RESPONSES)
            json_array_append_new(wt, json_pack("{s:s, s:s, s:o}", "type", "function", "name", name, "parameters", p));
        else
            json_array_append_new(wt, json_pack("{s:s, s:o}", "name", name, "input_schema", p));
    }
    bool any = json_array_size(wt) > 0;
    if (any)
        json_object_set(b, "tools", wt);
    if (w == W_CHAT) {
        json_object_set_new(b, "messages", json_pack("[{s:s, s:s}]", "role", "user", "content", "go"));
        if (any)
            json_object_set_new(b, "parallel_tool_calls", json_boolean(parallel));
    } else if (w == W_RESPONSES) {
        json_object_set_new(b, "input", json_string("go"));
        if (any)
            json_object_set_new(b, "parallel_tool_calls", json_boolean(parallel));
    } else {
        json_object_set_new(b, "max_tokens", json_integer(100000));
        json_object_set_new(b, "messages", json_pack("[{s:s, s:s}]", "role", "user", "content", "go"));
        if (any)
            json_object_set_new(b, "tool_choice", json_pack("{s:s, s:b}", "type", "auto", "disable_parallel_tool_use",
                                                            !parallel));
    }
    json_decref(wt);
    return b;
}

static bool ask(int w, bool stream, const json_t *tools, bool parallel, answer *a)
{
    memset(a, 0, sizeof *a);
    json_t *body = request_body(w, stream, tools, parallel);
    cv_buf out = { 0 };
    long st = post(wire_path[w], body, &out);
    json_decref(body);
    a->ok = st == 200;
    if (a->ok && stream) {
        each_sse(&out, w == W_CHAT ? chat_frame : w == W_RESPONSES ? responses_frame : anthropic_frame, a);
    } else if (a->ok) {
        json_t *v = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
        a->ok = v != NULL;
        if (v)
            read_whole(w, v, a);
        json_decref(v);
    }
    if (!a->ok)
        fprintf(stderr, "  %s%s: HTTP %ld: %.300s\n", wire_path[w], stream ? " (stream)" : "", st,
                out.data ? out.data : "");
    cv_buf_free(&out);
    return a->ok;
}

/* ---- comparing ---- */

static bool args_eq_text(const char *want, const cv_buf *got)
{
    json_t *a = json_loads(want, JSON_DECODE_ANY, NULL);
    json_t *b = json_loadb(got->data ? got->data : "", got->len, JSON_DECODE_ANY, NULL);
    bool ok = a && b && tc_json_loose_eq(a, b);
    json_decref(a);
    json_decref(b);
    return ok;
}

static bool buf_eq(const cv_buf *a, const cv_buf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* The answer against the parser's own result; why says what differs. */
static bool same_as_parser(int w, const answer *a, const cv_chat_parse_result *ref, char *why, size_t wn)
{
    cv_buf rc = { 0 }, rr = { 0 };
    cv_buf_append(&rc, ref->content.data, ref->content.len);
    cv_buf_append(&rr, ref->reasoning.data, ref->reasoning.len);
    bool ok = true;
    if (!buf_eq(&a->content, &rc)) {
        snprintf(why, wn, "content \"%.120s\" vs the parser's \"%.120s\"", a->content.data ? a->content.data : "",
                 rc.data ? rc.data : "");
        ok = false;
    } else if (!buf_eq(&a->reasoning, &rr)) {
        snprintf(why, wn, "reasoning \"%.120s\" vs the parser's \"%.120s\"",
                 a->reasoning.data ? a->reasoning.data : "", rr.data ? rr.data : "");
        ok = false;
    } else if (a->n_calls != ref->n_calls) {
        snprintf(why, wn, "%d calls, the parser %d", a->n_calls, ref->n_calls);
        ok = false;
    }
    for (int i = 0; ok && i < a->n_calls; i++) {
        const call *c = &a->calls[i];
        if (strcmp(c->name, ref->calls[i].name) || !args_eq_text(ref->calls[i].arguments, &c->args)) {
            snprintf(why, wn, "call %d: %s %.150s vs the parser's %s %.150s", i, c->name,
                     c->args.data ? c->args.data : "", ref->calls[i].name, ref->calls[i].arguments);
            ok = false;
        }
        /* Text wires send the parser's argument text unchanged. */
        if (ok && w != W_MESSAGES &&
            (c->args.len != ref->calls[i].arguments_len || memcmp(c->args.data, ref->calls[i].arguments, c->args.len))) {
            snprintf(why, wn, "call %d arguments text %.150s vs the parser's %.150s", i,
                     c->args.data ? c->args.data : "", ref->calls[i].arguments);
            ok = false;
        }
        const char *pre = w == W_MESSAGES ? "toolu_" : "call_";
        if (ok && (!has_prefix(c->id, pre) || (w == W_RESPONSES && !has_prefix(c->item_id, "fc_")))) {
            snprintf(why, wn, "call %d id '%s' item '%s' is not the wire's own (%s)", i, c->id, c->item_id, pre);
            ok = false;
        }
        for (int k = 0; ok && k < i; k++)
            if (!strcmp(a->calls[k].id, c->id)) {
                snprintf(why, wn, "calls %d and %d share the id %s", k, i, c->id);
                ok = false;
            }
    }
    cv_buf_free(&rc);
    cv_buf_free(&rr);
    return ok;
}

/* Streamed and whole answers of one wire: the same calls, argument text
 * byte for byte (Anthropic's whole answer has an input object, compared as
 * JSON with the streamed partial_json concatenated). */
static bool same_calls(int w, const answer *a, const answer *b)
{
    if (a->n_calls != b->n_calls)
        return false;
    for (int i = 0; i < a->n_calls; i++) {
        if (strcmp(a->calls[i].name, b->calls[i].name))
            return false;
        if (w == W_MESSAGES) {
            char *t = cv_xstrndup(a->calls[i].args.data ? a->calls[i].args.data : "", a->calls[i].args.len);
            bool ok = args_eq_text(t, &b->calls[i].args);
            free(t);
            if (!ok)
                return false;
        } else if (!buf_eq(&a->calls[i].args, &b->calls[i].args)) {
            return false;
        }
    }
    return true;
}

static bool matches_fixture(const json_t *c, const answer *a)
{
    const json_t *want = json_object_get(c, "expected_calls");
    if ((int)json_array_size(want) != a->n_calls)
        return false;
    for (int i = 0; i < a->n_calls; i++) {
        const json_t *wc = json_array_get(want, (size_t)i);
        if (strcmp(jstr(wc, "name") ? jstr(wc, "name") : "", a->calls[i].name))
            return false;
        if (json_is_null(json_object_get(wc, "arguments")))
            continue; /* the peer asserted a raw prefix only (test_tc_fixtures checks it) */
        json_t *got = json_loadb(a->calls[i].args.data ? a->calls[i].args.data : "", a->calls[i].args.len, 0, NULL);
        bool ok = got && tc_json_loose_eq(json_object_get(wc, "arguments"), got);
        json_decref(got);
        if (!ok)
            return false;
    }
    return true;
}

/* The tools a case's request declares: its own, else one per expected
 * name with an open schema. */
static json_t *case_tools(const json_t *c)
{
    const json_t *t = json_object_get(c, "tools");
    if (json_is_array(t))
        return json_incref((json_t *)t);
    json_t *out = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(c, "expected_calls"), i, x) {
        const char *name = jstr(x, "name");
        bool dup = false;
        size_t k;
        json_t *y;
        json_array_foreach(out, k, y) dup |= name && !strcmp(jstr(json_object_get(y, "function"), "name"), name);
        if (name && !dup)
            json_array_append_new(out, json_pack("{s:s, s:{s:s, s:{s:s, s:{}}}}", "type", "function", "function",
                                                 "name", name, "parameters", "type", "object", "properties"));
    }
    return out;
}

/* ---- the test ---- */

/* Over all cases: named is false for the server with no syntax known (no
 * template: every case's format found from the output alone). */
static void run_cases(bool named)
{
    int n_checked = 0, n_fixture = 0, n_with_calls = 0, n_formats_seen = 0, n_ref_calls = 0;
    const char *last_format = "";
    for (int i = 0; i < n_cases; i++) {
        const json_t *c = cases[i].j;
        const char *text = jstr(c, "text");
        const char *fmt_name = jstr(c, "format");
        bool detection = json_is_true(json_object_get(c, "detection"));
        const cv_tc_format *fmt = fmt_name ? cv_tc_format_find(fmt_name) : NULL;
        CHECK_MSG((fmt || detection) && text, "%s: no format or text", cases[i].key);
        if ((!fmt && !detection) || !text || (detection && !named))
            continue;
        if (!named)
            fmt = NULL;
        if (!detection && strcmp(fmt_name, last_format)) {
            n_formats_seen++;
            last_format = fmt_name;
        }
        const json_t *op = json_object_get(c, "options");
        bool parallel = !json_is_false(json_object_get(op, "parallel_tool_calls"));
        json_t *tools = case_tools(c);
        /* The reference: the parser alone, options as the server sets them
         * (the OpenAI-shape tools the wires hand over, split reasoning,
         * output detection on). */
        cv_chat_parse_opts po = { .format = fmt, .tools = tools, .detect = true, .no_parallel_calls = !parallel,
                                  .id_seed = 1 };
        cv_chat_parse_result ref = { 0 };
        cv_err err = { 0 };
        int rc = cv_chat_parse_text(&po, text, strlen(text), &ref, &err);
        CHECK_MSG(rc == 0, "%s: the parser failed: %s", cases[i].key, err.msg);
        fake_backend_use_parser(&fb, fmt, NULL);
        fake_backend_set_reply(&fb, text);
        /* llama.cpp cases with thinking on continue a generation prompt
         * that may leave reasoning open; which one depends on rendering the
         * case's template (test_tc_fixtures does, with Jinja2): here they
         * are held to the parser's result only. */
        const char *peer = jstr(c, "peer_parser") ? jstr(c, "peer_parser") : "";
        bool needs_prompt = !strncmp(peer, "llama.cpp", 9) && json_is_true(json_object_get(op, "enable_thinking"));
        /* with no syntax known, only the cases that carry no template are
         * the peers' expectation (the others expect the template's) */
        bool exact = !strcmp(jstr(c, "match") ? jstr(c, "match") : "", "exact") &&
                     strcmp(jstr(c, "mode") ? jstr(c, "mode") : "", "partial") &&
                     !json_object_get(judged_wrong, cases[i].key) && !needs_prompt &&
                     (named || !json_array_size(json_object_get(c, "templates")));
        bool all_calls = ref.n_calls > 0;
        for (int w = 0; w < N_WIRES; w++) {
            answer whole, streamed;
            bool ok1 = ask(w, false, tools, parallel, &whole), ok2 = ask(w, true, tools, parallel, &streamed);
            CHECK_MSG(ok1 && ok2, "%s over %s: a request failed", cases[i].key, wire_name[w]);
            char why[512];
            for (int s = 0; s < 2 && ok1 && ok2; s++) {
                const answer *a = s ? &streamed : &whole;
                bool same = same_as_parser(w, a, &ref, why, sizeof why);
                CHECK_MSG(same, "%s over %s%s: %s\n    text: %.300s", cases[i].key, wire_name[w],
                          s ? " (streamed)" : "", why, text);
                if (exact) {
                    CHECK_MSG(matches_fixture(c, a), "%s over %s%s: calls differ from the fixture's", cases[i].key,
                              wire_name[w], s ? " (streamed)" : "");
                    n_fixture++;
                }
                all_calls &= a->n_calls > 0;
                n_checked++;
            }
            if (ok1 && ok2)
                CHECK_MSG(same_calls(w, &whole, &streamed), "%s over %s: streamed calls differ from the whole answer's",
                          cases[i].key, wire_name[w]);
            answer_fini(&whole);
            answer_fini(&streamed);
        }
        n_with_calls += all_calls;
        n_ref_calls += ref.n_calls > 0;
        cv_chat_parse_result_fini(&ref);
        json_decref(tools);
    }
    printf("%s: %d cases, %d formats, %d answers checked against the parser, %d against the fixture; "
           "%d cases with calls on every answer (the parser alone: %d)\n",
           named ? "syntax named" : "no syntax known", n_cases, n_formats_seen, n_checked, n_fixture, n_with_calls,
           n_ref_calls);
    CHECK_MSG(n_cases >= 588 && n_formats_seen >= 39, "%d cases over %d formats", n_cases, n_formats_seen);
    CHECK_MSG(n_with_calls >= 350, "only %d cases carried calls over every wire", n_with_calls);
}

TEST(every_fixture_comes_out_of_every_wire_as_the_parser_reads_it_streamed_or_not)
{
    run_cases(true);
}

TEST(with_no_syntax_known_every_fixture_is_detected_alike_on_every_wire)
{
    run_cases(false);
}

int main(void)
{
    test_require_data();
    load_cases();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fake_backend_init(&fb, 1 << 22);
    cv_server_config cfg = { .host = "127.0.0.1", .port = 0 };
    cv_err err = { 0 };
    if (cv_server_start(&cfg, &fb.be, &srv, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 1;
    }
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cv_server_port(srv));
    RUN(every_fixture_comes_out_of_every_wire_as_the_parser_reads_it_streamed_or_not);
    RUN(with_no_syntax_known_every_fixture_is_detected_alike_on_every_wire);
    cv_server_destroy(srv);
    fake_backend_fini(&fb);
    for (int i = 0; i < n_cases; i++)
        json_decref(cases[i].j);
    json_decref(judged_wrong);
    curl_global_cleanup();
    return test_report();
}
