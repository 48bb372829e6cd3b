/* toolcall_fuzz.h — the shared driver of the fuzz_toolcall_* targets (one
 * per parser family). The input picks a format of the family, the options
 * (tools declared or not, reasoning inline, an opened reasoning block,
 * tool_choice none, no parallel calls, output detection) and a chunk size; the rest is the
 * model output. It is parsed whole and in pieces, and the target traps when
 * the two results differ, when the event stream breaks its grammar, or when
 * a call's arguments are not a JSON object: the parser's promises, not just
 * "no crash".
 *
 * The families are listed here, together, and the first input checks that
 * every row of the format registry is in exactly one of them and every
 * name is a row: a new syntax that no family fuzzes, or a renamed one,
 * fails every target (and so the suite's seed runs) with its name. */
#ifndef TOOLCALL_FUZZ_H
#define TOOLCALL_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"

typedef struct fz {
    cv_chat_parse_result res;
    int open, next;
    bool bad;
} fz;

static void fz_fn(void *ud, const cv_chat_event *ev)
{
    fz *f = ud;
    switch (ev->type) {
    case CV_CHAT_CONTENT:
    case CV_CHAT_REASONING:
        if (f->open >= 0 || !ev->text.len)
            f->bad = true;
        break;
    case CV_CHAT_TOOL_BEGIN:
        if (f->open >= 0 || ev->index != f->next || !ev->name.len || !ev->id.len)
            f->bad = true;
        f->open = ev->index;
        f->next++;
        break;
    case CV_CHAT_TOOL_ARGS:
        if (ev->index != f->open)
            f->bad = true;
        break;
    case CV_CHAT_TOOL_END:
        if (ev->index != f->open)
            f->bad = true;
        f->open = -1;
        break;
    }
    cv_chat_parse_result_collect(&f->res, ev);
}

/* ---- the families ---- */

static const char *const fz_json_calls[] = {
    "hermes", "longcat", "llama3_json", "mistral_v11", "mistral_pre_v11", "xlam", "granite", "granite_20b_fc",
    "phi4_mini", "firefunction_v2", "command_r7b", "command_r_plus", "internlm2", "apertus", "gigachat3", "jamba",
    "hunyuan_a13b", "minimax_m1", "apriel", "nemotron_nano_v2", NULL
};
static const char *const fz_xml_calls[] = {
    "qwen3_coder_xml", "seed_oss", "glm45", "deepseek_dsml", "minimax_m2", "minimax_m3", "step3", "minicpm5",
    "functionary_v3_1", NULL
};
static const char *const fz_python_calls[] = { "pythonic", "lfm2", "olmo3", NULL };
static const char *const fz_channels[] = {
    "gpt_oss_harmony", "functionary_v3_2", "kimi_k2", "deepseek_v3", "deepseek_v31", "gemma4", "plain_content", NULL
};
static const char *const *const fz_families[] = { fz_json_calls, fz_xml_calls, fz_python_calls, fz_channels };

/* Aborts naming the first format no family fuzzes (or fuzzes twice) and
 * the first family name that is no format. */
static void fz_check_families(void)
{
    for (size_t k = 0; k < sizeof fz_families / sizeof fz_families[0]; k++)
        for (const char *const *n = fz_families[k]; *n; n++)
            if (!cv_tc_format_find(*n)) {
                fprintf(stderr, "fuzz/toolcall_fuzz.h names '%s', which is no tool-call format\n", *n);
                abort();
            }
    for (int i = 0; i < cv_tc_format_count(); i++) {
        const cv_tc_format *f = cv_tc_format_at(i);
        int seen = 0;
        for (size_t k = 0; k < sizeof fz_families / sizeof fz_families[0]; k++)
            for (const char *const *n = fz_families[k]; *n; n++)
                seen += cv_tc_format_find(*n) == f;
        if (seen != 1) {
            fprintf(stderr, "tool-call format '%s' is in %d fuzz families, must be in one: add it to a list in "
                    "fuzz/toolcall_fuzz.h\n", cv_tc_format_name(f), seen);
            abort();
        }
    }
}

static const char *const FZ_TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},\"o\":{\"type\":\"object\"},\"a\":{\"type\":\"array\"},"
    "\"b\":{\"type\":\"boolean\"}}}}},{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]";

static void fz_run(const cv_chat_parse_opts *o, const char *p, size_t n, size_t step, fz *f)
{
    memset(f, 0, sizeof *f);
    f->open = -1;
    cv_chat_parse *ps;
    if (cv_chat_parse_create(o, fz_fn, f, &ps, NULL))
        abort();
    for (size_t i = 0; i < n; i += step)
        cv_chat_parse_feed(ps, p + i, n - i < step ? n - i : step, NULL);
    cv_chat_parse_finish(ps, NULL);
    cv_chat_parse_destroy(ps);
    if (f->open >= 0)
        f->bad = true;
}

static bool fz_same(const cv_chat_parse_result *a, const cv_chat_parse_result *b)
{
    if (a->content.len != b->content.len || (a->content.len && memcmp(a->content.data, b->content.data, a->content.len)))
        return false;
    if (a->reasoning.len != b->reasoning.len ||
        (a->reasoning.len && memcmp(a->reasoning.data, b->reasoning.data, a->reasoning.len)))
        return false;
    if (a->n_calls != b->n_calls)
        return false;
    for (int i = 0; i < a->n_calls; i++)
        if (strcmp(a->calls[i].name, b->calls[i].name) || strcmp(a->calls[i].id, b->calls[i].id) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments))
            return false;
    return true;
}

static int fz_one(const char *const *formats, const uint8_t *data, size_t size)
{
    static json_t *tools;
    if (!tools) {
        fz_check_families();
        tools = json_loads(FZ_TOOLS, 0, NULL);
    }
    if (size < 3)
        return 0;
    int n_formats = 0;
    while (formats[n_formats])
        n_formats++;
    cv_chat_parse_opts o = { 0 };
    o.format = cv_tc_format_find(formats[data[0] % n_formats]);
    uint8_t opt = data[1];
    o.tools = (opt & 1) ? tools : NULL;
    o.reasoning_inline = opt & 2;
    if (opt & 4)
        o.reasoning_open = cv_str_of("<think>\n");
    o.tool_choice_none = (opt & 0x18) == 0x18;
    o.no_parallel_calls = opt & 0x20;
    o.json_response = opt & 0x40;
    o.detect = opt & 0x80;
    o.id_seed = 1;
    size_t step = 1 + data[2] % 13;
    const char *p = (const char *)data + 3;
    size_t n = size - 3;
    fz whole, pieces;
    fz_run(&o, p, n, n ? n : 1, &whole);
    fz_run(&o, p, n, step, &pieces);
    if (whole.bad || pieces.bad || !fz_same(&whole.res, &pieces.res))
        __builtin_trap();
    for (int i = 0; i < whole.res.n_calls; i++) {
        /* jansson refuses \u0000 in keys, which JSON allows: skip those */
        if (strstr(whole.res.calls[i].arguments, "\\u0000"))
            continue;
        json_t *a = json_loads(whole.res.calls[i].arguments, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
        if (!json_is_object(a))
            __builtin_trap();
        json_decref(a);
    }
    cv_chat_parse_result_fini(&whole.res);
    cv_chat_parse_result_fini(&pieces.res);
    return 0;
}

#endif
