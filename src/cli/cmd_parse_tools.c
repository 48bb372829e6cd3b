/* cmd_parse_tools.c — `corvid parse-tools`: runs the tool-call and reasoning
 * parser over model output read from stdin and prints the parsed message as
 * JSON ({content, reasoning_content, tool_calls}), or the event stream with
 * --events. A debugging aid for new models and formats, and what the CLI
 * tests drive. The format comes from --format, else from --template (the
 * model's chat template file) and --model (its name), like the server; with
 * --format auto (the default) output detection is on, as in the server, and
 * stderr says which syntax the calls were found in. --format list (or
 * --list) prints the syntaxes. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "chat/chat.h"
#include "cli/cli.h"

typedef struct ev_print {
    cv_chat_parse_result res;
    bool events;
} ev_print;

static void on_event(void *ud, const cv_chat_event *ev)
{
    ev_print *e = ud;
    if (e->events) {
        static const char *const names[] = { "content", "reasoning", "tool_begin", "tool_args", "tool_end" };
        json_t *o = json_object();
        json_object_set_new(o, "type", json_string(names[ev->type]));
        if (ev->type >= CV_CHAT_TOOL_BEGIN)
            json_object_set_new(o, "index", json_integer(ev->index));
        if (ev->text.len)
            json_object_set_new(o, "text", json_stringn_nocheck(ev->text.ptr, ev->text.len));
        if (ev->id.len)
            json_object_set_new(o, "id", json_stringn_nocheck(ev->id.ptr, ev->id.len));
        if (ev->name.len)
            json_object_set_new(o, "name", json_stringn_nocheck(ev->name.ptr, ev->name.len));
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(o);
    }
    cv_chat_parse_result_collect(&e->res, ev);
}

static int read_all(FILE *f, cv_buf *b)
{
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (b->len + n > (256u << 20))
            return -1;
        cv_buf_append(b, tmp, n);
    }
    return 0;
}

typedef struct pt_opts {
    const char *format, *template_path, *tools_path, *model, *opener;
    int32_t chunks;
    bool events, list, detect;
    cv_chat_parse_opts o;
} pt_opts;

#define O(field) offsetof(pt_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--format", NULL, CV_FLAG_STR, O(format), 0, 0, "NAME|auto|list",
      "the tool-call syntax (default auto: the template's or Hermes, with detection on; list: the syntaxes)"),
    CV_FLAG_ROW("--detect", NULL, CV_FLAG_BOOL, O(detect), 0, 0, NULL,
      "with a named format: also recover calls in any other syntax"),
    CV_FLAG_ROW("--template", NULL, CV_FLAG_STR, O(template_path), 0, 0, "FILE.jinja",
      "detect the syntax from this chat template"),
    CV_FLAG_ROW("--model", NULL, CV_FLAG_STR, O(model), 0, 0, "NAME", "detect the syntax from this model name"),
    CV_FLAG_ROW("--tools", NULL, CV_FLAG_STR, O(tools_path), 0, 0, "TOOLS.json",
      "the declared tools (arguments typed by them)"),
    CV_FLAG_ROW("--stream-chunks", NULL, CV_FLAG_I32, O(chunks), 1, 1 << 24, "N",
      "feed the text N bytes at a time (default: whole)"),
    CV_FLAG_ROW("--reasoning-open", NULL, CV_FLAG_STR, O(opener), 0, 0, "TEXT",
      "the output starts inside reasoning opened by TEXT"),
    CV_FLAG_ROW("--reasoning-inline", NULL, CV_FLAG_BOOL, O(o.reasoning_inline), 0, 0, NULL,
      "reasoning stays in the content"),
    CV_FLAG_ROW("--tool-choice-none", NULL, CV_FLAG_BOOL, O(o.tool_choice_none), 0, 0, NULL,
      "no tool calls (tool_choice none)"),
    CV_FLAG_ROW("--no-parallel", NULL, CV_FLAG_BOOL, O(o.no_parallel_calls), 0, 0, NULL, "the first call only"),
    CV_FLAG_ROW("--json-response", NULL, CV_FLAG_BOOL, O(o.json_response), 0, 0, NULL,
      "a JSON response format was asked for"),
    CV_FLAG_ROW("--events", NULL, CV_FLAG_BOOL, O(events), 0, 0, NULL, "print the event stream, one JSON line each"),
    CV_FLAG_ROW("--list", NULL, CV_FLAG_BOOL, O(list), 0, 0, NULL, "list the formats"),
};
#undef O
static const cv_cli_spec spec = { .name = "parse-tools", .args = "< OUTPUT.txt", .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags), .also = &cv_parse_tools_bench_spec };

int cv_cmd_parse_tools(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bench"))
            return cv_cmd_parse_tools_bench(argc, argv); /* throughput per syntax (cmd_parse_tools_bench.c) */
    pt_opts po = { .format = "auto", .model = "", .o = { .id_seed = 1 } };
    int n, st;
    if (!cv_cli_parse(&spec, &po, argc, argv, &n, &st))
        return st;
    if (po.list || !strcmp(po.format, "list")) {
        for (int k = 0; k < cv_tc_format_count(); k++)
            printf("%-18s %s\n", cv_tc_format_name(cv_tc_format_at(k)), cv_tc_format_summary(cv_tc_format_at(k)));
        return 0;
    }
    const char *format = po.format, *template_path = po.template_path, *tools_path = po.tools_path, *model = po.model;
    const char *opener = po.opener;
    long chunks = po.chunks;
    bool events = po.events, detect = po.detect;
    cv_chat_parse_opts o = po.o;
    int status = 1;
    cv_err err = { 0 };
    cv_buf tmpl = { 0 }, in = { 0 };
    json_t *tools = NULL;
    cv_chat_parse *p = NULL;
    ev_print ep = { .events = events };
    if (template_path && cv_read_file(template_path, &tmpl, 16u << 20, &err)) {
        fprintf(stderr, "corvid parse-tools: %s\n", err.msg);
        goto fail;
    }
    if (tools_path) {
        cv_buf tb = { 0 };
        if (cv_read_file(tools_path, &tb, 16u << 20, &err)) {
            fprintf(stderr, "corvid parse-tools: %s\n", err.msg);
            goto fail;
        }
        tools = cv_json_parse(tb.data, tb.len, &err);
        cv_buf_free(&tb);
        if (!tools) {
            fprintf(stderr, "corvid parse-tools: %s: %s\n", tools_path, err.msg);
            goto fail;
        }
        if (json_is_object(tools) && json_is_array(json_object_get(tools, "tools"))) {
            json_t *t = json_incref(json_object_get(tools, "tools"));
            json_decref(tools);
            tools = t;
        }
    }
    if (strcmp(format, "auto")) {
        o.format = cv_tc_format_find(format);
        if (!o.format) {
            fprintf(stderr, "corvid parse-tools: unknown format '%s' (corvid parse-tools --format list shows them)\n",
                    format);
            status = 2;
            goto fail;
        }
        o.detect = detect;
    } else {
        const char *why;
        o.format = cv_tc_detect_why((cv_str){ tmpl.data, tmpl.len }, cv_str_of(model), &why);
        o.detect = true;
        fprintf(stderr, "corvid parse-tools: format %s (chosen by %s), detection on\n", cv_tc_format_name(o.format),
                why);
    }
    o.tools = tools;
    if (opener)
        o.reasoning_open = cv_str_of(opener);
    if (read_all(stdin, &in)) {
        fprintf(stderr, "corvid parse-tools: input over 256 MiB\n");
        goto fail;
    }
    if (cv_chat_parse_create(&o, on_event, &ep, &p, &err)) {
        fprintf(stderr, "corvid parse-tools: %s\n", err.msg);
        goto fail;
    }
    size_t step = chunks ? (size_t)chunks : (in.len ? in.len : 1);
    for (size_t i = 0; i < in.len; i += step)
        cv_chat_parse_feed(p, in.data + i, CV_MIN(step, in.len - i), &err);
    cv_chat_parse_finish(p, &err);
    const cv_tc_format *found = cv_chat_parse_detected(p);
    if (found)
        fprintf(stderr, "corvid parse-tools: detected syntax %s\n", cv_tc_format_name(found));
    else
        fprintf(stderr, "corvid parse-tools: detected syntax none (no tool-call markup found)\n");
    if (!events) {
        json_t *j = cv_chat_parse_result_json(&ep.res);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        puts(s ? s : "null");
        free(s);
        json_decref(j);
    }
    status = 0;
fail:
    cv_chat_parse_destroy(p);
    cv_chat_parse_result_fini(&ep.res);
    json_decref(tools);
    cv_buf_free(&tmpl);
    cv_buf_free(&in);
    return status;
}
