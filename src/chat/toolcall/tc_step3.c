/* tc_step3.c — StepFun Step-3 tool calls: <steptml:invoke name=..>.
 * <｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke
 * name="NAME"><steptml:parameter
 * name="K">V</steptml:parameter></steptml:invoke><｜tool_call_end｜>, calls
 * separated by <｜tool_sep｜>. */
#include "chat/toolcall/tc_int.h"

static const tc_xml xml = {
    .invoke = "<steptml:invoke name=\"",
    .name_quoted = true,
    .invoke_end = "</steptml:invoke>",
    .param = "<steptml:parameter name=\"",
    .param_quoted = true,
    .param_end = "</steptml:parameter>",
    .stops = (const char *const[]){ "<｜tool_call_end｜>", "<｜tool_calls_end｜>", NULL },
};

static const tc_env env = {
    .end = "<｜tool_calls_end｜>",
    .items = IT_XML,
    .xml = &xml,
    .skip = (const char *const[]){ "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>", NULL },
};

static const tc_start starts[] = {
    { .marker = "<｜tool_calls_begin｜>", .read = tc_read_env, .cfg = &env },
    { .marker = "<｜tool_call_begin｜>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

const cv_tc_format tc_fmt_step3 = {
    .name = "step3",
    .summary = "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"..\"><steptml:parameter name=\"..\">V</steptml:parameter></steptml:invoke><｜tool_call_end｜>",
    .aliases = (const char *const[]){ "steptml", NULL },
    .names = (const char *const[]){ "step3", "step-3", NULL },
    .starts = starts,
};
