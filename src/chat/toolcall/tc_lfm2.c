/* tc_lfm2.c — Liquid LFM2 tool calls: <|tool_call_start|>[f(a=1)]<|tool_call_end|>.
 * A Python list of calls between LFM2's tool-call tokens (JSON lists are
 * accepted too). */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "<|tool_call_end|>",
    .items = IT_PY | IT_PYLIST | IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<|tool_call_start|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "lfm2",
    .trigger = "<|tool_call_start|>",
    .open = "<|tool_call_start|>[",
    .close = "]<|tool_call_end|>",
    .sep = ", ",
    .specials = (const char *const[]){ "<|tool_call_start|>", "<|tool_call_end|>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_post = "(",
    .args_as = CV_TS_ARGS_PYTHON,
    .args_post = ")",
};

const cv_tc_format tc_fmt_lfm2 = {
    .name = "lfm2",
    .syntax = &syntax,
    .summary = "<|tool_call_start|>[f(a=1), g(b=\"x\")]<|tool_call_end|>",
    .tmpl = { (const char *const[]){ "<|tool_call_start|>", NULL }, (const char *const[]){ "<|tool_list_start|>", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "lfm2", "lfm-2", NULL },
    .starts = starts,
};
