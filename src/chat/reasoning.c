/* reasoning.c — the reasoning split: text between a format's reasoning
 * markers (<think>…</think>, [THINK]…[/THINK], <|START_THINKING|>…,
 * <seed:think>…, <mm:think>…, Gemma 4's <|channel>thought…<channel|>) becomes
 * CV_CHAT_REASONING events, or stays in the content verbatim with
 * reasoning_inline. Templates that open the block in the prompt make the
 * output start inside it (cv_chat_parse_prompt_opener finds that opener).
 * Harmony's analysis channel is split by tc_gpt_oss_harmony.c itself.
 *
 * Tool-call markup inside reasoning is the model thinking about a call, not
 * making one — unless the reasoning never closes and the call is the last
 * thing generated (models that forget </think> before acting). So a call
 * section met inside reasoning is read speculatively and held (RM_HELD in
 * tc_stream.c): if only whitespace or further calls follow up to the end of
 * generation, the calls count; if the thinking goes on or closes, the held
 * text is reasoning after all. */
#include "chat/toolcall/tc_int.h"

static const tc_reason think[] = { { .open = "<think>", .close = "</think>" }, { 0 } };

const tc_reason *tc_reasons(const cv_tc_format *f)
{
    return f->reason ? f->reason : think;
}

void tc_reason_marks(tc_run *r)
{
    const tc_reason *rs = tc_reasons(r->fmt);
    for (int i = 0; rs[i].open; i++) {
        tc_markset_add(&r->cmarks, rs[i].open, MK_ROPEN, i, NULL, r->fmt);
        tc_markset_add(&r->rmarks, rs[i].close, MK_RCLOSE, i, NULL, r->fmt);
        /* a reply that starts by closing reasoning had none ("adaptive"
         * thinking, MiniMax-M3): tc_stream.c drops that closer */
        tc_markset_add(&r->cmarks, rs[i].close, MK_RCLOSE, i, NULL, r->fmt);
    }
}

void tc_reason_enter(tc_run *r, int pair, const char *opener, size_t olen)
{
    r->rpair = pair;
    r->mode = RM_REASON;
    if (r->o.reasoning_inline) {
        tc_text(r, K_CONTENT, opener, olen);
        return;
    }
    if (r->fmt->flags & TC_F_OPENER_TEXT)
        tc_text(r, K_REASONING, opener, olen);
}

int tc_reason_step(tc_run *r)
{
    int kind = r->o.reasoning_inline ? K_CONTENT : K_REASONING;
    size_t n = tc_n(r);
    if (!n)
        return TC_MORE;
    const char *p = tc_p(r);
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(&r->rmarks, p, n, r->eof, &at, &hit, &r->work);
    tc_text(r, kind, p, at);
    tc_eat(r, at);
    if (s != SCAN_HIT)
        return TC_MORE;
    /* the set may hold other rows' markers (output detection): only the
     * closer of the pair in use closes, only the format's own starts start */
    const tc_start *st = NULL;
    if (hit->kind == MK_START)
        st = hit->fmt == r->fmt ? hit->start : tc_own_start(r->fmt, hit);
    if ((hit->kind == MK_RCLOSE && tc_own_pair(r->fmt, hit, true) != r->rpair) || (hit->kind == MK_START && !st)) {
        tc_text(r, kind, tc_p(r), 1);
        tc_eat(r, 1);
        return TC_OK;
    }
    if (hit->kind == MK_RCLOSE) {
        tc_eat(r, hit->len);
        if (r->o.reasoning_inline)
            tc_text(r, K_CONTENT, hit->s, hit->len);
        r->mode = RM_CONTENT;
        return TC_OK;
    }
    /* a tool-call section inside reasoning: read it, hold it */
    size_t raw = r->pos;
    tc_spec_begin(r, raw, kind, RM_REASON);
    r->spec_hold = true;
    r->spec_weak = false;
    if (!st->keep)
        tc_eat(r, hit->len);
    tc_section_begin(r, st, r->fmt, raw, kind, false);
    return TC_OK;
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
