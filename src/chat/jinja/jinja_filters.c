/* jinja_filters.c — Jinja2's built-in filters and tests, with Hugging Face's
 * tojson, written against Jinja2 3.1's filters.py/tests.py semantics: what
 * each accepts, what it does with Undefined (length 0, iterates as empty,
 * fails on int/float/tojson), Python's str() of non-strings where Jinja2
 * calls soft_str, case-insensitive dictsort/sort/unique by default, and
 * attribute paths ("a.b.0") for map/selectattr/sort/join. The tables at the
 * end map names to functions; the parser resolves names once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja/jinja_int.h"

/* ---- helpers ---- */

void jsort(jrender *R, void *base, size_t n, size_t size, jcmp_fn cmp, void *ctx)
{
    if (n < 2)
        return;
    char *a = base, *tmp = jalloc(R, n * size);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = CV_MIN(lo + w, n), hi = CV_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (cmp(R, a + j * size, a + i * size, ctx) < 0)
                    memcpy(tmp + (k++) * size, a + (j++) * size, size);
                else
                    memcpy(tmp + (k++) * size, a + (i++) * size, size);
            }
            while (i < mid)
                memcpy(tmp + (k++) * size, a + (i++) * size, size);
            while (j < hi)
                memcpy(tmp + (k++) * size, a + (j++) * size, size);
        }
        memcpy(a, tmp, n * size);
    }
}

static jv soft_str(jrender *R, jv v)
{
    if (v.t == JV_STR)
        return v;
    return jv_to_str(R, v);
}

static jv str_only(jrender *R, jv v)
{
    if (v.t == JV_UNDEF && (v.flags & JF_UNSAFE))
        jfail_undef(R, v);
    return soft_str(R, v);
}

static jv mk_tuple2(jrender *R, jv a, jv b)
{
    jlist *l = jlist_new(R, 2);
    jlist_push(R, l, a);
    jlist_push(R, l, b);
    jv t = jv_list(l);
    t.flags = JF_TUPLE;
    return t;
}

static jv gen(jv v)
{
    v.flags = JF_GEN;
    return v;
}

static jv list_of(jrender *R, jv *items, int64_t n)
{
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++)
        jlist_push(R, l, items[i]);
    return jv_list(l);
}

/* make_attrgetter: "a.b.0" with environment.getitem at each step. */
static jv attr_path(jrender *R, jv item, jv attr)
{
    if (attr.t == JV_INT)
        return jgetitem(R, item, attr);
    attr = soft_str(R, attr);
    size_t i = 0;
    while (i <= attr.n) {
        size_t e = i;
        while (e < attr.n && attr.s[e] != '.')
            e++;
        bool digits = e > i;
        for (size_t k = i; k < e; k++)
            digits &= attr.s[k] >= '0' && attr.s[k] <= '9';
        jv key = digits ? jv_int(strtoll(jv_str_copy(R, attr.s + i, e - i).s, NULL, 10)) : jv_strn(attr.s + i, e - i);
        item = jgetitem(R, item, key);
        i = e + 1;
    }
    return item;
}

static jv lowered(jrender *R, jv v, bool case_sensitive)
{
    return (!case_sensitive && v.t == JV_STR) ? jstr_lower(R, v) : v;
}

/* ---- filters ---- */

static jv f_abs(jrender *R, jv v, jcallargs *a)
{
    if (v.t == JV_INT || v.t == JV_BOOL)
        return v.i == INT64_MIN ? jv_float(-(double)v.i) : jv_int(v.i < 0 ? -v.i : v.i);
    if (v.t == JV_FLOAT)
        return jv_float(fabs(v.f));
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    jfail(R, CV_EINVAL, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jv f_attr(jrender *R, jv v, jcallargs *a)
{
    jv name = str_only(R, jarg(a, 0, "name", jv_undef("'name'")));
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    if (name.n && name.s[0] == '_') {
        jv u = jv_undef(jv_str_copy(R, name.s, name.n).s);
        u.flags = JF_UNSAFE;
        return u;
    }
    char *nm = (char *)jv_str_copy(R, name.s, name.n).s;
    jv m = jmethod(R, v, nm);
    if (m.t == JV_NS && v.t == JV_NS)
        return m;
    if (v.t == JV_NS) {
        bool found;
        jv x = jv_dict_get(R, v, name, &found);
        return found ? x : jv_undef("no such attribute");
    }
    return m;
}

static jv f_capitalize(jrender *R, jv v, jcallargs *a) { return jstr_capitalize(R, str_only(R, v)); }
static jv f_lower(jrender *R, jv v, jcallargs *a) { return jstr_lower(R, str_only(R, v)); }
static jv f_upper(jrender *R, jv v, jcallargs *a) { return jstr_upper(R, str_only(R, v)); }

static jv f_title(jrender *R, jv v, jcallargs *a)
{
    /* Jinja2 splits on ([-\s({\[<]+) and capitalises each piece */
    jv s = str_only(R, v);
    cv_buf *b = jbuf_get(R);
    size_t i = 0;
    bool at_start = true;
    while (i < s.n) {
        uint32_t cp;
        int k = cv_utf8_decode(s.s + i, s.n - i, &cp);
        if (k < 0) {
            k = 1;
            cp = (unsigned char)s.s[i];
        }
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
        if (sep) {
            cv_buf_append(b, s.s + i, (size_t)k);
            at_start = true;
        } else {
            jv piece = jv_strn(s.s + i, (size_t)k);
            jv m = at_start ? jstr_upper(R, piece) : jstr_lower(R, piece);
            cv_buf_append(b, m.s, m.n);
            at_start = false;
        }
        i += (size_t)k;
    }
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

static jv f_center(jrender *R, jv v, jcallargs *a)
{
    jv s = str_only(R, v);
    jv w = jarg(a, 0, "width", jv_int(80));
    jcallargs ma = { .pos = &w, .n_pos = 1 };
    jv m = jmethod(R, s, "center");
    return jcall(R, m, &ma);
}

static jv f_default(jrender *R, jv v, jcallargs *a)
{
    jv dflt = jarg(a, 0, "default_value", jv_strn("", 0));
    bool boolean = jv_truthy(R, jarg(a, 1, "boolean", jv_bool(false)));
    if (v.t == JV_UNDEF || (boolean && !jv_truthy(R, v)))
        return dflt;
    return v;
}

typedef struct sort_ctx {
    bool case_sensitive;
    bool by_value;
    bool reverse;
    jv attr;
    bool has_attr;
} sort_ctx;

static int cmp_dictsort(jrender *R, const void *x, const void *y, void *ctx)
{
    const sort_ctx *c = ctx;
    const jv *p = x, *q = y; /* tuples */
    jv a = jv_list_at(*p, c->by_value), b = jv_list_at(*q, c->by_value);
    int r = jv_cmp(R, lowered(R, a, c->case_sensitive), lowered(R, b, c->case_sensitive));
    return c->reverse ? -r : r;
}

static jv f_dictsort(jrender *R, jv v, jcallargs *a)
{
    if (!jv_is_dict(v)) {
        if (v.t == JV_UNDEF)
            jfail_undef(R, v);
        jfail(R, CV_EINVAL, "dictsort: '%s' object has no attribute 'items'", jv_type_name(v));
    }
    sort_ctx c = { .case_sensitive = jv_truthy(R, jarg(a, 0, "case_sensitive", jv_bool(false))),
                   .reverse = jv_truthy(R, jarg(a, 2, "reverse", jv_bool(false))) };
    jv by = jarg(a, 1, "by", jv_strn("key", 3));
    if (by.t == JV_STR && by.n == 5 && !memcmp(by.s, "value", 5))
        c.by_value = true;
    else if (!(by.t == JV_STR && by.n == 3 && !memcmp(by.s, "key", 3)))
        jfail(R, CV_EINVAL, "You can only sort by either \"key\" or \"value\"");
    jv *ks, *vs;
    int64_t n;
    jv_dict_items(R, v, &ks, &vs, &n);
    jv *pairs = jalloc(R, (size_t)CV_MAX(1, n) * sizeof(jv));
    for (int64_t i = 0; i < n; i++)
        pairs[i] = mk_tuple2(R, ks[i], vs[i]);
    jsort(R, pairs, (size_t)n, sizeof(jv), cmp_dictsort, &c);
    return list_of(R, pairs, n);
}

static jv f_escape(jrender *R, jv v, jcallargs *a) { return jstr_escape(R, v); }

static jv f_forceescape(jrender *R, jv v, jcallargs *a)
{
    jv s = soft_str(R, v);
    s.flags = 0;
    return jstr_escape(R, s);
}

static jv f_first(jrender *R, jv v, jcallargs *a)
{
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    return n ? items[0] : jv_undef("No first item, sequence was empty.");
}

static jv f_last(jrender *R, jv v, jcallargs *a)
{
    if (v.t == JV_UNDEF)
        jfail(R, CV_EINVAL, "'Undefined' object is not reversible");
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    return n ? items[n - 1] : jv_undef("No last item, sequence was empty.");
}

/* Python's int(str, base) and float(str) for the int/float filters. */
static bool parse_py_int(jv s, int base, int64_t *out)
{
    size_t i = 0, e = s.n;
    while (i < e && (s.s[i] == ' ' || (s.s[i] >= 9 && s.s[i] <= 13)))
        i++;
    while (e > i && (s.s[e - 1] == ' ' || (s.s[e - 1] >= 9 && s.s[e - 1] <= 13)))
        e--;
    bool neg = false;
    if (i < e && (s.s[i] == '+' || s.s[i] == '-'))
        neg = s.s[i++] == '-';
    if (i + 1 < e && s.s[i] == '0' && base != 10) {
        char p = s.s[i + 1] | 32;
        if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b'))
            i += 2;
    }
    if (i >= e)
        return false;
    uint64_t acc = 0;
    bool last_us = true;
    for (; i < e; i++) {
        char c = s.s[i];
        if (c == '_') {
            if (last_us)
                return false;
            last_us = true;
            continue;
        }
        int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 32) >= 'a' && (c | 32) <= 'z') ? (c | 32) - 'a' + 10 : 99;
        if (d >= base)
            return false;
        if (acc > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        acc = acc * (uint64_t)base + (uint64_t)d;
        last_us = false;
    }
    if (last_us || acc > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)acc : (int64_t)acc;
    return true;
}

static bool parse_py_float(jv s, double *out)
{
    char *tmp = malloc(s.n + 1);
    if (!tmp)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++)
        if (s.s[i] != '_')
            tmp[k++] = s.s[i];
    tmp[k] = 0;
    char *p = tmp;
    while (*p == ' ' || (*p >= 9 && *p <= 13))
        p++;
    char *end;
    bool ok = false;
    if (*p && !(p[0] == '0' && (p[1] | 32) == 'x') && !((p[0] == '-' || p[0] == '+') && p[1] == '0' && (p[2] | 32) == 'x')) {
        *out = strtod(p, &end);
        while (*end == ' ' || (*end >= 9 && *end <= 13))
            end++;
        ok = end != p && *end == 0;
    }
    free(tmp);
    return ok;
}

static jv f_int(jrender *R, jv v, jcallargs *a)
{
    jv dflt = jarg(a, 0, "default", jv_int(0));
    int64_t base = 10;
    jv bv = jarg(a, 1, "base", jv_int(10));
    if (bv.t == JV_INT)
        base = bv.i;
    switch (v.t) {
    case JV_UNDEF: jfail_undef(R, v);
    case JV_INT: return v;
    case JV_BOOL: return jv_int(v.i);
    case JV_FLOAT:
        if (isnan(v.f) || isinf(v.f))
            return dflt;
        return jv_int((int64_t)trunc(v.f));
    case JV_STR: {
        int64_t i;
        if (base >= 2 && base <= 36 && parse_py_int(v, (int)base, &i))
            return jv_int(i);
        double d;
        if (parse_py_float(v, &d) && !isnan(d) && !isinf(d) && fabs(d) < 9.2e18)
            return jv_int((int64_t)trunc(d));
        return dflt;
    }
    default:
        return dflt;
    }
}

static jv f_float(jrender *R, jv v, jcallargs *a)
{
    jv dflt = jarg(a, 0, "default", jv_float(0.0));
    switch (v.t) {
    case JV_UNDEF: jfail_undef(R, v);
    case JV_INT: case JV_BOOL: return jv_float((double)v.i);
    case JV_FLOAT: return v;
    case JV_STR: {
        double d;
        return parse_py_float(v, &d) ? jv_float(d) : dflt;
    }
    default: return dflt;
    }
}

static jv f_format(jrender *R, jv v, jcallargs *a)
{
    if (a->n_pos && a->n_kw)
        jfail(R, CV_EINVAL, "can't handle positional and keyword arguments at the same time");
    jv s = soft_str(R, v);
    if (a->n_kw) {
        jdict *d = jdict_new(R, (uint32_t)a->n_kw);
        for (int i = 0; i < a->n_kw; i++)
            jdict_set(R, d, jv_strn(a->kwn[i], strlen(a->kwn[i])), a->kwv[i]);
        return jstr_percent(R, s, jv_dict(d));
    }
    jv t = list_of(R, a->pos, a->n_pos);
    t.flags = JF_TUPLE;
    return jstr_percent(R, s, t);
}

static jv f_indent(jrender *R, jv v, jcallargs *a)
{
    if (v.t != JV_STR) {
        if (v.t == JV_UNDEF)
            jfail_undef(R, v);
        jfail(R, CV_EINVAL, "indent: unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    }
    jv w = jarg(a, 0, "width", jv_int(4));
    bool first = jv_truthy(R, jarg(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(R, jarg(a, 2, "blank", jv_bool(false)));
    jv ind;
    if (w.t == JV_STR) {
        ind = w;
    } else if (w.t == JV_INT || w.t == JV_BOOL) {
        int64_t k = w.i < 0 ? 0 : w.i;
        if (k > 4096)
            jfail(R, CV_ELIMIT, "indent width %lld is above 4096", (long long)k);
        char *p = jalloc(R, (size_t)k + 1);
        memset(p, ' ', (size_t)k);
        ind = jv_strn(p, (size_t)k);
    } else {
        jfail(R, CV_EINVAL, "indent width must be an int or a string");
    }
    /* s += "\n"; lines = s.splitlines() */
    jv s = jstr_concat(R, v, jv_strn("\n", 1));
    jv lines_v = jmethod(R, s, "splitlines");
    jcallargs none = { 0 };
    jv lines = jcall(R, lines_v, &none);
    cv_buf *b = jbuf_get(R);
    int64_t n = lines.l->n;
    if (first)
        cv_buf_append(b, ind.s, ind.n);
    for (int64_t i = 0; i < n; i++) {
        jv ln = lines.l->v[i];
        if (i) {
            cv_buf_putc(b, '\n');
            if (blank || ln.n)
                cv_buf_append(b, ind.s, ind.n);
        }
        cv_buf_append(b, ln.s, ln.n);
        if (b->len > R->lim.max_output)
            jfail(R, CV_ELIMIT, "indent result exceeds %zu bytes", R->lim.max_output);
    }
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

static jv f_items(jrender *R, jv v, jcallargs *a)
{
    if (v.t == JV_UNDEF && !(v.flags & JF_UNSAFE))
        return jv_list(jlist_new(R, 1));
    if (!jv_is_dict(v))
        jfail(R, CV_EINVAL, "Can only get item pairs from a mapping.");
    jv *ks, *vs;
    int64_t n;
    jv_dict_items(R, v, &ks, &vs, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++)
        jlist_push(R, l, mk_tuple2(R, ks[i], vs[i]));
    return gen(jv_list(l));
}

static jv f_join(jrender *R, jv v, jcallargs *a)
{
    jv d = soft_str(R, jarg(a, 0, "d", jv_strn("", 0)));
    jv attr = jarg(a, 1, "attribute", jv_none());
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    cv_buf *b = jbuf_get(R);
    bool any_safe = false;
    for (int64_t i = 0; i < n; i++) {
        if (i)
            cv_buf_append(b, d.s, d.n);
        jv it = attr.t != JV_NONE ? attr_path(R, items[i], attr) : items[i];
        if (it.t == JV_STR && (it.flags & JF_SAFE))
            any_safe = true;
        jv_str_append(R, b, it);
        if (b->len > R->lim.max_output)
            jfail(R, CV_ELIMIT, "join result exceeds %zu bytes", R->lim.max_output);
    }
    (void)any_safe; /* autoescape is off: join gives a plain str */
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

static jv f_length(jrender *R, jv v, jcallargs *a) { return jv_int(jv_len(R, v)); }

static jv f_list(jrender *R, jv v, jcallargs *a)
{
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    return list_of(R, items, n);
}

static jv f_map(jrender *R, jv v, jcallargs *a)
{
    jv *items = NULL;
    int64_t n = 0;
    if (jv_truthy(R, v)) /* Jinja2: `if value: for item in value` */
        jv_iter(R, v, &items, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    bool by_attr = a->n_pos == 0 && jarg_has(a, -1, "attribute");
    if (by_attr) {
        jv attr = jarg(a, -1, "attribute", jv_none());
        jv dflt = jarg(a, -1, "default", jv_none());
        bool has_d = jarg_has(a, -1, "default");
        for (int64_t i = 0; i < n; i++) {
            jv x = attr_path(R, items[i], attr);
            if (has_d && x.t == JV_UNDEF)
                x = dflt;
            jlist_push(R, l, x);
        }
        return gen(jv_list(l));
    }
    if (a->n_pos == 0)
        jfail(R, CV_EINVAL, "map requires a filter argument");
    jv name = str_only(R, a->pos[0]);
    const char *nm = jv_str_copy(R, name.s, name.n).s;
    jcallargs rest = { .pos = a->pos + 1, .n_pos = a->n_pos - 1, .kwn = a->kwn, .kwv = a->kwv, .n_kw = a->n_kw };
    for (int64_t i = 0; i < n; i++) {
        jstep(R);
        jlist_push(R, l, jfilter_by_name(R, nm, items[i], &rest));
    }
    return gen(jv_list(l));
}

static int cmp_plain(jrender *R, const void *x, const void *y, void *ctx)
{
    const sort_ctx *c = ctx;
    jv a = *(const jv *)x, b = *(const jv *)y;
    if (c->has_attr) {
        a = attr_path(R, a, c->attr);
        b = attr_path(R, b, c->attr);
    }
    int r = jv_cmp(R, lowered(R, a, c->case_sensitive), lowered(R, b, c->case_sensitive));
    return c->reverse ? -r : r;
}

static jv minmax(jrender *R, jv v, jcallargs *a, bool want_max)
{
    sort_ctx c = { .case_sensitive = jv_truthy(R, jarg(a, 0, "case_sensitive", jv_bool(false))) };
    c.attr = jarg(a, 1, "attribute", jv_none());
    c.has_attr = c.attr.t != JV_NONE;
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    if (!n)
        return jv_undef("No aggregated item, sequence was empty.");
    jv best = items[0];
    for (int64_t i = 1; i < n; i++) {
        int r = cmp_plain(R, &items[i], &best, &c);
        if (want_max ? r > 0 : r < 0)
            best = items[i];
    }
    return best;
}

static jv f_max(jrender *R, jv v, jcallargs *a) { return minmax(R, v, a, true); }
static jv f_min(jrender *R, jv v, jcallargs *a) { return minmax(R, v, a, false); }

static jv f_pprint(jrender *R, jv v, jcallargs *a)
{
    cv_buf *b = jbuf_get(R);
    jv_repr_append(R, b, v, 0);
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

/* select/reject(test, args...) and selectattr/rejectattr(attr, test, args...) */
static jv select_impl(jrender *R, jv v, jcallargs *a, bool by_attr, bool keep_if)
{
    jv *items = NULL;
    int64_t n = 0;
    if (jv_truthy(R, v)) /* Jinja2: `if value: for item in value` */
        jv_iter(R, v, &items, &n);
    int off = 0;
    jv attr = jv_none();
    if (by_attr) {
        if (a->n_pos < 1)
            jfail(R, CV_EINVAL, "Missing parameter for attribute name");
        attr = a->pos[0];
        off = 1;
    }
    const char *test = NULL;
    if (a->n_pos > off) {
        jv t = str_only(R, a->pos[off]);
        test = jv_str_copy(R, t.s, t.n).s;
        off++;
    }
    jcallargs rest = { .pos = a->pos + off, .n_pos = a->n_pos - off, .kwn = a->kwn, .kwv = a->kwv, .n_kw = a->n_kw };
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = 0; i < n; i++) {
        jstep(R);
        jv x = by_attr ? attr_path(R, items[i], attr) : items[i];
        bool ok = test ? jtest_by_name(R, test, x, &rest) : jv_truthy(R, x);
        if (ok == keep_if)
            jlist_push(R, l, items[i]);
    }
    return gen(jv_list(l));
}

static jv f_select(jrender *R, jv v, jcallargs *a) { return select_impl(R, v, a, false, true); }
static jv f_reject(jrender *R, jv v, jcallargs *a) { return select_impl(R, v, a, false, false); }
static jv f_selectattr(jrender *R, jv v, jcallargs *a) { return select_impl(R, v, a, true, true); }
static jv f_rejectattr(jrender *R, jv v, jcallargs *a) { return select_impl(R, v, a, true, false); }

static jv f_replace(jrender *R, jv v, jcallargs *a)
{
    jv s = str_only(R, v);
    jv old = soft_str(R, jarg(a, 0, "old", jv_undef("'old'")));
    jv neu = soft_str(R, jarg(a, 1, "new", jv_undef("'new'")));
    jv cnt = jarg(a, 2, "count", jv_none());
    return jstr_replace(R, s, old, neu, cnt.t == JV_INT ? cnt.i : -1);
}

static jv f_reverse(jrender *R, jv v, jcallargs *a)
{
    jv *items;
    int64_t n;
    if (v.t == JV_STR) {
        jv_iter(R, v, &items, &n);
        cv_buf *b = jbuf_get(R);
        for (int64_t i = n - 1; i >= 0; i--)
            cv_buf_append(b, items[i].s, items[i].n);
        jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
        jbuf_put(R, b);
        return r;
    }
    jv_iter(R, v, &items, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    for (int64_t i = n - 1; i >= 0; i--)
        jlist_push(R, l, items[i]);
    return gen(jv_list(l));
}

static jv f_round(jrender *R, jv v, jcallargs *a)
{
    int64_t prec = 0;
    jv p = jarg(a, 0, "precision", jv_int(0));
    if (p.t == JV_INT)
        prec = p.i;
    jv m = jarg(a, 1, "method", jv_strn("common", 6));
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    if (v.t != JV_INT && v.t != JV_FLOAT && v.t != JV_BOOL)
        jfail(R, CV_EINVAL, "type %s doesn't define __round__ method", jv_type_name(v));
    double x = v.t == JV_FLOAT ? v.f : (double)v.i, scale = pow(10.0, (double)prec);
    if (m.t == JV_STR && m.n == 6 && !memcmp(m.s, "common", 6)) {
        if (v.t != JV_FLOAT)
            return jv_int(v.i);
        double y = x * scale, r = nearbyint(y); /* round-half-even, as Python */
        return jv_float(r / scale);
    }
    if (m.t == JV_STR && m.n == 4 && !memcmp(m.s, "ceil", 4))
        return jv_float(ceil(x * scale) / scale);
    if (m.t == JV_STR && m.n == 5 && !memcmp(m.s, "floor", 5))
        return jv_float(floor(x * scale) / scale);
    jfail(R, CV_EINVAL, "method must be common, ceil or floor");
}

static jv f_safe(jrender *R, jv v, jcallargs *a)
{
    jv s = soft_str(R, v);
    s.flags = JF_SAFE;
    return s;
}

static jv f_sort(jrender *R, jv v, jcallargs *a)
{
    sort_ctx c = { .reverse = jv_truthy(R, jarg(a, 0, "reverse", jv_bool(false))),
                   .case_sensitive = jv_truthy(R, jarg(a, 1, "case_sensitive", jv_bool(false))) };
    c.attr = jarg(a, 2, "attribute", jv_none());
    c.has_attr = c.attr.t != JV_NONE;
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    jv *copy = jalloc(R, (size_t)CV_MAX(1, n) * sizeof(jv));
    memcpy(copy, items, (size_t)n * sizeof(jv));
    jsort(R, copy, (size_t)n, sizeof(jv), cmp_plain, &c);
    return list_of(R, copy, n);
}

static jv f_string(jrender *R, jv v, jcallargs *a) { return soft_str(R, v); }

static jv f_sum(jrender *R, jv v, jcallargs *a)
{
    jv attr = jarg(a, 0, "attribute", jv_none());
    jv acc = jarg(a, 1, "start", jv_int(0));
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    for (int64_t i = 0; i < n; i++) {
        jv x = attr.t != JV_NONE ? attr_path(R, items[i], attr) : items[i];
        if ((acc.t == JV_INT || acc.t == JV_FLOAT || acc.t == JV_BOOL) && (x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL)) {
            if (acc.t != JV_FLOAT && x.t != JV_FLOAT)
                acc = jv_int(acc.i + x.i);
            else
                acc = jv_float((acc.t == JV_FLOAT ? acc.f : (double)acc.i) + (x.t == JV_FLOAT ? x.f : (double)x.i));
        } else {
            jfail(R, CV_EINVAL, "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
        }
    }
    return acc;
}

static jv f_tojson(jrender *R, jv v, jcallargs *a)
{
    jv ea = jarg(a, -1, "ensure_ascii", jv_bool(false));
    jv ind = jarg(a, 0, "indent", jv_none());
    jv seps = jarg(a, -1, "separators", jv_none());
    jv sk = jarg(a, -1, "sort_keys", jv_bool(false));
    if (a->n_pos > 1)
        jfail(R, CV_EINVAL, "tojson() takes at most 1 positional argument");
    bool have_indent = ind.t != JV_NONE;
    const char *indent = "";
    int indent_len = 0;
    if (ind.t == JV_INT || ind.t == JV_BOOL) {
        int64_t k = ind.i < 0 ? 0 : ind.i;
        if (k > 4096)
            jfail(R, CV_ELIMIT, "tojson indent %lld is above 4096", (long long)k);
        char *p = jalloc(R, (size_t)k + 1);
        memset(p, ' ', (size_t)k);
        indent = p;
        indent_len = (int)k;
    } else if (ind.t == JV_STR) {
        indent = jv_str_copy(R, ind.s, ind.n).s;
        indent_len = (int)ind.n;
    } else if (have_indent) {
        jfail(R, CV_EINVAL, "tojson indent must be an int or a string");
    }
    const char *item_sep = have_indent ? "," : ", ", *key_sep = ": ";
    if (seps.t != JV_NONE) {
        jv *sv;
        int64_t ns;
        if (!jv_is_list(seps))
            jfail(R, CV_EINVAL, "tojson separators must be a pair of strings");
        jv_iter(R, seps, &sv, &ns);
        if (ns != 2 || sv[0].t != JV_STR || sv[1].t != JV_STR)
            jfail(R, CV_EINVAL, "tojson separators must be a pair of strings");
        item_sep = jv_str_copy(R, sv[0].s, sv[0].n).s;
        key_sep = jv_str_copy(R, sv[1].s, sv[1].n).s;
    }
    cv_buf *b = jbuf_get(R);
    jv_tojson(R, b, v, indent, indent_len, have_indent, item_sep, key_sep, jv_truthy(R, sk), jv_truthy(R, ea), 0);
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

static jv f_trim(jrender *R, jv v, jcallargs *a)
{
    return jstr_strip(R, str_only(R, v), jarg(a, 0, "chars", jv_none()), 3);
}

static jv f_truncate(jrender *R, jv v, jcallargs *a)
{
    jv s = str_only(R, v);
    int64_t length = jarg(a, 0, "length", jv_int(255)).i;
    bool killwords = jv_truthy(R, jarg(a, 1, "killwords", jv_bool(false)));
    jv end = soft_str(R, jarg(a, 2, "end", jv_strn("...", 3)));
    jv lw = jarg(a, 3, "leeway", jv_none());
    int64_t leeway = lw.t == JV_INT ? lw.i : 5;
    int64_t n = (int64_t)utf8_count(s.s, s.n), ne = (int64_t)utf8_count(end.s, end.n);
    if (length < ne)
        jfail(R, CV_EINVAL, "expected length >= %lld, got %lld", (long long)ne, (long long)length);
    if (n <= length + leeway)
        return s;
    jv head = jv_strn(s.s, utf8_offset(s.s, s.n, length - ne));
    if (!killwords) {
        jv parts = jstr_split(R, head, jv_strn(" ", 1), 1, true);
        head = parts.l->v[0];
    }
    return jstr_concat(R, head, end);
}

static int cmp_eq_unique(jrender *R, jv a, jv b, bool cs)
{
    return jv_eq(lowered(R, a, cs), lowered(R, b, cs));
}

static jv f_unique(jrender *R, jv v, jcallargs *a)
{
    bool cs = jv_truthy(R, jarg(a, 0, "case_sensitive", jv_bool(false)));
    jv attr = jarg(a, 1, "attribute", jv_none());
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n));
    jv *keys = jalloc(R, (size_t)CV_MAX(1, n) * sizeof(jv));
    int64_t nk = 0;
    for (int64_t i = 0; i < n; i++) {
        jstep(R);
        jv k = attr.t != JV_NONE ? attr_path(R, items[i], attr) : items[i];
        if (jv_is_list(k) || jv_is_dict(k))
            jfail(R, CV_EINVAL, "unhashable type: '%s'", jv_type_name(k));
        bool seen = false;
        for (int64_t j = 0; j < nk && !seen; j++)
            seen = cmp_eq_unique(R, keys[j], k, cs);
        if (!seen) {
            keys[nk++] = k;
            jlist_push(R, l, items[i]);
        }
    }
    return gen(jv_list(l));
}

static jv f_wordcount(jrender *R, jv v, jcallargs *a)
{
    jv s = str_only(R, v);
    int64_t k = 0;
    bool in = false;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.s[i];
        bool w = (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_' || c >= 0x80;
        if (w && !in)
            k++;
        in = w;
    }
    return jv_int(k);
}

static jv f_batch(jrender *R, jv v, jcallargs *a)
{
    jv lc = jarg(a, 0, "linecount", jv_undef("'linecount'"));
    if (lc.t != JV_INT || lc.i <= 0)
        jfail(R, CV_EINVAL, "batch linecount must be a positive integer");
    jv fill = jarg(a, 1, "fill_with", jv_none());
    bool has_fill = jarg_has(a, 1, "fill_with") && fill.t != JV_NONE;
    jv *items;
    int64_t n;
    jv_iter(R, v, &items, &n);
    jlist *out = jlist_new(R, 4);
    for (int64_t i = 0; i < n; i += lc.i) {
        jlist *row = jlist_new(R, (uint32_t)CV_MIN(lc.i, 1024));
        for (int64_t j = i; j < i + lc.i; j++) {
            if (j < n)
                jlist_push(R, row, items[j]);
            else if (has_fill)
                jlist_push(R, row, fill);
        }
        jlist_push(R, out, jv_list(row));
    }
    return gen(jv_list(out));
}

const jfilter_def jfilters[] = {
    { "abs", f_abs }, { "attr", f_attr }, { "batch", f_batch }, { "capitalize", f_capitalize },
    { "center", f_center }, { "count", f_length }, { "d", f_default }, { "default", f_default },
    { "dictsort", f_dictsort }, { "e", f_escape }, { "escape", f_escape }, { "first", f_first },
    { "float", f_float }, { "forceescape", f_forceescape }, { "format", f_format }, { "indent", f_indent },
    { "int", f_int }, { "items", f_items }, { "join", f_join }, { "last", f_last }, { "length", f_length },
    { "list", f_list }, { "lower", f_lower }, { "map", f_map }, { "max", f_max }, { "min", f_min },
    { "pprint", f_pprint }, { "reject", f_reject }, { "rejectattr", f_rejectattr }, { "replace", f_replace },
    { "reverse", f_reverse }, { "round", f_round }, { "safe", f_safe }, { "select", f_select },
    { "selectattr", f_selectattr }, { "sort", f_sort }, { "string", f_string }, { "sum", f_sum },
    { "title", f_title }, { "tojson", f_tojson }, { "trim", f_trim }, { "truncate", f_truncate },
    { "unique", f_unique }, { "upper", f_upper }, { "wordcount", f_wordcount },
};
const int jn_filters = (int)CV_ARRAY_LEN(jfilters);

int jfilter_find(const char *name)
{
    for (int i = 0; i < jn_filters; i++)
        if (!strcmp(jfilters[i].name, name))
            return i;
    return -1;
}

jv jfilter_by_name(jrender *R, const char *name, jv v, jcallargs *a)
{
    int i = jfilter_find(name);
    if (i < 0)
        jfail(R, CV_EINVAL, "no filter named '%s'", name);
    return jfilters[i].fn(R, v, a);
}

/* ---- tests ---- */

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }

static bool t_defined(jrender *R, jv v, jcallargs *a) { return v.t != JV_UNDEF; }
static bool t_undefined(jrender *R, jv v, jcallargs *a) { return v.t == JV_UNDEF; }
static bool t_none(jrender *R, jv v, jcallargs *a) { return v.t == JV_NONE; }
static bool t_boolean(jrender *R, jv v, jcallargs *a) { return v.t == JV_BOOL; }
static bool t_false(jrender *R, jv v, jcallargs *a) { return v.t == JV_BOOL && !v.i; }
static bool t_true(jrender *R, jv v, jcallargs *a) { return v.t == JV_BOOL && v.i; }
static bool t_integer(jrender *R, jv v, jcallargs *a) { return v.t == JV_INT; }
static bool t_float(jrender *R, jv v, jcallargs *a) { return v.t == JV_FLOAT; }
static bool t_number(jrender *R, jv v, jcallargs *a) { return is_num(v); }
static bool t_string(jrender *R, jv v, jcallargs *a) { return v.t == JV_STR; }
static bool t_mapping(jrender *R, jv v, jcallargs *a) { return jv_is_dict(v); }
static bool t_sequence(jrender *R, jv v, jcallargs *a) { return v.t == JV_STR || jv_is_list(v) || jv_is_dict(v) || v.t == JV_UNDEF; }
static bool t_iterable(jrender *R, jv v, jcallargs *a) { return v.t == JV_STR || jv_is_list(v) || jv_is_dict(v) || v.t == JV_UNDEF; }
static bool t_callable(jrender *R, jv v, jcallargs *a) { return v.t == JV_FUNC && v.fn->kind != FN_LOOP; }
static bool t_escaped(jrender *R, jv v, jcallargs *a) { return v.t == JV_STR && (v.flags & JF_SAFE); }

static bool t_lower(jrender *R, jv v, jcallargs *a)
{
    if (v.t != JV_STR)
        v = jv_to_str(R, v);
    jv m = jmethod(R, v, "islower");
    jcallargs none = { 0 };
    return jcall(R, m, &none).i != 0;
}

static bool t_upper(jrender *R, jv v, jcallargs *a)
{
    if (v.t != JV_STR)
        v = jv_to_str(R, v);
    jv m = jmethod(R, v, "isupper");
    jcallargs none = { 0 };
    return jcall(R, m, &none).i != 0;
}

static int64_t int_arg(jrender *R, jv v)
{
    if (v.t == JV_INT || v.t == JV_BOOL)
        return v.i;
    if (v.t == JV_UNDEF)
        jfail_undef(R, v);
    jfail(R, CV_EINVAL, "expected an integer, got %s", jv_type_name(v));
}

static bool t_odd(jrender *R, jv v, jcallargs *a) { return (int_arg(R, v) & 1) != 0; }
static bool t_even(jrender *R, jv v, jcallargs *a) { return (int_arg(R, v) & 1) == 0; }

static bool t_divisibleby(jrender *R, jv v, jcallargs *a)
{
    int64_t d = int_arg(R, jarg(a, 0, "num", jv_undef("'num'")));
    if (d == 0)
        jfail(R, CV_EINVAL, "integer division or modulo by zero");
    return int_arg(R, v) % d == 0;
}

static jv other(jcallargs *a) { return jarg(a, 0, "other", jv_undef("'other'")); }
static bool t_eq(jrender *R, jv v, jcallargs *a) { return jv_eq(v, other(a)); }
static bool t_ne(jrender *R, jv v, jcallargs *a) { return !jv_eq(v, other(a)); }
static bool t_lt(jrender *R, jv v, jcallargs *a) { return jv_cmp(R, v, other(a)) < 0; }
static bool t_le(jrender *R, jv v, jcallargs *a) { return jv_cmp(R, v, other(a)) <= 0; }
static bool t_gt(jrender *R, jv v, jcallargs *a) { return jv_cmp(R, v, other(a)) > 0; }
static bool t_ge(jrender *R, jv v, jcallargs *a) { return jv_cmp(R, v, other(a)) >= 0; }

static bool t_sameas(jrender *R, jv v, jcallargs *a)
{
    jv o = other(a);
    if (v.t != o.t)
        return false;
    switch (v.t) {
    case JV_NONE: case JV_UNDEF: return true;
    case JV_BOOL: case JV_INT: return v.i == o.i;
    case JV_STR: return v.s == o.s && v.n == o.n;
    case JV_JSON: return v.j == o.j;
    case JV_LIST: return v.l == o.l;
    case JV_DICT: case JV_NS: return v.d == o.d;
    case JV_FUNC: return v.fn == o.fn;
    default: return false;
    }
}

static bool t_in(jrender *R, jv v, jcallargs *a)
{
    jv seq = jarg(a, 0, "seq", jv_undef("'seq'"));
    if (seq.t == JV_STR) {
        if (v.t != JV_STR)
            jfail(R, CV_EINVAL, "'in <string>' requires string as left operand, not %s", jv_type_name(v));
        return v.n == 0 || memmem(seq.s, seq.n, v.s, v.n) != NULL;
    }
    if (jv_is_dict(seq)) {
        bool found;
        jv_dict_get(R, seq, v, &found);
        return found;
    }
    jv *items;
    int64_t n;
    jv_iter(R, seq, &items, &n);
    for (int64_t i = 0; i < n; i++)
        if (jv_eq(items[i], v))
            return true;
    return false;
}

static bool t_filter(jrender *R, jv v, jcallargs *a)
{
    if (v.t != JV_STR)
        return false;
    char *nm = (char *)jv_str_copy(R, v.s, v.n).s;
    return jfilter_find(nm) >= 0;
}

static bool t_test(jrender *R, jv v, jcallargs *a)
{
    if (v.t != JV_STR)
        return false;
    char *nm = (char *)jv_str_copy(R, v.s, v.n).s;
    return jtest_find(nm) >= 0;
}

const jtest_def jtests[] = {
    { "defined", t_defined }, { "undefined", t_undefined }, { "none", t_none }, { "boolean", t_boolean },
    { "false", t_false }, { "true", t_true }, { "integer", t_integer }, { "float", t_float },
    { "number", t_number }, { "string", t_string }, { "mapping", t_mapping }, { "sequence", t_sequence },
    { "iterable", t_iterable }, { "callable", t_callable }, { "escaped", t_escaped }, { "lower", t_lower },
    { "upper", t_upper }, { "odd", t_odd }, { "even", t_even }, { "divisibleby", t_divisibleby },
    { "eq", t_eq }, { "equalto", t_eq }, { "==", t_eq }, { "ne", t_ne }, { "!=", t_ne }, { "lt", t_lt },
    { "lessthan", t_lt }, { "<", t_lt }, { "le", t_le }, { "<=", t_le }, { "gt", t_gt },
    { "greaterthan", t_gt }, { ">", t_gt }, { "ge", t_ge }, { ">=", t_ge }, { "sameas", t_sameas },
    { "in", t_in }, { "filter", t_filter }, { "test", t_test },
};
const int jn_tests = (int)CV_ARRAY_LEN(jtests);

int jtest_find(const char *name)
{
    for (int i = 0; i < jn_tests; i++)
        if (!strcmp(jtests[i].name, name))
            return i;
    return -1;
}

bool jtest_by_name(jrender *R, const char *name, jv v, jcallargs *a)
{
    int i = jtest_find(name);
    if (i < 0)
        jfail(R, CV_EINVAL, "no test named '%s'", name);
    return jtests[i].fn(R, v, a);
}
