/* tc_lfm2.c — Liquid LFM2 tool calls: <|tool_call_start|>[f(a=1)]<|tool_call_end|>.
 * A Python list of calls between LFM2's tool-call tokens (JSON lists are
 * accepted too). */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "<|tool_call_end|>",
    .items = IT_PY | IT_PYLIST | IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<|tool_call_start|>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

const cv_tc_format tc_fmt_lfm2 = {
    .name = "lfm2",
    .summary = "<|tool_call_start|>[f(a=1), g(b=\"x\")]<|tool_call_end|>",
    .tmpl = { (const char *const[]){ "<|tool_call_start|>", NULL }, (const char *const[]){ "<|tool_list_start|>", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "lfm2", "lfm-2", NULL },
    .starts = starts,
};
