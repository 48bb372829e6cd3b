/* tc_apertus.c — Swiss AI Apertus tool calls: <|tools_prefix|>[{"NAME": {..}}]<|tools_suffix|>.
 * Each call is an object whose only key is the tool's name and whose value
 * is the arguments. */
#include "chat/toolcall/tc_int.h"

static const tc_jshape shape = { NULL, NULL, NULL, true, false };

static const tc_env env = {
    .end = "<|tools_suffix|>",
    .items = IT_JSON | IT_LIST,
    .shape = &shape,
};

static const tc_start starts[] = {
    { "<|tools_prefix|>", tc_read_env, &env, false, false, false },
    { NULL, NULL, NULL, false, false, false },
};

const cv_tc_format tc_fmt_apertus = {
    .name = "apertus",
    .summary = "<|tools_prefix|>[{\"NAME\": {..}}]<|tools_suffix|>",
    .tmpl = { (const char *const[]){ "tools_prefix", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "apertus", NULL },
    .starts = starts,
};
