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

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "step3",
    .trigger = "<｜tool_calls_begin｜>",
    .open = "<｜tool_calls_begin｜>",
    .close = "<｜tool_calls_end｜>",
    .call_open = "<｜tool_call_begin｜>",
    .call_close = "<｜tool_call_end｜>",
    .specials = (const char *const[]){ "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
                                       "<｜tool_call_end｜>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<steptml:invoke name=\"",
    .name_post = "\">",
    .args_as = CV_TS_ARGS_XML,
    .param_open = "<steptml:parameter name=\"",
    .param_mid = "\">",
    .param_close = "</steptml:parameter>",
    .args_post = "</steptml:invoke>",
};

const cv_tc_format tc_fmt_step3 = {
    .name = "step3",
    .syntax = &syntax,
    .summary = "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"..\"><steptml:parameter name=\"..\">V</steptml:parameter></steptml:invoke><｜tool_call_end｜>",
    .aliases = (const char *const[]){ "steptml", NULL },
    .names = (const char *const[]){ "step3", "step-3", NULL },
    .starts = starts,
};
