/* tc_longcat.c — LongCat tool calls: <longcat_tool_call>{..}</longcat_tool_call>.
 * Hermes-style JSON calls in LongCat's own envelope. */
#include "chat/toolcall/tc_int.h"

static const tc_env env = {
    .end = "</longcat_tool_call>",
    .items = IT_JSON | IT_LIST,
    .skip = tc_skip_fences,
};

static const tc_start starts[] = {
    { .marker = "<longcat_tool_call>", .read = tc_read_env, .cfg = &env },
    { 0 },
};

const cv_tc_format tc_fmt_longcat = {
    .name = "longcat",
    .summary = "<longcat_tool_call>{\"name\": .., \"arguments\": {..}}</longcat_tool_call>",
    .names = (const char *const[]){ "longcat", NULL },
    .starts = starts,
};
