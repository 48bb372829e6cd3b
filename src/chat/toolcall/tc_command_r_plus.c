/* tc_command_r_plus.c — Cohere Command R+ tool calls: Action: ```json [..] ```.
 * The model writes Action: and a fenced JSON list of {"tool_name",
 * "parameters"}; turn tokens that leak into the text are removed. */
#include "chat/toolcall/tc_int.h"

static const char *const name_keys[] = { "tool_name", "name", NULL };
static const char *const args_keys[] = { "parameters", "arguments", NULL };
static const tc_jshape shape = { .name_keys = name_keys, .args_keys = args_keys };

static const tc_env env = {
    .items = IT_JSON | IT_LIST,
    .shape = &shape,
    .skip = (const char *const[]){ "```json", "```", NULL },
    .one = true,
};

static const tc_start starts[] = {
    { .marker = "Action:", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "command_r_plus",
    .trigger = "Action:",
    .open = "Action:\n```json\n[",
    .close = "]\n```",
    .sep = ", ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "tool_name",
    .args_key = "parameters",
};

const cv_tc_format tc_fmt_command_r_plus = {
    .name = "command_r_plus",
    .syntax = &syntax,
    .summary = "Action:\\n```json\\n[{\"tool_name\": .., \"parameters\": {..}}]\\n```",
    .aliases = (const char *const[]){ "command_r", NULL },
    .tmpl = { (const char *const[]){ "Action:", "```json", NULL } },
    .tmpl_rank = 60,
    .names = (const char *const[]){ "command-r-plus", "command-r", "c4ai-command-r", NULL },
    .starts = starts,
    .drops = (const char *const[]){ "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>", NULL },
    .flags = TC_F_NO_FALLBACK,
};
