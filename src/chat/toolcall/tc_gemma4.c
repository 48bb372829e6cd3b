/* tc_gemma4.c — Gemma 4 tool calls and thinking:
 *   <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,flags:[true]}<tool_call|>
 * Keys are bare and strings sit between <|"|> tokens (TJ_GEMMA in the JSON
 * reader). Thinking is a "thought" channel, <|channel>thought ... <channel|>;
 * stray channel tokens around the answer are removed. */
#include "chat/toolcall/tc_int.h"

enum { G_CALL, G_NAME, G_BRACE, G_ARGS, G_END };

static int read_gemma(tc_run *r, tc_sec *s)
{
    int rc;
    for (;;) {
        switch (s->st) {
        case G_CALL:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            rc = tc_lit(r, "call:", true);
            if (rc != TC_DONE)
                return rc;
            s->st = G_NAME;
            continue;
        case G_NAME: {
            long len = tc_ident(r, 0, true);
            if (len < 0)
                return TC_MORE;
            if (len == 0)
                return TC_FAIL;
            cv_buf_reset(&s->tmp);
            cv_buf_append(&s->tmp, tc_p(r), (size_t)len);
            tc_eat(r, (size_t)len);
            s->st = G_BRACE;
            continue;
        }
        case G_BRACE:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if (!tc_n(r) || *tc_p(r) != '{')
                return TC_FAIL;
            tc_call_begin(r, s->tmp.data, s->tmp.len, NULL, 0);
            tc_commit(r);
            cv_buf_reset(&r->scratch);
            tc_json_init(&s->j, TJ_GEMMA | TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
            s->j_live = true;
            s->st = G_ARGS;
            continue;
        case G_ARGS:
            rc = tc_stream_args(r, &s->j, &r->scratch);
            if (rc == TC_MORE)
                return TC_MORE;
            tc_call_end(r);
            if (rc == TC_FAIL)
                return TC_FAIL;
            s->n_calls++;
            s->st = G_END;
            continue;
        case G_END:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            rc = tc_lit(r, "<tool_call|>", true);
            if (rc == TC_MORE)
                return TC_MORE;
            return TC_DONE;
        }
        return TC_FAIL;
    }
}

static const tc_start starts[] = {
    { .marker = "<|tool_call>", .read = read_gemma },
    { 0 },
};

static const tc_reason reason[] = { { .open = "<|channel>thought", .close = "<channel|>" }, { 0 } };

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "gemma4",
    .trigger = "<|tool_call>",
    .call_open = "<|tool_call>call:",
    .call_close = "<tool_call|>",
    .specials = (const char *const[]){ "<|tool_call>", "<tool_call|>", NULL },
    .name_as = CV_TS_NAME_BARE,
};

const cv_tc_format tc_fmt_gemma4 = {
    .name = "gemma4",
    .syntax = &syntax,
    .summary = "<|tool_call>call:NAME{k:<|\"|>v<|\"|>}<tool_call|>",
    .aliases = (const char *const[]){ "gemma-4", NULL },
    .tmpl = { (const char *const[]){ "<|tool_call>", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "gemma-4", "gemma4", NULL },
    .reason = reason,
    .starts = starts,
    .drops = (const char *const[]){ "<channel|>", "<|channel>", "<turn|>", NULL },
};
