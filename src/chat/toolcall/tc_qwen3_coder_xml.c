/* tc_qwen3_coder_xml.c — Qwen3-Coder XML tool calls:
 *   <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
 * used by Qwen3-Coder, Qwen3.5, NVIDIA Nemotron 3 and StepFun 3.5. The
 * template writes each value on its own lines, so one newline after the open
 * tag and one before the close tag are layout (tc_xml.strip_nl); anything
 * more is the value's. Some outputs drop the <tool_call> wrapper and start at
 * <function=, which is accepted; Hermes JSON inside <tool_call> too. */
#include "chat/toolcall/tc_int.h"

const tc_xml tc_xml_qwen = {
    .invoke = "<function=",
    .invoke_end = "</function>",
    .param = "<parameter=",
    .param_end = "</parameter>",
    .strip_nl = true,
    .stops = (const char *const[]){ "</tool_call>", NULL },
};

static const tc_env env_tag = {
    .end = "</tool_call>",
    .items = IT_XML | IT_JSON | IT_LIST | IT_GLM,
    .xml = &tc_xml_qwen,
    .glm = &tc_xml_glm,
    .skip = tc_skip_fences,
};

static const tc_env env_bare = {
    .end = "</tool_call>",
    .items = IT_XML,
    .xml = &tc_xml_qwen,
};

static const tc_start starts[] = {
    { .marker = "<tool_call>", .read = tc_read_env, .cfg = &env_tag },
    { .marker = "<function=", .read = tc_read_env, .cfg = &env_bare, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "qwen3_coder_xml",
    .trigger = "<tool_call>",
    .call_open = "<tool_call>\n",
    .call_close = "</tool_call>",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<function=",
    .name_post = ">\n",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<parameter=",
    .param_mid = ">\n",
    .param_close = "\n</parameter>\n",
    .args_post = "</function>\n",
};

const cv_tc_format tc_fmt_qwen3_coder_xml = {
    .name = "qwen3_coder_xml",
    .syntax = &syntax,
    .summary = "<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>",
    .aliases = (const char *const[]){ "qwen3_coder", "qwen3coder", "qwen3_xml", "qwen35", NULL },
    .tmpl = { (const char *const[]){ "<function=", "<parameter=", NULL } },
    .tmpl_rank = 70,
    .names = (const char *const[]){ "qwen3-coder", "qwen3coder", "qwen3.5", "qwen3_5", "qwen3-next", "nemotron-3",
                                    "step-3.5", "step3.5", NULL },
    .starts = starts,
};
