/* tc_call_xml.c — reads one tool call written as XML-ish tags with raw
 * parameter values, the family of Qwen3-Coder
 *   <function=NAME><parameter=K>V</parameter></function>
 * and its dialects (tc_xml): Seed-OSS, MiniMax-M2 <invoke name="..">,
 * DeepSeek DSML <｜DSML｜parameter name=".." string="true">, Step-3
 * <steptml:parameter>, MiniCPM <param name=".."> with CDATA, and GLM's
 * NAME<arg_key>K</arg_key><arg_value>V</arg_value>.
 *
 * Values are raw text, so their JSON type comes from the tool's schema (or
 * DSML's string= attribute): a string value streams into the arguments as it
 * is generated (a file's content is never buffered); any other value is
 * collected to its closing tag and converted (tc_coerce_text). Qwen3-Coder's
 * template puts the value on its own lines, so one leading and one trailing
 * newline are layout, not value (strip_nl); other dialects keep every byte.
 * A value whose closing tag is missing ends at the next tag of the call. */
#include "chat/toolcall/tc_int.h"

enum { XC_OPEN, XC_NAME, XC_ATTRS, XC_BODY, XC_PNAME, XC_PATTRS, XC_VOPEN, XC_VSTART, XC_VALUE, XC_CDATA };

void tc_xcall_init(tc_xcall *c, const tc_xml *x)
{
    memset(c, 0, sizeof *c);
    c->x = x;
}

void tc_xcall_fini(tc_xcall *c)
{
    cv_buf_free(&c->name);
    cv_buf_free(&c->key);
    cv_buf_free(&c->val);
    cv_buf_free(&c->attrs);
    memset(c, 0, sizeof *c);
}

static void out(tc_run *r, tc_xcall *c, const char *s, size_t n)
{
    if (c->live)
        tc_call_args(r, s, n);
}

static bool in_set(const char *set, char c) { return set && c && strchr(set, c); }

/* Reads bytes up to (not including) the first byte in stop, or to lit when
 * lit is set, appending to b. Returns TC_DONE with the terminator unconsumed,
 * TC_MORE, or TC_FAIL when it grows past max or meets a byte of bad. A
 * failure is always at the same byte however the input was split: bytes
 * before it may have been consumed from earlier pieces, so they are here too. */
static int read_until(tc_run *r, cv_buf *b, const char *stop, const char *lit, const char *bad, size_t max)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    int rc = TC_MORE;
    while (i < n) {
        if (lit) {
            if (p[i] == lit[0]) {
                size_t m = strlen(lit), k = n - i < m ? n - i : m;
                if (!memcmp(p + i, lit, k) && (k == m || !r->eof)) {
                    rc = k == m ? TC_DONE : TC_MORE;
                    break;
                }
            }
        } else if (in_set(stop, p[i])) {
            rc = TC_DONE;
            break;
        }
        if (in_set(bad, p[i]) || b->len + i >= max) {
            rc = TC_FAIL;
            break;
        }
        i++;
    }
    r->work += i + 1;
    if (rc != TC_FAIL)
        cv_buf_append(b, p, i);
    tc_eat(r, i);
    if (rc == TC_MORE && r->eof)
        rc = TC_FAIL; /* the input ended before the terminator */
    return rc;
}

static void start_call(tc_run *r, tc_xcall *c)
{
    c->live = tc_call_begin(r, c->name.data ? c->name.data : "", c->name.len, NULL, 0);
    out(r, c, "{", 1);
    c->st = XC_BODY;
}

static void close_call(tc_run *r, tc_xcall *c)
{
    out(r, c, "}", 1);
    tc_call_end(r);
}

static void emit_key(tc_run *r, tc_xcall *c)
{
    cv_buf_reset(&r->scratch);
    if (c->n_params)
        cv_buf_puts(&r->scratch, ", ");
    cv_buf_put_json_str(&r->scratch, c->key.data ? c->key.data : "", c->key.len);
    cv_buf_puts(&r->scratch, ": ");
    out(r, c, r->scratch.data, r->scratch.len);
}

/* A first parameter named like a wrapper of all arguments ("arguments",
 * "input", ...) that the tool does not declare: models (DeepSeek DSML) put
 * the whole JSON object there. */
static bool is_wrapper(tc_run *r, const tc_xcall *c)
{
    static const char *const names[] = { "arguments", "input", "parameters", "args", NULL };
    for (int i = 0; names[i]; i++)
        if (c->key.len == strlen(names[i]) && !memcmp(c->key.data, names[i], c->key.len))
            return !tc_prop_schema(r->call_props, c->key.data, c->key.len);
    return false;
}

/* The type of the value of c->key. */
static void value_type(tc_run *r, tc_xcall *c)
{
    c->as_json = false;
    tc_type t = tc_prop_type(r->call_props, c->key.data ? c->key.data : "", c->key.len);
    if (c->x->string_attr && c->attrs.len) {
        const char *a = c->attrs.data;
        if (strstr(a, "string=\"true\""))
            t.mask = TT_STRING;
        else if (strstr(a, "string=\"false\""))
            c->as_json = !t.mask;
    }
    if (!t.mask && !c->as_json)
        t.mask = TT_STRING; /* undeclared parameter: the text as written */
    c->t = t;
}

/* A value's terminators: its close tag, then tags that end it when the close
 * is missing. Returns the length of the terminator at p (0: none), or -1 if
 * p may be a prefix of one. is_close tells whether it is the close tag. */
static long terminator(tc_run *r, tc_xcall *c, const char *p, size_t n, bool *is_close)
{
    const tc_xml *x = c->x;
    const char *t[12];
    int k = 0;
    t[k++] = x->param_end;
    if (x->param)
        t[k++] = x->param;
    if (x->invoke_end)
        t[k++] = x->invoke_end;
    for (const char *const *s = x->stops; s && *s && k < 12; s++)
        t[k++] = *s;
    bool partial = false;
    for (int i = 0; i < k; i++) {
        size_t m = strlen(t[i]), a = n < m ? n : m;
        if (memcmp(p, t[i], a))
            continue;
        if (a == m) {
            *is_close = i == 0;
            return (long)m;
        }
        partial = true;
    }
    return partial && !r->eof ? -1 : 0;
}

/* Value text p[0..n): stream it or collect it. */
static void value_text(tc_run *r, tc_xcall *c, const char *p, size_t n)
{
    if (!n)
        return;
    if (!c->streaming) {
        if (c->val.len + n > CV_TC_MAX_VALUE) {
            /* too big to hold for typing: it goes out as the text it is */
            c->streaming = true;
            out(r, c, "\"", 1);
            cv_buf_reset(&r->scratch);
            tc_esc(&r->scratch, c->val.data, c->val.len);
            out(r, c, r->scratch.data, r->scratch.len);
            cv_buf_reset(&c->val);
        } else {
            cv_buf_append(&c->val, p, n);
            return;
        }
    }
    cv_buf_reset(&r->scratch);
    if (c->saw_nl) {
        cv_buf_puts(&r->scratch, "\\n");
        c->saw_nl = false;
    }
    if (c->x->strip_nl && p[n - 1] == '\n') {
        /* maybe the layout newline before the close tag: hold it */
        c->saw_nl = true;
        n--;
    }
    tc_esc(&r->scratch, p, n);
    out(r, c, r->scratch.data, r->scratch.len);
}

static void value_end(tc_run *r, tc_xcall *c)
{
    if (c->streaming) {
        c->saw_nl = false; /* the layout newline */
        out(r, c, "\"", 1);
    } else {
        const char *v = c->val.data ? c->val.data : "";
        size_t n = c->val.len;
        if (c->x->strip_nl && n && v[n - 1] == '\n')
            n--;
        cv_buf val = { 0 };
        tc_coerce_text(v, n, c->t, c->as_json, &val);
        if (c->wrap && val.len >= 2 && val.data[0] == '{') {
            /* unwrap: its members are the arguments */
            if (val.len > 2)
                out(r, c, val.data + 1, val.len - 2);
            cv_buf_free(&val);
            c->wrap = false;
            c->n_params += 1;
            c->st = XC_BODY;
            return;
        }
        if (c->wrap)
            emit_key(r, c);
        c->wrap = false;
        out(r, c, val.data, val.len);
        cv_buf_free(&val);
    }
    c->n_params++;
    c->st = XC_BODY;
}

/* The value scanner: emits text up to a terminator. */
static int value_step(tc_run *r, tc_xcall *c)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    while (i < n) {
        const char *lt = memchr(p + i, '<', n - i);
        size_t stop = lt ? (size_t)(lt - p) : n;
        r->work += stop - i + 1;
        if (stop > i) {
            size_t len = stop - i;
            if (stop == n && !r->eof) {
                /* keep an incomplete UTF-8 sequence for the next piece */
                len = cv_utf8_complete_prefix(p + i, len);
                value_text(r, c, p + i, len);
                tc_eat(r, i + len);
                return TC_MORE;
            }
            value_text(r, c, p + i, len);
            i = stop;
        }
        if (i == n)
            break;
        bool is_close = false;
        long t = terminator(r, c, p + i, n - i, &is_close);
        if (t < 0) {
            tc_eat(r, i);
            return TC_MORE;
        }
        if (t > 0) {
            tc_eat(r, i + (is_close ? (size_t)t : 0));
            value_end(r, c);
            return TC_OK;
        }
        value_text(r, c, p + i, 1);
        i++;
    }
    tc_eat(r, i);
    if (r->eof) {
        value_end(r, c);
        return TC_OK;
    }
    return TC_MORE;
}

/* GLM writes "\n" as two characters after names in some outputs. */
static int skip_layout(tc_run *r, bool glm)
{
    for (;;) {
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!glm)
            return TC_DONE;
        int rc = tc_lit(r, "\\n", true);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc != TC_DONE)
            return TC_DONE;
    }
}

int tc_xcall_step(tc_run *r, tc_xcall *c)
{
    const tc_xml *x = c->x;
    bool glm = !x->invoke;
    int rc;
    switch (c->st) {
    case XC_OPEN:
        if (glm) {
            c->st = XC_NAME;
            return TC_OK;
        }
        rc = tc_lit(r, x->invoke, true);
        if (rc != TC_DONE)
            return rc;
        c->st = XC_NAME;
        return TC_OK;
    case XC_NAME:
        if (glm) {
            rc = read_until(r, &c->name, " \t\r\n<\\", NULL, NULL, CV_TC_MAX_NAME);
            if (rc == TC_FAIL && r->eof && c->name.len)
                rc = TC_DONE;
            if (rc != TC_DONE)
                return rc;
            start_call(r, c);
            return TC_OK;
        }
        rc = read_until(r, &c->name, x->name_quoted ? "\"" : ">", NULL, "\n<", CV_TC_MAX_NAME);
        if (rc != TC_DONE)
            return rc;
        tc_eat(r, 1);
        if (!c->name.len)
            return TC_FAIL;
        if (x->name_quoted) {
            cv_buf_reset(&c->attrs); /* here, not in XC_ATTRS: its bound spans chunks */
            c->st = XC_ATTRS;
            return TC_OK;
        }
        start_call(r, c);
        return TC_OK;
    case XC_ATTRS:
        rc = read_until(r, &c->attrs, ">", NULL, "\n<", 256);
        if (rc != TC_DONE)
            return rc;
        tc_eat(r, 1);
        start_call(r, c);
        return TC_OK;
    case XC_BODY:
        if (skip_layout(r, glm) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r)) {
            if (!r->eof)
                return TC_MORE;
            close_call(r, c);
            return TC_DONE;
        }
        rc = tc_lit(r, x->param, true);
        if (rc == TC_DONE) {
            tc_commit(r);
            cv_buf_reset(&c->key);
            cv_buf_reset(&c->attrs);
            c->st = XC_PNAME;
            return TC_OK;
        }
        if (rc == TC_MORE)
            return TC_MORE;
        if (x->invoke_end) {
            rc = tc_lit(r, x->invoke_end, true);
            if (rc == TC_DONE) {
                tc_commit(r);
                close_call(r, c);
                return TC_DONE;
            }
            if (rc == TC_MORE)
                return TC_MORE;
        }
        for (const char *const *s = x->stops; s && *s; s++) {
            rc = tc_lit(r, *s, false);
            if (rc == TC_MORE)
                return TC_MORE;
            if (rc == TC_DONE) {
                tc_commit(r);
                close_call(r, c); /* the call's own close tag is missing */
                return TC_DONE;
            }
        }
        if (glm) {
            close_call(r, c);
            return TC_DONE;
        }
        if (r->spec && !c->n_params)
            return TC_FAIL; /* text, not parameters: this was prose */
        /* stray text between parameters */
        tc_eat(r, 1);
        return TC_OK;
    case XC_PNAME: {
        const char *end = x->param_quoted ? "\"" : ">";
        if (!strcmp(x->param, "<arg_key>"))
            rc = read_until(r, &c->key, NULL, "</arg_key>", NULL, CV_TC_MAX_NAME);
        else
            rc = read_until(r, &c->key, end, NULL, "\n", CV_TC_MAX_NAME);
        if (rc != TC_DONE)
            return rc;
        if (!strcmp(x->param, "<arg_key>")) {
            tc_eat(r, strlen("</arg_key>"));
        } else {
            tc_eat(r, 1);
            if (x->param_quoted) {
                c->st = XC_PATTRS;
                return TC_OK;
            }
        }
        c->st = XC_VOPEN;
        return TC_OK;
    }
    case XC_PATTRS:
        rc = read_until(r, &c->attrs, ">", NULL, "\n<", 256);
        if (rc != TC_DONE)
            return rc;
        tc_eat(r, 1);
        c->st = XC_VOPEN;
        return TC_OK;
    case XC_VOPEN: {
        /* the key is complete: its type, and the key itself in the output */
        value_type(r, c);
        c->wrap = !c->n_params && is_wrapper(r, c);
        if (c->wrap) {
            /* {"arguments": {...}} as one parameter: held, maybe unwrapped */
            c->t = (tc_type){ 0 };
            c->as_json = true;
        } else {
            emit_key(r, c);
        }
        c->st = XC_VSTART;
        if (glm) {
            c->st = XC_VSTART + 100; /* expect <arg_value> */
        }
        return TC_OK;
    }
    case XC_VSTART + 100:
        if (skip_layout(r, true) == TC_MORE)
            return TC_MORE;
        rc = tc_lit(r, "<arg_value>", true);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc != TC_DONE) {
            /* a key without a value: null, after the key a wrapper held back */
            if (c->wrap)
                emit_key(r, c);
            c->wrap = false;
            out(r, c, "null", 4);
            c->n_params++;
            c->st = XC_BODY;
            return TC_OK;
        }
        c->st = XC_VSTART;
        return TC_OK;
    case XC_VSTART:
        /* decisions that wait for input come before anything is emitted */
        if (x->strip_nl && !c->saw_nl) {
            if (!tc_n(r) && !r->eof)
                return TC_MORE;
            if (tc_n(r) && *tc_p(r) == '\n')
                tc_eat(r, 1);
            c->saw_nl = true; /* (reused as "layout newline handled") */
        }
        bool cdata = false;
        if (x->cdata) {
            rc = tc_lit(r, "<![CDATA[", true);
            if (rc == TC_MORE)
                return TC_MORE;
            cdata = rc == TC_DONE;
        }
        c->saw_nl = false;
        c->streaming = c->t.mask == TT_STRING;
        cv_buf_reset(&c->val);
        if (c->streaming)
            out(r, c, "\"", 1);
        c->st = cdata ? XC_CDATA : XC_VALUE;
        return TC_OK;
    case XC_CDATA: {
        /* CDATA: every byte up to ]]> is value, tags included */
        const char *p = tc_p(r);
        size_t n = tc_n(r), i = 0;
        while (i < n) {
            if (p[i] == ']') {
                size_t k = n - i < 3 ? n - i : 3;
                if (!memcmp(p + i, "]]>", k)) {
                    if (k == 3)
                        break;
                    if (!r->eof)
                        break;
                }
            }
            i++;
        }
        r->work += i + 1;
        size_t len = i;
        if (i == n && !r->eof)
            len = cv_utf8_complete_prefix(p, i);
        value_text(r, c, p, len);
        tc_eat(r, len);
        if (tc_n(r) >= 3 && !memcmp(tc_p(r), "]]>", 3)) {
            tc_eat(r, 3);
            c->st = XC_VALUE;
            return TC_OK;
        }
        if (r->eof) {
            tc_eat(r, tc_n(r));
            value_end(r, c);
            return TC_OK;
        }
        return TC_MORE;
    }
    case XC_VALUE:
        return value_step(r, c);
    }
    return TC_FAIL;
}
