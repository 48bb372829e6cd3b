/* tc_glm45.c — GLM-4.5 / 4.6 / 4.7 tool calls:
 *   <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
 * Values are raw text typed by the schema; some outputs escape the whole
 * call (a literal backslash-n after the name, \" inside JSON values), which
 * the value conversion undoes. Reasoning is <think>...</think>; GLM-4.7's
 * template opens it in the prompt. */
#include "chat/toolcall/tc_int.h"

const tc_xml tc_xml_glm = {
    .param = "<arg_key>",
    .param_end = "</arg_value>",
    .stops = (const char *const[]){ "</tool_call>", NULL },
};

static const tc_env env = {
    .end = "</tool_call>",
    .items = IT_GLM | IT_JSON | IT_LIST,
    .glm = &tc_xml_glm,
    .xml = &tc_xml_glm,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "glm45",
    .trigger = "<tool_call>",
    .call_open = "<tool_call>",
    .call_close = "</tool_call>",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_post = "\n",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<arg_key>",
    .param_mid = "</arg_key>\n<arg_value>",
    .param_close = "</arg_value>\n",
};

const cv_tc_format tc_fmt_glm45 = {
    .name = "glm45",
    .syntax = &syntax,
    .summary = "<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>",
    .aliases = (const char *const[]){ "glm", "glm4", "glm46", "glm47", NULL },
    .tmpl = { (const char *const[]){ "arg_key", NULL } },
    .tmpl_rank = 75,
    .names = (const char *const[]){ "glm-4.5", "glm-4.6", "glm-4.7", "glm4", "glm-4", "laguna", NULL },
    .starts = starts,
};
