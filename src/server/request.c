/* request.c — the neutral request (cv_chat_request) and the small helpers
 * every wire file shares while translating into it: range-checked sampling
 * numbers, stop strings, argument strings to objects, Claude Code's billing
 * line, limits, safe JSON strings and SSE frames. Nothing here knows a wire. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/server_int.h"

void cv_chat_request_init(cv_chat_request *r)
{
    memset(r, 0, sizeof *r);
    r->messages = json_array();
    r->tools = json_array();
    r->parallel_tool_calls = true;
    r->thinking = CV_THINKING_DEFAULT;
    r->sample.temperature = 1.0f; /* the OpenAI and Anthropic default */
    r->sample.top_p = 1.0f;
}

void cv_chat_request_fini(cv_chat_request *r)
{
    json_decref(r->messages);
    json_decref(r->tools);
    json_decref(r->response_format);
    json_decref(r->template_kwargs);
    free(r->tool_choice_name);
    free(r->logit_bias);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->reasoning_effort);
    free(r->model);
    cv_buf_free(&r->prompt_text);
    free(r->prompt_ids);
    memset(r, 0, sizeof *r);
}

int cv_chat_request_add_stop(cv_chat_request *r, const char *s, size_t len, cv_err *err)
{
    if (r->n_stop >= CV_MAX_STOP_STRINGS)
        return cv_err_set(err, CV_ELIMIT, "more than %d stop strings", CV_MAX_STOP_STRINGS);
    if (len == 0)
        return cv_err_set(err, CV_EINVAL, "a stop string is empty");
    if (len > CV_MAX_STOP_BYTES)
        return cv_err_set(err, CV_ELIMIT, "a stop string of %zu bytes is over the limit of %d", len,
                          CV_MAX_STOP_BYTES);
    if (memchr(s, 0, len) || !cv_utf8_valid(s, len))
        return cv_err_set(err, CV_EINVAL, "a stop string is not valid UTF-8 text");
    r->stop = cv_xrealloc(r->stop, (size_t)(r->n_stop + 1) * sizeof *r->stop);
    r->stop[r->n_stop++] = cv_xstrndup(s, len);
    return 0;
}

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

/* ---- template variables ---- */

/* The wire vocabularies' efforts in order; -1 for a word not in them. */
static int effort_rank(const char *w)
{
    static const char *const words[] = { "none", "minimal", "low", "medium", "high", "xhigh" };
    for (int i = 0; i < (int)CV_ARRAY_LEN(words); i++)
        if (!strcmp(w, words[i]))
            return i;
    return !strcmp(w, "max") ? 5 : -1;
}

/* The level of levels[] nearest to rank (ties: the lower one). */
static const char *nearest_level(const char *const *levels, int rank)
{
    const char *best = NULL;
    int best_d = 0;
    for (int i = 0; levels[i]; i++) {
        const int r = effort_rank(levels[i]), d = r < 0 ? 99 : abs(r - rank);
        if (!best || d < best_d)
            best = levels[i], best_d = d;
    }
    return best;
}

static const char *template_effort(const cv_chat_request *r, const char *const *levels)
{
    if (!levels)
        return r->reasoning_effort;
    if (r->reasoning_effort) {
        for (int i = 0; levels[i]; i++)
            if (!strcmp(levels[i], r->reasoning_effort))
                return levels[i];
        const int rank = effort_rank(r->reasoning_effort);
        return rank < 0 ? NULL : nearest_level(levels, rank);
    }
    if (r->thinking == CV_THINKING_OFF)
        return levels[0];
    if (r->thinking == CV_THINKING_ON && r->thinking_budget > 0)
        return nearest_level(levels, r->thinking_budget < 8192 ? 2 : r->thinking_budget < 24576 ? 3 : 4);
    return NULL;
}

json_t *cv_req_template_kwargs(const cv_chat_request *r, const cv_tc_format *f)
{
    json_t *kw = r->template_kwargs ? json_deep_copy(r->template_kwargs) : json_object();
    if (r->thinking != CV_THINKING_DEFAULT && !json_object_get(kw, "enable_thinking"))
        json_object_set_new(kw, "enable_thinking", json_boolean(r->thinking == CV_THINKING_ON));
    const char *effort = template_effort(r, cv_tc_format_efforts(f));
    if (effort && !json_object_get(kw, "reasoning_effort"))
        json_object_set_new(kw, "reasoning_effort", json_string(effort));
    return kw;
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
