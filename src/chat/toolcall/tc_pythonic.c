/* tc_pythonic.c — Pythonic tool calls: [f(a=1), g(b="x")] (Llama 3.2/4, ToolACE).
 * The whole reply is a Python list of calls, or Llama 4 wraps it in
 * <|python_start|>...<|python_end|>. A bare list is only taken at the very
 * start of the reply, and only once it has been read whole, so a reply that
 * starts with an ordinary bracketed phrase stays text. */
#include "chat/toolcall/tc_int.h"

static const tc_env env_bare = {
    .items = IT_PYLIST,
    .one = true,
};

static const tc_env env_tag = {
    .end = "<|python_end|>",
    .items = IT_PY | IT_PYLIST,
};

static const tc_start starts[] = {
    { .marker = "<|python_start|>", .read = tc_read_env, .cfg = &env_tag },
    { .marker = "[", .read = tc_read_env, .cfg = &env_bare, .weak = true, .at_start = true, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "pythonic",
    .open = "[",
    .close = "]",
    .sep = ", ",
    .name_as = CV_TS_NAME_BARE,
    .name_post = "(",
    .args_as = CV_TS_ARGS_PYTHON,
    .args_post = ")",
};

const cv_tc_format tc_fmt_pythonic = {
    .name = "pythonic",
    .syntax = &syntax,
    .summary = "[f(a=1), g(b=\"x\")] or <|python_start|>[..]<|python_end|>",
    .aliases = (const char *const[]){ "llama32_pythonic", "llama4_pythonic", NULL },
    .tmpl = { (const char *const[]){ "[func_name1(", NULL } },
    .tmpl_rank = 80,
    .names = (const char *const[]){ "llama-4", "llama4", "toolace", "gemma-3", "gemma3", NULL },
    .starts = starts,
};
