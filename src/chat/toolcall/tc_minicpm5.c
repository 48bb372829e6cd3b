/* tc_minicpm5.c — MiniCPM 5 tool calls: <function name=".."><param name="..">V</param></function>.
 * Values may be wrapped in <![CDATA[...]]> so that markup inside them (even
 * </param>) is literal. */
#include "chat/toolcall/tc_int.h"

static const tc_xml xml = {
    .invoke = "<function name=\"",
    .name_quoted = true,
    .invoke_end = "</function>",
    .param = "<param name=\"",
    .param_quoted = true,
    .param_end = "</param>",
    .cdata = true,
};

static const tc_env env = {
    .items = IT_XML,
    .xml = &xml,
    .one = true,
};

static const tc_start starts[] = {
    { .marker = "<function name=\"", .read = tc_read_env, .cfg = &env, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "minicpm5",
    .trigger = "<function name=\"",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<function name=\"",
    .name_post = "\">",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<param name=\"",
    .param_mid = "\">",
    .param_close = "</param>",
    .args_post = "</function>",
};

const cv_tc_format tc_fmt_minicpm5 = {
    .name = "minicpm5",
    .syntax = &syntax,
    .summary = "<function name=\"NAME\"><param name=\"K\">V</param></function>",
    .tmpl = { (const char *const[]){ "<function name=", NULL } },
    .tmpl_rank = 80,
    .names = (const char *const[]){ "minicpm", NULL },
    .starts = starts,
};
