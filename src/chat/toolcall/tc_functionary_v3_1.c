/* tc_functionary_v3_1.c — MeetKai Functionary v3.1 (Llama 3.1 based) tool
 * calls: <function=NAME>{..}</function>, JSON arguments after the name tag.
 * (The same <function= prefix as Qwen3-Coder, but no <parameter=> tags.) */
#include "chat/toolcall/tc_int.h"

enum { F_OPEN, F_NAME, F_ARGS, F_END };

static int read_fn(tc_run *r, tc_sec *s)
{
    int rc;
    for (;;) {
        switch (s->st) {
        case F_OPEN:
            rc = tc_lit(r, "<function=", true);
            if (rc != TC_DONE)
                return rc;
            cv_buf_reset(&s->tmp);
            s->st = F_NAME;
            continue;
        case F_NAME: {
            const char *p = tc_p(r);
            size_t n = tc_n(r), i = 0;
            while (i < n && p[i] != '>' && p[i] != '\n' && p[i] != '<' && i <= CV_TC_MAX_NAME)
                i++;
            r->work += i + 1;
            if (i > CV_TC_MAX_NAME)
                return TC_FAIL;
            if (i == n)
                return r->eof ? TC_FAIL : TC_MORE;
            if (p[i] != '>' || !i)
                return TC_FAIL;
            cv_buf_append(&s->tmp, p, i);
            tc_eat(r, i + 1);
            s->st = F_ARGS;
            tc_call_begin(r, s->tmp.data, s->tmp.len, NULL, 0);
            tc_commit(r);
            cv_buf_reset(&r->scratch);
            tc_json_init(&s->j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
            s->j_live = true;
            continue;
        }
        case F_ARGS:
            rc = tc_stream_args(r, &s->j, &r->scratch);
            if (rc == TC_MORE)
                return TC_MORE;
            if (rc == TC_FAIL && !tc_json_started(&s->j))
                tc_call_args(r, "{}", 2);
            tc_call_end(r);
            if (rc == TC_FAIL)
                return TC_FAIL;
            s->n_calls++;
            s->st = F_END;
            continue;
        case F_END:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            rc = tc_lit(r, "</function>", true);
            return rc == TC_MORE ? TC_MORE : TC_DONE;
        }
        return TC_FAIL;
    }
}

static const tc_start starts[] = {
    { .marker = "<function=", .read = read_fn, .keep = true },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "functionary_v3_1",
    .trigger = "<function=",
    .sep = "\n",
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "<function=",
    .name_post = ">",
    .args_post = "</function>",
};

const cv_tc_format tc_fmt_functionary_v3_1 = {
    .name = "functionary_v3_1",
    .syntax = &syntax,
    .summary = "<function=NAME>{..}</function>",
    .aliases = (const char *const[]){ "functionary31", "functionary-v3.1", NULL },
    .tmpl = { (const char *const[]){ "<function=", "<|python_tag|>", NULL } },
    .tmpl_rank = 86,
    .names = (const char *const[]){ "functionary-medium-v3.1", "functionary-small-v3.1", "functionary-v3.1", NULL },
    .starts = starts,
    .flags = TC_F_NO_FALLBACK,
};
