/* tc_internlm2.c — InternLM2 tool calls: <|action_start|><|plugin|>{..}<|action_end|>.
 * One JSON call with "parameters" between InternLM's action tokens. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "<|action_end|>",
    .items = IT_JSON,
    .skip = (const char *const[]){ "<|plugin|>", NULL },
};

static const tc_start starts[] = {
    { .marker = "<|action_start|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "internlm2",
    .trigger = "<|action_start|>",
    .call_open = "<|action_start|><|plugin|>\n",
    .call_close = "<|action_end|>",
    .sep = "\n",
    .specials = (const char *const[]){ "<|action_start|>", "<|plugin|>", "<|action_end|>", NULL },
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "parameters",
};

const cv_tc_format tc_fmt_internlm2 = {
    .name = "internlm2",
    .syntax = &syntax,
    .summary = "<|action_start|><|plugin|>{\"name\": .., \"parameters\": {..}}<|action_end|>",
    .tmpl = { (const char *const[]){ "action_start", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "internlm", NULL },
    .starts = starts,
};
