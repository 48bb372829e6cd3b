/* chat_template.h — the template section of the chat face: render a neutral
 * conversation (chat.h) into the prompt text a model was trained on, by
 * running the model's own Jinja chat template (GGUF key
 * `tokenizer.chat_template`) in a sandboxed interpreter that matches
 * Jinja2 3.1 as Hugging Face's apply_chat_template drives it.
 *
 * Lifecycle: compile once per model when it loads (cv_chat_template_create),
 * render per request from any number of threads at once (the compiled
 * template is immutable), destroy with the model. A model without a
 * template gets a built-in ChatML template, and a warning in the log. */
#ifndef CV_CHAT_TEMPLATE_H
#define CV_CHAT_TEMPLATE_H

#include "base/base.h"

typedef struct cv_chat_template cv_chat_template;

/* Compiles template source src[0..len). src == NULL or len == 0 selects the
 * ChatML fallback (logged at warn level with `name`, e.g. the model path).
 * On a template syntax error returns CV_EINVAL ("template line N: ...") and
 * *out stays NULL; the caller decides whether to fall back. */
int cv_chat_template_create(const char *src, size_t len, const char *name, cv_chat_template **out, cv_err *err);
void cv_chat_template_destroy(cv_chat_template *t);
/* True when t is the built-in ChatML fallback. */
bool cv_chat_template_is_fallback(const cv_chat_template *t);
/* The source that was compiled (the fallback's own text for the fallback). */
cv_str cv_chat_template_source(const cv_chat_template *t);

/* What one render needs. Only `messages` is required. */
typedef struct cv_chat_render_opts {
    json_t *messages;           /* array of messages in the chat.h shape */
    json_t *tools;              /* array of {"type":"function",...} or NULL (templates then see None) */
    bool add_generation_prompt; /* end with the assistant header so the model answers */
    const char *bos_token;      /* NULL means "" */
    const char *eos_token;      /* NULL means "" */
    /* Extra template variables, an object or NULL: enable_thinking,
     * reasoning_effort, and anything a client sent in chat_template_kwargs.
     * They override the variables above, as in Hugging Face. */
    json_t *kwargs;
    int64_t now;                /* unix time for strftime_now; 0 = the clock */
} cv_chat_render_opts;

/* Renders the conversation and appends the prompt to out. The template sees
 * messages, tools (None when absent), documents (None),
 * add_generation_prompt, bos_token, eos_token and the kwargs. Fails with
 * CV_EINVAL when the template raises (raise_exception, an undefined value
 * used, a type error: the message says which, with the template line) and
 * CV_ELIMIT when a sandbox limit (steps, output, memory, depth, time; see
 * base/limits.h) stops it; out then holds a partial prompt to discard.
 * Thread-safe for concurrent renders of one template. */
int cv_chat_template_render(const cv_chat_template *t, const cv_chat_render_opts *o, cv_buf *out, cv_err *err);

#endif
