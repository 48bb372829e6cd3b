/* chat — the face of the chat layer: the neutral conversation that every
 * wire API is translated into, the model's own chat template (a sandboxed
 * Jinja interpreter) that renders it to a prompt, and the parsers that turn
 * generated text back into content, reasoning and tool calls.
 *
 * The neutral conversation is JSON (jansson), in the shape Hugging Face chat
 * templates are written for, so that rendering needs no second conversion:
 *
 *   messages: [ { "role": "system" | "user" | "assistant" | "tool",
 *                 "content": string | [ {"type":"text","text":...}, ... ] | null,
 *                 "reasoning_content": string,               (assistant, optional)
 *                 "tool_calls": [ { "id": string, "type": "function",
 *                                   "function": { "name": string,
 *                                                 "arguments": object } } ],
 *                 "tool_call_id": string, "name": string }   (tool results)
 *             ]
 *   tools:    [ { "type": "function",
 *                 "function": { "name", "description", "parameters": JSON Schema } } ]
 *
 * Arguments are objects here (templates iterate them); wire files convert
 * from and to the JSON strings their APIs carry.
 *
 * Sections of this face live in chat_request.h (the neutral request the
 * wires fill), chat_template.h (rendering), chat_parse.h (tool calls and
 * reasoning) and chat_prompt.h (a model's request → prompt tokens and parser
 * options, which uses the other three); other layers include only chat.h. */
#ifndef CV_CHAT_H
#define CV_CHAT_H

#include "base/base.h"

/* ---- events from parsing generated text ---- */

/* What the streaming output parser emits, in the order the text was
 * generated. Concatenating every TOOL_ARGS fragment of one call gives exactly
 * that call's final arguments JSON; the non-streaming result is the same
 * events assembled. Slices are valid only during the callback. */
typedef enum cv_chat_event_type {
    CV_CHAT_CONTENT,    /* text: a piece of the message content */
    CV_CHAT_REASONING,  /* text: a piece of the reasoning */
    CV_CHAT_TOOL_BEGIN, /* index, id, name */
    CV_CHAT_TOOL_ARGS,  /* index, text: a fragment of the arguments JSON */
    CV_CHAT_TOOL_END,   /* index */
} cv_chat_event_type;

typedef struct cv_chat_event {
    cv_chat_event_type type;
    int index;  /* tool call index in this response, from 0 */
    cv_str text;
    cv_str id;
    cv_str name;
} cv_chat_event;

typedef void (*cv_chat_event_fn)(void *ud, const cv_chat_event *ev);

#include "chat/chat_request.h"
#include "chat/chat_template.h"
#include "chat/chat_parse.h"
#include "chat/chat_prompt.h"

#endif
