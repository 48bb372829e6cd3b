/* tc_olmo3.c — Olmo 3 tool calls: <function_calls>f(a=1)\ng()</function_calls>.
 * Python calls, one per line, between <function_calls> tags. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</function_calls>",
    .items = IT_PY | IT_PYLIST,
};

static const tc_start starts[] = {
    { .marker = "<function_calls>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

const cv_tc_format tc_fmt_olmo3 = {
    .name = "olmo3",
    .summary = "<function_calls>f(a=1)\\ng(b=\"x\")</function_calls>",
    .tmpl = { (const char *const[]){ "<function_calls>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "olmo-3", "olmo3", NULL },
    .starts = starts,
};
