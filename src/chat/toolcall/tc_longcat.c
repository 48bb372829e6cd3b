/* tc_longcat.c — LongCat tool calls: <longcat_tool_call>{..}</longcat_tool_call>.
 * Hermes-style JSON calls in LongCat's own envelope. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</longcat_tool_call>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<longcat_tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "longcat",
    .trigger = "<longcat_tool_call>",
    .call_open = "<longcat_tool_call>\n",
    .call_close = "\n</longcat_tool_call>",
    .sep = "\n",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_longcat = {
    .name = "longcat",
    .syntax = &syntax,
    .summary = "<longcat_tool_call>{\"name\": .., \"arguments\": {..}}</longcat_tool_call>",
    .names = (const char *const[]){ "longcat", NULL },
    .starts = starts,
};
