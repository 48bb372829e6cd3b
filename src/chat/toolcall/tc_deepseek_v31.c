/* tc_deepseek_v31.c — DeepSeek V3.1 tool calls:
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...
 * read by the DeepSeek reader in tc_deepseek_v3.c; the difference from V3 is
 * only the head of each call (the name, where V3 writes "function"). */
#include "chat/toolcall/tc_int.h"

static int call_cfg;

static const tc_start starts[] = {
    { .marker = "<｜tool▁calls▁begin｜>", .read = tc_read_deepseek },
    { .marker = "<｜tool▁call▁begin｜>", .read = tc_read_deepseek, .cfg = &call_cfg },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "deepseek_v31",
    .trigger = "<｜tool▁calls▁begin｜>",
    .open = "<｜tool▁calls▁begin｜>",
    .close = "<｜tool▁calls▁end｜>",
    .call_open = "<｜tool▁call▁begin｜>",
    .call_close = "<｜tool▁call▁end｜>",
    .specials = (const char *const[]){ "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                       "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_post = "<｜tool▁sep｜>",
};

const cv_tc_format tc_fmt_deepseek_v31 = {
    .name = "deepseek_v31",
    .syntax = &syntax,
    .summary = "<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>",
    .aliases = (const char *const[]){ "deepseek_v3_1", "deepseek-v3.1", NULL },
    .tmpl = { (const char *const[]){ "tool▁call▁begin", "tool▁sep", NULL } },
    .tmpl_rank = 80,
    .names = (const char *const[]){ "deepseek-v3.1", "deepseek_v3.1", "deepseek-v31", NULL },
    .starts = starts,
    .flags = TC_F_DRAIN | TC_F_NO_FALLBACK,
};
