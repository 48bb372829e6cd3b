/* request.c — the small helpers every wire file shares while translating
 * into the neutral request (chat_request.h): range-checked sampling
 * numbers, stop strings, argument strings to objects, Claude Code's billing
 * line, limits, safe JSON strings and SSE frames. Nothing here knows a wire. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/server_int.h"

int cv_req_num(json_t *obj, const char *key, double lo, double hi, double *out, bool *present, cv_err *err)
{
    if (present)
        *present = false;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return cv_err_set(err, CV_EINVAL, "'%s' is %g, must be between %g and %g", key, d, lo, hi);
    *out = d;
    if (present)
        *present = true;
    return 0;
}

int cv_req_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *present, cv_err *err)
{
    if (present)
        *present = false;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    int64_t x = 0;
    if (cv_json_get_int(obj, key, NULL, &x, err))
        return CV_EINVAL;
    if (x < lo || x > hi)
        return cv_err_set(err, CV_EINVAL, "'%s' is %lld, must be between %lld and %lld", key, (long long)x,
                          (long long)lo, (long long)hi);
    *out = x;
    if (present)
        *present = true;
    return 0;
}

int cv_req_stops(cv_chat_request *r, json_t *v, const char *what, cv_err *err)
{
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        return cv_chat_request_add_stop(r, json_string_value(v), json_string_length(v), err);
    if (!json_is_array(v))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a string or an array of strings", what);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_string(x))
            return cv_err_set(err, CV_EINVAL, "'%s[%zu]' must be a string", what, i);
        int rc = cv_chat_request_add_stop(r, json_string_value(x), json_string_length(x), err);
        if (rc)
            return rc;
    }
    return 0;
}

json_t *cv_req_args_object(const char *args, size_t len)
{
    if (!args || !len)
        return json_object();
    json_t *v = json_loadb(args, len, 0, NULL);
    if (v && json_is_object(v))
        return v;
    json_decref(v);
    cv_warn("tool call arguments are not a JSON object; passing {} to the template");
    return json_object();
}

cv_str cv_req_strip_billing(cv_str sys)
{
    static const char tag[] = "x-anthropic-billing-header:";
    if (!cv_str_starts(sys, CV_STR(tag)))
        return sys;
    const char *nl = memchr(sys.ptr, '\n', sys.len);
    if (!nl)
        return (cv_str){ sys.ptr + sys.len, 0 };
    size_t skip = (size_t)(nl - sys.ptr) + 1;
    return (cv_str){ sys.ptr + skip, sys.len - skip };
}

int cv_req_check_limits(const cv_chat_request *r, cv_err *err)
{
    size_t nm = json_array_size(r->messages), nt = json_array_size(r->tools);
    if (nm > CV_MAX_MESSAGES)
        return cv_err_set(err, CV_ELIMIT, "%zu messages is over the limit of %d", nm, CV_MAX_MESSAGES);
    if (nt > CV_MAX_TOOLS)
        return cv_err_set(err, CV_ELIMIT, "%zu tools is over the limit of %d", nt, CV_MAX_TOOLS);
    return 0;
}

json_t *cv_json_str(const char *s, size_t len)
{
    if (!s)
        return json_string("");
    if (cv_utf8_valid(s, len))
        return json_stringn(s, len);
    cv_buf b = { 0 };
    cv_utf8_sanitize(&b, s, len);
    json_t *v = json_stringn(b.data ? b.data : "", b.len);
    cv_buf_free(&b);
    return v;
}

void cv_sse(cv_buf *out, const char *name, json_t *json)
{
    if (name)
        cv_buf_printf(out, "event: %s\n", name);
    cv_buf_puts(out, "data: ");
    cv_json_dump(out, json);
    cv_buf_puts(out, "\n\n");
    json_decref(json);
}

cv_call *cv_calls_at(cv_calls *c, cv_server *srv, const cv_chat_event *ev, const char *prefix)
{
    int i = ev->index;
    if (i < 0 || i >= CV_MAX_TOOL_CALLS)
        return NULL;
    if (i >= c->n) {
        c->v = cv_xrealloc(c->v, (size_t)(i + 1) * sizeof *c->v);
        memset(c->v + c->n, 0, (size_t)(i + 1 - c->n) * sizeof *c->v);
        for (int k = c->n; k <= i; k++)
            cv_server_new_id(srv, prefix, c->v[k].id);
        c->n = i + 1;
    }
    cv_call *call = &c->v[i];
    if (ev->type == CV_CHAT_TOOL_BEGIN) {
        if (ev->id.len && ev->id.len < sizeof call->id) {
            memcpy(call->id, ev->id.ptr, ev->id.len);
            call->id[ev->id.len] = 0;
        }
        free(call->name);
        call->name = cv_xstrndup(ev->name.ptr ? ev->name.ptr : "", ev->name.len);
    }
    return call;
}

void cv_calls_free(cv_calls *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->v[i].name);
        cv_buf_free(&c->v[i].args);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* ---- the strict-template fallback ---- */

static bool alnum9(const char *s)
{
    if (!s || strlen(s) != 9)
        return false;
    for (int i = 0; i < 9; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* A 9-character alphanumeric id derived from id (FNV-1a), so a call and its
 * result map to the same new id in every turn (prefix stability). */
static void id9(const char *id, char out[10])
{
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < 9; i++, h /= 62)
        out[i] = al[h % 62];
    out[9] = 0;
}

static void append_text(json_t *m, json_t *from)
{
    const char *a = json_string_value(json_object_get(m, "content"));
    const char *b = json_string_value(json_object_get(from, "content"));
    cv_buf t = { 0 };
    cv_buf_puts(&t, a ? a : "");
    if (a && *a && b && *b)
        cv_buf_puts(&t, "\n\n");
    cv_buf_puts(&t, b ? b : "");
    json_object_set_new(m, "content", json_stringn(t.data ? t.data : "", t.len));
    cv_buf_free(&t);
}

json_t *cv_req_strict_messages(json_t *messages)
{
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *c = json_deep_copy(m);
        const char *role = json_string_value(json_object_get(c, "role"));
        json_t *last = json_array_get(out, json_array_size(out) - 1);
        const char *lrole = last ? json_string_value(json_object_get(last, "role")) : NULL;
        /* Tool call ids: 9 alphanumerics (Mistral's templates insist). */
        size_t k;
        json_t *tc;
        json_array_foreach(json_object_get(c, "tool_calls"), k, tc) {
            const char *id = json_string_value(json_object_get(tc, "id"));
            if (id && !alnum9(id)) {
                char n9[10];
                id9(id, n9);
                json_object_set_new(tc, "id", json_string(n9));
            }
        }
        const char *tid = json_string_value(json_object_get(c, "tool_call_id"));
        if (tid && !alnum9(tid)) {
            char n9[10];
            id9(tid, n9);
            json_object_set_new(c, "tool_call_id", json_string(n9));
        }
        /* One system message, first; user turns that follow each other
         * become one (templates that insist on alternation). */
        bool merge = lrole && role && json_is_string(json_object_get(c, "content")) &&
                     json_is_string(json_object_get(last, "content")) &&
                     ((!strcmp(role, "system") && !strcmp(lrole, "system") && json_array_size(out) == 1) ||
                      (!strcmp(role, "user") && !strcmp(lrole, "user")));
        if (merge) {
            append_text(last, c);
            json_decref(c);
        } else {
            json_array_append_new(out, c);
        }
    }
    return out;
}
