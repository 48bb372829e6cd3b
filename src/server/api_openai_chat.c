/* api_openai_chat.c — POST /v1/chat/completions: OpenAI chat requests to the
 * neutral request, and neutral events back to chat.completion JSON or
 * chat.completion.chunk SSE. Translation only (DESIGN.md "the one data path").
 *
 * Stream, exactly as OpenAI sends it:
 *   data: {chunk: delta {role:"assistant", content:""}}
 *   data: {chunk: delta {content | reasoning_content | tool_calls:[{index,id,type,function:{name,arguments:""}}]
 *                        | tool_calls:[{index,function:{arguments:"<fragment>"}}]}} ...
 *   data: {chunk: delta {}, finish_reason: "stop" | "length" | "tool_calls"}
 *   data: {chunk: choices [], usage {...}}          (only with stream_options.include_usage)
 *   data: [DONE]
 * Keep-alives are SSE comments (": keep-alive"), which every SSE parser skips.
 * Request quirks handled (testdata/clients/CLIENTS.md): content as a string or
 * text-part array (tool messages too), assistant content "" or null beside
 * tool_calls, reasoning_content echoed back, SDK extras (refusal, parsed)
 * ignored, max_tokens far past the context clamped (gen.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"
#include "server/request.h"

/* ---- request ---- */

/* Chat content parts: text ones only; anything else is refused until
 * vision exists. */
static const char *const text_parts[] = { "text", "input_text", "output_text", NULL };
static const cv_req_parts chat_parts = { "content part", text_parts, NULL };

/* Content as a string: text parts joined by newlines (OpenAI concatenates the
 * parts; a newline keeps words apart); *out NULL for null content. */
static int content_text(json_t *c, const char *what, json_t **out, cv_err *err)
{
    *out = NULL;
    if (!c || json_is_null(c))
        return 0;
    char w[64];
    snprintf(w, sizeof w, "%s.content", what);
    *out = cv_req_content_json(c, w, &chat_parts, err);
    return *out ? 0 : err ? err->code : CV_EINVAL;
}

static int tool_calls(json_t *tc, const char *what, json_t *msg, cv_err *err)
{
    if (!tc || json_is_null(tc))
        return 0;
    if (!json_is_array(tc))
        return cv_err_set(err, CV_EINVAL, "'%s.tool_calls' must be an array", what);
    json_t *calls = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(tc, i, c) {
        json_t *fn = json_object_get(c, "function");
        const char *id = NULL, *name = NULL;
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_object(c) || !json_is_object(fn) || cv_json_get_str(c, "id", NULL, &id, NULL) ||
            cv_json_get_str(fn, "name", NULL, &name, NULL) || !name) {
            json_decref(calls);
            return cv_err_set(err, CV_EINVAL, "'%s.tool_calls[%zu]' must have a 'function' with a string 'name'",
                              what, i);
        }
        json_t *obj;
        if (json_is_string(args))
            obj = cv_req_args_object(json_string_value(args), json_string_length(args));
        else if (json_is_object(args))
            obj = json_deep_copy(args);
        else if (!args || json_is_null(args))
            obj = json_object();
        else {
            json_decref(calls);
            return cv_err_set(err, CV_EINVAL, "'%s.tool_calls[%zu].function.arguments' must be a string", what, i);
        }
        json_array_append_new(calls, cv_req_call(id, name, obj));
    }
    json_object_set_new(msg, "tool_calls", calls);
    return 0;
}

static int parse_messages(json_t *msgs, cv_chat_request *r, cv_err *err)
{
    if (!json_is_array(msgs))
        return cv_err_set(err, CV_EINVAL, "'messages' must be an array");
    if (json_array_size(msgs) == 0)
        return cv_err_set(err, CV_EINVAL, "'messages' is empty; send at least one message");
    if (json_array_size(msgs) > CV_MAX_MESSAGES)
        return cv_err_set(err, CV_ELIMIT, "%zu messages is over the limit of %d", json_array_size(msgs),
                          CV_MAX_MESSAGES);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char what[48];
        snprintf(what, sizeof what, "messages[%zu]", i);
        const char *role = NULL;
        if (!json_is_object(m))
            return cv_err_set(err, CV_EINVAL, "'%s' must be an object", what);
        if (cv_json_get_str(m, "role", what, &role, err))
            return CV_EINVAL;
        if (!role)
            return cv_err_set(err, CV_EINVAL, "'%s.role' is missing", what);
        const char *nrole;
        if (!strcmp(role, "system") || !strcmp(role, "developer"))
            nrole = "system";
        else if (!strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "tool"))
            nrole = role;
        else
            return cv_err_set(err, CV_EINVAL,
                              "'%s.role' is '%.40s', must be one of system, developer, user, assistant, tool", what,
                              role);
        json_t *content;
        if (content_text(json_object_get(m, "content"), what, &content, err))
            return err ? err->code : CV_EINVAL;
        json_t *out = json_object();
        json_object_set_new(out, "role", json_string(nrole));
        /* null content (an assistant turn that only calls tools) becomes "":
         * templates test it with `in` and `|length` (Qwen3's
         * `'</think>' in message.content` raises on None, as in Jinja2). */
        json_object_set_new(out, "content", content ? content : json_string(""));
        if (!strcmp(nrole, "assistant")) {
            const char *rc = NULL;
            if (cv_json_get_str(m, "reasoning_content", what, &rc, err) ||
                (!rc && cv_json_get_str(m, "reasoning", what, &rc, err))) {
                json_decref(out);
                return CV_EINVAL;
            }
            if (rc && *rc)
                json_object_set_new(out, "reasoning_content", json_string(rc));
            if (tool_calls(json_object_get(m, "tool_calls"), what, out, err)) {
                json_decref(out);
                return CV_EINVAL;
            }
        } else if (!strcmp(nrole, "tool")) {
            const char *id = NULL;
            if (cv_json_get_str(m, "tool_call_id", what, &id, err)) {
                json_decref(out);
                return CV_EINVAL;
            }
            json_object_set_new(out, "tool_call_id", json_string(id ? id : ""));
        }
        const char *name = NULL;
        if (!cv_json_get_str(m, "name", NULL, &name, NULL) && name && strcmp(nrole, "user"))
            json_object_set_new(out, "name", json_string(name));
        json_array_append_new(r->messages, out);
    }
    return 0;
}

/* Function tools keep their definition under "function". */
static const cv_req_tool_spec chat_tools = { "chat", "function", "function", "parameters" };

static int parse_tool_choice(json_t *tc, cv_chat_request *r, cv_err *err)
{
    if (!tc || json_is_null(tc))
        return 0;
    if (json_is_string(tc))
        return cv_req_tool_choice_word(json_string_value(tc), r, err);
    json_t *fn = json_object_get(tc, "function");
    const char *name = NULL;
    if (!json_is_object(tc) || !json_is_object(fn) || cv_json_get_str(fn, "name", NULL, &name, NULL) || !name)
        return cv_err_set(err, CV_EINVAL, "'tool_choice' object must be {\"type\":\"function\",\"function\":{\"name\":...}}");
    r->tool_choice = CV_TOOL_CHOICE_NAMED;
    r->tool_choice_name = cv_xstrdup(name);
    return 0;
}

static const cv_req_field openai_sampling[] = {
    CV_REQ_FIELD("temperature", CV_REQ_F32, 0, 2, sample.temperature),
    CV_REQ_FIELD("top_p", CV_REQ_F32, 0, 1, sample.top_p),
    CV_REQ_FIELD("min_p", CV_REQ_F32, 0, 1, sample.min_p),
    CV_REQ_FIELD("top_k", CV_REQ_I32, -1, 1 << 20, sample.top_k),
    CV_REQ_FIELD("presence_penalty", CV_REQ_F32, -2, 2, sample.presence_penalty),
    CV_REQ_FIELD("frequency_penalty", CV_REQ_F32, -2, 2, sample.frequency_penalty),
    CV_REQ_FIELD("repetition_penalty", CV_REQ_F32, 0, 10, sample.repeat_penalty),
};
static const cv_req_field chat_fields[] = {
    CV_REQ_FIELD("top_logprobs", CV_REQ_I32, 0, CV_MAX_TOP_LOGPROBS, top_logprobs),
};

/* Sampling, limits and switches shared by chat and legacy completions. */
int cv_openai_sampling(json_t *b, cv_chat_request *r, cv_err *err)
{
    int64_t x;
    bool has;
    const char *model = NULL;
    if (cv_json_get_str(b, "model", NULL, &model, err))
        return CV_EINVAL;
    if (model)
        r->model = cv_xstrdup(model);
    if (cv_json_get_bool(b, "stream", NULL, &r->stream, err))
        return CV_EINVAL;
    json_t *so = json_object_get(b, "stream_options");
    if (so && !json_is_null(so) && !json_is_object(so))
        return cv_err_set(err, CV_EINVAL, "'stream_options' must be an object");
    if (cv_json_get_bool(so, "include_usage", "stream_options", &r->include_usage, err))
        return CV_EINVAL;
    if (cv_req_int(b, "max_completion_tokens", 1, INT32_MAX, &x, &has, err))
        return CV_EINVAL;
    if (!has && cv_req_int(b, "max_tokens", 1, INT32_MAX, &x, &has, err))
        return CV_EINVAL;
    if (has)
        r->max_tokens = (int32_t)x;
    if (cv_req_fields(b, openai_sampling, CV_ARRAY_LEN(openai_sampling), r, err))
        return CV_EINVAL;
    if (cv_req_int(b, "seed", INT64_MIN, INT64_MAX, &x, &has, err)) return CV_EINVAL;
    if (has) {
        r->sample.seed = (uint64_t)x;
        r->sample.has_seed = true;
    }
    if (cv_req_int(b, "n", 1, 1, &x, &has, err)) {
        cv_err_set(err, CV_EUNSUPPORTED, "'n' must be 1: one choice per request is served");
        return CV_EUNSUPPORTED;
    }
    if (cv_req_stops(r, json_object_get(b, "stop"), "stop", err))
        return err ? err->code : CV_EINVAL;
    json_t *lb = json_object_get(b, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb))
            return cv_err_set(err, CV_EINVAL, "'logit_bias' must be an object of token id → bias");
        if (json_object_size(lb) > CV_MAX_LOGIT_BIAS)
            return cv_err_set(err, CV_ELIMIT, "'logit_bias' has %zu entries, over the limit of %d",
                              json_object_size(lb), CV_MAX_LOGIT_BIAS);
        r->logit_bias = cv_xcalloc(json_object_size(lb) + 1, sizeof *r->logit_bias);
        const char *k;
        json_t *v;
        json_object_foreach(lb, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (*end || id < 0 || id > INT32_MAX || !json_is_number(v) || !isfinite(json_number_value(v)) ||
                fabs(json_number_value(v)) > 100)
                return cv_err_set(err, CV_EINVAL, "'logit_bias[\"%.20s\"]' must map a token id to a bias in [-100, 100]",
                                  k);
            r->logit_bias[r->sample.n_logit_bias].token = (int32_t)id;
            r->logit_bias[r->sample.n_logit_bias].bias = (float)json_number_value(v);
            r->sample.n_logit_bias++;
        }
    }
    return 0;
}

int cv_openai_chat_parse(json_t *b, cv_chat_request *r, cv_err *err)
{
    if (parse_messages(json_object_get(b, "messages"), r, err))
        return err ? err->code : CV_EINVAL;
    if (cv_req_tools(r, json_object_get(b, "tools"), &chat_tools, err))
        return err ? err->code : CV_EINVAL;
    if (parse_tool_choice(json_object_get(b, "tool_choice"), r, err))
        return CV_EINVAL;
    if (cv_json_get_bool(b, "parallel_tool_calls", NULL, &r->parallel_tool_calls, err))
        return CV_EINVAL;
    if (cv_openai_sampling(b, r, err))
        return err ? err->code : CV_EINVAL;
    if (cv_json_get_bool(b, "logprobs", NULL, &r->logprobs, err))
        return CV_EINVAL;
    if (cv_req_fields(b, chat_fields, CV_ARRAY_LEN(chat_fields), r, err))
        return CV_EINVAL;
    json_t *rf = json_object_get(b, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *type = NULL;
        if (!json_is_object(rf) || cv_json_get_str(rf, "type", "response_format", &type, NULL) || !type)
            return cv_err_set(err, CV_EINVAL, "'response_format' must be an object with a 'type'");
        if (strcmp(type, "text") && strcmp(type, "json_object") && strcmp(type, "json_schema"))
            return cv_err_set(err, CV_EINVAL, "'response_format.type' is '%.40s', must be text, json_object or json_schema",
                              type);
        if (strcmp(type, "text"))
            r->response_format = json_incref(rf);
    }
    const char *effort = NULL;
    if (cv_json_get_str(b, "reasoning_effort", NULL, &effort, err))
        return CV_EINVAL;
    if (effort) {
        if (!strcmp(effort, "none"))
            r->thinking = CV_THINKING_OFF;
        else {
            r->thinking = CV_THINKING_ON;
            r->reasoning_effort = cv_xstrdup(effort);
        }
    }
    json_t *kw = json_object_get(b, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return cv_err_set(err, CV_EINVAL, "'chat_template_kwargs' must be an object");
        r->template_kwargs = json_incref(kw);
        json_t *et = json_object_get(kw, "enable_thinking");
        if (json_is_boolean(et))
            r->thinking = json_is_true(et) ? CV_THINKING_ON : CV_THINKING_OFF;
    }
    return cv_req_check_limits(r, err);
}

/* ---- response ---- */

typedef struct enc_chat {
    bool stream;
    cv_buf content, reasoning;
    cv_calls calls;
    json_t *logprobs; /* non-streaming: every token's entry */
} enc_chat;

void *cv_enc_openai_chat_new(bool stream)
{
    enc_chat *e = cv_xcalloc(1, sizeof *e);
    e->stream = stream;
    return e;
}

static json_t *chunk(cv_gen *g, json_t *delta, const char *finish)
{
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "delta", delta);
    json_t *lp = cv_gen_take_logprobs(g);
    json_object_set_new(choice, "logprobs", lp ? json_pack("{s:o, s:n}", "content", lp, "refusal") : json_null());
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *c = json_object();
    json_object_set_new(c, "id", json_string(cv_gen_id(g)));
    json_object_set_new(c, "object", json_string("chat.completion.chunk"));
    json_object_set_new(c, "created", json_integer(cv_gen_created(g)));
    json_object_set_new(c, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set_new(c, "system_fingerprint", json_string("corvid"));
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    return c;
}

static const char *finish_name(cv_gen *g)
{
    switch (cv_gen_finish_reason(g)) {
    case CV_GEN_LENGTH: return "length";
    case CV_GEN_TOOL: return "tool_calls";
    default: return "stop";
    }
}

static json_t *usage(cv_gen *g)
{
    int32_t p = cv_gen_n_prompt(g), c = cv_gen_n_generated(g);
    return json_pack("{s:i, s:i, s:i, s:{s:i}, s:{s:i}}", "prompt_tokens", p, "completion_tokens", c, "total_tokens",
                     p + c, "prompt_tokens_details", "cached_tokens", cv_gen_n_cached(g), "completion_tokens_details",
                     "reasoning_tokens", cv_gen_n_reasoning(g));
}

static void chat_begin(void *ud, cv_gen *g, cv_buf *out)
{
    enc_chat *e = ud;
    if (e->stream)
        cv_sse(out, NULL, chunk(g, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL));
}

static void chat_event(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out)
{
    enc_chat *e = ud;
    cv_call *call = cv_event_is_tool(ev) ? cv_calls_at(&e->calls, cv_gen_server(g), ev, "call_") : NULL;
    if (cv_event_is_tool(ev) && !call)
        return;
    if (!e->stream) {
        switch (ev->type) {
        case CV_CHAT_CONTENT: cv_buf_put_str(&e->content, ev->text); break;
        case CV_CHAT_REASONING: cv_buf_put_str(&e->reasoning, ev->text); break;
        case CV_CHAT_TOOL_ARGS: cv_buf_put_str(&call->args, ev->text); break;
        default: break;
        }
        json_t *lp = cv_gen_take_logprobs(g);
        if (lp) {
            if (!e->logprobs)
                e->logprobs = json_array();
            json_array_extend(e->logprobs, lp);
            json_decref(lp);
        }
        return;
    }
    json_t *delta = NULL;
    switch (ev->type) {
    case CV_CHAT_CONTENT:
        delta = json_pack("{s:o}", "content", cv_json_str(ev->text.ptr, ev->text.len));
        break;
    case CV_CHAT_REASONING:
        delta = json_pack("{s:o}", "reasoning_content", cv_json_str(ev->text.ptr, ev->text.len));
        break;
    case CV_CHAT_TOOL_BEGIN:
        delta = json_pack("{s:[{s:i, s:s, s:s, s:{s:o, s:s}}]}", "tool_calls", "index", ev->index, "id", call->id,
                          "type", "function", "function", "name", cv_json_strz(call->name), "arguments", "");
        break;
    case CV_CHAT_TOOL_ARGS:
        delta = json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", ev->index, "function", "arguments",
                          cv_json_str(ev->text.ptr, ev->text.len));
        break;
    case CV_CHAT_TOOL_END:
        return;
    }
    cv_sse(out, NULL, chunk(g, delta, NULL));
}

static void chat_finish(void *ud, cv_gen *g, cv_buf *out)
{
    enc_chat *e = ud;
    const cv_chat_request *r = cv_gen_request(g);
    if (e->stream) {
        cv_sse(out, NULL, chunk(g, json_object(), finish_name(g)));
        if (r->include_usage) {
            json_t *c = chunk(g, json_object(), NULL);
            json_object_set_new(c, "choices", json_array());
            json_object_set_new(c, "usage", usage(g));
            cv_sse(out, NULL, c);
        }
        cv_buf_puts(out, "data: [DONE]\n\n");
        return;
    }
    json_t *msg = json_object();
    json_object_set_new(msg, "role", json_string("assistant"));
    bool only_calls = e->calls.n > 0 && e->content.len == 0;
    json_object_set_new(msg, "content", only_calls ? json_null() : cv_json_str(e->content.data, e->content.len));
    if (e->reasoning.len)
        json_object_set_new(msg, "reasoning_content", cv_json_str(e->reasoning.data, e->reasoning.len));
    if (e->calls.n)
        json_object_set_new(msg, "tool_calls", cv_calls_json(&e->calls, false));
    json_object_set_new(msg, "refusal", json_null());
    json_t *choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", msg, "logprobs",
                               e->logprobs ? json_pack("{s:O, s:n}", "content", e->logprobs, "refusal") : json_null(),
                               "finish_reason", finish_name(g));
    json_t *resp = json_object();
    json_object_set_new(resp, "id", json_string(cv_gen_id(g)));
    json_object_set_new(resp, "object", json_string("chat.completion"));
    json_object_set_new(resp, "created", json_integer(cv_gen_created(g)));
    json_object_set_new(resp, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set_new(resp, "system_fingerprint", json_string("corvid"));
    json_object_set_new(resp, "choices", json_pack("[o]", choice));
    json_object_set_new(resp, "usage", usage(g));
    cv_json_dump(out, resp);
    json_decref(resp);
}

void cv_openai_error(bool stream, const cv_err *err, cv_buf *out)
{
    cv_buf body = { 0 };
    cv_wire_error_body(CV_WIRE_OPENAI, err->code ? err->code : CV_SE_INTERNAL, err->msg, NULL, &body);
    if (stream) {
        /* The openai SDK raises APIError for a chunk carrying "error". */
        cv_buf_puts(out, "data: ");
        cv_buf_append(out, body.data, body.len);
        cv_buf_puts(out, "\n\ndata: [DONE]\n\n");
    } else {
        cv_buf_append(out, body.data, body.len);
    }
    cv_buf_free(&body);
}

static void chat_error(void *ud, cv_gen *g, const cv_err *err, cv_buf *out)
{
    cv_openai_error(((enc_chat *)ud)->stream, err, out);
}

static void chat_keepalive(void *ud, cv_gen *g, cv_buf *out)
{
    enc_chat *e = ud;
    if (e->stream)
        cv_buf_puts(out, ": keep-alive\n\n");
}

static void chat_destroy(void *ud)
{
    enc_chat *e = ud;
    cv_buf_free(&e->content);
    cv_buf_free(&e->reasoning);
    cv_calls_free(&e->calls);
    json_decref(e->logprobs);
    free(e);
}

const cv_gen_enc cv_enc_openai_chat = {
    .id_prefix = "chatcmpl-",
    .create = cv_enc_openai_chat_new,
    .begin = chat_begin,
    .event = chat_event,
    .finish = chat_finish,
    .error = chat_error,
    .keepalive = chat_keepalive,
    .destroy = chat_destroy,
};
