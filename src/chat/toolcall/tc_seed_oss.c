/* tc_seed_oss.c — ByteDance Seed-OSS tool calls: <seed:tool_call><function=..>.
 * Seed-OSS writes Qwen3-Coder's <function=NAME><parameter=K>V</parameter>
 * inside <seed:tool_call>, but with values inline (no layout newlines: a
 * trailing newline is part of the value), and thinks in
 * <seed:think>...</seed:think>. */
#include "chat/toolcall/tc_int.h"

static const tc_xml xml = {
    .invoke = "<function=",
    .invoke_end = "</function>",
    .param = "<parameter=",
    .param_end = "</parameter>",
    .stops = (const char *const[]){ "</seed:tool_call>", NULL },
};

static const tc_env env = {
    .end = "</seed:tool_call>",
    .items = IT_XML | IT_JSON,
    .xml = &xml,
};

static const tc_start starts[] = {
    { .marker = "<seed:tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

static const tc_reason reason[] = { { .open = "<seed:think>", .close = "</seed:think>" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "seed_oss",
    .trigger = "<seed:tool_call>",
    .call_open = "<seed:tool_call>\n",
    .call_close = "</seed:tool_call>",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<function=",
    .name_post = ">\n",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<parameter=",
    .param_mid = ">",
    .param_close = "</parameter>\n",
    .args_post = "</function>\n",
};

const cv_tc_format tc_fmt_seed_oss = {
    .name = "seed_oss",
    .syntax = &syntax,
    .summary = "<seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>",
    .aliases = (const char *const[]){ "seed", NULL },
    .tmpl = { (const char *const[]){ "seed:tool_call", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "seed-oss", "seed_oss", "seedoss", NULL },
    .reason = reason,
    .starts = starts,
};
