/* tc_xlam.c — Salesforce xLAM tool calls: a JSON list of calls.
 * xLAM answers with a JSON list, bare at the start of the reply (taken only
 * when read whole), in a ```json fence, in <tool_call>...</tool_call>, or
 * after [TOOL_CALLS]. */
#include "chat/toolcall/tc_int.h"

static const tc_env env_bare = {
    .items = IT_LIST,
    .one = true,
};

static const tc_env env_fence = {
    .end = "```",
    .items = IT_LIST | IT_JSON,
};

static const tc_env env_tag = {
    .end = "</tool_call>",
    .items = IT_LIST | IT_JSON,
};

static const tc_env env_tc = {
    .items = IT_LIST | IT_JSON,
    .one = true,
};

/* Detection in output of other formats: a bare list of calls anywhere —
 * JSON objects, or Python calls, which tc_detect.c takes only as the whole
 * reply and reports as pythonic. */
extern const cv_tc_format tc_fmt_pythonic;
static const tc_jshape shape_detect = {
    .name_keys = (const char *const[]){ "name", NULL },
    .args_keys = (const char *const[]){ "arguments", "parameters", NULL },
    .need_args = true,
    .call_keys_only = true, /* a list of records is data, known at its first other key */
};

static const tc_env env_detect = {
    .items = IT_LIST | IT_PYLIST,
    .shape = &shape_detect,
    .one = true,
    .py_row = &tc_fmt_pythonic,
};

static const tc_start detect[] = {
    { .marker = "[", .read = tc_read_env, .cfg = &env_detect, .weak = true, .keep = true },
    { 0 },
};

static const tc_start starts[] = {
    { .marker = "<tool_call>", .read = tc_read_env, .cfg = &env_tag },
    { .marker = "[TOOL_CALLS]", .read = tc_read_env, .cfg = &env_tc },
    { .marker = "```json", .read = tc_read_env, .cfg = &env_fence, .weak = true },
    { .marker = "[", .read = tc_read_env, .cfg = &env_bare, .weak = true, .at_start = true, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "xlam",
    .open = "[",
    .close = "]",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_xlam = {
    .name = "xlam",
    .syntax = &syntax,
    .summary = "[{\"name\": .., \"arguments\": {..}}] (bare, ```json, <tool_call> or [TOOL_CALLS])",
    .tmpl = { (const char *const[]){ "make calls in a single JSON array", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "xlam", NULL },
    .starts = starts,
    .detect = detect,
    .flags = TC_F_NO_FALLBACK,
};
