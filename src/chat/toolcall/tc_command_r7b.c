/* tc_command_r7b.c — Cohere Command R7B / Command A tool calls and thinking.
 * <|START_THINKING|>...<|END_THINKING|> reasoning, then
 * <|START_ACTION|>[{"tool_call_id": "0", "tool_name": .., "parameters":
 * {..}}]<|END_ACTION|> or <|START_RESPONSE|>text<|END_RESPONSE|> (Cohere2
 * writes <|START_TEXT|>). The response markers are removed; the call ids
 * the model writes are kept. */
#include "chat/toolcall/tc_int.h"

static const char *const name_keys[] = { "tool_name", "name", NULL };
static const char *const args_keys[] = { "parameters", "arguments", NULL };
static const char *const id_keys[] = { "tool_call_id", "id", NULL };
static const tc_jshape shape = { .name_keys = name_keys, .args_keys = args_keys, .id_keys = id_keys };

static const tc_env env = {
    .end = "<|END_ACTION|>",
    .items = IT_JSON | IT_LIST,
    .shape = &shape,
};

static const tc_start starts[] = {
    { .marker = "<|START_ACTION|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

static const tc_reason reason[] = { { .open = "<|START_THINKING|>", .close = "<|END_THINKING|>" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "command_r7b",
    .trigger = "<|START_ACTION|>",
    .open = "<|START_ACTION|>[",
    .close = "]<|END_ACTION|>",
    .sep = ", ",
    .specials = (const char *const[]){ "<|START_ACTION|>", "<|END_ACTION|>", NULL },
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "tool_name",
    .args_key = "parameters",
};

const cv_tc_format tc_fmt_command_r7b = {
    .name = "command_r7b",
    .syntax = &syntax,
    .summary = "<|START_THINKING|>..<|END_THINKING|><|START_ACTION|>[{\"tool_name\": .., \"parameters\": {..}}]<|END_ACTION|>",
    .aliases = (const char *const[]){ "command_a", "cohere2", NULL },
    .tmpl = { (const char *const[]){ "START_ACTION", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "command-r7b", "command-a", "cohere2", "c4ai-command-r7b", NULL },
    .reason = reason,
    .starts = starts,
    .drops = (const char *const[]){ "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>", NULL },
};
