/* tc_deepseek_v3.c — DeepSeek V3 / R1 tool calls, and the reader shared
 * with V3.1 (tc_deepseek_v31.c):
 *   V3/R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
 *          ```json\n{..}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
 *   V3.1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}
 *          <｜tool▁call▁end｜><｜tool▁calls▁end｜>
 * One reader tells them apart by the word before <｜tool▁sep｜>. A missing
 * <｜tool▁call▁begin｜> (seen in R1 distills) is tolerated. Text after the
 * calls is dropped, as the model's own parsers do. */
#include "chat/toolcall/tc_int.h"

/* D_PRE and D_POST read a fence, D_OPEN and D_END what follows it: each
 * literal is read in a state of its own, so input that ends after one
 * never reads it twice when more comes */
enum { D_LOOP, D_HEAD, D_NAME, D_PRE, D_OPEN, D_ARGS, D_POST, D_END };

static const char CALL[] = "<｜tool▁call▁begin｜>";
static const char SEP[] = "<｜tool▁sep｜>";
static const char CALL_END[] = "<｜tool▁call▁end｜>";
static const char CALLS_END[] = "<｜tool▁calls▁end｜>";

static int call_start_cfg;

/* A start whose cfg is set begins at a call's head (<｜tool▁call▁begin｜>). */
int tc_read_deepseek(tc_run *r, tc_sec *s)
{
    int rc;
    if (!s->aux) {
        s->aux = 1;
        if (s->start->cfg)
            s->st = D_HEAD;
    }
    for (;;) {
        switch (s->st) {
        case D_LOOP:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if (!tc_n(r))
                return TC_DONE;
            if ((rc = tc_lit(r, CALL, true)) == TC_DONE) {
                s->st = D_HEAD;
                continue;
            }
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, CALLS_END, true)) == TC_DONE)
                return TC_DONE;
            if (rc == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, CALL_END, true)) == TC_DONE)
                continue;
            if (rc == TC_MORE)
                return TC_MORE;
            if (s->n_items)
                return TC_DONE;
            s->st = D_HEAD; /* the call marker is missing: read the call anyway */
            continue;
        case D_HEAD: {
            /* the word before <｜tool▁sep｜>: "function" (V3) or the name (V3.1) */
            rc = tc_word_then(r, SEP, &s->tmp);
            if (rc != TC_DONE)
                return rc;
            if (s->tmp.len == 8 && !memcmp(s->tmp.data, "function", 8)) {
                cv_buf_reset(&s->tmp);
                s->st = D_NAME;
            } else {
                s->st = D_PRE;
            }
            continue;
        }
        case D_NAME: {
            const char *p = tc_p(r);
            size_t n = tc_n(r), i = 0;
            while (i < n && p[i] != '\n' && p[i] != '`' && p[i] != '{' && p[i] != '<' && s->tmp.len + i < CV_TC_MAX_NAME)
                i++;
            r->work += i + 1;
            cv_buf_append(&s->tmp, p, i);
            tc_eat(r, i);
            if (s->tmp.len >= CV_TC_MAX_NAME)
                return TC_FAIL; /* at the same byte in any chunking */
            if (i == n && !r->eof)
                return TC_MORE;
            s->st = D_PRE;
            continue;
        }
        case D_PRE:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, "```json", true)) == TC_MORE)
                return TC_MORE;
            if (rc == TC_FAIL && (rc = tc_lit(r, "```", true)) == TC_MORE)
                return TC_MORE;
            s->st = D_OPEN;
            continue;
        case D_OPEN:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            s->aux = 2 + tc_call_begin(r, s->tmp.data, s->tmp.len, NULL, 0);
            tc_commit(r);
            if (!tc_n(r) || *tc_p(r) != '{') {
                /* no arguments: an empty object */
                tc_call_args(r, "{}", 2);
                tc_call_end(r);
                s->n_items++;
                s->st = D_POST;
                continue;
            }
            cv_buf_reset(&r->scratch);
            tc_json_init(&s->j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
            s->j_live = true;
            s->st = D_ARGS;
            continue;
        case D_ARGS:
            rc = tc_stream_args(r, &s->j, &r->scratch);
            if (rc == TC_MORE)
                return TC_MORE;
            tc_json_fini(&s->j);
            s->j_live = false;
            tc_call_end(r);
            if (rc == TC_FAIL)
                return TC_FAIL;
            s->n_items++;
            s->n_calls++;
            s->st = D_POST;
            continue;
        case D_POST:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, "```", true)) == TC_MORE)
                return TC_MORE;
            s->st = D_END;
            continue;
        case D_END:
            if (tc_ws(r) == TC_MORE)
                return TC_MORE;
            if ((rc = tc_lit(r, CALL_END, true)) == TC_MORE)
                return TC_MORE;
            s->st = D_LOOP;
            continue;
        }
        return TC_FAIL;
    }
}

static const tc_start starts[] = {
    { .marker = "<｜tool▁calls▁begin｜>", .read = tc_read_deepseek },
    { .marker = "<｜tool▁call▁begin｜>", .read = tc_read_deepseek, .cfg = &call_start_cfg },
    { 0 },
};

/* How a forced call is written (cv_tool_syntax, grammar.h): the grammar
 * writes it and this row's reader reads it back (test_grammar_tools.c). */
static const cv_tool_syntax syntax = {
    .name = "deepseek_v3",
    .trigger = "<｜tool▁calls▁begin｜>",
    .open = "<｜tool▁calls▁begin｜>",
    .close = "<｜tool▁calls▁end｜>",
    .call_open = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
    .call_close = "<｜tool▁call▁end｜>",
    .sep = "\n",
    .specials = (const char *const[]){ "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                       "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", NULL },
    .name_as = CV_TS_NAME_BARE,
    .name_post = "\n```json\n",
    .args_post = "\n```",
};

const cv_tc_format tc_fmt_deepseek_v3 = {
    .name = "deepseek_v3",
    .syntax = &syntax,
    .summary = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{..}\\n```<｜tool▁call▁end｜>",
    .aliases = (const char *const[]){ "deepseek_r1", "deepseek", NULL },
    .tmpl = { (const char *const[]){ "tool▁call▁begin", "```json", NULL } },
    .tmpl_rank = 85,
    .names = (const char *const[]){ "deepseek-r1", "deepseek-v3", "deepseek_r1", "deepseek_v3", NULL },
    .starts = starts,
    .flags = TC_F_DRAIN,
};
