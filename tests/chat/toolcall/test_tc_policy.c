/* test_tc_policy.c — what the parser promises beyond any one fixture: only
 * declared tools count, tool_choice none and parallel_tool_calls false,
 * marker text inside string arguments, prose and JSON answers that are not
 * calls (negative cases), ids (generated, injected, carried by the format,
 * Mistral's 9 characters), the cross-format fallback, output detection
 * (switching and switching back, the call policy, fit), reasoning (calls inside
 * it, calls after it, an unclosed block ending in a call, inline mode, the
 * prompt's opener), fenced JSON responses, the hold bound, and that every one
 * of these gives the same result in every chunking with a well-formed event
 * stream. */
#include "tc_harness.h"
#include "test.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}}}}}]";

typedef struct popt {
    const char *format;
    const char *tools; /* JSON text, NULL: none given */
    bool none, no_parallel, inline_r, json_response, detect;
    const char *opener;
    cv_chat_id_fn id_fn;
} popt;

/* Parses text whole, then in 1-byte and random pieces and checks they agree
 * and that the event stream is well formed; returns the whole result in out
 * (caller finis it). */
static void parse(const popt *po, const char *text, tc_coll *out)
{
    cv_chat_parse_opts o = { 0 };
    o.format = cv_tc_format_find(po->format);
    CHECK_MSG(o.format != NULL, "format %s", po->format);
    json_t *tools = po->tools ? json_loads(po->tools, 0, NULL) : NULL;
    o.tools = tools;
    o.tool_choice_none = po->none;
    o.no_parallel_calls = po->no_parallel;
    o.reasoning_inline = po->inline_r;
    o.json_response = po->json_response;
    o.detect = po->detect;
    o.id_seed = 7;
    o.id_fn = po->id_fn;
    if (po->opener)
        o.reasoning_open = cv_str_of(po->opener);
    size_t len = strlen(text);
    tc_run_chunked(&o, text, len, CH_WHOLE, 0, false, out, NULL);
    CHECK_MSG(!out->bad[0], "%s: %s", po->format, out->bad);
    static const int hows[] = { CH_BYTES, CH_RANDOM, CH_TOKENS };
    for (size_t h = 0; h < CV_ARRAY_LEN(hows); h++) {
        tc_coll other;
        tc_run_chunked(&o, text, len, hows[h], 99 + h, false, &other, NULL);
        char why[512];
        CHECK_MSG(tc_same_result(&out->res, &other.res, why, sizeof why), "%s chunking %zu: %s\n  text: %s",
                  po->format, h, why, text);
        CHECK_MSG(!other.bad[0], "%s chunking %zu: %s", po->format, h, other.bad);
        tc_coll_fini(&other);
    }
    for (int i = 0; i < out->res.n_calls; i++) {
        json_t *a = json_loads(out->res.calls[i].arguments, 0, NULL);
        CHECK_MSG(json_is_object(a), "call %d arguments %s are not an object", i, out->res.calls[i].arguments);
        json_decref(a);
    }
    json_decref(tools);
}

static const char *content(tc_coll *c) { return c->res.content.data ? c->res.content.data : ""; }
static const char *reasoning(tc_coll *c) { return c->res.reasoning.data ? c->res.reasoning.data : ""; }

/* ---- declared tools ---- */

TEST(only_declared_tools_count_and_their_markup_is_removed)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS },
          "Checking.<tool_call>{\"name\": \"rm_rf\", \"arguments\": {\"path\": \"/\"}}</tool_call>"
          "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(c.res.calls[0].name, "get_weather");
    CHECK_EQ_INT(c.res.calls[0].id[0] != 0, 1);
    CHECK_EQ_STR(content(&c), "Checking.");
    tc_coll_fini(&c);
}

TEST(an_empty_tools_list_allows_no_calls_at_all)
{
    tc_coll c;
    parse(&(popt){ .format = "qwen3_coder_xml", .tools = "[]" },
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), "");
    tc_coll_fini(&c);
}

TEST(a_functions_prefix_resolves_to_the_declared_name)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, "<tool_call>{\"name\": \"functions.get_weather\", \"arguments\": {}}</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    if (c.res.n_calls)
        CHECK_EQ_STR(c.res.calls[0].name, "get_weather");
    tc_coll_fini(&c);
}

TEST(tool_choice_none_yields_no_calls_but_still_removes_markup)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .none = true },
          "Sure.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), "Sure.");
    tc_coll_fini(&c);
    parse(&(popt){ .format = "mistral_v11", .tools = TOOLS, .none = true }, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), "");
    tc_coll_fini(&c);
}

TEST(parallel_tool_calls_false_keeps_the_first_call)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .no_parallel = true },
          "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}</tool_call>\n"
          "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(c.res.calls[0].arguments, "{\"city\": \"A\"}");
    tc_coll_fini(&c);
    parse(&(popt){ .format = "pythonic", .tools = TOOLS, .no_parallel = true },
          "[get_weather(city='A'), get_weather(city='B'), write_file(path='x', content='y')]", &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    tc_coll_fini(&c);
}

/* ---- markers inside strings ---- */

TEST(marker_text_inside_a_string_argument_never_creates_a_second_call)
{
    static const struct {
        const char *format, *text;
    } rows[] = {
        { "hermes", "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"t.md\", \"content\": "
                    "\"use <tool_call>{\\\"name\\\": \\\"get_weather\\\"}</tool_call> and </tool_call>\"}}</tool_call>" },
        { "qwen3_coder_xml", "<tool_call>\n<function=write_file>\n<parameter=path>\nt.md\n</parameter>\n"
                             "<parameter=content>\nuse <tool_call> then <function=get_weather> here\n</parameter>\n"
                             "</function>\n</tool_call>" },
        { "mistral_v11", "[TOOL_CALLS]write_file[ARGS]{\"path\": \"t\", \"content\": \"[TOOL_CALLS]get_weather[ARGS]{}\"}" },
        { "kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>"
                     "{\"path\": \"t\", \"content\": \"<|tool_call_begin|>functions.get_weather:1\"}<|tool_call_end|>"
                     "<|tool_calls_section_end|>" },
        { "llama3_json", "{\"name\": \"write_file\", \"parameters\": {\"path\": \"t\", \"content\": \"{\\\"name\\\": "
                         "\\\"get_weather\\\", \\\"parameters\\\": {}}\"}}" },
        { "pythonic", "[write_file(path='t', content='[get_weather(city=\"x\")]')]" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        tc_coll c;
        parse(&(popt){ .format = rows[i].format, .tools = TOOLS }, rows[i].text, &c);
        CHECK_MSG(c.res.n_calls == 1 && !strcmp(c.res.calls[0].name, "write_file"), "%s: %d calls", rows[i].format,
                  c.res.n_calls);
        tc_coll_fini(&c);
    }
}

/* ---- negative cases ---- */

TEST(prose_that_mentions_markers_stays_content)
{
    static const struct {
        const char *format, *text;
    } rows[] = {
        { "hermes", "Wrap calls in <tool_call> tags, like <tool_call> this." },
        { "hermes", "The tag </tool_call> closes a call." },
        { "qwen3_coder_xml", "In XML you write <function=name> and <parameter=x>." },
        { "mistral_v11", "Mistral models emit [TOOL_CALLS] before calls." },
        { "phi4_mini", "Use functools.partial(f, 1) to bind arguments." },
        { "command_r_plus", "Action: none needed, the answer is 4." },
        { "pythonic", "[link text](https://example.com) is markdown." },
        { "pythonic", "[1, 2, 3] is a list." },
        { "llama3_json", "function f() { return 1; }" },
        { "xlam", "[\"a\", \"b\"] are the options." },
        { "deepseek_v3", "DeepSeek writes <｜tool▁calls▁begin｜> here." },
        { "gemma4", "Gemma writes <|tool_call> tokens." },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        tc_coll c;
        parse(&(popt){ .format = rows[i].format, .tools = TOOLS }, rows[i].text, &c);
        CHECK_MSG(c.res.n_calls == 0, "%s: %s gave %d calls", rows[i].format, rows[i].text, c.res.n_calls);
        CHECK_MSG(!strcmp(content(&c), rows[i].text), "%s: content \"%s\"", rows[i].format, content(&c));
        tc_coll_fini(&c);
    }
}

TEST(json_answers_that_are_not_calls_stay_content)
{
    static const struct {
        const char *format, *text;
    } rows[] = {
        { "llama3_json", "{\"answer\": 42, \"unit\": \"m\"}" },
        { "llama3_json", "{\"name\": \"Ada Lovelace\", \"born\": 1815}" }, /* a name but no parameters */
        { "llama3_json", "{\"name\": \"undeclared_tool\", \"parameters\": {}}" },
        { "xlam", "[{\"name\": \"Ada\"}, {\"name\": \"Bob\"}]" },
        { "pythonic", "[undeclared(x=1)]" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        tc_coll c;
        parse(&(popt){ .format = rows[i].format, .tools = TOOLS }, rows[i].text, &c);
        CHECK_MSG(c.res.n_calls == 0, "%s: %s gave %d calls", rows[i].format, rows[i].text, c.res.n_calls);
        CHECK_MSG(!strcmp(content(&c), rows[i].text), "%s: content \"%s\"", rows[i].format, content(&c));
        tc_coll_fini(&c);
    }
}

TEST(a_bare_call_in_prose_keeps_the_prose_around_it)
{
    tc_coll c;
    parse(&(popt){ .format = "llama3_json", .tools = TOOLS },
          "Here: {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}} and more.", &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(content(&c), "Here:  and more.");
    tc_coll_fini(&c);
}

/* ---- ids ---- */

static void fixed_id(void *ud, int index, cv_buf *out)
{
    (void)ud;
    cv_buf_printf(out, "id-%d", index);
}

TEST(ids_are_generated_injected_or_taken_from_the_format)
{
    const char *two = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>"
                      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
    tc_coll a, b;
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, two, &a);
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, two, &b);
    CHECK_EQ_INT(a.res.n_calls, 2);
    CHECK(!strncmp(a.res.calls[0].id, "call_", 5) && strlen(a.res.calls[0].id) == 29);
    CHECK(strcmp(a.res.calls[0].id, a.res.calls[1].id)); /* distinct */
    CHECK_EQ_STR(a.res.calls[1].id, b.res.calls[1].id);  /* same seed, same ids */
    tc_coll_fini(&a);
    tc_coll_fini(&b);
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .id_fn = fixed_id }, two, &a);
    CHECK_EQ_STR(a.res.calls[0].id, "id-0");
    CHECK_EQ_STR(a.res.calls[1].id, "id-1");
    tc_coll_fini(&a);
    parse(&(popt){ .format = "mistral_v11", .tools = TOOLS }, "[TOOL_CALLS]get_weather[ARGS]{}", &a);
    CHECK_EQ_INT(strlen(a.res.calls[0].id), 9); /* Mistral templates demand 9 alphanumerics */
    tc_coll_fini(&a);
    parse(&(popt){ .format = "mistral_v11", .tools = TOOLS }, "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{}", &a);
    CHECK_EQ_STR(a.res.calls[0].id, "a1b2c3d4e");
    tc_coll_fini(&a);
    /* the id comes before [ARGS], never after: whole or streamed a token at
     * a time, this is no call (found by fuzzing: streamed, [ARGS] was read
     * twice and the call taken) */
    const char *late = "[TOOL_CALLS]get_weather[ARGS] [CALL_ID]a1b2c3d4e[ARGS]{}";
    parse(&(popt){ .format = "mistral_v11", .tools = TOOLS }, late, &a);
    CHECK_EQ_INT(a.res.n_calls, 0);
    CHECK_EQ_STR(content(&a), late);
    tc_coll_fini(&a);
}

/* ---- cross-format fallback ---- */

TEST(a_call_in_another_format_is_recovered_when_the_chosen_one_finds_none)
{
    static const struct {
        const char *format, *text;
    } rows[] = {
        { "hermes", "Let me look. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}" },
        { "mistral_v11", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>" },
        { "plain_content", "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>" },
        { "llama3_json", "<|tool_call_start|>[get_weather(city='Oslo')]<|tool_call_end|>" },
        { "kimi_k2", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
                     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        tc_coll c;
        parse(&(popt){ .format = rows[i].format, .tools = TOOLS }, rows[i].text, &c);
        CHECK_MSG(c.res.n_calls == 1, "%s: %d calls from %s", rows[i].format, c.res.n_calls, rows[i].text);
        if (c.res.n_calls == 1)
            CHECK_MSG(!strcmp(c.res.calls[0].arguments, "{\"city\": \"Oslo\"}"), "%s: %s", rows[i].format,
                      c.res.calls[0].arguments);
        tc_coll_fini(&c);
    }
}

TEST(the_fallback_takes_no_undeclared_call_and_no_call_without_tools)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, "[TOOL_CALLS]format_disk[ARGS]{}", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), "[TOOL_CALLS]format_disk[ARGS]{}");
    tc_coll_fini(&c);
    parse(&(popt){ .format = "hermes", .tools = "[]" }, "[TOOL_CALLS]get_weather[ARGS]{}", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    tc_coll_fini(&c);
}

/* ---- output detection ---- */

TEST(hermes_reads_a_glm_body_with_the_glm_dialect)
{
    /* the envelope's GLM dialect was never used: GLM bodies inside Hermes'
     * <tool_call> were read as Qwen3-Coder XML and lost */
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS },
          "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n"
          "<arg_value>3</arg_value>\n</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    if (c.res.n_calls == 1)
        CHECK_EQ_STR(c.res.calls[0].arguments, "{\"city\": \"Oslo\", \"days\": 3}");
    tc_coll_fini(&c);
    /* but a word after a lone tag at the end is still a word */
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, "Use <tool_call> tags", &c);
    CHECK_EQ_STR(content(&c), "Use <tool_call> tags");
    tc_coll_fini(&c);
}

TEST(a_detected_syntax_that_turns_out_to_be_prose_gives_the_format_back)
{
    /* [TOOL_CALLS] switches to Mistral, finds prose, and Hermes is back:
     * its call gets Hermes' ids (call_ + 24), not Mistral's 9 characters */
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true },
          "Mistral writes [TOOL_CALLS] first. <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>",
          &c);
    CHECK_EQ_STR(content(&c), "Mistral writes [TOOL_CALLS] first.");
    CHECK_EQ_INT(c.res.n_calls, 1);
    if (c.res.n_calls == 1)
        CHECK_EQ_INT((int)strlen(c.res.calls[0].id), 29);
    CHECK(c.detected == cv_tc_format_find("hermes"));
    tc_coll_fini(&c);
    /* and a switch that holds keeps the new syntax's conventions */
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true }, "[TOOL_CALLS]get_weather[ARGS]{}", &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    if (c.res.n_calls == 1)
        CHECK_EQ_INT((int)strlen(c.res.calls[0].id), 9);
    CHECK(c.detected == cv_tc_format_find("mistral_v11"));
    tc_coll_fini(&c);
}

TEST(after_a_call_another_syntax_is_text)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true },
          "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call> then [TOOL_CALLS]write_file[ARGS]{}",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(content(&c), "then [TOOL_CALLS]write_file[ARGS]{}");
    tc_coll_fini(&c);
    /* but more calls in the syntax found first are calls */
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true },
          "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}} and {\"name\": \"get_weather\", "
          "\"arguments\": {\"city\": \"B\"}}",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 2);
    CHECK_EQ_STR(content(&c), "and");
    tc_coll_fini(&c);
}

TEST(detection_follows_the_call_policy)
{
    static const char *text = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}, "
                              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}]";
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true, .no_parallel = true }, text, &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    tc_coll_fini(&c);
    /* bare shapes are not even looked for when no call may come of them */
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true, .none = true }, text, &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), text);
    tc_coll_fini(&c);
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true, .json_response = true }, text, &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    tc_coll_fini(&c);
    /* an undeclared call in a marked syntax is removed, as in the format's own */
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true }, "Ok.[TOOL_CALLS]format_disk[ARGS]{}", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK_EQ_STR(content(&c), "Ok.");
    tc_coll_fini(&c);
}

TEST(without_a_tool_list_any_bare_call_shape_counts)
{
    /* parse-tools with no --tools: nothing to fit against, shapes decide */
    tc_coll c;
    parse(&(popt){ .format = "hermes", .detect = true }, "[lookup(q='x', n=2)]", &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    if (c.res.n_calls == 1)
        CHECK_EQ_STR(c.res.calls[0].arguments, "{\"q\": \"x\", \"n\": 2}");
    CHECK(c.detected == cv_tc_format_find("pythonic"));
    tc_coll_fini(&c);
    parse(&(popt){ .format = "hermes", .detect = true }, "{\"answer\": 42}", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    tc_coll_fini(&c);
}

/* Detection holds a bare JSON object back while it could still be a call;
 * one that shows a key no call has, or names an undeclared tool, is data and
 * streams at once instead of at its end. */
TEST(a_bare_json_answer_is_released_as_soon_as_it_cannot_be_a_call)
{
    static const char *heads[] = { "Here: {\"answer\": \"", "{\"name\": \"Ada\", \"arguments\": {\"bio\": \"",
                                   "[{\"id\": 1, \"note\": \"" };
    json_t *tools = json_loads(TOOLS, 0, NULL);
    for (size_t i = 0; i < CV_ARRAY_LEN(heads); i++) {
        cv_chat_parse_opts o = { .format = cv_tc_format_find("hermes"), .tools = tools, .detect = true, .id_seed = 1 };
        tc_coll c;
        tc_coll_init(&c);
        cv_chat_parse *p = NULL;
        CHECK(cv_chat_parse_create(&o, tc_coll_fn, &c, &p, NULL) == 0);
        cv_chat_parse_feed(p, heads[i], strlen(heads[i]), NULL);
        for (int k = 0; k < 200; k++)
            cv_chat_parse_feed(p, "text of the answer ", 19, NULL);
        CHECK_MSG(c.res.content.len > 3000, "%s...: only %zu bytes streamed before the end", heads[i],
                  c.res.content.len);
        cv_chat_parse_finish(p, NULL);
        CHECK_EQ_INT(c.res.n_calls, 0);
        cv_chat_parse_destroy(p);
        tc_coll_fini(&c);
    }
    json_decref(tools);
}

TEST(reasoning_markers_of_another_syntax_switch_to_it)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true },
          "<seed:think>hm</seed:think>Done.", &c);
    CHECK_EQ_STR(reasoning(&c), "hm");
    CHECK_EQ_STR(content(&c), "Done.");
    tc_coll_fini(&c);
    /* but only with detection on */
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, "<seed:think>hm</seed:think>Done.", &c);
    CHECK_EQ_STR(content(&c), "<seed:think>hm</seed:think>Done.");
    tc_coll_fini(&c);
    /* and only when it opens the reply: in prose it is a word, and the rest
     * of the reply stays content */
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .detect = true },
          "Magistral thinks in [THINK] blocks. Then it answers.", &c);
    CHECK_EQ_STR(content(&c), "Magistral thinks in [THINK] blocks. Then it answers.");
    CHECK_EQ_STR(reasoning(&c), "");
    tc_coll_fini(&c);
}

/* ---- reasoning ---- */

TEST(a_call_inside_closed_reasoning_is_not_a_call_but_one_after_it_is)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS },
          "<think>I could <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\"}}</tool_call> maybe"
          "</think>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Y\"}}</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(c.res.calls[0].arguments, "{\"city\": \"Y\"}");
    CHECK(strstr(reasoning(&c), "<tool_call>") != NULL);
    tc_coll_fini(&c);
}

TEST(a_call_ending_unclosed_reasoning_counts_and_one_inside_it_does_not)
{
    tc_coll c;
    /* the model forgot </think> and acted */
    parse(&(popt){ .format = "qwen3_coder_xml", .tools = TOOLS, .opener = "<think>\n" },
          "Need the weather.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
          "</tool_call>",
          &c);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK_EQ_STR(reasoning(&c), "Need the weather.");
    tc_coll_fini(&c);
    /* ... but here it keeps thinking after the call text: no call */
    parse(&(popt){ .format = "qwen3_coder_xml", .tools = TOOLS, .opener = "<think>\n" },
          "I might write <tool_call>\n<function=get_weather>\n</function>\n</tool_call> but no, I will answer.", &c);
    CHECK_EQ_INT(c.res.n_calls, 0);
    CHECK(strstr(reasoning(&c), "but no, I will answer.") != NULL);
    tc_coll_fini(&c);
}

TEST(inline_reasoning_keeps_the_block_and_its_markers_in_the_content)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = TOOLS, .inline_r = true, .opener = "<think>\n" }, "hm</think>Hi", &c);
    CHECK_EQ_STR(content(&c), "<think>\nhm</think>Hi");
    CHECK_EQ_STR(reasoning(&c), "");
    tc_coll_fini(&c);
}

TEST(a_reply_that_starts_by_closing_reasoning_had_none)
{
    tc_coll c;
    parse(&(popt){ .format = "minimax_m3", .tools = TOOLS }, "</mm:think>Hello", &c);
    CHECK_EQ_STR(content(&c), "Hello");
    tc_coll_fini(&c);
    /* elsewhere a stray closer is text */
    parse(&(popt){ .format = "hermes", .tools = TOOLS }, "a </think> b", &c);
    CHECK_EQ_STR(content(&c), "a </think> b");
    tc_coll_fini(&c);
}

TEST(the_prompt_opener_is_found_only_when_the_prompt_leaves_reasoning_open)
{
    static const struct {
        const char *format, *prompt, *opener;
    } rows[] = {
        { "qwen3_coder_xml", "<|im_start|>assistant\n<think>\n", "<think>\n" },
        { "qwen3_coder_xml", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "" },
        { "qwen3_coder_xml", "<|im_start|>assistant\n", "" },
        { "hermes", "system: use <think> tags<|im_start|>assistant\n", "" },
        { "command_r7b", "<|CHATBOT_TOKEN|><|START_THINKING|>", "<|START_THINKING|>" },
        { "mistral_v11", "[INST]hi[/INST][THINK]", "[THINK]" },
        { "apriel", "<|begin_assistant|>\nHere are my reasoning steps:\n", "Here are my reasoning steps:\n" },
        { "gpt_oss_harmony", "<|start|>assistant", "" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        cv_str o = cv_chat_parse_prompt_opener(cv_tc_format_find(rows[i].format), cv_str_of(rows[i].prompt));
        CHECK_MSG(cv_str_eqz(o, rows[i].opener), "%s: opener \"%.*s\", expected \"%s\"", rows[i].format, (int)o.len,
                  o.ptr, rows[i].opener);
    }
}

/* ---- content ---- */

TEST(a_fenced_json_response_loses_its_fence)
{
    tc_coll c;
    parse(&(popt){ .format = "hermes", .tools = NULL, .json_response = true }, "```json\n{\"a\": 1}\n```", &c);
    CHECK_EQ_STR(content(&c), "{\"a\": 1}");
    tc_coll_fini(&c);
}

TEST(whitespace_is_trimmed_only_at_the_ends_of_each_kind)
{
    tc_coll c;
    parse(&(popt){ .format = "pythonic", .tools = TOOLS }, "  Look: <|python_start|>[get_weather(city='A')]<|python_end|> done.\n\n", &c);
    CHECK_EQ_STR(content(&c), "Look:  done.");
    CHECK_EQ_INT(c.res.n_calls, 1);
    tc_coll_fini(&c);
}

TEST(speculative_text_past_the_hold_bound_is_released_as_text)
{
    /* a marker followed by an endless unterminated string: held up to the
     * bound, then given back as content, and parsing goes on after it */
    size_t big = CV_TC_MAX_HOLD + 4096;
    cv_buf t = { 0 };
    cv_buf_puts(&t, "{\"name\": \"");
    for (size_t i = 0; i < big; i++)
        cv_buf_putc(&t, 'a' + (char)(i % 26));
    cv_buf_puts(&t, " <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>");
    cv_chat_parse_opts o = { .format = cv_tc_format_find("hermes") };
    json_t *tools = json_loads(TOOLS, 0, NULL);
    o.tools = tools;
    tc_coll c;
    tc_run_chunked(&o, t.data, t.len, CH_RANDOM, 3, false, &c, NULL);
    CHECK_EQ_INT(c.res.n_calls, 1);
    CHECK(c.res.content.len >= big);
    tc_coll_fini(&c);
    json_decref(tools);
    cv_buf_free(&t);
}

TEST(bad_tools_are_an_error_not_a_crash)
{
    cv_chat_parse *p = NULL;
    cv_err err = { 0 };
    json_t *t = json_loads("{\"not\": \"an array\"}", 0, NULL);
    cv_chat_parse_opts o = { .tools = t };
    CHECK_EQ_INT(cv_chat_parse_create(&o, tc_coll_fn, NULL, &p, &err), CV_EINVAL);
    CHECK(p == NULL && err.msg[0]);
    json_decref(t);
    t = json_loads("[{\"type\": \"function\", \"function\": {\"description\": \"no name\"}}]", 0, NULL);
    o.tools = t;
    CHECK_EQ_INT(cv_chat_parse_create(&o, tc_coll_fn, NULL, &p, &err), CV_EINVAL);
    json_decref(t);
}

TEST(feeding_after_finish_is_an_error)
{
    tc_coll c;
    tc_coll_init(&c);
    cv_chat_parse *p;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_chat_parse_create(NULL, tc_coll_fn, &c, &p, &err), 0);
    CHECK_EQ_INT(cv_chat_parse_feed(p, "hi", 2, &err), 0);
    CHECK_EQ_INT(cv_chat_parse_finish(p, &err), 0);
    CHECK_EQ_INT(cv_chat_parse_feed(p, "x", 1, &err), CV_EINVAL);
    CHECK_EQ_INT(cv_chat_parse_finish(p, &err), CV_EINVAL);
    cv_chat_parse_destroy(p);
    CHECK_EQ_STR(c.res.content.data, "hi");
    tc_coll_fini(&c);
}

TEST(an_empty_response_is_empty_in_every_format)
{
    for (int i = 0; i < cv_tc_format_count(); i++)
        for (int detect = 0; detect < 2; detect++) {
            tc_coll c;
            parse(&(popt){ .format = cv_tc_format_name(cv_tc_format_at(i)), .tools = TOOLS, .detect = detect }, "", &c);
            CHECK_MSG(!c.res.content.len && !c.res.reasoning.len && !c.res.n_calls, "%s",
                      cv_tc_format_name(cv_tc_format_at(i)));
            tc_coll_fini(&c);
        }
}

/* Functionary v3.2's output starts with a recipient line; one too long for
 * a name is text, every byte of it and its newline, whole or in pieces
 * (found by fuzzing twice: read whole, the byte where the name's bound
 * stopped was dropped as if it were the newline; and a line one byte past
 * the bound lost its newline whole but kept it in pieces). */
TEST(a_recipient_line_too_long_for_a_name_is_kept_whole_as_text)
{
    static const size_t lens[] = { CV_TC_MAX_NAME + 1, CV_TC_MAX_NAME + 2, 300 };
    for (size_t i = 0; i < CV_ARRAY_LEN(lens); i++) {
        char text[400];
        memset(text, 'a', lens[i]);
        strcpy(text + lens[i], "\nmore");
        tc_coll c;
        parse(&(popt){ .format = "functionary_v3_2" }, text, &c);
        CHECK_EQ_INT(c.res.n_calls, 0);
        CHECK_MSG(!strcmp(content(&c), text), "a line of %zu bytes: content %s", lens[i], content(&c));
        tc_coll_fini(&c);
    }
}

/* An invoke tag's attributes after the name are read against one bound over
 * every chunk: MiniMax-M3's (which share the name's) and the shared XML
 * reader's for quoted names (Step 3, DSML, MiniCPM 5). Found by fuzzing:
 * streamed, the count started again at each chunk, so an invoke too long
 * whole was a call in pieces. */
TEST(an_invoke_tag_past_its_bound_is_no_call_in_any_chunking)
{
    static const struct {
        const char *format, *text; /* the text's %s: 300 bytes of attribute value */
    } rows[] = {
        { "minimax_m3", "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"get_weather\" x=\"%s\">]<]minimax[>["
                        "<city>Oslo]<]minimax[>[</city>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>" },
        { "step3", "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"get_weather\" x=\"%s\">"
                   "<steptml:parameter name=\"city\">Oslo</steptml:parameter></steptml:invoke><｜tool_call_end｜>"
                   "<｜tool_calls_end｜>" },
    };
    char attr[301];
    memset(attr, 'a', 300);
    attr[300] = 0;
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        char text[800];
        snprintf(text, sizeof text, rows[i].text, attr);
        tc_coll c;
        parse(&(popt){ .format = rows[i].format, .tools = TOOLS }, text, &c);
        CHECK_MSG(c.res.n_calls == 0, "%s: %d calls", rows[i].format, c.res.n_calls);
        tc_coll_fini(&c);
    }
}

/* DeepSeek V3's fences around the arguments are read once each, whole or
 * streamed (found by fuzzing: streamed, input that ended after a fence read
 * it again when more came, so where the section ended, and what followed,
 * depended on the chunking). Here a stray second fence ends the section
 * and the next call starts one of its own. */
TEST(a_deepseek_fence_is_read_once_in_any_chunking)
{
    const char *text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                       "{\"city\": \"Oslo\"}\n``````<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                       "get_weather\n```json\n{\"city\": \"Bergen\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    tc_coll c;
    parse(&(popt){ .format = "deepseek_v3", .tools = TOOLS }, text, &c);
    CHECK_EQ_INT(c.res.n_calls, 2);
    tc_coll_fini(&c);
}

TEST(the_non_streaming_result_is_the_stream_assembled)
{
    const char *text = "Hi <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": \"3\"}}"
                       "</tool_call>";
    json_t *tools = json_loads(TOOLS, 0, NULL);
    cv_chat_parse_opts o = { .format = cv_tc_format_find("hermes"), .tools = tools, .id_seed = 5 };
    cv_chat_parse_result r = { 0 };
    CHECK_EQ_INT(cv_chat_parse_text(&o, text, strlen(text), &r, NULL), 0);
    json_t *j = cv_chat_parse_result_json(&r);
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    CHECK(strstr(s, "\"content\":\"Hi\"") != NULL);
    CHECK(strstr(s, "\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\", \\\"days\\\": 3}\"") != NULL);
    free(s);
    json_decref(j);
    tc_coll c;
    tc_run_chunked(&o, text, strlen(text), CH_BYTES, 0, false, &c, NULL);
    char why[256];
    CHECK_MSG(tc_same_result(&r, &c.res, why, sizeof why), "%s", why);
    CHECK(c.n_args_events > 1); /* the arguments really streamed */
    tc_coll_fini(&c);
    cv_chat_parse_result_fini(&r);
    json_decref(tools);
}

int main(void)
{
    RUN(only_declared_tools_count_and_their_markup_is_removed);
    RUN(an_empty_tools_list_allows_no_calls_at_all);
    RUN(a_functions_prefix_resolves_to_the_declared_name);
    RUN(tool_choice_none_yields_no_calls_but_still_removes_markup);
    RUN(parallel_tool_calls_false_keeps_the_first_call);
    RUN(marker_text_inside_a_string_argument_never_creates_a_second_call);
    RUN(prose_that_mentions_markers_stays_content);
    RUN(json_answers_that_are_not_calls_stay_content);
    RUN(a_bare_call_in_prose_keeps_the_prose_around_it);
    RUN(ids_are_generated_injected_or_taken_from_the_format);
    RUN(a_call_in_another_format_is_recovered_when_the_chosen_one_finds_none);
    RUN(the_fallback_takes_no_undeclared_call_and_no_call_without_tools);
    RUN(hermes_reads_a_glm_body_with_the_glm_dialect);
    RUN(a_detected_syntax_that_turns_out_to_be_prose_gives_the_format_back);
    RUN(after_a_call_another_syntax_is_text);
    RUN(detection_follows_the_call_policy);
    RUN(without_a_tool_list_any_bare_call_shape_counts);
    RUN(a_bare_json_answer_is_released_as_soon_as_it_cannot_be_a_call);
    RUN(reasoning_markers_of_another_syntax_switch_to_it);
    RUN(a_call_inside_closed_reasoning_is_not_a_call_but_one_after_it_is);
    RUN(a_call_ending_unclosed_reasoning_counts_and_one_inside_it_does_not);
    RUN(inline_reasoning_keeps_the_block_and_its_markers_in_the_content);
    RUN(a_reply_that_starts_by_closing_reasoning_had_none);
    RUN(the_prompt_opener_is_found_only_when_the_prompt_leaves_reasoning_open);
    RUN(a_fenced_json_response_loses_its_fence);
    RUN(whitespace_is_trimmed_only_at_the_ends_of_each_kind);
    RUN(speculative_text_past_the_hold_bound_is_released_as_text);
    RUN(bad_tools_are_an_error_not_a_crash);
    RUN(feeding_after_finish_is_an_error);
    RUN(an_empty_response_is_empty_in_every_format);
    RUN(a_recipient_line_too_long_for_a_name_is_kept_whole_as_text);
    RUN(an_invoke_tag_past_its_bound_is_no_call_in_any_chunking);
    RUN(a_deepseek_fence_is_read_once_in_any_chunking);
    RUN(the_non_streaming_result_is_the_stream_assembled);
    return test_report();
}
