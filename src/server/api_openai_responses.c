/* api_openai_responses.c — POST /v1/responses (what Codex CLI speaks):
 * Responses requests to the neutral request, and neutral events back to a
 * response object or its event stream; previous_response_id through the
 * bounded store (resp_store.c). Translation only.
 *
 * Stream (event: TYPE + data: {type, sequence_number, ...}):
 *   response.created, response.in_progress          {response: status in_progress, output []}
 *   per output item, in generation order:
 *     reasoning:     output_item.added {reasoning, summary []}, reasoning_summary_part.added,
 *                    reasoning_summary_text.delta ..., reasoning_summary_text.done,
 *                    reasoning_summary_part.done, output_item.done
 *     message:       output_item.added {message, in_progress}, content_part.added,
 *                    output_text.delta ..., output_text.done, content_part.done, output_item.done
 *     function_call: output_item.added {function_call, arguments ""},
 *                    function_call_arguments.delta ..., function_call_arguments.done, output_item.done
 *   response.completed (or response.incomplete when max_output_tokens cut it)
 *                                                    {response: output, usage}
 * Keep-alives are SSE comments; a failure after the headers is an `error` event.
 *
 * Request quirks (CLIENTS.md, Codex): instructions as `developer` messages,
 * items with id/status, function_call_output.output a string or parts,
 * reasoning items with encrypted_content (accepted; their summary text is
 * kept as reasoning), `namespace` tool groups flattened, hosted tools
 * (web_search, ...) ignored with a log line, store/include/prompt_cache_key/
 * client_metadata ignored. Instructions of a previous response are not
 * carried over (OpenAI's documented semantics). */
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"
#include "server/request.h"

/* ---- request ---- */

static const char *const text_parts[] = { "input_text", "output_text", "text", NULL };
static const char *const media_parts[] = { "input_image", "input_file", "input_audio", NULL };
static const cv_req_parts resp_parts = { "content part", text_parts, media_parts };

/* An item's content or output as one string; unlike a chat message's, it
 * must be there. */
static int parts_text(json_t *c, const char *what, json_t **out, cv_err *err)
{
    *out = NULL;
    if (!json_is_string(c) && !json_is_array(c))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a string or an array of content parts", what);
    *out = cv_req_content_json(c, what, &resp_parts, err);
    return *out ? 0 : err ? err->code : CV_EINVAL;
}

/* The assistant message function calls and reasoning attach to: the last
 * message when it is an assistant's, else a new empty one. */
static json_t *assistant_tail(json_t *msgs)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    if (last && !strcmp(json_string_value(json_object_get(last, "role")), "assistant"))
        return last;
    json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
    json_array_append_new(msgs, m);
    return m;
}

static int input_items(json_t *input, json_t *msgs, cv_err *err)
{
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", input));
        return 0;
    }
    if (!json_is_array(input))
        return cv_err_set(err, CV_EINVAL, "'input' must be a string or an array of items");
    if (json_array_size(input) > CV_MAX_MESSAGES)
        return cv_err_set(err, CV_ELIMIT, "%zu input items is over the limit of %d", json_array_size(input),
                          CV_MAX_MESSAGES);
    cv_buf reasoning = { 0 };
    size_t i;
    json_t *it;
    int rc = 0;
    json_array_foreach(input, i, it) {
        char what[48];
        snprintf(what, sizeof what, "input[%zu]", i);
        const char *type = NULL, *role = NULL;
        if (!json_is_object(it) || cv_json_get_str(it, "type", NULL, &type, NULL) ||
            cv_json_get_str(it, "role", NULL, &role, NULL)) {
            rc = cv_err_set(err, CV_EINVAL, "'%s' must be an object with string 'type' or 'role'", what);
            break;
        }
        if (!type && role)
            type = "message";
        if (!type) {
            rc = cv_err_set(err, CV_EINVAL, "'%s' has neither 'type' nor 'role'", what);
            break;
        }
        if (!strcmp(type, "message")) {
            const char *nrole;
            if (!role) {
                rc = cv_err_set(err, CV_EINVAL, "'%s.role' is missing", what);
                break;
            }
            if (!strcmp(role, "system") || !strcmp(role, "developer"))
                nrole = "system";
            else if (!strcmp(role, "user") || !strcmp(role, "assistant"))
                nrole = role;
            else {
                rc = cv_err_set(err, CV_EINVAL, "'%s.role' is '%.40s', must be user, assistant, system or developer",
                                what, role);
                break;
            }
            char w2[64];
            snprintf(w2, sizeof w2, "%s.content", what);
            json_t *content;
            if ((rc = parts_text(json_object_get(it, "content"), w2, &content, err)))
                break;
            json_t *m = json_pack("{s:s, s:o}", "role", nrole, "content", content);
            if (!strcmp(nrole, "assistant") && reasoning.len) {
                json_object_set_new(m, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
                cv_buf_reset(&reasoning);
            }
            json_array_append_new(msgs, m);
        } else if (!strcmp(type, "function_call")) {
            const char *call_id = NULL, *name = NULL, *args = NULL;
            if (cv_json_get_str(it, "call_id", NULL, &call_id, NULL) || cv_json_get_str(it, "name", NULL, &name, NULL) ||
                cv_json_get_str(it, "arguments", NULL, &args, NULL) || !name) {
                rc = cv_err_set(err, CV_EINVAL, "'%s' function_call needs string 'name', 'call_id' and 'arguments'",
                                what);
                break;
            }
            json_t *m = assistant_tail(msgs);
            if (reasoning.len) {
                json_object_set_new(m, "reasoning_content", json_stringn(reasoning.data, reasoning.len));
                cv_buf_reset(&reasoning);
            }
            json_t *calls = json_object_get(m, "tool_calls");
            if (!calls) {
                calls = json_array();
                json_object_set_new(m, "tool_calls", calls);
            }
            json_array_append_new(calls, cv_req_call(call_id, name, cv_req_args_object(args, args ? strlen(args) : 0)));
        } else if (!strcmp(type, "function_call_output")) {
            const char *call_id = NULL;
            json_t *output;
            char w2[64];
            snprintf(w2, sizeof w2, "%s.output", what);
            if (cv_json_get_str(it, "call_id", NULL, &call_id, NULL)) {
                rc = cv_err_set(err, CV_EINVAL, "'%s.call_id' must be a string", what);
                break;
            }
            if ((rc = parts_text(json_object_get(it, "output"), w2, &output, err)))
                break;
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id",
                                                  call_id ? call_id : "", "content", output));
        } else if (!strcmp(type, "reasoning")) {
            /* encrypted_content is ours to ignore; the readable text is kept
             * as the next assistant turn's reasoning. */
            json_t *parts[2] = { json_object_get(it, "content"), json_object_get(it, "summary") };
            json_t *src = json_array_size(parts[0]) ? parts[0] : parts[1];
            size_t k;
            json_t *p;
            json_array_foreach(src, k, p) {
                json_t *t = json_object_get(p, "text");
                if (json_is_string(t)) {
                    if (reasoning.len)
                        cv_buf_putc(&reasoning, '\n');
                    cv_buf_append(&reasoning, json_string_value(t), json_string_length(t));
                }
            }
        } else {
            cv_info("responses: ignoring an input item of type '%.40s'", type);
        }
    }
    cv_buf_free(&reasoning);
    return rc;
}

static int parse_tools(json_t *tools, cv_chat_request *r, cv_err *err)
{
    size_t n;
    if (cv_req_tools_array(tools, &n, err))
        return err ? err->code : CV_EINVAL;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tools, i);
        char what[48];
        snprintf(what, sizeof what, "tools[%zu]", i);
        const char *type = NULL;
        if (!json_is_object(t) || cv_json_get_str(t, "type", NULL, &type, NULL) || !type)
            return cv_err_set(err, CV_EINVAL, "'%s' must be an object with a string 'type'", what);
        if (!strcmp(type, "function")) {
            if (cv_req_add_tool(r, t, what, "parameters", err))
                return err ? err->code : CV_EINVAL;
        } else if (!strcmp(type, "namespace")) {
            /* Codex groups tools in namespaces; the model sees them flat. */
            json_t *inner = json_object_get(t, "tools");
            size_t k;
            json_t *f;
            json_array_foreach(inner, k, f) {
                const char *ft = NULL;
                char w2[80];
                snprintf(w2, sizeof w2, "%s.tools[%zu]", what, k);
                if (!json_is_object(f) || cv_json_get_str(f, "type", NULL, &ft, NULL) || (ft && strcmp(ft, "function")))
                    continue;
                if (cv_req_add_tool(r, f, w2, "parameters", err))
                    return err ? err->code : CV_EINVAL;
            }
        } else {
            cv_info("responses: ignoring tools[%zu] of type '%.40s' (hosted tools are not served)", i, type);
        }
    }
    return 0;
}

static const cv_req_field resp_fields[] = {
    CV_REQ_FIELD("max_output_tokens", CV_REQ_I32, 1, INT32_MAX, max_tokens),
    CV_REQ_FIELD("temperature", CV_REQ_F32, 0, 2, sample.temperature),
    CV_REQ_FIELD("top_p", CV_REQ_F32, 0, 1, sample.top_p),
};

int cv_openai_responses_parse(json_t *b, cv_resp_store *store, cv_chat_request *r, cv_err *err)
{
    int64_t x;
    bool has;
    const char *model = NULL, *instructions = NULL, *prev = NULL;
    if (cv_json_get_str(b, "model", NULL, &model, err) || cv_json_get_str(b, "instructions", NULL, &instructions, err) ||
        cv_json_get_str(b, "previous_response_id", NULL, &prev, err))
        return CV_EINVAL;
    if (model)
        r->model = cv_xstrdup(model);
    if (instructions && *instructions)
        json_array_append_new(r->messages, json_pack("{s:s, s:s}", "role", "system", "content", instructions));
    if (prev) {
        json_t *hist = store ? cv_resp_store_get(store, prev) : NULL;
        if (!hist)
            return cv_err_set(err, CV_ENOTFOUND,
                              "previous_response_id '%.64s' is not stored (unknown, evicted, or made with store:false)",
                              prev);
        json_array_extend(r->messages, hist);
        json_decref(hist);
    }
    json_t *input = json_object_get(b, "input");
    if (!input || json_is_null(input)) {
        if (!prev)
            return cv_err_set(err, CV_EINVAL, "'input' is missing");
    } else if (input_items(input, r->messages, err)) {
        return err ? err->code : CV_EINVAL;
    }
    if (json_array_size(r->messages) == 0)
        return cv_err_set(err, CV_EINVAL, "'input' is empty; send at least one item");
    if (parse_tools(json_object_get(b, "tools"), r, err))
        return err ? err->code : CV_EINVAL;
    json_t *tc = json_object_get(b, "tool_choice");
    if (json_is_string(tc)) {
        if (cv_req_tool_choice_word(json_string_value(tc), r, err))
            return CV_EINVAL;
    } else if (json_is_object(tc)) {
        const char *name = NULL;
        if (cv_json_get_str(tc, "name", NULL, &name, NULL) || !name)
            return cv_err_set(err, CV_EINVAL, "'tool_choice' object must name a function");
        r->tool_choice = CV_TOOL_CHOICE_NAMED;
        r->tool_choice_name = cv_xstrdup(name);
    } else if (tc && !json_is_null(tc)) {
        return cv_err_set(err, CV_EINVAL, "'tool_choice' must be a string or an object");
    }
    if (cv_json_get_bool(b, "parallel_tool_calls", NULL, &r->parallel_tool_calls, err) ||
        cv_json_get_bool(b, "stream", NULL, &r->stream, err))
        return CV_EINVAL;
    json_t *reas = json_object_get(b, "reasoning");
    if (reas && !json_is_null(reas)) {
        const char *effort = NULL;
        if (!json_is_object(reas) || cv_json_get_str(reas, "effort", "reasoning", &effort, err))
            return cv_err_set(err, CV_EINVAL, "'reasoning' must be an object with an optional string 'effort'");
        if (effort && !strcmp(effort, "none"))
            r->thinking = CV_THINKING_OFF;
        else if (effort) {
            r->thinking = CV_THINKING_ON;
            r->reasoning_effort = cv_xstrdup(effort);
        }
    }
    if (cv_req_fields(b, resp_fields, CV_ARRAY_LEN(resp_fields), r, err))
        return CV_EINVAL;
    /* Checked, not served: Responses logprobs are not implemented. */
    if (cv_req_int(b, "top_logprobs", 0, CV_MAX_TOP_LOGPROBS, &x, &has, err))
        return CV_EINVAL;
    json_t *text = json_object_get(b, "text");
    json_t *fmt = json_is_object(text) ? json_object_get(text, "format") : NULL;
    if (json_is_object(fmt)) {
        const char *type = NULL;
        if (cv_json_get_str(fmt, "type", "text.format", &type, err))
            return CV_EINVAL;
        if (type && !strcmp(type, "json_schema"))
            r->response_format = json_pack("{s:s, s:O}", "type", "json_schema", "json_schema", fmt);
        else if (type && !strcmp(type, "json_object"))
            r->response_format = json_pack("{s:s}", "type", "json_object");
    }
    return cv_req_check_limits(r, err);
}

/* ---- response ---- */

typedef enum { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE, ITEM_CALL } item_type;

typedef struct enc_resp {
    bool stream;
    bool store;
    json_t *conversation; /* messages without instructions, for the store */
    int64_t seq;
    item_type open;
    char item_id[48];
    int call_index;       /* parser index of the open call */
    cv_buf text;          /* text of the open item */
    json_t *output;       /* finished items */
    cv_buf all_content, all_reasoning; /* for the stored assistant message */
    cv_calls calls;
} enc_resp;

void *cv_enc_openai_responses_new(bool stream, json_t *conversation, bool store)
{
    enc_resp *e = cv_xcalloc(1, sizeof *e);
    e->stream = stream;
    e->store = store;
    e->conversation = conversation ? json_incref(conversation) : json_array();
    e->output = json_array();
    return e;
}

static void event(enc_resp *e, cv_buf *out, const char *type, json_t *data)
{
    json_t *v = json_object();
    json_object_set_new(v, "type", json_string(type));
    json_object_set_new(v, "sequence_number", json_integer(e->seq++));
    json_object_update(v, data);
    json_decref(data);
    cv_sse(out, type, v);
}

static json_t *response_obj(enc_resp *e, cv_gen *g, const char *status)
{
    const cv_chat_request *r = cv_gen_request(g);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(cv_gen_id(g)));
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "created_at", json_integer(cv_gen_created(g)));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "error", json_null());
    json_object_set_new(o, "incomplete_details",
                        !strcmp(status, "incomplete") ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_set_new(o, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set_new(o, "output", !strcmp(status, "in_progress") ? json_array() : json_copy(e->output));
    json_object_set_new(o, "parallel_tool_calls", json_boolean(r->parallel_tool_calls));
    json_object_set_new(o, "temperature", json_real(r->sample.temperature));
    json_object_set_new(o, "top_p", json_real(r->sample.top_p));
    json_object_set_new(o, "max_output_tokens", r->max_tokens ? json_integer(r->max_tokens) : json_null());
    json_object_set_new(o, "tool_choice", json_string(r->tool_choice == CV_TOOL_CHOICE_NONE       ? "none"
                                                      : r->tool_choice == CV_TOOL_CHOICE_REQUIRED ? "required"
                                                                                                  : "auto"));
    json_object_set_new(o, "tools", json_array());
    json_object_set_new(o, "store", json_boolean(e->store));
    json_object_set_new(o, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
    json_object_set_new(o, "reasoning", json_pack("{s:o, s:n}", "effort",
                                                  r->reasoning_effort ? json_string(r->reasoning_effort) : json_null(),
                                                  "summary"));
    json_object_set_new(o, "truncation", json_string("disabled"));
    json_object_set_new(o, "metadata", json_object());
    if (strcmp(status, "in_progress")) {
        int32_t p = cv_gen_n_prompt(g), c = cv_gen_n_generated(g);
        json_object_set_new(o, "usage",
                            json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", p, "input_tokens_details",
                                      "cached_tokens", cv_gen_n_cached(g), "output_tokens", c, "output_tokens_details",
                                      "reasoning_tokens", cv_gen_n_reasoning(g), "total_tokens", p + c));
    } else {
        json_object_set_new(o, "usage", json_null());
    }
    return o;
}

static json_t *item_obj(enc_resp *e, const char *status)
{
    switch (e->open) {
    case ITEM_REASONING:
        return json_pack("{s:s, s:s, s:[{s:s, s:o}]}", "id", e->item_id, "type", "reasoning", "summary", "type",
                         "summary_text", "text", cv_json_str(e->text.data, e->text.len));
    case ITEM_MESSAGE:
        return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:o, s:[], s:[]}]}", "id", e->item_id, "type", "message",
                         "status", status, "role", "assistant", "content", "type", "output_text", "text",
                         cv_json_str(e->text.data, e->text.len), "annotations", "logprobs");
    case ITEM_CALL: {
        cv_call *c = &e->calls.v[e->call_index];
        return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "id", e->item_id, "type", "function_call", "status", status,
                         "call_id", c->id, "name", cv_json_strz(c->name), "arguments",
                         cv_json_str(c->args.data, c->args.len));
    }
    case ITEM_NONE: break;
    }
    return json_object();
}

static int out_index(enc_resp *e) { return (int)json_array_size(e->output); }

static void close_item(enc_resp *e, cv_buf *out)
{
    if (e->open == ITEM_NONE)
        return;
    int oi = out_index(e);
    if (e->stream) {
        json_t *txt = cv_json_str(e->text.data, e->text.len);
        if (e->open == ITEM_REASONING) {
            event(e, out, "response.reasoning_summary_text.done",
                  json_pack("{s:s, s:i, s:i, s:O}", "item_id", e->item_id, "output_index", oi, "summary_index", 0,
                            "text", txt));
            event(e, out, "response.reasoning_summary_part.done",
                  json_pack("{s:s, s:i, s:i, s:{s:s, s:O}}", "item_id", e->item_id, "output_index", oi,
                            "summary_index", 0, "part", "type", "summary_text", "text", txt));
        } else if (e->open == ITEM_MESSAGE) {
            event(e, out, "response.output_text.done",
                  json_pack("{s:s, s:i, s:i, s:O, s:[]}", "item_id", e->item_id, "output_index", oi, "content_index",
                            0, "text", txt, "logprobs"));
            event(e, out, "response.content_part.done",
                  json_pack("{s:s, s:i, s:i, s:{s:s, s:O, s:[], s:[]}}", "item_id", e->item_id, "output_index", oi,
                            "content_index", 0, "part", "type", "output_text", "text", txt, "annotations",
                            "logprobs"));
        } else {
            cv_call *c = &e->calls.v[e->call_index];
            event(e, out, "response.function_call_arguments.done",
                  json_pack("{s:s, s:i, s:o, s:o}", "item_id", e->item_id, "output_index", oi, "name",
                            cv_json_strz(c->name), "arguments", cv_json_str(c->args.data, c->args.len)));
        }
        json_decref(txt);
        event(e, out, "response.output_item.done",
              json_pack("{s:i, s:o}", "output_index", oi, "item", item_obj(e, "completed")));
    }
    if (e->open == ITEM_MESSAGE)
        cv_buf_append(&e->all_content, e->text.data, e->text.len);
    else if (e->open == ITEM_REASONING)
        cv_buf_append(&e->all_reasoning, e->text.data, e->text.len);
    json_array_append_new(e->output, item_obj(e, "completed"));
    cv_buf_reset(&e->text);
    e->open = ITEM_NONE;
}

static void open_item(enc_resp *e, cv_gen *g, item_type t, cv_buf *out)
{
    close_item(e, out);
    e->open = t;
    cv_server_new_id(cv_gen_server(g), t == ITEM_REASONING ? "rs_" : t == ITEM_MESSAGE ? "msg_" : "fc_", e->item_id);
    if (!e->stream)
        return;
    int oi = out_index(e);
    event(e, out, "response.output_item.added",
          json_pack("{s:i, s:o}", "output_index", oi,
                    "item", t == ITEM_REASONING ? json_pack("{s:s, s:s, s:[]}", "id", e->item_id, "type", "reasoning",
                                                            "summary")
                            : t == ITEM_MESSAGE
                                ? json_pack("{s:s, s:s, s:s, s:s, s:[]}", "id", e->item_id, "type", "message", "status",
                                            "in_progress", "role", "assistant", "content")
                                : item_obj(e, "in_progress")));
    if (t == ITEM_REASONING)
        event(e, out, "response.reasoning_summary_part.added",
              json_pack("{s:s, s:i, s:i, s:{s:s, s:s}}", "item_id", e->item_id, "output_index", oi, "summary_index", 0,
                        "part", "type", "summary_text", "text", ""));
    else if (t == ITEM_MESSAGE)
        event(e, out, "response.content_part.added",
              json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[], s:[]}}", "item_id", e->item_id, "output_index", oi,
                        "content_index", 0, "part", "type", "output_text", "text", "", "annotations", "logprobs"));
}

static void resp_begin(void *ud, cv_gen *g, cv_buf *out)
{
    enc_resp *e = ud;
    if (!e->stream)
        return;
    event(e, out, "response.created", json_pack("{s:o}", "response", response_obj(e, g, "in_progress")));
    event(e, out, "response.in_progress", json_pack("{s:o}", "response", response_obj(e, g, "in_progress")));
}

static void resp_event(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out)
{
    enc_resp *e = ud;
    int oi;
    switch (ev->type) {
    case CV_CHAT_CONTENT:
    case CV_CHAT_REASONING: {
        item_type t = ev->type == CV_CHAT_CONTENT ? ITEM_MESSAGE : ITEM_REASONING;
        if (e->open != t)
            open_item(e, g, t, out);
        cv_buf_put_str(&e->text, ev->text);
        if (!e->stream)
            break;
        oi = out_index(e);
        if (t == ITEM_MESSAGE)
            event(e, out, "response.output_text.delta",
                  json_pack("{s:s, s:i, s:i, s:o, s:[]}", "item_id", e->item_id, "output_index", oi, "content_index",
                            0, "delta", cv_json_str(ev->text.ptr, ev->text.len), "logprobs"));
        else
            event(e, out, "response.reasoning_summary_text.delta",
                  json_pack("{s:s, s:i, s:i, s:o}", "item_id", e->item_id, "output_index", oi, "summary_index", 0,
                            "delta", cv_json_str(ev->text.ptr, ev->text.len)));
        break;
    }
    case CV_CHAT_TOOL_BEGIN: {
        cv_call *c = cv_calls_at(&e->calls, cv_gen_server(g), ev, "call_");
        if (!c)
            return;
        close_item(e, out);
        e->call_index = ev->index;
        open_item(e, g, ITEM_CALL, out);
        break;
    }
    case CV_CHAT_TOOL_ARGS: {
        cv_call *c = cv_calls_at(&e->calls, cv_gen_server(g), ev, "call_");
        if (!c)
            return;
        cv_buf_put_str(&c->args, ev->text);
        if (e->stream && e->open == ITEM_CALL && e->call_index == ev->index)
            event(e, out, "response.function_call_arguments.delta",
                  json_pack("{s:s, s:i, s:o}", "item_id", e->item_id, "output_index", out_index(e), "delta",
                            cv_json_str(ev->text.ptr, ev->text.len)));
        break;
    }
    case CV_CHAT_TOOL_END:
        if (e->open == ITEM_CALL && e->call_index == ev->index)
            close_item(e, out);
        break;
    }
}

static void store_conversation(enc_resp *e, cv_gen *g)
{
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content",
                          cv_json_str(e->all_content.data, e->all_content.len));
    if (e->all_reasoning.len)
        json_object_set_new(m, "reasoning_content", cv_json_str(e->all_reasoning.data, e->all_reasoning.len));
    if (e->calls.n)
        json_object_set_new(m, "tool_calls", cv_calls_json(&e->calls, true));
    json_t *conv = json_copy(e->conversation);
    json_array_append_new(conv, m);
    cv_resp_store_put(cv_gen_server(g)->store, cv_gen_id(g), conv);
    json_decref(conv);
}

static void resp_finish(void *ud, cv_gen *g, cv_buf *out)
{
    enc_resp *e = ud;
    close_item(e, out);
    if (e->store)
        store_conversation(e, g);
    const char *status = cv_gen_finish_reason(g) == CV_GEN_LENGTH ? "incomplete" : "completed";
    json_t *resp = response_obj(e, g, status);
    if (e->stream) {
        event(e, out, !strcmp(status, "completed") ? "response.completed" : "response.incomplete",
              json_pack("{s:o}", "response", resp));
        return;
    }
    cv_json_dump(out, resp);
    json_decref(resp);
}

static void resp_error(void *ud, cv_gen *g, const cv_err *err, cv_buf *out)
{
    enc_resp *e = ud;
    int code = err->code ? err->code : CV_SE_INTERNAL;
    if (e->stream) {
        event(e, out, "error", json_pack("{s:s, s:o, s:n}", "code", cv_wire_error_type(CV_WIRE_OPENAI, code), "message",
                                         cv_json_strz(err->msg), "param"));
        return;
    }
    cv_wire_error_body(CV_WIRE_OPENAI, code, err->msg, NULL, out);
}

static void resp_keepalive(void *ud, cv_gen *g, cv_buf *out)
{
    if (((enc_resp *)ud)->stream)
        cv_buf_puts(out, ": keep-alive\n\n");
}

static void resp_destroy(void *ud)
{
    enc_resp *e = ud;
    json_decref(e->conversation);
    json_decref(e->output);
    cv_buf_free(&e->text);
    cv_buf_free(&e->all_content);
    cv_buf_free(&e->all_reasoning);
    cv_calls_free(&e->calls);
    free(e);
}

/* The store flag and the conversation to store: this request's messages
 * without its instructions (a later previous_response_id brings its own). */
static int resp_create_for(const cv_http_req *hr, json_t *body, const cv_chat_request *r, void **ud, cv_err *err)
{
    bool store = true;
    if (cv_json_get_bool(body, "store", NULL, &store, err))
        return CV_EINVAL;
    const char *instructions = NULL;
    cv_json_get_str(body, "instructions", NULL, &instructions, NULL);
    json_t *conv = json_copy(r->messages);
    if (instructions && *instructions)
        json_array_remove(conv, 0);
    *ud = cv_enc_openai_responses_new(r->stream, conv, store);
    json_decref(conv);
    return 0;
}

const cv_gen_enc cv_enc_openai_responses = {
    .id_prefix = "resp_",
    .create_for = resp_create_for,
    .begin = resp_begin,
    .event = resp_event,
    .finish = resp_finish,
    .error = resp_error,
    .keepalive = resp_keepalive,
    .destroy = resp_destroy,
};
