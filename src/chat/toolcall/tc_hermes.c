/* tc_hermes.c — Hermes / Qwen 2.5 tool calls: <tool_call>{"name":..,"arguments":{..}}</tool_call>.
 * The syntax of Hermes 2/3, Qwen 2.5, QwQ, Qwen3 (non-coder), MiMo, Granite
 * 4, Reka and ERNIE 4.5. Inside <tool_call> the body is sniffed, so a model
 * that writes a JSON list, a Qwen3-Coder <function=...> block or GLM's
 * NAME<arg_key> there is still understood. It is also the format used when
 * nothing better is known. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</tool_call>",
    .items = IT_JSON | IT_LIST | IT_XML | IT_GLM,
    .xml = &tc_xml_qwen,
    .glm = &tc_xml_glm,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "hermes",
    .trigger = "<tool_call>",
    .call_open = "<tool_call>\n",
    .call_close = "\n</tool_call>",
    .sep = "\n",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "arguments",
};

const cv_tc_format tc_fmt_hermes = {
    .name = "hermes",
    .syntax = &syntax,
    .summary = "<tool_call>{\"name\": .., \"arguments\": {..}}</tool_call>",
    .aliases = (const char *const[]){ "qwen25", "qwen2_5", "ernie45", NULL },
    .tmpl = { (const char *const[]){ "<tool_call>", NULL } },
    .tmpl_rank = 50,
    .names = (const char *const[]){ "hermes", "qwen2", "qwen3", "qwq", "mimo", "granite-4", "granite4", "reka", "ernie", "smollm3", "bielik", NULL },
    .starts = starts,
};
