/* chat_prompt.h — the prompt section of the chat face (included by chat.h):
 * the one owner of turning a neutral request into a model's prompt, and of
 * the parser options for what the model then generates. A cv_chat_prompt
 * is one model's way to do it: its chat template, its tool-call and
 * reasoning syntax, the text of its BOS/EOS tokens, and its tokenizer. The
 * server's backend, `corvid template` and the tests all render, encode and
 * pick parser options through it (and `corvid run` encodes its text prompts
 * as completions do, cv_chat_encode_text), so a request renders the same
 * wherever it is rendered (docs/chat-templates.md).
 *
 * A render is: the template's variables for the request (its
 * chat_template_kwargs, enable_thinking, reasoning_effort in the family's
 * words), the conversation and tools as they are, a generation prompt; and
 * when a strict template raises, once more with the conversation in its
 * strictest shape. Encoding tokenizes the prompt with special tokens parsed
 * and prepends BOS when the vocabulary wants it and the template did not
 * write it. Immutable after create: any number of threads render at once. */
#ifndef CV_CHAT_PROMPT_H
#define CV_CHAT_PROMPT_H

#include "chat/chat.h"

struct cv_gguf;
struct cv_tok;

typedef struct cv_chat_prompt cv_chat_prompt;

typedef struct cv_chat_prompt_opts {
    /* The model file: its tokenizer.chat_template, and its BOS/EOS token
     * strings when there is no tokenizer. NULL: template_src alone. */
    const struct cv_gguf *gguf;
    cv_str template_src;     /* without gguf (a .jinja file); empty: the ChatML fallback */
    /* The model's tokenizer (borrowed, outlives the prompt): encoding, and
     * BOS/EOS as it writes them. NULL: render only. */
    const struct cv_tok *tok;
    const char *bos_token;   /* the text templates see; NULL: the tokenizer's, else the file's, else "" */
    const char *eos_token;
    const char *name;        /* the model (its path) in messages; may be NULL */
    cv_str model_name;       /* what syntax detection reads when the template says nothing: the file name */
    /* A template corvid cannot compile: false fails create (corvid
     * template shows the error); true warns and renders with ChatML, so a
     * model is still served. */
    bool chatml_on_error;
} cv_chat_prompt_opts;

/* Compiles the template and detects the model's tool-call syntax (template,
 * then name, then the default; cv_tc_detect_why). CV_EINVAL names the
 * template's line when it does not compile (without chatml_on_error).
 * Caller destroys. */
int cv_chat_prompt_create(const cv_chat_prompt_opts *o, cv_chat_prompt **out, cv_err *err);
void cv_chat_prompt_destroy(cv_chat_prompt *p);

/* The model's tool-call and reasoning syntax, and how it was chosen
 * ("template", "name" or "default"; why may be NULL). */
const cv_tc_format *cv_chat_prompt_format(const cv_chat_prompt *p, const char **why);
/* Its template knows a <think> block, so the model may open one on its
 * own (constrained decoding then allows it first). */
bool cv_chat_prompt_thinks(const cv_chat_prompt *p);
/* True when rendering falls back to ChatML (no template, or one that did
 * not compile). */
bool cv_chat_prompt_is_chatml(const cv_chat_prompt *p);

/* What a render may change from the server's. NULL: the server's. */
typedef struct cv_chat_prompt_render_opts {
    bool no_generation_prompt; /* end without the assistant's header (`corvid template -n`) */
    int64_t now;               /* the time strftime_now sees; 0: the clock */
} cv_chat_prompt_render_opts;

/* Renders req's conversation (req->raw must be false) and appends the
 * prompt to text; opener (may be NULL) gets the reasoning opener the prompt
 * leaves open for the model to continue (cv_chat_parse_prompt_opener),
 * empty when generation starts outside reasoning. CV_EINVAL (the template's
 * own message, after "chat template: ") when the template raises on the
 * strict form too; CV_ELIMIT when a sandbox limit stops it. */
int cv_chat_prompt_render(const cv_chat_prompt *p, const cv_chat_request *req, const cv_chat_prompt_render_opts *ro,
                          cv_buf *text, cv_buf *opener, cv_err *err);
/* cv_chat_prompt_render, then the tokens: special tokens written in the
 * prompt parsed, BOS first when the vocabulary adds one and the template
 * did not write it. *ids is malloc'd (caller frees). CV_EINVAL without a
 * tokenizer. */
int cv_chat_prompt_encode(const cv_chat_prompt *p, const cv_chat_request *req, int32_t **ids, int32_t *n,
                          cv_buf *opener, cv_err *err);
/* A raw text prompt (legacy completions, `corvid run -p`), which needs no
 * template: tok's tokens, BOS and EOS as the vocabulary says, special
 * tokens written in the text parsed. *ids is malloc'd (caller frees). */
int cv_chat_encode_text(const struct cv_tok *tok, cv_str text, int32_t **ids, int32_t *n, cv_err *err);

/* The output parser's options for a request answered in syntax f (NULL:
 * the default): output detection on, so a call written in another known
 * syntax is still recovered; the request's tools, tool_choice none,
 * parallel_tool_calls and a JSON response_format; starting inside
 * reasoning when opener (what render reported) is not empty. The ids
 * (id_fn, id_seed) are left to the caller. */
void cv_chat_request_parse_opts(const cv_chat_request *req, const cv_tc_format *f, cv_str opener,
                                cv_chat_parse_opts *out);

/* The variables a request adds to its chat template's: its
 * chat_template_kwargs, enable_thinking when the wire switched thinking,
 * and reasoning_effort. For a family whose template takes only some levels
 * (cv_tc_format_efforts: Harmony's low/medium/high) the effort becomes the
 * nearest of them: the wire's word ranked none < minimal < low < medium <
 * high < xhigh = max, thinking off as the least, an Anthropic thinking
 * budget as low below 8192 tokens, medium below 24576, else high (Claude
 * Code's "think" / "think hard" / "ultrathink" budgets are 4000, 10000 and
 * 31999); an unknown word or thinking on with nothing more is left to the
 * template's default. Other families get the wire's word as given. Keys
 * already in chat_template_kwargs win. f may be NULL. New reference. */
json_t *cv_chat_request_template_kwargs(const cv_chat_request *r, const cv_tc_format *f);
/* The conversation rewritten for strict chat templates, tried when a render
 * raises: consecutive leading system messages and consecutive user messages
 * joined (blank line between), tool-call ids mapped to 9 alphanumerics
 * (a stable hash, so calls and results still match). New reference. */
json_t *cv_chat_strict_messages(json_t *messages);

#endif
