/* request.c — the neutral request's lifecycle (chat_request.h): its
 * defaults, what it owns, and the one checked way to add a stop string.
 * Filling it from a wire is the server's wire files' job. */
#include <stdlib.h>

#include "chat/chat.h"

void cv_chat_request_init(cv_chat_request *r)
{
    memset(r, 0, sizeof *r);
    r->messages = json_array();
    r->tools = json_array();
    r->parallel_tool_calls = true;
    r->thinking = CV_THINKING_DEFAULT;
    r->sample.temperature = 1.0f; /* the OpenAI and Anthropic default */
    r->sample.top_p = 1.0f;
}

void cv_chat_request_fini(cv_chat_request *r)
{
    json_decref(r->messages);
    json_decref(r->tools);
    json_decref(r->response_format);
    json_decref(r->template_kwargs);
    free(r->tool_choice_name);
    free(r->logit_bias);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->reasoning_effort);
    free(r->model);
    cv_buf_free(&r->prompt_text);
    free(r->prompt_ids);
    memset(r, 0, sizeof *r);
}

int cv_chat_request_add_stop(cv_chat_request *r, const char *s, size_t len, cv_err *err)
{
    if (r->n_stop >= CV_MAX_STOP_STRINGS)
        return cv_err_set(err, CV_ELIMIT, "more than %d stop strings", CV_MAX_STOP_STRINGS);
    if (len == 0)
        return cv_err_set(err, CV_EINVAL, "a stop string is empty");
    if (len > CV_MAX_STOP_BYTES)
        return cv_err_set(err, CV_ELIMIT, "a stop string of %zu bytes is over the limit of %d", len,
                          CV_MAX_STOP_BYTES);
    if (memchr(s, 0, len) || !cv_utf8_valid(s, len))
        return cv_err_set(err, CV_EINVAL, "a stop string is not valid UTF-8 text");
    r->stop = cv_xrealloc(r->stop, (size_t)(r->n_stop + 1) * sizeof *r->stop);
    r->stop[r->n_stop++] = cv_xstrndup(s, len);
    return 0;
}
