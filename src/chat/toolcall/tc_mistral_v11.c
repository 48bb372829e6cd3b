/* tc_mistral_v11.c — Mistral tool calls, tokenizer v11+: [TOOL_CALLS]NAME[ARGS]{..}.
 * Mistral Small 3.2, Devstral, Ministral 3 and Magistral write each call as
 * [TOOL_CALLS]NAME[ARGS]{..} ([CALL_ID]id before [ARGS] in some versions,
 * NAME{..} in others); [THINK]...[/THINK] is reasoning. The older list form
 * is accepted too. Generated ids are 9 letters and digits, which Mistral
 * templates require. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .items = IT_NAMEJSON | IT_LIST | IT_JSON,
    .skip = (const char *const[]){ "[TOOL_CALLS]", NULL },
};

static const tc_start starts[] = {
    { .marker = "[TOOL_CALLS]", .read = tc_read_env, .cfg = &env },
    { 0 },
};

static const tc_reason reason[] = { { .open = "[THINK]", .close = "[/THINK]" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "mistral_v11",
    .trigger = "[TOOL_CALLS]",
    .call_open = "[TOOL_CALLS]",
    .sep = " ",
    .specials = (const char *const[]){ "[TOOL_CALLS]", "[ARGS]", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_post = "[ARGS]",
    .name_post_opt = true,
};

const cv_tc_format tc_fmt_mistral_v11 = {
    .name = "mistral_v11",
    .syntax = &syntax,
    .summary = "[TOOL_CALLS]NAME[ARGS]{..} / [TOOL_CALLS]NAME{..}",
    .aliases = (const char *const[]){ "mistral", "devstral", "magistral", NULL },
    .tmpl = { (const char *const[]){ "[TOOL_CALLS]", "[ARGS]", NULL } },
    .tmpl_rank = 80,
    .names = (const char *const[]){ "mistral-small-3", "devstral", "ministral-3", "magistral", "mistral-medium", "mistral-large-2411", NULL },
    .reason = reason,
    .starts = starts,
    .flags = TC_F_DRAIN | TC_F_ID9,
};
