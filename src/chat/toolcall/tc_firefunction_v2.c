/* tc_firefunction_v2.c — FireFunction v2 tool calls: " functools[{..}]".
 * Fireworks' Llama 3 fine-tune: a JSON list of calls after functools. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .items = IT_JSON | IT_LIST,
    .one = true,
};

static const tc_start starts[] = {
    { .marker = "functools", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "firefunction_v2",
    .trigger = "functools",
    .open = " functools[",
    .close = "]",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_firefunction_v2 = {
    .name = "firefunction_v2",
    .syntax = &syntax,
    .summary = " functools[{\"name\": .., \"arguments\": {..}}]",
    .aliases = (const char *const[]){ "firefunction", NULL },
    .tmpl = { (const char *const[]){ "functools", "<|start_header_id|>", NULL } },
    .tmpl_rank = 84,
    .names = (const char *const[]){ "firefunction", NULL },
    .starts = starts,
    .flags = TC_F_NO_FALLBACK,
};
