/* tc_apertus.c — Swiss AI Apertus tool calls: <|tools_prefix|>[{"NAME": {..}}]<|tools_suffix|>.
 * Each call is an object whose only key is the tool's name and whose value
 * is the arguments. */
#include "chat/toolcall/tc_int.h"

static const tc_jshape shape = { .name_is_key = true };

static const tc_env env = {
    .end = "<|tools_suffix|>",
    .items = IT_JSON | IT_LIST,
    .shape = &shape,
};

static const tc_start starts[] = {
    { .marker = "<|tools_prefix|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "apertus",
    .trigger = "<|tools_prefix|>",
    .open = "<|tools_prefix|>[",
    .close = "]<|tools_suffix|>",
    .sep = ", ",
    .specials = (const char *const[]){ "<|tools_prefix|>", "<|tools_suffix|>", NULL },
    .name_as = CV_TS_NAME_KEY,
};

const cv_tc_format tc_fmt_apertus = {
    .name = "apertus",
    .syntax = &syntax,
    .summary = "<|tools_prefix|>[{\"NAME\": {..}}]<|tools_suffix|>",
    .tmpl = { (const char *const[]){ "tools_prefix", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "apertus", NULL },
    .starts = starts,
};
