/* tc_minimax_m2.c — MiniMax-M2 tool calls: <minimax:tool_call><invoke name="..">.
 * Parameters as <parameter name="K">V</parameter> inside <invoke
 * name="NAME">, values typed by the schema. */
#include "chat/toolcall/tc_int.h"

static const tc_xml xml = {
    .invoke = "<invoke name=\"",
    .name_quoted = true,
    .invoke_end = "</invoke>",
    .param = "<parameter name=\"",
    .param_quoted = true,
    .param_end = "</parameter>",
    .stops = (const char *const[]){ "</minimax:tool_call>", NULL },
};

static const tc_env env = {
    .end = "</minimax:tool_call>",
    .items = IT_XML | IT_JSON,
    .xml = &xml,
};

static const tc_start starts[] = {
    { .marker = "<minimax:tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "minimax_m2",
    .trigger = "<minimax:tool_call>",
    .open = "<minimax:tool_call>\n",
    .close = "</minimax:tool_call>",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<invoke name=\"",
    .name_post = "\">\n",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<parameter name=\"",
    .param_mid = "\">",
    .param_close = "</parameter>\n",
    .args_post = "</invoke>\n",
};

const cv_tc_format tc_fmt_minimax_m2 = {
    .name = "minimax_m2",
    .syntax = &syntax,
    .summary = "<minimax:tool_call><invoke name=\"NAME\"><parameter name=\"K\">V</parameter></invoke></minimax:tool_call>",
    .tmpl = { (const char *const[]){ "minimax:tool_call", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "minimax-m2", "minimax_m2", NULL },
    .starts = starts,
};
