/* tc_olmo3.c — Olmo 3 tool calls: <function_calls>f(a=1)\ng()</function_calls>.
 * Python calls, one per line, between <function_calls> tags. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</function_calls>",
    .items = IT_PY | IT_PYLIST,
};

static const tc_start starts[] = {
    { .marker = "<function_calls>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "olmo3",
    .trigger = "<function_calls>",
    .open = "<function_calls>\n",
    .close = "\n</function_calls>",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_post = "(",
    .args_as = CV_TS_ARGS_PYTHON,
    .args_post = ")",
};

const cv_tc_format tc_fmt_olmo3 = {
    .name = "olmo3",
    .syntax = &syntax,
    .summary = "<function_calls>f(a=1)\\ng(b=\"x\")</function_calls>",
    .tmpl = { (const char *const[]){ "<function_calls>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "olmo-3", "olmo3", NULL },
    .starts = starts,
};
