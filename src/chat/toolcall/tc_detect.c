/* tc_detect.c — output detection (cv_chat_parse_opts.detect): recovering
 * calls written in a syntax other than the one chosen for the model, from
 * the markers in the text itself. The chosen format (the template's) keeps
 * its own markers; on top, the marker sets hold every other row's
 * markers, tagged with their row, and this file says what such a marker
 * means when it is met. tc_stream.c does the rest (sections, speculation).
 *
 * The rules, in order:
 *   - A marker text that the format in use also writes means what it means
 *     to that format (rows share markers: <tool_call>, [TOOL_CALLS]).
 *   - Strong evidence, a row's start marker (<tool_call>, <|channel|>,
 *     [TOOL_CALLS], <｜tool▁calls▁begin｜>, ...): the format switches to that
 *     row at once, speculatively — if the section turns out to be prose it
 *     is released as text and the previous format is back. A reasoning
 *     opener of another row ([THINK], <seed:think>) that opens the reply
 *     switches for good.
 *   - Weak evidence, a row's bare shapes (cv_tc_format.detect: a JSON call
 *     object, a list of calls, a ```json fence, Harmony's text form): a
 *     call only once read whole, naming a declared tool, with arguments
 *     that fit its schema (tc_args_fit); a Python list of calls only as the
 *     whole reply. Prose, code and JSON answers stay content. The row in
 *     use is held to the same rules for its shapes its starts do not
 *     write (Llama 3's fenced call).
 *   - Detection runs while nothing has been found (no call yet); after a
 *     call, only the format in use and the row it was found in count, so a
 *     second syntax later in the reply is text.
 * Rows that read the whole stream themselves (Harmony) take over through
 * TC_SWITCH: their reader rereads from the marker on. In their own content
 * (Harmony's final channel, Functionary v3.2's "all" messages) they look
 * for the bare shapes alone (tc_detect_shapes), held to the same rules. The cost is one
 * marker set built per parser; scanning stays one pass over the text.
 * This file only decides: it reads the parser and fills the marker sets it
 * is handed; what a decision changes (the format, the speculation) is
 * tc_stream.c's to write. */
#include "chat/toolcall/tc_int.h"

static bool same_text(const char *s, const tc_mark *m)
{
    return s && strlen(s) == m->len && !memcmp(s, m->s, m->len);
}

const tc_start *tc_own_start(const cv_tc_format *f, const tc_mark *m)
{
    for (const tc_start *s = f->starts; s && s->marker; s++)
        if (same_text(s->marker, m))
            return s;
    return NULL;
}

int tc_own_pair(const cv_tc_format *f, const tc_mark *m, bool closer)
{
    const tc_reason *rs = tc_reasons(f);
    for (int i = 0; rs[i].open; i++)
        if (same_text(closer ? rs[i].close : rs[i].open, m))
            return i;
    return -1;
}

static bool own_drop(const cv_tc_format *f, const tc_mark *m)
{
    for (const char *const *d = f->drops; d && *d; d++)
        if (same_text(*d, m))
            return true;
    return false;
}

/* Reasoning openers that are markup, not words ("Here are my reasoning
 * steps:" would turn prose into thinking). */
static bool is_markup(const char *s)
{
    return strpbrk(s, "<>[]|") != NULL;
}

int tc_read_switch(tc_run *r, tc_sec *s)
{
    (void)r;
    (void)s;
    return TC_SWITCH;
}

/* Whether a bare shape may be a call here: tools unknown or some declared,
 * tool_choice not none, and not a JSON response (which is one JSON
 * document, not a call). */
static bool shapes_may_call(const tc_run *r)
{
    return (!r->o.tools || json_array_size(r->o.tools)) && !r->o.tool_choice_none && !r->o.json_response;
}

void tc_detect_marks(const tc_run *r, tc_markset *content, tc_markset *reasoning)
{
    bool shapes = shapes_may_call(r);
    for (int i = 0; i < cv_tc_n_formats; i++) {
        const cv_tc_format *g = cv_tc_formats[i];
        if (g == r->fmt) {
            /* The row's own bare shapes that its starts do not write (Llama
             * 3's call in a ```json fence): a call by the rules of weak
             * evidence, as when another row is in use. A shape its starts
             * do write keeps the start's meaning (registered first). */
            for (const tc_start *s = g->detect; s && s->marker; s++)
                if (s->weak && shapes)
                    tc_markset_add(content, s->marker, MK_START, 0, s, g);
            continue;
        }
        for (const tc_start *s = g->starts; s && s->marker; s++) {
            if (s->weak || s->at_start)
                continue;
            tc_markset_add(content, s->marker, MK_START, 0, s, g);
            tc_markset_add(reasoning, s->marker, MK_START, 0, s, g);
        }
        /* weak shapes only where a call may come of them */
        for (const tc_start *s = g->detect; s && s->marker; s++)
            if (!s->weak || shapes)
                tc_markset_add(content, s->marker, MK_START, 0, s, g);
        const tc_reason *rs = tc_reasons(g);
        for (int k = 0; rs[k].open; k++) {
            if (!is_markup(rs[k].open))
                continue;
            tc_markset_add(content, rs[k].open, MK_ROPEN, k, NULL, g);
            tc_markset_add(reasoning, rs[k].close, MK_RCLOSE, k, NULL, g);
        }
        for (const char *const *d = g->drops; d && *d; d++)
            tc_markset_add(content, *d, MK_DROP, 0, NULL, g);
    }
}

void tc_detect_shapes(const tc_run *r, tc_markset *set)
{
    if (!r->o.detect || !shapes_may_call(r))
        return;
    for (int i = 0; i < cv_tc_n_formats; i++)
        for (const tc_start *s = cv_tc_formats[i]->detect; s && s->marker; s++)
            if (s->weak)
                tc_markset_add(set, s->marker, MK_START, 0, s, cv_tc_formats[i]);
}

bool tc_detect_resolve(const tc_run *r, const tc_mark *m, const tc_start **st, const cv_tc_format **f, int *pair)
{
    switch (m->kind) {
    case MK_START: {
        const tc_start *own = tc_own_start(r->fmt, m);
        if (own) {
            *st = own;
            *f = r->fmt;
            return true;
        }
        return r->o.detect && (r->n_calls == 0 || r->detected == m->fmt);
    }
    case MK_ROPEN:
    case MK_RCLOSE: {
        int p = tc_own_pair(r->fmt, m, m->kind == MK_RCLOSE);
        if (p >= 0) {
            *pair = p;
            *f = r->fmt;
            return true;
        }
        /* another row's reasoning opens the reply, or it is a word in prose
         * (which would turn the rest of the reply into reasoning) */
        return m->kind == MK_ROPEN && r->o.detect && r->n_calls == 0 && !r->any_text && !r->started[K_REASONING];
    }
    case MK_DROP:
        /* a leaked special token of any known row is never text; a drop
         * that reads like a tag (</s>) only for its own row */
        *f = r->fmt;
        return own_drop(r->fmt, m) || (r->o.detect && strpbrk(m->s, "|[") != NULL);
    }
    return true;
}

/* ---- weak evidence: the captured calls against their tools ---- */

typedef struct fit_walk {
    const tc_run *r;
    cv_buf name, args;
    bool ok;
} fit_walk;

static void fit_event(void *ud, const cv_chat_event *ev)
{
    fit_walk *w = ud;
    if (ev->type == CV_CHAT_TOOL_BEGIN) {
        cv_buf_reset(&w->name);
        cv_buf_reset(&w->args);
        cv_buf_append(&w->name, ev->name.ptr, ev->name.len);
    } else if (ev->type == CV_CHAT_TOOL_ARGS) {
        cv_buf_append(&w->args, ev->text.ptr, ev->text.len);
    } else if (ev->type == CV_CHAT_TOOL_END && w->ok && w->r->o.tools) {
        size_t off;
        const json_t *tool = tc_resolve(w->r, w->name.data ? w->name.data : "", w->name.len, &off);
        w->ok = tool && tc_args_fit(tool, w->args.data ? w->args.data : "{}", w->args.len);
    }
}

bool tc_detect_fits(const tc_run *r)
{
    if (r->sec.py && !r->spec_at_start)
        return false;
    fit_walk w = { .r = r, .ok = true };
    tc_cap_each(r, fit_event, &w);
    cv_buf_free(&w.name);
    cv_buf_free(&w.args);
    return w.ok;
}
