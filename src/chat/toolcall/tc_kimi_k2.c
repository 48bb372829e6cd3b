/* tc_kimi_k2.c — Kimi K2 tool calls:
 *   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
 *   <|tool_call_argument_begin|>{..}<|tool_call_end|>...<|tool_calls_section_end|>
 * The call id is "functions.NAME:IDX" as written (Kimi's templates echo it
 * back in the history); the name is the part between the prefix and ":".
 * Calls that start without the section marker are accepted. */
#include "chat/toolcall/tc_int.h"

enum { K_LOOP, K_ID, K_ARGS };

static const char ARG[] = "<|tool_call_argument_begin|>";
static int call_cfg;

static int read_kimi(tc_run *r, tc_sec *s)
{
    int rc;
    if (!s->aux) {
        s->aux = 1;
        if (s->start->cfg)
            s->st = K_ID;
    }
    for (;;) {
        switch (s->st) {
        case K_LOOP:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if (!tc_n(r))
                return TC_DONE;
            if ((rc = tc_lit(r, "<|tool_call_begin|>", true)) == TC_DONE) {
                s->st = K_ID;
                continue;
            }
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, "<|tool_call_end|>", true)) == TC_DONE)
                continue;
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, "<|tool_calls_section_end|>", true)) == TC_DONE)
                return TC_DONE;
            if (rc == TC_MORE)
                return TC_MORE;
            return s->n_items ? TC_DONE : TC_FAIL;
        case K_ID: {
            rc = tc_word_then(r, ARG, &s->tmp);
            if (rc != TC_DONE)
                return rc;
            /* functions.NAME:IDX -> NAME */
            const char *id = s->tmp.data;
            size_t idlen = s->tmp.len;
            while (idlen && (id[idlen - 1] == ' ' || id[idlen - 1] == '\t'))
                idlen--;
            const char *name = id;
            size_t nlen = idlen;
            if (nlen > 10 && !memcmp(name, "functions.", 10)) {
                name += 10;
                nlen -= 10;
            }
            const char *colon = memchr(name, ':', nlen);
            if (colon)
                nlen = (size_t)(colon - name);
            tc_call_begin(r, name, nlen, id, idlen);
            tc_commit(r);
            cv_buf_reset(&r->scratch);
            tc_json_init(&s->j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
            s->j_live = true;
            s->st = K_ARGS;
            continue;
        }
        case K_ARGS:
            rc = tc_stream_args(r, &s->j, &r->scratch);
            if (rc == TC_MORE)
                return TC_MORE;
            bool started = tc_json_started(&s->j);
            tc_json_fini(&s->j);
            s->j_live = false;
            if (rc == TC_FAIL && !started)
                tc_call_args(r, "{}", 2);
            tc_call_end(r);
            if (rc == TC_FAIL && started)
                return TC_FAIL;
            s->n_items++;
            s->n_calls++;
            s->st = K_LOOP;
            continue;
        }
        return TC_FAIL;
    }
}

static const tc_start starts[] = {
    { .marker = "<|tool_calls_section_begin|>", .read = read_kimi },
    { .marker = "<|tool_call_begin|>", .read = read_kimi, .cfg = &call_cfg },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "kimi_k2",
    .trigger = "<|tool_calls_section_begin|>",
    .open = "<|tool_calls_section_begin|>",
    .close = "<|tool_calls_section_end|>",
    .call_open = "<|tool_call_begin|>",
    .call_close = "<|tool_call_end|>",
    .specials = (const char *const[]){ "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                       "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_pre = "functions.",
    .name_post = ":",
    .index = true,
    .args_pre = "<|tool_call_argument_begin|>",
};

const cv_tc_format tc_fmt_kimi_k2 = {
    .name = "kimi_k2",
    .syntax = &syntax,
    .summary = "<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}<|tool_call_end|>",
    .aliases = (const char *const[]){ "kimi", "kimi_k2_thinking", NULL },
    .tmpl = { (const char *const[]){ "tool_calls_section_begin", NULL } },
    .tmpl_rank = 90,
    .names = (const char *const[]){ "kimi-k2", "kimi_k2", "moonshot", NULL },
    .starts = starts,
};
