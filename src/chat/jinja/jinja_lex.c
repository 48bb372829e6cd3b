/* jinja_lex.c — turns template source into tokens the way Jinja2's lexer
 * does under Hugging Face's settings: newlines normalised to "\n", one
 * trailing newline dropped (keep_trailing_newline=False), `{%- -%}` style
 * whitespace control, trim_blocks (a block or comment tag eats the newline
 * after it) and lstrip_blocks (spaces and tabs before a block or comment tag
 * at the start of a line are dropped; `{%+` opts out). Inside tags it lexes
 * names, numbers, Python-escaped strings and operators, and only ends a tag
 * when brackets are balanced, as Jinja2 does. Parsing is jinja_parse.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja/jinja_int.h"

typedef struct lexer {
    const char *s;
    size_t n, pos;
    int line;
    cv_arena *a;
    jtok *toks;
    int n_toks, cap;
    cv_err *err;
    bool line_starting;
} lexer;

static int lex_fail(lexer *L, const char *what)
{
    return cv_err_set(L->err, CV_EINVAL, "template line %d: %s", L->line, what);
}

static jtok *push(lexer *L, int type)
{
    if (L->n_toks == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 256;
        L->toks = cv_xrealloc(L->toks, (size_t)L->cap * sizeof *L->toks);
    }
    jtok *t = &L->toks[L->n_toks++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = L->line;
    return t;
}

static int count_lines(const char *p, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == '\n';
    return k;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Python's str.rstrip() for the ASCII whitespace set plus the two-byte
 * U+0085/U+00A0 and three-byte spaces Python also strips. */
static size_t rstrip_len(const char *p, size_t n)
{
    for (;;) {
        if (n && (is_ws(p[n - 1]) || (p[n - 1] >= 0x1c && p[n - 1] <= 0x1f))) {
            n--;
            continue;
        }
        if (n >= 2 && (unsigned char)p[n - 2] == 0xC2 &&
            ((unsigned char)p[n - 1] == 0x85 || (unsigned char)p[n - 1] == 0xA0)) {
            n -= 2;
            continue;
        }
        if (n >= 3 && (unsigned char)p[n - 3] >= 0xE1) {
            uint32_t cp;
            if (cv_utf8_decode(p + n - 3, 3, &cp) == 3 && py_isspace(cp)) {
                n -= 3;
                continue;
            }
        }
        return n;
    }
}

static void emit_data(lexer *L, const char *p, size_t n, int line)
{
    if (!n)
        return;
    jtok *t = push(L, TK_DATA);
    t->p = p;
    t->n = (uint32_t)n;
    t->line = line;
}

/* Data before a tag, with the tag's left strip sign applied. */
static void emit_text_before(lexer *L, const char *p, size_t n, char sign, bool is_var, int line)
{
    if (sign == '-') {
        n = rstrip_len(p, n);
    } else if (sign != '+' && !is_var) {
        size_t l_pos = n;
        while (l_pos > 0 && p[l_pos - 1] != '\n')
            l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < n) {
            bool all_ws = true;
            for (size_t i = l_pos; i < n && all_ws; i++)
                all_ws = is_ws(p[i]) || (p[i] >= 0x1c && p[i] <= 0x1f);
            if (all_ws)
                n = l_pos;
        }
    }
    emit_data(L, p, n, line);
}

/* After a closing tag: '-' eats all whitespace, trim_blocks eats one newline
 * after block and comment tags, '+' keeps everything. Sets line_starting. */
static void after_close(lexer *L, char sign, bool trim)
{
    if (sign == '-') {
        while (L->pos < L->n && is_ws(L->s[L->pos])) {
            L->line += L->s[L->pos] == '\n';
            L->pos++;
        }
        L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
        return;
    }
    if (sign != '+' && trim && L->pos < L->n && L->s[L->pos] == '\n') {
        L->pos++;
        L->line++;
        L->line_starting = true;
        return;
    }
    L->line_starting = false;
}

/* ---- strings: Python escape decoding (Jinja2 decodes with unicode-escape) ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_cp(cv_buf *b, uint32_t cp)
{
    char u[4];
    int k = cv_utf8_encode(cp, u);
    if (!k)
        k = cv_utf8_encode(0xFFFD, u);
    cv_buf_append(b, u, (size_t)k);
}

static void decode_string(const char *p, size_t n, cv_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c != '\\' || i + 1 >= n) {
            cv_buf_putc(b, c);
            continue;
        }
        char e = p[++i];
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': cv_buf_putc(b, '\\'); break;
        case '\'': cv_buf_putc(b, '\''); break;
        case '"': cv_buf_putc(b, '"'); break;
        case 'a': cv_buf_putc(b, '\a'); break;
        case 'b': cv_buf_putc(b, '\b'); break;
        case 'f': cv_buf_putc(b, '\f'); break;
        case 'n': cv_buf_putc(b, '\n'); break;
        case 'r': cv_buf_putc(b, '\r'); break;
        case 't': cv_buf_putc(b, '\t'); break;
        case 'v': cv_buf_putc(b, '\v'); break;
        case 'x': case 'u': case 'U': {
            int want = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            int k = 0;
            while (k < want && i + 1 + k < n && hexval(p[i + 1 + k]) >= 0)
                cp = cp * 16 + (uint32_t)hexval(p[i + 1 + k++]);
            if (k < want) { /* Python raises; keep the text (rare, and the parse goes on) */
                cv_buf_putc(b, '\\');
                cv_buf_putc(b, e);
                break;
            }
            i += (size_t)k;
            /* a surrogate pair written as two \u escapes */
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n + 0 && p[i + 1] == '\\' && p[i + 2] == 'u') {
                uint32_t lo = 0;
                int ok = 1;
                for (int q = 0; q < 4; q++) {
                    int h = i + 3 + q < n ? hexval(p[i + 3 + q]) : -1;
                    if (h < 0) ok = 0; else lo = lo * 16 + (uint32_t)h;
                }
                if (ok && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            put_cp(b, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                int k = 0;
                while (k < 2 && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '7') {
                    cp = cp * 8 + (uint32_t)(p[++i] - '0');
                    k++;
                }
                put_cp(b, cp);
            } else {
                cv_buf_putc(b, '\\');
                cv_buf_putc(b, e);
            }
        }
    }
}

/* ---- tokens inside {{ }} and {% %} ---- */

static bool name_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80; }
static bool name_char(unsigned char c) { return name_start(c) || (c >= '0' && c <= '9'); }
static bool digit(char c) { return c >= '0' && c <= '9'; }

/* Digits with single underscores between them ("1_000"); returns the end. */
static size_t digits_end(const char *s, size_t n, size_t i)
{
    if (i >= n || !digit(s[i]))
        return i;
    i++;
    while (i < n) {
        if (digit(s[i]))
            i++;
        else if (s[i] == '_' && i + 1 < n && digit(s[i + 1]))
            i += 2;
        else
            break;
    }
    return i;
}

static double parse_num_text(const char *p, size_t n, bool is_float, int base, int64_t *iv, bool *overflow)
{
    char tmp[128];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof tmp - 1; i++)
        if (p[i] != '_')
            tmp[k++] = p[i];
    tmp[k] = 0;
    *overflow = false;
    if (is_float)
        return strtod(tmp, NULL);
    errno = 0;
    unsigned long long u = strtoull(base == 10 ? tmp : tmp + 2, NULL, base);
    if (errno || u > (unsigned long long)INT64_MAX)
        *overflow = true;
    *iv = (int64_t)u;
    return 0;
}

static int lex_tag(lexer *L, bool is_var)
{
    int bal = 0;
    const char *s = L->s;
    size_t n = L->n;
    for (;;) {
        while (L->pos < n && is_ws(s[L->pos])) {
            L->line += s[L->pos] == '\n';
            L->pos++;
        }
        if (L->pos >= n)
            return lex_fail(L, is_var ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
        size_t p = L->pos;
        char c = s[p];
        /* end of tag, only when brackets balance */
        if (bal == 0) {
            char close = is_var ? '}' : '%';
            char sign = 0;
            size_t q = p;
            if ((s[q] == '-' || s[q] == '+') && q + 2 < n + 0 && s[q + 1] == close && s[q + 2] == '}') {
                sign = s[q];
                q++;
            }
            if (q + 1 < n && s[q] == close && s[q + 1] == '}' && !(is_var && sign == '+')) {
                push(L, is_var ? TK_VAR_END : TK_BLOCK_END);
                L->pos = q + 2;
                after_close(L, sign, !is_var);
                return 0;
            }
        }
        jtok *t;
        if (c == '\'' || c == '"') {
            size_t q = p + 1;
            while (q < n && s[q] != c) {
                if (s[q] == '\\' && q + 1 < n)
                    q++;
                q++;
            }
            if (q >= n)
                return lex_fail(L, "unterminated string literal");
            cv_buf b = { 0 };
            /* newlines inside a literal are already normalised */
            decode_string(s + p + 1, q - p - 1, &b);
            t = push(L, TK_STRING);
            t->p = cv_arena_strndup(L->a, b.data ? b.data : "", b.len);
            t->n = (uint32_t)b.len;
            cv_buf_free(&b);
            L->line += count_lines(s + p, q - p);
            L->pos = q + 1;
            continue;
        }
        if (digit(c)) {
            /* integer forms 0b/0o/0x, then float, then decimal integer */
            if (c == '0' && p + 2 < n + 0 && (s[p + 1] == 'b' || s[p + 1] == 'B' || s[p + 1] == 'o' || s[p + 1] == 'O' ||
                                              s[p + 1] == 'x' || s[p + 1] == 'X')) {
                int base = (s[p + 1] | 32) == 'b' ? 2 : (s[p + 1] | 32) == 'o' ? 8 : 16;
                size_t q = p + 2;
                while (q < n && (hexval(s[q]) >= 0 || s[q] == '_') && (s[q] == '_' || hexval(s[q]) < base))
                    q++;
                if (q > p + 2) {
                    t = push(L, TK_INT);
                    bool of;
                    parse_num_text(s + p, q - p, false, base, &t->i, &of);
                    if (of)
                        return lex_fail(L, "integer literal does not fit in 64 bits");
                    L->pos = q;
                    continue;
                }
            }
            size_t q = digits_end(s, n, p);
            bool is_float = false;
            size_t r = q;
            if (r + 1 < n && s[r] == '.' && digit(s[r + 1])) {
                r = digits_end(s, n, r + 1);
                is_float = true;
            }
            if (r < n && (s[r] == 'e' || s[r] == 'E')) {
                size_t e = r + 1;
                if (e < n && (s[e] == '+' || s[e] == '-'))
                    e++;
                size_t e2 = digits_end(s, n, e);
                if (e2 > e) {
                    r = e2;
                    is_float = true;
                }
            }
            if (!is_float)
                r = q;
            bool of;
            if (is_float) {
                t = push(L, TK_FLOAT);
                t->f = parse_num_text(s + p, r - p, true, 10, NULL, &of);
            } else {
                t = push(L, TK_INT);
                parse_num_text(s + p, r - p, false, 10, &t->i, &of);
                if (of) { /* Python has big ints; we keep a float, as close as it gets */
                    t->type = TK_FLOAT;
                    t->f = parse_num_text(s + p, r - p, true, 10, NULL, &of);
                }
            }
            L->pos = r;
            continue;
        }
        if (name_start((unsigned char)c)) {
            size_t q = p + 1;
            while (q < n && name_char((unsigned char)s[q]))
                q++;
            t = push(L, TK_NAME);
            t->p = s + p;
            t->n = (uint32_t)(q - p);
            L->pos = q;
            continue;
        }
        static const struct { const char *s; uint8_t op; } ops[] = {
            { "//", OP_FLOORDIV }, { "**", OP_POW }, { "==", OP_EQ }, { "!=", OP_NE }, { "<=", OP_LE },
            { ">=", OP_GE }, { "+", OP_ADD }, { "-", OP_SUB }, { "/", OP_DIV }, { "*", OP_MUL },
            { "%", OP_MOD }, { "~", OP_TILDE }, { "<", OP_LT }, { ">", OP_GT }, { "=", OP_ASSIGN },
            { ".", OP_DOT }, { ",", OP_COMMA }, { ":", OP_COLON }, { "|", OP_PIPE }, { "(", OP_LPAREN },
            { ")", OP_RPAREN }, { "[", OP_LBRACKET }, { "]", OP_RBRACKET }, { "{", OP_LBRACE },
            { "}", OP_RBRACE },
        };
        int found = -1;
        for (int k = 0; k < (int)CV_ARRAY_LEN(ops); k++) {
            size_t m = strlen(ops[k].s);
            if (p + m <= n && !memcmp(s + p, ops[k].s, m)) {
                found = k;
                break;
            }
        }
        if (found < 0) {
            char msg[64];
            snprintf(msg, sizeof msg, "unexpected character '%c' inside a tag", c);
            return lex_fail(L, msg);
        }
        uint8_t op = ops[found].op;
        if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE)
            bal++;
        else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
            if (bal == 0)
                return lex_fail(L, "unexpected closing bracket");
            bal--;
        }
        t = push(L, TK_OP);
        t->op = op;
        L->pos = p + strlen(ops[found].s);
    }
}

/* `{%[-+]? raw [-]?%}` at p: returns the end of the tag or 0. */
static size_t match_raw(const char *s, size_t n, size_t p, const char *word, char *lsign, char *rsign)
{
    size_t q = p + 2;
    *lsign = 0;
    if (q < n && (s[q] == '-' || s[q] == '+'))
        *lsign = s[q++];
    while (q < n && is_ws(s[q]))
        q++;
    size_t wl = strlen(word);
    if (q + wl > n || memcmp(s + q, word, wl))
        return 0;
    q += wl;
    if (q < n && name_char((unsigned char)s[q]))
        return 0;
    while (q < n && is_ws(s[q]))
        q++;
    *rsign = 0;
    if (q < n && (s[q] == '-' || s[q] == '+'))
        *rsign = s[q++];
    if (q + 1 < n && s[q] == '%' && s[q + 1] == '}')
        return q + 2;
    return 0;
}

int jlex(const char *src, size_t len, cv_arena *a, jtok **out, int *n_out, cv_err *err)
{
    if (len > CV_JINJA_MAX_SOURCE)
        return cv_err_set(err, CV_ELIMIT, "chat template is %zu bytes, the limit is %u", len, CV_JINJA_MAX_SOURCE);
    /* newline normalisation (\r\n and \r become \n), then one trailing
     * newline dropped, as Jinja2's lexer does before anything else */
    char *s = cv_arena_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;

    lexer L = { .s = s, .n = n, .line = 1, .a = a, .err = err, .line_starting = true };
    int rc = 0;
    while (L.pos < n) {
        /* next tag opener */
        size_t p = L.pos;
        const char *hit = NULL;
        for (size_t q = p; q + 1 < n; q++) {
            if (s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')) {
                hit = s + q;
                break;
            }
        }
        if (!hit) {
            emit_data(&L, s + p, n - p, L.line);
            L.pos = n;
            break;
        }
        size_t tp = (size_t)(hit - s);
        char kind = hit[1];
        char sign = tp + 2 < n && (s[tp + 2] == '-' || s[tp + 2] == '+') ? s[tp + 2] : 0;
        int data_line = L.line;
        L.line += count_lines(s + p, tp - p);
        if (kind == '%') {
            char ls, rs;
            size_t e = match_raw(s, n, tp, "raw", &ls, &rs);
            if (e && rs != '+') {
                emit_text_before(&L, s + p, tp - p, ls, false, data_line);
                L.pos = e;
                if (rs == '-')
                    while (L.pos < n && is_ws(s[L.pos])) {
                        L.line += s[L.pos] == '\n';
                        L.pos++;
                    }
                /* find {% endraw %} */
                size_t q = L.pos, end = 0;
                char els = 0, ers = 0;
                for (; q + 1 < n; q++)
                    if (s[q] == '{' && s[q + 1] == '%' && (end = match_raw(s, n, q, "endraw", &els, &ers)) && ers != '+')
                        break;
                if (q + 1 >= n) {
                    rc = lex_fail(&L, "missing {% endraw %}");
                    goto done;
                }
                L.line_starting = false;
                emit_text_before(&L, s + L.pos, q - L.pos, els, false, L.line);
                L.line += count_lines(s + L.pos, q - L.pos);
                L.pos = end;
                after_close(&L, ers, true);
                continue;
            }
        }
        emit_text_before(&L, s + p, tp - p, sign, kind == '{', data_line);
        L.pos = tp + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t q = L.pos;
            while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}'))
                q++;
            if (q + 1 >= n) {
                rc = lex_fail(&L, "unterminated comment, expected '#}'");
                goto done;
            }
            char rs = q > L.pos && (s[q - 1] == '-' || s[q - 1] == '+') ? s[q - 1] : 0;
            if (rs == '+')
                rs = 0; /* Jinja2 has no '+#}': the '+' is comment text */
            L.line += count_lines(s + L.pos, q - L.pos);
            L.pos = q + 2;
            after_close(&L, rs, true);
            continue;
        }
        push(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN);
        if ((rc = lex_tag(&L, kind == '{')) < 0)
            goto done;
    }
    push(&L, TK_EOF);
    *out = cv_arena_alloc(a, (size_t)L.n_toks * sizeof(jtok));
    memcpy(*out, L.toks, (size_t)L.n_toks * sizeof(jtok));
    *n_out = L.n_toks;
done:
    free(L.toks);
    return rc;
}
