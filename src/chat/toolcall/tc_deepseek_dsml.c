/* tc_deepseek_dsml.c — DeepSeek V3.2 / V4 DSML tool calls.
 * <｜DSML｜function_calls> (V3.2) or <｜DSML｜tool_calls> (V4) holding
 * <｜DSML｜invoke name="NAME"> with <｜DSML｜parameter name="K"
 * string="true|false">V</｜DSML｜parameter>. string="true" keeps the text a
 * string whatever the schema says; string="false" means the text is JSON
 * (typed by the schema when there is one). */
#include "chat/toolcall/tc_int.h"

static const tc_xml xml = {
    .invoke = "<｜DSML｜invoke name=\"",
    .name_quoted = true,
    .invoke_end = "</｜DSML｜invoke>",
    .param = "<｜DSML｜parameter name=\"",
    .param_quoted = true,
    .param_end = "</｜DSML｜parameter>",
    .string_attr = true,
    .stops = (const char *const[]){ "</｜DSML｜function_calls>", "</｜DSML｜tool_calls>", NULL },
};

static const tc_env env = {
    .end = "</｜DSML｜function_calls>",
    .alt_end = (const char *const[]){ "</｜DSML｜tool_calls>", NULL },
    .items = IT_XML,
    .xml = &xml,
};

static const tc_start starts[] = {
    { .marker = "<｜DSML｜function_calls>", .read = tc_read_env, .cfg = &env },
    { .marker = "<｜DSML｜tool_calls>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "deepseek_dsml",
    .trigger = "<｜DSML｜function_calls>",
    .open = "<｜DSML｜function_calls>\n",
    .close = "</｜DSML｜function_calls>",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<｜DSML｜invoke name=\"",
    .name_post = "\">\n",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<｜DSML｜parameter name=\"",
    .param_mid = "\" string=\"false\">",
    .param_close = "</｜DSML｜parameter>\n",
    .values_json = true,
    .args_post = "</｜DSML｜invoke>\n",
};

const cv_tc_format tc_fmt_deepseek_dsml = {
    .name = "deepseek_dsml",
    .syntax = &syntax,
    .summary = "<｜DSML｜function_calls><｜DSML｜invoke name=\"..\"><｜DSML｜parameter name=\"..\" string=\"true\">V</｜DSML｜parameter>",
    .aliases = (const char *const[]){ "dsml", "deepseek_v32", "deepseek_v4", NULL },
    .tmpl = { (const char *const[]){ "DSML", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "deepseek-v3.2", "deepseek-v4", "deepseek_v32", "deepseek_v4", NULL },
    .starts = starts,
    .flags = TC_F_DRAIN,
};
