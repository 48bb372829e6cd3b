/* test_jinja_diff.c — the differential test: every template under
 * testdata/templates (and templates/vllm) × every conversation in
 * conversations.json is rendered by corvid and by the real Jinja2
 * (jinja_oracle.py, set up as Hugging Face's apply_chat_template; its
 * docstring lists the options). Wherever Jinja2 succeeds the bytes must be
 * identical; wherever it raises, corvid must fail too. Pairs listed in
 * diff_exclusions.txt (template, conversation or '*', reason) are reported
 * and skipped. Needs python3 with jinja2 (scripts/install-deps.sh). */
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat.h"
#include "test.h"

#define NOW 1736159400 /* 2025-01-06 10:30:00 UTC, for strftime_now on both sides */

typedef struct excl {
    char tmpl[256], conv[128];
} excl;

static excl excls[256];
static int n_excls;

static void load_exclusions(void)
{
    FILE *f = fopen("tests/chat/jinja/diff_exclusions.txt", "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f) && n_excls < (int)CV_ARRAY_LEN(excls)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *t1 = strchr(line, '\t');
        if (!t1)
            continue;
        *t1 = 0;
        char *t2 = strchr(t1 + 1, '\t');
        if (t2)
            *t2 = 0;
        snprintf(excls[n_excls].tmpl, sizeof excls[0].tmpl, "%.250s", line);
        snprintf(excls[n_excls].conv, sizeof excls[0].conv, "%.120s", t1 + 1);
        n_excls++;
    }
    fclose(f);
}

static bool excluded(const char *tmpl, const char *conv)
{
    for (int i = 0; i < n_excls; i++)
        if (!strcmp(excls[i].tmpl, tmpl) && (!strcmp(excls[i].conv, "*") || !strcmp(excls[i].conv, conv)))
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_templates(char **out, int max)
{
    int n = 0;
    const char *dirs[] = { "templates", "templates/vllm" };
    for (int d = 0; d < 2; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", test_data(dirs[d]));
        DIR *dh = opendir(dir);
        if (!dh)
            continue;
        struct dirent *e;
        while ((e = readdir(dh)) && n < max) {
            size_t l = strlen(e->d_name);
            if (l > 6 && !strcmp(e->d_name + l - 6, ".jinja")) {
                char rel[512];
                snprintf(rel, sizeof rel, "%s/%s", dirs[d], e->d_name);
                out[n++] = strdup(rel);
            }
        }
        closedir(dh);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_str);
    return n;
}

static void show_diff(const char *tmpl, const char *conv, const char *want, size_t wn, const char *got, size_t gn)
{
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i])
        i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "MISMATCH %s × %s at byte %zu (jinja2 %zu bytes, corvid %zu)\n  jinja2: ", tmpl, conv, i, wn, gn);
    cv_buf b = { 0 };
    cv_buf_put_json_str(&b, want + from, CV_MIN(wn - from, (size_t)140));
    fprintf(stderr, "%s\n  corvid: ", b.data);
    cv_buf_reset(&b);
    cv_buf_put_json_str(&b, got + from, CV_MIN(gn - from, (size_t)140));
    fprintf(stderr, "%s\n", b.data);
    cv_buf_free(&b);
}

TEST(every_template_renders_every_conversation_exactly_as_jinja2)
{
    /* Debian's python3-jinja2 is the oracle the project installs; another
     * python3 on PATH (a pyenv) is used only when the Debian one is absent */
    const char *py = "/usr/bin/python3";
    if (system("/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1") != 0) {
        py = "python3";
        if (system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0)
            test_skip("python3 with jinja2 is not installed (scripts/install-deps.sh installs python3-jinja2)");
    }
    load_exclusions();
    cv_err err = { 0 };
    cv_buf cb = { 0 };
    CHECK(cv_read_file("tests/chat/jinja/conversations.json", &cb, 64u << 20, &err) == 0);
    json_t *convs = cv_json_parse(cb.data, cb.len, &err);
    cv_buf_free(&cb);
    CHECK_MSG(convs && json_array_size(convs) >= 25, "conversations.json needs >= 25 conversations: %s", err.msg);
    if (!convs)
        return;
    char *tmpls[512];
    int nt = list_templates(tmpls, 512);
    CHECK_MSG(nt == 102, "expected the 102 fixture templates, found %d", nt);

    /* one oracle run for all jobs */
    json_t *jobs = json_array();
    for (int i = 0; i < nt; i++)
        for (size_t k = 0; k < json_array_size(convs); k++) {
            json_t *job = json_object();
            json_object_set_new(job, "template", json_string(test_data(tmpls[i])));
            json_object_set(job, "conversation", json_array_get(convs, k));
            json_array_append_new(jobs, job);
        }
    json_t *req = json_object();
    json_object_set_new(req, "now", json_integer(NOW));
    json_object_set_new(req, "jobs", jobs);
    char in_path[] = "/tmp/corvid_jinja_jobs_XXXXXX";
    int fd = mkstemp(in_path);
    CHECK(fd >= 0);
    FILE *fin = fdopen(fd, "w");
    json_dumpf(req, fin, JSON_COMPACT);
    fclose(fin);
    json_decref(req);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "TZ=UTC %s tests/chat/jinja/jinja_oracle.py < %s", py, in_path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);

    setenv("TZ", "UTC", 1);
    tzset();
    int n_same = 0, n_both_fail = 0, n_bad = 0, n_excl = 0, n_ok_py = 0;
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; i < nt; i++) {
        cv_buf src = { 0 };
        cv_err e2 = { 0 };
        cv_read_file(test_data(tmpls[i]), &src, 1u << 24, &e2);
        cv_chat_template *t = NULL;
        int crc = cv_chat_template_create(src.data, src.len, NULL, &t, &e2);
        if (crc != 0)
            t = NULL;
        for (size_t k = 0; k < json_array_size(convs); k++) {
            json_t *conv = json_array_get(convs, k);
            const char *cname = json_string_value(json_object_get(conv, "name"));
            ssize_t got = getline(&line, &cap, p);
            CHECK_MSG(got > 0, "the oracle stopped early at %s × %s", tmpls[i], cname);
            if (got <= 0)
                goto out;
            json_t *res = json_loads(line, 0, NULL);
            bool py_ok = json_is_true(json_object_get(res, "ok"));
            n_ok_py += py_ok;
            cv_buf out = { 0 };
            cv_err e3 = { 0 };
            int rc = -1;
            if (t) {
                json_t *gen = json_object_get(conv, "add_generation_prompt");
                cv_chat_render_opts o = {
                    .messages = json_object_get(conv, "messages"),
                    .tools = json_object_get(conv, "tools"),
                    .add_generation_prompt = gen ? json_is_true(gen) : true,
                    .bos_token = "<s>",
                    .eos_token = "</s>",
                    .kwargs = json_object_get(conv, "kwargs"),
                    .now = NOW,
                };
                rc = cv_chat_template_render(t, &o, &out, &e3);
            } else {
                e3 = e2;
            }
            bool ex = excluded(tmpls[i], cname);
            if (py_ok) {
                const char *want = json_string_value(json_object_get(res, "text"));
                size_t wn = json_string_length(json_object_get(res, "text"));
                bool same = rc == 0 && out.len == wn && !memcmp(out.data ? out.data : "", want, wn);
                if (same) {
                    n_same++;
                } else if (ex) {
                    n_excl++;
                } else {
                    n_bad++;
                    if (rc != 0)
                        fprintf(stderr, "MISMATCH %s × %s: jinja2 rendered, corvid failed: %s\n", tmpls[i], cname, e3.msg);
                    else
                        show_diff(tmpls[i], cname, want, wn, out.data ? out.data : "", out.len);
                }
            } else {
                if (rc != 0) {
                    n_both_fail++;
                    if (getenv("CV_JINJA_DIFF_VERBOSE")) /* to compare the two reasons by eye */
                        fprintf(stderr, "BOTH-FAIL %s × %s\n  jinja2: %s\n  corvid: %s\n", tmpls[i], cname,
                                json_string_value(json_object_get(res, "error")), e3.msg);
                } else if (ex) {
                    n_excl++;
                } else {
                    n_bad++;
                    fprintf(stderr, "MISMATCH %s × %s: jinja2 raised (%s), corvid rendered %zu bytes\n", tmpls[i], cname,
                            json_string_value(json_object_get(res, "error")), out.len);
                }
            }
            cv_buf_free(&out);
            json_decref(res);
        }
        cv_chat_template_destroy(t);
        cv_buf_free(&src);
    }
out:
    free(line);
    pclose(p);
    unlink(in_path);
    printf("oracle: %s\n", py);
    printf("differential: %d identical, %d fail on both sides, %d excluded, %d mismatched (jinja2 rendered %d of %d)\n",
           n_same, n_both_fail, n_excl, n_bad, n_ok_py, nt * (int)json_array_size(convs));
    CHECK_EQ_INT(n_bad, 0);
    for (int i = 0; i < nt; i++)
        free(tmpls[i]);
    json_decref(convs);
}

int main(void)
{
    test_require_data();
    RUN(every_template_renders_every_conversation_exactly_as_jinja2);
    return test_report();
}
