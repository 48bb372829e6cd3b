/* test_grammar_tools.c — forced tool calls, walking the tool-call syntax
 * table (cv_tc_formats, src/chat/toolcall), whose rows carry the
 * descriptors the grammar is built from. (1) Every row has fixture cases
 * (../shared/testdata/toolcalls/<name>.jsonl or corvid's detection cases),
 * and a row with call syntax has a descriptor under its own name. (2) Where
 * it has one, a random-weight model forced with tool_choice required, named
 * and parallel over the recorded OpenCode tools (plus a tool of every kind
 * of parameter), and lazily after free text, always writes what the row's
 * own parser reads back as calls of offered (or the named) tool with
 * arguments holding every required property, nothing else. With no syntax
 * named, output detection reads the same calls from the same text, except
 * for the few rows whose markers another row owns. (3) The recorded
 * tool-call texts of the syntaxes whose grammars were written against them
 * (consisting of calls only) are accepted by the lazy grammar built from the
 * case's tools. */
#include <dirent.h>

#include "chat/chat.h"
#include "grammar/grammar.h"
#include "gvocab.h"
#include "synth.h"
#include "test.h"

static const cv_tool_syntax *syntax_named(const char *name)
{
    return cv_tc_format_syntax(cv_tc_format_find(name));
}

/* ---- (1) the table ---- */

static int count_lines(const char *path, const char *field, const char *value)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        if (!field) {
            n++;
            continue;
        }
        json_t *c = json_loads(line, 0, NULL);
        const char *v = json_string_value(json_object_get(c, field));
        n += v && !strcmp(v, value);
        json_decref(c);
    }
    free(line);
    fclose(f);
    return n;
}

TEST(every_syntax_row_has_fixtures_and_its_descriptor)
{
    for (int k = 0; k < cv_tc_format_count(); k++) {
        const cv_tc_format *f = cv_tc_format_at(k);
        const char *name = cv_tc_format_name(f);
        char rel[128];
        snprintf(rel, sizeof rel, "toolcalls/%s.jsonl", name);
        int n = count_lines(test_data(rel), NULL, NULL) +
                count_lines("tests/chat/toolcall/fixtures/detect.jsonl", "expected_syntax", name);
        CHECK_MSG(n > 0, "%s has no fixture cases", name);
        const cv_tool_syntax *sx = cv_tc_format_syntax(f);
        if (sx)
            CHECK_MSG(!strcmp(sx->name, name), "row %s carries the descriptor of %s", name, sx->name);
        else
            CHECK_MSG(!strcmp(name, "plain_content"), "%s has no descriptor", name);
    }
}

/* ---- (2) forced calls read back ---- */

/* A tool of every parameter kind the syntaxes write differently: raw
 * strings (with the characters markup cares about), numbers, booleans,
 * arrays and objects, optional and required. */
static const char *KINDS =
    "{\"type\": \"function\", \"function\": {\"name\": \"kinds\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"text\": {\"type\": \"string\", \"maxLength\": 12}, \"n\": {\"type\": \"integer\"}, "
    "\"ok\": {\"type\": \"boolean\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", "
    "\"maxLength\": 6}, \"maxItems\": 2}, \"opts\": {\"type\": \"object\", \"properties\": {\"k\": {\"type\": "
    "\"number\"}}, \"required\": [\"k\"], \"additionalProperties\": false}}, \"required\": [\"text\", \"n\", "
    "\"opts\"], \"additionalProperties\": false}}}";

static json_t *load_tools(const char *rel)
{
    json_t *rec = json_load_file(test_data(rel), 0, NULL);
    json_t *tools = json_incref(json_object_get(json_object_get(rec, "body"), "tools"));
    json_decref(rec);
    json_array_append_new(tools, json_loads(KINDS, 0, NULL));
    return tools;
}

static const json_t *tool_fn(const json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *fn = json_object_get(t, "function");
        if (!strcmp(json_string_value(json_object_get(fn, "name")), name))
            return fn;
    }
    return NULL;
}

/* Draws one output from the grammar with the random model (at most
 * max_steps tokens, ending complete within them). */
static void generate(cv_grammar *g, const cv_grammar_vocab *v, synth *m, uint64_t seed, int max_steps, uint64_t *mask,
                     cv_buf *text, bool *complete)
{
    cv_grammar_state *s = NULL;
    cv_grammar_state_create(g, v, &s, NULL);
    synth_reset(m, seed);
    for (int step = 0; step < max_steps && !cv_grammar_state_done(s); step++) {
        cv_grammar_state_mask(s, mask, NULL);
        int32_t left = max_steps - step;
        double sum = synth_weigh(m, mask, 1.0f);
        int32_t tok = sum > 0 ? synth_draw(m, mask, sum) : -1;
        while (left <= cv_grammar_state_min_bytes(s) + CV_GRAMMAR_BUDGET_WINDOW && tok >= 0 &&
               cv_grammar_state_min_bytes_after(s, tok) > left - 1) {
            mask[tok >> 6] &= ~(1ull << (tok & 63));
            sum -= m->logits[tok];
            tok = sum > 0 ? synth_draw(m, mask, sum) : -1;
        }
        if (tok < 0 || cv_grammar_state_accept(s, tok, NULL))
            break;
        if (!(cv_grammar_vocab_flags(v, tok) & CV_GRAMMAR_TOK_EOG))
            cv_buf_put_str(text, cv_grammar_vocab_piece(v, tok));
        synth_feed(m, tok);
    }
    *complete = cv_grammar_state_done(s) || cv_grammar_state_can_end(s);
    cv_grammar_state_destroy(s);
}

/* Rows whose calls output detection reads as another row's, because that row
 * owns their first marker: Functionary v3.1's <function= is Qwen3-Coder's
 * (whose reader wants <parameter=> tags), and Functionary v3.2's calls carry
 * no marker at all. A template names them. */
static bool detection_misses(const char *name)
{
    return !strcmp(name, "functionary_v3_1") || !strcmp(name, "functionary_v3_2");
}

typedef struct rb {
    int n_calls, n_checked;
} rb;

/* The row's parser over text: n calls (1 when !parallel) of offered tools
 * (force when set) with every required argument, and no content (prose
 * when lazy). With detect, no format named. */
static void read_back(const cv_tc_format *f, bool detect, const json_t *tools, const char *force, bool parallel,
                      const char *prose, const cv_buf *text, rb *out)
{
    const char *name = cv_tc_format_name(f);
    cv_chat_parse_opts o = { .format = detect ? NULL : f, .detect = detect, .tools = tools, .id_seed = 1 };
    cv_chat_parse_result r = { 0 };
    cv_err err = { 0 };
    const char *t = text->data ? text->data : "";
    CHECK(cv_chat_parse_text(&o, t, text->len, &r, &err) == 0);
    const char *mode = detect ? "detected" : "named";
    CHECK_MSG(r.n_calls >= 1 && (parallel || r.n_calls == 1), "%s (%s): %d calls from %.400s", name, mode, r.n_calls, t);
    char *content = cv_xstrndup(r.content.data ? r.content.data : "", r.content.len);
    CHECK_MSG(!strcmp(content, prose), "%s (%s): content \"%.200s\" from %.400s", name, mode, content, t);
    free(content);
    for (int i = 0; i < r.n_calls; i++) {
        const json_t *fn = tool_fn(tools, r.calls[i].name);
        CHECK_MSG(fn != NULL, "%s (%s): unknown tool '%s' in %.300s", name, mode, r.calls[i].name, t);
        if (force)
            CHECK_MSG(!strcmp(r.calls[i].name, force), "%s (%s): called %s, not %s", name, mode, r.calls[i].name,
                      force);
        json_t *args = json_loads(r.calls[i].arguments, JSON_ALLOW_NUL, NULL); /* raw text may hold any byte */
        CHECK_MSG(json_is_object(args), "%s (%s): arguments %s", name, mode, r.calls[i].arguments);
        size_t k;
        json_t *req;
        json_array_foreach(json_object_get(json_object_get(fn, "parameters"), "required"), k, req)
            CHECK_MSG(json_object_get(args, json_string_value(req)) != NULL,
                      "%s (%s) %s: required '%s' missing from %s\n  text: %.400s", name, mode, r.calls[i].name,
                      json_string_value(req), r.calls[i].arguments, t);
        json_decref(args);
    }
    out->n_calls += r.n_calls;
    out->n_checked++;
    cv_chat_parse_result_fini(&r);
}

TEST(every_syntax_with_calls_forces_calls_its_own_parser_reads_back)
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
    int n_rows = 0;
    rb named = { 0 }, detected = { 0 };
    /* required, named (the tool with every kind of parameter), parallel,
     * lazy after free text */
    static const struct {
        const char *force;
        bool parallel, lazy;
    } modes[] = { { NULL, false, false }, { "kinds", false, false }, { NULL, true, false }, { "kinds", false, true } };
    for (int k = 0; k < cv_tc_format_count(); k++) {
        const cv_tc_format *f = cv_tc_format_at(k);
        const cv_tool_syntax *sx = cv_tc_format_syntax(f);
        if (!sx)
            continue;
        n_rows++;
        for (size_t md = 0; md < CV_ARRAY_LEN(modes); md++) {
            cv_grammar_tools_opts o = { .syntax = sx, .tools = tools, .force_name = modes[md].force,
                                        .parallel = modes[md].parallel, .lazy = modes[md].lazy };
            cv_grammar *g = NULL;
            cv_err err = { 0 };
            cv_buf warn = { 0 };
            o.warnings = &warn;
            int rc = cv_grammar_from_tools(&o, &g, &err);
            cv_buf_free(&warn);
            if (rc == CV_EUNSUPPORTED && modes[md].lazy)
                continue; /* a trigger that is not ASCII: no lazy form (grammar.h) */
            CHECK_MSG(rc == 0, "%s: %s", cv_tc_format_name(f), err.msg);
            if (rc)
                continue;
            for (int d = 0; d < 2; d++) {
                cv_buf text = { 0 };
                /* lazy: free text first, held to a fixed sentence here so
                 * that what follows is the call */
                const char *prose = modes[md].lazy ? "Let me look." : "";
                cv_buf_puts(&text, prose);
                bool complete;
                if (modes[md].lazy) {
                    /* the calls from the grammar without the free part */
                    cv_grammar_state *s0 = NULL;
                    cv_grammar *gc = NULL;
                    cv_grammar_tools_opts oc = o;
                    oc.lazy = false;
                    CHECK(cv_grammar_from_tools(&oc, &gc, NULL) == 0);
                    generate(gc, v, &m, 1000 * (uint64_t)k + 10 * md + (uint64_t)d, 400, mask, &text, &complete);
                    /* the lazy grammar accepts the whole text */
                    cv_grammar_state_create(g, NULL, &s0, NULL);
                    CHECK_MSG(cv_grammar_state_accept_bytes(s0, text.data, text.len, NULL) == 0 &&
                                  cv_grammar_state_can_end(s0),
                              "%s: the lazy grammar refuses %.300s", cv_tc_format_name(f), text.data);
                    cv_grammar_state_destroy(s0);
                    cv_grammar_destroy(gc);
                } else {
                    generate(g, v, &m, 1000 * (uint64_t)k + 10 * md + (uint64_t)d, 400, mask, &text, &complete);
                }
                CHECK_MSG(complete, "%s: incomplete after 400 tokens: %.300s", cv_tc_format_name(f), text.data);
                read_back(f, false, tools, modes[md].force, modes[md].parallel, prose, &text, &named);
                if (!detection_misses(cv_tc_format_name(f)))
                    read_back(f, true, tools, modes[md].force, modes[md].parallel, prose, &text, &detected);
                cv_buf_free(&text);
            }
            cv_grammar_destroy(g);
        }
    }
    printf("%d syntaxes: %d forced outputs read back by their own parser (%d calls), %d by detection (%d calls)\n",
           n_rows, named.n_checked, named.n_calls, detected.n_checked, detected.n_calls);
    CHECK(n_rows >= cv_tc_format_count() - 1);
    free(mask);
    synth_free(&m);
    json_decref(tools);
    cv_grammar_vocab_destroy(v);
}

/* ---- (3) recorded texts ---- */

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
    static const char *const syntaxes[] = { "hermes", "qwen3_coder_xml", "llama3_json", "mistral_v11",
                                            "mistral_pre_v11" };
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
            cv_grammar_tools_opts o = { .syntax = syntax_named(syntaxes[k]), .tools = own, .parallel = true,
                                        .lazy = true };
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

TEST(a_syntax_without_descriptor_or_lazy_form_is_refused_by_name)
{
    json_t *tools = json_loads(KINDS, JSON_DECODE_ANY, NULL);
    json_t *arr = json_array();
    json_array_append_new(arr, tools);
    cv_grammar *g = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = NULL, .tools = arr }, &g, &err),
                 CV_EUNSUPPORTED);
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = syntax_named("deepseek_v3"), .tools = arr,
                                                                  .lazy = true },
                                       &g, &err),
                 CV_EUNSUPPORTED);
    CHECK(strstr(err.msg, "deepseek_v3") != NULL);
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = syntax_named("functionary_v3_2"),
                                                                  .tools = arr, .lazy = true },
                                       &g, &err),
                 CV_EUNSUPPORTED);
    json_decref(arr);
}

TEST(names_a_syntax_cannot_write_are_refused)
{
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"a b\", \"parameters\": "
                               "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\"}}}}}]",
                               0, NULL);
    cv_grammar *g = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = syntax_named("pythonic"), .tools = tools },
                                       &g, &err),
                 CV_EINVAL);
    CHECK(strstr(err.msg, "pythonic") != NULL);
    /* a JSON syntax writes any name */
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = syntax_named("hermes"), .tools = tools },
                                       &g, &err),
                 0);
    cv_grammar_destroy(g);
    json_decref(tools);
    tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                       "\"object\", \"properties\": {\"file path\": {\"type\": \"string\"}}}}}]",
                       0, NULL);
    CHECK_EQ_INT(cv_grammar_from_tools(&(cv_grammar_tools_opts){ .syntax = syntax_named("lfm2"), .tools = tools },
                                       &g, &err),
                 CV_EINVAL);
    json_decref(tools);
}

int main(void)
{
    test_require_data();
    RUN(every_syntax_row_has_fixtures_and_its_descriptor);
    RUN(every_syntax_with_calls_forces_calls_its_own_parser_reads_back);
    RUN(recorded_tool_call_texts_are_accepted_by_the_syntax_grammar);
    RUN(a_syntax_without_descriptor_or_lazy_form_is_refused_by_name);
    RUN(names_a_syntax_cannot_write_are_refused);
    return test_report();
}
