/* tc_result.c — the non-streaming result, defined as the event stream
 * assembled: content and reasoning are the concatenation of their deltas,
 * each call its BEGIN's id and name and the concatenation of its argument
 * fragments. There is no second parser, so streaming and non-streaming
 * responses cannot disagree. */
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

void cv_chat_parse_result_fini(cv_chat_parse_result *r)
{
    cv_buf_free(&r->content);
    cv_buf_free(&r->reasoning);
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].id);
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    memset(r, 0, sizeof *r);
}

void cv_chat_parse_result_collect(void *ud, const cv_chat_event *ev)
{
    cv_chat_parse_result *r = ud;
    switch (ev->type) {
    case CV_CHAT_CONTENT:
        cv_buf_append(&r->content, ev->text.ptr, ev->text.len);
        break;
    case CV_CHAT_REASONING:
        cv_buf_append(&r->reasoning, ev->text.ptr, ev->text.len);
        break;
    case CV_CHAT_TOOL_BEGIN:
        if (r->n_calls == r->cap_calls) {
            r->cap_calls = r->cap_calls ? r->cap_calls * 2 : 4;
            r->calls = cv_xrealloc(r->calls, (size_t)r->cap_calls * sizeof *r->calls);
        }
        r->calls[r->n_calls] = (cv_chat_tool_call){
            .id = cv_xstrndup(ev->id.ptr ? ev->id.ptr : "", ev->id.len),
            .name = cv_xstrndup(ev->name.ptr ? ev->name.ptr : "", ev->name.len),
            .arguments = cv_xstrdup(""),
            .arguments_cap = 1,
        };
        r->n_calls++;
        break;
    case CV_CHAT_TOOL_ARGS:
        if (ev->index >= 0 && ev->index < r->n_calls) {
            cv_chat_tool_call *c = &r->calls[ev->index];
            size_t need = c->arguments_len + ev->text.len + 1;
            if (need > c->arguments_cap) {
                c->arguments_cap = need > 2 * c->arguments_cap ? need : 2 * c->arguments_cap;
                c->arguments = cv_xrealloc(c->arguments, c->arguments_cap);
            }
            memcpy(c->arguments + c->arguments_len, ev->text.ptr, ev->text.len);
            c->arguments_len += ev->text.len;
            c->arguments[c->arguments_len] = 0;
        }
        break;
    case CV_CHAT_TOOL_END:
        break;
    }
}

int cv_chat_parse_text(const cv_chat_parse_opts *opts, const char *text, size_t len, cv_chat_parse_result *out,
                       cv_err *err)
{
    cv_chat_parse *p;
    int rc = cv_chat_parse_create(opts, cv_chat_parse_result_collect, out, &p, err);
    if (rc)
        return rc;
    rc = cv_chat_parse_feed(p, text, len, err);
    if (!rc)
        rc = cv_chat_parse_finish(p, err);
    cv_chat_parse_destroy(p);
    return rc;
}

json_t *cv_chat_parse_result_json(const cv_chat_parse_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "content", r->content.len ? json_stringn(r->content.data, r->content.len) : json_null());
    json_object_set_new(o, "reasoning_content",
                        r->reasoning.len ? json_stringn(r->reasoning.data, r->reasoning.len) : json_null());
    json_t *calls = json_array();
    for (int i = 0; i < r->n_calls; i++) {
        json_t *fn = json_object();
        json_object_set_new(fn, "name", json_string(r->calls[i].name));
        json_object_set_new(fn, "arguments", json_string(r->calls[i].arguments));
        json_t *c = json_object();
        json_object_set_new(c, "id", json_string(r->calls[i].id));
        json_object_set_new(c, "type", json_string("function"));
        json_object_set_new(c, "function", fn);
        json_array_append_new(calls, c);
    }
    json_object_set_new(o, "tool_calls", calls);
    return o;
}
