/* cmd_template.c — `corvid template`: renders a conversation with a model's
 * chat template and prints the prompt exactly as the server builds it,
 * through the same cv_chat_prompt (the template's variables, the strict
 * form when the template raises, BOS/EOS text). The template comes from a
 * GGUF file (tokenizer.chat_template, BOS/EOS from its tokenizer, or its
 * token strings when it has none) or from a .jinja file. A debugging aid for
 * users and the entry point of the end-to-end tests; --bench N renders N
 * times and prints the median time (docs/PERF.md). */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

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
    json_t *doc = NULL, *tools_doc = NULL;
    cv_gguf *g = NULL;
    cv_tok *tok = NULL;
    cv_buf src = { 0 }, out = { 0 };
    cv_chat_prompt *prompt = NULL;
    cv_chat_request req;
    cv_chat_request_init(&req);
    cv_err err = { 0 };
    int rc = 1;
    if (n_pos != 1 || !opt.messages) {
        rc = cv_cli_usage_error(&spec, "needs one MODEL.gguf or FILE.jinja and --messages CONV.json");
        goto done;
    }
    char mp[PATH_MAX]; /* an alias or store name of a pulled model (cli/models.h) */
    const char *path = cv_model_local_or_self(argv[1], mp, sizeof mp);
    cv_chat_prompt_opts po = { .bos_token = opt.bos, .eos_token = opt.eos, .name = path };
    if (ends_with(path, ".gguf")) {
        if (cv_gguf_open(path, &g, &err) != 0) {
            rc = fail("", &err);
            goto done;
        }
        po.gguf = g;
        /* BOS/EOS as the server writes them: the tokenizer's, when the file
         * has one corvid loads (else its token strings) */
        if (cv_tok_load(g, &tok, NULL) == 0)
            po.tok = tok;
    } else {
        if (cv_read_file(path, &src, CV_JINJA_MAX_SOURCE + 1, &err) != 0) {
            rc = fail("", &err);
            goto done;
        }
        po.template_src = (cv_str){ src.data, src.len };
    }
    if (!(doc = load_json(opt.messages, &err))) {
        rc = fail("", &err);
        goto done;
    }
    /* either a bare messages array or {"messages": [...], "tools": [...]} */
    json_t *messages = json_is_object(doc) ? json_object_get(doc, "messages") : doc;
    json_t *tools = json_is_object(doc) ? json_object_get(doc, "tools") : NULL;
    if (opt.tools) {
        if (!(tools_doc = load_json(opt.tools, &err))) {
            rc = fail("", &err);
            goto done;
        }
        tools = tools_doc;
    }
    json_decref(req.messages);
    json_decref(req.tools);
    req.messages = json_incref(messages);
    req.tools = tools && !json_is_null(tools) ? json_incref(tools) : json_array();
    req.template_kwargs = json_incref(opt.kwargs);
    if (cv_chat_prompt_create(&po, &prompt, &err) != 0) {
        rc = fail("", &err);
        goto done;
    }
    const cv_chat_prompt_render_opts ro = { .no_generation_prompt = opt.no_gen, .now = opt.now };
    if (cv_chat_prompt_render(prompt, &req, &ro, &out, NULL, &err) != 0) {
        rc = fail("", &err);
        goto done;
    }
    if (opt.bench > 0) {
        const long bench = opt.bench;
        uint64_t *ns = cv_xcalloc((size_t)bench, sizeof *ns);
        for (long i = 0; i < bench; i++) {
            cv_buf_reset(&out);
            uint64_t t0 = cv_now_ns();
            cv_chat_prompt_render(prompt, &req, &ro, &out, NULL, NULL);
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
    cv_chat_prompt_destroy(prompt);
    cv_chat_request_fini(&req);
    cv_tok_destroy(tok);
    cv_gguf_close(g);
    cv_buf_free(&src);
    cv_buf_free(&out);
    json_decref(doc);
    json_decref(tools_doc);
    json_decref(opt.kwargs);
    return rc;
}
