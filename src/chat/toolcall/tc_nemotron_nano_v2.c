/* tc_nemotron_nano_v2.c — NVIDIA Nemotron Nano v2 tool calls: <TOOLCALL>[{..}]</TOOLCALL>.
 * A JSON list of calls between <TOOLCALL> tags, after <think> reasoning. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</TOOLCALL>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<TOOLCALL>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "nemotron_nano_v2",
    .trigger = "<TOOLCALL>",
    .open = "<TOOLCALL>[",
    .close = "]</TOOLCALL>",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_nemotron_nano_v2 = {
    .name = "nemotron_nano_v2",
    .syntax = &syntax,
    .summary = "<TOOLCALL>[{\"name\": .., \"arguments\": {..}}]</TOOLCALL>",
    .aliases = (const char *const[]){ "nemotron", NULL },
    .tmpl = { (const char *const[]){ "<TOOLCALL>", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "nemotron-nano-9b", "nemotron-nano-12b", "nemotron_nano_v2", "nemotron-h", NULL },
    .starts = starts,
};
