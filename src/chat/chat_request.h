/* chat_request.h — the request section of the chat face (included by
 * chat.h): the neutral request every wire API is translated into (the
 * conversation of chat.h plus tools, tool choice, sampling, limits and
 * switches), so that nothing below the wire files learns which API a
 * request came from (DESIGN.md "the one data path"). The wire files
 * (src/server/api_*.c) fill it; the backend renders, submits and parses
 * with it. */
#ifndef CV_CHAT_REQUEST_H
#define CV_CHAT_REQUEST_H

#include "base/base.h"
#include "engine/sampler.h" /* cv_sample_params: nothing else of the engine */

typedef enum cv_tool_choice {
    CV_TOOL_CHOICE_AUTO,     /* the model decides */
    CV_TOOL_CHOICE_NONE,     /* no tool calls */
    CV_TOOL_CHOICE_REQUIRED, /* at least one call (Anthropic "any") */
    CV_TOOL_CHOICE_NAMED,    /* a call to tool_choice_name */
} cv_tool_choice;

/* Thinking switch as the wires express it; templates read it as
 * enable_thinking (Qwen3 and others) or a reasoning-effort kwarg. */
typedef enum cv_thinking {
    CV_THINKING_DEFAULT = -1, /* the template's own default */
    CV_THINKING_OFF = 0,
    CV_THINKING_ON = 1,
} cv_thinking;

/* What every wire file fills and nothing below the wire files sees the wire
 * of. All pointers are owned by the request and freed by
 * cv_chat_request_fini. */
typedef struct cv_chat_request {
    json_t *messages;        /* chat.h shape (array) */
    json_t *tools;           /* chat.h shape (array, maybe empty) */
    cv_tool_choice tool_choice;
    char *tool_choice_name;  /* CV_TOOL_CHOICE_NAMED */
    bool parallel_tool_calls;
    cv_sample_params sample; /* logit_bias points at logit_bias below */
    cv_logit_bias *logit_bias;
    int32_t max_tokens;      /* 0: as many as the context allows */
    char **stop;             /* stop strings (NUL-free UTF-8) */
    int n_stop;
    bool logprobs;
    int32_t top_logprobs;
    json_t *response_format; /* {"type":"json_object"|"json_schema",...} or NULL */
    cv_thinking thinking;
    char *reasoning_effort;  /* "low" | "medium" | "high" | NULL */
    int32_t thinking_budget; /* tokens; 0: none given */
    json_t *template_kwargs; /* object merged into the template's variables, or NULL */
    bool stream;
    bool include_usage;      /* OpenAI stream_options.include_usage */
    char *model;             /* as the client asked; any name is served */
    /* Legacy completions: a raw prompt instead of messages. */
    bool raw;
    cv_buf prompt_text;      /* raw text prompt (raw && !prompt_ids) */
    int32_t *prompt_ids;     /* raw token prompt, or NULL */
    int32_t n_prompt_ids;
    bool echo;
} cv_chat_request;

/* An empty request with the wires' shared defaults (temperature and top_p 1,
 * parallel tool calls allowed, the template's own thinking default). */
void cv_chat_request_init(cv_chat_request *r);
/* Frees everything the request owns and leaves it zeroed. */
void cv_chat_request_fini(cv_chat_request *r);
/* Appends a stop string (copied); fails with CV_ELIMIT past CV_MAX_STOP_STRINGS
 * or CV_EINVAL for an empty or over-long string. */
int cv_chat_request_add_stop(cv_chat_request *r, const char *s, size_t len, cv_err *err);

#endif
