/* tc_call_json.c — reads one tool call written as a JSON object:
 * {"name": "f", "arguments": {...}} and its many spellings — "parameters"
 * (Llama 3), "tool_name" (Command R), {"type":"function","function":{...}}
 * (OpenAI's own shape echoed back), {"f": {...}} (Apertus), keys in any order
 * (arguments before name), arguments double-encoded as a JSON string, ids
 * inside the object (Mistral, Command R).
 *
 * Arguments stream as they are read once the call is known (its name read,
 * and its id when the format carries one); arguments that come before the
 * name, or before an id the format may still write, are kept raw and
 * transcoded at the end of the object. Typing by schema happens in the
 * transcoder (tc_json.c). */
#include "chat/toolcall/tc_int.h"

enum { JC_OPEN, JC_KEY, JC_KEYSTR, JC_COLON, JC_VALUE, JC_VAL, JC_AFTER };
enum { W_NAME = 1, W_ARGS_STREAM, W_ARGS_RAW, W_ARGS_STR, W_ID, W_SKIP };

static const char *const name_keys[] = { "name", "tool_name", "function_name", "recipient_name", NULL };
static const char *const args_keys[] = { "arguments", "parameters", "args", "input", NULL };

const tc_jshape tc_shape_default = { .name_keys = name_keys, .args_keys = args_keys };

void tc_jcall_init(tc_jcall *c, const tc_jshape *shape)
{
    memset(c, 0, sizeof *c);
    c->shape = shape ? shape : &tc_shape_default;
}

void tc_jcall_fini(tc_jcall *c)
{
    if (c->j_live)
        tc_json_fini(&c->j);
    cv_buf_free(&c->name);
    cv_buf_free(&c->id);
    cv_buf_free(&c->key);
    cv_buf_free(&c->raw);
    cv_buf_free(&c->args);
    memset(c, 0, sizeof *c);
}

static bool in_list(const char *const *l, const cv_buf *k)
{
    for (; l && *l; l++)
        if (strlen(*l) == k->len && !memcmp(*l, k->data, k->len))
            return true;
    return false;
}

static void j_start(tc_jcall *c, tc_run *r, unsigned flags, const json_t *props, cv_buf *out)
{
    if (c->j_live)
        tc_json_fini(&c->j);
    tc_json_init(&c->j, flags, (tc_type){ 0 }, props, out, &r->work);
    if (flags & TJ_DECODE) /* a name, id, key or double-encoded arguments */
        c->j.out_cap = out == &c->args ? CV_TC_MAX_HOLD : CV_TC_MAX_NAME;
    c->j_live = true;
}

static void begin(tc_run *r, tc_jcall *c)
{
    c->begun = true;
    c->live = tc_call_begin(r, c->name.data ? c->name.data : "", c->name.len, c->id.data, c->id.len);
}

/* The object ended: emit what was held. */
static int finish(tc_run *r, tc_jcall *c)
{
    if (!c->have_name || !c->name.len)
        return TC_FAIL;
    if (c->shape->need_args && !c->have_args)
        return TC_FAIL;
    if (!c->begun)
        begin(r, c);
    if (c->live && !c->args_streamed) {
        cv_buf out = { 0 };
        int rc = -1;
        if (c->args_raw)
            rc = tc_json_canon(c->raw.data ? c->raw.data : "", c->raw.len, 0, (tc_type){ 0 }, r->call_props, &out);
        else if (c->args.len) /* double-encoded: a JSON string holding the object */
            rc = tc_json_canon(c->args.data, c->args.len, 0, (tc_type){ 0 }, r->call_props, &out);
        if (rc != 0 || !out.len || out.data[0] != '{') {
            cv_buf_reset(&out);
            cv_buf_puts(&out, "{}");
        }
        tc_call_args(r, out.data, out.len);
        cv_buf_free(&out);
    }
    tc_call_end(r);
    return TC_DONE;
}

/* Whether the call can be announced now: its name is known, and so is its
 * id when the format writes ids inside the object. */
static bool can_begin(const tc_jcall *c)
{
    return c->have_name && (!c->shape->id_keys || c->id.len);
}

static int run_value(tc_run *r, tc_jcall *c)
{
    if (c->what == W_ARGS_STREAM)
        return tc_stream_args(r, &c->j, &r->scratch);
    size_t used = 0;
    int rc = tc_json_feed(&c->j, tc_p(r), tc_n(r), r->eof, &used);
    /* names, ids and keys are short, and a double-encoded argument string
     * is held within the hold bound: one that outgrows it fails at its end
     * (the same byte however the input was split) */
    if (rc == TC_DONE && c->j.overflow) {
        tc_eat(r, used);
        return TC_FAIL;
    }
    if (c->what == W_ARGS_RAW) {
        if (c->raw.len + used > CV_TC_MAX_HOLD)
            return TC_FAIL;
        cv_buf_append(&c->raw, tc_p(r), used);
    }
    tc_eat(r, used);
    return rc;
}

static bool key_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

int tc_jcall_step(tc_run *r, tc_jcall *c)
{
    int rc;
    switch (c->st) {
    case JC_OPEN:
        if ((rc = tc_ws(r)) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r) || *tc_p(r) != '{')
            return TC_FAIL;
        tc_eat(r, 1);
        c->st = JC_KEY;
        return TC_OK;
    case JC_KEY:
    case JC_AFTER: {
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return r->eof ? finish(r, c) : TC_MORE;
        char ch = *tc_p(r);
        if (ch == '}') {
            tc_eat(r, 1);
            if (c->nest > 0) {
                c->nest--;
                c->st = JC_AFTER;
                return TC_OK;
            }
            return finish(r, c);
        }
        if (ch == ',') {
            tc_eat(r, 1);
            c->st = JC_KEY;
            return TC_OK;
        }
        if (ch == '"' || ch == '\'') {
            cv_buf_reset(&c->key);
            c->what = 0;
            j_start(c, r, TJ_DECODE, NULL, &c->key);
            c->st = JC_KEYSTR;
            return TC_OK;
        }
        if (c->st == JC_KEY && key_char((unsigned char)ch)) {
            long len = tc_ident(r, 0, false);
            if (len < 0)
                return TC_MORE;
            if (len == 0)
                return TC_FAIL;
            cv_buf_reset(&c->key);
            cv_buf_append(&c->key, tc_p(r), (size_t)len);
            tc_eat(r, (size_t)len);
            c->st = JC_COLON;
            return TC_OK;
        }
        return TC_FAIL;
    }
    case JC_KEYSTR:
        rc = run_value(r, c);
        if (rc != TC_DONE)
            return rc;
        c->st = JC_COLON;
        return TC_OK;
    case JC_COLON:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return r->eof ? finish(r, c) : TC_MORE;
        if (*tc_p(r) != ':')
            return TC_FAIL;
        tc_eat(r, 1);
        c->st = JC_VALUE;
        return TC_OK;
    case JC_VALUE: {
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return r->eof ? finish(r, c) : TC_MORE;
        char ch = *tc_p(r);
        const tc_jshape *sh = c->shape;
        bool is_name = !sh->name_is_key && in_list(sh->name_keys, &c->key);
        bool is_args = in_list(sh->args_keys, &c->key);
        static const char *const wrap_keys[] = { "type", "function", "id", NULL };
        if (sh->call_keys_only && !is_name && !is_args && !in_list(wrap_keys, &c->key))
            return TC_FAIL;
        if (sh->name_is_key && c->nest == 0 && !c->have_name) {
            /* {"get_weather": {"city": "Paris"}} */
            cv_buf_reset(&c->name);
            cv_buf_append(&c->name, c->key.data, c->key.len);
            c->have_name = true;
            tc_commit(r);
            is_args = true;
        }
        if ((is_name || (c->key.len == 8 && !memcmp(c->key.data, "function", 8))) && ch == '{') {
            /* {"type": "function", "function": {"name": .., "arguments": ..}} */
            tc_eat(r, 1);
            c->nest++;
            c->st = JC_KEY;
            return TC_OK;
        }
        if (is_name || (!sh->name_is_key && c->key.len == 8 && !memcmp(c->key.data, "function", 8))) {
            cv_buf_reset(&c->name);
            c->what = W_NAME;
            j_start(c, r, TJ_DECODE, NULL, &c->name);
        } else if (is_args && !c->have_args) {
            c->have_args = true;
            if (ch == '{' && (c->begun || can_begin(c))) {
                if (!c->begun)
                    begin(r, c);
                c->what = W_ARGS_STREAM;
                c->args_streamed = true;
                cv_buf_reset(&r->scratch);
                j_start(c, r, TJ_OBJECT, r->call_props, &r->scratch);
            } else if (ch == '"' || ch == '\'') {
                c->what = W_ARGS_STR;
                j_start(c, r, TJ_DECODE, NULL, &c->args);
            } else {
                c->what = W_ARGS_RAW;
                c->args_raw = true;
                j_start(c, r, TJ_SKIP, NULL, NULL);
            }
        } else if (in_list(sh->id_keys, &c->key)) {
            cv_buf_reset(&c->id);
            c->what = W_ID;
            j_start(c, r, TJ_DECODE, NULL, &c->id);
        } else {
            c->what = W_SKIP;
            j_start(c, r, TJ_SKIP, NULL, NULL);
        }
        c->st = JC_VAL;
        return TC_OK;
    }
    case JC_VAL:
        rc = run_value(r, c);
        if (rc != TC_DONE)
            return rc;
        if (c->what == W_NAME) {
            c->have_name = true;
            /* weak evidence must name a declared tool: known now, so data
             * naming something else is released without waiting for its end */
            size_t off;
            if (r->spec_fit && r->o.tools && !tc_resolve(r, c->name.data ? c->name.data : "", c->name.len, &off))
                return TC_FAIL;
            /* a named object after a call marker: it is a call */
            tc_commit(r);
        }
        if ((c->what == W_NAME || c->what == W_ID) && !c->begun && can_begin(c))
            begin(r, c); /* announce it before its arguments arrive */
        c->st = JC_AFTER;
        return TC_OK;
    }
    return TC_FAIL;
}
