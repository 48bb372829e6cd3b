/* tc_apriel.c — ServiceNow Apriel tool calls and reasoning.
 * Apriel 1.5/1.6 think in plain text after "Here are my reasoning steps:"
 * (which its template writes into the prompt) up to [BEGIN FINAL RESPONSE];
 * calls are a JSON list in <tool_calls>...</tool_calls>. The opener is kept
 * as the start of the reasoning text, as Apriel's own chat template does. */
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

static const tc_reason reason[] = { { .open = "Here are my reasoning steps:\n", .close = "[BEGIN FINAL RESPONSE]" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "apriel",
    .trigger = "<tool_calls>",
    .open = "<tool_calls>[",
    .close = "]</tool_calls>",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_apriel = {
    .name = "apriel",
    .syntax = &syntax,
    .summary = "reasoning until [BEGIN FINAL RESPONSE], then <tool_calls>[{..}]</tool_calls>",
    .tmpl = { (const char *const[]){ "<tool_calls>", "BEGIN FINAL RESPONSE", NULL }, (const char *const[]){ "<|assistant|>", "[BEGIN FINAL RESPONSE]", NULL } },
    .tmpl_rank = 88,
    .names = (const char *const[]){ "apriel", NULL },
    .reason = reason,
    .starts = starts,
    .drops = (const char *const[]){ "[END FINAL RESPONSE]", "<|end|>", NULL },
    .flags = TC_F_OPENER_TEXT,
};
