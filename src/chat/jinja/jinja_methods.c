/* jinja_methods.c — what templates call with a dot: Python's str methods
 * (strip, split, startswith, replace, format, ...), the read-only dict and
 * list methods (get, items, keys, values, count, index, copy), and the
 * globals Hugging Face and Jinja2 provide (range with the sandbox's
 * MAX_RANGE, namespace, dict, raise_exception, strftime_now). The methods
 * that mutate a list or dict give an "unsafe" Undefined, as the immutable
 * sandbox does. Also the string primitives the filters share: Unicode
 * case mapping through utf8proc, Python's whitespace set, and the
 * %-formatting and str.format mini-languages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <utf8proc.h>

#include "chat/jinja/jinja_int.h"

/* ---- argument helpers ---- */

jv jarg(jcallargs *a, int pos, const char *kw, jv dflt)
{
    if (pos >= 0 && pos < a->n_pos)
        return a->pos[pos];
    for (int i = 0; kw && i < a->n_kw; i++)
        if (!strcmp(a->kwn[i], kw))
            return a->kwv[i];
    return dflt;
}

bool jarg_has(jcallargs *a, int pos, const char *kw)
{
    if (pos >= 0 && pos < a->n_pos)
        return true;
    for (int i = 0; kw && i < a->n_kw; i++)
        if (!strcmp(a->kwn[i], kw))
            return true;
    return false;
}

void jargs_max(jrender *R, jcallargs *a, int max_pos, const char *what)
{
    if (a->n_pos > max_pos)
        jfail(R, CV_EINVAL, "%s takes at most %d positional argument(s), %d given", what, max_pos, a->n_pos);
}

static jv need_str(jrender *R, jv v, const char *what)
{
    if (v.t == JV_STR)
        return v;
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    jfail(R, CV_EINVAL, "%s must be a string, not '%s'", what, jv_type_name(v));
}

static int64_t need_int(jrender *R, jv v, const char *what)
{
    if (v.t == JV_INT || v.t == JV_BOOL)
        return v.i;
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    jfail(R, CV_EINVAL, "%s must be an integer, not '%s'", what, jv_type_name(v));
}

/* ---- code points ---- */

bool py_isspace(uint32_t cp)
{
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E: case 0x1F:
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

static uint32_t cp_at(const char *s, size_t n, size_t i, int *len)
{
    uint32_t cp;
    int k = cv_utf8_decode(s + i, n - i, &cp);
    if (k < 0) {
        *len = 1;
        return (unsigned char)s[i];
    }
    *len = k;
    return cp;
}

/* Start of the code point that ends at byte i (exclusive). */
static size_t cp_back(const char *s, size_t i)
{
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
        j--;
    return j;
}

static void put_cp(cv_buf *b, uint32_t cp)
{
    char u[4];
    int k = cv_utf8_encode(cp, u);
    if (k)
        cv_buf_append(b, u, (size_t)k);
}

static bool is_cased(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

static jv done_buf(jrender *R, cv_buf *b)
{
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

/* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 swapcase */
static jv map_case(jrender *R, jv s, int mode)
{
    cv_buf *b = jbuf_get(R);
    bool prev_cased = false;
    size_t i = 0;
    int idx = 0;
    while (i < s.n) {
        int k;
        uint32_t cp = cp_at(s.s, s.n, i, &k);
        uint32_t o = cp;
        switch (mode) {
        case 0: o = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp); break;
        case 1: o = (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp); break;
        case 2: o = idx == 0 ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp); break;
        case 3:
            o = prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
            prev_cased = is_cased(cp);
            break;
        case 4: {
            utf8proc_int32_t lo = utf8proc_tolower((utf8proc_int32_t)cp);
            o = lo != (utf8proc_int32_t)cp ? (uint32_t)lo : (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
            break;
        }
        }
        if (cp < 0x80 && o < 0x80)
            cv_buf_putc(b, (char)o);
        else if (o == cp)
            cv_buf_append(b, s.s + i, (size_t)k);
        else
            put_cp(b, o);
        i += (size_t)k;
        idx++;
    }
    return done_buf(R, b);
}

jv jstr_lower(jrender *R, jv s) { return map_case(R, s, 0); }
jv jstr_upper(jrender *R, jv s) { return map_case(R, s, 1); }
jv jstr_capitalize(jrender *R, jv s) { return map_case(R, s, 2); }

static bool in_chars(jv chars, uint32_t cp)
{
    size_t i = 0;
    while (i < chars.n) {
        int k;
        if (cp_at(chars.s, chars.n, i, &k) == cp)
            return true;
        i += (size_t)k;
    }
    return false;
}

jv jstr_strip(jrender *R, jv s, jv chars, int which)
{
    bool ws = chars.t == JV_NONE || chars.t == JV_UNDEF;
    if (!ws)
        need_str(R, chars, "strip chars");
    size_t a = 0, b = s.n;
    if (which & 1)
        while (a < b) {
            int k;
            uint32_t cp = cp_at(s.s, s.n, a, &k);
            if (ws ? !py_isspace(cp) : !in_chars(chars, cp))
                break;
            a += (size_t)k;
        }
    if (which & 2)
        while (b > a) {
            size_t j = cp_back(s.s, b);
            int k;
            uint32_t cp = cp_at(s.s, s.n, j, &k);
            if (ws ? !py_isspace(cp) : !in_chars(chars, cp))
                break;
            b = j;
        }
    jv r = jv_strn(s.s + a, b - a);
    return r;
}

jv jstr_replace(jrender *R, jv s, jv old, jv neu, int64_t count)
{
    cv_buf *b = jbuf_get(R);
    int64_t done = 0;
    if (old.n == 0) {
        /* Python inserts `new` before every character and at the end */
        size_t i = 0;
        while (true) {
            if (count < 0 || done < count) {
                cv_buf_append(b, neu.s, neu.n);
                done++;
            }
            if (i >= s.n)
                break;
            int k;
            cp_at(s.s, s.n, i, &k);
            cv_buf_append(b, s.s + i, (size_t)k);
            i += (size_t)k;
            if (b->len > R->lim.max_output)
                jfail(R, CV_ELIMIT, "replace() result exceeds %zu bytes", R->lim.max_output);
        }
        return done_buf(R, b);
    }
    size_t i = 0;
    while (i < s.n) {
        const char *hit = (count < 0 || done < count) ? memmem(s.s + i, s.n - i, old.s, old.n) : NULL;
        if (!hit) {
            cv_buf_append(b, s.s + i, s.n - i);
            break;
        }
        size_t h = (size_t)(hit - s.s);
        cv_buf_append(b, s.s + i, h - i);
        cv_buf_append(b, neu.s, neu.n);
        if (b->len > R->lim.max_output)
            jfail(R, CV_ELIMIT, "replace() result exceeds %zu bytes", R->lim.max_output);
        i = h + old.n;
        done++;
    }
    return done_buf(R, b);
}

jv jstr_split(jrender *R, jv s, jv sep, int64_t maxsplit, bool right)
{
    jlist *l = jlist_new(R, 8);
    jv *parts = NULL;
    int64_t np = 0, cap = 0;
#define ADD(p_, n_)                                                          \
    do {                                                                     \
        if (np == cap) {                                                     \
            cap = cap ? cap * 2 : 8;                                         \
            jv *nn = jalloc(R, (size_t)cap * sizeof(jv));                    \
            if (np) memcpy(nn, parts, (size_t)np * sizeof(jv));              \
            parts = nn;                                                      \
        }                                                                    \
        parts[np++] = jv_strn((p_), (n_));                                   \
    } while (0)
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            while (i < s.n) {
                int k;
                while (i < s.n && py_isspace(cp_at(s.s, s.n, i, &k)))
                    i += (size_t)k;
                if (i >= s.n)
                    break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    size_t e = s.n;
                    while (e > i) {
                        size_t j = cp_back(s.s, e);
                        if (!py_isspace(cp_at(s.s, s.n, j, &k)))
                            break;
                        e = j;
                    }
                    ADD(s.s + i, e - i);
                    break;
                }
                size_t st = i;
                while (i < s.n && !py_isspace(cp_at(s.s, s.n, i, &k)))
                    i += (size_t)k;
                ADD(s.s + st, i - st);
                splits++;
            }
        } else {
            size_t e = s.n;
            int64_t splits = 0;
            while (e > 0) {
                int k;
                while (e > 0 && py_isspace(cp_at(s.s, s.n, cp_back(s.s, e), &k)))
                    e = cp_back(s.s, e);
                if (e == 0)
                    break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    size_t st = 0;
                    while (st < e && py_isspace(cp_at(s.s, s.n, st, &k)))
                        st += (size_t)k;
                    ADD(s.s + st, e - st);
                    break;
                }
                size_t st = e;
                while (st > 0 && !py_isspace(cp_at(s.s, s.n, cp_back(s.s, st), &k)))
                    st = cp_back(s.s, st);
                ADD(s.s + st, e - st);
                e = st;
                splits++;
            }
            for (int64_t i = 0; i < np / 2; i++) {
                jv t = parts[i];
                parts[i] = parts[np - 1 - i];
                parts[np - 1 - i] = t;
            }
        }
    } else {
        need_str(R, sep, "separator");
        if (sep.n == 0)
            jfail(R, CV_EINVAL, "empty separator");
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || splits < maxsplit) ? memmem(s.s + i, s.n - i, sep.s, sep.n) : NULL;
                if (!hit) {
                    ADD(s.s + i, s.n - i);
                    break;
                }
                ADD(s.s + i, (size_t)(hit - s.s) - i);
                i = (size_t)(hit - s.s) + sep.n;
                splits++;
            }
        } else {
            size_t e = s.n;
            int64_t splits = 0;
            for (;;) {
                const char *hit = NULL;
                if ((maxsplit < 0 || splits < maxsplit) && e >= sep.n)
                    for (size_t j = e - sep.n + 1; j-- > 0;)
                        if (!memcmp(s.s + j, sep.s, sep.n)) {
                            hit = s.s + j;
                            break;
                        }
                if (!hit) {
                    ADD(s.s, e);
                    break;
                }
                size_t h = (size_t)(hit - s.s);
                ADD(s.s + h + sep.n, e - h - sep.n);
                e = h;
                splits++;
            }
            for (int64_t i = 0; i < np / 2; i++) {
                jv t = parts[i];
                parts[i] = parts[np - 1 - i];
                parts[np - 1 - i] = t;
            }
        }
    }
#undef ADD
    for (int64_t i = 0; i < np; i++)
        jlist_push(R, l, parts[i]);
    return jv_list(l);
}

jv jstr_escape(jrender *R, jv s)
{
    if (s.t == JV_STR && (s.flags & JF_SAFE))
        return s;
    if (s.t != JV_STR)
        s = jv_to_str(R, s);
    cv_buf *b = jbuf_get(R);
    for (size_t i = 0; i < s.n; i++) {
        switch (s.s[i]) {
        case '&': cv_buf_puts(b, "&amp;"); break;
        case '<': cv_buf_puts(b, "&lt;"); break;
        case '>': cv_buf_puts(b, "&gt;"); break;
        case '"': cv_buf_puts(b, "&#34;"); break;
        case '\'': cv_buf_puts(b, "&#39;"); break;
        default: cv_buf_putc(b, s.s[i]);
        }
    }
    jv r = done_buf(R, b);
    r.flags = JF_SAFE;
    return r;
}

/* str + str; Markup on either side escapes the other (markupsafe). */
jv jstr_concat(jrender *R, jv a, jv b)
{
    bool safe = (a.flags & JF_SAFE) || (b.flags & JF_SAFE);
    if (safe) {
        a = jstr_escape(R, a);
        b = jstr_escape(R, b);
    }
    if (a.n + (size_t)b.n > R->lim.max_output)
        jfail(R, CV_ELIMIT, "string concatenation exceeds %zu bytes", R->lim.max_output);
    if (!b.n && !safe)
        return a;
    if (!a.n && !safe)
        return b;
    char *p = jalloc(R, (size_t)a.n + b.n + 1);
    memcpy(p, a.s, a.n);
    memcpy(p + a.n, b.s, b.n);
    p[a.n + b.n] = 0;
    jv r = jv_strn(p, (size_t)a.n + b.n);
    if (safe)
        r.flags = JF_SAFE;
    return r;
}

/* ---- %-formatting ---- */

static void pad_out(cv_buf *b, const char *s, size_t n, int width, bool left, char fill)
{
    int len = (int)utf8_count(s, n);
    if (!left)
        for (int i = len; i < width; i++)
            cv_buf_putc(b, fill);
    cv_buf_append(b, s, n);
    if (left)
        for (int i = len; i < width; i++)
            cv_buf_putc(b, ' ');
}

jv jstr_percent(jrender *R, jv fmt, jv args)
{
    jv *av = NULL;
    int64_t an = 0, ai = 0;
    bool mapping = jv_is_dict(args);
    if (args.t == JV_LIST && (args.flags & JF_TUPLE)) {
        av = args.l->v;
        an = args.l->n;
    } else {
        av = jalloc(R, sizeof(jv));
        av[0] = args;
        an = 1;
    }
    cv_buf *b = jbuf_get(R);
    for (size_t i = 0; i < fmt.n; i++) {
        char c = fmt.s[i];
        if (c != '%') {
            cv_buf_putc(b, c);
            continue;
        }
        if (++i >= fmt.n)
            jfail(R, CV_EINVAL, "incomplete format");
        jv v;
        bool have_v = false;
        if (fmt.s[i] == '(') {
            size_t e = i + 1;
            while (e < fmt.n && fmt.s[e] != ')')
                e++;
            if (e >= fmt.n || !mapping)
                jfail(R, CV_EINVAL, "format requires a mapping");
            bool found;
            v = jv_dict_get(R, args, jv_strn(fmt.s + i + 1, e - i - 1), &found);
            if (!found)
                jfail(R, CV_EINVAL, "format key '%.*s' not found", (int)(e - i - 1), fmt.s + i + 1);
            have_v = true;
            i = e + 1;
        }
        bool left = false, zero = false, plus = false, space = false;
        for (; i < fmt.n && strchr("-0+ #", fmt.s[i]); i++) {
            if (fmt.s[i] == '-') left = true;
            else if (fmt.s[i] == '0') zero = true;
            else if (fmt.s[i] == '+') plus = true;
            else if (fmt.s[i] == ' ') space = true;
        }
        int width = 0, prec = -1;
        while (i < fmt.n && fmt.s[i] >= '0' && fmt.s[i] <= '9')
            width = width * 10 + (fmt.s[i++] - '0');
        if (i < fmt.n && fmt.s[i] == '.') {
            prec = 0;
            i++;
            while (i < fmt.n && fmt.s[i] >= '0' && fmt.s[i] <= '9')
                prec = prec * 10 + (fmt.s[i++] - '0');
        }
        if (i >= fmt.n)
            jfail(R, CV_EINVAL, "incomplete format");
        char conv = fmt.s[i];
        if (conv == '%') {
            cv_buf_putc(b, '%');
            continue;
        }
        if (!have_v) {
            if (mapping && an == 1)
                v = args;
            else if (ai >= an)
                jfail(R, CV_EINVAL, "not enough arguments for format string");
            else
                v = av[ai++];
        }
        char tmp[128];
        cv_buf *t = jbuf_get(R);
        switch (conv) {
        case 's': jv_str_append(R, t, v); if (prec >= 0 && (size_t)prec < utf8_count(t->data ? t->data : "", t->len)) t->len = utf8_offset(t->data, t->len, prec); break;
        case 'r': case 'a': jv_repr_append(R, t, v, 0); break;
        case 'd': case 'i': case 'u': {
            if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT)
                jfail(R, CV_EINVAL, "%%d format: a real number is required, not %s", jv_type_name(v));
            long long x = v.t == JV_FLOAT ? (long long)trunc(v.f) : (long long)v.i;
            snprintf(tmp, sizeof tmp, plus ? "%+lld" : space ? "% lld" : "%lld", x);
            cv_buf_puts(t, tmp);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT)
                jfail(R, CV_EINVAL, "must be real number, not %s", jv_type_name(v));
            double x = v.t == JV_FLOAT ? v.f : (double)v.i;
            char f[16];
            snprintf(f, sizeof f, "%%%s.%d%c", plus ? "+" : space ? " " : "", prec < 0 ? 6 : prec, conv);
            snprintf(tmp, sizeof tmp, f, x);
            cv_buf_puts(t, tmp);
            break;
        }
        case 'x': case 'X': case 'o': {
            if (v.t != JV_INT && v.t != JV_BOOL)
                jfail(R, CV_EINVAL, "%%%c format: an integer is required, not %s", conv, jv_type_name(v));
            snprintf(tmp, sizeof tmp, conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : "%llo", (unsigned long long)v.i);
            cv_buf_puts(t, tmp);
            break;
        }
        case 'c':
            if (v.t == JV_INT)
                put_cp(t, (uint32_t)v.i);
            else
                jv_str_append(R, t, v);
            break;
        default:
            jfail(R, CV_EINVAL, "unsupported format character '%c'", conv);
        }
        bool numeric_conv = strchr("diufFeEgGxXo", conv) != NULL;
        pad_out(b, t->data ? t->data : "", t->len, width, left, zero && numeric_conv && !left ? '0' : ' ');
        jbuf_put(R, t);
    }
    if (!mapping && ai < an && !(an == 1 && !(args.t == JV_LIST && (args.flags & JF_TUPLE)) && ai == 0))
        jfail(R, CV_EINVAL, "not all arguments converted during string formatting");
    return done_buf(R, b);
}

/* ---- str.format ---- */

static void format_spec(jrender *R, cv_buf *b, jv v, const char *spec, size_t n)
{
    char fill = ' ', align = 0, sign = 0, type = 0;
    int width = 0, prec = -1;
    size_t i = 0;
    if (n >= 2 && strchr("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < n && strchr("+- ", spec[i]))
        sign = spec[i++];
    if (i < n && spec[i] == '0') {
        if (!align) {
            fill = '0';
            align = '=';
        }
        i++;
    }
    while (i < n && spec[i] >= '0' && spec[i] <= '9')
        width = width * 10 + (spec[i++] - '0');
    if (i < n && spec[i] == ',')
        i++;
    if (i < n && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < n && spec[i] >= '0' && spec[i] <= '9')
            prec = prec * 10 + (spec[i++] - '0');
    }
    if (i < n)
        type = spec[i++];
    if (i != n)
        jfail(R, CV_EINVAL, "invalid format specifier");
    cv_buf *t = jbuf_get(R);
    char tmp[128];
    bool is_number = v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    if (type == 'd' || ((type == 0) && (v.t == JV_INT))) {
        if (v.t != JV_INT && v.t != JV_BOOL)
            jfail(R, CV_EINVAL, "unknown format code 'd' for object of type '%s'", jv_type_name(v));
        snprintf(tmp, sizeof tmp, sign == '+' ? "%+lld" : sign == ' ' ? "% lld" : "%lld", (long long)v.i);
        cv_buf_puts(t, tmp);
    } else if (type && strchr("fFeEgG%", type)) {
        if (!is_number)
            jfail(R, CV_EINVAL, "unknown format code '%c' for object of type '%s'", type, jv_type_name(v));
        double x = v.t == JV_FLOAT ? v.f : (double)v.i;
        char f[16];
        if (type == '%')
            x *= 100;
        snprintf(f, sizeof f, "%%%s.%d%c", sign == '+' ? "+" : sign == ' ' ? " " : "", prec < 0 ? 6 : prec, type == '%' ? 'f' : type);
        snprintf(tmp, sizeof tmp, f, x);
        cv_buf_puts(t, tmp);
        if (type == '%')
            cv_buf_putc(t, '%');
    } else if (type == 0 && v.t == JV_FLOAT && prec >= 0) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v.f);
        cv_buf_puts(t, tmp);
    } else {
        if (type && type != 's')
            jfail(R, CV_EINVAL, "unknown format code '%c' for object of type '%s'", type, jv_type_name(v));
        if (n && !is_number && v.t != JV_STR)
            jfail(R, CV_EINVAL, "unsupported format string passed to %s.__format__", jv_type_name(v));
        jv_str_append(R, t, v);
        if (prec >= 0 && v.t == JV_STR && (size_t)prec < utf8_count(t->data ? t->data : "", t->len))
            t->len = utf8_offset(t->data, t->len, prec);
    }
    if (!align)
        align = is_number ? '>' : '<';
    int len = (int)utf8_count(t->data ? t->data : "", t->len);
    int padn = width > len ? width - len : 0;
    int lpad = align == '>' || align == '=' ? padn : align == '^' ? padn / 2 : 0;
    int rpad = padn - lpad;
    const char *body = t->data ? t->data : "";
    size_t bl = t->len;
    if (align == '=' && bl && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
        cv_buf_putc(b, body[0]);
        body++;
        bl--;
    }
    for (int k = 0; k < lpad; k++)
        cv_buf_putc(b, fill);
    cv_buf_append(b, body, bl);
    for (int k = 0; k < rpad; k++)
        cv_buf_putc(b, fill);
    jbuf_put(R, t);
}

static jv m_format(jrender *R, jv self, jcallargs *a)
{
    cv_buf *b = jbuf_get(R);
    int auto_idx = 0;
    const char *s = self.s;
    size_t n = self.n;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                cv_buf_putc(b, '}');
                i++;
                continue;
            }
            jfail(R, CV_EINVAL, "single '}' encountered in format string");
        }
        if (c != '{') {
            cv_buf_putc(b, c);
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            cv_buf_putc(b, '{');
            i++;
            continue;
        }
        size_t e = i + 1;
        int nest = 0;
        while (e < n && (s[e] != '}' || nest)) {
            if (s[e] == '{') nest++;
            if (s[e] == '}') nest--;
            e++;
        }
        if (e >= n)
            jfail(R, CV_EINVAL, "expected '}' before end of string");
        const char *f = s + i + 1;
        size_t fl = e - i - 1;
        size_t name_end = 0;
        while (name_end < fl && f[name_end] != '.' && f[name_end] != '[' && f[name_end] != '!' && f[name_end] != ':')
            name_end++;
        jv v;
        if (name_end == 0) {
            if (auto_idx >= a->n_pos)
                jfail(R, CV_EINVAL, "Replacement index %d out of range for positional args tuple", auto_idx);
            v = a->pos[auto_idx++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            int idx = atoi(f);
            if (idx >= a->n_pos)
                jfail(R, CV_EINVAL, "Replacement index %d out of range for positional args tuple", idx);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (int k = 0; k < a->n_kw; k++)
                if (strlen(a->kwn[k]) == name_end && !memcmp(a->kwn[k], f, name_end)) {
                    v = a->kwv[k];
                    found = true;
                }
            if (!found)
                jfail(R, CV_EINVAL, "format key '%.*s' not found", (int)name_end, f);
        }
        size_t p = name_end;
        while (p < fl && (f[p] == '.' || f[p] == '[')) {
            if (f[p] == '.') {
                size_t q = p + 1;
                while (q < fl && f[q] != '.' && f[q] != '[' && f[q] != '!' && f[q] != ':')
                    q++;
                char *nm = jalloc(R, q - p);
                memcpy(nm, f + p + 1, q - p - 1);
                if (nm[0] == '_')
                    jfail(R, CV_EINVAL, "access to attribute '%s' is unsafe in the sandbox", nm);
                v = jgetattr(R, v, nm, (uint32_t)(q - p - 1));
                p = q;
            } else {
                size_t q = p + 1;
                while (q < fl && f[q] != ']')
                    q++;
                jv key = jv_str_copy(R, f + p + 1, q - p - 1);
                bool digits = key.n > 0;
                for (size_t k = 0; k < key.n; k++)
                    digits &= key.s[k] >= '0' && key.s[k] <= '9';
                v = jgetitem(R, v, digits ? jv_int(atoll(key.s)) : key);
                p = q + 1;
            }
        }
        char conv = 0;
        if (p < fl && f[p] == '!') {
            conv = p + 1 < fl ? f[p + 1] : 0;
            p += 2;
        }
        if (conv == 'r' || conv == 'a') {
            cv_buf *t = jbuf_get(R);
            jv_repr_append(R, t, v, 0);
            v = jv_str_copy(R, t->data ? t->data : "", t->len);
            jbuf_put(R, t);
        } else if (conv == 's') {
            v = jv_to_str(R, v);
        }
        if (p < fl && f[p] == ':')
            format_spec(R, b, v, f + p + 1, fl - p - 1);
        else
            jv_str_append(R, b, v);
        i = e;
    }
    return done_buf(R, b);
}

/* ---- str methods ---- */

static jv m_strip(jrender *R, jv s, jcallargs *a) { return jstr_strip(R, s, jarg(a, 0, "chars", jv_none()), 3); }
static jv m_lstrip(jrender *R, jv s, jcallargs *a) { return jstr_strip(R, s, jarg(a, 0, "chars", jv_none()), 1); }
static jv m_rstrip(jrender *R, jv s, jcallargs *a) { return jstr_strip(R, s, jarg(a, 0, "chars", jv_none()), 2); }
static jv m_lower(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 0); }
static jv m_upper(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 1); }
static jv m_capitalize(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 2); }
static jv m_title(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 3); }
static jv m_swapcase(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 4); }
static jv m_casefold(jrender *R, jv s, jcallargs *a) { return map_case(R, s, 0); }

static jv m_split(jrender *R, jv s, jcallargs *a)
{
    return jstr_split(R, s, jarg(a, 0, "sep", jv_none()), need_int(R, jarg(a, 1, "maxsplit", jv_int(-1)), "maxsplit"), false);
}

static jv m_rsplit(jrender *R, jv s, jcallargs *a)
{
    return jstr_split(R, s, jarg(a, 0, "sep", jv_none()), need_int(R, jarg(a, 1, "maxsplit", jv_int(-1)), "maxsplit"), true);
}

static jv m_splitlines(jrender *R, jv s, jcallargs *a)
{
    bool keep = jv_truthy(R, jarg(a, 0, "keepends", jv_bool(false)));
    jlist *l = jlist_new(R, 8);
    size_t i = 0, st = 0;
    while (i < s.n) {
        int k;
        uint32_t cp = cp_at(s.s, s.n, i, &k);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!br) {
            i += (size_t)k;
            continue;
        }
        size_t end = i;
        i += (size_t)k;
        if (cp == '\r' && i < s.n && s.s[i] == '\n')
            i++;
        jlist_push(R, l, jv_strn(s.s + st, (keep ? i : end) - st));
        st = i;
    }
    if (st < s.n)
        jlist_push(R, l, jv_strn(s.s + st, s.n - st));
    return jv_list(l);
}

/* Python's start/end arguments in code points, as byte offsets. */
static void sub_range(jrender *R, jv s, jcallargs *a, int pos, size_t *from, size_t *to)
{
    int64_t n = (int64_t)utf8_count(s.s, s.n);
    jv st = jarg(a, pos, NULL, jv_none()), en = jarg(a, pos + 1, NULL, jv_none());
    int64_t lo = 0, hi = n;
    if (st.t != JV_NONE) {
        lo = need_int(R, st, "start");
        if (lo < 0) lo = CV_MAX(0, lo + n);
    }
    if (en.t != JV_NONE) {
        hi = need_int(R, en, "end");
        if (hi < 0) hi = CV_MAX(0, hi + n);
    }
    if (hi > n) hi = n;
    if (lo > n) lo = n + 1;
    *from = lo > n ? s.n + 1 : utf8_offset(s.s, s.n, lo);
    *to = hi < lo ? *from : utf8_offset(s.s, s.n, hi);
}

static jv starts_ends(jrender *R, jv s, jcallargs *a, bool ends)
{
    jv p = jarg(a, 0, NULL, jv_undef("prefix"));
    size_t from, to;
    sub_range(R, s, a, 1, &from, &to);
    if (from > s.n)
        return jv_bool(false);
    jv *cands = &p;
    int64_t nc = 1;
    if (p.t == JV_LIST && (p.flags & JF_TUPLE))
        jv_iter(R, p, &cands, &nc);
    else if (p.t != JV_STR) {
        if (p.t == JV_UNDEF)
            jfail_undef(R, p);
        jfail(R, CV_EINVAL, "%s first arg must be str or a tuple of str, not %s", ends ? "endswith" : "startswith", jv_type_name(p));
    }
    for (int64_t i = 0; i < nc; i++) {
        jv c = need_str(R, cands[i], "prefix");
        if (c.n > to - from)
            continue;
        if (!memcmp(ends ? s.s + to - c.n : s.s + from, c.s, c.n))
            return jv_bool(true);
    }
    return jv_bool(false);
}

static jv m_startswith(jrender *R, jv s, jcallargs *a) { return starts_ends(R, s, a, false); }
static jv m_endswith(jrender *R, jv s, jcallargs *a) { return starts_ends(R, s, a, true); }

static jv m_replace(jrender *R, jv s, jcallargs *a)
{
    jv old = need_str(R, jarg(a, 0, "old", jv_undef("'old'")), "replace() argument 1");
    jv neu = need_str(R, jarg(a, 1, "new", jv_undef("'new'")), "replace() argument 2");
    return jstr_replace(R, s, old, neu, need_int(R, jarg(a, 2, "count", jv_int(-1)), "count"));
}

static int64_t find_impl(jrender *R, jv s, jcallargs *a, bool rev)
{
    jv sub = need_str(R, jarg(a, 0, NULL, jv_undef("sub")), "substring");
    size_t from, to;
    sub_range(R, s, a, 1, &from, &to);
    if (from > s.n || to - from < sub.n)
        return -1;
    const char *hit = NULL;
    if (!rev) {
        hit = sub.n ? memmem(s.s + from, to - from, sub.s, sub.n) : s.s + from;
    } else {
        for (size_t j = to - sub.n + 1; j-- > from;)
            if (!memcmp(s.s + j, sub.s, sub.n)) {
                hit = s.s + j;
                break;
            }
    }
    return hit ? (int64_t)utf8_count(s.s, (size_t)(hit - s.s)) : -1;
}

static jv m_find(jrender *R, jv s, jcallargs *a) { return jv_int(find_impl(R, s, a, false)); }
static jv m_rfind(jrender *R, jv s, jcallargs *a) { return jv_int(find_impl(R, s, a, true)); }

static jv m_index(jrender *R, jv s, jcallargs *a)
{
    int64_t r = find_impl(R, s, a, false);
    if (r < 0)
        jfail(R, CV_EINVAL, "substring not found");
    return jv_int(r);
}

static jv m_rindex(jrender *R, jv s, jcallargs *a)
{
    int64_t r = find_impl(R, s, a, true);
    if (r < 0)
        jfail(R, CV_EINVAL, "substring not found");
    return jv_int(r);
}

static jv m_count(jrender *R, jv s, jcallargs *a)
{
    jv sub = need_str(R, jarg(a, 0, NULL, jv_undef("sub")), "substring");
    size_t from, to;
    sub_range(R, s, a, 1, &from, &to);
    if (from > s.n)
        return jv_int(0);
    if (!sub.n)
        return jv_int((int64_t)utf8_count(s.s + from, to - from) + 1);
    int64_t k = 0;
    size_t i = from;
    const char *h;
    while (i < to && (h = memmem(s.s + i, to - i, sub.s, sub.n))) {
        k++;
        i = (size_t)(h - s.s) + sub.n;
    }
    return jv_int(k);
}

static jv m_join(jrender *R, jv s, jcallargs *a)
{
    jv *items;
    int64_t n;
    jv_iter(R, jarg(a, 0, NULL, jv_undef("iterable")), &items, &n);
    cv_buf *b = jbuf_get(R);
    for (int64_t i = 0; i < n; i++) {
        if (i)
            cv_buf_append(b, s.s, s.n);
        jv it = items[i];
        if (it.t != JV_STR)
            jfail(R, CV_EINVAL, "sequence item %lld: expected str instance, %s found", (long long)i, jv_type_name(it));
        cv_buf_append(b, it.s, it.n);
        if (b->len > R->lim.max_output)
            jfail(R, CV_ELIMIT, "join() result exceeds %zu bytes", R->lim.max_output);
    }
    return done_buf(R, b);
}

static jv is_class(jrender *R, jv s, int cls)
{
    if (!s.n)
        return jv_bool(false);
    bool any_cased = false;
    size_t i = 0;
    while (i < s.n) {
        int k;
        uint32_t cp = cp_at(s.s, s.n, i, &k);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        bool ok = true;
        switch (cls) {
        case 0: ok = c == UTF8PROC_CATEGORY_ND; break;                                       /* isdigit / isdecimal */
        case 1: ok = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO; break;         /* isalpha */
        case 2: ok = (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO); break;
        case 3: ok = py_isspace(cp); break;
        case 4: if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) ok = false; if (c == UTF8PROC_CATEGORY_LL) any_cased = true; break;
        case 5: if (c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) ok = false; if (c == UTF8PROC_CATEGORY_LU) any_cased = true; break;
        case 6: ok = c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO; break;         /* isnumeric */
        }
        if (!ok)
            return jv_bool(false);
        i += (size_t)k;
    }
    if (cls == 4 || cls == 5)
        return jv_bool(any_cased);
    return jv_bool(true);
}

static jv m_isdigit(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 0); }
static jv m_isalpha(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 1); }
static jv m_isalnum(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 2); }
static jv m_isspace(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 3); }
static jv m_islower(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 4); }
static jv m_isupper(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 5); }
static jv m_isnumeric(jrender *R, jv s, jcallargs *a) { return is_class(R, s, 6); }

static jv just(jrender *R, jv s, jcallargs *a, int mode)
{
    int64_t w = need_int(R, jarg(a, 0, "width", jv_int(0)), "width");
    jv fill = jarg(a, 1, "fillchar", jv_strn(" ", 1));
    need_str(R, fill, "fillchar");
    int64_t len = (int64_t)utf8_count(s.s, s.n);
    if (w <= len)
        return s;
    if (w > (int64_t)R->lim.max_output)
        jfail(R, CV_ELIMIT, "width %lld exceeds the output limit", (long long)w);
    int64_t pad = w - len, l = mode == 0 ? 0 : mode == 1 ? pad : pad / 2 + (pad & w & 1);
    if (mode == 2)
        l = pad / 2 + ((pad & 1) && (w & 1));
    cv_buf *b = jbuf_get(R);
    for (int64_t i = 0; i < l; i++)
        cv_buf_append(b, fill.s, fill.n);
    cv_buf_append(b, s.s, s.n);
    for (int64_t i = l; i < pad; i++)
        cv_buf_append(b, fill.s, fill.n);
    return done_buf(R, b);
}

static jv m_ljust(jrender *R, jv s, jcallargs *a) { return just(R, s, a, 0); }
static jv m_rjust(jrender *R, jv s, jcallargs *a) { return just(R, s, a, 1); }
static jv m_center(jrender *R, jv s, jcallargs *a) { return just(R, s, a, 2); }

static jv m_zfill(jrender *R, jv s, jcallargs *a)
{
    int64_t w = need_int(R, jarg(a, 0, "width", jv_int(0)), "width");
    int64_t len = (int64_t)utf8_count(s.s, s.n);
    if (w <= len)
        return s;
    if (w > (int64_t)R->lim.max_output)
        jfail(R, CV_ELIMIT, "width %lld exceeds the output limit", (long long)w);
    cv_buf *b = jbuf_get(R);
    size_t st = 0;
    if (s.n && (s.s[0] == '-' || s.s[0] == '+')) {
        cv_buf_putc(b, s.s[0]);
        st = 1;
    }
    for (int64_t i = len; i < w; i++)
        cv_buf_putc(b, '0');
    cv_buf_append(b, s.s + st, s.n - st);
    return done_buf(R, b);
}

static jv m_removeprefix(jrender *R, jv s, jcallargs *a)
{
    jv p = need_str(R, jarg(a, 0, NULL, jv_undef("prefix")), "prefix");
    if (p.n <= s.n && !memcmp(s.s, p.s, p.n))
        return jv_strn(s.s + p.n, s.n - p.n);
    return s;
}

static jv m_removesuffix(jrender *R, jv s, jcallargs *a)
{
    jv p = need_str(R, jarg(a, 0, NULL, jv_undef("suffix")), "suffix");
    if (p.n && p.n <= s.n && !memcmp(s.s + s.n - p.n, p.s, p.n))
        return jv_strn(s.s, s.n - p.n);
    return s;
}

static jv partition(jrender *R, jv s, jcallargs *a, bool rev)
{
    jv sep = need_str(R, jarg(a, 0, NULL, jv_undef("sep")), "separator");
    if (!sep.n)
        jfail(R, CV_EINVAL, "empty separator");
    jlist *l = jlist_new(R, 3);
    const char *hit = NULL;
    if (!rev)
        hit = memmem(s.s, s.n, sep.s, sep.n);
    else if (s.n >= sep.n)
        for (size_t j = s.n - sep.n + 1; j-- > 0;)
            if (!memcmp(s.s + j, sep.s, sep.n)) {
                hit = s.s + j;
                break;
            }
    if (!hit) {
        jlist_push(R, l, rev ? jv_strn("", 0) : s);
        jlist_push(R, l, jv_strn("", 0));
        jlist_push(R, l, rev ? s : jv_strn("", 0));
    } else {
        size_t h = (size_t)(hit - s.s);
        jlist_push(R, l, jv_strn(s.s, h));
        jlist_push(R, l, sep);
        jlist_push(R, l, jv_strn(s.s + h + sep.n, s.n - h - sep.n));
    }
    jv r = jv_list(l);
    r.flags = JF_TUPLE;
    return r;
}

static jv m_partition(jrender *R, jv s, jcallargs *a) { return partition(R, s, a, false); }
static jv m_rpartition(jrender *R, jv s, jcallargs *a) { return partition(R, s, a, true); }

/* ---- dict and list methods ---- */

static jv m_get(jrender *R, jv d, jcallargs *a)
{
    bool found;
    jv v = jv_dict_get(R, d, jarg(a, 0, NULL, jv_none()), &found);
    return found ? v : jarg(a, 1, NULL, jv_none());
}

static jv m_items(jrender *R, jv d, jcallargs *a)
{
    jv *ks, *vs;
    int64_t n;
    jv_dict_items(R, d, &ks, &vs, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++) {
        jlist *p = jlist_new(R, 2);
        jlist_push(R, p, ks[i]);
        jlist_push(R, p, vs[i]);
        jv t = jv_list(p);
        t.flags = JF_TUPLE;
        jlist_push(R, l, t);
    }
    return jv_list(l);
}

static jv m_keys(jrender *R, jv d, jcallargs *a)
{
    jv *ks, *vs;
    int64_t n;
    jv_dict_items(R, d, &ks, &vs, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++)
        jlist_push(R, l, ks[i]);
    return jv_list(l);
}

static jv m_values(jrender *R, jv d, jcallargs *a)
{
    jv *ks, *vs;
    int64_t n;
    jv_dict_items(R, d, &ks, &vs, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++)
        jlist_push(R, l, vs[i]);
    return jv_list(l);
}

static jv m_copy(jrender *R, jv v, jcallargs *a) { return v; /* values are immutable */ }

static jv m_list_count(jrender *R, jv l, jcallargs *a)
{
    jv x = jarg(a, 0, NULL, jv_undef("value"));
    int64_t n = jv_len(R, l), k = 0;
    for (int64_t i = 0; i < n; i++)
        k += jv_eq(jv_list_at(l, i), x);
    return jv_int(k);
}

static jv m_list_index(jrender *R, jv l, jcallargs *a)
{
    jv x = jarg(a, 0, NULL, jv_undef("value"));
    int64_t n = jv_len(R, l);
    for (int64_t i = 0; i < n; i++)
        if (jv_eq(jv_list_at(l, i), x))
            return jv_int(i);
    jfail(R, CV_EINVAL, "value is not in list");
}

typedef struct mdef {
    const char *name;
    jbuiltin_fn fn; /* NULL: exists but mutates (unsafe in the immutable sandbox) */
} mdef;

static const mdef str_methods[] = {
    { "strip", m_strip }, { "lstrip", m_lstrip }, { "rstrip", m_rstrip }, { "split", m_split },
    { "rsplit", m_rsplit }, { "splitlines", m_splitlines }, { "startswith", m_startswith },
    { "endswith", m_endswith }, { "replace", m_replace }, { "lower", m_lower }, { "upper", m_upper },
    { "title", m_title }, { "capitalize", m_capitalize }, { "swapcase", m_swapcase }, { "casefold", m_casefold },
    { "find", m_find }, { "rfind", m_rfind }, { "index", m_index }, { "rindex", m_rindex }, { "count", m_count },
    { "join", m_join }, { "format", m_format }, { "isdigit", m_isdigit }, { "isdecimal", m_isdigit },
    { "isalpha", m_isalpha }, { "isalnum", m_isalnum }, { "isspace", m_isspace }, { "islower", m_islower },
    { "isupper", m_isupper }, { "isnumeric", m_isnumeric }, { "ljust", m_ljust }, { "rjust", m_rjust },
    { "center", m_center }, { "zfill", m_zfill }, { "removeprefix", m_removeprefix },
    { "removesuffix", m_removesuffix }, { "partition", m_partition }, { "rpartition", m_rpartition },
};

static const mdef dict_methods[] = {
    { "get", m_get }, { "items", m_items }, { "keys", m_keys }, { "values", m_values }, { "copy", m_copy },
    { "pop", NULL }, { "popitem", NULL }, { "setdefault", NULL }, { "update", NULL }, { "clear", NULL },
};

static const mdef list_methods[] = {
    { "count", m_list_count }, { "index", m_list_index }, { "copy", m_copy },
    { "append", NULL }, { "extend", NULL }, { "insert", NULL }, { "pop", NULL }, { "remove", NULL },
    { "reverse", NULL }, { "sort", NULL }, { "clear", NULL },
};

static jv bind(jrender *R, jv self, const char *name, jbuiltin_fn fn)
{
    jfunc *f = jalloc(R, sizeof *f);
    f->kind = FN_METHOD;
    f->name = name;
    f->call = fn;
    f->self = self;
    jv v = { .t = JV_FUNC };
    v.fn = f;
    return v;
}

jv jmethod(jrender *R, jv self, const char *name)
{
    const mdef *tab = NULL;
    int n = 0;
    if (self.t == JV_STR) {
        tab = str_methods;
        n = (int)CV_ARRAY_LEN(str_methods);
    } else if (jv_is_dict(self)) {
        tab = dict_methods;
        n = (int)CV_ARRAY_LEN(dict_methods);
    } else if (jv_is_list(self)) {
        tab = list_methods;
        n = (int)CV_ARRAY_LEN(list_methods);
        if (self.t == JV_LIST && (self.flags & JF_TUPLE))
            n = 2; /* tuples have count and index only */
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(tab[i].name, name))
            continue;
        if (!tab[i].fn) {
            jv u = jv_undef(tab[i].name);
            u.flags = JF_UNSAFE;
            return u;
        }
        return bind(R, self, tab[i].name, tab[i].fn);
    }
    return jv_undef(NULL);
}

/* ---- globals ---- */

static jv g_range(jrender *R, jv self, jcallargs *a)
{
    if (a->n_kw)
        jfail(R, CV_EINVAL, "range() takes no keyword arguments");
    int64_t start = 0, stop, step = 1;
    if (a->n_pos == 1) {
        stop = need_int(R, a->pos[0], "range() argument");
    } else if (a->n_pos == 2 || a->n_pos == 3) {
        start = need_int(R, a->pos[0], "range() argument");
        stop = need_int(R, a->pos[1], "range() argument");
        if (a->n_pos == 3)
            step = need_int(R, a->pos[2], "range() argument");
    } else {
        jfail(R, CV_EINVAL, "range expected 1 to 3 arguments, got %d", a->n_pos);
    }
    if (step == 0)
        jfail(R, CV_EINVAL, "range() arg 3 must not be zero");
    int64_t n = 0;
    if (step > 0 && stop > start)
        n = (stop - start + step - 1) / step;
    else if (step < 0 && stop < start)
        n = (start - stop - step - 1) / -step;
    if (n > CV_JINJA_MAX_RANGE)
        jfail(R, CV_ELIMIT, "range of %lld items is too big: the sandbox allows at most %d", (long long)n, CV_JINJA_MAX_RANGE);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++)
        jlist_push(R, l, jv_int(start + i * step));
    return jv_list(l);
}

static jv g_dict_or_ns(jrender *R, jcallargs *a, int type)
{
    jdict *d = jdict_new(R, 4);
    if (a->n_pos > 1)
        jfail(R, CV_EINVAL, "%s expected at most 1 positional argument, got %d", type == JV_NS ? "namespace" : "dict", a->n_pos);
    if (a->n_pos == 1) {
        jv src = a->pos[0];
        if (jv_is_dict(src) || src.t == JV_NS) {
            jv *ks, *vs;
            int64_t n;
            jv_dict_items(R, src, &ks, &vs, &n);
            for (int64_t i = 0; i < n; i++)
                jdict_set(R, d, ks[i], vs[i]);
        } else {
            jv *items;
            int64_t n;
            jv_iter(R, src, &items, &n);
            for (int64_t i = 0; i < n; i++) {
                jv *kv;
                int64_t m;
                jv_iter(R, items[i], &kv, &m);
                if (m != 2)
                    jfail(R, CV_EINVAL, "dictionary update sequence element #%lld has length %lld; 2 is required", (long long)i, (long long)m);
                jdict_set(R, d, kv[0], kv[1]);
            }
        }
    }
    for (int i = 0; i < a->n_kw; i++)
        jdict_set(R, d, jv_strn(a->kwn[i], strlen(a->kwn[i])), a->kwv[i]);
    jv v = { .t = (uint8_t)type };
    v.d = d;
    return v;
}

static jv g_namespace(jrender *R, jv self, jcallargs *a) { return g_dict_or_ns(R, a, JV_NS); }
static jv g_dict(jrender *R, jv self, jcallargs *a) { return g_dict_or_ns(R, a, JV_DICT); }

static jv g_raise(jrender *R, jv self, jcallargs *a)
{
    jv m = jarg(a, 0, "message", jv_strn("", 0));
    jv s = jv_to_str(R, m);
    jfail(R, CV_EINVAL, "raise_exception: %.*s", (int)CV_MIN(s.n, 300u), s.s);
}

static jv g_strftime_now(jrender *R, jv self, jcallargs *a)
{
    jv f = need_str(R, jarg(a, 0, "format", jv_undef("'format'")), "strftime_now format");
    time_t now = R->now ? (time_t)R->now : (time_t)cv_unix_time();
    struct tm tm;
    localtime_r(&now, &tm);
    char *fmt = jalloc(R, f.n + 2);
    memcpy(fmt, f.s, f.n);
    fmt[f.n] = 'x'; /* a sentinel: strftime returns 0 for an empty result */
    fmt[f.n + 1] = 0;
    size_t cap = f.n * 16 + 64;
    char *out = jalloc(R, cap);
    size_t n = strftime(out, cap, fmt, &tm);
    if (n == 0)
        jfail(R, CV_EINVAL, "strftime_now format is too long");
    return jv_strn(out, n - 1);
}

bool jglobal(jrender *R, const char *name, jv *out)
{
    static const struct { const char *name; jbuiltin_fn fn; } g[] = {
        { "range", g_range }, { "namespace", g_namespace }, { "dict", g_dict },
        { "raise_exception", g_raise }, { "strftime_now", g_strftime_now },
    };
    for (int i = 0; i < (int)CV_ARRAY_LEN(g); i++)
        if (!strcmp(g[i].name, name)) {
            jfunc *f = jalloc(R, sizeof *f);
            f->kind = FN_BUILTIN;
            f->name = g[i].name;
            f->call = g[i].fn;
            jv v = { .t = JV_FUNC };
            v.fn = f;
            *out = v;
            return true;
        }
    return false;
}
