/* tc_schema.c — what the request's tool declarations tell the parser: which
 * names are tools, and which JSON type each argument should have. Models
 * write "5" for an integer and 5 for a string; XML-style formats write every
 * value as text. tc_coerce_text turns text into the schema's type when that
 * is lossless, and otherwise keeps the text as a string — it never invents
 * a value. Only the first level of "properties" is typed: that is where the
 * formats disagree; nested values keep what the model wrote. */
#include <ctype.h>
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

/* The function object of a tool: {"type":"function","function":{...}} or the
 * flat {"name":..,"parameters":..} shape. */
static const json_t *fn_of(const json_t *tool)
{
    const json_t *f = json_object_get(tool, "function");
    return json_is_object(f) ? f : tool;
}

const json_t *tc_tool_find(const json_t *tools, const char *name, size_t len)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *n = json_object_get(fn_of(t), "name");
        if (json_is_string(n) && json_string_length(n) == len && !memcmp(json_string_value(n), name, len))
            return t;
    }
    return NULL;
}

const json_t *tc_tool_props(const json_t *tool)
{
    if (!tool)
        return NULL;
    const json_t *f = fn_of(tool);
    const json_t *ps = json_object_get(f, "parameters");
    if (!ps)
        ps = json_object_get(f, "input_schema");
    const json_t *pr = json_object_get(ps, "properties");
    return json_is_object(pr) ? pr : NULL;
}

const json_t *tc_prop_schema(const json_t *props, const char *key, size_t len)
{
    if (!props || len > 1024)
        return NULL;
    char k[1025];
    memcpy(k, key, len);
    k[len] = 0;
    const json_t *s = json_object_get(props, k);
    return json_is_object(s) ? s : NULL;
}

static unsigned type_bit(const char *t)
{
    if (!strcmp(t, "string")) return TT_STRING;
    if (!strcmp(t, "integer")) return TT_INTEGER;
    if (!strcmp(t, "number")) return TT_NUMBER;
    if (!strcmp(t, "boolean")) return TT_BOOLEAN;
    if (!strcmp(t, "null")) return TT_NULL;
    if (!strcmp(t, "object")) return TT_OBJECT;
    if (!strcmp(t, "array")) return TT_ARRAY;
    return 0;
}

static unsigned schema_mask(const json_t *s, int depth)
{
    if (!json_is_object(s) || depth > 8)
        return 0;
    unsigned m = 0;
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t)) {
        m = type_bit(json_string_value(t));
    } else if (json_is_array(t)) {
        size_t i;
        const json_t *x;
        json_array_foreach(t, i, x)
            if (json_is_string(x))
                m |= type_bit(json_string_value(x));
    }
    if (m)
        return m;
    static const char *const unions[] = { "anyOf", "oneOf" };
    for (size_t u = 0; u < 2; u++) {
        const json_t *a = json_object_get(s, unions[u]);
        size_t i;
        const json_t *x;
        json_array_foreach(a, i, x) {
            unsigned b = schema_mask(x, depth + 1);
            if (!b)
                return 0; /* an untyped branch: anything goes */
            m |= b;
        }
        if (m)
            return m;
    }
    const json_t *e = json_object_get(s, "enum");
    if (json_is_array(e) && json_array_size(e)) {
        size_t i;
        const json_t *x;
        json_array_foreach(e, i, x) {
            if (json_is_string(x)) m |= TT_STRING;
            else if (json_is_integer(x)) m |= TT_INTEGER;
            else if (json_is_real(x)) m |= TT_NUMBER;
            else if (json_is_boolean(x)) m |= TT_BOOLEAN;
            else if (json_is_null(x)) m |= TT_NULL;
            else return 0;
        }
        return m;
    }
    if (json_object_get(s, "properties"))
        return TT_OBJECT;
    if (json_object_get(s, "items"))
        return TT_ARRAY;
    return 0;
}

tc_type tc_prop_type(const json_t *props, const char *key, size_t len)
{
    return (tc_type){ schema_mask(tc_prop_schema(props, key, len), 0) };
}

/* ---- fit: is bare JSON a call to this tool? ---- */

static bool value_fits(const json_t *v, unsigned mask)
{
    switch (json_typeof(v)) {
    case JSON_STRING: return mask & TT_STRING;
    case JSON_INTEGER: return mask & (TT_INTEGER | TT_NUMBER);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (mask & TT_NUMBER) || ((mask & TT_INTEGER) && d == (double)(long long)d);
    }
    case JSON_TRUE:
    case JSON_FALSE: return mask & TT_BOOLEAN;
    case JSON_NULL: return mask & TT_NULL;
    case JSON_OBJECT: return mask & TT_OBJECT;
    case JSON_ARRAY: return mask & TT_ARRAY;
    }
    return false;
}

/* Output detection takes a bare JSON object or Python list for a call only
 * when it fits the tool it names: every required property present, every
 * typed property of its type (after the parser's lossless typing), no
 * property the schema forbids, and, when the schema declares properties,
 * at least one of them named (a JSON answer that happens to carry a tool's
 * name has none of its parameters). A tool without a schema takes anything. */
bool tc_args_fit(const json_t *tool, const char *args, size_t len)
{
    const json_t *fn = fn_of(tool);
    const json_t *ps = json_object_get(fn, "parameters");
    if (!ps)
        ps = json_object_get(fn, "input_schema");
    if (!json_is_object(ps))
        return true;
    json_t *a = json_loadb(args, len, 0, NULL);
    bool ok = json_is_object(a);
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(ps, "required"), i, x)
        ok &= !json_is_string(x) || json_object_get(a, json_string_value(x)) != NULL;
    const json_t *props = json_object_get(ps, "properties");
    bool closed = json_is_false(json_object_get(ps, "additionalProperties"));
    size_t known = 0;
    const char *k;
    json_t *v;
    json_object_foreach(ok ? a : NULL, k, v) {
        const json_t *s = json_object_get(props, k);
        if (!json_is_object(s)) {
            ok &= !closed;
            continue;
        }
        known++;
        unsigned mask = schema_mask(s, 0);
        ok &= !mask || value_fits(v, mask);
    }
    if (ok && json_object_size(props) && json_object_size(a) && !known)
        ok = false;
    json_decref(a);
    return ok;
}

/* ---- coercion ---- */

static void trim(const char **p, size_t *n)
{
    while (*n && isspace((unsigned char)**p)) {
        (*p)++;
        (*n)--;
    }
    while (*n && isspace((unsigned char)(*p)[*n - 1]))
        (*n)--;
}

static bool eq_ci(const char *p, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m)
        return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)p[i]) != lit[i])
            return false;
    return true;
}

/* text that is the inside of a JSON string ({\"a\": 1}): decode one level */
static int unescape_json(const char *p, size_t n, cv_buf *out)
{
    cv_buf q = { 0 };
    cv_buf_putc(&q, '"');
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' && (i == 0 || p[i - 1] != '\\'))
            cv_buf_putc(&q, '\\');
        cv_buf_putc(&q, p[i]);
    }
    cv_buf_putc(&q, '"');
    int rc = tc_json_canon(q.data, q.len, TJ_DECODE, (tc_type){ 0 }, NULL, out);
    cv_buf_free(&q);
    return rc;
}

/* Parses text as a JSON object or array (kind '{' or '['), undoing one
 * level of escaping when the model wrote escaped JSON. */
static int as_container(const char *p, size_t n, char kind, cv_buf *out)
{
    if (!n || p[0] != kind) {
        /* escaped JSON may start with the bracket too; anything else is not it */
        return -1;
    }
    size_t mark = out->len;
    if (tc_json_canon(p, n, TJ_NO_BARE, (tc_type){ 0 }, NULL, out) == 0 && out->len > mark &&
        out->data[mark] == kind)
        return 0;
    out->len = mark;
    if (out->data)
        out->data[mark] = 0;
    if (!memchr(p, '\\', n))
        return -1;
    cv_buf dec = { 0 };
    int rc = -1;
    if (unescape_json(p, n, &dec) == 0 && tc_json_canon(dec.data, dec.len, TJ_NO_BARE, (tc_type){ 0 }, NULL, out) == 0 &&
        out->len > mark && out->data[mark] == kind)
        rc = 0;
    else {
        out->len = mark;
        if (out->data)
            out->data[mark] = 0;
    }
    cv_buf_free(&dec);
    return rc;
}

static bool is_integer_text(const char *p, size_t n)
{
    size_t i = 0;
    if (i < n && (p[i] == '-' || p[i] == '+'))
        i++;
    if (i == n)
        return false;
    for (; i < n; i++)
        if (!isdigit((unsigned char)p[i]))
            return false;
    return true;
}

int tc_coerce_text(const char *p0, size_t n0, tc_type t, bool as_json, cv_buf *out)
{
    const char *p = p0;
    size_t n = n0;
    trim(&p, &n);
    unsigned m = t.mask;
    if (!m) {
        if (as_json) {
            size_t mark = out->len;
            if (n && tc_json_canon(p, n, TJ_NO_BARE, (tc_type){ 0 }, NULL, out) == 0)
                return 0;
            out->len = mark;
            if (out->data)
                out->data[mark] = 0;
        }
        cv_buf_put_json_str(out, p0, n0);
        return 0;
    }
    if ((m & TT_NULL) && (eq_ci(p, n, "null") || eq_ci(p, n, "none"))) {
        cv_buf_puts(out, "null");
        return 0;
    }
    if ((m & TT_INTEGER) && is_integer_text(p, n) && tc_number_canon(p, n, out))
        return 0;
    if (m & (TT_NUMBER | TT_INTEGER)) {
        size_t mark = out->len;
        if (n && tc_number_canon(p, n, out)) {
            /* an integer schema accepts 3.0 but not 3.5, nor 1e20 (no long
             * long holds it, and converting it would be undefined) */
            if (!(m & TT_NUMBER)) {
                double d = strtod(out->data + mark, NULL);
                if (!(d >= -0x1p63 && d < 0x1p63) || d != (double)(long long)d) {
                    out->len = mark;
                    out->data[mark] = 0;
                    goto not_number;
                }
                out->len = mark;
                cv_buf_printf(out, "%lld", (long long)d);
            }
            return 0;
        }
    }
not_number:
    if (m & TT_BOOLEAN) {
        if (eq_ci(p, n, "true")) {
            cv_buf_puts(out, "true");
            return 0;
        }
        if (eq_ci(p, n, "false")) {
            cv_buf_puts(out, "false");
            return 0;
        }
    }
    if ((m & TT_OBJECT) && as_container(p, n, '{', out) == 0)
        return 0;
    if ((m & TT_ARRAY) && as_container(p, n, '[', out) == 0)
        return 0;
    if (m & TT_STRING) {
        cv_buf_put_json_str(out, p0, n0);
        return 0;
    }
    /* Nothing fits: the schema and the model disagree. Keep JSON the model
     * clearly wrote as JSON, else the text, so nothing is lost. */
    size_t mark = out->len;
    if (n && tc_json_canon(p, n, TJ_NO_BARE, (tc_type){ 0 }, NULL, out) == 0)
        return 0;
    out->len = mark;
    if (out->data)
        out->data[mark] = 0;
    cv_buf_put_json_str(out, p0, n0);
    return 0;
}

void tc_esc(cv_buf *b, const char *p, size_t n)
{
    if (!n)
        return;
    size_t mark = b->len;
    cv_buf_put_json_str(b, p, n);
    /* drop the quotes cv_buf_put_json_str adds */
    memmove(b->data + mark, b->data + mark + 1, b->len - mark - 2);
    b->len -= 2;
    b->data[b->len] = 0;
}
