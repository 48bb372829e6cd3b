/* test_tc_cli.c — `corvid parse-tools` end to end, driving the release
 * binary (CV_RELEASE_BIN; skipped when it has not been built): formats by
 * name, by template file and by model name, output detection under
 * --format auto (the syntax found, on stderr), --format list, tools from a
 * file, chunked input giving the same output as whole input, the event
 * listing, and usage errors (exit 2, nothing on stdout). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "chat/chat.h"
#include "test.h"

static char out[1 << 16];

/* Runs `corvid parse-tools ARGS` with input on stdin; returns the exit
 * status and leaves stdout in out (stderr when redir is "2>&1 >/dev/null"). */
static int run_redir(const char *args, const char *input, const char *redir)
{
    char inpath[] = "/tmp/corvid-tc-cli-XXXXXX";
    int fd = mkstemp(inpath);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    fputs(input, f);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' parse-tools %s < '%s' %s", CV_RELEASE_BIN, args, inpath, redir);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    int st = p ? pclose(p) : -1;
    unlink(inpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(const char *args, const char *input) { return run_redir(args, input, "2>/dev/null"); }

static json_t *out_json(void) { return json_loads(out, 0, NULL); }

TEST(a_named_format_parses_stdin_into_content_and_calls)
{
    CHECK_EQ_INT(run("--format hermes", "Hi.<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>"), 0);
    json_t *j = out_json();
    CHECK_EQ_STR(json_string_value(json_object_get(j, "content")), "Hi.");
    json_t *c = json_array_get(json_object_get(j, "tool_calls"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(c, "function"), "name")), "f");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(c, "function"), "arguments")), "{\"a\": 1}");
    json_decref(j);
}

TEST(chunked_input_prints_exactly_what_whole_input_prints)
{
    const char *in = "<think>hm</think>ok <tool_call>\n<function=f>\n<parameter=p>\nx\n</parameter>\n</function>\n"
                     "</tool_call>";
    CHECK_EQ_INT(run("--format qwen3_coder_xml", in), 0);
    char whole[sizeof out];
    memcpy(whole, out, sizeof out);
    CHECK_EQ_INT(run("--format qwen3_coder_xml --stream-chunks 1", in), 0);
    CHECK_EQ_STR(out, whole);
    CHECK_EQ_INT(run("--format qwen3_coder_xml --stream-chunks 7", in), 0);
    CHECK_EQ_STR(out, whole);
}

TEST(tools_from_a_file_drop_undeclared_calls_and_type_values)
{
    char path[] = "/tmp/corvid-tc-tools-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
          "\"properties\": {\"n\": {\"type\": \"integer\"}}}}}]}",
          f);
    fclose(f);
    char args[256];
    snprintf(args, sizeof args, "--format hermes --tools %s", path);
    CHECK_EQ_INT(run(args, "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"
                           "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": \"5\"}}</tool_call>"),
                 0);
    json_t *j = out_json();
    CHECK_EQ_INT(json_array_size(json_object_get(j, "tool_calls")), 1);
    json_t *fn = json_object_get(json_array_get(json_object_get(j, "tool_calls"), 0), "function");
    CHECK_EQ_STR(json_string_value(json_object_get(fn, "arguments")), "{\"n\": 5}");
    json_decref(j);
    unlink(path);
}

TEST(the_format_is_detected_from_a_template_file_or_a_model_name)
{
    char args[4096];
    snprintf(args, sizeof args, "--template '%s'", test_data("templates/Kimi-K2-Instruct.jinja"));
    struct stat st;
    if (stat(test_data("templates/Kimi-K2-Instruct.jinja"), &st) == 0) {
        CHECK_EQ_INT(run(args, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                               "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"),
                     0);
        CHECK(strstr(out, "functions.f:0") != NULL);
    }
    CHECK_EQ_INT(run("--model Mistral-Small-3.2-24B-Instruct", "[TOOL_CALLS]f[ARGS]{\"a\": 1}"), 0);
    CHECK(strstr(out, "\"name\": \"f\"") != NULL);
}

TEST(auto_detects_the_syntax_from_the_output_and_says_which_on_stderr)
{
    static const struct {
        const char *input, *syntax;
    } rows[] = {
        { "[get_weather(city='Paris')]", "pythonic" },
        { "Sure. {\"name\": \"f\", \"parameters\": {\"a\": 1}}", "llama3_json" },
        { "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", "hermes" },
        { "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>", "gpt_oss_harmony" },
        { "I'll check.\n```json\n[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]\n```", "llama3_json" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        CHECK_EQ_INT(run("--format auto", rows[i].input), 0);
        json_t *j = out_json();
        CHECK_MSG(json_array_size(json_object_get(j, "tool_calls")) == 1, "%s: %s", rows[i].syntax, out);
        json_decref(j);
        CHECK_EQ_INT(run_redir("", rows[i].input, "2>&1 >/dev/null"), 0);
        char want[128];
        snprintf(want, sizeof want, "detected syntax %s\n", rows[i].syntax);
        CHECK_MSG(strstr(out, want) != NULL, "stderr for %s: %s", rows[i].syntax, out);
    }
    CHECK_EQ_INT(run_redir("", "Just prose.", "2>&1 >/dev/null"), 0);
    CHECK(strstr(out, "detected syntax none") != NULL);
}

TEST(format_list_prints_every_syntax)
{
    CHECK_EQ_INT(run("--format list", ""), 0);
    char listed[sizeof out];
    memcpy(listed, out, sizeof out);
    for (int k = 0; k < cv_tc_format_count(); k++)
        CHECK_MSG(strstr(listed, cv_tc_format_name(cv_tc_format_at(k))) != NULL, "%s not listed",
                  cv_tc_format_name(cv_tc_format_at(k)));
    CHECK_EQ_INT(run("--list", ""), 0);
    CHECK_EQ_STR(out, listed);
}

TEST(events_are_listed_one_json_object_per_line)
{
    CHECK_EQ_INT(run("--format mistral_v11 --events", "Hi[TOOL_CALLS]f[ARGS]{\"a\": 1}"), 0);
    CHECK(strstr(out, "{\"type\":\"content\",\"text\":\"Hi\"}\n") != NULL);
    CHECK(strstr(out, "\"type\":\"tool_begin\"") != NULL);
    CHECK(strstr(out, "{\"type\":\"tool_end\",\"index\":0}") != NULL);
}

TEST(bad_usage_exits_2_and_prints_nothing)
{
    CHECK_EQ_INT(run("--format no_such_format", "x"), 2);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(run("--stream-chunks 0", "x"), 2);
    CHECK_EQ_INT(run("--bogus", "x"), 2);
}

int main(void)
{
    struct stat st;
    if (stat(CV_RELEASE_BIN, &st) != 0)
        test_skip("the release binary " CV_RELEASE_BIN " is not built (make release)");
    RUN(a_named_format_parses_stdin_into_content_and_calls);
    RUN(chunked_input_prints_exactly_what_whole_input_prints);
    RUN(tools_from_a_file_drop_undeclared_calls_and_type_values);
    RUN(the_format_is_detected_from_a_template_file_or_a_model_name);
    RUN(auto_detects_the_syntax_from_the_output_and_says_which_on_stderr);
    RUN(format_list_prints_every_syntax);
    RUN(events_are_listed_one_json_object_per_line);
    RUN(bad_usage_exits_2_and_prints_nothing);
    return test_report();
}
