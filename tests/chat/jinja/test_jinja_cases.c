/* test_jinja_cases.c — llama.cpp's chat-template expectations
 * (testdata/templates/render_cases.jsonl): every case marked
 * supported_with_jinja renders byte-identical to expected_jinja, given its
 * messages, bos/eos tokens and add_generation_prompt. Cases whose expected
 * text relies on llama.cpp rewriting the conversation first (a system
 * message merged into the first user turn for templates that reject the
 * system role) are recognised by the template raising on the original
 * conversation and are re-rendered with that same merge, as the README of
 * the fixtures describes. */
#include "chat/chat.h"
#include "test.h"

/* llama.cpp's workaround for templates without a system role: the system
 * content is prepended to the first user message, separated by "\n". */
static const char *system_text(json_t *messages)
{
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        if (!strcmp(json_string_value(json_object_get(m, "role")) ?: "", "system"))
            return json_string_value(json_object_get(m, "content"));
    }
    return NULL;
}

static json_t *merge_system(json_t *messages)
{
    json_t *out = json_array();
    const char *sys = NULL;
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (role && !strcmp(role, "system")) {
            sys = content;
            continue;
        }
        if (sys && role && !strcmp(role, "user")) {
            json_t *c = json_deep_copy(m);
            cv_buf b = { 0 };
            cv_buf_printf(&b, "%s\n%s", sys, content ? content : "");
            json_object_set_new(c, "content", json_string(b.data));
            cv_buf_free(&b);
            json_array_append_new(out, c);
            sys = NULL;
            continue;
        }
        json_array_append(out, m);
    }
    return out;
}

TEST(every_supported_llama_cpp_case_renders_its_expected_text)
{
    cv_buf file = { 0 };
    cv_err err = { 0 };
    CHECK(cv_read_file(test_data("templates/render_cases.jsonl"), &file, 64u << 20, &err) == 0);
    int n_cases = 0, n_ok = 0, n_merged = 0;
    char *save = NULL;
    for (char *line = strtok_r(file.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *c = cv_json_parse(line, strlen(line), &err);
        CHECK_MSG(c != NULL, "bad JSONL line: %s", err.msg);
        if (!c)
            continue;
        if (!json_is_true(json_object_get(c, "supported_with_jinja"))) {
            json_decref(c);
            continue;
        }
        n_cases++;
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *tj = json_object_get(c, "template");
        cv_chat_template *t = NULL;
        cv_err e = { 0 };
        int rc = cv_chat_template_create(json_string_value(tj), json_string_length(tj), name, &t, &e);
        CHECK_MSG(rc == 0, "%s: %s", name, e.msg);
        if (rc == 0) {
            cv_chat_render_opts o = {
                .messages = json_object_get(c, "messages"),
                .add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
                .bos_token = json_string_value(json_object_get(c, "bos_token")),
                .eos_token = json_string_value(json_object_get(c, "eos_token")),
            };
            cv_buf out = { 0 };
            rc = cv_chat_template_render(t, &o, &out, &e);
            json_t *merged = NULL;
            const char *sys = system_text(o.messages);
            if (rc != 0 || (sys && !strstr(out.data ? out.data : "", sys))) {
                /* the template has no system role: retry with llama.cpp's
                 * system-message merge */
                merged = merge_system(o.messages);
                o.messages = merged;
                cv_buf_reset(&out);
                rc = cv_chat_template_render(t, &o, &out, &e);
                n_merged += rc == 0;
            }
            const char *want = json_string_value(json_object_get(c, "expected_jinja"));
            bool same = rc == 0 && want && !strcmp(out.data ? out.data : "", want);
            CHECK_MSG(same, "%s: rc %d (%s)\n  want: %s\n  got:  %s", name, rc, e.msg, want, out.data ? out.data : "");
            n_ok += same;
            json_decref(merged);
            cv_buf_free(&out);
            cv_chat_template_destroy(t);
        }
        json_decref(c);
    }
    printf("render_cases: %d of %d supported cases identical (%d after llama.cpp's system merge)\n", n_ok, n_cases, n_merged);
    CHECK(n_cases >= 30);
    cv_buf_free(&file);
}

int main(void)
{
    test_require_data();
    RUN(every_supported_llama_cpp_case_renders_its_expected_text);
    return test_report();
}
