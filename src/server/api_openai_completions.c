/* api_openai_completions.c — POST /v1/completions, OpenAI's legacy text
 * completions: a raw prompt (string or token ids, no chat template), echo,
 * stop, logprobs in the legacy shape {tokens, token_logprobs, top_logprobs,
 * text_offset}. Generated text is all content (no output parser).
 *
 * Stream: data: {object:"text_completion", choices:[{text, index:0,
 * logprobs, finish_reason:null}]} per piece, then one with finish_reason
 * ("stop" | "length"), a usage chunk when stream_options.include_usage, and
 * data: [DONE]. */
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"
#include "server/request.h"

/* ---- request ---- */

static int prompt_ids(json_t *arr, cv_chat_request *r, cv_err *err)
{
    size_t n = json_array_size(arr);
    if (n > CV_MAX_PROMPT_IDS)
        return cv_err_set(err, CV_ELIMIT, "the prompt has %zu token ids, over the limit of %d", n, CV_MAX_PROMPT_IDS);
    r->prompt_ids = cv_xmalloc((n ? n : 1) * sizeof *r->prompt_ids);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return cv_err_set(err, CV_EINVAL, "'prompt[%zu]' must be a token id (a non-negative integer)", i);
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = (int32_t)n;
    return 0;
}

int cv_openai_completions_parse(json_t *b, cv_chat_request *r, cv_err *err)
{
    r->raw = true;
    json_t *p = json_object_get(b, "prompt");
    if (!p || json_is_null(p))
        return cv_err_set(err, CV_EINVAL, "'prompt' is missing");
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
        p = json_array_get(p, 0); /* a batch of one */
    if (json_is_string(p)) {
        cv_buf_append(&r->prompt_text, json_string_value(p), json_string_length(p));
    } else if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))) {
        if (prompt_ids(p, r, err))
            return err ? err->code : CV_EINVAL;
    } else if (json_is_array(p)) {
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "'prompt' must be a string or an array of token ids (batches of prompts are not served)");
    } else {
        return cv_err_set(err, CV_EINVAL, "'prompt' must be a string or an array of token ids");
    }
    if (cv_openai_sampling(b, r, err))
        return err ? err->code : CV_EINVAL;
    if (cv_json_get_bool(b, "echo", NULL, &r->echo, err))
        return CV_EINVAL;
    int64_t lp = 0;
    bool has;
    if (cv_req_int(b, "logprobs", 0, 5, &lp, &has, err))
        return CV_EINVAL;
    if (has) {
        r->logprobs = true;
        r->top_logprobs = (int32_t)lp;
    }
    if (!json_object_get(b, "max_tokens") && !json_object_get(b, "max_completion_tokens"))
        r->max_tokens = 16; /* the API's documented default */
    return 0;
}

/* ---- response ---- */

typedef struct enc_cmpl {
    bool stream;
    cv_buf text;
    size_t offset; /* text_offset of the next token */
    json_t *lp;    /* legacy logprobs object being filled */
} enc_cmpl;

void *cv_enc_openai_completions_new(bool stream)
{
    enc_cmpl *e = cv_xcalloc(1, sizeof *e);
    e->stream = stream;
    return e;
}

/* Chat-style entries → the legacy shape, appended to e->lp. */
static json_t *legacy_logprobs(enc_cmpl *e, json_t *entries, json_t *into)
{
    if (!entries)
        return into;
    if (!into)
        into = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
    size_t i;
    json_t *x;
    json_array_foreach(entries, i, x) {
        json_array_append(json_object_get(into, "tokens"), json_object_get(x, "token"));
        json_array_append(json_object_get(into, "token_logprobs"), json_object_get(x, "logprob"));
        json_t *top = json_object();
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(x, "top_logprobs"), k, t)
            json_object_set(top, json_string_value(json_object_get(t, "token")), json_object_get(t, "logprob"));
        json_array_append_new(json_object_get(into, "top_logprobs"), top);
        json_array_append_new(json_object_get(into, "text_offset"), json_integer((json_int_t)e->offset));
        e->offset += json_string_length(json_object_get(x, "token"));
    }
    json_decref(entries);
    return into;
}

static json_t *body(cv_gen *g, const char *text, size_t len, json_t *lp, const char *finish)
{
    json_t *choice = json_pack("{s:o, s:i, s:o, s:o}", "text", cv_json_str(text, len), "index", 0, "logprobs",
                               lp ? lp : json_null(), "finish_reason", finish ? json_string(finish) : json_null());
    json_t *c = json_object();
    json_object_set_new(c, "id", json_string(cv_gen_id(g)));
    json_object_set_new(c, "object", json_string("text_completion"));
    json_object_set_new(c, "created", json_integer(cv_gen_created(g)));
    json_object_set_new(c, "model", cv_json_strz(cv_gen_model(g)));
    json_object_set_new(c, "system_fingerprint", json_string("corvid"));
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    return c;
}

static json_t *usage(cv_gen *g)
{
    int32_t p = cv_gen_n_prompt(g), c = cv_gen_n_generated(g);
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", p, "completion_tokens", c, "total_tokens", p + c,
                     "prompt_tokens_details", "cached_tokens", cv_gen_n_cached(g));
}

static void echo_prompt(cv_gen *g, cv_buf *out)
{
    const cv_chat_request *r = cv_gen_request(g);
    if (!r->prompt_ids) {
        cv_buf_append(out, r->prompt_text.data, r->prompt_text.len);
        return;
    }
    const cv_server_backend *be = cv_gen_backend(g);
    for (int32_t i = 0; i < r->n_prompt_ids && be->token_text; i++)
        be->token_text(be->ctx, r->prompt_ids[i], out);
}

static void cmpl_begin(void *ud, cv_gen *g, cv_buf *out)
{
    enc_cmpl *e = ud;
    if (!cv_gen_request(g)->echo)
        return;
    cv_buf p = { 0 };
    echo_prompt(g, &p);
    if (e->stream && p.len)
        cv_sse(out, NULL, body(g, p.data, p.len, NULL, NULL));
    else
        cv_buf_append(&e->text, p.data, p.len);
    e->offset = p.len;
    cv_buf_free(&p);
}

static void cmpl_event(void *ud, cv_gen *g, const cv_chat_event *ev, cv_buf *out)
{
    enc_cmpl *e = ud;
    if (ev->type != CV_CHAT_CONTENT)
        return;
    if (e->stream) {
        json_t *lp = legacy_logprobs(e, cv_gen_take_logprobs(g), NULL);
        cv_sse(out, NULL, body(g, ev->text.ptr, ev->text.len, lp, NULL));
        return;
    }
    cv_buf_put_str(&e->text, ev->text);
    e->lp = legacy_logprobs(e, cv_gen_take_logprobs(g), e->lp);
}

static const char *finish_name(cv_gen *g) { return cv_gen_finish_reason(g) == CV_GEN_LENGTH ? "length" : "stop"; }

static void cmpl_finish(void *ud, cv_gen *g, cv_buf *out)
{
    enc_cmpl *e = ud;
    if (e->stream) {
        json_t *lp = legacy_logprobs(e, cv_gen_take_logprobs(g), NULL);
        cv_sse(out, NULL, body(g, "", 0, lp, finish_name(g)));
        if (cv_gen_request(g)->include_usage) {
            json_t *c = body(g, "", 0, NULL, NULL);
            json_object_set_new(c, "choices", json_array());
            json_object_set_new(c, "usage", usage(g));
            cv_sse(out, NULL, c);
        }
        cv_buf_puts(out, "data: [DONE]\n\n");
        return;
    }
    e->lp = legacy_logprobs(e, cv_gen_take_logprobs(g), e->lp);
    json_t *b = body(g, e->text.data, e->text.len, e->lp, finish_name(g));
    e->lp = NULL;
    json_object_set_new(b, "usage", usage(g));
    cv_json_dump(out, b);
    json_decref(b);
}

static void cmpl_error(void *ud, cv_gen *g, const cv_err *err, cv_buf *out)
{
    cv_openai_error(((enc_cmpl *)ud)->stream, err, out);
}

static void cmpl_keepalive(void *ud, cv_gen *g, cv_buf *out)
{
    if (((enc_cmpl *)ud)->stream)
        cv_buf_puts(out, ": keep-alive\n\n");
}

static void cmpl_destroy(void *ud)
{
    enc_cmpl *e = ud;
    cv_buf_free(&e->text);
    json_decref(e->lp);
    free(e);
}

const cv_gen_enc cv_enc_openai_completions = {
    .id_prefix = "cmpl-",
    .create = cv_enc_openai_completions_new,
    .begin = cmpl_begin,
    .event = cmpl_event,
    .finish = cmpl_finish,
    .error = cmpl_error,
    .keepalive = cmpl_keepalive,
    .destroy = cmpl_destroy,
};
