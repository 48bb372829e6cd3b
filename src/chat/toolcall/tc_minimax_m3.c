/* tc_minimax_m3.c — MiniMax-M3 tool calls, where every tag is preceded by the
 * sentinel ]<]minimax[>[ :
 *   S<tool_call>\nS<invoke name="NAME">S<city>Tokyo S</city>S</invoke>\nS</tool_call>
 * Parameters are elements named after the parameter. A value is text, or
 * nested elements: children all named <item> make an array, other children
 * an object, and leaves are JSON scalars when they parse as one, else text.
 * When the schema allows a string, the value is the raw text (nested markup
 * included), which is what MiniMax's own template renders for strings.
 * Reasoning is <mm:think>...</mm:think>, opened by the template. */
#include "chat/toolcall/tc_int.h"

#define S "]<]minimax[>["
static const char SENT[] = S;
enum { M_LOOP, M_NAME, M_ATTRS, M_BODY, M_KEY, M_VALUE };

/* Finds "S</tag>" in p[0..n) for the element opened as "S<tag>", skipping
 * nested elements of the same tag; returns its offset or -1. */
static long find_close_from(const char *p, size_t n, const char *tag, size_t tlen, size_t *from, int *pdepth)
{
    int depth = *pdepth;
    size_t sl = sizeof SENT - 1;
    size_t i = *from;
    for (; i + sl + 3 + tlen <= n; i++) {
        if (memcmp(p + i, SENT, sl))
            continue;
        const char *q = p + i + sl;
        size_t m = n - i - sl;
        if (m >= tlen + 3 && q[0] == '<' && q[1] == '/' && !memcmp(q + 2, tag, tlen) && q[2 + tlen] == '>') {
            if (depth == 0) {
                *from = i;
                *pdepth = depth;
                return (long)i;
            }
            depth--;
        } else if (m >= tlen + 2 && q[0] == '<' && !memcmp(q + 1, tag, tlen) && q[1 + tlen] == '>') {
            depth++;
        }
    }
    *from = i; /* resume here: nothing before can start the close tag */
    *pdepth = depth;
    return -1;
}

static long find_close(const char *p, size_t n, const char *tag, size_t tlen)
{
    size_t from = 0;
    int depth = 0;
    return find_close_from(p, n, tag, tlen, &from, &depth);
}

static void trim(const char **p, size_t *n)
{
    while (*n && (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r')) {
        (*p)++;
        (*n)--;
    }
    while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\n' || (*p)[*n - 1] == '\t' || (*p)[*n - 1] == '\r'))
        (*n)--;
}

static bool nested(const char *p, size_t n)
{
    trim(&p, &n);
    return n > sizeof SENT && !memcmp(p, SENT, sizeof SENT - 1) && p[sizeof SENT - 1] == '<' &&
           p[sizeof SENT] != '/';
}

static int value_json(const char *p, size_t n, cv_buf *out, int depth);

/* children of an element's content: <item>s make an array, else an object */
static int children_json(const char *p, size_t n, cv_buf *out, int depth)
{
    if (depth > CV_MAX_JSON_DEPTH)
        return -1;
    size_t sl = sizeof SENT - 1;
    bool first = true, array = false;
    size_t i = 0;
    for (;;) {
        const char *q = p + i;
        size_t m = n - i;
        trim(&q, &m);
        if (!m)
            break;
        if (m <= sl + 2 || memcmp(q, SENT, sl) || q[sl] != '<')
            return -1;
        const char *tag = q + sl + 1;
        const char *gt = memchr(tag, '>', m - sl - 1);
        if (!gt)
            return -1;
        size_t tlen = (size_t)(gt - tag);
        const char *body = gt + 1;
        size_t blen = m - (size_t)(body - q);
        long close = find_close(body, blen, tag, tlen);
        if (close < 0)
            return -1;
        bool is_item = tlen == 4 && !memcmp(tag, "item", 4);
        if (first) {
            array = is_item;
            cv_buf_putc(out, array ? '[' : '{');
        } else {
            cv_buf_puts(out, ", ");
        }
        if (!array) {
            cv_buf_put_json_str(out, tag, tlen);
            cv_buf_puts(out, ": ");
        }
        if (value_json(body, (size_t)close, out, depth + 1) < 0)
            return -1;
        first = false;
        i = (size_t)(body - p) + (size_t)close + sl + 3 + tlen;
    }
    if (first)
        cv_buf_puts(out, "{}");
    else
        cv_buf_putc(out, array ? ']' : '}');
    return 0;
}

static int value_json(const char *p, size_t n, cv_buf *out, int depth)
{
    if (nested(p, n))
        return children_json(p, n, out, depth);
    trim(&p, &n);
    size_t mark = out->len;
    if (n && tc_json_canon(p, n, TJ_NO_BARE, (tc_type){ 0 }, NULL, out) == 0 && out->data[mark] != '{' &&
        out->data[mark] != '[')
        return 0;
    out->len = mark;
    if (out->data)
        out->data[mark] = 0;
    cv_buf_put_json_str(out, p, n);
    return 0;
}

static void out(tc_run *r, const char *s, size_t n) { tc_call_args(r, s, n); }

static int read_m3(tc_run *r, tc_sec *s)
{
    int rc;
    for (;;) {
        switch (s->st) {
        case M_LOOP:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if (!tc_n(r))
                return TC_DONE;
            if ((rc = tc_lit(r, S "<invoke name=\"", true)) == TC_DONE) {
                cv_buf_reset(&s->tmp);
                s->st = M_NAME;
                continue;
            }
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, S "</tool_call>", true)) == TC_DONE)
                return TC_DONE;
            if (rc == TC_MORE)
                return TC_MORE;
            return s->n_items ? TC_DONE : TC_FAIL;
        case M_NAME:
        case M_ATTRS: {
            const char *p = tc_p(r);
            size_t n = tc_n(r), i = 0;
            char stop = s->st == M_NAME ? '"' : '>';
            /* the name and the attributes after it share one bound, counted
             * over every chunk (s->scan: the attribute bytes read so far) */
            size_t seen = s->tmp.len + (s->st == M_ATTRS ? s->scan : 0);
            while (i < n && p[i] != stop && p[i] != '\n' && p[i] != '<' && seen + i < CV_TC_MAX_NAME)
                i++;
            r->work += i + 1;
            if (s->st == M_NAME)
                cv_buf_append(&s->tmp, p, i);
            else
                s->scan += i;
            tc_eat(r, i);
            if (seen + i >= CV_TC_MAX_NAME)
                return TC_FAIL;
            if (i == n)
                return r->eof ? TC_FAIL : TC_MORE;
            if (p[i] != stop)
                return TC_FAIL;
            tc_eat(r, 1);
            if (s->st == M_NAME) {
                s->st = M_ATTRS;
                s->scan = 0;
                continue;
            }
            s->aux = tc_call_begin(r, s->tmp.data, s->tmp.len, NULL, 0);
            tc_commit(r);
            out(r, "{", 1);
            s->n_calls = 0;
            s->st = M_BODY;
            continue;
        }
        case M_BODY:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if (!tc_n(r)) {
                out(r, "}", 1);
                tc_call_end(r);
                return TC_DONE;
            }
            if ((rc = tc_lit(r, S "</invoke>", true)) == TC_DONE) {
                out(r, "}", 1);
                tc_call_end(r);
                s->n_items++;
                s->st = M_LOOP;
                continue;
            }
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, S "<", true)) == TC_DONE) {
                cv_buf_reset(&s->tmp2);
                s->st = M_KEY;
                continue;
            }
            if (rc == TC_MORE)
                return TC_MORE;
            tc_eat(r, 1); /* stray text between parameters */
            continue;
        case M_KEY: {
            const char *p = tc_p(r);
            size_t n = tc_n(r), i = 0;
            while (i < n && p[i] != '>' && p[i] != '\n' && p[i] != '<' && i <= CV_TC_MAX_NAME)
                i++;
            r->work += i + 1;
            if (i > CV_TC_MAX_NAME)
                return TC_FAIL;
            if (i == n)
                return r->eof ? TC_FAIL : TC_MORE;
            if (p[i] != '>' || !i || p[0] == '/')
                return TC_FAIL;
            cv_buf_append(&s->tmp2, p, i);
            tc_eat(r, i + 1);
            s->scan = 0;
            s->depth = 0;
            s->st = M_VALUE;
            continue;
        }
        case M_VALUE: {
            /* collect to the close tag (values are held: nested markup is
             * only understood whole) */
            const char *p = tc_p(r);
            size_t n = tc_n(r), from = s->scan;
            long close = find_close_from(p, n, s->tmp2.data, s->tmp2.len, &s->scan, &s->depth);
            r->work += s->scan - from + 1;
            if (close < 0 && !r->eof) {
                if (n > CV_TC_MAX_VALUE)
                    return TC_FAIL;
                return TC_MORE;
            }
            size_t vlen = close < 0 ? n : (size_t)close;
            tc_type t = tc_prop_type(r->call_props, s->tmp2.data, s->tmp2.len);
            cv_buf_reset(&r->scratch);
            if (s->n_calls++)
                cv_buf_puts(&r->scratch, ", ");
            cv_buf_put_json_str(&r->scratch, s->tmp2.data, s->tmp2.len);
            cv_buf_puts(&r->scratch, ": ");
            if ((t.mask & TT_STRING) || (!t.mask && !nested(p, vlen)))
                tc_coerce_text(p, vlen, t.mask ? (tc_type){ TT_STRING } : t, !t.mask, &r->scratch);
            else if (nested(p, vlen)) {
                size_t mark = r->scratch.len;
                if (children_json(p, vlen, &r->scratch, 0) < 0) {
                    r->scratch.len = mark;
                    cv_buf_put_json_str(&r->scratch, p, vlen);
                }
            } else
                tc_coerce_text(p, vlen, t, false, &r->scratch);
            out(r, r->scratch.data, r->scratch.len);
            tc_eat(r, close < 0 ? n : vlen + sizeof SENT - 1 + 3 + s->tmp2.len);
            s->st = M_BODY;
            continue;
        }
        }
        return TC_FAIL;
    }
}

static const tc_start starts[] = {
    { .marker = S "<tool_call>", .read = read_m3 },
    { 0 },
};

static const tc_reason reason[] = { { .open = "<mm:think>", .close = "</mm:think>" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "minimax_m3",
    .trigger = S "<tool_call>",
    .open = S "<tool_call>\n",
    .close = S "</tool_call>",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = S "<invoke name=\"",
    .name_post = "\">",
    .args_as = CV_TS_ARGS_XML,
    .param_open = S "<",
    .param_mid = ">",
    .param_close = S "</",
    .param_tail = ">",
    .args_post = S "</invoke>\n",
};

const cv_tc_format tc_fmt_minimax_m3 = {
    .name = "minimax_m3",
    .syntax = &syntax,
    .summary = "]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"..\">]<]minimax[>[<K>V]<]minimax[>[</K>...",
    .tmpl = { (const char *const[]){ S, NULL } },
    .tmpl_rank = 95,
    .names = (const char *const[]){ "minimax-m3", "minimax_m3", NULL },
    .reason = reason,
    .starts = starts,
};
