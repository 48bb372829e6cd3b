/* gram_regex.c — the regular-expression subset corvid compiles (JSON Schema
 * "pattern", ECMA-262 with the u flag as validators use it) into grammar
 * expressions over code points. Supported: literals, escapes (\d \D \w \W
 * \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} and escaped punctuation), `.`,
 * classes with ranges and negation, groups ((..), (?:..), named), `|`,
 * quantifiers * + ? {n} {n,} {n,m} (lazy/possessive marks ignored: they do
 * not change which strings match), ^ at the start and $ at the end of a
 * top-level branch. Not supported, and reported by name: backreferences,
 * lookaround, word boundaries, \p{..} classes, anchors elsewhere. A pattern
 * without ^ may match anywhere, so it gets "anything" around it, as
 * validators search rather than match. In JSON mode the code points are
 * written as the inside of a JSON string: quote, backslash and controls as
 * escapes. The tree of the pattern is bounded by CV_MAX_GRAMMAR_PATTERN
 * bytes and CV_MAX_GRAMMAR_REPEAT repetitions; the automaton it becomes is
 * bounded by gram_build.c. */
#include <stdlib.h>

#include "grammar/grammar_int.h"

typedef struct rparse {
    gbuild *b;
    const char *s;
    size_t len, pos;
    bool json;
    cv_err *err;
    int rc;
    int depth;
} rparse;

typedef struct cpset { uint32_t *r; int n, cap; } cpset; /* pairs */

static void cps_add(cpset *c, uint32_t lo, uint32_t hi)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 8;
        c->r = cv_xrealloc(c->r, (size_t)c->cap * 2 * sizeof *c->r);
    }
    c->r[2 * c->n] = lo;
    c->r[2 * c->n + 1] = hi;
    c->n++;
}

static int cmp_pair32(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cps_normalise(cpset *c)
{
    if (c->n > 1)
        qsort(c->r, (size_t)c->n, 2 * sizeof *c->r, cmp_pair32);
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (m && c->r[2 * i] <= c->r[2 * (m - 1) + 1] + 1) {
            if (c->r[2 * i + 1] > c->r[2 * (m - 1) + 1])
                c->r[2 * (m - 1) + 1] = c->r[2 * i + 1];
        } else {
            c->r[2 * m] = c->r[2 * i];
            c->r[2 * m + 1] = c->r[2 * i + 1];
            m++;
        }
    }
    c->n = m;
}

static void cps_negate(cpset *c)
{
    cps_normalise(c);
    cpset o = { 0 };
    uint32_t next = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->r[2 * i] > next)
            cps_add(&o, next, c->r[2 * i] - 1);
        next = c->r[2 * i + 1] + 1;
    }
    if (next <= 0x10FFFF)
        cps_add(&o, next, 0x10FFFF);
    free(c->r);
    *c = o;
}

static void add_digit(cpset *c) { cps_add(c, '0', '9'); }
static void add_word(cpset *c) { cps_add(c, '0', '9'); cps_add(c, 'A', 'Z'); cps_add(c, 'a', 'z'); cps_add(c, '_', '_'); }
static void add_space(cpset *c)
{
    /* ECMA-262 WhiteSpace and LineTerminator */
    cps_add(c, 0x09, 0x0D);
    cps_add(c, 0x20, 0x20);
    cps_add(c, 0xA0, 0xA0);
    cps_add(c, 0x1680, 0x1680);
    cps_add(c, 0x2000, 0x200A);
    cps_add(c, 0x2028, 0x2029);
    cps_add(c, 0x202F, 0x202F);
    cps_add(c, 0x205F, 0x205F);
    cps_add(c, 0x3000, 0x3000);
    cps_add(c, 0xFEFF, 0xFEFF);
}

/* A code-point set as an expression; in JSON mode, characters that JSON
 * strings must escape become their escapes. */
static gx *cps_gx(rparse *p, cpset *c)
{
    cps_normalise(c);
    if (!p->json)
        return gx_cps(p->b, c->r, c->n);
    gx_list alts = { 0 };
    cpset safe = { 0 };
    static const char *short_esc[32] = { [8] = "\\b", [9] = "\\t", [10] = "\\n", [12] = "\\f", [13] = "\\r" };
    for (int i = 0; i < c->n; i++) {
        uint32_t lo = c->r[2 * i], hi = c->r[2 * i + 1];
        for (uint32_t cp = lo; cp <= hi && cp < 0x20; cp++) {
            char e[8];
            if (short_esc[cp])
                snprintf(e, sizeof e, "%s", short_esc[cp]);
            else
                snprintf(e, sizeof e, "\\u%04x", cp);
            gxl_push(p->b, &alts, gx_litz(p->b, e));
        }
        if (lo <= '"' && hi >= '"')
            gxl_push(p->b, &alts, gx_litz(p->b, "\\\""));
        if (lo <= '\\' && hi >= '\\')
            gxl_push(p->b, &alts, gx_litz(p->b, "\\\\"));
        /* the rest, split around " and \ */
        uint32_t a = lo < 0x20 ? 0x20 : lo;
        while (a <= hi) {
            uint32_t z = hi;
            if (a <= '"' && z >= '"')
                z = a == '"' ? '"' : '"' - 1;
            if (a <= '\\' && z >= '\\')
                z = a == '\\' ? '\\' : '\\' - 1;
            if (a != '"' && a != '\\')
                cps_add(&safe, a, z);
            if (z == 0x10FFFF)
                break;
            a = z + 1;
        }
    }
    if (safe.n)
        gxl_push(p->b, &alts, gx_cps(p->b, safe.r, safe.n));
    gx *x = gx_alt(p->b, alts.n, alts.v);
    free(alts.v);
    free(safe.r);
    return x;
}

static int fail(rparse *p, int code, const char *what)
{
    if (!p->rc)
        p->rc = cv_err_set(p->err, code, "pattern '%.*s': %s at offset %zu", (int)CV_MIN(p->len, 200), p->s, what,
                           p->pos);
    return p->rc;
}

static bool eof(rparse *p) { return p->pos >= p->len; }
static char peek(rparse *p) { return p->pos < p->len ? p->s[p->pos] : 0; }

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex(rparse *p, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (eof(p) || hexval(peek(p)) < 0)
            return false;
        v = v * 16 + (uint32_t)hexval(p->s[p->pos++]);
    }
    *out = v;
    return true;
}

/* Reads one code point of the pattern (UTF-8). */
static uint32_t read_cp(rparse *p)
{
    uint32_t cp;
    int n = cv_utf8_decode(p->s + p->pos, p->len - p->pos, &cp);
    if (n < 0) {
        fail(p, CV_EINVAL, "invalid UTF-8");
        p->pos++;
        return 0xFFFD;
    }
    p->pos += (size_t)n;
    return cp;
}

/* An escape after the backslash. Returns a class in *set (then returns -1)
 * or a single code point. */
static int64_t parse_escape(rparse *p, cpset *set)
{
    if (eof(p)) {
        fail(p, CV_EINVAL, "trailing backslash");
        return 0;
    }
    char c = p->s[p->pos++];
    switch (c) {
    case 'd': add_digit(set); return -1;
    case 'D': add_digit(set); cps_negate(set); return -1;
    case 'w': add_word(set); return -1;
    case 'W': add_word(set); cps_negate(set); return -1;
    case 's': add_space(set); return -1;
    case 'S': add_space(set); cps_negate(set); return -1;
    case 't': return '\t';
    case 'n': return '\n';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': {
        uint32_t v;
        if (!read_hex(p, 2, &v))
            fail(p, CV_EINVAL, "\\x needs two hex digits");
        return v;
    }
    case 'u': {
        uint32_t v = 0;
        if (peek(p) == '{') {
            p->pos++;
            size_t start = p->pos;
            while (!eof(p) && hexval(peek(p)) >= 0 && p->pos - start < 6)
                v = v * 16 + (uint32_t)hexval(p->s[p->pos++]);
            if (peek(p) != '}' || p->pos == start || v > 0x10FFFF)
                fail(p, CV_EINVAL, "bad \\u{...} escape");
            p->pos++;
            return v;
        }
        if (!read_hex(p, 4, &v))
            fail(p, CV_EINVAL, "\\u needs four hex digits");
        return v;
    }
    case 'b': case 'B':
        fail(p, CV_EUNSUPPORTED, "word boundaries (\\b, \\B) are not supported");
        return 0;
    case 'p': case 'P':
        fail(p, CV_EUNSUPPORTED, "Unicode property classes (\\p{..}) are not supported");
        return 0;
    case 'k':
        fail(p, CV_EUNSUPPORTED, "named backreferences (\\k<..>) are not supported");
        return 0;
    case 'c':
        fail(p, CV_EUNSUPPORTED, "control escapes (\\cX) are not supported");
        return 0;
    default:
        if (c >= '1' && c <= '9') {
            fail(p, CV_EUNSUPPORTED, "backreferences (\\1..\\9) are not supported");
            return 0;
        }
        if ((unsigned char)c >= 0x80) {
            p->pos--;
            return read_cp(p);
        }
        return (unsigned char)c; /* escaped punctuation */
    }
}

static gx *parse_alt(rparse *p, bool top);

static gx *parse_class(rparse *p)
{
    /* after '[' */
    cpset set = { 0 };
    bool neg = false;
    if (peek(p) == '^') {
        neg = true;
        p->pos++;
    }
    /* each branch consumes input or records an error, which ends the loop */
    while (!eof(p) && peek(p) != ']' && !p->rc) {
        int64_t lo;
        cpset sub = { 0 };
        if (peek(p) == '\\') {
            p->pos++;
            lo = parse_escape(p, &sub);
        } else if (peek(p) == '[' && p->pos + 1 < p->len && p->s[p->pos + 1] == ':') {
            fail(p, CV_EUNSUPPORTED, "POSIX classes ([:alpha:]) are not supported");
            lo = 0;
        } else {
            lo = read_cp(p);
        }
        if (lo < 0) {
            for (int i = 0; i < sub.n; i++)
                cps_add(&set, sub.r[2 * i], sub.r[2 * i + 1]);
            free(sub.r);
            continue;
        }
        free(sub.r);
        if (peek(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] != ']') {
            p->pos++;
            int64_t hi;
            cpset sub2 = { 0 };
            if (peek(p) == '\\') {
                p->pos++;
                hi = parse_escape(p, &sub2);
            } else {
                hi = read_cp(p);
            }
            free(sub2.r);
            if (hi < 0 || hi < lo) {
                fail(p, CV_EINVAL, "bad range in a character class");
                break;
            }
            cps_add(&set, (uint32_t)lo, (uint32_t)hi);
        } else {
            cps_add(&set, (uint32_t)lo, (uint32_t)lo);
        }
    }
    if (eof(p)) {
        fail(p, CV_EINVAL, "unterminated character class");
        free(set.r);
        return gx_none(p->b);
    }
    p->pos++; /* ] */
    if (neg)
        cps_negate(&set);
    gx *x = cps_gx(p, &set);
    free(set.r);
    return x;
}

static bool parse_int(rparse *p, int *out)
{
    if (eof(p) || peek(p) < '0' || peek(p) > '9')
        return false;
    long v = 0;
    while (!eof(p) && peek(p) >= '0' && peek(p) <= '9') {
        v = v * 10 + (p->s[p->pos++] - '0');
        if (v > 100000000)
            v = 100000000;
    }
    *out = (int)v;
    return true;
}

static gx *parse_atom(rparse *p)
{
    char c = peek(p);
    if (c == '(') {
        p->pos++;
        if (peek(p) == '?') {
            p->pos++;
            char k = peek(p);
            if (k == ':') {
                p->pos++;
            } else if (k == '=' || k == '!') {
                fail(p, CV_EUNSUPPORTED, "lookahead ((?=, (?!) is not supported");
                return gx_none(p->b);
            } else if (k == '<' && p->pos + 1 < p->len && (p->s[p->pos + 1] == '=' || p->s[p->pos + 1] == '!')) {
                fail(p, CV_EUNSUPPORTED, "lookbehind ((?<=, (?<!) is not supported");
                return gx_none(p->b);
            } else if (k == '<' || k == 'P') {
                if (k == 'P')
                    p->pos++;
                while (!eof(p) && peek(p) != '>')
                    p->pos++;
                if (eof(p)) {
                    fail(p, CV_EINVAL, "unterminated group name");
                    return gx_none(p->b);
                }
                p->pos++;
            } else {
                fail(p, CV_EUNSUPPORTED, "group flags ((?i) and similar) are not supported");
                return gx_none(p->b);
            }
        }
        if (++p->depth > 64) {
            fail(p, CV_ELIMIT, "groups nested more than 64 deep");
            return gx_none(p->b);
        }
        gx *x = parse_alt(p, false);
        p->depth--;
        if (peek(p) != ')') {
            fail(p, CV_EINVAL, "missing ')'");
            return gx_none(p->b);
        }
        p->pos++;
        return x;
    }
    if (c == '[') {
        p->pos++;
        return parse_class(p);
    }
    if (c == '.') {
        p->pos++;
        cpset set = { 0 };
        cps_add(&set, '\n', '\n');
        cps_add(&set, '\r', '\r');
        cps_add(&set, 0x2028, 0x2029);
        cps_negate(&set);
        gx *x = cps_gx(p, &set);
        free(set.r);
        return x;
    }
    if (c == '\\') {
        p->pos++;
        cpset set = { 0 };
        int64_t cp = parse_escape(p, &set);
        if (cp >= 0)
            cps_add(&set, (uint32_t)cp, (uint32_t)cp);
        gx *x = cps_gx(p, &set);
        free(set.r);
        return x;
    }
    if (c == '^' || c == '$') {
        fail(p, CV_EUNSUPPORTED, "anchors (^, $) are only supported at the start and end of the pattern");
        p->pos++;
        return gx_none(p->b);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (c == '{') {
            /* a '{' that does not start a quantifier is a literal in ECMA-262 without u; with u it is an error */
            fail(p, CV_EINVAL, "quantifier '{' without anything to repeat");
        } else {
            fail(p, CV_EINVAL, "quantifier without anything to repeat");
        }
        p->pos++;
        return gx_none(p->b);
    }
    uint32_t cp = read_cp(p);
    cpset set = { 0 };
    cps_add(&set, cp, cp);
    gx *x = cps_gx(p, &set);
    free(set.r);
    return x;
}

static gx *parse_seq(rparse *p, bool top, bool *anch_start, bool *anch_end)
{
    gx_list items = { 0 };
    *anch_start = *anch_end = false;
    if (top && peek(p) == '^') {
        p->pos++;
        *anch_start = true;
    }
    while (!eof(p) && peek(p) != '|' && peek(p) != ')' && !p->rc) {
        if (top && peek(p) == '$' && (p->pos + 1 == p->len || p->s[p->pos + 1] == '|')) {
            p->pos++;
            *anch_end = true;
            break;
        }
        gx *atom = parse_atom(p);
        for (;;) {
            char q = peek(p);
            int min, max;
            if (q == '*') { min = 0; max = -1; p->pos++; }
            else if (q == '+') { min = 1; max = -1; p->pos++; }
            else if (q == '?') { min = 0; max = 1; p->pos++; }
            else if (q == '{') {
                size_t save = p->pos;
                p->pos++;
                if (!parse_int(p, &min)) {
                    p->pos = save;
                    fail(p, CV_EINVAL, "'{' is not a valid quantifier");
                    break;
                }
                max = min;
                if (peek(p) == ',') {
                    p->pos++;
                    if (!parse_int(p, &max))
                        max = -1;
                }
                if (peek(p) != '}') {
                    fail(p, CV_EINVAL, "unterminated {n,m} quantifier");
                    break;
                }
                p->pos++;
                if (max >= 0 && max < min) {
                    fail(p, CV_EINVAL, "quantifier {n,m} with m < n");
                    break;
                }
                if (min > CV_MAX_GRAMMAR_REPEAT || max > CV_MAX_GRAMMAR_REPEAT) {
                    fail(p, CV_ELIMIT, "repetition bound above CV_MAX_GRAMMAR_REPEAT (2000)");
                    break;
                }
            } else {
                break;
            }
            if (peek(p) == '?' || peek(p) == '+')
                p->pos++; /* lazy / possessive: same language */
            atom = gx_rep(p->b, atom, min, max);
        }
        gxl_push(p->b, &items, atom);
    }
    gx *x = gx_seq(p->b, items.n, items.v);
    free(items.v);
    return x;
}

static gx *any_star(rparse *p)
{
    cpset all = { 0 };
    cps_add(&all, 0, 0x10FFFF);
    gx *x = gx_rep(p->b, cps_gx(p, &all), 0, -1);
    free(all.r);
    return x;
}

static gx *parse_alt(rparse *p, bool top)
{
    gx_list alts = { 0 };
    for (;;) {
        bool as, ae;
        gx *x = parse_seq(p, top, &as, &ae);
        if (top) {
            /* validators search: unanchored ends match anything */
            gx *parts[3] = { as ? gx_empty(p->b) : any_star(p), x, ae ? gx_empty(p->b) : any_star(p) };
            x = gx_seq(p->b, 3, parts);
        }
        gxl_push(p->b, &alts, x);
        if (peek(p) != '|' || p->rc)
            break;
        p->pos++;
    }
    gx *x = gx_alt(p->b, alts.n, alts.v);
    free(alts.v);
    return x;
}

int gx_regex(gbuild *b, const char *re, size_t len, bool json_escape, bool anchored, gx **out, cv_err *err)
{
    *out = NULL;
    if (len > CV_MAX_GRAMMAR_PATTERN)
        return cv_err_set(err, CV_ELIMIT, "pattern of %zu bytes, limit CV_MAX_GRAMMAR_PATTERN = %d", len,
                          CV_MAX_GRAMMAR_PATTERN);
    rparse p = { .b = b, .s = re, .len = len, .json = json_escape, .err = err };
    gx *x;
    if (anchored) {
        /* a whole-string regex: top-level ^/$ are still accepted */
        gx_list alts = { 0 };
        for (;;) {
            bool as, ae;
            gxl_push(b, &alts, parse_seq(&p, true, &as, &ae));
            if (peek(&p) != '|' || p.rc)
                break;
            p.pos++;
        }
        x = gx_alt(b, alts.n, alts.v);
        free(alts.v);
    } else {
        x = parse_alt(&p, true);
    }
    if (!p.rc && !eof(&p))
        fail(&p, CV_EINVAL, "unbalanced ')'");
    if (p.rc)
        return p.rc;
    *out = x;
    return 0;
}
