/* tc_gpt_oss_harmony.c — OpenAI gpt-oss "Harmony" output: a series of
 * messages, each a header and a body,
 *   <|start|>assistant<|channel|>analysis<|message|>thinking...<|end|>
 *   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>
 *   <|start|>assistant<|channel|>final<|message|>answer<|return|>
 * The template's generation prompt ends with "<|start|>assistant", so the
 * first header may begin mid-way (" to=functions.x<|channel|>..." or
 * "<|channel|>..."). Channel analysis is reasoning; final and commentary are
 * content; a recipient "functions.NAME" makes the body a call's JSON
 * arguments. Other recipients are gpt-oss built-in tools (browser, python,
 * container) that a client never declares: their messages are dropped unless
 * the request declares that exact name. A message from a tool ("functions.x
 * to=assistant") is shown as content. Text between messages is content,
 * except a lone channel word left over from a broken header.
 *
 * With special tokens stripped by a detokenizer the same output reads
 * "analysis...assistantfinal..."; that text form is recognised when the
 * reply starts with a channel word. This format reads the whole stream
 * itself (cv_tc_format.stream). With output detection its content (the
 * final and commentary channels, text between messages) is also searched
 * for the bare shapes of every row, a call the model wrote as JSON there
 * (bare, listed or fenced) recovered as in any other row's content: its
 * scans meet them as marks of kind MK_START, which tc_stream_shape takes. */
#include "chat/toolcall/tc_int.h"

enum { H_INIT, H_TEXT, H_HEADER, H_BODY, H_ARGS, H_AFTER, X_BODY };
enum { BK_CONTENT, BK_REASON, BK_DROP };
enum { T_START, T_CHANNEL, T_MESSAGE, T_END, T_CALL, T_RETURN, T_CONSTRAIN };

static const char *const toks[] = { "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>",
                                    "<|constrain|>" };
static const char *const words[] = { "analysis", "commentary", "final" };
static const char *const xmarks[] = { "assistantanalysis", "assistantcommentary", "assistantfinal" };

/* The tokens in content, the text form's seams in reasoning. */
static void marks(const cv_tc_format *f, tc_markset *content, tc_markset *reasoning)
{
    for (int i = 0; i < (int)CV_ARRAY_LEN(toks); i++)
        tc_markset_add(content, toks[i], MK_DROP, i, NULL, f);
    for (int i = 0; i < (int)CV_ARRAY_LEN(xmarks); i++)
        tc_markset_add(reasoning, xmarks[i], MK_DROP, i, NULL, f);
}

/* The kind of a body's text (BK_*; text between messages is content). */
static int text_kind(const tc_run *r, int bk)
{
    return bk == BK_REASON && !r->o.reasoning_inline ? K_REASONING : K_CONTENT;
}

/* A bare shape's mark met in text of body kind bk: in content, its section
 * (tc_stream_shape), which gives the stream back to the step that met it;
 * elsewhere, or where it does not apply, its first byte is the body's
 * text. */
static int shape(tc_run *r, const tc_mark *m, int bk)
{
    if (bk == BK_CONTENT && tc_stream_shape(r, m))
        return TC_OK;
    if (bk != BK_DROP)
        tc_text(r, text_kind(r, bk), tc_p(r), 1);
    tc_eat(r, 1);
    return TC_OK;
}

/* ---- headers ---- */

/* The word at p (up to whitespace or "<|"). */
static cv_str word_at(const char *p, const char *end)
{
    const char *q = p;
    while (q < end && *q != ' ' && *q != '\n' && *q != '\t' && !(q + 1 < end && q[0] == '<' && q[1] == '|'))
        q++;
    return (cv_str){ p, (size_t)(q - p) };
}

static const char *find(const char *p, const char *end, const char *lit)
{
    size_t m = strlen(lit);
    for (; p + m <= end; p++)
        if (!memcmp(p, lit, m))
            return p;
    return NULL;
}

/* The header is complete (its <|message|> consumed): decide the body. */
static void header_done(tc_run *r)
{
    const char *h = r->os_hdr.data ? r->os_hdr.data : "", *end = h + r->os_hdr.len;
    cv_str role = { NULL, 0 }, recipient = { NULL, 0 }, channel = { NULL, 0 };
    if (r->os_flag) { /* the header began at <|start|>: a role comes first */
        const char *p = h;
        while (p < end && *p == ' ')
            p++;
        role = word_at(p, end);
    }
    for (const char *p = h; (p = find(p, end, "to=")); p += 3)
        if (p == h || p[-1] == ' ' || p[-1] == '>') {
            recipient = word_at(p + 3, end);
            break;
        }
    for (const char *p = h; (p = find(p, end, "<|channel|>")); p += 11)
        channel = word_at(p + 11, end);
    r->os_kind = BK_CONTENT;
    if (role.len && !cv_str_eqz(role, "assistant")) {
        r->os_kind = BK_CONTENT; /* a tool's reply echoed back: show it */
    } else if (recipient.len && !cv_str_eqz(recipient, "assistant")) {
        bool fn = recipient.len > 10 && !memcmp(recipient.ptr, "functions.", 10);
        bool declared = r->o.tools && tc_tool_find(r->o.tools, recipient.ptr, recipient.len);
        if (fn || declared) {
            tc_call_begin(r, recipient.ptr, recipient.len, NULL, 0);
            cv_buf_reset(&r->scratch);
            tc_json_init(&r->sec.j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
            r->sec.j_live = true;
            r->os_st = H_ARGS;
            return;
        }
        cv_debug("harmony message to built-in tool '%.*s' dropped", (int)recipient.len, recipient.ptr);
        r->os_kind = BK_DROP;
    } else if (cv_str_eqz(channel, "analysis")) {
        r->os_kind = BK_REASON;
        if (r->o.reasoning_inline) {
            /* the block as generated, from its channel token */
            const char *c = find(h, end, "<|channel|>");
            if (c)
                tc_text(r, K_CONTENT, c, (size_t)(end - c));
            tc_text(r, K_CONTENT, "<|message|>", 11);
        }
    }
    r->os_st = H_BODY;
}

/* ---- the text strategy (special tokens stripped) ---- */

static int x_body(tc_run *r)
{
    size_t n = tc_n(r);
    if (!n)
        return TC_MORE;
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(r->rmarks, tc_p(r), n, r->eof, &at, &hit, &r->work);
    tc_text(r, text_kind(r, r->os_kind), tc_p(r), at);
    tc_eat(r, at);
    if (s != SCAN_HIT)
        return TC_MORE;
    if (hit->kind == MK_START)
        return shape(r, hit, r->os_kind);
    tc_eat(r, hit->len);
    r->os_kind = hit->arg == 0 ? BK_REASON : BK_CONTENT;
    return TC_OK;
}

/* At the start: which strategy, and where the first header begins. */
static int decide(tc_run *r)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r);
    if (!n)
        return TC_MORE;
    static const char *const heads[] = { " to=", "to=" };
    for (int i = 0; i < 2; i++) {
        size_t m = strlen(heads[i]), k = n < m ? n : m;
        if (!memcmp(p, heads[i], k)) {
            if (k < m)
                return r->eof ? (r->os_st = H_TEXT, TC_OK) : TC_MORE;
            cv_buf_reset(&r->os_hdr);
            r->os_flag = false;
            r->os_st = H_HEADER;
            return TC_OK;
        }
    }
    const char *all[6] = { words[0], words[1], words[2], xmarks[0], xmarks[1], xmarks[2] };
    for (int i = 0; i < 6; i++) {
        size_t m = strlen(all[i]), k = n < m ? n : m;
        if (memcmp(p, all[i], k))
            continue;
        if (k < m) {
            if (r->eof)
                break;
            return TC_MORE;
        }
        tc_eat(r, m);
        int w = i % 3;
        r->os_kind = w == 0 ? BK_REASON : BK_CONTENT;
        r->os_st = X_BODY;
        return TC_OK;
    }
    r->os_st = H_TEXT;
    return TC_OK;
}

/* ---- canonical: tokens ---- */

static bool channel_word_prefix(const char *p, size_t n, bool *whole)
{
    *whole = false;
    for (int i = 0; i < 3; i++) {
        size_t m = strlen(words[i]);
        if (n <= m && !memcmp(p, words[i], n)) {
            *whole = n == m;
            return true;
        }
    }
    return false;
}

static int text_step(tc_run *r)
{
    size_t n = tc_n(r);
    if (!n)
        return TC_MORE;
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(r->cmarks, tc_p(r), n, r->eof, &at, &hit, &r->work);
    /* a lone channel word right after a message (a broken header) is held
     * until we know whether a header token follows it */
    const char *p = tc_p(r);
    size_t emit_n = at;
    bool whole, token = s == SCAN_HIT && hit->kind == MK_DROP;
    if (!r->os_text && at > 0 && channel_word_prefix(p, at, &whole)) {
        if (token && whole && (hit->arg == T_CHANNEL || hit->arg == T_MESSAGE))
            emit_n = 0; /* dropped */
        else if (s != SCAN_HIT && !r->eof)
            return TC_MORE;
    }
    r->os_text = true;
    tc_text(r, K_CONTENT, p, emit_n);
    tc_eat(r, at);
    if (s != SCAN_HIT)
        return TC_MORE;
    if (!token)
        return shape(r, hit, BK_CONTENT);
    tc_eat(r, hit->len);
    r->os_text = false;
    switch (hit->arg) {
    case T_START:
    case T_CHANNEL:
    case T_CONSTRAIN:
        cv_buf_reset(&r->os_hdr);
        if (hit->arg != T_START)
            cv_buf_append(&r->os_hdr, hit->s, hit->len);
        r->os_flag = hit->arg == T_START;
        r->os_st = H_HEADER;
        break;
    case T_MESSAGE:
        r->os_kind = BK_CONTENT;
        r->os_st = H_BODY;
        break;
    default:
        break; /* a stray end token */
    }
    return TC_OK;
}

static int header_step(tc_run *r)
{
    size_t n = tc_n(r);
    if (!n) {
        if (r->eof)
            cv_buf_reset(&r->os_hdr); /* an unfinished header says nothing */
        return TC_MORE;
    }
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(r->cmarks, tc_p(r), n, r->eof, &at, &hit, &r->work);
    /* a bare shape's mark is no markup in a header: a byte of it */
    bool shape_byte = s == SCAN_HIT && hit->kind == MK_START;
    at += shape_byte;
    if (r->os_hdr.len + at > CV_TC_MAX_HEADER) {
        /* not a header after all: cut at the bound (the same byte in any
         * chunking) and let the rest be text */
        /* (markers are appended whole, so the header may already be past it) */
        size_t k = r->os_hdr.len < CV_TC_MAX_HEADER ? CV_TC_MAX_HEADER - r->os_hdr.len : 0;
        cv_buf_append(&r->os_hdr, tc_p(r), k);
        tc_eat(r, k);
        tc_text(r, K_CONTENT, r->os_hdr.data, r->os_hdr.len);
        cv_buf_reset(&r->os_hdr);
        r->os_st = H_TEXT;
        return TC_OK;
    }
    cv_buf_append(&r->os_hdr, tc_p(r), at);
    tc_eat(r, at);
    if (shape_byte)
        return TC_OK;
    if (s != SCAN_HIT)
        return TC_MORE;
    switch (hit->arg) {
    case T_MESSAGE:
        tc_eat(r, hit->len);
        header_done(r);
        break;
    case T_CHANNEL:
    case T_CONSTRAIN:
        tc_eat(r, hit->len);
        cv_buf_append(&r->os_hdr, hit->s, hit->len);
        break;
    case T_START:
        tc_eat(r, hit->len);
        cv_buf_reset(&r->os_hdr);
        r->os_flag = true;
        break;
    default:
        tc_eat(r, hit->len); /* an end token inside a header: drop the header */
        cv_buf_reset(&r->os_hdr);
        r->os_st = H_TEXT;
    }
    return TC_OK;
}

static int body_step(tc_run *r)
{
    size_t n = tc_n(r);
    if (!n)
        return TC_MORE;
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(r->cmarks, tc_p(r), n, r->eof, &at, &hit, &r->work);
    if (r->os_kind != BK_DROP)
        tc_text(r, text_kind(r, r->os_kind), tc_p(r), at);
    tc_eat(r, at);
    if (s != SCAN_HIT)
        return TC_MORE;
    if (hit->kind == MK_START)
        return shape(r, hit, r->os_kind);
    switch (hit->arg) {
    case T_END:
    case T_CALL:
    case T_RETURN:
        tc_eat(r, hit->len);
        if (r->os_kind == BK_REASON && r->o.reasoning_inline)
            tc_text(r, K_CONTENT, hit->s, hit->len);
        r->os_st = H_TEXT;
        break;
    case T_START:
    case T_CHANNEL:
        r->os_st = H_TEXT; /* a new message without an end token */
        break;
    default:
        if (r->os_kind != BK_DROP)
            tc_text(r, text_kind(r, r->os_kind), hit->s, hit->len);
        tc_eat(r, hit->len);
    }
    r->os_text = false;
    return TC_OK;
}

static int harmony(tc_run *r)
{
    int rc;
    switch (r->os_st) {
    case H_INIT: return decide(r);
    case H_TEXT: return text_step(r);
    case H_HEADER: return header_step(r);
    case H_BODY: return body_step(r);
    case X_BODY: return x_body(r);
    case H_ARGS:
        rc = tc_stream_args(r, &r->sec.j, &r->scratch);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc == TC_FAIL && !tc_json_started(&r->sec.j))
            tc_call_args(r, "{}", 2); /* no JSON body */
        tc_json_fini(&r->sec.j);
        r->sec.j_live = false;
        tc_call_end(r);
        r->os_kind = BK_DROP;
        r->os_st = H_BODY; /* whatever follows the JSON up to the end token */
        return TC_OK;
    }
    return TC_MORE;
}

/* ---- output detection ---- */

/* In another format's output, Harmony's tokens hand the stream to this
 * reader at once. Its text form is only recognisable from the start: a
 * reply that starts with a channel word is held until an
 * "assistant<channel>" seam (or a token) shows it is Harmony; one that
 * never does is released as text (held text is bounded as for any section).
 * "final" alone does not start the hold: too many replies begin with it. */
static const char *const seams[] = { "assistantanalysis", "assistantcommentary", "assistantfinal", "<|channel|>",
                                     "<|message|>", "<|start|>" };

static int read_text_form(tc_run *r, tc_sec *s)
{
    (void)s;
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    for (; i < n; i++) {
        if (p[i] != 'a' && p[i] != '<')
            continue;
        bool partial = false;
        for (size_t k = 0; k < CV_ARRAY_LEN(seams); k++) {
            size_t m = strlen(seams[k]), a = n - i < m ? n - i : m;
            r->work += 1;
            if (memcmp(p + i, seams[k], a))
                continue;
            if (a == m)
                return TC_SWITCH;
            partial = true;
        }
        if (partial && !r->eof)
            break;
    }
    r->work += i + 1;
    tc_eat(r, i);
    return r->eof ? TC_FAIL : TC_MORE;
}

static const tc_start detect[] = {
    { .marker = "<|channel|>", .read = tc_read_switch, .keep = true },
    { .marker = "<|start|>", .read = tc_read_switch, .keep = true },
    { .marker = "<|message|>", .read = tc_read_switch, .keep = true },
    { .marker = "analysis", .read = read_text_form, .at_start = true, .keep = true },
    { .marker = "commentary", .read = read_text_form, .at_start = true, .keep = true },
    { .marker = "assistantfinal", .read = tc_read_switch, .at_start = true, .keep = true },
    { .marker = "assistantanalysis", .read = tc_read_switch, .at_start = true, .keep = true },
    { .marker = "assistantcommentary", .read = tc_read_switch, .at_start = true, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "gpt_oss_harmony",
    .trigger = "<|channel|>",
    .single = true,
    .specials = (const char *const[]){ "<|channel|>", "<|constrain|>", "<|message|>", "<|call|>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<|channel|>commentary to=functions.",
    .name_post = " <|constrain|>json<|message|>",
    .call_close = "<|call|>",
};

const cv_tc_format tc_fmt_gpt_oss_harmony = {
    .name = "gpt_oss_harmony",
    .syntax = &syntax,
    .summary = "<|channel|>analysis|commentary|final [to=functions.NAME] <|message|>..<|end|>|<|call|>|<|return|>",
    .aliases = (const char *const[]){ "harmony", "gpt_oss", "gpt-oss", NULL },
    .tmpl = { (const char *const[]){ "<|channel|>", NULL } },
    .tmpl_rank = 95,
    .names = (const char *const[]){ "gpt-oss", "gpt_oss", "gptoss", NULL },
    .stream = harmony,
    .stream_marks = marks,
    .detect = detect,
    .flags = TC_F_NO_FALLBACK,
    /* the template's "Reasoning: " line (openai-gpt-oss-120b.jinja, default
     * medium); gpt-oss always reasons, at least at low */
    .efforts = (const char *const[]){ "low", "medium", "high", NULL },
};
