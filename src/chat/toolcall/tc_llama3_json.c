/* tc_llama3_json.c — Llama 3.x JSON tool calls: {"name": .., "parameters": {..}}.
 * Llama 3.1/3.2/3.3 answer with a bare JSON object, several separated by
 * ";", optionally after <|python_tag|>. A bare object is a call only when
 * it has both a name and its parameters (or arguments) and has been read
 * whole; anything else stays text, so JSON answers are not mistaken for
 * calls. Output detection watches for the same bare object, and for one
 * in a ```json fence, in every other format's output. */
#include "chat/toolcall/tc_int.h"

static const char *const name_keys[] = { "name", NULL };
static const char *const args_keys[] = { "parameters", "arguments", NULL };
static const tc_jshape shape = { .name_keys = name_keys, .args_keys = args_keys, .need_args = true };

static const tc_env env_tag = {
    .items = IT_JSON,
    .shape = &shape,
    .seps = ";",
    .skip = (const char *const[]){ "<|python_tag|>", NULL },
};

static const tc_env env_bare = {
    .items = IT_JSON,
    .shape = &shape,
    .seps = ";",
};

/* Detection in output of other formats: the bare object, or one fenced in
 * ```json / ```tool_call (objects or a list of them) — models of every
 * family fall into Llama 3's habit. Only call keys: a JSON answer is given
 * back as soon as it shows another key. */
static const tc_jshape shape_detect = {
    .name_keys = name_keys, .args_keys = args_keys, .need_args = true, .call_keys_only = true
};

static const tc_env env_detect = {
    .items = IT_JSON,
    .shape = &shape_detect,
    .seps = ";",
};

static const tc_env env_fence = {
    .end = "```",
    .items = IT_JSON | IT_LIST,
    .shape = &shape_detect,
    .seps = ";,",
};

static const tc_start detect[] = {
    { .marker = "{", .read = tc_read_env, .cfg = &env_detect, .weak = true, .keep = true },
    { .marker = "```json", .read = tc_read_env, .cfg = &env_fence, .weak = true },
    { .marker = "```tool_call", .read = tc_read_env, .cfg = &env_fence, .weak = true },
    { 0 },
};

static const tc_start starts[] = {
    { .marker = "<|python_tag|>", .read = tc_read_env, .cfg = &env_tag },
    { .marker = "{", .read = tc_read_env, .cfg = &env_bare, .weak = true, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "llama3_json",
    .trigger = "{\"name\"",
    .sep = " ; ",
    .name_as = CV_TS_NAME_MEMBER,
    .name_key = "name",
    .args_key = "parameters",
};

const cv_tc_format tc_fmt_llama3_json = {
    .name = "llama3_json",
    .syntax = &syntax,
    .summary = "{\"name\": .., \"parameters\": {..}} (bare or after <|python_tag|>, \";\"-separated)",
    .aliases = (const char *const[]){ "llama3", "llama31", "llama3_json", NULL },
    .tmpl = { (const char *const[]){ "respond with a JSON for a function call", NULL }, (const char *const[]){ "<|python_tag|>", NULL } },
    .tmpl_rank = 60,
    .names = (const char *const[]){ "llama-3.1", "llama3.1", "llama-3.2", "llama3.2", "llama-3.3", "llama3.3", "llama-3", "llama3", NULL },
    .starts = starts,
    .detect = detect,
    .drops = (const char *const[]){ "<|eom_id|>", "<|eot_id|>", NULL },
};
