/* test_tc_repair.c — one table per repair rule of the tool-call reader, each row a
 * broken-but-meant call as quantized models write it, across formats, with
 * the arguments the agent must receive: unclosed blocks at the end of the
 * stream, trailing commas, single quotes and Python literals, arguments sent
 * as a JSON string, "parameters" for "arguments", code fences around the
 * JSON, values typed by the schema (and strings kept exactly, trailing
 * newlines included), wrapper objects, missing commas, missing close tags.
 * Every row is also parsed in 1-byte and random pieces and must agree. */
#include "tc_harness.h"
#include "test.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},\"x\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
    "\"o\":{\"type\":\"object\"},\"a\":{\"type\":\"array\"},\"u\":{\"type\":[\"integer\",\"null\"]},"
    "\"e\":{\"enum\":[\"x\",\"y\"]}}}}}]";

typedef struct row {
    const char *format;
    const char *text;
    const char *args; /* the expected arguments, compared as JSON */
} row;

static void check_rows(const char *rule, const row *rows, size_t n)
{
    json_t *tools = json_loads(TOOLS, 0, NULL);
    for (size_t i = 0; i < n; i++) {
        cv_chat_parse_opts o = { .format = cv_tc_format_find(rows[i].format), .tools = tools, .id_seed = 1 };
        CHECK_MSG(o.format != NULL, "%s", rows[i].format);
        size_t len = strlen(rows[i].text);
        tc_coll whole;
        tc_run_chunked(&o, rows[i].text, len, CH_WHOLE, 0, false, &whole, NULL);
        CHECK_MSG(!whole.bad[0], "%s row %zu: %s", rule, i, whole.bad);
        CHECK_MSG(whole.res.n_calls == 1, "%s row %zu (%s): %d calls", rule, i, rows[i].format, whole.res.n_calls);
        if (whole.res.n_calls == 1) {
            json_t *want = json_loads(rows[i].args, 0, NULL), *got = json_loads(whole.res.calls[0].arguments, 0, NULL);
            CHECK_MSG(want && got && tc_json_loose_eq(want, got), "%s row %zu (%s): arguments %s, expected %s", rule, i,
                      rows[i].format, whole.res.calls[0].arguments, rows[i].args);
            json_decref(want);
            json_decref(got);
        }
        for (int h = 0; h < 2; h++) {
            tc_coll c;
            tc_run_chunked(&o, rows[i].text, len, h ? CH_RANDOM : CH_BYTES, 5, false, &c, NULL);
            char why[512];
            CHECK_MSG(tc_same_result(&whole.res, &c.res, why, sizeof why), "%s row %zu chunked: %s", rule, i, why);
            tc_coll_fini(&c);
        }
        tc_coll_fini(&whole);
    }
    json_decref(tools);
}

TEST(unclosed_blocks_at_the_end_of_the_stream_are_closed)
{
    static const row rows[] = {
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"abc\"}}", "{\"s\": \"abc\"}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"abc\"}", "{\"s\": \"abc\"}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"ab", "{\"s\": \"ab\"}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", "{\"a\": [1, 2]}" },
        { "qwen3_coder_xml", "<tool_call>\n<function=f>\n<parameter=s>\nhello\n", "{\"s\": \"hello\"}" },
        { "qwen3_coder_xml", "<tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n", "{\"n\": 5}" },
        { "kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"n\": 1",
          "{\"n\": 1}" },
        { "pythonic", "<|python_start|>[f(s='x', n=2", "{\"s\": \"x\", \"n\": 2}" },
        { "mistral_v11", "[TOOL_CALLS]f[ARGS]{\"s\": \"x\"", "{\"s\": \"x\"}" },
        { "gemma4", "<|tool_call>call:f{s:<|\"|>x<|\"|>", "{\"s\": \"x\"}" },
        { "minimax_m2", "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"n\">7", "{\"n\": 7}" },
    };
    check_rows("unclosed", rows, CV_ARRAY_LEN(rows));
}

TEST(trailing_and_missing_commas_are_tolerated)
{
    static const row rows[] = {
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"a\", \"n\": 1,},}</tool_call>",
          "{\"s\": \"a\", \"n\": 1}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2,]}}</tool_call>", "{\"a\": [1, 2]}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"a\" \"n\": 1}}</tool_call>",
          "{\"s\": \"a\", \"n\": 1}" },
        { "pythonic", "[f(s='a', n=1,)]", "{\"s\": \"a\", \"n\": 1}" },
    };
    check_rows("commas", rows, CV_ARRAY_LEN(rows));
}

TEST(single_quotes_and_python_literals_become_json)
{
    static const row rows[] = {
        { "hermes", "<tool_call>{'name': 'f', 'arguments': {'s': 'it\\'s', 'b': True, 'u': None}}</tool_call>",
          "{\"s\": \"it's\", \"b\": true, \"u\": null}" },
        { "llama3_json", "{\"name\": \"f\", \"parameters\": {\"o\": {'k': False}}}", "{\"o\": {\"k\": false}}" },
        { "pythonic", "[f(o={'k': [True, None]}, s=\"q\")]", "{\"o\": {\"k\": [true, null]}, \"s\": \"q\"}" },
        { "mistral_v11", "[TOOL_CALLS]f[ARGS]{s: 'bare key'}", "{\"s\": \"bare key\"}" },
    };
    check_rows("quotes", rows, CV_ARRAY_LEN(rows));
}

TEST(arguments_sent_as_a_json_string_are_decoded)
{
    static const row rows[] = {
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"s\\\": \\\"x\\\", \\\"n\\\": 3}\"}</tool_call>",
          "{\"s\": \"x\", \"n\": 3}" },
        { "mistral_pre_v11", "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"{\\\"n\\\": \\\"4\\\"}\"}]", "{\"n\": 4}" },
        { "glm45", "<tool_call>f<arg_key>o</arg_key><arg_value>{\\\"k\\\": 1}</arg_value></tool_call>",
          "{\"o\": {\"k\": 1}}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"o\": \"{\\\"k\\\": 1}\"}}</tool_call>",
          "{\"o\": {\"k\": 1}}" },
    };
    check_rows("double-encoded", rows, CV_ARRAY_LEN(rows));
}

TEST(parameters_is_read_as_arguments_and_openai_shapes_are_understood)
{
    static const row rows[] = {
        { "hermes", "<tool_call>{\"name\": \"f\", \"parameters\": {\"n\": 1}}</tool_call>", "{\"n\": 1}" },
        { "hermes", "<tool_call>{\"arguments\": {\"n\": 1}, \"name\": \"f\"}</tool_call>", "{\"n\": 1}" },
        { "hermes", "<tool_call>{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"n\": 2}}}"
                    "</tool_call>",
          "{\"n\": 2}" },
        { "command_r7b", "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {\"n\": 3}}]"
                         "<|END_ACTION|>",
          "{\"n\": 3}" },
        { "hermes", "<tool_call>{\"name\": \"f\"}</tool_call>", "{}" },
    };
    check_rows("parameters", rows, CV_ARRAY_LEN(rows));
}

TEST(code_fences_around_the_json_are_removed)
{
    static const row rows[] = {
        { "hermes", "<tool_call>\n```json\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n```\n</tool_call>", "{\"n\": 1}" },
        { "deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"n\": 1}\n```"
                         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
          "{\"n\": 1}" },
        { "command_r_plus", "Action:\n```json\n[{\"tool_name\": \"f\", \"parameters\": {\"n\": 1}}]\n```", "{\"n\": 1}" },
        { "xlam", "Sure.\n```json\n[{\"name\": \"f\", \"arguments\": {\"n\": 1}}]\n```", "{\"n\": 1}" },
    };
    check_rows("fences", rows, CV_ARRAY_LEN(rows));
}

TEST(values_are_typed_by_the_schema_and_strings_kept_exactly)
{
    static const row rows[] = {
        /* "5" for an integer, 5 for a string, "true" for a boolean, "2.5" for a number */
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": \"5\", \"s\": 5, \"b\": \"true\", \"x\": \"2.5\"}}"
                    "</tool_call>",
          "{\"n\": 5, \"s\": \"5\", \"b\": true, \"x\": 2.5}" },
        /* objects stay objects; a string where an object belongs is parsed */
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"o\": {\"k\": \"5\"}, \"a\": \"[1, 2]\"}}</tool_call>",
          "{\"o\": {\"k\": \"5\"}, \"a\": [1, 2]}" },
        /* an object where a string belongs is kept as its JSON text */
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": {\"k\": 1}}}</tool_call>",
          "{\"s\": \"{\\\"k\\\": 1}\"}" },
        /* a nullable integer; an enum of strings */
        { "qwen3_coder_xml", "<function=f>\n<parameter=u>\nnull\n</parameter>\n<parameter=e>\nx\n</parameter>\n</function>",
          "{\"u\": null, \"e\": \"x\"}" },
        /* XML text is typed: number, boolean, object, array */
        { "qwen3_coder_xml", "<function=f>\n<parameter=n>\n-14\n</parameter>\n<parameter=b>\nfalse\n</parameter>\n"
                             "<parameter=o>\n{\"k\": [1]}\n</parameter>\n<parameter=a>\n[\"p\"]\n</parameter>\n</function>",
          "{\"n\": -14, \"b\": false, \"o\": {\"k\": [1]}, \"a\": [\"p\"]}" },
        /* strings keep their newlines: only Qwen3-Coder's layout newline goes */
        { "qwen3_coder_xml", "<function=f>\n<parameter=s>\nline\n\n</parameter>\n</function>", "{\"s\": \"line\\n\"}" },
        { "seed_oss", "<seed:tool_call><function=f><parameter=s>line\n</parameter></function></seed:tool_call>",
          "{\"s\": \"line\\n\"}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"tail\\n\\n\"}}</tool_call>",
          "{\"s\": \"tail\\n\\n\"}" },
        /* a value that does not fit its type is kept, not invented */
        { "qwen3_coder_xml", "<function=f>\n<parameter=n>\nmany\n</parameter>\n</function>", "{\"n\": \"many\"}" },
        /* a number past every integer type stays the number written (found
         * by fuzzing: the integer check converted it to long long, which is
         * undefined) */
        { "qwen3_coder_xml", "<function=f>\n<parameter=n>\n3.5e20\n</parameter>\n</function>", "{\"n\": 3.5e20}" },
    };
    check_rows("typing", rows, CV_ARRAY_LEN(rows));
}

TEST(wrapper_objects_around_all_arguments_are_unwrapped)
{
    static const row rows[] = {
        { "deepseek_dsml", "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"arguments\" "
                           "string=\"false\">{\"n\": 1, \"s\": \"a\"}</｜DSML｜parameter></｜DSML｜invoke>"
                           "</｜DSML｜function_calls>",
          "{\"n\": 1, \"s\": \"a\"}" },
        { "qwen3_coder_xml", "<function=f>\n<parameter=input>\n{\"n\": 2}\n</parameter>\n</function>", "{\"n\": 2}" },
        /* a wrapper's name with no value is an ordinary key, null (found by
         * fuzzing: the key held back for unwrapping was lost, giving {null}) */
        { "glm45", "<tool_call>f\n<arg_key>arguments</arg_key>\n</tool_call>", "{\"arguments\": null}" },
        { "glm45", "<tool_call>f<arg_key>arguments</arg_key>", "{\"arguments\": null}" },
    };
    check_rows("wrappers", rows, CV_ARRAY_LEN(rows));
}

/* Nesting deeper than the reader's bound ends the arguments where the bound
 * is, as JSON (found by fuzzing: the refused container's separator was
 * already written, giving [1, ]): quoted JSON and bare words alike. */
TEST(nesting_past_the_depth_bound_ends_the_arguments_as_json)
{
    static const struct {
        const char *format, *head, *level;
    } rows[] = {
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ", "[1, " },
        { "mistral_pre_v11", "[TOOL_CALLS]f[CALL_ID]abcdefghi {\"a\":", "[x" },
    };
    json_t *tools = json_loads(TOOLS, 0, NULL);
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        cv_buf text = { 0 };
        cv_buf_puts(&text, rows[i].head);
        for (int d = 0; d < 2 * CV_MAX_JSON_DEPTH; d++)
            cv_buf_puts(&text, rows[i].level);
        cv_chat_parse_opts o = { .format = cv_tc_format_find(rows[i].format), .tools = tools, .id_seed = 1 };
        tc_coll whole;
        tc_run_chunked(&o, text.data, text.len, CH_WHOLE, 0, false, &whole, NULL);
        CHECK_MSG(!whole.bad[0], "%s: %s", rows[i].format, whole.bad);
        CHECK_MSG(whole.res.n_calls == 1, "%s: %d calls", rows[i].format, whole.res.n_calls);
        if (whole.res.n_calls == 1) {
            json_t *got = json_loads(whole.res.calls[0].arguments, 0, NULL);
            CHECK_MSG(json_is_object(got), "%s: arguments are no JSON object: ...%s", rows[i].format,
                      whole.res.calls[0].arguments + strlen(whole.res.calls[0].arguments) - 40);
            json_decref(got);
        }
        tc_coll c;
        tc_run_chunked(&o, text.data, text.len, CH_BYTES, 0, false, &c, NULL);
        char why[512];
        CHECK_MSG(tc_same_result(&whole.res, &c.res, why, sizeof why), "%s in bytes: %s", rows[i].format, why);
        tc_coll_fini(&c);
        tc_coll_fini(&whole);
        cv_buf_free(&text);
    }
    json_decref(tools);
}

TEST(missing_close_tags_end_at_the_next_tag)
{
    static const row rows[] = {
        { "qwen3_coder_xml", "<tool_call>\n<function=f>\n<parameter=s>\na\n<parameter=n>\n1\n</function>\n</tool_call>",
          "{\"s\": \"a\", \"n\": 1}" },
        { "qwen3_coder_xml", "<tool_call>\n<function=f>\n<parameter=s>\na\n</parameter>\n</tool_call>", "{\"s\": \"a\"}" },
        { "hermes", "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 1}}\nDone.", "{\"n\": 1}" },
    };
    check_rows("close tags", rows, CV_ARRAY_LEN(rows));
}

int main(void)
{
    RUN(unclosed_blocks_at_the_end_of_the_stream_are_closed);
    RUN(trailing_and_missing_commas_are_tolerated);
    RUN(single_quotes_and_python_literals_become_json);
    RUN(arguments_sent_as_a_json_string_are_decoded);
    RUN(parameters_is_read_as_arguments_and_openai_shapes_are_understood);
    RUN(code_fences_around_the_json_are_removed);
    RUN(values_are_typed_by_the_schema_and_strings_kept_exactly);
    RUN(wrapper_objects_around_all_arguments_are_unwrapped);
    RUN(nesting_past_the_depth_bound_ends_the_arguments_as_json);
    RUN(missing_close_tags_end_at_the_next_tag);
    return test_report();
}
