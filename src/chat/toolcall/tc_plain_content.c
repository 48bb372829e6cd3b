/* tc_plain_content.c — models whose template renders no tool-call syntax
 * (Gemma 2 and other plain chat models): the text is content, reasoning in
 * <think> is split, and calls come only from the cross-format fallback
 * (a call in any known syntax to a declared tool). */
#include "chat/toolcall/tc_int.h"

const cv_tc_format tc_fmt_plain_content = {
    .name = "plain_content",
    .summary = "no tool-call syntax of its own (cross-format fallback only)",
    .aliases = (const char *const[]){ "plain", "none", "content", NULL },
    .names = (const char *const[]){ "gemma-2", "gemma2", NULL },
    .flags = TC_F_NO_FALLBACK,
};
