/* tc_mistral_pre_v11.c — Mistral tool calls before tokenizer v11: [TOOL_CALLS] [{..}].
 * Mistral 7B v0.3, Nemo and Small 2 write [TOOL_CALLS] and a JSON list of
 * calls, each with a 9-character "id" at the end (kept; generated ids
 * follow the same rule). Text after the list is dropped. */
#include "chat/toolcall/tc_int.h"

static const char *const name_keys[] = { "name", NULL };
static const char *const args_keys[] = { "arguments", "parameters", NULL };
static const char *const id_keys[] = { "id", NULL };
static const tc_jshape shape = { .name_keys = name_keys, .args_keys = args_keys, .id_keys = id_keys };

static const tc_env env = {
    .items = IT_LIST | IT_JSON | IT_NAMEJSON,
    .shape = &shape,
    .skip = (const char *const[]){ "[TOOL_CALLS]", NULL },
};

static const tc_start starts[] = {
    { .marker = "[TOOL_CALLS]", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "mistral_pre_v11",
    .trigger = "[TOOL_CALLS]",
    .open = "[TOOL_CALLS] [ ",
    .close = " ]",
    .sep = " , ",
    .specials = (const char *const[]){ "[TOOL_CALLS]", NULL },
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_mistral_pre_v11 = {
    .name = "mistral_pre_v11",
    .syntax = &syntax,
    .summary = "[TOOL_CALLS] [{\"name\": .., \"arguments\": {..}, \"id\": \"..\"}]",
    .aliases = (const char *const[]){ "mistral_nemo", NULL },
    .tmpl = { (const char *const[]){ "[TOOL_CALLS]", NULL } },
    .tmpl_rank = 70,
    .names = (const char *const[]){ "mistral-nemo", "mistral-7b", "mistral-small-24b-instruct-2501", "mistral", NULL },
    .starts = starts,
    .flags = TC_F_DRAIN | TC_F_ID9,
};
