/* api_anthropic.c — POST /v1/messages (also ?beta=true) and
 * /v1/messages/count_tokens: Anthropic Messages requests to the neutral
 * request, and neutral events back to a message JSON or its SSE stream.
 * Translation only.
 *
 * Stream, exactly as Anthropic sends it (event: NAME + data: JSON):
 *   message_start {message:{id,type,role,model,content:[],stop_reason:null,usage}}
 *   ping
 *   per block: content_block_start {index, content_block: text | thinking | tool_use}
 *              content_block_delta {index, delta: text_delta | thinking_delta |
 *                                   signature_delta | input_json_delta} ...
 *              content_block_stop {index}
 *   message_delta {delta:{stop_reason, stop_sequence}, usage}
 *   message_stop
 * Keep-alives are `ping` events; failures after the headers are `error` events.
 *
 * Request quirks (testdata/clients/CLIENTS.md): system as a string or blocks,
 * Claude Code's billing-header line stripped (it changes every request),
 * role:"system" messages folded into the system prompt, tool_result content
 * as a string or blocks, thinking blocks with signatures echoed back,
 * cache_control / metadata / context_management / beta fields ignored, any
 * model name and anthropic-version accepted, max_tokens clamped (gen.c). */
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"
#include "server/request.h"

/* Thinking blocks need a signature for clients to echo; ours carries no
 * meaning (we re-render reasoning from its text), so it is a fixed token. */
#define SIGNATURE "corvid-local-reasoning"

/* ---- request ---- */

/* Text blocks are kept; image and document blocks are refused (no vision
 * yet); the rest (tool_use in a user turn, redacted thinking, ...) skipped. */
static const char *const text_blocks[] = { "text", NULL };
static const char *const media_blocks[] = { "image", "document", NULL };
static const cv_req_parts anth_blocks = { "content block", text_blocks, media_blocks };

static void append_system(cv_buf *sys, cv_str text)
{
    text = cv_req_strip_billing(text);
    if (!text.len)
        return;
    if (sys->len)
        cv_buf_puts(sys, "\n");
    cv_buf_put_str(sys, text);
}

static int system_prompt(json_t *s, cv_buf *sys, cv_err *err)
{
    if (!s || json_is_null(s))
        return 0;
    if (json_is_string(s)) {
        append_system(sys, (cv_str){ json_string_value(s), json_string_length(s) });
        return 0;
    }
    if (!json_is_array(s))
        return cv_err_set(err, CV_EINVAL, "'system' must be a string or an array of text blocks");
    size_t i;
    json_t *b;
    json_array_foreach(s, i, b) {
        json_t *t = json_object_get(b, "text");
        if (!json_is_object(b) || !json_is_string(t))
            return cv_err_set(err, CV_EINVAL, "'system[%zu]' must be a text block", i);
        append_system(sys, (cv_str){ json_string_value(t), json_string_length(t) });
    }
    return 0;
}

/* One user message: tool_result blocks become tool messages (first, in
 * order), the rest one user message. */
static int user_message(json_t *c, const char *what, json_t *msgs, cv_err *err)
{
    if (json_is_string(c)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", c));
        return 0;
    }
    if (!json_is_array(c))
        return cv_err_set(err, CV_EINVAL, "'%s.content' must be a string or an array of content blocks", what);
    cv_buf text = { 0 };
    bool any_text = false;
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        const char *type = NULL;
        if (!json_is_object(b) || cv_json_get_str(b, "type", NULL, &type, NULL) || !type) {
            cv_buf_free(&text);
            return cv_err_set(err, CV_EINVAL, "'%s.content[%zu]' must be a content block with a 'type'", what, i);
        }
        if (!strcmp(type, "tool_result")) {
            const char *id = NULL;
            char w2[128];
            snprintf(w2, sizeof w2, "%s.content[%zu].content", what, i);
            cv_buf r = { 0 };
            if (cv_json_get_str(b, "tool_use_id", NULL, &id, NULL) || !id) {
                cv_buf_free(&text);
                return cv_err_set(err, CV_EINVAL, "'%s.content[%zu].tool_use_id' must be a string", what, i);
            }
            if (cv_req_content_text(json_object_get(b, "content"), w2, &anth_blocks, &r, err)) {
                cv_buf_free(&r);
                cv_buf_free(&text);
                return err ? err->code : CV_EINVAL;
            }
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id, "content",
                                                  json_stringn(r.data ? r.data : "", r.len)));
            cv_buf_free(&r);
            continue;
        }
        char w2[64];
        snprintf(w2, sizeof w2, "%s.content", what);
        int rc = cv_req_part_text(b, w2, i, &anth_blocks, &text, err);
        if (rc) {
            cv_buf_free(&text);
            return rc;
        }
        any_text |= !strcmp(type, "text");
    }
    if (any_text)
        json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "user", "content",
                                              json_stringn(text.data ? text.data : "", text.len)));
    cv_buf_free(&text);
    return 0;
}

static int assistant_message(json_t *c, const char *what, json_t *msgs, cv_err *err)
{
    if (json_is_string(c)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "assistant", "content", c));
        return 0;
    }
    if (!json_is_array(c))
        return cv_err_set(err, CV_EINVAL, "'%s.content' must be a string or an array of content blocks", what);
    cv_buf text = { 0 }, thinking = { 0 };
    json_t *calls = json_array();
    size_t i;
    json_t *b;
    int rc = 0;
    json_array_foreach(c, i, b) {
        const char *type = NULL;
        if (!json_is_object(b) || cv_json_get_str(b, "type", NULL, &type, NULL) || !type) {
            rc = cv_err_set(err, CV_EINVAL, "'%s.content[%zu]' must be a content block with a 'type'", what, i);
            goto done;
        }
        if (!strcmp(type, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) {
                rc = cv_err_set(err, CV_EINVAL, "'%s.content[%zu].text' must be a string", what, i);
                goto done;
            }
            cv_buf_append(&text, json_string_value(t), json_string_length(t));
        } else if (!strcmp(type, "thinking")) {
            json_t *t = json_object_get(b, "thinking");
            if (json_is_string(t))
                cv_buf_append(&thinking, json_string_value(t), json_string_length(t));
        } else if (!strcmp(type, "tool_use")) {
            const char *id = NULL, *name = NULL;
            json_t *input = json_object_get(b, "input");
            if (cv_json_get_str(b, "id", NULL, &id, NULL) || cv_json_get_str(b, "name", NULL, &name, NULL) || !id ||
                !name) {
                rc = cv_err_set(err, CV_EINVAL, "'%s.content[%zu]' tool_use needs string 'id' and 'name'", what, i);
                goto done;
            }
            if (input && !json_is_object(input) && !json_is_null(input)) {
                rc = cv_err_set(err, CV_EINVAL, "'%s.content[%zu].input' must be an object", what, i);
                goto done;
            }
            json_t *args = json_is_object(input) ? json_deep_copy(input) : json_object();
            json_array_append_new(calls, cv_req_call(id, name, args));
        } else if (!strcmp(type, "image") || !strcmp(type, "document")) {
            rc = cv_err_set(err, CV_EUNSUPPORTED, "'%s.content[%zu]' is an %s block: text only", what, i, type);
            goto done;
        } else {
            cv_debug("anthropic: skipping a '%s' block in %s", type, what);
        }
    }
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", json_stringn(text.data ? text.data : "", text.len));
    if (thinking.len)
        json_object_set_new(m, "reasoning_content", json_stringn(thinking.data, thinking.len));
    if (json_array_size(calls))
        json_object_set(m, "tool_calls", calls);
    json_array_append_new(msgs, m);
done:
    json_decref(calls);
    cv_buf_free(&text);
    cv_buf_free(&thinking);
    return rc;
}

/* Client tools are "custom" (or untyped) and carry their definition at the
 * top level; hosted tools (web_search_*, bash_*, text_editor_*) are not
 * served. */
static const cv_req_tool_spec anth_tools = { "anthropic", "custom", NULL, "input_schema" };

static int parse_tool_choice(json_t *tc, cv_chat_request *r, cv_err *err)
{
    if (!tc || json_is_null(tc))
        return 0;
    const char *type = NULL, *name = NULL;
    if (!json_is_object(tc) || cv_json_get_str(tc, "type", NULL, &type, NULL) || !type)
        return cv_err_set(err, CV_EINVAL, "'tool_choice' must be an object with a 'type'");
    if (!strcmp(type, "auto")) r->tool_choice = CV_TOOL_CHOICE_AUTO;
    else if (!strcmp(type, "any")) r->tool_choice = CV_TOOL_CHOICE_REQUIRED;
    else if (!strcmp(type, "none")) r->tool_choice = CV_TOOL_CHOICE_NONE;
    else if (!strcmp(type, "tool")) {
        if (cv_json_get_str(tc, "name", NULL, &name, NULL) || !name)
            return cv_err_set(err, CV_EINVAL, "'tool_choice.name' must be a string when type is 'tool'");
        r->tool_choice = CV_TOOL_CHOICE_NAMED;
        r->tool_choice_name = cv_xstrdup(name);
    } else
        return cv_err_set(err, CV_EINVAL, "'tool_choice.type' is '%.40s', must be auto, any, tool or none", type);
    bool dis = false;
    if (cv_json_get_bool(tc, "disable_parallel_tool_use", "tool_choice", &dis, err))
        return CV_EINVAL;
    r->parallel_tool_calls = !dis;
    return 0;
}

static int parse_thinking(json_t *b, cv_chat_request *r, cv_err *err)
{
    json_t *th = json_object_get(b, "thinking");
    if (th && !json_is_null(th)) {
        const char *type = NULL;
        if (!json_is_object(th) || cv_json_get_str(th, "type", NULL, &type, NULL) || !type)
            return cv_err_set(err, CV_EINVAL, "'thinking' must be an object with a 'type'");
        if (!strcmp(type, "enabled")) {
            int64_t budget = 0;
            bool has;
            r->thinking = CV_THINKING_ON;
            if (cv_req_int(th, "budget_tokens", 0, INT32_MAX, &budget, &has, err))
                return CV_EINVAL;
            r->thinking_budget = (int32_t)budget;
        } else if (!strcmp(type, "disabled")) {
            r->thinking = CV_THINKING_OFF;
        } else if (!strcmp(type, "adaptive")) {
            r->thinking = CV_THINKING_DEFAULT; /* the model's own default */
        } else {
            return cv_err_set(err, CV_EINVAL, "'thinking.type' is '%.40s', must be enabled, adaptive or disabled",
                              type);
        }
    }
    json_t *oc = json_object_get(b, "output_config");
    if (oc && !json_is_null(oc)) {
        if (!json_is_object(oc))
            return cv_err_set(err, CV_EINVAL, "'output_config' must be an object");
        const char *effort = NULL;
        if (cv_json_get_str(oc, "effort", "output_config", &effort, err))
            return CV_EINVAL;
        if (effort)
            r->reasoning_effort = cv_xstrdup(effort);
        json_t *fmt = json_object_get(oc, "format");
        if (json_is_object(fmt) && json_is_object(json_object_get(fmt, "schema")))
            r->response_format = json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name",
                                           "output", "schema", json_object_get(fmt, "schema"));
    }
    return 0;
}

static const cv_req_field anth_fields[] = {
    CV_REQ_FIELD("max_tokens", CV_REQ_I32, 1, INT32_MAX, max_tokens),
    CV_REQ_FIELD("temperature", CV_REQ_F32, 0, 1, sample.temperature),
    CV_REQ_FIELD("top_p", CV_REQ_F32, 0, 1, sample.top_p),
    CV_REQ_FIELD("top_k", CV_REQ_I32, 0, 1 << 20, sample.top_k),
};

int cv_anthropic_parse(json_t *b, bool count_only, cv_chat_request *r, cv_err *err)
{
    int rc = 0;
    cv_buf sys = { 0 };
    const char *model = NULL;
    if (cv_json_get_str(b, "model", NULL, &model, err))
        return CV_EINVAL;
    if (model)
        r->model = cv_xstrdup(model);
    json_t *msgs = json_object_get(b, "messages");
    if (!json_is_array(msgs))
        return cv_err_set(err, CV_EINVAL, "'messages' must be an array");
    if (json_array_size(msgs) > CV_MAX_MESSAGES)
        return cv_err_set(err, CV_ELIMIT, "%zu messages is over the limit of %d", json_array_size(msgs),
                          CV_MAX_MESSAGES);
    if (!count_only && json_array_size(msgs) == 0)
        return cv_err_set(err, CV_EINVAL, "'messages' is empty; send at least one message");
    if ((rc = system_prompt(json_object_get(b, "system"), &sys, err)))
        goto done;
    json_t *conv = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char what[48];
        snprintf(what, sizeof what, "messages[%zu]", i);
        const char *role = NULL;
        if (!json_is_object(m) || cv_json_get_str(m, "role", NULL, &role, NULL) || !role) {
            rc = cv_err_set(err, CV_EINVAL, "'%s' must be an object with a string 'role'", what);
            break;
        }
        json_t *c = json_object_get(m, "content");
        if (!strcmp(role, "user"))
            rc = user_message(c, what, conv, err);
        else if (!strcmp(role, "assistant"))
            rc = assistant_message(c, what, conv, err);
        else if (!strcmp(role, "system")) {
            /* Claude Code's mid-conversation system message: folded into the
             * system prompt so templates that allow one system turn work. */
            cv_buf t = { 0 };
            rc = cv_req_content_text(c, what, &anth_blocks, &t, err);
            if (!rc)
                append_system(&sys, (cv_str){ t.data ? t.data : "", t.len });
            cv_buf_free(&t);
        } else
            rc = cv_err_set(err, CV_EINVAL, "'%s.role' is '%.40s', must be user, assistant or system", what, role);
        if (rc)
            break;
    }
    if (rc) {
        json_decref(conv);
        goto done;
    }
    if (sys.len)
        json_array_insert_new(conv, 0, json_pack("{s:s, s:o}", "role", "system", "content",
                                                 json_stringn(sys.data, sys.len)));
    json_array_extend(r->messages, conv);
    json_decref(conv);
    if ((rc = cv_req_tools(r, json_object_get(b, "tools"), &anth_tools, err)) ||
        (rc = parse_tool_choice(json_object_get(b, "tool_choice"), r, err)) || (rc = parse_thinking(b, r, err)))
        goto done;
    if ((rc = cv_req_fields(b, anth_fields, CV_ARRAY_LEN(anth_fields), r, err)))
        goto done;
    if ((rc = cv_req_stops(r, json_object_get(b, "stop_sequences"), "stop_sequences", err)))
        goto done;
    if ((rc = cv_json_get_bool(b, "stream", NULL, &r->stream, err)))
        goto done;
    rc = cv_req_check_limits(r, err);
done:
    cv_buf_free(&sys);
    return rc ? (err && err->code ? err->code : rc) : 0;
}

/* ---- response ---- */

typedef enum { BLK_NONE, BLK_TEXT, BLK_THINKING, BLK_TOOL } blk_type;

typedef struct enc_anth {
    bool stream;
    blk_type open;
    int index;       /* index of the open block (stream) */
    json_t *content; /* assembled blocks (non-stream) */
    cv_calls calls;
} enc_anth;

void *cv_enc_anthropic_new(bool stream)
{
    enc_anth *e = cv_xcalloc(1, sizeof *e);
    e->stream = stream;
    e->index = -1;
    e->content = json_array();
    return e;
}

static const char *stop_reason(cv_gen *g)
{
    switch (cv_gen_finish_reason(g)) {
    case CV_GEN_LENGTH: return "max_tokens";
    case CV_GEN_TOOL: return "tool_use";
    case CV_GEN_STOP_SEQ: return "stop_sequence";
    default: return "end_turn";
    }
}

static json_t *usage(cv_gen *g, bool final)
{
    int32_t p = cv_gen_n_prompt(g), c = final ? cv_gen_n_cached(g) : 0;
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", p - c, "cache_creation_input_tokens", 0,
                     "cache_read_input_tokens", c, "output_tokens", final ? cv_gen_n_generated(g) : 0);
}

static void close_block(enc_anth *e, cv_buf *out)
{
    if (e->open == BLK_NONE)
        return;
    if (e->open == BLK_THINKING)
        cv_sse(out, "content_block_delta",
               json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_delta", "index", e->index, "delta", "type",
                         "signature_delta", "signature", SIGNATURE));
    cv_sse(out, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", e->index));
    e->open = BLK_NONE;
}

static void open_block(enc_anth *e, blk_type t, json_t *block, cv_buf *out)
{
    close_block(e, out);
    e->index++;
    e->open = t;
    cv_sse(out, "content_block_start",
           json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", e->index, "content_block", block));
}

static void anth_begin(void *ud, cv_gen *g, cv_buf *out)
{
    enc_anth *e = ud;
    if (!e->stream)
        return;
    json_t *msg = json_object();
    json_object_set_new(msg, "id", json_string(cv_gen_id(g)));
    json_object_set_new(msg, "type", json_string("message"));
    json_object_set_new(msg, "role", json_string("assistant"));
    json_object_set_new(msg, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set_new(msg, "content", json_array());
    json_object_set_new(msg, "stop_reason", json_null());
    json_object_set_new(msg, "stop_sequence", json_null());
    json_object_set_new(msg, "usage", usage(g, false));
    cv_sse(out, "message_start", json_pack("{s:s, s:o}", "type", "message_start", "message", msg));
    cv_sse(out, "ping", json_pack("{s:s}", "type", "ping"));
}

/* Non-stream: append text to the last block when it has the same type. */
static void add_text(enc_anth *e, const char *type, const char *field, cv_str text)
{
    json_t *last = json_array_get(e->content, json_array_size(e->content) - 1);
    if (!last || strcmp(json_string_value(json_object_get(last, "type")), type)) {
        last = json_pack("{s:s, s:s}", "type", type, field, "");
        if (!strcmp(type, "thinking"))
            json_object_set_new(last, "signature", json_string(SIGNATURE));
        json_array_append_new(e->content, last);
    }
    cv_buf b = { 0 };
    cv_buf_puts(&b, json_string_value(json_object_get(last, field)));
    cv_buf_put_str(&b, text);
    json_object_set_new(last, field, cv_json_str(b.data, b.len));
    cv_buf_free(&b);
}

static void anth_event(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out)
{
    enc_anth *e = ud;
    cv_call *call = cv_event_is_tool(ev) ? cv_calls_at(&e->calls, cv_gen_server(g), ev, "toolu_") : NULL;
    if (cv_event_is_tool(ev) && !call)
        return;
    if (!e->stream) {
        switch (ev->type) {
        case CV_CHAT_CONTENT: add_text(e, "text", "text", ev->text); break;
        case CV_CHAT_REASONING: add_text(e, "thinking", "thinking", ev->text); break;
        case CV_CHAT_TOOL_BEGIN:
            json_array_append_new(e->content, json_pack("{s:s, s:s, s:o, s:{}}", "type", "tool_use", "id", call->id,
                                                        "name", cv_json_strz(call->name), "input"));
            json_object_set_new(json_array_get(e->content, json_array_size(e->content) - 1), "_index",
                                json_integer(ev->index));
            break;
        case CV_CHAT_TOOL_ARGS: cv_buf_put_str(&call->args, ev->text); break;
        case CV_CHAT_TOOL_END: break;
        }
        return;
    }
    switch (ev->type) {
    case CV_CHAT_CONTENT:
        if (e->open != BLK_TEXT)
            open_block(e, BLK_TEXT, json_pack("{s:s, s:s}", "type", "text", "text", ""), out);
        cv_sse(out, "content_block_delta",
               json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", e->index, "delta", "type",
                         "text_delta", "text", cv_json_str(ev->text.ptr, ev->text.len)));
        break;
    case CV_CHAT_REASONING:
        if (e->open != BLK_THINKING)
            open_block(e, BLK_THINKING, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""),
                       out);
        cv_sse(out, "content_block_delta",
               json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", e->index, "delta", "type",
                         "thinking_delta", "thinking", cv_json_str(ev->text.ptr, ev->text.len)));
        break;
    case CV_CHAT_TOOL_BEGIN:
        open_block(e, BLK_TOOL,
                   json_pack("{s:s, s:s, s:o, s:{}}", "type", "tool_use", "id", call->id, "name",
                             cv_json_strz(call->name), "input"),
                   out);
        break;
    case CV_CHAT_TOOL_ARGS:
        if (e->open != BLK_TOOL)
            return;
        cv_sse(out, "content_block_delta",
               json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", e->index, "delta", "type",
                         "input_json_delta", "partial_json", cv_json_str(ev->text.ptr, ev->text.len)));
        break;
    case CV_CHAT_TOOL_END:
        if (e->open == BLK_TOOL)
            close_block(e, out);
        break;
    }
}

static void anth_finish(void *ud, cv_gen *g, cv_buf *out)
{
    enc_anth *e = ud;
    const char *seq = cv_gen_stop_seq(g);
    if (e->stream) {
        close_block(e, out);
        cv_sse(out, "message_delta",
               json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason", stop_reason(g),
                         "stop_sequence", seq ? cv_json_strz(seq) : json_null(), "usage", usage(g, true)));
        cv_sse(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
        return;
    }
    size_t i;
    json_t *b;
    json_array_foreach(e->content, i, b) {
        json_t *ix = json_object_get(b, "_index");
        if (!ix)
            continue;
        cv_call *c = &e->calls.v[json_integer_value(ix)];
        json_object_set_new(b, "input", cv_req_args_object(c->args.data, c->args.len));
        json_object_del(b, "_index");
    }
    json_t *msg = json_object();
    json_object_set_new(msg, "id", json_string(cv_gen_id(g)));
    json_object_set_new(msg, "type", json_string("message"));
    json_object_set_new(msg, "role", json_string("assistant"));
    json_object_set_new(msg, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set(msg, "content", e->content);
    json_object_set_new(msg, "stop_reason", json_string(stop_reason(g)));
    json_object_set_new(msg, "stop_sequence", seq ? cv_json_strz(seq) : json_null());
    json_object_set_new(msg, "usage", usage(g, true));
    cv_json_dump(out, msg);
    json_decref(msg);
}

static void anth_error(void *ud, cv_gen *g, const cv_err *err, cv_buf *out)
{
    enc_anth *e = ud;
    int code = err->code ? err->code : CV_SE_INTERNAL;
    if (e->stream) {
        cv_sse(out, "error", json_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type",
                                       cv_wire_error_type(CV_WIRE_ANTHROPIC, code), "message", cv_json_strz(err->msg)));
        return;
    }
    cv_wire_error_body(CV_WIRE_ANTHROPIC, code, err->msg, NULL, out);
}

static void anth_keepalive(void *ud, cv_gen *g, cv_buf *out)
{
    if (((enc_anth *)ud)->stream)
        cv_sse(out, "ping", json_pack("{s:s}", "type", "ping"));
}

static void anth_destroy(void *ud)
{
    enc_anth *e = ud;
    json_decref(e->content);
    cv_calls_free(&e->calls);
    free(e);
}

const cv_gen_enc cv_enc_anthropic = {
    .id_prefix = "msg_",
    .create = cv_enc_anthropic_new,
    .begin = anth_begin,
    .event = anth_event,
    .finish = anth_finish,
    .error = anth_error,
    .keepalive = anth_keepalive,
    .destroy = anth_destroy,
};

/* ---- count_tokens ---- */

int cv_api_anthropic_count_tokens(cv_http_req *hr, cv_reply *rep)
{
    cv_chat_request *r = cv_api_request_or_reply(hr, rep, NULL);
    if (!r)
        return CV_EINVAL;
    const cv_server_backend *be;
    cv_model_slot *slot = cv_api_model_or_reply(hr, rep, r->model, &be);
    if (!slot) {
        cv_chat_request_fini(r);
        free(r);
        return CV_EINVAL;
    }
    cv_err err = { 0 };
    int32_t *ids = NULL, n = 0;
    if (r->tool_choice == CV_TOOL_CHOICE_NONE)
        json_array_clear(r->tools);
    int rc = be->encode_chat(be->ctx, r, &ids, &n, NULL, &err);
    cv_model_release(hr->srv->models, slot);
    cv_chat_request_fini(r);
    free(r);
    free(ids);
    if (rc) {
        cv_reply_err(rep, CV_WIRE_ANTHROPIC, &err);
        return rc;
    }
    cv_reply_json(rep, 200, json_pack("{s:i}", "input_tokens", n));
    return 0;
}
