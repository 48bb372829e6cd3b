/* test_tc_linear.c — parsing is linear in the output length: 1 MiB outputs,
 * fed one byte at a time, for the shapes that could go quadratic (prose full
 * of marker prefixes, one call with a 1 MiB argument, thousands of calls,
 * speculative bare JSON that keeps failing, nested brackets, reasoning that
 * keeps mentioning calls, XML values full of '<'), must cost at most a fixed
 * number of examined bytes per input byte (cv_chat_parse_work). Work, not
 * time, is bounded: the machine is shared and noisy. A quadratic parser would
 * need ~10^12 examinations here, far past any constant bound.
 *
 * The big-argument cases also check that the argument streamed while it was
 * generated (TOOL_ARGS events before the end) rather than at the end. */
#include "tc_harness.h"
#include "test.h"

#define MIB (1u << 20)
#define WORK_PER_BYTE 24

/* Every case runs twice: the format alone, then with output detection on
 * (every other syntax's markers watched too), under the same bound. */
static bool detect;

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"write\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}}}}}]";

typedef struct counter {
    tc_coll c;
    size_t args_before_finish;
    bool finishing;
} counter;

static void count_fn(void *ud, const cv_chat_event *ev)
{
    counter *k = ud;
    if (ev->type == CV_CHAT_TOOL_ARGS && !k->finishing)
        k->args_before_finish += ev->text.len;
    tc_coll_fn(&k->c, ev);
}

static void repeat(cv_buf *b, const char *s, size_t until)
{
    size_t n = strlen(s);
    while (b->len < until)
        cv_buf_append(b, s, n);
}

/* Feeds text byte by byte; checks the work bound; returns the collector. */
static void run(const char *name, const char *format, const char *opener, cv_buf *text, counter *k)
{
    json_t *tools = json_loads(TOOLS, 0, NULL);
    cv_chat_parse_opts o = { .format = cv_tc_format_find(format), .tools = tools, .detect = detect, .id_seed = 1 };
    if (opener)
        o.reasoning_open = cv_str_of(opener);
    memset(k, 0, sizeof *k);
    tc_coll_init(&k->c);
    cv_chat_parse *p;
    cv_err err = { 0 };
    CHECK(cv_chat_parse_create(&o, count_fn, k, &p, &err) == 0);
    for (size_t i = 0; i < text->len; i++)
        cv_chat_parse_feed(p, text->data + i, 1, &err);
    k->finishing = true;
    cv_chat_parse_finish(p, &err);
    uint64_t work = cv_chat_parse_work(p);
    cv_chat_parse_destroy(p);
    printf("  %-34s %-9s %8zu bytes, %9llu examined (%.2f per byte)\n", name, detect ? "detect" : "", text->len,
           (unsigned long long)work, (double)work / (double)text->len);
    CHECK_MSG(work <= (uint64_t)WORK_PER_BYTE * text->len, "%s: %llu bytes examined for %zu input bytes", name,
              (unsigned long long)work, text->len);
    CHECK_MSG(!k->c.bad[0], "%s: %s", name, k->c.bad);
    json_decref(tools);
}

TEST(prose_full_of_marker_prefixes)
{
    cv_buf t = { 0 };
    repeat(&t, "a <b> c < tool_call <tool_ [TOOL d { e [f ``` <|tool <｜tool ]<]mini Action functools\n", MIB);
    counter k;
    run("hermes prose", "hermes", NULL, &t, &k);
    CHECK(k.c.res.content.len > MIB / 2);
    tc_coll_fini(&k.c);
    run("llama3 prose", "llama3_json", NULL, &t, &k);
    tc_coll_fini(&k.c);
    run("harmony prose", "gpt_oss_harmony", NULL, &t, &k);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

TEST(one_call_with_a_one_mebibyte_argument_streams)
{
    static const struct {
        const char *name, *format, *head, *tail;
    } rows[] = {
        { "hermes json", "hermes", "<tool_call>{\"name\": \"write\", \"arguments\": {\"path\": \"a\", \"content\": \"",
          "\"}}</tool_call>" },
        { "qwen3 xml", "qwen3_coder_xml", "<tool_call>\n<function=write>\n<parameter=content>\n",
          "\n</parameter>\n</function>\n</tool_call>" },
        { "kimi", "kimi_k2",
          "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0<|tool_call_argument_begin|>{\"content\": \"",
          "\"}<|tool_call_end|><|tool_calls_section_end|>" },
        { "gemma4", "gemma4", "<|tool_call>call:write{content:<|\"|>", "<|\"|>}<tool_call|>" },
        { "pythonic lfm2", "lfm2", "<|tool_call_start|>[write(content='", "')]<|tool_call_end|>" },
        { "dsml", "deepseek_dsml",
          "<｜DSML｜function_calls><｜DSML｜invoke name=\"write\"><｜DSML｜parameter name=\"content\" string=\"true\">",
          "</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        cv_buf t = { 0 };
        cv_buf_puts(&t, rows[i].head);
        /* code with '<', quotes escaped per syntax kept out: letters, spaces, '<', newlines */
        repeat(&t, "if (a < b) { x = y; } // <note>\n", MIB);
        cv_buf_puts(&t, rows[i].tail);
        counter k;
        run(rows[i].name, rows[i].format, NULL, &t, &k);
        CHECK_MSG(k.c.res.n_calls == 1, "%s: %d calls", rows[i].name, k.c.res.n_calls);
        if (k.c.res.n_calls == 1)
            CHECK_MSG(strlen(k.c.res.calls[0].arguments) > MIB, "%s: arguments %zu bytes", rows[i].name,
                      strlen(k.c.res.calls[0].arguments));
        CHECK_MSG(k.args_before_finish > MIB - 4096, "%s: only %zu argument bytes streamed before the end",
                  rows[i].name, k.args_before_finish);
        tc_coll_fini(&k.c);
        cv_buf_free(&t);
    }
}

TEST(thousands_of_small_calls)
{
    cv_buf t = { 0 };
    repeat(&t, "<tool_call>{\"name\": \"write\", \"arguments\": {\"n\": \"7\", \"path\": \"p\"}}</tool_call>\n", MIB);
    counter k;
    run("hermes many calls", "hermes", NULL, &t, &k);
    CHECK_EQ_INT(k.c.res.n_calls, CV_TC_MAX_CALLS); /* the rest are read and dropped */
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    repeat(&t, "[TOOL_CALLS]write[ARGS]{\"n\": 1}", MIB);
    run("mistral many calls", "mistral_v11", NULL, &t, &k);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

TEST(speculation_that_keeps_failing)
{
    cv_buf t = { 0 };
    repeat(&t, "{\"name\": \"write\", \"parameters\": {\"x\": [1, 2, {\"y\": ", MIB); /* never closes */
    counter k;
    run("llama3 nested bare json", "llama3_json", NULL, &t, &k);
    CHECK_EQ_INT(k.c.res.n_calls, 0);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    repeat(&t, "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{", MIB);
    run("llama3 open braces", "llama3_json", NULL, &t, &k);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    cv_buf_puts(&t, "[");
    repeat(&t, "[write(a=[[[[[[[[[[[[[[[[[[[[[[[[", MIB);
    run("pythonic nested lists", "pythonic", NULL, &t, &k);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    repeat(&t, "<tool_call> mentioned again ", MIB);
    run("hermes marker in prose", "hermes", NULL, &t, &k);
    CHECK(k.c.res.content.len > MIB / 2);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

TEST(reasoning_that_keeps_mentioning_calls)
{
    cv_buf t = { 0 };
    repeat(&t, "Maybe <tool_call>{\"name\": \"write\", \"arguments\": {}}</tool_call> no, think more. ", MIB);
    cv_buf_puts(&t, "</think>done");
    counter k;
    run("qwen reasoning with calls", "hermes", "<think>\n", &t, &k);
    CHECK_EQ_INT(k.c.res.n_calls, 0);
    CHECK(k.c.res.reasoning.len > MIB / 2);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

TEST(xml_values_full_of_tag_prefixes)
{
    cv_buf t = { 0 };
    cv_buf_puts(&t, "<tool_call>\n<function=write>\n<parameter=path>\n");
    repeat(&t, "</param </paramete <parameter <function </tool <", MIB);
    cv_buf_puts(&t, "\n</parameter>\n</function>\n</tool_call>");
    counter k;
    run("qwen3 value of tag prefixes", "qwen3_coder_xml", NULL, &t, &k);
    CHECK_EQ_INT(k.c.res.n_calls, 1);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    cv_buf_puts(&t, "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"write\">]<]minimax[>[<n>");
    repeat(&t, "]<]minimax[>[<x>1]<]minimax[>[</x>", MIB / 4);
    counter k2;
    run("minimax m3 nested value", "minimax_m3", NULL, &t, &k2);
    tc_coll_fini(&k2.c);
    cv_buf_free(&t);
}

TEST(harmony_with_many_messages)
{
    cv_buf t = { 0 };
    repeat(&t, "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.write "
               "<|constrain|>json<|message|>{\"n\": 1}<|call|>",
           MIB);
    counter k;
    run("harmony messages", "gpt_oss_harmony", NULL, &t, &k);
    CHECK_EQ_INT(k.c.res.n_calls, CV_TC_MAX_CALLS);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

/* What output detection adds: bare shapes that are never calls (in a
 * row's content, and in the content of the rows that read the whole stream
 * themselves), markers of every syntax in prose, and a reply that holds its
 * text back (Harmony's text form) until the hold bound releases it. */
TEST(detection_shapes_that_keep_failing)
{
    static const char *const shapes =
        "{\"name\": \"write\", \"arguments\": {\"nope\": 1}} [{\"name\": \"x\"}] ```json\n{\"a\": [1, {\"b\"";
    static const struct {
        const char *name, *format, *head;
    } rows[] = {
        { "json shapes that do not fit", "hermes", "" },
        { "json shapes in harmony's final", "gpt_oss_harmony", "<|channel|>final<|message|>" },
        { "json shapes in functionary's all", "functionary_v3_2", "all\n" },
    };
    cv_buf t = { 0 };
    counter k;
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        cv_buf_puts(&t, rows[i].head);
        repeat(&t, shapes, MIB);
        run(rows[i].name, rows[i].format, NULL, &t, &k);
        CHECK_EQ_INT(k.c.res.n_calls, 0);
        tc_coll_fini(&k.c);
        cv_buf_free(&t);
    }
    repeat(&t, "<|channel|x [TOOL_CALL <|tool_calls_section <｜tool▁call [THIN <seed:thin functools] Action: ", MIB);
    run("every syntax's marker prefixes", "hermes", NULL, &t, &k);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
    cv_buf_puts(&t, "analysis ");
    repeat(&t, "thinking about assistant and <| tokens without a seam ", MIB);
    run("harmony text form never confirmed", "hermes", NULL, &t, &k);
    CHECK(k.c.res.content.len > MIB / 2);
    tc_coll_fini(&k.c);
    cv_buf_free(&t);
}

int main(void)
{
    for (int d = 0; d < 2; d++) {
        detect = d;
        RUN(prose_full_of_marker_prefixes);
        RUN(one_call_with_a_one_mebibyte_argument_streams);
        RUN(thousands_of_small_calls);
        RUN(speculation_that_keeps_failing);
        RUN(reasoning_that_keeps_mentioning_calls);
        RUN(xml_values_full_of_tag_prefixes);
        RUN(harmony_with_many_messages);
        RUN(detection_shapes_that_keep_failing);
    }
    return test_report();
}
