/* test_chat_prompt.c — a model's prompt (src/chat/prompt.c), the one path
 * from a neutral request to prompt text and tokens: the template's
 * variables reach it, a strict template gets the strict form (and tools []
 * only when the strict form alone still raises), a conversation that is not
 * an array is refused without a retry, the reasoning opener is reported,
 * BOS is written once whether the template writes it or not, BOS/EOS text
 * comes from the tokenizer, the file or the caller, a template that does
 * not compile fails or falls back to ChatML as asked, and the parser
 * options follow the request. Vocabularies from ../shared/testdata/vocab. */
#include <unistd.h>

#include "chat/chat.h"
#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static cv_chat_prompt *make(const char *tmpl, const cv_tok *tok, const char *bos)
{
    cv_chat_prompt_opts o = { .template_src = cv_str_of(tmpl), .tok = tok, .bos_token = bos, .name = "test" };
    cv_chat_prompt *p = NULL;
    cv_err err = { 0 };
    CHECK_MSG(cv_chat_prompt_create(&o, &p, &err) == 0, "%s: %s", tmpl, err.msg);
    return p;
}

/* A request with the messages given as JSON. */
static void request(cv_chat_request *r, const char *messages)
{
    cv_chat_request_init(r);
    json_decref(r->messages);
    r->messages = json_loads(messages, 0, NULL);
    CHECK(r->messages != NULL);
}

static const char *render(const cv_chat_prompt *p, const cv_chat_request *r, cv_buf *out, cv_buf *opener)
{
    cv_err err = { 0 };
    cv_buf_reset(out);
    int rc = cv_chat_prompt_render(p, r, NULL, out, opener, &err);
    CHECK_MSG(rc == 0, "render: %s", err.msg);
    return rc ? "" : out->data;
}

TEST(the_templates_variables_come_from_the_request)
{
    cv_chat_prompt *p = make("{{ enable_thinking }}|{{ reasoning_effort }}|{{ x }}|{{ bos_token }}", NULL, "<B>");
    cv_chat_request r;
    request(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]");
    r.thinking = CV_THINKING_OFF;
    r.reasoning_effort = cv_xstrdup("low");
    r.template_kwargs = json_loads("{\"x\": 7}", 0, NULL);
    cv_buf out = { 0 };
    CHECK_EQ_STR(render(p, &r, &out, NULL), "False|low|7|<B>");
    cv_buf_free(&out);
    cv_chat_request_fini(&r);
    cv_chat_prompt_destroy(p);
}

TEST(a_strict_template_gets_the_strict_form_and_tools_only_when_it_needs_them)
{
    /* raises on two user turns in a row; says TOOLS when tools is not none */
    static const char strict[] =
        "{%- for m in messages -%}{%- if loop.index0 > 0 and m.role == messages[loop.index0 - 1].role -%}"
        "{{ raise_exception('roles must alternate') }}{%- endif -%}[{{ m.role }}]{{ m.content }}{%- endfor -%}"
        "{%- if tools is not none %}TOOLS{% endif -%}";
    cv_chat_prompt *p = make(strict, NULL, NULL);
    cv_chat_request r;
    request(&r, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]");
    cv_buf out = { 0 };
    CHECK_EQ_STR(render(p, &r, &out, NULL), "[user]a\n\nb");
    cv_chat_prompt_destroy(p);
    /* a loop over tools that raises on None: the strict form, then tools [] */
    p = make("{%- for t in tools -%}{{ t }}{%- endfor -%}{{ messages[0].content }}", NULL, NULL);
    CHECK_EQ_STR(render(p, &r, &out, NULL), "a\n\nb");
    cv_chat_prompt_destroy(p);
    /* what every form raises on is the first error */
    p = make("{{ raise_exception('never') }}", NULL, NULL);
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_chat_prompt_render(p, &r, NULL, &out, NULL, &err), CV_EINVAL);
    CHECK_MSG(strstr(err.msg, "chat template: ") == err.msg && strstr(err.msg, "never"), "%s", err.msg);
    /* a conversation that is not an array is refused as such, not retried */
    json_decref(r.messages);
    r.messages = json_object();
    CHECK_EQ_INT(cv_chat_prompt_render(p, &r, NULL, &out, NULL, &err), CV_EINVAL);
    CHECK_MSG(strstr(err.msg, "messages must be an array"), "%s", err.msg);
    cv_buf_free(&out);
    cv_chat_request_fini(&r);
    cv_chat_prompt_destroy(p);
}

TEST(the_reasoning_opener_the_prompt_leaves_open_is_reported)
{
    /* (a literal's last newline is trimmed, as in Jinja2: an expression) */
    cv_chat_prompt *p = make("{{ '<|im_start|>assistant\\n<think>\\n' }}", NULL, NULL);
    CHECK(cv_chat_prompt_thinks(p) == false); /* the template never closes one */
    cv_chat_request r;
    request(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]");
    cv_buf out = { 0 }, opener = { 0 };
    render(p, &r, &out, &opener);
    CHECK_EQ_STR(opener.data, "<think>\n");
    cv_chat_prompt_destroy(p);
    p = make("{{ '<think>\\n\\n</think>\\n\\n' }}", NULL, NULL);
    CHECK(cv_chat_prompt_thinks(p));
    render(p, &r, &out, &opener);
    CHECK_EQ_INT(opener.len, 0);
    cv_buf_free(&out);
    cv_buf_free(&opener);
    cv_chat_request_fini(&r);
    cv_chat_prompt_destroy(p);
}

TEST(bos_is_written_once_whether_the_template_writes_it_or_not)
{
    cv_tok *tok = NULL;
    if (cv_tok_load_file(test_data("vocab/ggml-vocab-llama-spm.gguf"), &tok, NULL))
        TEST_SKIP("%s does not load", test_data("vocab/ggml-vocab-llama-spm.gguf"));
    const int32_t bos = cv_tok_bos(tok);
    CHECK(cv_tok_adds_bos(tok) && bos >= 0);
    static const char *const tmpls[] = { "{{ bos_token }}[INST] {{ messages[0].content }} [/INST]",
                                         "[INST] {{ messages[0].content }} [/INST]" };
    cv_chat_request r;
    request(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]");
    for (size_t i = 0; i < CV_ARRAY_LEN(tmpls); i++) {
        cv_chat_prompt *p = make(tmpls[i], tok, NULL);
        int32_t *ids = NULL, n = 0;
        cv_err err = { 0 };
        CHECK_MSG(cv_chat_prompt_encode(p, &r, &ids, &n, NULL, &err) == 0, "%s", err.msg);
        CHECK_MSG(n > 2 && ids[0] == bos && ids[1] != bos, "template %zu: BOS first and once", i);
        free(ids);
        cv_chat_prompt_destroy(p);
    }
    /* the BOS text templates see is the tokenizer's; a raw text prompt gets
     * BOS as the vocabulary says */
    cv_chat_prompt *p = make("{{ bos_token }}|{{ eos_token }}", tok, NULL);
    cv_buf out = { 0 };
    CHECK_EQ_STR(render(p, &r, &out, NULL), "<s>|</s>");
    int32_t *ids = NULL, n = 0;
    CHECK(cv_chat_encode_text(tok, cv_str_of("hi"), &ids, &n, NULL) == 0);
    CHECK(n >= 2 && ids[0] == bos);
    free(ids);
    CHECK_EQ_INT(cv_chat_encode_text(NULL, cv_str_of("hi"), &ids, &n, NULL), CV_EINVAL);
    cv_buf_free(&out);
    cv_chat_prompt_destroy(p);
    cv_chat_request_fini(&r);
    cv_tok_destroy(tok);
}

TEST(a_file_without_a_usable_tokenizer_gives_its_token_strings)
{
    char path[] = "/tmp/corvid_prompt_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0);
    close(fd);
    cv_gguf_writer *w = cv_gguf_writer_create();
    cv_gguf_writer_set_str(w, "tokenizer.chat_template", CV_STR("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"));
    cv_str toks[3] = { CV_STR("<unk>"), CV_STR("<|B|>"), CV_STR("<|E|>") };
    cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 3, toks);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    cv_err err = { 0 };
    CHECK_MSG(cv_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    cv_gguf_writer_destroy(w);
    cv_gguf *g = NULL;
    CHECK(cv_gguf_open(path, &g, &err) == 0);
    cv_chat_prompt_opts o = { .gguf = g, .name = path };
    cv_chat_prompt *p = NULL;
    CHECK(cv_chat_prompt_create(&o, &p, &err) == 0);
    cv_chat_request r;
    request(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]");
    cv_buf out = { 0 };
    if (p)
        CHECK_EQ_STR(render(p, &r, &out, NULL), "<|B|>hi<|E|>");
    cv_buf_free(&out);
    cv_chat_request_fini(&r);
    cv_chat_prompt_destroy(p);
    cv_gguf_close(g);
    unlink(path);
}

TEST(a_template_that_does_not_compile_fails_or_falls_back_to_chatml_as_asked)
{
    cv_chat_prompt_opts o = { .template_src = cv_str_of("{% for x in %}"), .name = "bad" };
    cv_chat_prompt *p = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_chat_prompt_create(&o, &p, &err), CV_EINVAL);
    CHECK(p == NULL && strstr(err.msg, "line 1"));
    o.chatml_on_error = true;
    CHECK(cv_chat_prompt_create(&o, &p, &err) == 0);
    CHECK(p && cv_chat_prompt_is_chatml(p));
    cv_chat_prompt_destroy(p);
}

TEST(the_syntax_comes_from_the_template_then_the_name)
{
    cv_chat_prompt_opts o = { .template_src = cv_str_of("{{ '<tool_call>' }}{{ tool_call.arguments | tojson }}"),
                              .model_name = cv_str_of("Qwen3-Coder-30B") };
    cv_chat_prompt *p = NULL;
    CHECK(cv_chat_prompt_create(&o, &p, NULL) == 0);
    const char *why = NULL;
    const cv_tc_format *f = cv_chat_prompt_format(p, &why);
    CHECK_EQ_STR(why, "template");
    CHECK(f == cv_tc_detect(o.template_src, (cv_str){ 0 }));
    cv_chat_prompt_destroy(p);
    o.template_src = (cv_str){ 0 };
    CHECK(cv_chat_prompt_create(&o, &p, NULL) == 0);
    f = cv_chat_prompt_format(p, &why);
    CHECK_EQ_STR(why, "name");
    CHECK_EQ_STR(cv_tc_format_name(f), "qwen3_coder_xml");
    cv_chat_prompt_destroy(p);
}

TEST(parser_options_follow_the_request)
{
    cv_chat_request r;
    request(&r, "[]");
    json_array_append_new(r.tools, json_loads("{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", 0, NULL));
    r.tool_choice = CV_TOOL_CHOICE_NONE;
    r.parallel_tool_calls = false;
    r.response_format = json_loads("{\"type\":\"json_schema\"}", 0, NULL);
    cv_chat_parse_opts o;
    cv_chat_request_parse_opts(&r, cv_tc_format_find("hermes"), cv_str_of("<think>\n"), &o);
    CHECK(o.format == cv_tc_format_find("hermes") && o.detect && o.tools == r.tools);
    CHECK(o.tool_choice_none && o.no_parallel_calls && o.json_response && !o.reasoning_inline);
    CHECK(o.reasoning_open.len == 8 && !o.id_fn);
    json_decref(r.response_format);
    r.response_format = json_loads("{\"type\":\"text\"}", 0, NULL);
    r.tool_choice = CV_TOOL_CHOICE_AUTO;
    cv_chat_request_parse_opts(&r, NULL, (cv_str){ 0 }, &o);
    CHECK(o.format != NULL && !o.tool_choice_none && !o.json_response && !o.reasoning_open.len);
    cv_chat_request_fini(&r);
}

TEST(strict_messages_merge_systems_and_user_runs_and_map_call_ids_consistently)
{
    json_t *m = json_loads("[{\"role\":\"system\",\"content\":\"a\"},{\"role\":\"system\",\"content\":\"b\"},"
                           "{\"role\":\"user\",\"content\":\"c\"},{\"role\":\"user\",\"content\":\"d\"},"
                           "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_abc\",\"type\":"
                           "\"function\",\"function\":{\"name\":\"f\",\"arguments\":{}}},{\"id\":\"A1b2C3d4E\","
                           "\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":{}}}]},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"call_abc\",\"content\":\"r1\"},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"A1b2C3d4E\",\"content\":\"r2\"},"
                           "{\"role\":\"system\",\"content\":\"late\"}]",
                           0, NULL);
    CHECK(m != NULL);
    json_t *s = cv_chat_strict_messages(m);
    CHECK_EQ_INT(json_array_size(s), 6);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(s, 0), "content")), "a\n\nb");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(s, 1), "content")), "c\n\nd");
    json_t *calls = json_object_get(json_array_get(s, 2), "tool_calls");
    const char *id0 = json_string_value(json_object_get(json_array_get(calls, 0), "id"));
    CHECK(id0 && strlen(id0) == 9);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(s, 3), "tool_call_id")), id0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(calls, 1), "id")), "A1b2C3d4E"); /* already fine */
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(s, 4), "tool_call_id")), "A1b2C3d4E");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(s, 5), "content")), "late"); /* not merged */
    /* the input is untouched */
    CHECK_EQ_INT(json_array_size(m), 8);
    json_decref(s);
    json_decref(m);
}

int main(void)
{
    test_require_data();
    cv_log_set_level(CV_LOG_ERROR);
    RUN(the_templates_variables_come_from_the_request);
    RUN(a_strict_template_gets_the_strict_form_and_tools_only_when_it_needs_them);
    RUN(the_reasoning_opener_the_prompt_leaves_open_is_reported);
    RUN(bos_is_written_once_whether_the_template_writes_it_or_not);
    RUN(a_file_without_a_usable_tokenizer_gives_its_token_strings);
    RUN(a_template_that_does_not_compile_fails_or_falls_back_to_chatml_as_asked);
    RUN(the_syntax_comes_from_the_template_then_the_name);
    RUN(parser_options_follow_the_request);
    RUN(strict_messages_merge_systems_and_user_runs_and_map_call_ids_consistently);
    return test_report();
}
