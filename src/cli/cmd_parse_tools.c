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

static const cv_cmd *self(void) { return cv_cli_find("parse-tools"); }

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

int cv_cmd_parse_tools(int argc, char **argv)
{
    const char *format = "auto", *template_path = NULL, *tools_path = NULL, *model = "", *opener = NULL;
    long chunks = 0;
    bool events = false, detect = false;
    cv_chat_parse_opts o = { 0 };
    o.id_seed = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--bench"))
            return cv_cmd_parse_tools_bench(argc, argv); /* throughput per syntax (cmd_parse_tools_bench.c) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--format") && v) {
            format = v;
            i++;
        } else if (!strcmp(a, "--template") && v) {
            template_path = v;
            i++;
        } else if (!strcmp(a, "--tools") && v) {
            tools_path = v;
            i++;
        } else if (!strcmp(a, "--model") && v) {
            model = v;
            i++;
        } else if (!strcmp(a, "--stream-chunks") && v) {
            char *end;
            chunks = strtol(v, &end, 10);
            if (*end || chunks < 1 || chunks > (1 << 24))
                return cv_cli_usage_error(self(), "--stream-chunks %s: must be a number from 1 to 16777216", v);
            i++;
        } else if (!strcmp(a, "--reasoning-open") && v) {
            opener = v;
            i++;
        } else if (!strcmp(a, "--reasoning-inline")) {
            o.reasoning_inline = true;
        } else if (!strcmp(a, "--tool-choice-none")) {
            o.tool_choice_none = true;
        } else if (!strcmp(a, "--no-parallel")) {
            o.no_parallel_calls = true;
        } else if (!strcmp(a, "--json-response")) {
            o.json_response = true;
        } else if (!strcmp(a, "--events")) {
            events = true;
        } else if (!strcmp(a, "--detect")) {
            detect = true;
        } else if (!strcmp(a, "--list")) {
            format = "list";
        } else {
            return cv_cli_usage_error(self(), "unknown argument '%s'", a);
        }
    }
    if (!strcmp(format, "list")) {
        for (int k = 0; k < cv_tc_format_count(); k++)
            printf("%-18s %s\n", cv_tc_format_name(cv_tc_format_at(k)), cv_tc_format_summary(cv_tc_format_at(k)));
        return 0;
    }
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
