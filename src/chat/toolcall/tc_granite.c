/* tc_granite.c — IBM Granite 3 tool calls: <|tool_call|>[{..}].
 * Granite 3.x writes a JSON list after <|tool_call|> with no end marker
 * (Granite 3.1 sometimes uses <tool_call>...</tool_call>). */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .items = IT_JSON | IT_LIST,
    .one = true,
    .skip = tc_skip_fences,
};

static const tc_env env_tag = {
    .end = "</tool_call>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<|tool_call|>", .read = tc_read_env, .cfg = &env },
    { .marker = "<tool_call>", .read = tc_read_env, .cfg = &env_tag },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "granite",
    .trigger = "<|tool_call|>",
    .open = "<|tool_call|>[",
    .close = "]",
    .sep = ", ",
    .specials = (const char *const[]){ "<|tool_call|>", NULL },
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_granite = {
    .name = "granite",
    .syntax = &syntax,
    .summary = "<|tool_call|>[{\"name\": .., \"arguments\": {..}}]",
    .tmpl = { (const char *const[]){ "<|tool_call|>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "granite-3", "granite3", NULL },
    .starts = starts,
};
