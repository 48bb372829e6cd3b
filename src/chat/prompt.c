/* prompt.c — a model's way from a neutral request to its prompt
 * (chat_prompt.h): the template compiled once, the syntax detected once,
 * BOS/EOS text from the tokenizer or the file, and per request the
 * template's variables, the strict-template retry, the reasoning opener,
 * the tokens with BOS, and the parser options. The wire files fill the
 * request; everything a render decides is decided here. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

struct cv_chat_prompt {
    cv_chat_template *tmpl;
    const cv_tc_format *format;
    const char *why;  /* how format was chosen: "template", "name" or "default" */
    const cv_tok *tok;
    char *bos, *eos;
    bool thinks;
};

/* ---- the model's special tokens ---- */

static char *token_text(const cv_tok *tok, int32_t id)
{
    cv_buf b = { 0 };
    if (id >= 0)
        cv_tok_piece(tok, id, 0, &b, NULL);
    return b.data ? cv_buf_steal(&b) : cv_xstrdup("");
}

/* The string of token tokenizer.ggml.<which>_token_id in the file's
 * vocabulary, for a file whose tokenizer corvid cannot load; "" when absent. */
static char *file_token(const cv_gguf *g, const char *which)
{
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    int64_t id;
    const cv_gguf_value *toks;
    if (!g || cv_gguf_get_int(g, key, &id, NULL) ||
        cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &toks, NULL) || id < 0 ||
        (uint64_t)id >= toks->arr.n)
        return cv_xstrdup("");
    return cv_xstrndup(toks->arr.strs[id].ptr, toks->arr.strs[id].len);
}

static char *special_text(const char *given, const cv_tok *tok, int32_t (*id_of)(const cv_tok *), const cv_gguf *g,
                          const char *which)
{
    if (given)
        return cv_xstrdup(given);
    return tok ? token_text(tok, id_of(tok)) : file_token(g, which);
}

/* ---- lifecycle ---- */

int cv_chat_prompt_create(const cv_chat_prompt_opts *o, cv_chat_prompt **out, cv_err *err)
{
    *out = NULL;
    cv_str src = o->template_src;
    if (o->gguf && cv_gguf_get_str(o->gguf, "tokenizer.chat_template", &src, NULL) != 0)
        src = (cv_str){ NULL, 0 };
    cv_chat_template *t = NULL;
    int rc = cv_chat_template_create(src.ptr, src.len, o->name, &t, err);
    if (rc && o->chatml_on_error) {
        /* A template corvid cannot parse is not fatal: serve with ChatML,
         * loudly, rather than refuse the model. */
        cv_warn("%s: %s; using the ChatML fallback", o->name ? o->name : "the model", err ? err->msg : "template error");
        cv_err_clear(err);
        rc = cv_chat_template_create(NULL, 0, o->name, &t, err);
    }
    if (rc)
        return rc;
    cv_chat_prompt *p = cv_xcalloc(1, sizeof *p);
    p->tmpl = t;
    p->tok = o->tok;
    p->format = cv_tc_detect_why(src, o->model_name, &p->why);
    p->thinks = src.len && memmem(src.ptr, src.len, "</think>", 8) != NULL;
    p->bos = special_text(o->bos_token, o->tok, cv_tok_bos, o->gguf, "bos");
    p->eos = special_text(o->eos_token, o->tok, cv_tok_eos, o->gguf, "eos");
    *out = p;
    return 0;
}

void cv_chat_prompt_destroy(cv_chat_prompt *p)
{
    if (!p)
        return;
    cv_chat_template_destroy(p->tmpl);
    free(p->bos);
    free(p->eos);
    free(p);
}

const cv_tc_format *cv_chat_prompt_format(const cv_chat_prompt *p, const char **why)
{
    if (why)
        *why = p->why;
    return p->format;
}

bool cv_chat_prompt_thinks(const cv_chat_prompt *p) { return p->thinks; }
bool cv_chat_prompt_is_chatml(const cv_chat_prompt *p) { return cv_chat_template_is_fallback(p->tmpl); }

/* ---- rendering ---- */

int cv_chat_prompt_render(const cv_chat_prompt *p, const cv_chat_request *req, const cv_chat_prompt_render_opts *ro,
                          cv_buf *text, cv_buf *opener, cv_err *err)
{
    const cv_chat_prompt_render_opts none = { 0 };
    if (!ro)
        ro = &none;
    /* checked here: the template's own CV_EINVAL means it raised */
    if (!json_is_array(req->messages))
        return cv_err_set(err, CV_EINVAL, "chat template: messages must be an array");
    if (req->tools && !json_is_array(req->tools))
        return cv_err_set(err, CV_EINVAL, "chat template: tools must be an array");
    json_t *kw = cv_chat_request_template_kwargs(req, p->format);
    cv_chat_render_opts o = {
        .messages = req->messages,
        .tools = json_array_size(req->tools) ? req->tools : NULL,
        .add_generation_prompt = !ro->no_generation_prompt,
        .bos_token = p->bos,
        .eos_token = p->eos,
        .kwargs = kw,
        .now = ro->now,
    };
    cv_buf prompt = { 0 };
    int rc = cv_chat_template_render(p->tmpl, &o, &prompt, err);
    if (rc == CV_EINVAL) {
        /* A strict template raised (alternating roles, one system message,
         * Mistral call ids): once more with the conversation in the
         * strictest shape, and for a template that loops over tools even
         * when they are None, with tools [] (not at once: a template that
         * checks `tools is not none` would announce tools to a request
         * without them). The first error stands if every form fails
         * (docs/server.md "Strict templates"). */
        json_t *strict = cv_chat_strict_messages(req->messages);
        json_t *no_tools = json_array();
        o.messages = strict;
        for (int pass = 0; pass < 2 && rc; pass++) {
            if (pass == 1) {
                if (o.tools)
                    break;
                o.tools = no_tools;
            }
            cv_buf_reset(&prompt);
            if (cv_chat_template_render(p->tmpl, &o, &prompt, NULL) == 0) {
                cv_debug("chat template raised (%s); rendered the strict form instead", err ? err->msg : "");
                cv_err_clear(err);
                rc = 0;
            }
        }
        json_decref(strict);
        json_decref(no_tools);
    }
    json_decref(kw);
    if (rc) {
        cv_buf_free(&prompt);
        cv_err_prefix(err, "chat template: ");
        return rc;
    }
    if (opener) {
        cv_str op = cv_chat_parse_prompt_opener(p->format, (cv_str){ prompt.data ? prompt.data : "", prompt.len });
        cv_buf_reset(opener);
        cv_buf_append(opener, op.ptr, op.len);
    }
    cv_buf_append(text, prompt.data ? prompt.data : "", prompt.len);
    cv_buf_free(&prompt);
    return 0;
}

static int tokenize(const cv_tok *tok, const char *s, size_t len, unsigned flags, int32_t **ids, int32_t *n,
                    cv_err *err)
{
    if (!tok)
        return cv_err_set(err, CV_EINVAL, "no tokenizer to encode the prompt with");
    cv_tok_ids v = { 0 };
    int rc = cv_tok_encode(tok, s, len, flags, &v, err);
    if (rc) {
        cv_tok_ids_free(&v);
        return rc;
    }
    *ids = v.ids ? v.ids : cv_xmalloc(sizeof **ids);
    *n = (int32_t)v.n;
    return 0;
}

int cv_chat_prompt_encode(const cv_chat_prompt *p, const cv_chat_request *req, int32_t **ids, int32_t *n,
                          cv_buf *opener, cv_err *err)
{
    cv_buf text = { 0 };
    int rc = cv_chat_prompt_render(p, req, NULL, &text, opener, err);
    if (!rc)
        rc = tokenize(p->tok, text.data ? text.data : "", text.len, CV_TOK_PARSE_SPECIAL, ids, n, err);
    cv_buf_free(&text);
    if (rc)
        return rc;
    /* Templates that start with {{ bos_token }} already hold BOS; the
     * ChatML fallback and some templates do not, and a model trained with
     * BOS first drifts without it (llama.cpp adds it the same way). */
    const int32_t bos = cv_tok_bos(p->tok);
    if (cv_tok_adds_bos(p->tok) && bos >= 0 && (*n == 0 || (*ids)[0] != bos)) {
        *ids = cv_xrealloc(*ids, (size_t)(*n + 1) * sizeof **ids);
        memmove(*ids + 1, *ids, (size_t)*n * sizeof **ids);
        (*ids)[0] = bos;
        (*n)++;
    }
    return 0;
}

int cv_chat_encode_text(const cv_tok *tok, cv_str text, int32_t **ids, int32_t *n, cv_err *err)
{
    return tokenize(tok, text.ptr ? text.ptr : "", text.len, CV_TOK_ADD_SPECIAL | CV_TOK_PARSE_SPECIAL, ids, n, err);
}

/* ---- the output parser ---- */

static bool json_format(const json_t *rf)
{
    const char *t = json_string_value(json_object_get(rf, "type"));
    return t && (!strcmp(t, "json_object") || !strcmp(t, "json_schema"));
}

void cv_chat_request_parse_opts(const cv_chat_request *req, const cv_tc_format *f, cv_str opener,
                                cv_chat_parse_opts *out)
{
    *out = (cv_chat_parse_opts){
        .format = f ? f : cv_tc_detect((cv_str){ NULL, 0 }, (cv_str){ NULL, 0 }),
        /* the template's syntax first; calls a model writes in another
         * syntax are still recovered (chat_parse.h, output detection) */
        .detect = true,
        .tools = req->tools,
        .tool_choice_none = req->tool_choice == CV_TOOL_CHOICE_NONE,
        .no_parallel_calls = !req->parallel_tool_calls,
        .reasoning_open = opener,
        .json_response = json_format(req->response_format),
    };
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

json_t *cv_chat_request_template_kwargs(const cv_chat_request *r, const cv_tc_format *f)
{
    json_t *kw = r->template_kwargs ? json_deep_copy(r->template_kwargs) : json_object();
    if (r->thinking != CV_THINKING_DEFAULT && !json_object_get(kw, "enable_thinking"))
        json_object_set_new(kw, "enable_thinking", json_boolean(r->thinking == CV_THINKING_ON));
    const char *effort = template_effort(r, cv_tc_format_efforts(f));
    if (effort && !json_object_get(kw, "reasoning_effort"))
        json_object_set_new(kw, "reasoning_effort", json_string(effort));
    return kw;
}

/* ---- the strict form ---- */

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

json_t *cv_chat_strict_messages(json_t *messages)
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
