/* reasoning.c — the reasoning syntaxes: a format's reasoning markers
 * (<think>…</think>, [THINK]…[/THINK], <|START_THINKING|>…, <seed:think>…,
 * <mm:think>…, Gemma 4's <|channel>thought…<channel|>), the marker-set
 * entries they make, and the opener a prompt leaves open
 * (cv_chat_parse_prompt_opener: templates that open the block in the prompt
 * make the output start inside it). The split itself, text between the
 * markers becoming CV_CHAT_REASONING events or staying in the content with
 * reasoning_inline, is a mode of the parser's engine (tc_stream.c
 * "reasoning"), which alone writes the parser's state; Harmony's analysis
 * channel is split by tc_gpt_oss_harmony.c itself. Nothing here writes a
 * parser. */
#include "chat/toolcall/tc_int.h"

static const tc_reason think[] = { { .open = "<think>", .close = "</think>" }, { 0 } };

const tc_reason *tc_reasons(const cv_tc_format *f)
{
    return f->reason ? f->reason : think;
}

void tc_reason_marks(const cv_tc_format *f, tc_markset *content, tc_markset *reasoning)
{
    const tc_reason *rs = tc_reasons(f);
    for (int i = 0; rs[i].open; i++) {
        tc_markset_add(content, rs[i].open, MK_ROPEN, i, NULL, f);
        tc_markset_add(reasoning, rs[i].close, MK_RCLOSE, i, NULL, f);
        /* a reply that starts by closing reasoning had none ("adaptive"
         * thinking, MiniMax-M3): tc_stream.c drops that closer */
        tc_markset_add(content, rs[i].close, MK_RCLOSE, i, NULL, f);
    }
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

cv_str cv_chat_parse_prompt_opener(const cv_tc_format *f, cv_str prompt)
{
    if (!f || !prompt.len || f->stream)
        return (cv_str){ prompt.ptr, 0 };
    size_t end = prompt.len;
    while (end && is_ws(prompt.ptr[end - 1]))
        end--;
    const tc_reason *rs = tc_reasons(f);
    for (int i = 0; rs[i].open; i++) {
        size_t m = strlen(rs[i].open);
        /* "Here are my reasoning steps:\n" style openers end in whitespace */
        size_t om = m;
        while (om && is_ws(rs[i].open[om - 1]))
            om--;
        if (end >= om && !memcmp(prompt.ptr + end - om, rs[i].open, om))
            return (cv_str){ prompt.ptr + end - om, prompt.len - (end - om) };
    }
    return (cv_str){ prompt.ptr + prompt.len, 0 };
}
