/* chat_parse.h — the parser section of the chat face (included by chat.h):
 * turns the text a model generates into content, reasoning and tool calls,
 * as a stream of cv_chat_events, for every tool-call wire syntax corvid
 * knows (one cv_tc_format each, src/chat/toolcall/tc_<name>.c).
 *
 * One code path: the non-streaming result is the event stream assembled
 * (cv_chat_parse_text), so a response parses the same whether it is fed in
 * one piece or one byte at a time. Concatenating the TOOL_ARGS fragments of
 * a call gives exactly its final arguments JSON (compact, ", " and ": ").
 *
 * What the parser guarantees for any input (tests/chat/toolcall):
 *   - linear time and bounded memory in the output length (held text is
 *     capped by CV_TC_MAX_HOLD and friends in base/limits.h);
 *   - markup never leaks: a suspected marker is held until it is known to be
 *     prose, then released as content;
 *   - a tool call is emitted only for a declared tool (when tools are given),
 *     never for marker text inside a string argument or inside reasoning
 *     that goes on after it, never with tool_choice "none", and only the
 *     first one with parallel_tool_calls false;
 *   - arguments are repaired (unclosed brackets at the end, trailing commas,
 *     single quotes, Python literals, double-encoded JSON, code fences,
 *     wrapper objects) and typed by the tool's JSON schema. */
#ifndef CV_CHAT_PARSE_H
#define CV_CHAT_PARSE_H

#include "chat/chat.h"

/* ---- formats and selection ---- */

/* One wire syntax for tool calls and reasoning (opaque; see tc_int.h). */
typedef struct cv_tc_format cv_tc_format;

/* The registry, in table order. */
int cv_tc_format_count(void);
const cv_tc_format *cv_tc_format_at(int i);
/* Short name ("hermes", "qwen3_coder_xml", ...), matching the fixture files. */
const char *cv_tc_format_name(const cv_tc_format *f);
/* One line: the syntax it parses. */
const char *cv_tc_format_summary(const cv_tc_format *f);
/* The reasoning_effort values the family's chat template takes, least
 * reasoning first and NULL-terminated (Harmony: low, medium, high), or NULL
 * when the template takes whatever word it is given. */
const char *const *cv_tc_format_efforts(const cv_tc_format *f);
/* By name or alias, case-insensitive; NULL when unknown. */
const cv_tc_format *cv_tc_format_find(const char *name);
/* How a call is written in the format's syntax (grammar.h's descriptor, what
 * cv_grammar_from_tools forces), or NULL when it has no call syntax. */
struct cv_tool_syntax;
const struct cv_tool_syntax *cv_tc_format_syntax(const cv_tc_format *f);

/* Chooses the format for a model: first from its chat template's source
 * text (which syntax the template renders for assistant tool calls), then
 * from the model's name or architecture (e.g. "Qwen3-Coder-30B", "qwen3moe"),
 * else the generic "hermes" parser. Either argument may be empty. Never NULL. */
const cv_tc_format *cv_tc_detect(cv_str template_src, cv_str model_name);
/* The same, reporting how it decided: "template", "name" or "default". */
const cv_tc_format *cv_tc_detect_why(cv_str template_src, cv_str model_name, const char **why);

/* Given the rendered prompt (its end is enough), returns the reasoning
 * opener the prompt leaves open for the model to continue, e.g. "<think>\n"
 * when the template ends its generation prompt with "<think>\n" — generation
 * then starts inside reasoning. Returns an empty slice when the prompt ends
 * outside reasoning (or closes what it opened, "<think>\n\n</think>\n\n").
 * The slice points into prompt. */
cv_str cv_chat_parse_prompt_opener(const cv_tc_format *f, cv_str prompt);

/* ---- streaming parser ---- */

/* Writes the id for tool call number `index` of the response into out.
 * The default makes "call_" + 24 letters and digits from a seeded RNG. */
typedef void (*cv_chat_id_fn)(void *ud, int index, cv_buf *out);

typedef struct cv_chat_parse_opts {
    /* The format; NULL: cv_tc_detect(template_src, model_name). */
    const cv_tc_format *format;
    /* Output detection ("auto"): besides the format's own syntax, the
     * markers of every other syntax are watched while no call has been
     * found. An unambiguous marker (<tool_call>, <|channel|>, [TOOL_CALLS],
     * <｜tool▁calls▁begin｜>, ...) switches to its syntax at once; bare
     * shapes (a JSON call object or list, a ```json / ```tool_call fence,
     * a Python list of calls as the whole reply) count only when read whole,
     * naming a declared tool, with arguments that fit its schema. What the
     * server does; docs/toolcalls.md "Detection" has the rules. */
    bool detect;
    cv_str template_src;
    cv_str model_name;
    /* The request's tools (OpenAI shape: [{"type":"function","function":
     * {"name","parameters"}}]); borrowed for the parser's lifetime. When set
     * (even empty) only calls to declared names count, and argument values
     * are typed by each tool's "parameters" schema. NULL: any name counts and
     * values keep the types the model wrote (debugging, parse-tools). */
    const json_t *tools;
    bool tool_choice_none;       /* no calls at all; markup is still removed */
    bool no_parallel_calls;      /* parallel_tool_calls false: first call only */
    /* Reasoning that the prompt opened: cv_chat_parse_prompt_opener's result.
     * Non-empty means the text starts inside reasoning. */
    cv_str reasoning_open;
    /* false: reasoning goes to CV_CHAT_REASONING events (reasoning_content).
     * true: it stays in the content with its markers, exactly as generated
     * (reasoning_open first), for clients that show raw thinking. Tool-call
     * markup inside reasoning is never a call in either mode. */
    bool reasoning_inline;
    /* The response is one JSON document (response_format json_schema): a
     * ```json fence around it is removed from the content. */
    bool json_response;
    /* Tool-call ids where the format carries none: id_fn if set, else
     * "call_" + random from id_seed (0: seeded from the clock). */
    cv_chat_id_fn id_fn;
    void *id_ud;
    uint64_t id_seed;
} cv_chat_parse_opts;

typedef struct cv_chat_parse cv_chat_parse;

/* Creates a parser that calls fn(ud, event) for every event, in order, from
 * inside cv_chat_parse_feed and cv_chat_parse_finish. Fails with CV_EINVAL
 * when opts->tools is not an array of tools. Caller destroys. */
int cv_chat_parse_create(const cv_chat_parse_opts *opts, cv_chat_event_fn fn, void *ud, cv_chat_parse **out,
                         cv_err *err);
/* Feeds the next piece of generated text, any size, split anywhere (even
 * inside a UTF-8 sequence or a marker). Events for everything that is
 * already certain are emitted before it returns; text that may still become
 * markup is held. Fails only after finish (CV_EINVAL). */
int cv_chat_parse_feed(cv_chat_parse *p, const char *text, size_t len, cv_err *err);
/* End of generation: releases held text, closes an unterminated call
 * (repairing its arguments), runs the cross-format fallback, and emits the
 * final events. Call once. */
int cv_chat_parse_finish(cv_chat_parse *p, cv_err *err);
void cv_chat_parse_destroy(cv_chat_parse *p);
/* The format in use: the chosen one, or the one output detection switched
 * to. */
const cv_tc_format *cv_chat_parse_format(const cv_chat_parse *p);
/* The syntax the committed calls (or call markup) were written in, NULL
 * while none was found: the chosen format's own, or a detected one. */
const cv_tc_format *cv_chat_parse_detected(const cv_chat_parse *p);
/* Bytes examined so far, all passes included: the work bound that the
 * linear-time test checks (tests/chat/toolcall/test_tc_linear.c). */
uint64_t cv_chat_parse_work(const cv_chat_parse *p);

/* ---- non-streaming result: the stream assembled ---- */

typedef struct cv_chat_tool_call {
    char *id;
    char *name;
    char *arguments;      /* JSON object text, NUL-terminated */
    size_t arguments_len; /* its length (appending stays O(1) per byte) */
    size_t arguments_cap;
} cv_chat_tool_call;

typedef struct cv_chat_parse_result {
    cv_buf content;
    cv_buf reasoning;
    cv_chat_tool_call *calls;
    int n_calls;
    int cap_calls;
} cv_chat_parse_result;

/* A zeroed result is an empty one; fini frees what it holds. */
void cv_chat_parse_result_fini(cv_chat_parse_result *r);
/* The event sink that assembles a result: pass it to cv_chat_parse_create
 * with ud = a cv_chat_parse_result. */
void cv_chat_parse_result_collect(void *ud, const cv_chat_event *ev);
/* Parses a whole text: create, one feed, finish, all events collected into
 * out (which must be zeroed or fini'd). */
int cv_chat_parse_text(const cv_chat_parse_opts *opts, const char *text, size_t len, cv_chat_parse_result *out,
                       cv_err *err);
/* {"content": str|null, "reasoning_content": str|null, "tool_calls": [{"id",
 * "type":"function", "function":{"name","arguments": JSON text}}]}; caller
 * owns it. Empty content or reasoning is null. */
json_t *cv_chat_parse_result_json(const cv_chat_parse_result *r);

#endif
