/* test_server_templates.c — the neutral conversations the wire files make
 * from real agent traffic render with real models' chat templates. Every
 * POST in testdata/clients is translated (as the server does) and rendered
 * through the production prompt path (cv_chat_prompt_render, what the
 * backend encodes with) with the production chat templates of the model
 * families agents run (testdata/templates), tools included, with a
 * generation prompt: a strict template that raises (roles must alternate,
 * one system message first, Mistral's 9-character call ids, a tools loop
 * over None) gets the strict form. Every render must succeed. Then the
 * template variables the prompt adds: every wire's reasoning switch
 * reaches gpt-oss's Harmony template as one of its three efforts, and
 * Gemma 3's template folds the system prompt into the first user turn from
 * every wire. */
#include <dirent.h>

#include "test.h"

#include "chat/chat.h"
#include "server/api.h"

static const char *templates[] = {
    "Qwen-Qwen3-0.6B.jinja",
    "Qwen3-Coder.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen3.5-4B.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "meta-llama-Llama-3.3-70B-Instruct.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "openai-gpt-oss-120b.jinja",
    "GLM-4.6.jinja",
    "moonshotai-Kimi-K2.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "google-gemma-4-31B-it.jinja",
    "ibm-granite-granite-4.0.jinja",
    "MiniMax-M2.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
};

typedef int (*parse_fn)(json_t *body, cv_chat_request *r, cv_err *err);
static int parse_chat(json_t *b, cv_chat_request *r, cv_err *e) { return cv_openai_chat_parse(b, r, e); }
static int parse_resp(json_t *b, cv_chat_request *r, cv_err *e) { return cv_openai_responses_parse(b, NULL, r, e); }
static int parse_msgs(json_t *b, cv_chat_request *r, cv_err *e) { return cv_anthropic_parse(b, false, r, e); }

/* The prompt of a template file under testdata, BOS/EOS text given. */
static cv_chat_prompt *load_prompt(const char *rel, const char *bos, const char *eos)
{
    cv_buf src = { 0 };
    cv_err err = { 0 };
    cv_chat_prompt *p = NULL;
    cv_chat_prompt_opts o = { .bos_token = bos, .eos_token = eos, .name = rel };
    if (cv_read_file(test_data(rel), &src, 1 << 24, &err) == 0) {
        o.template_src = (cv_str){ src.data, src.len };
        cv_chat_prompt_create(&o, &p, &err);
    }
    CHECK_MSG(p, "%s: %s", rel, err.msg);
    cv_buf_free(&src);
    return p;
}

TEST(every_recorded_request_renders_with_the_templates_agents_run)
{
    cv_chat_prompt *prompt[CV_ARRAY_LEN(templates)] = { 0 };
    for (size_t t = 0; t < CV_ARRAY_LEN(templates); t++) {
        char rel[256];
        snprintf(rel, sizeof rel, "templates/%s", templates[t]);
        prompt[t] = load_prompt(rel, "<s>", "</s>");
    }
    int renders = 0, failures = 0;
    DIR *d = opendir(test_data("clients"));
    struct dirent *de;
    char root[4096];
    snprintf(root, sizeof root, "%s", test_data("clients"));
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char sub[4600];
        snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
        DIR *d2 = opendir(sub);
        struct dirent *f;
        while (d2 && (f = readdir(d2))) {
            if (!strstr(f->d_name, ".json"))
                continue;
            char path[5000];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            json_t *rec = json_load_file(path, 0, NULL);
            const char *p = json_string_value(json_object_get(rec, "path"));
            parse_fn fn = !p ? NULL : !strcmp(p, "/v1/chat/completions") ? parse_chat
                                    : !strcmp(p, "/v1/responses")        ? parse_resp
                                    : !strcmp(p, "/v1/messages")         ? parse_msgs
                                                                         : NULL;
            if (fn) {
                cv_chat_request r;
                cv_chat_request_init(&r);
                cv_err err = { 0 };
                if (fn(json_object_get(rec, "body"), &r, &err) == 0) {
                    for (size_t t = 0; t < CV_ARRAY_LEN(templates); t++) {
                        if (!prompt[t])
                            continue;
                        cv_buf out = { 0 };
                        cv_err e2 = { 0 };
                        renders++;
                        if (cv_chat_prompt_render(prompt[t], &r, NULL, &out, NULL, &e2)) {
                            failures++;
                            printf("FAILS %s/%s with %s: %s\n", de->d_name, f->d_name, templates[t], e2.msg);
                        }
                        cv_buf_free(&out);
                    }
                }
                cv_chat_request_fini(&r);
            }
            json_decref(rec);
        }
        if (d2)
            closedir(d2);
    }
    if (d)
        closedir(d);
    printf("%d renders, %d failed\n", renders, failures);
    CHECK(renders >= 300);
    CHECK_EQ_INT(failures, 0);
    for (size_t t = 0; t < CV_ARRAY_LEN(templates); t++)
        cv_chat_prompt_destroy(prompt[t]);
}

/* Renders one wire request through the production prompt path; out: the
 * prompt. */
static bool render_request(const cv_chat_prompt *p, parse_fn fn, const char *body, cv_buf *out)
{
    json_t *b = json_loads(body, 0, NULL);
    cv_chat_request r;
    cv_chat_request_init(&r);
    cv_err err = { 0 };
    bool ok = b && fn(b, &r, &err) == 0;
    CHECK_MSG(ok, "%s: %s", body, err.msg);
    if (ok) {
        cv_buf_reset(out);
        ok = cv_chat_prompt_render(p, &r, NULL, out, NULL, &err) == 0;
        CHECK_MSG(ok, "%s: %s", body, err.msg);
    }
    cv_chat_request_fini(&r);
    json_decref(b);
    return ok;
}

TEST(every_wires_reasoning_switch_reaches_the_harmony_template_as_its_effort)
{
    cv_chat_prompt *t = load_prompt("templates/openai-gpt-oss-120b.jinja", "<bos>", NULL);
    if (!t)
        return;
    CHECK_EQ_STR(cv_tc_format_name(cv_chat_prompt_format(t, NULL)), "gpt_oss_harmony");
    static const struct {
        parse_fn fn;
        const char *extra, *want;
    } cases[] = {
        { parse_chat, "", "medium" }, /* the template's default */
        { parse_chat, ",\"reasoning_effort\":\"high\"", "high" },
        { parse_chat, ",\"reasoning_effort\":\"minimal\"", "low" },
        { parse_chat, ",\"reasoning_effort\":\"none\"", "low" }, /* gpt-oss always reasons */
        { parse_chat, ",\"reasoning_effort\":\"low\",\"chat_template_kwargs\":{\"reasoning_effort\":\"high\"}",
          "high" },
        { parse_resp, ",\"reasoning\":{\"effort\":\"low\"}", "low" },
        { parse_resp, ",\"reasoning\":{\"effort\":\"xhigh\"}", "high" },
        { parse_msgs, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4000}", "low" },
        { parse_msgs, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":10000}", "medium" },
        { parse_msgs, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":31999}", "high" },
        { parse_msgs, ",\"thinking\":{\"type\":\"disabled\"}", "low" },
        { parse_msgs, ",\"thinking\":{\"type\":\"adaptive\"},\"output_config\":{\"effort\":\"high\"}", "high" },
    };
    cv_buf body = { 0 }, out = { 0 };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        const bool msgs = cases[i].fn == parse_msgs;
        cv_buf_reset(&body);
        cv_buf_printf(&body, "{\"model\":\"m\",%s\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}",
                      msgs ? "\"max_tokens\":64," : "", cases[i].extra);
        if (cases[i].fn == parse_resp) {
            cv_buf_reset(&body);
            cv_buf_printf(&body, "{\"model\":\"m\",\"input\":\"hi\"%s}", cases[i].extra);
        }
        char want[64];
        snprintf(want, sizeof want, "Reasoning: %s\n", cases[i].want);
        if (render_request(t, cases[i].fn, body.data, &out))
            CHECK_MSG(strstr(out.data, want), "case %zu (%s): no \"%s\" in the prompt", i, body.data, cases[i].want);
    }
    /* A family without a vocabulary gets the wire's word as given. */
    cv_chat_request r;
    cv_chat_request_init(&r);
    r.reasoning_effort = cv_xstrdup("minimal");
    json_t *kw = cv_chat_request_template_kwargs(&r, cv_tc_format_find("hermes"));
    CHECK_EQ_STR(json_string_value(json_object_get(kw, "reasoning_effort")), "minimal");
    json_decref(kw);
    cv_chat_request_fini(&r);
    cv_buf_free(&body);
    cv_buf_free(&out);
    cv_chat_prompt_destroy(t);
}

TEST(gemma3s_template_puts_the_system_prompt_in_the_first_user_turn)
{
    /* Gemma 3 has no system role: its template (vLLM's tool-calling
     * variant of Google's) prefixes the first user turn with the system
     * text and a blank line, from every wire; two user turns in a row make
     * it raise, and the strict form joins them. */
    cv_chat_prompt *t = load_prompt("templates/vllm/tool_chat_template_gemma3_pythonic.jinja", "<bos>", NULL);
    if (!t)
        return;
    CHECK_EQ_STR(cv_tc_format_name(cv_chat_prompt_format(t, NULL)), "pythonic");
    cv_buf out = { 0 };
    static const char *const want = "<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n";
    if (render_request(t, parse_chat,
                          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                          "{\"role\":\"user\",\"content\":\"hi\"}]}", &out))
        CHECK_EQ_STR(out.data, want);
    if (render_request(t, parse_msgs,
                          "{\"model\":\"m\",\"max_tokens\":8,\"system\":\"Be brief.\",\"messages\":[{\"role\":"
                          "\"user\",\"content\":\"hi\"}]}", &out))
        CHECK_EQ_STR(out.data, want);
    if (render_request(t, parse_resp, "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"input\":\"hi\"}", &out))
        CHECK_EQ_STR(out.data, want);
    if (render_request(t, parse_chat,
                          "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                          "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}", &out))
        CHECK_EQ_STR(out.data, "<bos><start_of_turn>user\nBe brief.\n\na\n\nb<end_of_turn>\n<start_of_turn>model\n");
    cv_buf_free(&out);
    cv_chat_prompt_destroy(t);
}

int main(void)
{
    test_require_data();
    cv_log_set_level(CV_LOG_ERROR);
    RUN(every_recorded_request_renders_with_the_templates_agents_run);
    RUN(every_wires_reasoning_switch_reaches_the_harmony_template_as_its_effort);
    RUN(gemma3s_template_puts_the_system_prompt_in_the_first_user_turn);
    return test_report();
}
