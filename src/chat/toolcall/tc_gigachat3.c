/* tc_gigachat3.c — GigaChat 3 tool calls: function call<|role_sep|>{..} / <|function_call|>{..}.
 * GigaChat 3 opens a function-call message (<|message_sep|> then "function
 * call<|role_sep|>"), GigaChat 3.1 writes <|function_call|>; one JSON call
 * follows. Text after it (an end-of-sequence token) is dropped. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .items = IT_JSON,
    .one = true,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "function call<|role_sep|>", .read = tc_read_env, .cfg = &env },
    { .marker = "<|function_call|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "gigachat3",
    .trigger = "<|function_call|>",
    .call_open = "<|function_call|>",
    .single = true,
    .specials = (const char *const[]){ "<|function_call|>", NULL },
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_gigachat3 = {
    .name = "gigachat3",
    .syntax = &syntax,
    .summary = "<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{..} or <|function_call|>{..}",
    .aliases = (const char *const[]){ "gigachat", NULL },
    .tmpl = { (const char *const[]){ "function call", "<|role_sep|>", NULL }, (const char *const[]){ "<|function_call|>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "gigachat", NULL },
    .starts = starts,
    .drops = (const char *const[]){ "<|message_sep|>", "</s>", NULL },
    .flags = TC_F_DRAIN,
};
