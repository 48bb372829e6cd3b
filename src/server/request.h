/* request.h — the translation helpers every wire shares (request.c),
 * private to src/server/: number fields from a table, content parts,
 * tools, tool calls, stop strings, limits, JSON strings from any bytes,
 * SSE frames, and the tool calls an encoder accumulates. */
#ifndef CV_SERVER_REQUEST_H
#define CV_SERVER_REQUEST_H

#include "chat/chat.h"
#include "server/server.h"

/* Parses a sampling number member; rejects NaN/Inf and values outside
 * [lo, hi] naming the field. */
int cv_req_num(json_t *obj, const char *key, double lo, double hi, double *out, bool *present, cv_err *err);
int cv_req_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *present, cv_err *err);
/* Stop strings: a string or an array of strings. */
int cv_req_stops(cv_chat_request *r, json_t *v, const char *what, cv_err *err);

/* One number member of a request that lands in a cv_chat_request field:
 * set only when the member is present (and not null), range-checked as
 * cv_req_num / cv_req_int do. A wire lists its fields in a table, in the
 * order their errors are reported. */
typedef enum cv_req_kind {
    CV_REQ_F32, /* a float field (temperature, top_p, penalties) */
    CV_REQ_I32, /* an int32_t field (top_k, max_tokens, top_logprobs) */
} cv_req_kind;
typedef struct cv_req_field {
    const char *key;
    cv_req_kind kind;
    double lo, hi;
    size_t offset; /* offsetof(cv_chat_request, ...) */
} cv_req_field;
#define CV_REQ_FIELD(key, kind, lo, hi, field) { key, kind, lo, hi, offsetof(cv_chat_request, field) }
int cv_req_fields(json_t *obj, const cv_req_field *f, size_t n, cv_chat_request *r, cv_err *err);

/* How a wire spells content: the part (block) types whose "text" is kept,
 * and the media types it refuses (NULL: every other type is refused; else
 * the rest are skipped, logged at debug). */
typedef struct cv_req_parts {
    const char *noun;                /* "content part" | "content block", for messages */
    const char *const *text_types;   /* NULL-terminated */
    const char *const *media_types;  /* NULL-terminated, or NULL */
} cv_req_parts;
/* One part c (the i-th of what) appended to out: its text after a newline
 * when out is not empty (the parts of one message are joined so words stay
 * apart). CV_EINVAL for a malformed part, CV_EUNSUPPORTED for media. */
int cv_req_part_text(json_t *p, const char *what, size_t i, const cv_req_parts *k, cv_buf *out, cv_err *err);
/* Content c (a string, an array of parts, or null / absent: nothing) of
 * what appended to out, parts joined as above. */
int cv_req_content_text(json_t *c, const char *what, const cv_req_parts *k, cv_buf *out, cv_err *err);

/* The same as a JSON string (new reference; "" for null content), or NULL
 * with err filled. */
json_t *cv_req_content_json(json_t *c, const char *what, const cv_req_parts *k, cv_err *err);
/* The tools array of a request: NULL / null (0, *n = 0), or an array of at
 * most CV_MAX_TOOLS; *n its length. */
int cv_req_tools_array(json_t *tools, size_t *n, cv_err *err);
/* Appends one function tool to r->tools in the neutral shape (chat.h) from
 * def's string 'name' (non-empty), optional string 'description' and the
 * JSON Schema object under params_key (absent or null: no parameters). what
 * names def in errors ("tools[3].function"). CV_ELIMIT past CV_MAX_TOOLS. */
int cv_req_add_tool(cv_chat_request *r, json_t *def, const char *what, const char *params_key, cv_err *err);
/* How a wire lists its tools: the type it serves (an untyped tool is that
 * type; others are skipped with a log line), where a served tool keeps its
 * definition (a member, or NULL: the tool itself) and its schema. */
typedef struct cv_req_tool_spec {
    const char *wire;       /* for the log line */
    const char *served_type;
    const char *def_key;
    const char *params_key;
} cv_req_tool_spec;
/* The tools member of a request (cv_req_tools_array) appended to r->tools. */
int cv_req_tools(cv_chat_request *r, json_t *tools, const cv_req_tool_spec *spec, cv_err *err);
/* tool_choice as a word: auto, none or required (OpenAI chat and Responses). */
int cv_req_tool_choice_word(const char *s, cv_chat_request *r, cv_err *err);
/* A tool call in the neutral shape: {id, type:"function", function:{name,
 * arguments}}; args (an object) is consumed. New reference. */
json_t *cv_req_call(const char *id, const char *name, json_t *args);
/* Arguments JSON string → object for the neutral shape (chat.h): invalid or
 * non-object JSON is kept as {} plus a warning, since templates iterate it.
 * New reference. */
json_t *cv_req_args_object(const char *args, size_t len);
/* Strips Claude Code's per-request "x-anthropic-billing-header: ..." line
 * from the start of a system prompt (it changes every request and would
 * defeat the prefix cache). Returns the text without it. */
cv_str cv_req_strip_billing(cv_str system);
/* Checks the counts in a finished request against limits.h. */
int cv_req_check_limits(const cv_chat_request *r, cv_err *err);

/* A JSON string from bytes that may not be valid UTF-8 (client input echoed
 * in an error, model text): invalid sequences become U+FFFD, so jansson never
 * returns NULL. New reference. */
json_t *cv_json_str(const char *s, size_t len);
static inline json_t *cv_json_strz(const char *z) { return cv_json_str(z, z ? strlen(z) : 0); }

/* Writes one SSE frame: `event: NAME\n` (when name) + `data: JSON\n\n`.
 * json is consumed. */
void cv_sse(cv_buf *out, const char *name, json_t *json);

/* Tool calls as an encoder accumulates them, by the parser's index. */
typedef struct cv_call {
    char id[64];
    char *name;
    cv_buf args;
    bool ended;
} cv_call;

typedef struct cv_calls {
    cv_call *v;
    int n;
} cv_calls;

/* The call at index (created with an id from prefix when new; the parser's
 * id is kept when it gave one). NULL for an index past CV_MAX_TOOL_CALLS. */
cv_call *cv_calls_at(cv_calls *c, cv_server *srv, const cv_chat_event *ev, const char *prefix);
void cv_calls_free(cv_calls *c);
/* The calls in the neutral shape (cv_req_call), arguments as the JSON text
 * generated (objects false: OpenAI's wire) or parsed into objects (true: a
 * stored conversation). New reference. */
json_t *cv_calls_json(const cv_calls *c, bool objects);
static inline bool cv_event_is_tool(const cv_chat_event *ev)
{
    return ev->type == CV_CHAT_TOOL_BEGIN || ev->type == CV_CHAT_TOOL_ARGS || ev->type == CV_CHAT_TOOL_END;
}

#endif
