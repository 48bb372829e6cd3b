/* tc_json.c — the tolerant JSON reader: a byte-at-a-time state machine that
 * reads one JSON value as models write it and writes it back as canonical
 * JSON (", " and ": " separators, strings re-escaped, UTF-8 validated), so
 * arguments can stream while they are generated and still concatenate to
 * exactly the final text.
 *
 * Accepted beyond RFC 8259 (each a repair seen in real quantized output):
 * single-quoted strings, Python literals (True/False/None), bare identifier
 * keys and words, trailing commas, a missing comma between members, raw
 * control characters and invalid escapes inside strings ("C:\Users" keeps its
 * backslash), numbers like +1 / .5 / 1., and at the end of the stream
 * unterminated strings and brackets (closed). Gemma 4 writes strings between
 * <|"|> tokens (TJ_GEMMA).
 *
 * Typing by schema: the value at depth 0 (tc_json.top) or the members of a
 * depth-0 object (tc_json.props) are held back while being read when their
 * JSON type differs from the schema's ("5" for an integer, 5 for a string, an
 * object for a string), then converted by tc_coerce_text. Values that need no
 * conversion stream through as they are read; a long string argument (a file
 * being written) is never buffered. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

enum { J_VALUE, J_KEY_OR_END, J_COLON, J_AFTER, J_VALUE_OR_END, J_STRING, J_TOKEN, J_DONE };

#define HAS_ELEM 0x80 /* stack bit: the container already has an element */

static const char GEMMA_Q[] = "<|\"|>";

void tc_json_init(tc_json *j, unsigned flags, tc_type top, const json_t *props, cv_buf *out, uint64_t *work)
{
    memset(j, 0, sizeof *j);
    j->flags = flags;
    j->st = J_VALUE;
    j->top = top;
    j->props = props;
    j->out = (flags & TJ_SKIP) ? NULL : out;
    j->work = work;
}

void tc_json_fini(tc_json *j)
{
    cv_buf_free(&j->tok);
    cv_buf_free(&j->held);
    cv_buf_free(&j->key);
}

bool tc_json_started(const tc_json *j)
{
    return j->depth > 0 || j->st != J_VALUE;
}

/* ---- output ---- */

/* Where bytes of the current value go: the hold buffer while a value is held
 * for coercion, else the output. */
static void give_up_hold(tc_json *j);

static void put(tc_json *j, const char *s, size_t n)
{
    if (j->holding) {
        cv_buf_append(&j->held, s, n);
        if (j->held.len > CV_TC_MAX_VALUE)
            give_up_hold(j);
    } else if (j->out) {
        if (j->out_cap && j->out->len + n > j->out_cap) {
            j->overflow = true; /* the caller fails the value at its end */
            return;
        }
        cv_buf_append(j->out, s, n);
    }
}

/* Strings are written decoded (raw bytes) at the top level with TJ_DECODE and
 * while a string is held for coercion; else JSON-escaped. */
static bool decoding(const tc_json *j)
{
    return ((j->flags & TJ_DECODE) && j->depth == 0) || (j->holding && j->hold_depth == j->depth);
}

static void put_str_bytes(tc_json *j, const char *s, size_t n)
{
    if (j->in_key && j->depth == 1 && j->key.len < 1024) /* only looked up, never emitted */
        cv_buf_append(&j->key, s, n);
    if (decoding(j)) {
        put(j, s, n);
        return;
    }
    if (!j->out && !j->holding)
        return;
    if (!j->holding && j->out_cap && j->out->len + n > j->out_cap) {
        j->overflow = true;
        return;
    }
    cv_buf *b = j->holding ? &j->held : j->out;
    cv_buf_put_json_chars(b, s, n, false); /* s holds valid UTF-8 here */
    if (j->holding && j->held.len > CV_TC_MAX_VALUE)
        give_up_hold(j);
}

static void put_cp(tc_json *j, uint32_t cp)
{
    char u[4];
    int n = cv_utf8_encode(cp, u);
    if (n == 0)
        n = cv_utf8_encode(0xFFFD, u);
    put_str_bytes(j, u, (size_t)n);
}

/* ---- coercion ---- */

static bool string_only(tc_type t) { return t.mask == TT_STRING; }

/* The type that applies to a value starting now, or mask 0. */
static tc_type value_type(const tc_json *j)
{
    if (j->depth == 0)
        return j->top;
    if (j->depth == 1 && (j->stack[0] & 0x7f) == '{' && j->props)
        return j->cur;
    return (tc_type){ 0 };
}

/* kind: 's' string, 't' token, 'c' container. Starts holding when the
 * value's JSON kind may need converting to the schema type. */
static void maybe_hold(tc_json *j, int kind)
{
    tc_type t = value_type(j);
    if (!t.mask || j->holding || (j->flags & TJ_SKIP))
        return;
    bool hold = false;
    if (kind == 's')
        hold = !(t.mask & TT_STRING);
    else if (kind == 't' || kind == 'c')
        hold = string_only(t);
    if (hold) {
        j->holding = true;
        j->hold_kind = kind;
        j->hold_depth = j->depth;
        j->cur = t;
        cv_buf_reset(&j->held);
    }
}

/* The held value (kind as in maybe_hold) ends: convert and write it. */
static void release_hold(tc_json *j, int kind)
{
    j->holding = false;
    tc_type t = j->cur;
    if (!j->out)
        return;
    if (kind == 's') {
        tc_coerce_text(j->held.data ? j->held.data : "", j->held.len, t, false, j->out);
    } else if (kind == 't' && j->held.len == 4 && !memcmp(j->held.data, "null", 4)) {
        cv_buf_append(j->out, "null", 4); /* an absent value stays absent */
    } else {
        /* a token or a container where only a string fits: its text */
        cv_buf_put_json_str(j->out, j->held.data ? j->held.data : "", j->held.len);
    }
    cv_buf_reset(&j->held);
}

/* A held value outgrew CV_TC_MAX_VALUE: stop typing it and let it stream as
 * the model wrote it (a value that large does not fit a number or boolean
 * anyway). Only strings and containers get this large; tokens are bounded. */
static void give_up_hold(tc_json *j)
{
    j->holding = false;
    if (j->out) {
        if (j->hold_kind == 's') {
            cv_buf_putc(j->out, '"');
            tc_esc(j->out, j->held.data, j->held.len);
        } else {
            cv_buf_append(j->out, j->held.data, j->held.len);
        }
    }
    cv_buf_free(&j->held);
}

/* ---- structure ---- */

/* Before a key, or before an array element: ", " unless it is the first. */
static void elem_sep(tc_json *j)
{
    if (j->depth == 0)
        return;
    uint8_t *top = &j->stack[j->depth - 1];
    if (*top & HAS_ELEM)
        put(j, ", ", 2);
    *top |= HAS_ELEM;
}

/* Before a value: a separator only inside arrays (in objects the key had it). */
static void value_sep(tc_json *j)
{
    if (j->depth > 0 && (j->stack[j->depth - 1] & 0x7f) == '[')
        elem_sep(j);
}

static void open_container(tc_json *j, char c)
{
    maybe_hold(j, 'c');
    char s[1] = { c };
    put(j, s, 1);
    j->stack[j->depth++] = (uint8_t)c;
}

/* A value (of kind) just ended at the current depth. */
static void value_done(tc_json *j, int kind)
{
    if (j->holding && j->hold_depth == j->depth)
        release_hold(j, kind);
    j->st = j->depth == 0 ? J_DONE : J_AFTER;
}

static void close_container(tc_json *j)
{
    char c = (j->stack[--j->depth] & 0x7f) == '{' ? '}' : ']';
    put(j, &c, 1);
    value_done(j, 'c');
}

/* ---- tokens ---- */

static bool tok_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
           c == '-' || c == '.' || c == '$';
}

static bool strict_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return false;
    if (s[i] == '0')
        i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return false;
    if (i < n && s[i] == '.') {
        i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    return i == n;
}

/* Writes the canonical JSON of a number-like token to b; false if it is not
 * a finite number. */
bool tc_number_canon(const char *s, size_t n, cv_buf *b)
{
    if (n == 0 || n > 64)
        return false;
    if (strict_number(s, n)) {
        /* a number past double range (1e400) is text: most parsers refuse it */
        char tmp[72];
        memcpy(tmp, s, n);
        tmp[n] = 0;
        if (!isfinite(strtod(tmp, NULL)))
            return false;
        cv_buf_append(b, s, n);
        return true;
    }
    char tmp[72];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_')
            tmp[k++] = s[i];
    tmp[k] = 0;
    const char *t = tmp;
    if (*t == '+')
        t++;
    if (!*t || !((*t >= '0' && *t <= '9') || *t == '.' || *t == '-'))
        return false;
    for (const char *q = t; *q; q++)
        if (!((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-'))
            return false;
    char *end;
    double d = strtod(t, &end);
    if (*end || !isfinite(d))
        return false;
    char out[40];
    if (d == floor(d) && fabs(d) < 9007199254740992.0 && !strchr(t, '.') && !strchr(t, 'e') && !strchr(t, 'E'))
        snprintf(out, sizeof out, "%lld", (long long)d);
    else
        snprintf(out, sizeof out, "%.17g", d);
    if (!strchr(out, '.') && !strchr(out, 'e') && (strchr(t, '.') || strchr(t, 'e') || strchr(t, 'E')))
        strcat(out, ".0");
    cv_buf_append(b, out, strlen(out));
    return true;
}

/* The token ended: write it as a key or a value. Returns -1 when it is not
 * acceptable (a bare word with TJ_NO_BARE). */
static int finish_token(tc_json *j)
{
    const char *s = j->tok.data ? j->tok.data : "";
    size_t n = j->tok.len;
    if (j->st == J_TOKEN && j->in_key) {
        /* a bare key */
        if (j->flags & TJ_NO_BARE)
            return -1;
        if (j->depth == 1) {
            cv_buf_reset(&j->key);
            cv_buf_append(&j->key, s, n);
        }
        if (j->out && !j->holding)
            cv_buf_put_json_str(j->out, s, n);
        else if (j->holding)
            cv_buf_put_json_str(&j->held, s, n);
        j->in_key = false;
        if (j->depth == 1 && j->props)
            j->cur = tc_prop_type(j->props, s, n);
        j->st = J_COLON;
        cv_buf_reset(&j->tok);
        return 0;
    }
    const char *lit = NULL;
    if (n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4)))
        lit = "true";
    else if (n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5)))
        lit = "false";
    else if ((n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "None", 4))) || (n == 3 && !memcmp(s, "nil", 3)))
        lit = "null";
    if (lit) {
        put(j, lit, strlen(lit));
    } else {
        cv_buf num = { 0 };
        if (tc_number_canon(s, n, &num)) {
            put(j, num.data, num.len);
        } else {
            if (j->flags & TJ_NO_BARE) {
                cv_buf_free(&num);
                return -1;
            }
            /* a bare word where a value belongs: the model meant a string
             * (held raw: the hold is released as a string) */
            if (j->holding || decoding(j))
                put(j, s, n);
            else if (j->out)
                cv_buf_put_json_str(j->out, s, n);
        }
        cv_buf_free(&num);
    }
    cv_buf_reset(&j->tok);
    value_done(j, 't');
    return 0;
}

/* ---- strings ---- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static void end_string(tc_json *j)
{
    if (j->n_u8) {
        put_cp(j, 0xFFFD);
        j->n_u8 = 0;
    }
    if (j->hi_surrogate) {
        put_cp(j, 0xFFFD);
        j->hi_surrogate = 0;
    }
    bool decoded = decoding(j);
    bool was_key = j->in_key;
    if (!decoded)
        put(j, "\"", 1);
    if (was_key) {
        j->in_key = false;
        if (j->depth == 1 && j->props)
            j->cur = tc_prop_type(j->props, j->key.data ? j->key.data : "", j->key.len);
        j->st = J_COLON;
        return;
    }
    value_done(j, 's');
}

/* Handles an escape at p (p[0] == '\\'); returns bytes consumed, 0 if more
 * input is needed. */
static size_t escape(tc_json *j, const char *p, size_t n, bool eof)
{
    if (n < 2) {
        if (!eof)
            return 0;
        put_str_bytes(j, "\\", 1);
        return 1;
    }
    char c = p[1];
    const char *simple = NULL;
    switch (c) {
    case '"': simple = "\""; break;
    case '\\': simple = "\\"; break;
    case '/': simple = "/"; break;
    case '\'': simple = "'"; break;
    case 'n': simple = "\n"; break;
    case 't': simple = "\t"; break;
    case 'r': simple = "\r"; break;
    case 'b': simple = "\b"; break;
    case 'f': simple = "\f"; break;
    }
    if (simple) {
        if (j->hi_surrogate) {
            put_cp(j, 0xFFFD);
            j->hi_surrogate = 0;
        }
        put_str_bytes(j, simple, 1);
        return 2;
    }
    if (c == 'u') {
        if (n < 6) {
            if (!eof)
                return 0;
            put_str_bytes(j, "\\", 1);
            return 1;
        }
        long v = hex4(p + 2);
        if (v < 0) {
            put_str_bytes(j, "\\", 1);
            return 1;
        }
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (j->hi_surrogate)
                put_cp(j, 0xFFFD);
            j->hi_surrogate = (uint32_t)v;
            return 6;
        }
        if (v >= 0xDC00 && v <= 0xDFFF) {
            if (j->hi_surrogate) {
                uint32_t cp = 0x10000 + ((j->hi_surrogate - 0xD800) << 10) + ((uint32_t)v - 0xDC00);
                j->hi_surrogate = 0;
                put_cp(j, cp);
            } else {
                put_cp(j, 0xFFFD);
            }
            return 6;
        }
        if (j->hi_surrogate) {
            put_cp(j, 0xFFFD);
            j->hi_surrogate = 0;
        }
        put_cp(j, (uint32_t)v);
        return 6;
    }
    if (c == 'x') {
        if (n < 4) {
            if (!eof)
                return 0;
            put_str_bytes(j, "\\", 1);
            return 1;
        }
        int h1 = hexval((unsigned char)p[2]), h2 = hexval((unsigned char)p[3]);
        if (h1 < 0 || h2 < 0) {
            put_str_bytes(j, "\\", 1);
            return 1;
        }
        put_cp(j, (uint32_t)(h1 * 16 + h2));
        return 4;
    }
    /* An invalid escape: the backslash was meant literally (a Windows path). */
    put_str_bytes(j, "\\", 1);
    return 1;
}

/* Reads string bytes from p; returns bytes consumed. Sets *more when input
 * ran out inside something that needs lookahead. */
static size_t string_bytes(tc_json *j, const char *p, size_t n, bool eof, bool *more)
{
    size_t i = 0;
    while (i < n) {
        /* a run of plain ASCII goes out in one piece */
        size_t k = i;
        if (!j->n_u8 && !j->hi_surrogate) {
            while (k < n) {
                unsigned char c = (unsigned char)p[k];
                if (c < 0x20 || c >= 0x80 || c == '\\' || c == '"' || c == '\'' || c == '<')
                    break;
                k++;
            }
            if (k > i) {
                put_str_bytes(j, p + i, k - i);
                i = k;
                continue;
            }
        }
        unsigned char c = (unsigned char)p[i];
        if (j->n_u8) {
            if ((c & 0xC0) == 0x80) {
                j->u8[j->n_u8++] = (char)c;
                i++;
                if (j->n_u8 == j->need_u8) {
                    uint32_t cp;
                    if (cv_utf8_decode(j->u8, (size_t)j->n_u8, &cp) == j->n_u8)
                        put_str_bytes(j, j->u8, (size_t)j->n_u8);
                    else
                        put_cp(j, 0xFFFD);
                    j->n_u8 = 0;
                }
                continue;
            }
            put_cp(j, 0xFFFD);
            j->n_u8 = 0;
            continue;
        }
        if (j->hi_surrogate && c != '\\') {
            put_cp(j, 0xFFFD);
            j->hi_surrogate = 0;
        }
        if (j->quote == 'G') {
            if (c == '<') {
                size_t m = n - i < 5 ? n - i : 5;
                if (!memcmp(p + i, GEMMA_Q, m)) {
                    if (m < 5) {
                        if (!eof) {
                            *more = true;
                            return i;
                        }
                    } else {
                        end_string(j);
                        return i + 5;
                    }
                }
                put_str_bytes(j, "<", 1);
                i++;
                continue;
            }
        } else {
            if ((int)c == j->quote) {
                end_string(j);
                return i + 1;
            }
            if (c == '\\') {
                size_t used = escape(j, p + i, n - i, eof);
                if (!used) {
                    *more = true;
                    return i;
                }
                i += used;
                continue;
            }
        }
        if (c >= 0x80) {
            int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
            if (!need || c > 0xF4) {
                put_cp(j, 0xFFFD);
                i++;
                continue;
            }
            j->u8[0] = (char)c;
            j->n_u8 = 1;
            j->need_u8 = need;
            i++;
            continue;
        }
        /* a quote of the other kind, '<' outside Gemma, or a control char */
        put_str_bytes(j, (const char *)&p[i], 1);
        i++;
    }
    return i;
}

static void begin_string(tc_json *j, int quote)
{
    j->quote = quote;
    j->st = J_STRING;
    if (!j->in_key)
        maybe_hold(j, 's');
    else if (j->depth == 1)
        cv_buf_reset(&j->key);
    if (!decoding(j))
        put(j, "\"", 1);
}

/* ---- the state machine ---- */

static bool ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* At p: does a Gemma string start? 1 yes, 0 no, -1 need more. */
static int gemma_quote(const char *p, size_t n, bool eof)
{
    size_t m = n < 5 ? n : 5;
    if (memcmp(p, GEMMA_Q, m))
        return 0;
    if (m < 5)
        return eof ? 0 : -1;
    return 1;
}

/* Starts a value at p[0] (not whitespace); returns bytes consumed, 0 if it
 * needs more input, -1 if nothing here can start a value. */
static long start_value(tc_json *j, const char *p, size_t n, bool eof)
{
    unsigned char c = (unsigned char)p[0];
    if ((j->flags & TJ_OBJECT) && j->depth == 0 && c != '{')
        return -1;
    if (c == '{' || c == '[') {
        if (j->depth >= CV_MAX_JSON_DEPTH)
            return -1; /* refused before its separator, which would dangle: [1, ] */
        value_sep(j);
        open_container(j, (char)c);
        j->st = c == '{' ? J_KEY_OR_END : J_VALUE_OR_END;
        return 1;
    }
    if (c == '"' || c == '\'') {
        value_sep(j);
        begin_string(j, c);
        return 1;
    }
    if ((j->flags & TJ_GEMMA) && c == '<') {
        int g = gemma_quote(p, n, eof);
        if (g < 0)
            return 0;
        if (g > 0) {
            value_sep(j);
            begin_string(j, 'G');
            return 5;
        }
        return -1;
    }
    return -1;
}

int tc_json_feed(tc_json *j, const char *p, size_t n, bool eof, size_t *used)
{
    size_t i = 0;
    for (;;) {
        if (j->st == J_DONE) {
            *used = i;
            return TC_DONE;
        }
        if (j->st == J_STRING) {
            bool more = false;
            size_t k = string_bytes(j, p + i, n - i, eof, &more);
            if (j->work)
                *j->work += k + 1;
            i += k;
            if (j->st != J_STRING)
                continue; /* the string ended */
            if (i < n && !more)
                continue;
            if (!eof) {
                *used = i;
                return TC_MORE;
            }
            /* end of stream inside a string: close it */
            if (i < n)
                put_str_bytes(j, p + i, n - i);
            i = n;
            end_string(j);
            continue;
        }
        if (j->st == J_TOKEN) {
            size_t t0 = i;
            while (i < n && tok_char((unsigned char)p[i])) {
                if (j->tok.len > 256) {
                    *used = i;
                    return TC_FAIL;
                }
                cv_buf_putc(&j->tok, p[i]);
                i++;
            }
            if (j->work)
                *j->work += i - t0 + 1;
            if (i == n && !eof) {
                *used = i;
                return TC_MORE;
            }
            if (finish_token(j) < 0) {
                /* fail after the token: its first bytes may have come in an
                 * earlier piece, and the failure must not depend on that */
                *used = i;
                return TC_FAIL;
            }
            continue;
        }
        /* structural states: skip whitespace */
        size_t w0 = i;
        while (i < n && ws((unsigned char)p[i]))
            i++;
        if (j->work)
            *j->work += i - w0 + 1;
        if (i == n) {
            if (!eof) {
                *used = i;
                return TC_MORE;
            }
            /* end of stream: repair what is open */
            if (j->st == J_VALUE && j->depth == 0) {
                *used = i;
                return TC_FAIL;
            }
            if (j->st == J_COLON) {
                put(j, ": null", 6);
                j->st = J_AFTER;
            } else if (j->st == J_VALUE) {
                put(j, "null", 4);
                value_done(j, 't');
                continue;
            }
            if (j->depth == 0) {
                *used = i;
                return TC_DONE;
            }
            close_container(j);
            continue;
        }
        unsigned char c = (unsigned char)p[i];
        switch (j->st) {
        case J_VALUE:
        case J_VALUE_OR_END: {
            if (j->st == J_VALUE_OR_END && c == ']') {
                close_container(j);
                i++;
                break;
            }
            if (c == ',' && j->st == J_VALUE_OR_END) {
                /* [1,,2] or [,1]: skip the empty element */
                i++;
                break;
            }
            if (tok_char(c)) {
                if ((j->flags & TJ_OBJECT) && j->depth == 0) {
                    *used = i;
                    return TC_FAIL;
                }
                value_sep(j);
                maybe_hold(j, 't');
                j->st = J_TOKEN;
                cv_buf_reset(&j->tok);
                break;
            }
            long k = start_value(j, p + i, n - i, eof);
            if (k == 0) {
                *used = i;
                return TC_MORE;
            }
            if (k < 0) {
                *used = i;
                return TC_FAIL;
            }
            i += (size_t)k;
            break;
        }
        case J_KEY_OR_END:
            if (c == '}') {
                close_container(j);
                i++;
                break;
            }
            if (c == ',') {
                i++;
                break;
            }
            if (c == '"' || c == '\'') {
                elem_sep(j);
                j->in_key = true;
                begin_string(j, c);
                i++;
                break;
            }
            if ((j->flags & TJ_GEMMA) && c == '<') {
                int g = gemma_quote(p + i, n - i, eof);
                if (g < 0) {
                    *used = i;
                    return TC_MORE;
                }
                if (g > 0) {
                    elem_sep(j);
                    j->in_key = true;
                    begin_string(j, 'G');
                    i += 5;
                    break;
                }
            }
            if (tok_char(c) && !(c >= '0' && c <= '9') && !(j->flags & TJ_NO_BARE)) {
                elem_sep(j);
                j->in_key = true;
                j->st = J_TOKEN;
                cv_buf_reset(&j->tok);
                break;
            }
            *used = i;
            return TC_FAIL;
        case J_COLON:
            if (c == ':') {
                put(j, ": ", 2);
                j->st = J_VALUE;
                i++;
                break;
            }
            *used = i;
            return TC_FAIL;
        case J_AFTER: {
            char open = (char)(j->stack[j->depth - 1] & 0x7f);
            if (c == ',') {
                j->st = open == '{' ? J_KEY_OR_END : J_VALUE_OR_END;
                i++;
                break;
            }
            if ((open == '{' && c == '}') || (open == '[' && c == ']')) {
                close_container(j);
                i++;
                break;
            }
            /* a missing comma: the next member starts right away */
            if (open == '{' && (c == '"' || c == '\'')) {
                j->st = J_KEY_OR_END;
                break;
            }
            if (open == '[' && (c == '"' || c == '\'' || c == '{' || c == '[')) {
                j->st = J_VALUE_OR_END;
                break;
            }
            *used = i;
            return TC_FAIL;
        }
        }
    }
}

int tc_json_canon(const char *p, size_t n, unsigned flags, tc_type top, const json_t *props, cv_buf *out)
{
    cv_buf tmp = { 0 };
    tc_json j;
    tc_json_init(&j, flags, top, props, &tmp, NULL);
    size_t used = 0;
    int rc = tc_json_feed(&j, p, n, true, &used);
    tc_json_fini(&j);
    if (rc == TC_DONE) {
        for (size_t i = used; i < n; i++)
            if (!ws((unsigned char)p[i]))
                rc = TC_FAIL;
    }
    if (rc != TC_DONE) {
        cv_buf_free(&tmp);
        return -1;
    }
    cv_buf_append(out, tmp.data ? tmp.data : "", tmp.len);
    cv_buf_free(&tmp);
    return 0;
}
