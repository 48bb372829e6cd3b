/* tc_granite_20b_fc.c — IBM Granite 20B function-calling: <function_call> {..}.
 * Each call is one JSON object after <function_call>, with no end marker. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .items = IT_JSON,
    .one = true,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<function_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "granite_20b_fc",
    .trigger = "<function_call>",
    .call_open = "<function_call> ",
    .sep = "\n",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_granite_20b_fc = {
    .name = "granite_20b_fc",
    .syntax = &syntax,
    .summary = "<function_call> {\"name\": .., \"arguments\": {..}}",
    .tmpl = { (const char *const[]){ "<function_call>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "granite-20b-functioncalling", "granite-20b-fc", NULL },
    .starts = starts,
};
