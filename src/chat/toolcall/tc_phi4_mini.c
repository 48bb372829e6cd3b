/* tc_phi4_mini.c — Phi-4-mini tool calls: functools[{..}].
 * A JSON list of calls right after the word functools. */
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
    .name = "phi4_mini",
    .trigger = "functools",
    .open = "functools[",
    .close = "]",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_phi4_mini = {
    .name = "phi4_mini",
    .syntax = &syntax,
    .summary = "functools[{\"name\": .., \"arguments\": {..}}]",
    .aliases = (const char *const[]){ "phi4", NULL },
    .tmpl = { (const char *const[]){ "functools", "<|assistant|>", NULL } },
    .tmpl_rank = 82,
    .names = (const char *const[]){ "phi-4-mini", "phi4-mini", "phi4_mini", "phi-4", NULL },
    .starts = starts,
};
