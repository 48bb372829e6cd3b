/* jinja_value.c — the value model of the interpreter and Python's rules for
 * it: truthiness, equality (1 == 1.0 == True), ordering (TypeError across
 * kinds), len() in code points, iteration (dict keys, string characters),
 * and str()/repr() exactly as CPython prints them (float repr is the
 * shortest round-trip form, strings choose their quote, None/True/False).
 * Also the render-time services every file uses: arena allocation under the
 * memory limit, the step/time limit, and error exits. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <utf8proc.h>

#include "chat/jinja/jinja_int.h"

/* ---- render services ---- */

void jfail(jrender *R, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cv_err_set(R->err, code, "template line %d: %s", R->line, msg);
    R->code = code;
    longjmp(R->jmp, 1);
}

void *jalloc(jrender *R, size_t n)
{
    if (n > R->lim.max_memory || R->arena.used_bytes > R->lim.max_memory - n)
        jfail(R, CV_ELIMIT, "template used more than %zu bytes of scratch memory", R->lim.max_memory);
    return cv_arena_alloc(&R->arena, n ? n : 1);
}

void jstep(jrender *R)
{
    if (++R->steps > R->lim.max_steps)
        jfail(R, CV_ELIMIT, "template ran more than %llu loop iterations and calls", (unsigned long long)R->lim.max_steps);
    if ((R->steps & 1023) == 0 && cv_now_ns() - R->t0 > R->lim.max_ns)
        jfail(R, CV_ELIMIT, "template rendering took longer than %.1f s", (double)R->lim.max_ns / 1e9);
}

cv_buf *jbuf_get(jrender *R)
{
    if (R->n_bufs == J_MAX_BUFS)
        jfail(R, CV_ELIMIT, "template nests captures and calls deeper than %d", J_MAX_BUFS);
    cv_buf *b = &R->bufs[R->n_bufs++];
    cv_buf_reset(b);
    return b;
}

void jbuf_put(jrender *R, cv_buf *b)
{
    assert(R->n_bufs > 0 && b == &R->bufs[R->n_bufs - 1]);
    (void)b;
    R->n_bufs--;
}

void jout(jrender *R, const char *s, size_t n)
{
    if (R->out->len + n > R->lim.max_output)
        jfail(R, CV_ELIMIT, "template output exceeds %zu bytes", R->lim.max_output);
    cv_buf_append(R->out, s, n);
}

/* ---- constructors ---- */

jv jv_str_copy(jrender *R, const char *s, size_t n)
{
    if (n > R->lim.max_output)
        jfail(R, CV_ELIMIT, "a string of %zu bytes exceeds the template output limit of %zu", n, R->lim.max_output);
    char *p = jalloc(R, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return jv_strn(p, n);
}

jv jv_from_json(json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_STRING: return jv_strn(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_NULL: return jv_none();
    default: {
        jv v = { .t = JV_JSON };
        v.j = j;
        return v;
    }
    }
}

jlist *jlist_new(jrender *R, uint32_t cap)
{
    jlist *l = jalloc(R, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = jalloc(R, (size_t)l->cap * sizeof(jv));
    return l;
}

void jlist_push(jrender *R, jlist *l, jv v)
{
    if (l->n == l->cap) {
        jv *nv = jalloc(R, (size_t)l->cap * 2 * sizeof(jv));
        memcpy(nv, l->v, (size_t)l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}

jv jv_list(jlist *l)
{
    jv v = { .t = JV_LIST };
    v.l = l;
    return v;
}

jdict *jdict_new(jrender *R, uint32_t cap)
{
    jdict *d = jalloc(R, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = jalloc(R, (size_t)d->cap * sizeof(jv));
    d->v = jalloc(R, (size_t)d->cap * sizeof(jv));
    return d;
}

static bool key_eq(jv a, jv b) { return jv_eq(a, b) && (a.t == JV_STR) == (b.t == JV_STR); }

void jdict_set(jrender *R, jdict *d, jv k, jv v)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], k)) {
            d->v[i] = v;
            return;
        }
    if (d->n == d->cap) {
        jv *nk = jalloc(R, (size_t)d->cap * 2 * sizeof(jv));
        jv *nv = jalloc(R, (size_t)d->cap * 2 * sizeof(jv));
        memcpy(nk, d->k, (size_t)d->n * sizeof(jv));
        memcpy(nv, d->v, (size_t)d->n * sizeof(jv));
        d->k = nk;
        d->v = nv;
        d->cap *= 2;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

jv jv_dict(jdict *d)
{
    jv v = { .t = JV_DICT };
    v.d = d;
    return v;
}

bool jv_is_list(jv v) { return v.t == JV_LIST || (v.t == JV_JSON && json_is_array(v.j)); }
bool jv_is_dict(jv v) { return v.t == JV_DICT || (v.t == JV_JSON && json_is_object(v.j)); }

const char *jv_type_name(jv v)
{
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.flags & JF_SAFE ? "Markup" : "str";
    case JV_LIST: return v.flags & JF_GEN ? "generator" : v.flags & JF_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_JSON: return json_is_array(v.j) ? "list" : "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    }
    return "object";
}

void jfail_undef(jrender *R, jv v)
{
    if (v.flags & JF_UNSAFE)
        jfail(R, CV_EINVAL, "access to attribute '%s' is unsafe in the sandbox", v.s ? v.s : "?");
    /* a bare quoted name reads "'x' is undefined"; a reason reads as itself */
    const char *h = v.s ? v.s : "a value";
    size_t n = strlen(h);
    bool bare = n >= 2 && h[0] == '\'' && h[n - 1] == '\'' && !memchr(h, ' ', n);
    jfail(R, CV_EINVAL, bare ? "%s is undefined" : "%s", h);
}

/* ---- UTF-8 helpers ---- */

size_t utf8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t utf8_offset(const char *s, size_t n, int64_t ci)
{
    size_t i = 0;
    while (i < n && ci > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        ci--;
    }
    return i;
}

/* ---- Python semantics ---- */

int64_t jv_len(jrender *R, jv v)
{
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)utf8_count(v.s, v.n);
    case JV_LIST:
        if (v.flags & JF_GEN)
            jfail(R, CV_EINVAL, "object of type 'generator' has no len()");
        return v.l->n;
    case JV_DICT: case JV_NS: return v.d->n;
    case JV_JSON: return json_is_array(v.j) ? (int64_t)json_array_size(v.j) : (int64_t)json_object_size(v.j);
    default: jfail(R, CV_EINVAL, "object of type '%s' has no len()", jv_type_name(v));
    }
}

bool jv_truthy(jrender *R, jv v)
{
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.n != 0;
    case JV_LIST: return (v.flags & JF_GEN) || v.l->n != 0;
    case JV_DICT: case JV_JSON: return jv_len(R, v) != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.f : (double)v.i; }

bool jv_eq(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return a.i == b.i;
        return num(a) == num(b);
    }
    if (a.t == JV_STR && b.t == JV_STR)
        return a.n == b.n && !memcmp(a.s, b.s, a.n);
    if (a.t == JV_NONE || b.t == JV_NONE)
        return a.t == b.t;
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        return a.t == b.t;
    if (jv_is_list(a) && jv_is_list(b)) {
        if ((a.t == JV_LIST && (a.flags & JF_GEN)) || (b.t == JV_LIST && (b.flags & JF_GEN)))
            return a.t == b.t && a.l == b.l;
        /* tuple != list in Python */
        if ((a.t == JV_LIST && (a.flags & JF_TUPLE)) != (b.t == JV_LIST && (b.flags & JF_TUPLE)))
            return false;
        int64_t na = a.t == JV_LIST ? a.l->n : (int64_t)json_array_size(a.j);
        int64_t nb = b.t == JV_LIST ? b.l->n : (int64_t)json_array_size(b.j);
        if (na != nb)
            return false;
        for (int64_t i = 0; i < na; i++)
            if (!jv_eq(jv_list_at(a, i), jv_list_at(b, i)))
                return false;
        return true;
    }
    if (jv_is_dict(a) && jv_is_dict(b)) {
        if (a.t == JV_JSON && b.t == JV_JSON)
            return json_equal(a.j, b.j);
        int64_t na = a.t == JV_DICT ? a.d->n : (int64_t)json_object_size(a.j);
        int64_t nb = b.t == JV_DICT ? b.d->n : (int64_t)json_object_size(b.j);
        if (na != nb)
            return false;
        /* compare through a's items looked up in b */
        if (a.t == JV_DICT) {
            for (uint32_t i = 0; i < a.d->n; i++) {
                jv bv;
                bool found = false;
                if (b.t == JV_DICT) {
                    for (uint32_t k = 0; k < b.d->n && !found; k++)
                        if (key_eq(a.d->k[i], b.d->k[k])) {
                            found = true;
                            bv = b.d->v[k];
                        }
                } else if (a.d->k[i].t == JV_STR) {
                    char key[256];
                    if (a.d->k[i].n >= sizeof key)
                        return false;
                    memcpy(key, a.d->k[i].s, a.d->k[i].n);
                    key[a.d->k[i].n] = 0;
                    json_t *x = json_object_get(b.j, key);
                    if (x) {
                        found = true;
                        bv = jv_from_json(x);
                    }
                }
                if (!found || !jv_eq(a.d->v[i], bv))
                    return false;
            }
            return true;
        }
        return jv_eq(b, a);
    }
    if (a.t == JV_NS && b.t == JV_NS)
        return a.d == b.d;
    if (a.t == JV_FUNC && b.t == JV_FUNC)
        return a.fn == b.fn;
    return false;
}

static int cmp3(double a, double b) { return a < b ? -1 : a > b ? 1 : 0; }

int jv_cmp(jrender *R, jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return a.i < b.i ? -1 : a.i > b.i;
        return cmp3(num(a), num(b));
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        /* UTF-8 byte order equals code point order */
        int c = memcmp(a.s, b.s, CV_MIN(a.n, b.n));
        if (c)
            return c < 0 ? -1 : 1;
        return a.n < b.n ? -1 : a.n > b.n;
    }
    if (jv_is_list(a) && jv_is_list(b)) {
        int64_t na = jv_len(R, a), nb = jv_len(R, b);
        for (int64_t i = 0; i < na && i < nb; i++) {
            jv x = jv_list_at(a, i), y = jv_list_at(b, i);
            if (!jv_eq(x, y))
                return jv_cmp(R, x, y);
        }
        return na < nb ? -1 : na > nb;
    }
    if (a.t == JV_UNDEF)
        jfail_undef(R, a);
    if (b.t == JV_UNDEF)
        jfail_undef(R, b);
    jfail(R, CV_EINVAL, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

jv jv_list_at(jv v, int64_t i)
{
    if (v.t == JV_LIST)
        return v.l->v[i];
    return jv_from_json(json_array_get(v.j, (size_t)i));
}

void jv_iter(jrender *R, jv v, jv **items, int64_t *n)
{
    switch (v.t) {
    case JV_UNDEF:
        *items = NULL;
        *n = 0;
        return;
    case JV_LIST:
        *items = v.l->v;
        *n = v.l->n;
        return;
    case JV_DICT:
        *items = v.d->k;
        *n = v.d->n;
        return;
    case JV_JSON:
        if (json_is_array(v.j)) {
            size_t k = json_array_size(v.j);
            jv *a = jalloc(R, (k ? k : 1) * sizeof(jv));
            for (size_t i = 0; i < k; i++)
                a[i] = jv_from_json(json_array_get(v.j, i));
            *items = a;
            *n = (int64_t)k;
        } else {
            size_t k = json_object_size(v.j);
            jv *a = jalloc(R, (k ? k : 1) * sizeof(jv));
            const char *key;
            json_t *x;
            size_t i = 0;
            json_object_foreach(v.j, key, x) a[i++] = jv_strn(key, strlen(key));
            *items = a;
            *n = (int64_t)k;
        }
        return;
    case JV_STR: {
        size_t k = utf8_count(v.s, v.n);
        jv *a = jalloc(R, (k ? k : 1) * sizeof(jv));
        size_t i = 0, p = 0;
        while (p < v.n) {
            size_t q = p + 1;
            while (q < v.n && ((unsigned char)v.s[q] & 0xC0) == 0x80)
                q++;
            a[i++] = jv_strn(v.s + p, q - p);
            p = q;
        }
        *items = a;
        *n = (int64_t)k;
        return;
    }
    default:
        jfail(R, CV_EINVAL, "'%s' object is not iterable", jv_type_name(v));
    }
}

jv jv_dict_get(jrender *R, jv d, jv key, bool *found)
{
    *found = false;
    if (d.t == JV_DICT || d.t == JV_NS) {
        for (uint32_t i = 0; i < d.d->n; i++)
            if (key_eq(d.d->k[i], key)) {
                *found = true;
                return d.d->v[i];
            }
        return jv_undef(NULL);
    }
    if (d.t == JV_JSON && json_is_object(d.j) && key.t == JV_STR) {
        json_t *x;
        if (key.n < 128 && memchr(key.s, 0, key.n) == NULL) {
            char k[128];
            memcpy(k, key.s, key.n);
            k[key.n] = 0;
            x = json_object_get(d.j, k);
        } else {
            char *k = jalloc(R, key.n + 1);
            memcpy(k, key.s, key.n);
            x = memchr(key.s, 0, key.n) ? NULL : json_object_get(d.j, k);
        }
        if (x) {
            *found = true;
            return jv_from_json(x);
        }
    }
    return jv_undef(NULL);
}

void jv_dict_items(jrender *R, jv d, jv **keys, jv **vals, int64_t *n)
{
    if (d.t == JV_DICT || d.t == JV_NS) {
        *keys = d.d->k;
        *vals = d.d->v;
        *n = d.d->n;
        return;
    }
    size_t k = json_object_size(d.j);
    jv *ka = jalloc(R, (k ? k : 1) * sizeof(jv));
    jv *va = jalloc(R, (k ? k : 1) * sizeof(jv));
    const char *key;
    json_t *x;
    size_t i = 0;
    json_object_foreach(d.j, key, x)
    {
        ka[i] = jv_strn(key, strlen(key));
        va[i++] = jv_from_json(x);
    }
    *keys = ka;
    *vals = va;
    *n = (int64_t)k;
}

/* ---- str() and repr() ---- */

void py_float_repr(double f, char *out, size_t cap)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = buf;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    while (*p && *p != 'e') {
        if (*p != '.')
            digits[nd++] = *p;
        p++;
    }
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1; /* value = 0.digits * 10^decpt */
    char *o = out;
    size_t left = cap;
#define EMIT(...) do { int k_ = snprintf(o, left, __VA_ARGS__); if (k_ > 0 && (size_t)k_ < left) { o += k_; left -= (size_t)k_; } } while (0)
    if (neg)
        EMIT("-");
    if (decpt > 16 || decpt < -3) {
        EMIT("%c", digits[0]);
        if (nd > 1)
            EMIT(".%s", digits + 1);
        EMIT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        EMIT("0.");
        for (int i = 0; i < -decpt; i++)
            EMIT("0");
        EMIT("%s", digits);
    } else if (decpt >= nd) {
        EMIT("%s", digits);
        for (int i = nd; i < decpt; i++)
            EMIT("0");
        EMIT(".0");
    } else {
        EMIT("%.*s.%s", decpt, digits, digits + decpt);
    }
#undef EMIT
}

static bool py_printable(uint32_t cp)
{
    if (cp == ' ')
        return true;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    switch (c) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return false;
    default:
        return true;
    }
}

static void str_repr(cv_buf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    cv_buf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (c == (unsigned char)q || c == '\\') {
                cv_buf_putc(b, '\\');
                cv_buf_putc(b, (char)c);
            } else if (c == '\n') cv_buf_puts(b, "\\n");
            else if (c == '\r') cv_buf_puts(b, "\\r");
            else if (c == '\t') cv_buf_puts(b, "\\t");
            else if (c < 0x20 || c == 0x7f) cv_buf_printf(b, "\\x%02x", c);
            else cv_buf_putc(b, (char)c);
            i++;
            continue;
        }
        uint32_t cp;
        int k = cv_utf8_decode(s + i, n - i, &cp);
        if (k < 0) {
            cv_buf_printf(b, "\\x%02x", c);
            i++;
            continue;
        }
        if (py_printable(cp))
            cv_buf_append(b, s + i, (size_t)k);
        else if (cp < 0x100)
            cv_buf_printf(b, "\\x%02x", cp);
        else if (cp < 0x10000)
            cv_buf_printf(b, "\\u%04x", cp);
        else
            cv_buf_printf(b, "\\U%08x", cp);
        i += (size_t)k;
    }
    cv_buf_putc(b, q);
}

void jv_repr_append(jrender *R, cv_buf *b, jv v, int depth)
{
    if (depth > CV_MAX_JSON_DEPTH + 8)
        jfail(R, CV_ELIMIT, "value nested deeper than %d levels", CV_MAX_JSON_DEPTH + 8);
    switch (v.t) {
    case JV_STR:
        if (v.flags & JF_SAFE) {
            cv_buf_puts(b, "Markup(");
            str_repr(b, v.s, v.n);
            cv_buf_putc(b, ')');
        } else {
            str_repr(b, v.s, v.n);
        }
        return;
    case JV_UNDEF:
        cv_buf_puts(b, "Undefined");
        return;
    case JV_LIST: case JV_JSON:
        if (v.t == JV_LIST && (v.flags & JF_GEN)) {
            cv_buf_puts(b, "<generator object>");
            return;
        }
        if (jv_is_list(v)) {
            bool tuple = v.t == JV_LIST && (v.flags & JF_TUPLE);
            int64_t n = jv_len(R, v);
            cv_buf_putc(b, tuple ? '(' : '[');
            for (int64_t i = 0; i < n; i++) {
                if (i)
                    cv_buf_puts(b, ", ");
                jv_repr_append(R, b, jv_list_at(v, i), depth + 1);
            }
            if (tuple && n == 1)
                cv_buf_putc(b, ',');
            cv_buf_putc(b, tuple ? ')' : ']');
            return;
        }
        /* fall through: JSON object */
        /* FALLTHROUGH */
    case JV_DICT: case JV_NS: {
        jv *ks, *vs;
        int64_t n;
        jv_dict_items(R, v, &ks, &vs, &n);
        cv_buf_puts(b, v.t == JV_NS ? "<Namespace {" : "{");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                cv_buf_puts(b, ", ");
            jv_repr_append(R, b, ks[i], depth + 1);
            cv_buf_puts(b, ": ");
            jv_repr_append(R, b, vs[i], depth + 1);
        }
        cv_buf_puts(b, v.t == JV_NS ? "}>" : "}");
        return;
    }
    default:
        jv_str_append(R, b, v);
    }
}

void jv_str_append(jrender *R, cv_buf *b, jv v)
{
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF:
        if (v.flags & JF_UNSAFE)
            return; /* an unsafe attribute prints as nothing, like any Undefined */
        return;
    case JV_NONE: cv_buf_puts(b, "None"); return;
    case JV_BOOL: cv_buf_puts(b, v.i ? "True" : "False"); return;
    case JV_INT: cv_buf_printf(b, "%lld", (long long)v.i); return;
    case JV_FLOAT:
        py_float_repr(v.f, tmp, sizeof tmp);
        cv_buf_puts(b, tmp);
        return;
    case JV_STR: cv_buf_append(b, v.s, v.n); return;
    case JV_FUNC:
        if (v.fn->kind == FN_MACRO)
            cv_buf_printf(b, "<Macro '%s'>", v.fn->name ? v.fn->name : "caller");
        else
            cv_buf_printf(b, "<built-in method %s>", v.fn->name ? v.fn->name : "?");
        return;
    default:
        jv_repr_append(R, b, v, 0);
    }
}

jv jv_to_str(jrender *R, jv v)
{
    if (v.t == JV_STR) {
        v.flags = 0;
        return v;
    }
    cv_buf *b = jbuf_get(R);
    jv_str_append(R, b, v);
    jv s = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return s;
}
