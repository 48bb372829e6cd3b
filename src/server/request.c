/* request.c — the small helpers every wire file shares while translating
 * into the neutral request (chat_request.h): range-checked sampling
 * numbers and the tables of them, stop strings, content parts flattened to
 * text, function tools and tool calls in the neutral shape, argument strings
 * to objects, Claude Code's billing line, limits, safe JSON strings and SSE
 * frames. Nothing here knows a wire: what differs between wires (part type
 * names, where a tool keeps its schema) comes in as arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/request.h"
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

int cv_req_fields(json_t *obj, const cv_req_field *f, size_t n, cv_chat_request *r, cv_err *err)
{
    for (size_t i = 0; i < n; i++) {
        bool has;
        char *dst = (char *)r + f[i].offset;
        if (f[i].kind == CV_REQ_F32) {
            double d;
            if (cv_req_num(obj, f[i].key, f[i].lo, f[i].hi, &d, &has, err))
                return CV_EINVAL;
            if (has)
                *(float *)(void *)dst = (float)d;
        } else {
            int64_t x;
            if (cv_req_int(obj, f[i].key, (int64_t)f[i].lo, (int64_t)f[i].hi, &x, &has, err))
                return CV_EINVAL;
            if (has)
                *(int32_t *)(void *)dst = (int32_t)x;
        }
    }
    return 0;
}

/* ---- content and tools ---- */

static bool one_of(const char *s, const char *const *list)
{
    for (; list && *list; list++)
        if (!strcmp(s, *list))
            return true;
    return false;
}

int cv_req_part_text(json_t *p, const char *what, size_t i, const cv_req_parts *k, cv_buf *out, cv_err *err)
{
    const char *type = NULL;
    if (!json_is_object(p) || cv_json_get_str(p, "type", NULL, &type, NULL) || !type)
        return cv_err_set(err, CV_EINVAL, "'%s[%zu]' must be a %s with a 'type'", what, i, k->noun);
    if (one_of(type, k->text_types)) {
        json_t *t = json_object_get(p, "text");
        if (!json_is_string(t))
            return cv_err_set(err, CV_EINVAL, "'%s[%zu].text' must be a string", what, i);
        if (out->len)
            cv_buf_putc(out, '\n');
        cv_buf_append(out, json_string_value(t), json_string_length(t));
        return 0;
    }
    if (!k->media_types || one_of(type, k->media_types))
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "'%s[%zu]' has type '%.40s': this server takes text only (no image, audio, document or "
                          "file input: no vision yet)",
                          what, i, type);
    cv_debug("request: skipping a '%.40s' %s in %s", type, k->noun, what);
    return 0;
}

int cv_req_content_text(json_t *c, const char *what, const cv_req_parts *k, cv_buf *out, cv_err *err)
{
    if (!c || json_is_null(c))
        return 0;
    if (json_is_string(c)) {
        cv_buf_append(out, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (!json_is_array(c))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a string, an array of %ss or null", what, k->noun);
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        int rc = cv_req_part_text(p, what, i, k, out, err);
        if (rc)
            return rc;
    }
    return 0;
}

json_t *cv_req_content_json(json_t *c, const char *what, const cv_req_parts *k, cv_err *err)
{
    cv_buf b = { 0 };
    json_t *v = NULL;
    if (!cv_req_content_text(c, what, k, &b, err) && !(v = json_stringn(b.data ? b.data : "", b.len)))
        cv_err_set(err, CV_EINVAL, "'%s' is not valid UTF-8", what);
    cv_buf_free(&b);
    return v;
}

int cv_req_tools_array(json_t *tools, size_t *n, cv_err *err)
{
    *n = 0;
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return cv_err_set(err, CV_EINVAL, "'tools' must be an array");
    if (json_array_size(tools) > CV_MAX_TOOLS)
        return cv_err_set(err, CV_ELIMIT, "%zu tools is over the limit of %d", json_array_size(tools), CV_MAX_TOOLS);
    *n = json_array_size(tools);
    return 0;
}

int cv_req_add_tool(cv_chat_request *r, json_t *def, const char *what, const char *params_key, cv_err *err)
{
    const char *name = NULL, *desc = NULL;
    if (!json_is_object(def) || cv_json_get_str(def, "name", NULL, &name, NULL) || !name || !*name)
        return cv_err_set(err, CV_EINVAL, "'%s.name' must be a non-empty string", what);
    if (cv_json_get_str(def, "description", NULL, &desc, NULL))
        return cv_err_set(err, CV_EINVAL, "'%s.description' must be a string", what);
    json_t *params = json_object_get(def, params_key);
    if (params && !json_is_object(params) && !json_is_null(params))
        return cv_err_set(err, CV_EINVAL, "'%s.%s' must be a JSON Schema object", what, params_key);
    if (json_array_size(r->tools) >= CV_MAX_TOOLS)
        return cv_err_set(err, CV_ELIMIT, "more than %d tools", CV_MAX_TOOLS);
    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(name));
    if (desc)
        json_object_set_new(f, "description", json_string(desc));
    json_object_set_new(f, "parameters", json_is_object(params)
                                             ? json_incref(params)
                                             : json_pack("{s:s, s:{}}", "type", "object", "properties"));
    json_array_append_new(r->tools, json_pack("{s:s, s:o}", "type", "function", "function", f));
    return 0;
}

int cv_req_tools(cv_chat_request *r, json_t *tools, const cv_req_tool_spec *spec, cv_err *err)
{
    size_t n;
    if (cv_req_tools_array(tools, &n, err))
        return err ? err->code : CV_EINVAL;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tools, i);
        const char *type = NULL;
        if (!json_is_object(t) || cv_json_get_str(t, "type", NULL, &type, NULL))
            return cv_err_set(err, CV_EINVAL, "'tools[%zu]' must be an object with a string 'type'", i);
        if (type && strcmp(type, spec->served_type)) {
            cv_info("%s: ignoring tools[%zu] of type '%.40s' (only %s tools are served)", spec->wire, i, type,
                    spec->served_type);
            continue;
        }
        char what[48];
        if (spec->def_key)
            snprintf(what, sizeof what, "tools[%zu].%s", i, spec->def_key);
        else
            snprintf(what, sizeof what, "tools[%zu]", i);
        int rc = cv_req_add_tool(r, spec->def_key ? json_object_get(t, spec->def_key) : t, what, spec->params_key, err);
        if (rc)
            return rc;
    }
    return 0;
}

int cv_req_tool_choice_word(const char *s, cv_chat_request *r, cv_err *err)
{
    if (!strcmp(s, "auto"))
        r->tool_choice = CV_TOOL_CHOICE_AUTO;
    else if (!strcmp(s, "none"))
        r->tool_choice = CV_TOOL_CHOICE_NONE;
    else if (!strcmp(s, "required"))
        r->tool_choice = CV_TOOL_CHOICE_REQUIRED;
    else
        return cv_err_set(err, CV_EINVAL, "'tool_choice' is '%.40s', must be auto, none, required or an object", s);
    return 0;
}

json_t *cv_req_call(const char *id, const char *name, json_t *args)
{
    return json_pack("{s:o, s:s, s:{s:o, s:o}}", "id", cv_json_strz(id), "type", "function", "function", "name",
                     cv_json_strz(name), "arguments", args);
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

json_t *cv_calls_json(const cv_calls *c, bool objects)
{
    json_t *calls = json_array();
    for (int i = 0; i < c->n; i++) {
        const cv_call *k = &c->v[i];
        json_t *args = objects ? cv_req_args_object(k->args.data, k->args.len) : cv_json_str(k->args.data, k->args.len);
        json_array_append_new(calls, cv_req_call(k->id, k->name, args));
    }
    return calls;
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
