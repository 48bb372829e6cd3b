/* tc_functionary_v3_2.c — MeetKai Functionary v3.2: the reply is a series of
 * messages, each "RECIPIENT\n" then its body, separated by ">>>". The
 * template's generation prompt ends with ">>>", so the output starts with a
 * recipient: "all" means text for the user, anything else is a tool name
 * followed by its JSON arguments. This format reads the whole stream itself
 * (cv_tc_format.stream). With output detection an "all" message's text is
 * also searched for the bare shapes of every row (tc_detect_shapes): a call
 * the model wrote there as JSON, bare, listed or fenced, is recovered as in
 * any other row's content. */
#include "chat/toolcall/tc_int.h"

enum { F_RECIP, F_TEXT, F_ARGS_WS, F_ARGS, F_SEP };

/* What an "all" message's text is scanned for: the separator (and, with
 * detection, the bare shapes build_marks adds). */
static void marks(const cv_tc_format *f, tc_markset *content, tc_markset *reasoning)
{
    (void)reasoning;
    tc_markset_add(content, ">>>", MK_DROP, 0, NULL, f);
}

static int recipient(tc_run *r)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    while (i < n && p[i] != '\n' && i <= CV_TC_MAX_NAME)
        i++;
    r->work += i + 1;
    if (i == n && !r->eof && i <= CV_TC_MAX_NAME)
        return TC_MORE;
    cv_buf_reset(&r->os_hdr);
    cv_buf_append(&r->os_hdr, p, i);
    /* a line too long for a name stops short of its end: the rest, its
     * newline too, is text read on (whole or in pieces alike) */
    tc_eat(r, i <= CV_TC_MAX_NAME && i < n && p[i] == '\n' ? i + 1 : i);
    const char *name = r->os_hdr.data;
    size_t len = r->os_hdr.len;
    while (len && (name[len - 1] == ' ' || name[len - 1] == '\r'))
        len--;
    if (i > CV_TC_MAX_NAME || (len == 3 && !memcmp(name, "all", 3)) || !len) {
        if (i > CV_TC_MAX_NAME || !len) /* not a recipient line: it is text */
            tc_text(r, K_CONTENT, r->os_hdr.data, r->os_hdr.len);
        r->os_st = F_TEXT;
        return TC_OK;
    }
    tc_call_begin(r, name, len, NULL, 0);
    r->os_st = F_ARGS_WS;
    return TC_OK;
}

static int stream_fn(tc_run *r)
{
    tc_sec *s = &r->sec;
    int rc;
    switch (r->os_st) {
    case F_RECIP:
        if (!tc_n(r))
            return TC_MORE;
        return recipient(r);
    case F_TEXT: {
        /* text up to the next >>> or bare shape */
        if (!tc_n(r))
            return TC_MORE;
        size_t at;
        const tc_mark *hit;
        int st = tc_scan(r->cmarks, tc_p(r), tc_n(r), r->eof, &at, &hit, &r->work);
        tc_text(r, K_CONTENT, tc_p(r), at);
        tc_eat(r, at);
        if (st != SCAN_HIT)
            return TC_MORE;
        if (hit->kind == MK_START) {
            if (!tc_stream_shape(r, hit)) { /* it does not apply here: a byte of text */
                tc_text(r, K_CONTENT, tc_p(r), 1);
                tc_eat(r, 1);
            }
            return TC_OK;
        }
        tc_eat(r, hit->len);
        r->os_st = F_RECIP;
        return TC_OK;
    }
    case F_ARGS_WS:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r) || *tc_p(r) != '{') {
            tc_call_args(r, "{}", 2);
            tc_call_end(r);
            r->os_st = F_SEP;
            return TC_OK;
        }
        cv_buf_reset(&r->scratch);
        tc_json_init(&s->j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
        s->j_live = true;
        r->os_st = F_ARGS;
        return TC_OK;
    case F_ARGS:
        rc = tc_stream_args(r, &s->j, &r->scratch);
        if (rc == TC_MORE)
            return TC_MORE;
        tc_json_fini(&s->j);
        s->j_live = false;
        tc_call_end(r);
        r->os_st = F_SEP;
        return TC_OK;
    case F_SEP:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return TC_MORE;
        rc = tc_lit(r, ">>>", true);
        if (rc == TC_MORE)
            return TC_MORE;
        r->os_st = rc == TC_DONE ? F_RECIP : F_TEXT;
        return TC_OK;
    }
    return TC_MORE;
}

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "functionary_v3_2",
    .sep = ">>>",
    .name_as = CV_TS_NAME_BARE,
    .name_post = "\n",
};

const cv_tc_format tc_fmt_functionary_v3_2 = {
    .name = "functionary_v3_2",
    .syntax = &syntax,
    .summary = ">>>RECIPIENT\\nbody: \"all\" for text, else NAME and JSON arguments",
    .aliases = (const char *const[]){ "functionary", "functionary32", "functionary-v3.2", NULL },
    .tmpl = { (const char *const[]){ ">>>", "<|start_header_id|>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "functionary-medium-v3.2", "functionary-small-v3.2", "functionary-v3.2", NULL },
    .stream = stream_fn,
    .stream_marks = marks,
    .flags = TC_F_NO_FALLBACK,
};
