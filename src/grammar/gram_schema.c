/* gram_schema.c — JSON Schema to grammar expressions. Objects, arrays and
 * $ref targets become rules (so recursion works and each nested value is a
 * frame of its own); plain strings, numbers and the "any value" grammar are
 * shared rules, so every string of a schema shares one token-mask cache.
 * What is enforced, and how, is listed in docs/grammar.md; the policy for
 * the rest is: a keyword corvid cannot enforce is ignored with a warning (the
 * grammar is looser there, never stricter), a construct it cannot even read
 * (a remote $ref, an unsupported regex feature) is an error naming it and
 * its JSON pointer. Serialisation choices (key order = declared order, no
 * exponent in bounded numbers, at most MAX_DIGITS (18) integer digits,
 * bounded whitespace, one escape form per character inside patterns) narrow
 * how a value is written, never which values can be written. */
#include <math.h>
#include <stdlib.h>

#include "grammar/grammar_int.h"

/* Integer digits of an unbounded number: 18 keeps every integer literal
 * inside int64, which is what jansson (and so the tool-call parsers and the
 * servers' argument handling) can read back; 19+ digits fail to parse there. */
#define MAX_DIGITS 18
#define MAX_INDENT 32

typedef struct memo { const json_t *node; int rule; } memo;
typedef struct prim { char *key; int rule; } prim;

struct gschema {
    gbuild *b;
    const json_t *root;
    cv_err *err;
    int rc;
    memo *memo;
    int n_memo, cap_memo;
    prim *prims;
    int n_prims, cap_prims;
    json_t *owned; /* merged allOf schemas, kept alive until the end */
    int depth;
    char path[512];
    size_t path_len;
};

static gx *value(gschema *c, const json_t *s);

gschema *gs_new(gbuild *b, cv_err *err)
{
    gschema *c = cv_xcalloc(1, sizeof *c);
    c->b = b;
    c->err = err;
    c->owned = json_array();
    return c;
}

void gs_free(gschema *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_prims; i++)
        free(c->prims[i].key);
    free(c->prims);
    free(c->memo);
    json_decref(c->owned);
    free(c);
}

void gs_set_root(gschema *c, const json_t *root, const char *where)
{
    c->root = root;
    snprintf(c->path, sizeof c->path, "%s", where ? where : "");
    c->path_len = strlen(c->path);
}

int gs_status(const gschema *c) { return c->rc; }

static int sfail(gschema *c, int code, const char *fmt, ...) CV_PRINTF(3, 4);
static int sfail(gschema *c, int code, const char *fmt, ...)
{
    if (c->rc)
        return c->rc;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rc = cv_err_set(c->err, code, "schema at '%s': %s", c->path_len ? c->path : "#", msg);
    return c->rc;
}

static void warn(gschema *c, const char *fmt, ...) CV_PRINTF(2, 3);
static void warn(gschema *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gb_warn(c->b, "schema at '%s': %s", c->path_len ? c->path : "#", msg);
}

static size_t path_push(gschema *c, const char *seg)
{
    size_t save = c->path_len;
    int n = snprintf(c->path + c->path_len, sizeof c->path - c->path_len, "/%s", seg);
    if (n > 0)
        c->path_len = CV_MIN(sizeof c->path - 1, c->path_len + (size_t)n);
    return save;
}

static void path_pop(gschema *c, size_t save)
{
    c->path_len = save;
    c->path[save] = 0;
}

/* ---- small expressions ---- */

static gbuild *B(gschema *c) { return c->b; }

gx *gs_ws(gschema *c)
{
    /* up to two blanks, then optionally one line break and an indent */
    gbuild *b = B(c);
    uint64_t bits[4] = { 0 };
    bits[0] |= 1ull << ' ' | 1ull << '\t';
    gx *blank = gx_byteset(b, bits);
    gx *nl = gx_seq3(b, gx_opt(b, gx_litz(b, "\r")), gx_litz(b, "\n"), gx_rep(b, blank, 0, MAX_INDENT));
    return gx_seq2(b, gx_rep(b, blank, 0, 2), gx_opt(b, nl));
}

static gx *re(gschema *c, const char *pattern, bool json)
{
    gx *x = NULL;
    cv_err e;
    if (gx_regex(B(c), pattern, strlen(pattern), json, true, &x, &e)) {
        sfail(c, e.code, "internal pattern: %s", e.msg);
        return gx_none(B(c));
    }
    return x;
}

static gx *digits(gschema *c, int min, int max) { return gx_rep(B(c), gx_byterange(B(c), '0', '9'), min, max); }

gx *gs_json_string_lit(gschema *c, const char *s)
{
    cv_buf t = { 0 };
    cv_buf_put_json_str(&t, s, strlen(s));
    gx *x = gx_lit(B(c), t.data, t.len);
    cv_buf_free(&t);
    return x;
}

static gx *json_lit(gschema *c, const json_t *v)
{
    char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!d)
        return gx_none(B(c));
    gx *x = gx_litz(B(c), d);
    free(d);
    return x;
}

/* ---- shared rules ---- */

static int prim_find(gschema *c, const char *key)
{
    for (int i = 0; i < c->n_prims; i++)
        if (!strcmp(c->prims[i].key, key))
            return c->prims[i].rule;
    return -1;
}

static int prim_add(gschema *c, const char *key, const char *name)
{
    int r = gb_rule_new(B(c), name);
    if (c->n_prims == c->cap_prims) {
        c->cap_prims = c->cap_prims ? c->cap_prims * 2 : 16;
        c->prims = cv_xrealloc(c->prims, (size_t)c->cap_prims * sizeof *c->prims);
    }
    c->prims[c->n_prims].key = cv_xstrdup(key);
    c->prims[c->n_prims++].rule = r;
    return r;
}

/* One character of a JSON string: any code point, escapes of every form
 * jansson reads back (no \u0000, surrogates only as valid pairs). */
static gx *json_char(gschema *c)
{
    gbuild *b = B(c);
    uint32_t safe[] = { 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x10FFFF };
    gx *raw = gx_cps(b, safe, 3);
    gx *simple = gx_seq2(b, gx_litz(b, "\\"), re(c, "[\"\\\\/bfnrt]", false));
    gx *u = re(c, "\\\\u([1-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|0([1-9a-fA-F][0-9a-fA-F]{2}|0([1-9a-fA-F][0-9a-fA-F]|0[1-9a-fA-F]))"
                  "|[dD][0-7][0-9a-fA-F]{2}|[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2})", false);
    gx *k[3] = { raw, simple, u };
    return gx_alt(b, 3, k);
}

static gx *string_rule(gschema *c, int min, int max)
{
    char key[64];
    snprintf(key, sizeof key, "string{%d,%d}", min, max);
    int r = prim_find(c, key);
    if (r < 0) {
        r = prim_add(c, key, min == 0 && max < 0 ? "string" : key);
        gx *body = gx_seq3(B(c), gx_litz(B(c), "\""), gx_rep(B(c), json_char(c), min, max), gx_litz(B(c), "\""));
        gb_rule_set(B(c), r, body);
    }
    return gx_call(B(c), r);
}

static gx *any_value(gschema *c);

static gx *number_plain(gschema *c, bool integer)
{
    const char *key = integer ? "integer" : "number";
    int r = prim_find(c, key);
    if (r < 0) {
        r = prim_add(c, key, key);
        gx *body = integer ? re(c, "-?(0|[1-9][0-9]{0,17})", false)
                           : re(c, "-?(0|[1-9][0-9]{0,17})(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,2})?", false);
        gb_rule_set(B(c), r, body);
    }
    return gx_call(B(c), r);
}

static gx *any_value(gschema *c)
{
    int r = prim_find(c, "any");
    if (r >= 0)
        return gx_call(B(c), r);
    gbuild *b = B(c);
    r = prim_add(c, "any", "any");
    int ro = prim_add(c, "any-object", "any-object");
    int ra = prim_add(c, "any-array", "any-array");
    gx *ws = gs_ws(c);
    gx *str = string_rule(c, 0, -1);
    gx *kv = gx_seq(b, 5, (gx *[]){ str, ws, gx_litz(b, ":"), ws, gx_call(b, r) });
    gx *sep = gx_seq3(b, ws, gx_litz(b, ","), ws);
    gx *obj = gx_seq(b, 5, (gx *[]){ gx_litz(b, "{"), ws,
                                     gx_opt(b, gx_seq2(b, kv, gx_rep(b, gx_seq2(b, sep, kv), 0, -1))), ws,
                                     gx_litz(b, "}") });
    gb_rule_set(b, ro, obj);
    gx *el = gx_call(b, r);
    gx *arr = gx_seq(b, 5, (gx *[]){ gx_litz(b, "["), ws,
                                     gx_opt(b, gx_seq2(b, el, gx_rep(b, gx_seq2(b, sep, el), 0, -1))), ws,
                                     gx_litz(b, "]") });
    gb_rule_set(b, ra, arr);
    gx *alts[7] = { gx_call(b, ro), gx_call(b, ra), str, number_plain(c, false), gx_litz(b, "true"),
                    gx_litz(b, "false"), gx_litz(b, "null") };
    gb_rule_set(b, r, gx_alt(b, 7, alts));
    return gx_call(b, r);
}

/* ---- numbers ---- */

static void u64_str(uint64_t v, char *out) { snprintf(out, 24, "%llu", (unsigned long long)v); }

/* Decimal strings of equal length n with a <= z. */
static gx *same_len(gschema *c, const char *a, const char *z, int n)
{
    gbuild *b = B(c);
    if (n == 0)
        return gx_empty(b);
    bool a_zero = true, z_nine = true;
    for (int i = 1; i < n; i++) {
        a_zero &= a[i] == '0';
        z_nine &= z[i] == '9';
    }
    if (a[0] == z[0])
        return gx_seq2(b, gx_lit(b, a, 1), same_len(c, a + 1, z + 1, n - 1));
    if (a_zero && z_nine)
        return gx_seq2(b, gx_byterange(b, (uint8_t)a[0], (uint8_t)z[0]), digits(c, n - 1, n - 1));
    gx_list alts = { 0 };
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    gxl_push(b, &alts, gx_seq2(b, gx_lit(b, a, 1), same_len(c, a + 1, nines, n - 1)));
    if (a[0] + 1 <= z[0] - 1)
        gxl_push(b, &alts, gx_seq2(b, gx_byterange(b, (uint8_t)(a[0] + 1), (uint8_t)(z[0] - 1)), digits(c, n - 1, n - 1)));
    gxl_push(b, &alts, gx_seq2(b, gx_lit(b, z, 1), same_len(c, zeros, z + 1, n - 1)));
    gx *x = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return x;
}

/* Unsigned integers in [lo, hi] written without leading zeros; hi_inf:
 * unbounded above (up to MAX_DIGITS digits). */
static gx *uint_range(gschema *c, uint64_t lo, uint64_t hi, bool hi_inf)
{
    gbuild *b = B(c);
    if (!hi_inf && lo > hi)
        return gx_none(b);
    char ls[24], hs[24];
    u64_str(lo, ls);
    u64_str(hi, hs);
    int ll = (int)strlen(ls), hl = hi_inf ? MAX_DIGITS : (int)strlen(hs);
    gx_list alts = { 0 };
    for (int L = ll; L <= hl; L++) {
        char a[24], z[24];
        if (L == ll) {
            memcpy(a, ls, (size_t)L);
        } else {
            a[0] = '1';
            memset(a + 1, '0', (size_t)L - 1);
        }
        if (!hi_inf && L == hl) {
            memcpy(z, hs, (size_t)L);
        } else {
            memset(z, '9', (size_t)L);
        }
        if (hi_inf && L > ll) {
            /* every longer length at once */
            gxl_push(b, &alts, gx_seq2(b, gx_byterange(b, '1', '9'), digits(c, L - 1, MAX_DIGITS - 1)));
            break;
        }
        gxl_push(b, &alts, same_len(c, a, z, L));
    }
    gx *x = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return x;
}

typedef struct bound { bool has; double v; bool excl; } bound;

static bool read_num(const json_t *v, double *out)
{
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return true;
    }
    return false;
}

static void read_bounds(gschema *c, const json_t *s, bound *lo, bound *hi)
{
    double v;
    memset(lo, 0, sizeof *lo);
    memset(hi, 0, sizeof *hi);
    if (read_num(json_object_get(s, "minimum"), &v))
        *lo = (bound){ true, v, false };
    if (read_num(json_object_get(s, "maximum"), &v))
        *hi = (bound){ true, v, false };
    const json_t *em = json_object_get(s, "exclusiveMinimum"), *eM = json_object_get(s, "exclusiveMaximum");
    if (json_is_boolean(em)) { /* draft 4 */
        if (json_is_true(em) && lo->has)
            lo->excl = true;
    } else if (read_num(em, &v) && (!lo->has || v >= lo->v)) {
        *lo = (bound){ true, v, true };
    }
    if (json_is_boolean(eM)) {
        if (json_is_true(eM) && hi->has)
            hi->excl = true;
    } else if (read_num(eM, &v) && (!hi->has || v <= hi->v)) {
        *hi = (bound){ true, v, true };
    }
    if (json_object_get(s, "multipleOf")) {
        double m;
        if (!(read_num(json_object_get(s, "multipleOf"), &m) && m == 1.0))
            warn(c, "multipleOf is not enforced");
    }
}

#define BIG 1e18 /* magnitudes past this are treated as unbounded (MAX_DIGITS) */

static gx *integer_value(gschema *c, const json_t *s)
{
    bound lo, hi;
    read_bounds(c, s, &lo, &hi);
    if ((!lo.has || fabs(lo.v) >= BIG) && (!hi.has || fabs(hi.v) >= BIG))
        return number_plain(c, true);
    gbuild *b = B(c);
    /* integer bounds: round inward, which is exact for integers */
    bool lo_inf = !lo.has || lo.v <= -BIG, hi_inf = !hi.has || hi.v >= BIG;
    double l = 0, h = 0;
    if (!lo_inf) {
        l = ceil(lo.v);
        if (lo.excl && l == lo.v)
            l += 1;
    }
    if (!hi_inf) {
        h = floor(hi.v);
        if (hi.excl && h == hi.v)
            h -= 1;
    }
    if (!lo_inf && !hi_inf && l > h) {
        sfail(c, CV_EINVAL, "no integer lies within minimum/maximum");
        return gx_none(b);
    }
    gx_list alts = { 0 };
    if (hi_inf || h >= 0) {
        uint64_t a = lo_inf || l < 0 ? 0 : (uint64_t)l;
        gxl_push(b, &alts, uint_range(c, a, hi_inf ? 0 : (uint64_t)h, hi_inf));
    }
    if (lo_inf || l < 0) {
        uint64_t a = !hi_inf && h < 0 ? (uint64_t)(-h) : 1;
        gx *m = uint_range(c, a, lo_inf ? 0 : (uint64_t)(-l), lo_inf);
        gxl_push(b, &alts, gx_seq2(b, gx_litz(b, "-"), m));
    }
    gx *x = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return x;
}

/* A non-negative magnitude m = i.f with integral bounds (hi_inf: none). */
static gx *magnitude(gschema *c, uint64_t lo, bool lo_excl, uint64_t hi, bool hi_excl, bool hi_inf)
{
    gbuild *b = B(c);
    gx *frac = gx_opt(b, re(c, "\\.[0-9]{1,20}", false));
    gx *zfrac = gx_opt(b, re(c, "\\.0{1,20}", false));
    gx *nzfrac = re(c, "\\.0{0,19}[1-9][0-9]{0,19}", false);
    gx_list alts = { 0 };
    char ls[24];
    u64_str(lo, ls);
    if (hi_inf) {
        gxl_push(b, &alts, gx_seq2(b, gx_litz(b, ls), lo_excl ? nzfrac : frac));
        gxl_push(b, &alts, gx_seq2(b, uint_range(c, lo + 1, 0, true), frac));
    } else if (lo == hi) {
        if (!lo_excl && !hi_excl)
            gxl_push(b, &alts, gx_seq2(b, gx_litz(b, ls), zfrac));
    } else if (lo < hi) {
        char hs[24];
        u64_str(hi, hs);
        gxl_push(b, &alts, gx_seq2(b, gx_litz(b, ls), lo_excl ? nzfrac : frac));
        if (lo + 1 <= hi - 1)
            gxl_push(b, &alts, gx_seq2(b, uint_range(c, lo + 1, hi - 1, false), frac));
        if (!hi_excl)
            gxl_push(b, &alts, gx_seq2(b, gx_litz(b, hs), zfrac));
    }
    gx *x = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return x;
}

static gx *number_value(gschema *c, const json_t *s)
{
    bound lo, hi;
    read_bounds(c, s, &lo, &hi);
    if ((!lo.has || fabs(lo.v) >= BIG) && (!hi.has || fabs(hi.v) >= BIG))
        return number_plain(c, false);
    gbuild *b = B(c);
    bool lo_inf = !lo.has || lo.v <= -BIG, hi_inf = !hi.has || hi.v >= BIG;
    double l = lo.v, h = hi.v;
    if ((!lo_inf && l != floor(l)) || (!hi_inf && h != floor(h))) {
        warn(c, "fractional minimum/maximum are enforced only to the enclosing integers");
        if (!lo_inf && l != floor(l)) {
            l = floor(l);
            lo.excl = false;
        }
        if (!hi_inf && h != floor(h)) {
            h = ceil(h);
            hi.excl = false;
        }
    }
    if (!lo_inf && !hi_inf && (l > h || (l == h && (lo.excl || hi.excl)))) {
        sfail(c, CV_EINVAL, "no number lies within minimum/maximum");
        return gx_none(b);
    }
    gx_list alts = { 0 };
    if (hi_inf || h >= 0) {
        bool from_zero = lo_inf || l < 0;
        uint64_t a = from_zero ? 0 : (uint64_t)l;
        gxl_push(b, &alts, magnitude(c, a, from_zero ? false : lo.excl, hi_inf ? 0 : (uint64_t)h, hi.excl, hi_inf));
    }
    if (lo_inf || l < 0) {
        /* negative values: -m, m in (max(-h, 0), -l] */
        bool h_neg = !hi_inf && h < 0;
        uint64_t a = h_neg ? (uint64_t)(-h) : 0;
        bool a_excl = h_neg ? hi.excl : true;
        gx *m = magnitude(c, a, a_excl, lo_inf ? 0 : (uint64_t)(-l), lo.excl, lo_inf);
        gxl_push(b, &alts, gx_seq2(b, gx_litz(b, "-"), m));
    }
    gx *x = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return x;
}

/* ---- strings ---- */

static const struct { const char *name, *re; } formats[] = {
    { "date", "([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              "|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])"
              "|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)" },
    { "time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])" },
    { "date-time", NULL }, /* date T time, built below */
    { "uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}" },
    { "email", "[A-Za-z0-9_%+-]{1,32}(\\.[A-Za-z0-9_%+-]{1,32}){0,3}@[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
               "(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){1,3}" },
    { "hostname", "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,4}" },
    { "ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])" },
    { "uri", "https?://[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,4}"
             "(/[A-Za-z0-9._~-]{0,32}){0,8}(\\?[A-Za-z0-9._~=&-]{0,64})?" },
};

static const char *format_re(const char *name, char *buf, size_t cap)
{
    if (!strcmp(name, "date-time")) {
        snprintf(buf, cap, "(%s)T(%s)", formats[0].re, formats[1].re);
        return buf;
    }
    for (size_t i = 0; i < CV_ARRAY_LEN(formats); i++)
        if (formats[i].re && !strcmp(formats[i].name, name))
            return formats[i].re;
    return NULL;
}

static int get_count(gschema *c, const json_t *s, const char *key, int def)
{
    const json_t *v = json_object_get(s, key);
    if (!v)
        return def;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        sfail(c, CV_EINVAL, "%s must be a non-negative integer", key);
        return def;
    }
    json_int_t n = json_integer_value(v);
    if (n > CV_MAX_GRAMMAR_REPEAT) {
        if (!strncmp(key, "max", 3)) {
            warn(c, "%s %lld is above CV_MAX_GRAMMAR_REPEAT (%d) and is not enforced", key, (long long)n,
                 CV_MAX_GRAMMAR_REPEAT);
            return -1;
        }
        sfail(c, CV_ELIMIT, "%s %lld is above CV_MAX_GRAMMAR_REPEAT (%d)", key, (long long)n, CV_MAX_GRAMMAR_REPEAT);
        return def;
    }
    return (int)n;
}

static gx *string_value(gschema *c, const json_t *s, bool raw, const char *term)
{
    gbuild *b = B(c);
    const char *pattern = json_string_value(json_object_get(s, "pattern"));
    const char *format = json_string_value(json_object_get(s, "format"));
    int min = get_count(c, s, "minLength", 0), max = get_count(c, s, "maxLength", -1);
    if (max >= 0 && max < min) {
        sfail(c, CV_EINVAL, "maxLength %d < minLength %d", max, min);
        return gx_none(b);
    }
    gx *inner = NULL;
    if (pattern) {
        cv_err e;
        if (gx_regex(b, pattern, strlen(pattern), !raw, false, &inner, &e)) {
            sfail(c, e.code, "%s", e.msg);
            return gx_none(b);
        }
        if (min > 0 || max >= 0)
            warn(c, "minLength/maxLength are not enforced together with pattern");
        if (format)
            warn(c, "format is not enforced together with pattern");
    } else if (format) {
        char buf[1024];
        const char *fre = format_re(format, buf, sizeof buf);
        if (fre) {
            inner = re(c, fre, !raw);
            if (min > 0 || max >= 0)
                warn(c, "minLength/maxLength are not enforced together with format");
        } else {
            warn(c, "format '%s' is not enforced", format);
        }
    }
    if (raw) {
        if (!inner) {
            if (min > 0 || max >= 0) {
                uint32_t r[] = { 0, '<' - 1, '<' + 1, 0x10FFFF };
                inner = gx_rep(b, gx_cps(b, r, 2), min, max);
            } else {
                inner = gx_until(b, term, strlen(term));
            }
        }
        return inner;
    }
    if (!inner)
        return string_rule(c, min, max);
    return gx_seq3(b, gx_litz(b, "\""), inner, gx_litz(b, "\""));
}

/* ---- $ref ---- */

static const json_t *resolve_ref(gschema *c, const char *ref)
{
    if (ref[0] != '#') {
        sfail(c, CV_EUNSUPPORTED, "$ref '%s': only local references (#...) are supported", ref);
        return NULL;
    }
    const json_t *cur = c->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') {
            sfail(c, CV_EUNSUPPORTED, "$ref '%s': anchors ($anchor, $id) are not supported", ref);
            return NULL;
        }
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof seg) {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) {
                ch = *p == '0' ? '~' : '/';
                p++;
            }
            seg[n++] = ch;
        }
        seg[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(seg, &end, 10);
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = NULL;
        }
        if (!cur) {
            sfail(c, CV_EINVAL, "$ref '%s' does not resolve", ref);
            return NULL;
        }
    }
    return cur;
}

/* ---- objects and arrays ---- */

static bool is_annotation(const char *k)
{
    static const char *const ann[] = { "title", "description", "default", "examples", "$schema", "$id", "$comment",
                                       "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                       "markdownDescription", "x-google-enum-descriptions", "discriminator",
                                       "example", "id", "strict" };
    for (size_t i = 0; i < CV_ARRAY_LEN(ann); i++)
        if (!strcmp(k, ann[i]))
            return true;
    return k[0] == 'x' && k[1] == '-';
}

static gx *object_body(gschema *c, const json_t *s)
{
    gbuild *b = B(c);
    gx *ws = gs_ws(c);
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        sfail(c, CV_EINVAL, "properties must be an object");
        return gx_none(b);
    }
    if (req && !json_is_array(req)) {
        sfail(c, CV_EINVAL, "required must be an array");
        return gx_none(b);
    }
    if (json_object_get(s, "patternProperties"))
        warn(c, "patternProperties is not enforced (no such properties are generated)");
    if (json_object_get(s, "dependentRequired") || json_object_get(s, "dependencies") ||
        json_object_get(s, "dependentSchemas"))
        warn(c, "dependentRequired/dependentSchemas are not enforced");
    gx *sep = gx_seq3(b, ws, gx_litz(b, ","), ws);
    int n_props = props ? (int)json_object_size(props) : 0;
    /* required names that have no properties entry get the additional schema */
    const json_t *extra_schema = addl && json_is_object(addl) ? addl : NULL;
    int n_req_extra = 0;
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) {
            sfail(c, CV_EINVAL, "required entries must be strings");
            return gx_none(b);
        }
        if (!props || !json_object_get(props, json_string_value(r)))
            n_req_extra++;
    }
    if (n_props > 0 || n_req_extra > 0) {
        int n = n_props + n_req_extra;
        gx **kids = cv_xcalloc((size_t)n, sizeof *kids);
        bool *need = cv_xcalloc((size_t)n, sizeof *need);
        int k = 0;
        const char *key;
        json_t *ps;
        json_object_foreach((json_t *)props, key, ps) {
            size_t save = path_push(c, "properties");
            size_t save2 = path_push(c, key);
            gx *v = value(c, ps);
            path_pop(c, save2);
            path_pop(c, save);
            kids[k] = gx_seq(b, 5, (gx *[]){ gs_json_string_lit(c, key), ws, gx_litz(b, ":"), ws, v });
            json_array_foreach(req, i, r) if (!strcmp(json_string_value(r), key)) need[k] = true;
            k++;
        }
        json_array_foreach(req, i, r) {
            const char *name = json_string_value(r);
            if (props && json_object_get(props, name))
                continue;
            if (json_is_false(addl)) {
                sfail(c, CV_EINVAL, "required property '%s' is forbidden by additionalProperties false", name);
                break;
            }
            gx *v = extra_schema ? value(c, extra_schema) : any_value(c);
            kids[k] = gx_seq(b, 5, (gx *[]){ gs_json_string_lit(c, name), ws, gx_litz(b, ":"), ws, v });
            need[k++] = true;
        }
        gx *members = gx_members(b, k, kids, need, sep);
        free(kids);
        free(need);
        if (json_object_get(s, "minProperties") || json_object_get(s, "maxProperties"))
            warn(c, "minProperties/maxProperties are not enforced on objects with declared properties");
        return gx_seq(b, 5, (gx *[]){ gx_litz(b, "{"), ws, members, ws, gx_litz(b, "}") });
    }
    if (json_is_false(addl))
        return gx_seq3(b, gx_litz(b, "{"), ws, gx_litz(b, "}"));
    /* a map: any keys, values per additionalProperties */
    gx *v = extra_schema ? value(c, extra_schema) : any_value(c);
    gx *keyx = string_rule(c, 0, -1);
    const json_t *pn = json_object_get(s, "propertyNames");
    if (json_is_object(pn)) {
        size_t save = path_push(c, "propertyNames");
        keyx = string_value(c, pn, false, NULL);
        if (json_object_get(pn, "enum") || json_object_get(pn, "const"))
            keyx = value(c, pn);
        path_pop(c, save);
    }
    int min = get_count(c, s, "minProperties", 0), max = get_count(c, s, "maxProperties", -1);
    gx *kv = gx_seq(b, 5, (gx *[]){ keyx, ws, gx_litz(b, ":"), ws, v });
    gx *list;
    if (max == 0)
        list = gx_empty(b);
    else {
        list = gx_seq2(b, kv, gx_rep(b, gx_seq2(b, sep, kv), min > 0 ? min - 1 : 0, max > 0 ? max - 1 : -1));
        if (min == 0)
            list = gx_opt(b, list);
    }
    return gx_seq(b, 5, (gx *[]){ gx_litz(b, "{"), ws, list, ws, gx_litz(b, "}") });
}

static gx *array_body(gschema *c, const json_t *s)
{
    gbuild *b = B(c);
    gx *ws = gs_ws(c);
    gx *sep = gx_seq3(b, ws, gx_litz(b, ","), ws);
    const json_t *items = json_object_get(s, "items");
    const json_t *prefix = json_object_get(s, "prefixItems");
    if (json_is_array(items)) { /* draft 4..2019 tuples */
        prefix = items;
        items = json_object_get(s, "additionalItems");
    }
    if (json_object_get(s, "uniqueItems") && json_is_true(json_object_get(s, "uniqueItems")))
        warn(c, "uniqueItems is not enforced");
    if (json_object_get(s, "contains"))
        warn(c, "contains is not enforced");
    int min = get_count(c, s, "minItems", 0), max = get_count(c, s, "maxItems", -1);
    if (max >= 0 && max < min) {
        sfail(c, CV_EINVAL, "maxItems %d < minItems %d", max, min);
        return gx_none(b);
    }
    gx_list el = { 0 };
    int n_prefix = 0;
    if (json_is_array(prefix)) {
        n_prefix = (int)json_array_size(prefix);
        if (max >= 0 && n_prefix > max)
            n_prefix = max;
        for (int i = 0; i < n_prefix; i++) {
            char seg[32];
            snprintf(seg, sizeof seg, "prefixItems/%d", i);
            size_t save = path_push(c, seg);
            gx *v = value(c, json_array_get(prefix, (size_t)i));
            path_pop(c, save);
            gxl_push(b, &el, i ? gx_seq2(b, sep, v) : v);
        }
    }
    gx *rest;
    if (json_is_false(items) || (json_is_array(prefix) && !items)) {
        rest = NULL; /* no items after the tuple */
    } else {
        size_t save = path_push(c, "items");
        rest = items && !json_is_true(items) ? value(c, items) : any_value(c);
        path_pop(c, save);
    }
    int rmin = min > n_prefix ? min - n_prefix : 0;
    int rmax = max < 0 ? -1 : max - n_prefix;
    if (!rest && rmin > 0) {
        sfail(c, CV_EINVAL, "minItems %d needs more items than the tuple allows", min);
        free(el.v);
        return gx_none(b);
    }
    gx *body;
    if (rest && rmax != 0) {
        gx *more;
        if (n_prefix) {
            more = gx_rep(b, gx_seq2(b, sep, rest), rmin, rmax);
        } else {
            more = gx_seq2(b, rest, gx_rep(b, gx_seq2(b, sep, rest), rmin > 0 ? rmin - 1 : 0, rmax > 0 ? rmax - 1 : -1));
            if (rmin == 0)
                more = gx_opt(b, more);
        }
        gxl_push(b, &el, more);
    }
    body = gx_seq(b, el.n, el.v);
    free(el.v);
    return gx_seq(b, 5, (gx *[]){ gx_litz(b, "["), ws, body, ws, gx_litz(b, "]") });
}

/* ---- combinators and the dispatcher ---- */

static int memo_find(gschema *c, const json_t *s)
{
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo[i].node == s)
            return c->memo[i].rule;
    return -1;
}

static void memo_add(gschema *c, const json_t *s, int rule)
{
    if (c->n_memo == c->cap_memo) {
        c->cap_memo = c->cap_memo ? c->cap_memo * 2 : 32;
        c->memo = cv_xrealloc(c->memo, (size_t)c->cap_memo * sizeof *c->memo);
    }
    c->memo[c->n_memo++] = (memo){ s, rule };
}

/* allOf: one schema with the keywords of all (properties merged, required
 * united, later keywords kept when they agree). */
static const json_t *merge_all_of(gschema *c, const json_t *s)
{
    json_t *m = json_object();
    json_array_append_new(c->owned, m);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) if (strcmp(k, "allOf")) json_object_set(m, k, v);
    size_t i;
    json_t *sub;
    json_array_foreach(json_object_get(s, "allOf"), i, sub) {
        const json_t *t = sub;
        for (int hop = 0; json_is_object(t) && json_object_get(t, "$ref") && hop < 32; hop++) {
            const char *ref = json_string_value(json_object_get(t, "$ref"));
            t = ref ? resolve_ref(c, ref) : NULL;
        }
        if (!json_is_object(t)) {
            if (json_is_true(t))
                continue;
            sfail(c, CV_EUNSUPPORTED, "allOf entry %zu is not an object schema", i);
            return m;
        }
        if (json_object_get(t, "allOf"))
            t = merge_all_of(c, t);
        json_object_foreach((json_t *)t, k, v) {
            json_t *have = json_object_get(m, k);
            if (!have) {
                json_object_set(m, k, v);
            } else if (!strcmp(k, "properties") && json_is_object(have) && json_is_object(v)) {
                json_t *np = json_deep_copy(have);
                const char *pk;
                json_t *pv;
                json_object_foreach(v, pk, pv) {
                    json_t *prev = json_object_get(np, pk);
                    if (prev && !json_equal(prev, pv))
                        json_object_set_new(np, pk, json_pack("{s:[O,O]}", "allOf", prev, pv));
                    else
                        json_object_set(np, pk, pv);
                }
                json_object_set_new(m, k, np);
            } else if (!strcmp(k, "required") && json_is_array(have) && json_is_array(v)) {
                json_t *nr = json_deep_copy(have);
                size_t j;
                json_t *rv;
                json_array_foreach(v, j, rv) {
                    bool dup = false;
                    size_t q;
                    json_t *x;
                    json_array_foreach(nr, q, x) dup |= json_equal(x, rv);
                    if (!dup)
                        json_array_append(nr, rv);
                }
                json_object_set_new(m, k, nr);
            } else if (!json_equal(have, v) && !is_annotation(k)) {
                warn(c, "allOf: conflicting '%s' keeps the first value", k);
            }
        }
    }
    return m;
}

static bool branches_disjoint(const json_t *arr)
{
    /* cheap check: every branch a distinct single type, or a distinct const */
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(arr, i);
        const json_t *ta = json_object_get(a, "type"), *ca = json_object_get(a, "const");
        if (!(json_is_string(ta) || ca))
            return false;
        for (size_t j = 0; j < i; j++) {
            const json_t *b = json_array_get(arr, j);
            const json_t *tb = json_object_get(b, "type"), *cb = json_object_get(b, "const");
            if (ca && cb && !json_equal(ca, cb))
                continue;
            if (json_is_string(ta) && json_is_string(tb) && strcmp(json_string_value(ta), json_string_value(tb)) &&
                !(!strcmp(json_string_value(ta), "number") && !strcmp(json_string_value(tb), "integer")) &&
                !(!strcmp(json_string_value(tb), "number") && !strcmp(json_string_value(ta), "integer")))
                continue;
            return false;
        }
    }
    return true;
}

static bool type_allows(const json_t *type, const char *t)
{
    if (!type)
        return true;
    if (json_is_string(type))
        return !strcmp(json_string_value(type), t) ||
               (!strcmp(t, "integer") && !strcmp(json_string_value(type), "number"));
    size_t i;
    json_t *x;
    json_array_foreach(type, i, x) if (json_is_string(x) && (!strcmp(json_string_value(x), t) ||
                                                             (!strcmp(t, "integer") && !strcmp(json_string_value(x), "number")))) return true;
    return false;
}

static const char *json_type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

static gx *typed(gschema *c, const json_t *s, const char *t, bool raw, const char *term);

static gx *value_impl(gschema *c, const json_t *s, bool raw, const char *term);

/* ---- one function per keyword family; each returns NULL for "no value"
 * (after sfail when the schema is wrong) ---- */

/* $ref: a rule per target (so recursion works), or, with sibling keywords
 * (2019+ semantics), the same as allOf [{$ref}, {the rest}]. */
static gx *ref_value(gschema *c, const json_t *s, const json_t *ref, bool raw, const char *term)
{
    gbuild *b = B(c);
    const char *k;
    json_t *v;
    if (!json_is_string(ref)) {
        sfail(c, CV_EINVAL, "$ref must be a string");
        return NULL;
    }
    bool others = false;
    json_object_foreach((json_t *)s, k, v) others |= strcmp(k, "$ref") && !is_annotation(k);
    if (others) {
        json_t *syn = json_object();
        json_array_append_new(c->owned, syn);
        json_t *rest = json_object();
        json_object_foreach((json_t *)s, k, v) if (strcmp(k, "$ref")) json_object_set(rest, k, v);
        json_object_set_new(syn, "allOf", json_pack("[{s:O},o]", "$ref", ref, rest));
        return value_impl(c, syn, raw, term);
    }
    const json_t *t = resolve_ref(c, json_string_value(ref));
    if (!t)
        return NULL;
    if (raw)
        return value_impl(c, t, raw, term);
    int r = memo_find(c, t);
    if (r < 0) {
        char name[96];
        snprintf(name, sizeof name, "ref:%.80s", json_string_value(ref));
        r = gb_rule_new(b, name);
        memo_add(c, t, r);
        gb_rule_set(b, r, value_impl(c, t, false, NULL));
    }
    return gx_call(b, r);
}

/* anyOf / oneOf: one alternative per branch, each with the sibling
 * keywords applied (as allOf [rest, branch]). */
static gx *any_of_value(gschema *c, const json_t *s, const json_t *any, const json_t *one, bool raw, const char *term)
{
    gbuild *b = B(c);
    const char *k;
    json_t *v;
    const json_t *arr = any ? any : one;
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        sfail(c, CV_EINVAL, "%s must be a non-empty array", any ? "anyOf" : "oneOf");
        return NULL;
    }
    if (json_array_size(arr) > CV_MAX_GRAMMAR_ALTS) {
        sfail(c, CV_ELIMIT, "%zu alternatives, limit CV_MAX_GRAMMAR_ALTS = %d", json_array_size(arr),
              CV_MAX_GRAMMAR_ALTS);
        return NULL;
    }
    if (one && !branches_disjoint(one))
        warn(c, "oneOf is compiled as anyOf (a value may match several branches)");
    if (any && one)
        warn(c, "oneOf beside anyOf is not enforced");
    json_t *rest = json_object();
    json_object_foreach((json_t *)s, k, v) if (strcmp(k, "anyOf") && strcmp(k, "oneOf")) json_object_set(rest, k, v);
    bool has_rest = false;
    json_object_foreach(rest, k, v) has_rest |= !is_annotation(k);
    json_array_append_new(c->owned, rest);
    gx_list alts = { 0 };
    size_t i;
    json_t *br;
    json_array_foreach(arr, i, br) {
        char seg[32];
        snprintf(seg, sizeof seg, "%s/%zu", any ? "anyOf" : "oneOf", i);
        size_t save = path_push(c, seg);
        if (has_rest) {
            json_t *syn = json_pack("{s:[O,O]}", "allOf", rest, br);
            json_array_append_new(c->owned, syn);
            gxl_push(b, &alts, value_impl(c, syn, raw, term));
        } else {
            gxl_push(b, &alts, value_impl(c, br, raw, term));
        }
        path_pop(c, save);
    }
    gx *out = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return out;
}

/* enum / const: the listed values the schema's type allows, as literals. */
static gx *enum_value(gschema *c, const json_t *type, const json_t *en, const json_t *cn, bool raw)
{
    gbuild *b = B(c);
    if (en && (!json_is_array(en) || json_array_size(en) > CV_MAX_GRAMMAR_ALTS)) {
        sfail(c, json_is_array(en) ? CV_ELIMIT : CV_EINVAL, "enum must be an array of at most %d values",
              CV_MAX_GRAMMAR_ALTS);
        return NULL;
    }
    gx_list alts = { 0 };
    size_t i;
    json_t *ev;
    json_t *one_c = json_array();
    json_array_append(one_c, (json_t *)cn);
    json_array_foreach(cn ? one_c : en, i, ev) {
        if (!type_allows(type, json_type_of(ev)))
            continue;
        if (raw && json_is_string(ev))
            gxl_push(b, &alts, gx_litz(b, json_string_value(ev)));
        else
            gxl_push(b, &alts, json_lit(c, ev));
    }
    json_decref(one_c);
    if (alts.n == 0)
        sfail(c, CV_EINVAL, "no enum/const value matches the schema's type");
    gx *out = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return out;
}

/* type (a name or a list of names), plus null when nullable (OpenAPI). */
static gx *type_value(gschema *c, const json_t *s, const json_t *type, bool nullable, bool raw, const char *term)
{
    gbuild *b = B(c);
    gx_list alts = { 0 };
    if (json_is_string(type)) {
        gxl_push(b, &alts, typed(c, s, json_string_value(type), raw, term));
    } else if (json_is_array(type)) {
        size_t i;
        json_t *t;
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) {
                sfail(c, CV_EINVAL, "type entries must be strings");
                break;
            }
            gxl_push(b, &alts, typed(c, s, json_string_value(t), raw, term));
        }
    } else {
        sfail(c, CV_EINVAL, "type must be a string or an array of strings");
    }
    if (nullable)
        gxl_push(b, &alts, gx_litz(b, "null"));
    gx *out = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return out;
}

/* No type: each type whose keywords are present; none present means any
 * value (keywords other than annotations warned as unenforced). */
static gx *inferred_value(gschema *c, const json_t *s, bool nullable, bool raw, const char *term)
{
    static const char *const obj_kw[] = { "properties", "required", "additionalProperties", "propertyNames",
                                           "minProperties", "maxProperties", "patternProperties" };
    static const char *const arr_kw[] = { "items", "prefixItems", "minItems", "maxItems", "additionalItems" };
    static const char *const str_kw[] = { "minLength", "maxLength", "pattern", "format" };
    static const char *const num_kw[] = { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                          "multipleOf" };
    gbuild *b = B(c);
    const char *k;
    json_t *v;
    bool o = false, a = false, st = false, nm = false;
    for (size_t i = 0; i < CV_ARRAY_LEN(obj_kw); i++) o |= json_object_get(s, obj_kw[i]) != NULL;
    for (size_t i = 0; i < CV_ARRAY_LEN(arr_kw); i++) a |= json_object_get(s, arr_kw[i]) != NULL;
    for (size_t i = 0; i < CV_ARRAY_LEN(str_kw); i++) st |= json_object_get(s, str_kw[i]) != NULL;
    for (size_t i = 0; i < CV_ARRAY_LEN(num_kw); i++) nm |= json_object_get(s, num_kw[i]) != NULL;
    gx_list alts = { 0 };
    if (o) gxl_push(b, &alts, typed(c, s, "object", raw, term));
    if (a) gxl_push(b, &alts, typed(c, s, "array", raw, term));
    if (st) gxl_push(b, &alts, typed(c, s, "string", raw, term));
    if (nm) gxl_push(b, &alts, typed(c, s, "number", raw, term));
    if (alts.n == 0) {
        json_object_foreach((json_t *)s, k, v) if (!is_annotation(k) && strcmp(k, "nullable") && strcmp(k, "not") &&
                                                   strcmp(k, "if") && strcmp(k, "then") && strcmp(k, "else"))
            warn(c, "keyword '%s' is not enforced", k);
        gxl_push(b, &alts, raw ? gx_until(b, term, strlen(term)) : any_value(c));
    }
    if (nullable)
        gxl_push(b, &alts, gx_litz(b, "null"));
    gx *out = gx_alt(b, alts.n, alts.v);
    free(alts.v);
    return out;
}

/* A schema's value: booleans and {} first, then the first keyword family
 * present, in this order ($ref, allOf, anyOf/oneOf, enum/const, type, or
 * the type inferred from the other keywords). */
static gx *value_impl(gschema *c, const json_t *s, bool raw, const char *term)
{
    gbuild *b = B(c);
    if (c->rc)
        return gx_none(b);
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0))
        return raw ? gx_until(b, term, strlen(term)) : any_value(c);
    if (json_is_false(s))
        return gx_none(b);
    if (!json_is_object(s)) {
        sfail(c, CV_EINVAL, "a schema must be an object or a boolean");
        return gx_none(b);
    }
    if (++c->depth > CV_MAX_JSON_DEPTH) {
        sfail(c, CV_ELIMIT, "schema nested deeper than %d", CV_MAX_JSON_DEPTH);
        return gx_none(b);
    }
    gx *out;
    const json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
    const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    const json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    const json_t *type = json_object_get(s, "type");
    bool nullable = json_is_true(json_object_get(s, "nullable"));
    if (ref) {
        out = ref_value(c, s, ref, raw, term);
    } else if (all && !json_is_array(all)) {
        sfail(c, CV_EINVAL, "allOf must be an array");
        out = NULL;
    } else if (all) {
        out = value_impl(c, merge_all_of(c, s), raw, term);
    } else {
        if (json_object_get(s, "not"))
            warn(c, "not is not enforced");
        if (json_object_get(s, "if") || json_object_get(s, "then") || json_object_get(s, "else"))
            warn(c, "if/then/else is not enforced");
        if (any || one)
            out = any_of_value(c, s, any, one, raw, term);
        else if (en || cn)
            out = enum_value(c, type, en, cn, raw);
        else if (type)
            out = type_value(c, s, type, nullable, raw, term);
        else
            out = inferred_value(c, s, nullable, raw, term);
    }
    c->depth--;
    return out ? out : gx_none(b);
}

static gx *typed(gschema *c, const json_t *s, const char *t, bool raw, const char *term)
{
    gbuild *b = B(c);
    if (!strcmp(t, "string"))
        return string_value(c, s, raw, term);
    if (!strcmp(t, "integer"))
        return integer_value(c, s);
    if (!strcmp(t, "number"))
        return number_value(c, s);
    if (!strcmp(t, "boolean"))
        return gx_alt2(b, gx_litz(b, "true"), gx_litz(b, "false"));
    if (!strcmp(t, "null"))
        return gx_litz(b, "null");
    if (!strcmp(t, "object") || !strcmp(t, "array")) {
        /* one rule per object/array schema (keyed by node and kind) */
        char key[64];
        snprintf(key, sizeof key, "%s@%p", t, (const void *)s);
        int r = prim_find(c, key);
        if (r < 0) {
            char name[96];
            snprintf(name, sizeof name, "%s:%.80s", t, c->path_len ? c->path : "#");
            r = prim_add(c, key, name);
            gb_rule_set(b, r, !strcmp(t, "object") ? object_body(c, s) : array_body(c, s));
        }
        return gx_call(b, r);
    }
    sfail(c, CV_EINVAL, "unknown type '%s'", t);
    return gx_none(b);
}

static gx *value(gschema *c, const json_t *s) { return value_impl(c, s, false, NULL); }

gx *gs_value(gschema *c, const json_t *schema) { return value(c, schema); }

gx *gs_value_raw(gschema *c, const json_t *schema, const char *terminator)
{
    return value_impl(c, schema, true, terminator);
}

/* ---- front ends ---- */

int cv_grammar_from_schema(const json_t *schema, const cv_grammar_opts *opts, cv_grammar **out, cv_err *err)
{
    *out = NULL;
    gbuild b;
    gb_init(&b, opts ? opts->warnings : NULL);
    gschema *c = gs_new(&b, err);
    gs_set_root(c, schema, "#");
    int root = gb_rule_new(&b, "root");
    gx *v = gs_value(c, schema);
    int rc = gs_status(c);
    const char *close = opts ? opts->think_close : NULL;
    for (const char *z = close; !rc && z && *z; z++)
        if ((unsigned char)*z >= 0x80)
            rc = cv_err_set(err, CV_EINVAL, "grammar: think_close '%s' must be ASCII", close);
    if (!rc) {
        gx *ws = gs_ws(c);
        gx *body = gx_seq3(&b, ws, v, ws);
        if (close && *close) {
            /* the same reasoning prefix as cv_grammar_from_tools */
            gx *think = gx_seq3(&b, gx_until(&b, close, strlen(close)), gx_litz(&b, close), ws);
            if (opts->think_open && *opts->think_open)
                think = gx_opt(&b, gx_seq2(&b, gx_litz(&b, opts->think_open), think));
            body = gx_seq2(&b, think, body);
        }
        gb_rule_set(&b, root, body);
        rc = gb_compile(&b, root, out, err);
    }
    gs_free(c);
    gb_fini(&b);
    return rc;
}

int cv_grammar_from_schema_text(const char *text, size_t len, const cv_grammar_opts *opts, cv_grammar **out,
                                cv_err *err)
{
    *out = NULL;
    json_t *j = cv_json_parse(text, len, err);
    if (!j) {
        cv_err_prefix(err, "schema: ");
        return CV_EINVAL;
    }
    int rc = cv_grammar_from_schema(j, opts, out, err);
    json_decref(j);
    return rc;
}

int cv_grammar_from_regex(const char *rx, size_t len, cv_grammar **out, cv_err *err)
{
    *out = NULL;
    gbuild b;
    gb_init(&b, NULL);
    int root = gb_rule_new(&b, "root");
    gx *x = NULL;
    int rc = gx_regex(&b, rx, len, false, true, &x, err);
    if (!rc) {
        gb_rule_set(&b, root, x);
        rc = gb_compile(&b, root, out, err);
    }
    gb_fini(&b);
    return rc;
}
