/* tc_hunyuan_a13b.c — Hunyuan-A13B tool calls: <tool_calls>[{..}]</tool_calls>.
 * A JSON list of calls, or one call object per line, between <tool_calls>
 * and </tool_calls>; text after the section is dropped where the model's
 * peers drop it. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</tool_calls>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<tool_calls>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "hunyuan_a13b",
    .trigger = "<tool_calls>",
    .open = "<tool_calls>[",
    .close = "]</tool_calls>",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_hunyuan_a13b = {
    .name = "hunyuan_a13b",
    .syntax = &syntax,
    .summary = "<tool_calls>[{\"name\": .., \"arguments\": {..}}]</tool_calls>",
    .tmpl = { (const char *const[]){ "<tool_calls>", "<|startoftext|>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "hunyuan", NULL },
    .starts = starts,
    .flags = TC_F_DRAIN,
};
