/* template.c — the chat layer's rendering service over the Jinja
 * interpreter: it compiles a model's template once (the compiled AST is the
 * per-model cache, shared read-only by every request), builds the variables
 * Hugging Face's apply_chat_template passes (messages, tools, documents,
 * add_generation_prompt, the special tokens, then the caller's keyword
 * switches, which win), and supplies the ChatML fallback for models that
 * ship no template. The conversation JSON is handed to the interpreter as
 * is: the neutral shape in chat.h is already the one templates expect. */
#include <stdlib.h>

#include "chat/chat.h"
#include "chat/jinja/jinja.h"

/* ChatML as Qwen2/Hermes lay it out; content parts contribute their text,
 * tool calls are written as Hermes <tool_call> JSON. */
static const char chatml_src[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message.role + '\\n' -}}\n"
    "{%- if message.content is string -%}\n"
    "{{- message.content -}}\n"
    "{%- elif message.content is iterable -%}\n"
    "{%- for part in message.content if part.type == 'text' -%}{{- part.text -}}{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{%- if message.tool_calls is defined and message.tool_calls -%}\n"
    "{%- for tc in message.tool_calls -%}\n"
    "{{- '\\n<tool_call>\\n' + {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson + '\\n</tool_call>' -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

struct cv_chat_template {
    cv_jinja_tmpl *tmpl;
    char *src;
    size_t len;
    bool fallback;
};

int cv_chat_template_create(const char *src, size_t len, const char *name, cv_chat_template **out, cv_err *err)
{
    *out = NULL;
    bool fallback = !src || !len;
    if (fallback) {
        cv_warn("%s has no chat template: using ChatML", name ? name : "the model");
        src = chatml_src;
        len = sizeof chatml_src - 1;
    }
    cv_jinja_tmpl *t = NULL;
    int rc = cv_jinja_compile(src, len, &t, err);
    if (rc < 0) {
        if (name)
            cv_err_prefix(err, "chat template of %s: ", name);
        return rc;
    }
    cv_chat_template *ct = cv_xcalloc(1, sizeof *ct);
    ct->tmpl = t;
    ct->src = cv_xstrndup(src, len);
    ct->len = len;
    ct->fallback = fallback;
    *out = ct;
    return 0;
}

void cv_chat_template_destroy(cv_chat_template *t)
{
    if (!t)
        return;
    cv_jinja_free(t->tmpl);
    free(t->src);
    free(t);
}

bool cv_chat_template_is_fallback(const cv_chat_template *t) { return t->fallback; }

cv_str cv_chat_template_source(const cv_chat_template *t) { return (cv_str){ t->src, t->len }; }

int cv_chat_template_render(const cv_chat_template *t, const cv_chat_render_opts *o, cv_buf *out, cv_err *err)
{
    if (!o->messages || !json_is_array(o->messages))
        return cv_err_set(err, CV_EINVAL, "chat template: messages must be an array");
    if (o->tools && !json_is_array(o->tools) && !json_is_null(o->tools))
        return cv_err_set(err, CV_EINVAL, "chat template: tools must be an array");
    if (o->kwargs && !json_is_object(o->kwargs))
        return cv_err_set(err, CV_EINVAL, "chat template: keyword arguments must be an object");
    json_t *vars = json_object();
    json_object_set(vars, "messages", o->messages);
    json_object_set_new(vars, "tools", o->tools ? json_incref(o->tools) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(o->add_generation_prompt));
    json_object_set_new(vars, "bos_token", json_string(o->bos_token ? o->bos_token : ""));
    json_object_set_new(vars, "eos_token", json_string(o->eos_token ? o->eos_token : ""));
    if (o->kwargs)
        json_object_update(vars, o->kwargs);
    cv_jinja_opts jo = { .now = o->now };
    int rc = cv_jinja_render(t->tmpl, vars, &jo, out, err);
    json_decref(vars);
    return rc;
}
