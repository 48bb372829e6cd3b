/* json.c — JSON helpers over jansson: strict parsing with line/column
 * errors and a depth limit, typed member getters whose errors name the
 * field, and compact dumping that keeps key order. */
#include <math.h>
#include <stdio.h>

#include "base/base.h"

static int depth_ok(json_t *v, int depth)
{
    if (depth > CV_MAX_JSON_DEPTH)
        return 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
            if (!depth_ok(x, depth + 1))
                return 0;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
            if (!depth_ok(x, depth + 1))
                return 0;
    }
    return 1;
}

json_t *cv_json_parse(const char *s, size_t len, cv_err *err)
{
    json_error_t je;
    /* jansson rejects NaN/Infinity literals (not JSON) and allows NUL only
     * with JSON_ALLOW_NUL; duplicate keys keep the last value, like most
     * parsers the clients are tested against. */
    json_t *v = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
        cv_err_set(err, CV_EINVAL, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!depth_ok(v, 0)) {
        json_decref(v);
        cv_err_set(err, CV_ELIMIT, "JSON nested deeper than %d levels", CV_MAX_JSON_DEPTH);
        return NULL;
    }
    return v;
}

static const char *type_name(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

static json_t *member(json_t *obj, const char *key)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return (v && !json_is_null(v)) ? v : NULL;
}

static int wrong(cv_err *err, const char *what, const char *key, const char *want, json_t *v)
{
    return cv_err_set(err, CV_EINVAL, "'%s%s%s' must be %s, got %s", what ? what : "", what ? "." : "", key, want,
                      type_name(v));
}

int cv_json_get_str(json_t *obj, const char *key, const char *what, const char **out, cv_err *err)
{
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_string(v)) return wrong(err, what, key, "a string", v);
    *out = json_string_value(v);
    return 0;
}

int cv_json_get_int(json_t *obj, const char *key, const char *what, int64_t *out, cv_err *err)
{
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    /* 5.0 is an integer to JavaScript clients; accept whole reals. */
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9.2e18) {
            *out = (int64_t)d;
            return 0;
        }
    }
    return wrong(err, what, key, "an integer", v);
}

int cv_json_get_num(json_t *obj, const char *key, const char *what, double *out, cv_err *err)
{
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_number(v)) return wrong(err, what, key, "a number", v);
    *out = json_number_value(v);
    return 0;
}

int cv_json_get_bool(json_t *obj, const char *key, const char *what, bool *out, cv_err *err)
{
    json_t *v = member(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return wrong(err, what, key, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    cv_buf_append(data, buffer, size);
    return 0;
}

void cv_json_dump(cv_buf *b, const json_t *v)
{
    json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}
