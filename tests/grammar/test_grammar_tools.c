/* test_grammar_tools.c — forced tool calls. (1) The recorded tool-call
 * texts of each supported syntax (testdata/toolcalls/<format>.jsonl) that
 * consist of calls only are accepted by the lazy grammar built from the
 * case's tools, so the grammar writes what the peers' parsers read. (2) A
 * random-weight model forced with tool_choice required / named over the
 * recorded OpenCode tools always produces one call of an offered (or the
 * named) tool whose arguments are a JSON object holding every required
 * property. */
#include <dirent.h>

#include "grammar/grammar.h"
#include "gvocab.h"
#include "synth.h"
#include "test.h"

static const char *const syntaxes[] = { "hermes", "qwen3_coder_xml", "llama3_json", "mistral_v11", "mistral_pre_v11" };

static json_t *tools_from_calls(json_t *calls)
{
    json_t *tools = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        json_array_append_new(tools, json_pack("{s:s,s:{s:O,s:{s:s}}}", "type", "function", "function", "name",
                                               json_object_get(c, "name"), "parameters", "type", "object"));
    }
    return tools;
}

TEST(recorded_tool_call_texts_are_accepted_by_the_syntax_grammar)
{
    for (size_t k = 0; k < CV_ARRAY_LEN(syntaxes); k++) {
        char rel[128];
        snprintf(rel, sizeof rel, "toolcalls/%s.jsonl", syntaxes[k]);
        FILE *f = fopen(test_data(rel), "r");
        CHECK(f != NULL);
        if (!f)
            continue;
        char *line = NULL;
        size_t cap = 0;
        int n_cases = 0, n_ok = 0;
        while (getline(&line, &cap, f) > 0) {
            json_t *c = json_loads(line, 0, NULL);
            const char *text = json_string_value(json_object_get(c, "text"));
            json_t *calls = json_object_get(c, "expected_calls");
            json_t *content = json_object_get(c, "expected_content");
            const char *match = json_string_value(json_object_get(c, "match"));
            const char *mode = json_string_value(json_object_get(c, "mode"));
            bool pure = text && json_array_size(calls) > 0 && match && !strcmp(match, "exact") &&
                        (!content || json_is_null(content) || !strcmp(json_string_value(content), "")) &&
                        !json_object_get(c, "expected_reasoning") && mode && strcmp(mode, "partial");
            json_t *tools = json_object_get(c, "tools");
            /* texts the parsers tolerate but the grammar does not write:
             * arguments before the name, text around a bare JSON call,
             * trailing text, an unterminated call */
            if (pure) {
                const char *na = strstr(text, "\"name\""), *ar = strstr(text, "\"arguments\"");
                size_t tl = strlen(text);
                while (tl && strchr(" \n\t", text[tl - 1]))
                    tl--;
                char last = tl ? text[tl - 1] : 0;
                if (ar && na && ar < na)
                    pure = false;
                if (!strcmp(syntaxes[k], "llama3_json") && text[0] != '{')
                    pure = false;
                if (!strcmp(syntaxes[k], "llama3_json") && ar && !strstr(text, "\"parameters\""))
                    pure = false; /* the "arguments" spelling is repaired by the parser, not written */
                if (last != '}' && last != ']' && last != '>')
                    pure = false;
                if (strstr(text, "<tool_call>") && !strstr(text, "</tool_call>"))
                    pure = false;
            }
            if (pure && !tools && !strcmp(syntaxes[k], "qwen3_coder_xml"))
                pure = false; /* XML parameters need the schema */
            if (!pure) {
                json_decref(c);
                continue;
            }
            json_t *own = tools ? json_incref(tools) : tools_from_calls(calls);
            cv_grammar_tools_opts o = { .syntax = syntaxes[k], .tools = own, .parallel = true, .lazy = true };
            cv_grammar *g = NULL;
            cv_err err;
            cv_buf warn = { 0 };
            o.warnings = &warn;
            n_cases++;
            if (cv_grammar_from_tools(&o, &g, &err)) {
                CHECK_MSG(false, "%s %s: %s", syntaxes[k], json_string_value(json_object_get(c, "id")), err.msg);
            } else {
                cv_grammar_state *s = NULL;
                cv_grammar_state_create(g, NULL, &s, NULL);
                size_t len = strlen(text);
                /* trailing whitespace is the parser's business, not the call's */
                while (len && strchr(" \n\t", text[len - 1]))
                    len--;
                int rc = cv_grammar_state_accept_bytes(s, text, len, &err);
                bool ok = rc == 0 && cv_grammar_state_can_end(s);
                if (ok)
                    n_ok++;
                else
                    printf("  %s %s: not accepted (%s): %.120s\n", syntaxes[k],
                           json_string_value(json_object_get(c, "id")), rc ? err.msg : "incomplete", text);
                cv_grammar_state_destroy(s);
                cv_grammar_destroy(g);
            }
            cv_buf_free(&warn);
            json_decref(own);
            json_decref(c);
        }
        free(line);
        fclose(f);
        printf("%s: %d of %d call-only recorded texts accepted\n", syntaxes[k], n_ok, n_cases);
        CHECK(n_cases > 0);
        CHECK_EQ_INT(n_ok, n_cases);
    }
}

static json_t *load_tools(const char *rel)
{
    json_t *rec = json_load_file(test_data(rel), 0, NULL);
    json_t *tools = json_incref(json_object_get(json_object_get(rec, "body"), "tools"));
    json_decref(rec);
    return tools;
}

/* The call's name and arguments object, found in the forced text. */
static bool extract(const char *syntax, const char *text, char *name, size_t cap, json_t **args)
{
    *args = NULL;
    if (!strcmp(syntax, "qwen3_coder_xml")) {
        const char *p = strstr(text, "<function=");
        if (!p)
            return false;
        p += 10;
        const char *e = strchr(p, '>');
        snprintf(name, cap, "%.*s", (int)(e - p), p);
        *args = json_object();
        for (const char *q = strstr(e, "<parameter="); q; q = strstr(q + 1, "<parameter=")) {
            const char *ke = strchr(q, '>');
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(ke - q - 11), q + 11);
            const char *vend = strstr(ke, "</parameter>");
            if (!vend)
                return false;
            json_object_set_new(*args, key, json_stringn(ke + 2, (size_t)(vend - ke - 3)));
        }
        return true;
    }
    if (!strcmp(syntax, "mistral_v11")) {
        const char *p = strstr(text, "[TOOL_CALLS]");
        if (!p)
            return false;
        p += 12;
        const char *b = strchr(p, '{');
        const char *a = strstr(p, "[ARGS]");
        const char *ne = a && a < b ? a : b;
        snprintf(name, cap, "%.*s", (int)(ne - p), p);
        *args = json_loads(b, JSON_DISABLE_EOF_CHECK, NULL);
        return *args != NULL;
    }
    const char *start = strchr(text, '{');
    if (!strcmp(syntax, "mistral_pre_v11")) {
        const char *p = strstr(text, "[TOOL_CALLS]");
        start = p ? strchr(p + 12, '[') : NULL;
    }
    json_t *j = start ? json_loads(start, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    if (json_is_array(j)) {
        json_t *first = json_incref(json_array_get(j, 0));
        json_decref(j);
        j = first;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        return false;
    }
    snprintf(name, cap, "%s", json_string_value(json_object_get(j, "name")) ?: "");
    *args = json_incref(json_object_get(j, !strcmp(syntax, "llama3_json") ? "parameters" : "arguments"));
    json_decref(j);
    return *args != NULL;
}

TEST(forced_calls_name_an_offered_tool_with_its_required_arguments)
{
    cv_grammar_vocab *v = gv_load(test_data("reference/models/tiny-qwen3-gpt2-F32.gguf"));
    json_t *tools = load_tools("clients/opencode/003-v1_chat_completions.json");
    CHECK(v && json_array_size(tools) > 5);
    if (!v || !tools)
        return;
    int32_t n = cv_grammar_vocab_n(v);
    uint64_t *mask = calloc(((size_t)n + 63) / 64, 8);
    synth m;
    synth_init(&m, n, 99);
    int n_calls = 0;
    for (size_t k = 0; k < CV_ARRAY_LEN(syntaxes); k++) {
        for (int named = 0; named < 2; named++) {
            const char *force = named ? "read" : NULL;
            cv_grammar_tools_opts o = { .syntax = syntaxes[k], .tools = tools, .force_name = force };
            cv_grammar *g = NULL;
            cv_err err;
            cv_buf warn = { 0 };
            o.warnings = &warn;
            int rc = cv_grammar_from_tools(&o, &g, &err);
            cv_buf_free(&warn);
            CHECK_MSG(rc == 0, "%s: %s", syntaxes[k], err.msg);
            if (rc)
                continue;
            for (int d = 0; d < 8; d++) {
                cv_grammar_state *s = NULL;
                cv_grammar_state_create(g, v, &s, NULL);
                synth_reset(&m, 77 * k + 13 * d + (uint64_t)named);
                cv_buf text = { 0 };
                for (int step = 0; step < 400 && !cv_grammar_state_done(s); step++) {
                    cv_grammar_state_mask(s, mask, NULL);
                    int32_t left = 400 - step;
                    double sum = synth_weigh(&m, mask, 1.0f);
                    int32_t tok = sum > 0 ? synth_draw(&m, mask, sum) : -1;
                    while (left <= cv_grammar_state_min_bytes(s) + CV_GRAMMAR_BUDGET_WINDOW && tok >= 0 &&
                           cv_grammar_state_min_bytes_after(s, tok) > left - 1) {
                        mask[tok >> 6] &= ~(1ull << (tok & 63));
                        sum -= m.logits[tok];
                        tok = sum > 0 ? synth_draw(&m, mask, sum) : -1;
                    }
                    if (tok < 0 || cv_grammar_state_accept(s, tok, NULL))
                        break;
                    if (!(cv_grammar_vocab_flags(v, tok) & CV_GRAMMAR_TOK_EOG))
                        cv_buf_put_str(&text, cv_grammar_vocab_piece(v, tok));
                    synth_feed(&m, tok);
                }
                CHECK_MSG(cv_grammar_state_done(s) || cv_grammar_state_can_end(s), "%s: incomplete: %.200s",
                          syntaxes[k], text.data);
                char name[128] = "";
                json_t *args = NULL;
                bool ok = extract(syntaxes[k], text.data ? text.data : "", name, sizeof name, &args);
                CHECK_MSG(ok && json_is_object(args), "%s: no call found (done %d, min_bytes %d) in %s", syntaxes[k],
                          cv_grammar_state_done(s), cv_grammar_state_min_bytes(s), text.data);
                json_t *fn = NULL;
                size_t i;
                json_t *t;
                json_array_foreach(tools, i, t) if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), name)) fn = json_object_get(t, "function");
                CHECK_MSG(fn != NULL, "%s: unknown tool '%s'", syntaxes[k], name);
                if (force)
                    CHECK_EQ_STR(name, force);
                json_t *req = json_object_get(json_object_get(fn, "parameters"), "required");
                json_t *r;
                json_array_foreach(req, i, r) CHECK_MSG(json_object_get(args, json_string_value(r)) != NULL,
                                                        "%s %s: required '%s' missing: %.300s", syntaxes[k], name,
                                                        json_string_value(r), text.data);
                n_calls += ok;
                json_decref(args);
                cv_buf_free(&text);
                cv_grammar_state_destroy(s);
            }
            cv_grammar_destroy(g);
        }
    }
    printf("%d forced calls checked\n", n_calls);
    CHECK_EQ_INT(n_calls, (int)CV_ARRAY_LEN(syntaxes) * 16);
    free(mask);
    synth_free(&m);
    json_decref(tools);
    cv_grammar_vocab_destroy(v);
}

int main(void)
{
    test_require_data();
    RUN(recorded_tool_call_texts_are_accepted_by_the_syntax_grammar);
    RUN(forced_calls_name_an_offered_tool_with_its_required_arguments);
    return test_report();
}
