/* fake_backend.h — a test-only cv_server_backend: a byte-level "model"
 * (token = byte, 256 = end of generation) whose generated text is chosen by
 * the test instead of sampled, so every wire, the stop matcher, the parser
 * path, keep-alives and cancellation can be driven exactly while the engine,
 * tokenizer, templates and tool-call parsers are not yet on main.
 *
 * This is the "test-only hook that substitutes the sampler's text": it lives
 * under tests/, is linked only into test binaries and cannot be reached from
 * the corvid CLI or over HTTP.
 *
 * What the fake says, in order of precedence:
 *   1. fake_backend_set_reply() text, when set (C tests);
 *   2. a directive in the last user-visible text of the request:
 *        [[say:TEXT]]       reply TEXT exactly ("\n" in TEXT is a newline)
 *        [[say64:BASE64]]   reply the decoded bytes exactly
 *        [[slow:MS]]        wait MS between tokens
 *        [[prefill:MS]]     wait MS before the first token
 *        [[fail]]           the scheduler reports an error mid-stream
 *   3. the recording fake of testdata/clients (CLIENTS.md): with tools and no
 *      tool result yet, one call to the client's shell tool, hermes syntax
 *      <tool_call>{"name":..,"arguments":{"command":"ls -la"}}</tool_call>;
 *      otherwise "There are 3 files ...". With thinking on, a
 *      <think>...</think> block first.
 * Its output parser splits <think>…</think> into reasoning and
 * <tool_call>{json}</tool_call> into tool-call events (hermes format). */
#ifndef CV_FAKE_BACKEND_H
#define CV_FAKE_BACKEND_H

#include <stdatomic.h>

#include "server/server.h"

typedef struct fake_backend {
    cv_server_backend be;
    int32_t n_ctx;
    char *reply;                 /* fixed reply, or NULL */
    atomic_bool ready;
    atomic_llong tokens_emitted; /* across all requests: bounds work after a cancel */
    atomic_llong n_canceled;     /* requests that ended cancelled */
    atomic_int running;
    atomic_llong n_encodes;
    const cv_server_backend *real; /* wrapped real backend, or NULL */
    size_t n_prefix;               /* ids the real tokenizer adds to any text (BOS) */
    const cv_tc_format *tc_format; /* fake_backend_use_parser, or NULL */
    char *opener;                  /* reasoning opener encode_chat reports, or NULL */
} fake_backend;

void fake_backend_init(fake_backend *f, int32_t n_ctx);
void fake_backend_fini(fake_backend *f);
void fake_backend_set_reply(fake_backend *f, const char *text);
/* Wraps a real backend (a model): its template, tokenizer and detokenizer
 * serve every request, and only the sampled tokens are substituted — the
 * chosen reply, tokenized with the model's own vocabulary, is what the
 * "scheduler" generates. The fake's parser stays until the chat layer has
 * one. */
void fake_backend_wrap(fake_backend *f, const cv_server_backend *real);

/* Replaces the fake's hermes parser with the production one
 * (cv_server_parser_create in syntax fmt, chat_parse.h), so that scripted
 * model text goes through the real tool-call and reasoning parser. opener
 * (may be NULL) is what encode_chat then reports as left open by the prompt
 * (e.g. "<think>\n"). Call between requests, not during one. */
void fake_backend_use_parser(fake_backend *f, const cv_tc_format *fmt, const char *opener);

/* The fake's parser on its own (tests of the parser path). */
void *fake_parser_create(void *ctx, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn, void *ud);
void fake_parser_feed(void *p, cv_str text);
void fake_parser_finish(void *p);
void fake_parser_destroy(void *p);

#endif
