/* cmd_template.c — `corvid template`: renders a conversation with a model's
 * chat template and prints the prompt exactly as the server would build it.
 * The template comes from a GGUF file (tokenizer.chat_template, with the
 * BOS/EOS token strings from its vocabulary) or from a .jinja file. A
 * debugging aid for users and the entry point of the end-to-end tests;
 * --bench N renders N times and prints the median time (docs/PERF.md). */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli/cli.h"
#include "gguf/gguf.h"

static int fail(const char *what, cv_err *err)
{
    fprintf(stderr, "corvid template: %s%s\n", what, err ? err->msg : "");
    return 1;
}

static json_t *load_json(const char *path, cv_err *err)
{
    cv_buf b = { 0 };
    if (cv_read_file(path, &b, 256u << 20, err) != 0) {
        cv_buf_free(&b);
        return NULL;
    }
    json_t *j = cv_json_parse(b.data ? b.data : "", b.len, err);
    if (!j)
        cv_err_prefix(err, "%s: ", path);
    cv_buf_free(&b);
    return j;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* The token string of tokenizer.ggml.<which>_token_id, or NULL. */
static char *gguf_token(cv_gguf *g, const char *which)
{
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    int64_t id;
    const cv_gguf_value *toks;
    if (cv_gguf_get_int(g, key, &id, NULL) != 0 || cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &toks, NULL) != 0)
        return NULL;
    if (id < 0 || (uint64_t)id >= toks->arr.n)
        return NULL;
    return cv_xstrndup(toks->arr.strs[id].ptr, toks->arr.strs[id].len);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct template_opts {
    const char *messages, *tools, *bos, *eos;
    bool no_gen;
    int32_t bench;
    int64_t now;
    json_t *kwargs;
} template_opts;

/* --kw key=value: a JSON value when it parses (true, 3, "x", {...}), else the text. */
static int kw_add(void *opts, const char *v, cv_err *err)
{
    template_opts *o = opts;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v)
        return cv_err_set(err, CV_EINVAL, "needs key=value, got '%s'", v);
    char *key = cv_xstrndup(v, (size_t)(eq - v));
    json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    json_object_set_new(o->kwargs, key, val ? val : json_string(eq + 1));
    free(key);
    return 0;
}

#define O(field) offsetof(template_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--messages", "-m", CV_FLAG_STR, O(messages), 0, 0, "CONV.json",
      "the conversation: a messages array or {\"messages\": [...], \"tools\": [...]} (required)"),
    CV_FLAG_ROW("--tools", "-t", CV_FLAG_STR, O(tools), 0, 0, "TOOLS.json",
      "tools (replacing the conversation file's)"),
    CV_FLAG_ROW("--no-generation-prompt", "-n", CV_FLAG_BOOL, O(no_gen), 0, 0, NULL,
      "end without the assistant's header"),
    CV_FLAG_FN_ROW("--kw", "-k", "key=value", "a template variable (enable_thinking=false, ...)", kw_add, true),
    CV_FLAG_ROW("--bos", "-b", CV_FLAG_STR, O(bos), 0, 0, "S", "bos_token (default: the GGUF's, else empty)"),
    CV_FLAG_ROW("--eos", "-e", CV_FLAG_STR, O(eos), 0, 0, "S", "eos_token (default: the GGUF's, else empty)"),
    CV_FLAG_ROW("--now", NULL, CV_FLAG_I64, O(now), -1e12, 1e12, "UNIXTIME",
      "the time strftime_now sees (default: the clock)"),
    CV_FLAG_ROW("--bench", NULL, CV_FLAG_I32, O(bench), 1, 1000000, "N", "render N times and print the median time"),
};
#undef O
static const cv_cli_spec spec = { .name = "template", .args = "(MODEL.gguf | FILE.jinja)", .max_args = 1,
                                  .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_template(int argc, char **argv)
{
    template_opts opt = { .kwargs = json_object() };
    int n_pos, st;
    if (!cv_cli_parse(&spec, &opt, argc, argv, &n_pos, &st)) {
        json_decref(opt.kwargs);
        return st;
    }
    const char *messages_path = opt.messages, *tools_path = opt.tools, *bos = opt.bos, *eos = opt.eos;
    bool gen = !opt.no_gen;
    long bench = opt.bench;
    int64_t now = opt.now;
    json_t *kwargs = opt.kwargs, *messages = NULL, *tools = NULL, *doc = NULL, *tools_doc = NULL;
    char *gbos = NULL, *geos = NULL, *src = NULL;
    size_t src_len = 0;
    cv_chat_template *t = NULL;
    cv_buf out = { 0 };
    cv_err err = { 0 };
    int rc = 1;
    if (n_pos != 1 || !messages_path) {
        rc = cv_cli_usage_error(&spec, "needs one MODEL.gguf or FILE.jinja and --messages CONV.json");
        goto done;
    }
    char mp[PATH_MAX]; /* an alias or store name of a pulled model (cli/models.h) */
    const char *path = cv_model_local_or_self(argv[1], mp, sizeof mp);
    if (ends_with(path, ".gguf")) {
        cv_gguf *g;
        if (cv_gguf_open(path, &g, &err) != 0) {
            rc = fail("", &err);
            goto done;
        }
        cv_str s;
        int r = cv_gguf_get_str(g, "tokenizer.chat_template", &s, &err);
        if (r == 0) {
            src = cv_xstrndup(s.ptr, s.len);
            src_len = s.len;
        } else if (r != CV_ENOTFOUND) {
            cv_gguf_close(g);
            rc = fail("", &err);
            goto done;
        }
        gbos = gguf_token(g, "bos");
        geos = gguf_token(g, "eos");
        cv_gguf_close(g);
    } else {
        cv_buf b = { 0 };
        if (cv_read_file(path, &b, CV_JINJA_MAX_SOURCE + 1, &err) != 0) {
            cv_buf_free(&b);
            rc = fail("", &err);
            goto done;
        }
        src_len = b.len;
        src = cv_buf_steal(&b);
    }
    if (!(doc = load_json(messages_path, &err))) {
        rc = fail("", &err);
        goto done;
    }
    /* either a bare messages array or {"messages": [...], "tools": [...]} */
    if (json_is_object(doc)) {
        messages = json_object_get(doc, "messages");
        tools = json_object_get(doc, "tools");
    } else {
        messages = doc;
    }
    if (tools_path) {
        if (!(tools_doc = load_json(tools_path, &err))) {
            rc = fail("", &err);
            goto done;
        }
        tools = tools_doc;
    }
    if (cv_chat_template_create(src, src_len, path, &t, &err) != 0) {
        rc = fail("", &err);
        goto done;
    }
    cv_chat_render_opts o = { .messages = messages, .tools = tools, .add_generation_prompt = gen,
                              .bos_token = bos ? bos : gbos, .eos_token = eos ? eos : geos, .kwargs = kwargs, .now = now };
    if (cv_chat_template_render(t, &o, &out, &err) != 0) {
        rc = fail("", &err);
        goto done;
    }
    if (bench > 0) {
        uint64_t *ns = cv_xcalloc((size_t)bench, sizeof *ns);
        for (long i = 0; i < bench; i++) {
            cv_buf_reset(&out);
            uint64_t t0 = cv_now_ns();
            cv_chat_template_render(t, &o, &out, NULL);
            ns[i] = cv_now_ns() - t0;
        }
        qsort(ns, (size_t)bench, sizeof *ns, cmp_u64);
        printf("%ld renders, %zu bytes each: median %.1f us, min %.1f us, p90 %.1f us\n", bench, out.len,
               (double)ns[bench / 2] / 1e3, (double)ns[0] / 1e3, (double)ns[bench * 9 / 10] / 1e3);
        free(ns);
    } else {
        fwrite(out.data ? out.data : "", 1, out.len, stdout);
    }
    rc = 0;
done:
    cv_chat_template_destroy(t);
    cv_buf_free(&out);
    json_decref(doc);
    json_decref(tools_doc);
    json_decref(kwargs);
    free(src);
    free(gbos);
    free(geos);
    return rc;
}
