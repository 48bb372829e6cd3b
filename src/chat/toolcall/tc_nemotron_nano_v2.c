/* tc_nemotron_nano_v2.c — NVIDIA Nemotron Nano v2 tool calls: <TOOLCALL>[{..}]</TOOLCALL>.
 * A JSON list of calls between <TOOLCALL> tags, after <think> reasoning. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</TOOLCALL>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<TOOLCALL>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

const cv_tc_format tc_fmt_nemotron_nano_v2 = {
    .name = "nemotron_nano_v2",
    .summary = "<TOOLCALL>[{\"name\": .., \"arguments\": {..}}]</TOOLCALL>",
    .aliases = (const char *const[]){ "nemotron", NULL },
    .tmpl = { (const char *const[]){ "<TOOLCALL>", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "nemotron-nano-9b", "nemotron-nano-12b", "nemotron_nano_v2", "nemotron-h", NULL },
    .starts = starts,
};
