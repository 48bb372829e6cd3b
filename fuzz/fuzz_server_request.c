/* fuzz_server_request.c — the wire request parsers (OpenAI chat,
 * completions, responses with a response store, Anthropic messages and
 * count_tokens) on arbitrary bytes: the first byte picks the parser, the rest
 * is the HTTP body. Every input must end in a neutral request or an error
 * with a message, never a crash, leak or sanitizer report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"

static cv_resp_store *store;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!store) {
        cv_log_set_level(CV_LOG_OFF);
        store = cv_resp_store_create(4);
        json_t *conv = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
        cv_resp_store_put(store, "resp_a", conv);
        json_decref(conv);
    }
    cv_err err = { 0 };
    json_t *body = cv_json_parse((const char *)data + 1, size - 1, &err);
    if (!body)
        return 0;
    cv_chat_request r;
    cv_chat_request_init(&r);
    int rc = 0;
    if (json_is_object(body)) {
        switch (data[0] % 5) {
        case 0: rc = cv_openai_chat_parse(body, &r, &err); break;
        case 1: rc = cv_openai_completions_parse(body, &r, &err); break;
        case 2: rc = cv_openai_responses_parse(body, store, &r, &err); break;
        case 3: rc = cv_anthropic_parse(body, false, &r, &err); break;
        default: rc = cv_anthropic_parse(body, true, &r, &err); break;
        }
        if (rc && !err.msg[0])
            abort(); /* every refusal names what was wrong */
    }
    cv_chat_request_fini(&r);
    json_decref(body);
    return 0;
}
