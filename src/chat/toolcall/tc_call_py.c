/* tc_call_py.c — reads one tool call written as a Python call with keyword
 * arguments, get_weather(city='Paris', days=3, units=None), the syntax of
 * Llama 3.2/4 "pythonic" tool calling, LFM2 and Olmo 3. Dotted names
 * (Calendar.create_event) are kept. Values are Python literals, read by the
 * tolerant JSON reader (single quotes, True/False/None, dicts, lists), typed
 * by the schema, and stream as they are read. Positional arguments are not a
 * tool call (there is no name to give them). */
#include "chat/toolcall/tc_int.h"

enum { PC_NAME, PC_PAREN, PC_ARG, PC_EQ, PC_VAL, PC_AFTER };

void tc_pcall_init(tc_pcall *c)
{
    memset(c, 0, sizeof *c);
}

void tc_pcall_fini(tc_pcall *c)
{
    if (c->any)
        tc_json_fini(&c->j);
    cv_buf_free(&c->name);
    cv_buf_free(&c->key);
    memset(c, 0, sizeof *c);
}

static void out(tc_run *r, tc_pcall *c, const char *s, size_t n)
{
    if (c->live)
        tc_call_args(r, s, n);
}

static int close_call(tc_run *r, tc_pcall *c)
{
    out(r, c, "}", 1);
    tc_call_end(r);
    return TC_DONE;
}

int tc_pcall_step(tc_run *r, tc_pcall *c)
{
    long len;
    switch (c->st) {
    case PC_NAME:
        len = tc_ident(r, 0, true);
        if (len < 0)
            return TC_MORE;
        if (len == 0)
            return TC_FAIL;
        cv_buf_reset(&c->name);
        cv_buf_append(&c->name, tc_p(r), (size_t)len);
        tc_eat(r, (size_t)len);
        c->st = PC_PAREN;
        return TC_OK;
    case PC_PAREN:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r) || *tc_p(r) != '(')
            return TC_FAIL;
        tc_eat(r, 1);
        c->live = tc_call_begin(r, c->name.data, c->name.len, NULL, 0);
        tc_commit(r);
        out(r, c, "{", 1);
        c->st = PC_ARG;
        return TC_OK;
    case PC_ARG:
    case PC_AFTER:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return r->eof ? close_call(r, c) : TC_MORE;
        if (*tc_p(r) == ')') {
            tc_eat(r, 1);
            return close_call(r, c);
        }
        if (c->st == PC_AFTER) {
            if (*tc_p(r) != ',')
                return TC_FAIL;
            tc_eat(r, 1);
            c->st = PC_ARG;
            return TC_OK;
        }
        len = tc_ident(r, 0, false);
        if (len < 0)
            return TC_MORE;
        if (len == 0)
            return TC_FAIL; /* a positional argument */
        cv_buf_reset(&c->key);
        cv_buf_append(&c->key, tc_p(r), (size_t)len);
        tc_eat(r, (size_t)len);
        c->st = PC_EQ;
        return TC_OK;
    case PC_EQ: {
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r))
            return r->eof ? close_call(r, c) : TC_MORE;
        if (*tc_p(r) != '=')
            return TC_FAIL;
        tc_eat(r, 1);
        cv_buf_reset(&r->scratch);
        if (c->n_args)
            cv_buf_puts(&r->scratch, ", ");
        cv_buf_put_json_str(&r->scratch, c->key.data, c->key.len);
        cv_buf_puts(&r->scratch, ": ");
        out(r, c, r->scratch.data, r->scratch.len);
        cv_buf_reset(&r->scratch);
        if (c->any)
            tc_json_fini(&c->j);
        tc_json_init(&c->j, TJ_NO_BARE, tc_prop_type(r->call_props, c->key.data, c->key.len), NULL, &r->scratch,
                     &r->work);
        c->any = true;
        c->st = PC_VAL;
        return TC_OK;
    }
    case PC_VAL: {
        int rc = tc_stream_args(r, &c->j, &r->scratch);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc == TC_FAIL) {
            if (r->eof && !tc_json_started(&c->j)) {
                out(r, c, "null", 4);
                return close_call(r, c);
            }
            return TC_FAIL;
        }
        c->n_args++;
        c->st = PC_AFTER;
        return TC_OK;
    }
    }
    return TC_FAIL;
}
