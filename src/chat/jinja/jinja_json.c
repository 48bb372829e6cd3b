/* jinja_json.c — the `tojson` filter as Hugging Face defines it for chat
 * templates: Python's json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False). That means ", " and ": " separators
 * ("," and ": " once indent is given), insertion key order, non-ASCII
 * written raw, control characters as \u00XX except \b \f \n \r \t, floats in
 * repr form (1.0, 1e-05, NaN, Infinity), non-string keys turned into strings
 * (true, null, 1, 1.5), and a TypeError for anything JSON cannot hold
 * (Undefined, namespace, macros). The filter's argument parsing lives in
 * jinja_filters.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja/jinja_int.h"

static void put_json_str(cv_buf *b, const char *s, size_t n, bool ensure_ascii)
{
    cv_buf_reserve(b, n + 2);
    cv_buf_putc(b, '"');
    cv_buf_put_json_chars(b, s, n, ensure_ascii);
    cv_buf_putc(b, '"');
}

static void put_float(cv_buf *b, double f)
{
    if (isnan(f)) {
        cv_buf_puts(b, "NaN");
    } else if (isinf(f)) {
        cv_buf_puts(b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        char tmp[64];
        py_float_repr(f, tmp, sizeof tmp);
        cv_buf_puts(b, tmp);
    }
}

static void newline_indent(cv_buf *b, const char *indent, int indent_len, int level)
{
    cv_buf_putc(b, '\n');
    for (int i = 0; i < level; i++)
        cv_buf_append(b, indent, (size_t)indent_len);
}

/* A dict key as json.dumps writes it (keys must be str, int, float, bool or None). */
static jv key_string(jrender *R, jv k)
{
    char tmp[64];
    switch (k.t) {
    case JV_STR: return k;
    case JV_BOOL: return jv_strn(k.i ? "true" : "false", k.i ? 4 : 5);
    case JV_NONE: return jv_strn("null", 4);
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)k.i); return jv_str_copy(R, tmp, strlen(tmp));
    case JV_FLOAT: {
        cv_buf *b = jbuf_get(R);
        put_float(b, k.f);
        jv r = jv_str_copy(R, b->data, b->len);
        jbuf_put(R, b);
        return r;
    }
    default:
        jfail(R, CV_EINVAL, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

typedef struct kv_pair {
    jv k, v;
} kv_pair;

static int cmp_keys(jrender *R, const void *a, const void *b, void *ctx)
{
    const kv_pair *x = a, *y = b;
    return jv_cmp(R, x->k, y->k);
}

void jv_tojson(jrender *R, cv_buf *b, jv v, const char *indent, int indent_len, bool have_indent,
               const char *item_sep, const char *key_sep, bool sort_keys, bool ensure_ascii, int depth)
{
    if (depth > CV_MAX_JSON_DEPTH + 8)
        jfail(R, CV_ELIMIT, "tojson: value nested deeper than %d levels", CV_MAX_JSON_DEPTH + 8);
    if (b->len > R->lim.max_output)
        jfail(R, CV_ELIMIT, "tojson output exceeds %zu bytes", R->lim.max_output);
    switch (v.t) {
    case JV_NONE: cv_buf_puts(b, "null"); return;
    case JV_BOOL: cv_buf_puts(b, v.i ? "true" : "false"); return;
    case JV_INT: cv_buf_printf(b, "%lld", (long long)v.i); return;
    case JV_FLOAT: put_float(b, v.f); return;
    case JV_STR: put_json_str(b, v.s, v.n, ensure_ascii); return;
    case JV_LIST:
    case JV_JSON:
        if (v.t == JV_LIST && (v.flags & JF_GEN))
            jfail(R, CV_EINVAL, "Object of type generator is not JSON serializable");
        if (jv_is_list(v)) {
            int64_t n = jv_len(R, v);
            if (n == 0) {
                cv_buf_puts(b, "[]");
                return;
            }
            cv_buf_putc(b, '[');
            for (int64_t i = 0; i < n; i++) {
                if (i)
                    cv_buf_puts(b, item_sep);
                if (have_indent)
                    newline_indent(b, indent, indent_len, depth + 1);
                jv_tojson(R, b, jv_list_at(v, i), indent, indent_len, have_indent, item_sep, key_sep, sort_keys,
                          ensure_ascii, depth + 1);
            }
            if (have_indent)
                newline_indent(b, indent, indent_len, depth);
            cv_buf_putc(b, ']');
            return;
        }
        /* FALLTHROUGH */
    case JV_DICT: {
        if (v.t == JV_JSON && !sort_keys) {
            /* the hot path: tool schemas straight from the request JSON */
            if (json_object_size(v.j) == 0) {
                cv_buf_puts(b, "{}");
                return;
            }
            cv_buf_putc(b, '{');
            const char *k;
            json_t *x;
            bool first = true;
            json_object_foreach(v.j, k, x)
            {
                if (!first)
                    cv_buf_puts(b, item_sep);
                first = false;
                if (have_indent)
                    newline_indent(b, indent, indent_len, depth + 1);
                put_json_str(b, k, strlen(k), ensure_ascii);
                cv_buf_puts(b, key_sep);
                jv_tojson(R, b, jv_from_json(x), indent, indent_len, have_indent, item_sep, key_sep, sort_keys,
                          ensure_ascii, depth + 1);
            }
            if (have_indent)
                newline_indent(b, indent, indent_len, depth);
            cv_buf_putc(b, '}');
            return;
        }
        jv *ks, *vs;
        int64_t n;
        jv_dict_items(R, v, &ks, &vs, &n);
        if (n == 0) {
            cv_buf_puts(b, "{}");
            return;
        }
        kv_pair *pairs = jalloc(R, (size_t)n * sizeof *pairs);
        for (int64_t i = 0; i < n; i++) {
            pairs[i].k = key_string(R, ks[i]);
            pairs[i].v = vs[i];
        }
        if (sort_keys) {
            /* Python sorts the original keys; with str keys that is the same */
            for (int64_t i = 0; i < n; i++)
                if (ks[i].t != JV_STR)
                    jfail(R, CV_EINVAL, "tojson(sort_keys=True) needs string keys");
            jsort(R, pairs, (size_t)n, sizeof *pairs, cmp_keys, NULL);
        }
        cv_buf_putc(b, '{');
        for (int64_t i = 0; i < n; i++) {
            if (i)
                cv_buf_puts(b, item_sep);
            if (have_indent)
                newline_indent(b, indent, indent_len, depth + 1);
            put_json_str(b, pairs[i].k.s, pairs[i].k.n, ensure_ascii);
            cv_buf_puts(b, key_sep);
            jv_tojson(R, b, pairs[i].v, indent, indent_len, have_indent, item_sep, key_sep, sort_keys, ensure_ascii,
                      depth + 1);
        }
        if (have_indent)
            newline_indent(b, indent, indent_len, depth);
        cv_buf_putc(b, '}');
        return;
    }
    case JV_UNDEF:
        if (v.flags & JF_UNSAFE)
            jfail_undef(R, v);
        jfail(R, CV_EINVAL, "Object of type Undefined is not JSON serializable");
    default:
        jfail(R, CV_EINVAL, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
}
