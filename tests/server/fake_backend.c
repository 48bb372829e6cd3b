/* fake_backend.c — the test-only byte-level backend described in
 * fake_backend.h: a ChatML-like rendering (so prompt sizes scale with the
 * request like a real template's), a scheduler whose "sampled" text is
 * substituted, timing knobs for keep-alive and disconnect tests, and a small
 * hermes/think output parser (or the production parser,
 * fake_backend_use_parser). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fake_backend.h"

#define EOG 256

/* ---- rendering ---- */

static void render(const cv_chat_request *r, cv_buf *out)
{
    size_t i;
    json_t *m;
    if (json_array_size(r->tools)) {
        cv_buf_puts(out, "<|tools|>");
        cv_json_dump(out, r->tools);
        cv_buf_puts(out, "\n");
    }
    json_array_foreach(r->messages, i, m) {
        cv_buf_printf(out, "<|%s|>", json_string_value(json_object_get(m, "role")));
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c))
            cv_buf_append(out, json_string_value(c), json_string_length(c));
        json_t *rc = json_object_get(m, "reasoning_content");
        if (json_is_string(rc))
            cv_buf_printf(out, "<think>%s</think>", json_string_value(rc));
        json_t *tc = json_object_get(m, "tool_calls");
        if (tc)
            cv_json_dump(out, tc);
        cv_buf_puts(out, "\n");
    }
    cv_buf_puts(out, "<|assistant|>");
}

static int encode_chat(void *ctx, const cv_chat_request *r, int32_t **ids, int32_t *n, cv_buf *opener, cv_err *err)
{
    fake_backend *f = ctx;
    atomic_fetch_add(&f->n_encodes, 1);
    if (opener) {
        cv_buf_reset(opener);
        if (f->opener)
            cv_buf_puts(opener, f->opener);
    }
    cv_buf b = { 0 };
    render(r, &b);
    *n = (int32_t)b.len;
    *ids = cv_xmalloc(b.len ? b.len * sizeof **ids : 4);
    for (size_t i = 0; i < b.len; i++)
        (*ids)[i] = (unsigned char)b.data[i];
    cv_buf_free(&b);
    return 0;
}

static int encode_text(void *ctx, cv_str t, int32_t **ids, int32_t *n, cv_err *err)
{
    *n = (int32_t)t.len;
    *ids = cv_xmalloc(t.len ? t.len * sizeof **ids : 4);
    for (size_t i = 0; i < t.len; i++)
        (*ids)[i] = (unsigned char)t.ptr[i];
    return 0;
}

/* ---- detokenizer: bytes, holding an incomplete UTF-8 sequence ---- */

typedef struct detok {
    cv_buf held;
} detok;

static void *detok_create(void *ctx) { return cv_xcalloc(1, sizeof(detok)); }

static void detok_feed(void *d, int32_t token, cv_buf *out)
{
    detok *k = d;
    if (token < 0 || token > 255)
        return;
    char c = (char)token;
    cv_buf_append(&k->held, &c, 1);
    size_t n = cv_utf8_complete_prefix(k->held.data, k->held.len);
    /* An invalid byte can never complete: let it through (the wire turns it
     * into U+FFFD) rather than holding it forever. */
    if (n == 0 && k->held.len >= 4)
        n = k->held.len;
    cv_buf_append(out, k->held.data, n);
    cv_buf_consume(&k->held, n);
}

static void detok_flush(void *d, cv_buf *out)
{
    detok *k = d;
    cv_buf_append(out, k->held.data, k->held.len);
    cv_buf_reset(&k->held);
}

static void detok_destroy(void *d)
{
    detok *k = d;
    cv_buf_free(&k->held);
    free(k);
}

static bool is_eog(void *ctx, int32_t token) { return token == EOG; }

static void token_text(void *ctx, int32_t token, cv_buf *out)
{
    if (token >= 0 && token < 256) {
        char c = (char)token;
        cv_buf_append(out, &c, 1);
    }
}

/* ---- choosing the reply (the substituted sampler) ---- */

typedef struct fake_req {
    fake_backend *f;
    cv_buf text;
    int32_t *ids;   /* wrapping a real backend: text in the model's own token ids */
    size_t n_ids;
    size_t pos;
    int32_t max_tokens, n_gen, n_prompt;
    int slow_ms, prefill_ms;
    bool fail, prompt_done, eog_sent, done, logprobs;
    int32_t n_top;
    atomic_bool cancel;
    uint64_t t_next;
} fake_req;

/* The text the directives are read from: the last user/tool message. */
static const char *directive_text(const cv_chat_request *r)
{
    if (r->raw)
        return r->prompt_text.data;
    for (size_t i = json_array_size(r->messages); i-- > 0;) {
        json_t *m = json_array_get(r->messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && (!strcmp(role, "user") || !strcmp(role, "tool")))
            return json_string_value(json_object_get(m, "content"));
    }
    return NULL;
}

static int directive_int(const char *t, const char *tag)
{
    const char *p = t ? strstr(t, tag) : NULL;
    return p ? atoi(p + strlen(tag)) : 0;
}

static bool has_tool_result(const cv_chat_request *r)
{
    size_t i;
    json_t *m;
    json_array_foreach(r->messages, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "role")), "tool"))
            return true;
    return false;
}

static void choose_reply(fake_backend *f, const cv_chat_request *r, fake_req *q)
{
    const char *t = directive_text(r);
    q->slow_ms = directive_int(t, "[[slow:");
    q->prefill_ms = directive_int(t, "[[prefill:");
    q->fail = t && strstr(t, "[[fail]]");
    if (f->reply) {
        cv_buf_puts(&q->text, f->reply);
        return;
    }
    const char *b64 = t ? strstr(t, "[[say64:") : NULL;
    if (b64) {
        /* Base64 lets a test substitute any recorded model output, newlines,
         * brackets and all (tests/js/server/toolcalls.test.mjs). */
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        uint32_t acc = 0;
        int bits = 0;
        for (const char *p = b64 + 8; *p && *p != ']'; p++) {
            const char *k = strchr(alphabet, *p);
            if (!k || *p == 0)
                continue;
            acc = (acc << 6) | (uint32_t)(k - alphabet);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                cv_buf_putc(&q->text, (char)((acc >> bits) & 0xff));
            }
        }
        return;
    }
    const char *say = t ? strstr(t, "[[say:") : NULL;
    if (say) {
        say += 6;
        const char *end = strstr(say, "]]");
        size_t n = end ? (size_t)(end - say) : strlen(say);
        for (size_t i = 0; i < n; i++) {
            if (say[i] == '\\' && i + 1 < n && say[i + 1] == 'n') {
                cv_buf_putc(&q->text, '\n');
                i++;
            } else {
                cv_buf_putc(&q->text, say[i]);
            }
        }
        return;
    }
    if (r->raw) {
        cv_buf_puts(&q->text, " Once upon a time there was a little fox.");
        return;
    }
    if (r->thinking == CV_THINKING_ON)
        cv_buf_puts(&q->text, "<think>The user wants the files listed; I will run ls.</think>\n");
    if (json_array_size(r->tools) && !has_tool_result(r)) {
        static const char *const shells[] = { "Bash", "exec_command", "bash", "run_shell_command" };
        const char *name = NULL;
        size_t i;
        json_t *tool;
        json_array_foreach(r->tools, i, tool) {
            const char *n = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
            for (size_t k = 0; k < CV_ARRAY_LEN(shells) && !name; k++)
                if (n && !strcmp(n, shells[k]))
                    name = n;
        }
        if (!name)
            name = json_string_value(json_object_get(json_object_get(json_array_get(r->tools, 0), "function"), "name"));
        cv_buf_printf(&q->text, "<tool_call>\n{\"name\": \"%s\", \"arguments\": {\"%s\": \"ls -la\"}}\n</tool_call>",
                      name, !strcmp(name, "exec_command") ? "cmd" : "command");
        return;
    }
    cv_buf_puts(&q->text, "There are 3 files in this directory: a.txt, b.py and notes.md.");
}

/* ---- the scheduler ---- */

static int submit(void *ctx, const cv_chat_request *req, cv_str opener, const cv_sched_params *p,
                  cv_sched_req **out, cv_err *err)
{
    fake_backend *f = ctx;
    if (p->n_prompt + p->max_tokens > f->n_ctx)
        return cv_err_set(err, CV_EINVAL, "fake: prompt %d + max_tokens %d is over the context %d", p->n_prompt,
                          p->max_tokens, f->n_ctx);
    fake_req *q = cv_xcalloc(1, sizeof *q);
    q->f = f;
    q->max_tokens = p->max_tokens;
    q->n_prompt = p->n_prompt;
    q->logprobs = p->logprobs;
    q->n_top = p->n_top_logprobs;
    if (!req->raw || !req->prompt_ids)
        choose_reply(f, req, q);
    else {
        /* Raw completions: the prompt bytes are the directive text. */
        cv_chat_request r;
        cv_chat_request_init(&r);
        r.raw = true;
        for (int32_t i = 0; i < p->n_prompt; i++) {
            char c = (char)p->prompt[i];
            cv_buf_append(&r.prompt_text, &c, 1);
        }
        choose_reply(f, &r, q);
        cv_chat_request_fini(&r);
    }
    if (f->real) {
        int32_t *ids = NULL, n = 0;
        cv_err e2 = { 0 };
        if (f->real->encode_text(f->real->ctx, (cv_str){ q->text.data ? q->text.data : "", q->text.len }, &ids, &n,
                                 &e2) == 0) {
            size_t skip = CV_MIN((size_t)n, f->n_prefix);
            q->n_ids = (size_t)n - skip;
            q->ids = cv_xmalloc((q->n_ids + 1) * sizeof *q->ids);
            memcpy(q->ids, ids + skip, q->n_ids * sizeof *q->ids);
        }
        free(ids);
    }
    q->t_next = cv_now_ns() + (uint64_t)q->prefill_ms * 1000000;
    atomic_fetch_add(&f->running, 1);
    *out = (cv_sched_req *)q;
    return 0;
}

static void end(fake_req *q)
{
    if (!q->done) {
        q->done = true;
        atomic_fetch_sub(&q->f->running, 1);
    }
}

static int next(cv_sched_req *r, int timeout_ms, cv_sched_event *ev)
{
    fake_req *q = (fake_req *)r;
    memset(ev, 0, sizeof *ev);
    if (q->done)
        return CV_EBUSY;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : cv_now_ns() + (uint64_t)timeout_ms * 1000000;
    while (!atomic_load(&q->cancel) && cv_now_ns() < q->t_next) {
        if (cv_now_ns() >= deadline)
            return CV_EBUSY;
        usleep(2000);
    }
    ev->n_prompt = q->n_prompt;
    ev->n_generated = q->n_gen;
    if (atomic_load(&q->cancel)) {
        ev->type = CV_SCHED_DONE;
        ev->finish = CV_FINISH_CANCELED;
        atomic_fetch_add(&q->f->n_canceled, 1);
        end(q);
        return 0;
    }
    if (!q->prompt_done) {
        q->prompt_done = true;
        ev->type = CV_SCHED_PROMPT_DONE;
        ev->n_cached = q->n_prompt / 2; /* pretend half came from the prefix cache */
        q->t_next = cv_now_ns() + (uint64_t)q->slow_ms * 1000000;
        return 0;
    }
    ev->n_cached = q->n_prompt / 2;
    if (q->fail && q->n_gen >= 2) {
        ev->type = CV_SCHED_ERROR;
        cv_err_set(&ev->err, CV_EIO, "fake: the engine failed at step %d", q->n_gen);
        end(q);
        return 0;
    }
    if (q->eog_sent) {
        ev->type = CV_SCHED_DONE;
        ev->finish = CV_FINISH_STOP;
        end(q);
        return 0;
    }
    if (q->n_gen >= q->max_tokens) {
        ev->type = CV_SCHED_DONE;
        ev->finish = CV_FINISH_LENGTH;
        end(q);
        return 0;
    }
    ev->type = CV_SCHED_TOKEN;
    if (q->f->real) {
        if (q->pos >= q->n_ids) {
            /* The model's own end token is not scripted: stop after the text. */
            ev->type = CV_SCHED_DONE;
            ev->finish = CV_FINISH_STOP;
            end(q);
            return 0;
        }
        ev->token = q->ids[q->pos++];
    } else if (q->pos < q->text.len) {
        ev->token = (unsigned char)q->text.data[q->pos++];
    } else {
        ev->token = EOG;
        q->eog_sent = true;
    }
    q->n_gen++;
    ev->n_generated = q->n_gen;
    atomic_fetch_add(&q->f->tokens_emitted, 1);
    if (q->logprobs) {
        ev->logprob = -0.25f;
        ev->n_top = CV_MIN(q->n_top, 2);
        for (int i = 0; i < ev->n_top; i++) {
            ev->top_tokens[i] = i == 0 ? ev->token : 'x';
            ev->top_logprobs[i] = i == 0 ? -0.25f : -2.0f;
        }
    }
    q->t_next = cv_now_ns() + (uint64_t)q->slow_ms * 1000000;
    return 0;
}

static void cancel(cv_sched_req *r) { atomic_store(&((fake_req *)r)->cancel, true); }

static void release(cv_sched_req *r)
{
    fake_req *q = (fake_req *)r;
    if (!q->done) {
        atomic_fetch_add(&q->f->n_canceled, 1);
        end(q);
    }
    cv_buf_free(&q->text);
    free(q->ids);
    free(q);
}

static bool ready(void *ctx) { return atomic_load(&((fake_backend *)ctx)->ready); }

static void load(void *ctx, cv_server_load *l)
{
    fake_backend *f = ctx;
    l->running = atomic_load(&f->running);
    l->kv_blocks_used = l->running;
    l->kv_blocks_free = 1024 - l->kv_blocks_used;
}

/* ---- the parser: <think>…</think> and hermes <tool_call>{json}</tool_call> ---- */

typedef enum { P_TEXT, P_THINK, P_TOOL } pmode;

typedef struct fparser {
    cv_chat_event_fn fn;
    void *ud;
    pmode mode;
    cv_buf pending;
    int n_calls;
    bool after_think; /* a newline right after </think> is layout, not content */
} fparser;

void *fake_parser_create(void *ctx, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn, void *ud)
{
    fparser *p = cv_xcalloc(1, sizeof *p);
    p->fn = fn;
    p->ud = ud;
    return p;
}

static void emit(fparser *p, cv_chat_event_type t, const char *s, size_t n)
{
    if (!n && (t == CV_CHAT_CONTENT || t == CV_CHAT_REASONING))
        return;
    cv_chat_event ev = { .type = t, .index = p->n_calls, .text = { s, n } };
    p->fn(p->ud, &ev);
}

/* Longest suffix of s that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t k = CV_MIN(n, t - 1); k > 0; k--)
        if (!memcmp(s + n - k, tag, k))
            return k;
    return 0;
}

static bool emit_call(fparser *p, const char *s, size_t n)
{
    json_t *v = json_loadb(s, n, 0, NULL);
    json_t *name = json_object_get(v, "name");
    json_t *args = json_object_get(v, "arguments");
    if (!json_is_string(name)) {
        json_decref(v);
        return false;
    }
    cv_buf a = { 0 };
    if (args)
        cv_json_dump(&a, args);
    else
        cv_buf_puts(&a, "{}");
    cv_chat_event ev = { .type = CV_CHAT_TOOL_BEGIN, .index = p->n_calls,
                         .name = { json_string_value(name), json_string_length(name) } };
    p->fn(p->ud, &ev);
    /* Two fragments, as a streaming parser would give them. */
    size_t half = a.len / 2;
    emit(p, CV_CHAT_TOOL_ARGS, a.data, half);
    emit(p, CV_CHAT_TOOL_ARGS, a.data + half, a.len - half);
    ev = (cv_chat_event){ .type = CV_CHAT_TOOL_END, .index = p->n_calls };
    p->fn(p->ud, &ev);
    p->n_calls++;
    cv_buf_free(&a);
    json_decref(v);
    return true;
}

void fake_parser_feed(void *pp, cv_str text)
{
    fparser *p = pp;
    cv_buf_append(&p->pending, text.ptr, text.len);
    for (;;) {
        char *s = p->pending.data;
        size_t n = p->pending.len;
        if (!n)
            return;
        if (p->after_think) {
            p->after_think = false;
            if (s[0] == '\n') {
                cv_buf_consume(&p->pending, 1);
                continue;
            }
        }
        if (p->mode == P_TEXT) {
            char *th = memmem(s, n, "<think>", 7), *tc = memmem(s, n, "<tool_call>", 11);
            char *first = th && (!tc || th < tc) ? th : tc;
            if (!first) {
                size_t keep = CV_MAX(partial_tag(s, n, "<think>"), partial_tag(s, n, "<tool_call>"));
                emit(p, CV_CHAT_CONTENT, s, n - keep);
                cv_buf_consume(&p->pending, n - keep);
                return;
            }
            emit(p, CV_CHAT_CONTENT, s, (size_t)(first - s));
            p->mode = first == th ? P_THINK : P_TOOL;
            cv_buf_consume(&p->pending, (size_t)(first - s) + (first == th ? 7 : 11));
        } else if (p->mode == P_THINK) {
            char *e = memmem(s, n, "</think>", 8);
            if (!e) {
                size_t keep = partial_tag(s, n, "</think>");
                emit(p, CV_CHAT_REASONING, s, n - keep);
                cv_buf_consume(&p->pending, n - keep);
                return;
            }
            emit(p, CV_CHAT_REASONING, s, (size_t)(e - s));
            cv_buf_consume(&p->pending, (size_t)(e - s) + 8);
            p->mode = P_TEXT;
            p->after_think = true;
        } else {
            char *e = memmem(s, n, "</tool_call>", 12);
            if (!e)
                return;
            if (!emit_call(p, s, (size_t)(e - s))) {
                emit(p, CV_CHAT_CONTENT, "<tool_call>", 11);
                emit(p, CV_CHAT_CONTENT, s, (size_t)(e - s) + 12);
            }
            cv_buf_consume(&p->pending, (size_t)(e - s) + 12);
            p->mode = P_TEXT;
        }
    }
}

void fake_parser_finish(void *pp)
{
    fparser *p = pp;
    if (p->mode == P_TOOL)
        emit(p, CV_CHAT_CONTENT, "<tool_call>", 11);
    emit(p, p->mode == P_THINK ? CV_CHAT_REASONING : CV_CHAT_CONTENT, p->pending.data, p->pending.len);
    cv_buf_reset(&p->pending);
}

void fake_parser_destroy(void *pp)
{
    fparser *p = pp;
    cv_buf_free(&p->pending);
    free(p);
}

/* ---- lifecycle ---- */

void fake_backend_init(fake_backend *f, int32_t n_ctx)
{
    memset(f, 0, sizeof *f);
    f->n_ctx = n_ctx;
    atomic_store(&f->ready, true);
    f->be = (cv_server_backend){
        .ctx = f,
        .model_id = "fake-bytes",
        .n_ctx = n_ctx,
        .created = 1767225600,
        .ready = ready,
        .encode_chat = encode_chat,
        .encode_text = encode_text,
        .detok_create = detok_create,
        .detok_feed = detok_feed,
        .detok_flush = detok_flush,
        .detok_destroy = detok_destroy,
        .is_eog = is_eog,
        .token_text = token_text,
        .parser_create = fake_parser_create,
        .parser_feed = fake_parser_feed,
        .parser_finish = fake_parser_finish,
        .parser_destroy = fake_parser_destroy,
        .submit = submit,
        .next = next,
        .cancel = cancel,
        .release = release,
        .load = load,
    };
}

void fake_backend_fini(fake_backend *f)
{
    free(f->reply);
    free(f->opener);
}

static void *real_parser_create(void *ctx, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn, void *ud)
{
    return cv_server_parser_create(((fake_backend *)ctx)->tc_format, req, opener, fn, ud);
}

void fake_backend_use_parser(fake_backend *f, const cv_tc_format *fmt, const char *opener)
{
    f->tc_format = fmt;
    free(f->opener);
    f->opener = opener && *opener ? cv_xstrdup(opener) : NULL;
    f->be.parser_create = real_parser_create;
    f->be.parser_feed = cv_server_parser_feed;
    f->be.parser_finish = cv_server_parser_finish;
    f->be.parser_destroy = cv_server_parser_destroy;
}

/* Thunks: the server passes the fake as ctx; the real functions want theirs. */
static int w_encode_chat(void *ctx, const cv_chat_request *r, int32_t **ids, int32_t *n, cv_buf *opener,
                         cv_err *err)
{
    fake_backend *f = ctx;
    atomic_fetch_add(&f->n_encodes, 1);
    return f->real->encode_chat(f->real->ctx, r, ids, n, opener, err);
}
static int w_encode_text(void *ctx, cv_str t, int32_t **ids, int32_t *n, cv_err *err)
{
    fake_backend *f = ctx;
    return f->real->encode_text(f->real->ctx, t, ids, n, err);
}
static void *w_detok_create(void *ctx) { return ((fake_backend *)ctx)->real->detok_create(((fake_backend *)ctx)->real->ctx); }
static bool w_is_eog(void *ctx, int32_t t) { return ((fake_backend *)ctx)->real->is_eog(((fake_backend *)ctx)->real->ctx, t); }
static void w_token_text(void *ctx, int32_t t, cv_buf *out)
{
    ((fake_backend *)ctx)->real->token_text(((fake_backend *)ctx)->real->ctx, t, out);
}

void fake_backend_wrap(fake_backend *f, const cv_server_backend *real)
{
    f->real = real;
    f->be.ctx = f;
    f->be.model_id = real->model_id;
    f->be.n_ctx = f->n_ctx = real->n_ctx;
    f->be.created = real->created;
    f->be.encode_chat = w_encode_chat;
    f->be.encode_text = w_encode_text;
    f->be.detok_create = w_detok_create;
    f->be.detok_feed = real->detok_feed;
    f->be.detok_flush = real->detok_flush;
    f->be.detok_destroy = real->detok_destroy;
    f->be.is_eog = w_is_eog;
    f->be.token_text = w_token_text;
    int32_t *ids = NULL, n = 0;
    if (real->encode_text(real->ctx, (cv_str){ "", 0 }, &ids, &n, NULL) == 0)
        f->n_prefix = (size_t)n; /* BOS the tokenizer adds to any text */
    free(ids);
}

void fake_backend_set_reply(fake_backend *f, const char *text)
{
    free(f->reply);
    f->reply = text ? cv_xstrdup(text) : NULL;
}
