/* test_cmd_template.c — `corvid template` end to end, driving the release
 * binary: a .jinja file and a GGUF model (written here with the GGUF writer:
 * tokenizer.chat_template plus a vocabulary whose BOS/EOS strings the command
 * must pass to the template) render exactly what the library renders; a model
 * without a template falls back to ChatML; bad input exits 1 or 2 with a
 * message, never a crash. */
#include <sys/wait.h>
#include <unistd.h>

#include "chat/chat.h"
#include "gguf/gguf.h"
#include "test.h"

static const char *bin(void) { return CV_RELEASE_BIN; }

/* Runs a shell command; returns its exit status and its stdout in out. */
static int run(const char *cmd, cv_buf *out)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        cv_buf_append(out, buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *conv =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]}";

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    fputs(s, f);
    fclose(f);
}

TEST(jinja_file_renders_what_the_library_renders)
{
    char cpath[] = "/tmp/corvid_conv_XXXXXX";
    int fd = mkstemp(cpath);
    close(fd);
    write_file(cpath, conv);
    const char *tpath = test_data("templates/Qwen-Qwen3-0.6B.jinja");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s template '%s' --messages %s --kw enable_thinking=false", bin(), tpath, cpath);
    cv_buf got = { 0 };
    CHECK_EQ_INT(run(cmd, &got), 0);

    cv_buf src = { 0 };
    cv_err err = { 0 };
    CHECK(cv_read_file(tpath, &src, 1u << 20, &err) == 0);
    cv_chat_template *t = NULL;
    CHECK(cv_chat_template_create(src.data, src.len, NULL, &t, &err) == 0);
    json_t *doc = json_loads(conv, 0, NULL), *kw = json_loads("{\"enable_thinking\":false}", 0, NULL);
    cv_chat_render_opts o = { .messages = json_object_get(doc, "messages"), .tools = json_object_get(doc, "tools"),
                              .add_generation_prompt = true, .kwargs = kw };
    cv_buf want = { 0 };
    CHECK(cv_chat_template_render(t, &o, &want, &err) == 0);
    CHECK_EQ_STR(got.data, want.data);
    CHECK(strstr(got.data ? got.data : "", "<think>\n\n</think>") != NULL); /* the switch reached the template */
    json_decref(doc);
    json_decref(kw);
    cv_chat_template_destroy(t);
    cv_buf_free(&src);
    cv_buf_free(&got);
    cv_buf_free(&want);
    unlink(cpath);
}

static void write_model(const char *path, const char *tmpl)
{
    cv_gguf_writer *w = cv_gguf_writer_create();
    cv_gguf_writer_set_str(w, "general.architecture", CV_STR("llama"));
    if (tmpl)
        cv_gguf_writer_set_str(w, "tokenizer.chat_template", cv_str_of(tmpl));
    cv_str toks[3] = { CV_STR("<unk>"), CV_STR("<|BOS|>"), CV_STR("<|EOS|>") };
    cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 3, toks);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    cv_err err = { 0 };
    CHECK_MSG(cv_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    cv_gguf_writer_destroy(w);
}

TEST(model_file_supplies_the_template_and_its_special_tokens)
{
    char cpath[] = "/tmp/corvid_conv_XXXXXX";
    int fd = mkstemp(cpath);
    close(fd);
    write_file(cpath, conv);
    char mpath[] = "/tmp/corvid_model_XXXXXX.gguf";
    fd = mkstemps(mpath, 5);
    close(fd);
    write_model(mpath, "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s template %s --messages %s", bin(), mpath, cpath);
    cv_buf got = { 0 };
    CHECK_EQ_INT(run(cmd, &got), 0);
    CHECK_EQ_STR(got.data, "<|BOS|>[system]Be brief.<|EOS|>[user]Hi \xc3\xa9<|EOS|>");

    write_model(mpath, NULL); /* no template: ChatML */
    cv_buf_reset(&got);
    CHECK_EQ_INT(run(cmd, &got), 0);
    CHECK_EQ_STR(got.data, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi \xc3\xa9<|im_end|>\n<|im_start|>assistant\n");
    cv_buf_free(&got);
    unlink(cpath);
    unlink(mpath);
}

TEST(bad_input_exits_with_a_message)
{
    char tpath[] = "/tmp/corvid_tmpl_XXXXXX.jinja";
    int fd = mkstemps(tpath, 6);
    close(fd);
    write_file(tpath, "{% for x in %}");
    char cpath[] = "/tmp/corvid_conv_XXXXXX";
    fd = mkstemp(cpath);
    close(fd);
    write_file(cpath, "[{\"role\":\"user\",\"content\":\"x\"}]");
    struct { const char *args; int status; const char *says; } cases[] = {
        { "template T --messages C", 1, "line 1" }, /* syntax error */
        { "template /nonexistent.jinja --messages C", 1, "nonexistent" },
        { "template T --messages /nonexistent.json", 1, "nonexistent" },
        { "template T", 2, "usage" },               /* no --messages */
        { "template T --messages C --kw novalue", 2, "key=value" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        char args[1024], cmd[2048];
        size_t k = 0;
        for (const char *p = cases[i].args; *p && k < sizeof args - 64; p++) {
            const char *sub = *p == 'T' ? tpath : *p == 'C' ? cpath : NULL;
            if (sub)
                k += (size_t)snprintf(args + k, sizeof args - k, "%s", sub);
            else
                args[k++] = *p;
        }
        args[k] = 0;
        snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
        cv_buf out = { 0 };
        int st = run(cmd, &out);
        CHECK_MSG(st == cases[i].status, "%s: exit %d, want %d (%s)", args, st, cases[i].status, out.data);
        CHECK_MSG(out.data && strstr(out.data, cases[i].says), "%s: output should mention '%s': %s", args, cases[i].says,
                  out.data ? out.data : "");
        cv_buf_free(&out);
    }
    unlink(tpath);
    unlink(cpath);
}

int main(void)
{
    test_require_data();
    if (access(bin(), X_OK) != 0)
        test_skip("the release binary build/corvid is not built (make release)");
    RUN(jinja_file_renders_what_the_library_renders);
    RUN(model_file_supplies_the_template_and_its_special_tokens);
    RUN(bad_input_exits_with_a_message);
    return test_report();
}
