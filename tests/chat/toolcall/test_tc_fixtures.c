/* test_tc_fixtures.c — every case in ../shared/testdata/toolcalls (588
 * cases, 39 formats, from vLLM, llama.cpp and SGLang tests) parsed by the
 * case's format and compared under its `match` rule (README there), then
 * parsed again fed in 1-byte pieces, random pieces (fixed seeds) and
 * token-sized pieces: every chunking must give the identical result, and
 * the event stream must be well-formed (no text inside a call, indexes in
 * order, arguments that parse as a JSON object).
 *
 * Three ways of choosing the format, each over every case: named (the
 * case's format), named with output detection on (the server's way), and
 * auto (nothing named: the case's template, where it has one, then
 * detection from the output alone). corvid's own cases for what detection
 * recovers (tests/chat/toolcall/fixtures/detect.jsonl: bare, listed and
 * fenced JSON calls, whole-reply Python lists, other syntaxes' markers, and
 * the near-misses that must stay content) name the format chosen before the
 * output is seen and the syntax the calls must be found in.
 *
 * Options come from the case: reasoning is split for reasoning_format
 * auto/deepseek (and for SGLang's Harmony cases), kept inline otherwise; for
 * llama.cpp cases the text continues the template's generation prompt, which
 * the real Jinja2 renders (render_prompts.py) so that
 * cv_chat_parse_prompt_opener can tell whether it starts inside reasoning.
 *
 * Cases judged wrong (peer behaviour corvid deliberately does not copy) are
 * listed with the reason in judged_wrong.txt; they still run for parity and
 * well-formedness, and the test fails if one of them starts passing (so the
 * list cannot go stale). The same cases' templates drive a detection test:
 * cv_tc_detect on the template source (and its file name as the model name)
 * must choose the case's format. Every registered format must have cases. */
#include <dirent.h>

#include "tc_harness.h"
#include "test.h"

#define MAX_CASES 700

typedef struct tcase {
    char file[64];
    int index;
    json_t *j;
} tcase;

static tcase cases[MAX_CASES];
static int n_cases;
static json_t *prompts;   /* template|0/1 -> rendered prompt tail */
static json_t *wrong;     /* "file#index" -> reason */

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool is_llamacpp(const json_t *c)
{
    const char *p = jstr(c, "peer_parser");
    return p && !strncmp(p, "llama.cpp", 9);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Loads every *.jsonl of dir; returns the number of files. */
static int load_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char *names[64];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 64) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jsonl"))
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, by_name);
    for (int f = 0; f < nn; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        cv_buf b = { 0 };
        cv_err err = { 0 };
        if (cv_read_file(path, &b, 16u << 20, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            continue;
        }
        int idx = 0;
        for (char *line = b.data; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (len && n_cases < MAX_CASES) {
                json_t *j = cv_json_parse(line, len, &err);
                if (j) {
                    tcase *c = &cases[n_cases++];
                    snprintf(c->file, sizeof c->file, "%.*s", (int)(strlen(names[f]) - 6), names[f]);
                    c->index = idx;
                    c->j = j;
                }
                idx++;
            }
            line = nl ? nl + 1 : NULL;
        }
        cv_buf_free(&b);
        free(names[f]);
    }
    return nn;
}

/* The peers' corpus (../shared/testdata/toolcalls, one file per format) and
 * corvid's own cases for what output detection recovers
 * (tests/chat/toolcall/fixtures: "detection": true, a chosen format or
 * "auto", and the syntax the calls must be found in). */
static void load_cases(void)
{
    if (!load_dir(test_data("toolcalls")))
        test_skip("toolcalls fixtures absent");
    CHECK(load_dir("tests/chat/toolcall/fixtures") > 0);
}

static bool is_detection(const json_t *c) { return json_is_true(json_object_get(c, "detection")); }

static bool thinking_of(const json_t *c)
{
    const json_t *o = json_object_get(c, "options");
    const json_t *t = json_object_get(o, "enable_thinking");
    return !json_is_false(t);
}

/* Renders every (template, enable_thinking) the llama.cpp cases use, with
 * one run of the Python helper. */
static void render_all(void)
{
    json_t *keys = json_object();
    for (int i = 0; i < n_cases; i++) {
        if (!is_llamacpp(cases[i].j))
            continue;
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(cases[i].j, "templates"), k, t) {
            char key[300];
            snprintf(key, sizeof key, "%s|%d", json_string_value(t), thinking_of(cases[i].j));
            json_object_set_new(keys, key, json_true());
        }
    }
    cv_buf cmd = { 0 };
    cv_buf_printf(&cmd, "python3 tests/chat/toolcall/render_prompts.py '%s'", test_data("templates"));
    const char *key;
    json_t *v;
    json_object_foreach(keys, key, v) cv_buf_printf(&cmd, " '%s'", key);
    FILE *f = popen(cmd.data, "r");
    cv_buf out = { 0 };
    char buf[4096];
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
        cv_buf_append(&out, buf, n);
    if (f)
        pclose(f);
    cv_err err = { 0 };
    prompts = out.len ? cv_json_parse(out.data, out.len, &err) : NULL;
    if (!prompts)
        fprintf(stderr, "render_prompts.py gave no prompts (python3-jinja2 missing?): %s\n", err.msg);
    cv_buf_free(&cmd);
    cv_buf_free(&out);
    json_decref(keys);
}

static void load_wrong(void)
{
    wrong = json_object();
    cv_buf b = { 0 };
    cv_err err = { 0 };
    if (cv_read_file("tests/chat/toolcall/judged_wrong.txt", &b, 1u << 20, &err))
        return;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (*line && *line != '#') {
            char *sp = strchr(line, ' ');
            if (sp) {
                *sp = 0;
                json_object_set_new(wrong, line, json_string(sp + 1));
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    cv_buf_free(&b);
}

/* ---- options from a case ---- */

typedef struct copts {
    cv_chat_parse_opts o;
    char opener[256];
    cv_buf tmpl;
} copts;

/* How the format is chosen: named (the case's), named with output
 * detection on (what the server does with the template's syntax), or auto:
 * nothing named, the case's template (llama.cpp cases) the only hint, and
 * detection finding the rest. */
enum { M_NAMED, M_DETECT, M_AUTO };
static int mode;
static const char *const mode_name[] = { "named", "named + detection", "auto" };

static void case_opts(const json_t *c, const char *tmpl, copts *co)
{
    memset(co, 0, sizeof *co);
    cv_chat_parse_opts *o = &co->o;
    o->format = cv_tc_format_find(jstr(c, "format"));
    o->detect = mode != M_NAMED;
    if (mode == M_AUTO && !is_detection(c)) {
        if (tmpl) {
            char rel[512];
            snprintf(rel, sizeof rel, "templates/%s", tmpl);
            cv_read_file(test_data(rel), &co->tmpl, 1u << 20, NULL);
        }
        o->template_src = (cv_str){ co->tmpl.data, co->tmpl.len };
        o->format = cv_tc_detect(o->template_src, (cv_str){ NULL, 0 }); /* for the prompt's opener */
    }
    const json_t *tools = json_object_get(c, "tools");
    o->tools = json_is_array(tools) ? tools : NULL;
    const json_t *op = json_object_get(c, "options");
    const char *rf = jstr(op, "reasoning_format");
    bool harmony = !strcmp(jstr(c, "format"), "gpt_oss_harmony");
    o->reasoning_inline = rf ? !strncmp(rf, "none", 4) : !harmony;
    o->json_response = json_object_get(op, "json_schema") != NULL;
    o->id_seed = 42;
    if (tmpl && prompts) {
        char key[300];
        snprintf(key, sizeof key, "%s|%d", tmpl, thinking_of(c));
        const char *pr = jstr(prompts, key);
        if (pr) {
            cv_str op2 = cv_chat_parse_prompt_opener(o->format, cv_str_of(pr));
            snprintf(co->opener, sizeof co->opener, "%.*s", (int)op2.len, op2.ptr);
            o->reasoning_open = cv_str_of(co->opener);
        }
    }
}

/* ---- comparing with the expectation ---- */

static bool text_eq(const json_t *want, const cv_buf *got)
{
    char *a = tc_trim_dup(json_is_string(want) ? json_string_value(want) : "",
                          json_is_string(want) ? json_string_length(want) : 0);
    char *b = tc_trim_dup(got->data, got->len);
    bool ok = !strcmp(a, b);
    free(a);
    free(b);
    return ok;
}

static json_t *args_json(const char *s)
{
    return json_loads(s, JSON_DECODE_ANY, NULL);
}

/* arguments_raw (a prefix of the arguments the peer saw) against ours */
static bool raw_prefix(const char *want_raw, const char *got)
{
    char *a = tc_strip_json_ws(want_raw), *b = tc_strip_json_ws(got);
    size_t la = strlen(a), lb = strlen(b), m = la < lb ? la : lb;
    bool ok = !strncmp(a, b, m);
    free(a);
    free(b);
    return ok;
}

static bool call_args_eq(const json_t *want, const char *got, bool partial)
{
    const json_t *args = json_object_get(want, "arguments");
    const char *raw = jstr(want, "arguments_raw");
    if (partial || (!args && raw) || json_is_null(args)) {
        if (raw)
            return raw_prefix(raw, got);
        if (json_is_null(args) || !args)
            return true;
        char *w = json_dumps(args, JSON_COMPACT);
        bool ok = raw_prefix(w, got);
        free(w);
        return ok;
    }
    json_t *g = args_json(got);
    bool ok = g && tc_json_loose_eq(args, g);
    json_decref(g);
    return ok;
}

static const char *type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    }
    return "?";
}

/* Events expected by SGLang's Harmony cases, compared by kind: the
 * concatenated normal text and reasoning (whitespace aside: SGLang strips
 * each event), and the calls' arguments in order. */
static bool events_eq(const json_t *c, const cv_chat_parse_result *r, char *why, size_t wn)
{
    cv_buf normal = { 0 }, reason = { 0 };
    int k = 0;
    size_t i;
    json_t *e;
    bool ok = true;
    json_array_foreach(json_object_get(c, "expected_events"), i, e) {
        const char *t = jstr(e, "type"), *s = jstr(e, "content");
        if (!strcmp(t, "normal"))
            cv_buf_puts(&normal, s);
        else if (!strcmp(t, "reasoning"))
            cv_buf_puts(&reason, s);
        else if (k >= r->n_calls) {
            ok = false;
            snprintf(why, wn, "expected a call event %d", k);
        } else {
            json_t *w = args_json(s), *g = args_json(r->calls[k].arguments);
            if (!w || !g || !tc_json_loose_eq(w, g)) {
                ok = false;
                snprintf(why, wn, "call %d args %s vs %s", k, s, r->calls[k].arguments);
            }
            json_decref(w);
            json_decref(g);
            k++;
        }
    }
    if (ok && k != r->n_calls) {
        ok = false;
        snprintf(why, wn, "%d calls, expected %d", r->n_calls, k);
    }
    char *a = tc_no_ws(normal.data ? normal.data : "", normal.len), *b = tc_no_ws(r->content.data ? r->content.data : "", r->content.len);
    char *a2 = tc_no_ws(reason.data ? reason.data : "", reason.len), *b2 = tc_no_ws(r->reasoning.data ? r->reasoning.data : "", r->reasoning.len);
    if (ok && strcmp(a, b)) {
        ok = false;
        snprintf(why, wn, "normal text \"%.100s\" vs \"%.100s\"", a, b);
    }
    if (ok && strcmp(a2, b2)) {
        ok = false;
        snprintf(why, wn, "reasoning \"%.100s\" vs \"%.100s\"", a2, b2);
    }
    free(a);
    free(b);
    free(a2);
    free(b2);
    cv_buf_free(&normal);
    cv_buf_free(&reason);
    return ok;
}

static bool matches(const json_t *c, const cv_chat_parse_result *r, bool partial, char *why, size_t wn)
{
    const char *match = jstr(c, "match");
    const json_t *calls = json_object_get(c, "expected_calls");
    int n = (int)json_array_size(calls);
    why[0] = 0;
    if (!strcmp(match, "no_crash"))
        return true;
    if (!strcmp(match, "events") || !strcmp(match, "events_types_and_contains"))
        return events_eq(c, r, why, wn);
    if (!strcmp(match, "at_least_one_call")) {
        if (r->n_calls < 1)
            snprintf(why, wn, "no call");
        return r->n_calls >= 1;
    }
    if (!strcmp(match, "calls_only")) {
        if (r->n_calls != n)
            snprintf(why, wn, "%d calls, expected %d", r->n_calls, n);
        return r->n_calls == n;
    }
    if (!strcmp(match, "one_call_nonempty_json_args") || !strcmp(match, "arg_types") ||
        !strcmp(match, "empty_args")) {
        if (r->n_calls != 1) {
            snprintf(why, wn, "%d calls, expected 1", r->n_calls);
            return false;
        }
        json_t *g = args_json(r->calls[0].arguments);
        bool ok = json_is_object(g);
        if (ok && !strcmp(match, "one_call_nonempty_json_args"))
            ok = json_object_size(g) > 0;
        if (ok && !strcmp(match, "empty_args"))
            ok = json_object_size(g) == 0;
        if (ok && !strcmp(match, "arg_types")) {
            const json_t *types = json_object_get(c, "expected_arg_types");
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)types, k, v) {
                const json_t *x = json_object_get(g, k);
                if (!x || strcmp(type_of(x), json_string_value(v)))
                    ok = false;
            }
            if (json_is_string(types))
                ok = json_object_size(g) >= 7;
        }
        if (!ok)
            snprintf(why, wn, "arguments %s", r->calls[0].arguments);
        json_decref(g);
        return ok;
    }
    /* exact, args_subset, names_only(_plus_content), content_* */
    bool check_calls = strcmp(match, "content_only_checked") && strcmp(match, "content_contains");
    if (check_calls || n) {
        if (r->n_calls != n) {
            snprintf(why, wn, "%d calls, expected %d", r->n_calls, n);
            return false;
        }
        for (int i = 0; i < n; i++) {
            const json_t *w = json_array_get(calls, (size_t)i);
            const char *name = jstr(w, "name");
            if (name && strcmp(name, r->calls[i].name)) {
                snprintf(why, wn, "call %d named %s, expected %s", i, r->calls[i].name, name);
                return false;
            }
            const char *id = jstr(w, "id");
            if (id && strcmp(id, r->calls[i].id)) {
                snprintf(why, wn, "call %d id %s, expected %s", i, r->calls[i].id, id);
                return false;
            }
            if (!strcmp(match, "exact") && !call_args_eq(w, r->calls[i].arguments, partial)) {
                snprintf(why, wn, "call %d arguments %s", i, r->calls[i].arguments);
                return false;
            }
            if (!strcmp(match, "args_subset")) {
                json_t *g = args_json(r->calls[i].arguments);
                const char *k;
                json_t *v;
                bool ok = json_is_object(g);
                json_object_foreach(json_object_get(w, "arguments"), k, v) {
                    const json_t *x = json_object_get(g, k);
                    if (!x || !tc_json_loose_eq(v, x))
                        ok = false;
                }
                json_decref(g);
                if (!ok) {
                    snprintf(why, wn, "call %d arguments %s", i, r->calls[i].arguments);
                    return false;
                }
            }
        }
    }
    bool check_content = !json_is_false(json_object_get(c, "content_checked")) && strcmp(match, "names_only") &&
                         strcmp(match, "args_subset");
    if (!strcmp(match, "content_contains")) {
        /* the text before the call must show, in part */
        char *t = tc_trim_dup(r->content.data, r->content.len);
        bool ok = t[0] && strstr(jstr(c, "text"), t) != NULL;
        if (!ok)
            snprintf(why, wn, "content \"%s\"", t);
        free(t);
        return ok;
    }
    if (check_content && !text_eq(json_object_get(c, "expected_content"), &r->content)) {
        snprintf(why, wn, "content \"%.200s\"", r->content.data ? r->content.data : "");
        return false;
    }
    const json_t *er = json_object_get(c, "expected_reasoning");
    if (json_is_string(er) && !text_eq(er, &r->reasoning)) {
        snprintf(why, wn, "reasoning \"%.200s\"", r->reasoning.data ? r->reasoning.data : "");
        return false;
    }
    return true;
}

/* ---- the tests ---- */

static bool args_are_objects(const cv_chat_parse_result *r)
{
    for (int i = 0; i < r->n_calls; i++) {
        json_t *g = args_json(r->calls[i].arguments);
        bool ok = json_is_object(g);
        json_decref(g);
        if (!ok)
            return false;
    }
    return true;
}

static int n_fail_runs, n_judged, n_runs;

static void run_case(const tcase *tc, const char *tmpl)
{
    const json_t *c = tc->j;
    /* detection cases name the format chosen before the output is seen
     * ("auto": none, the parser's default), so they run once, detecting */
    if (is_detection(c) && mode != M_DETECT)
        return;
    copts co;
    case_opts(c, tmpl, &co);
    CHECK_MSG(co.o.format || is_detection(c), "%s#%d: unknown format %s", tc->file, tc->index, jstr(c, "format"));
    if (!co.o.format && !is_detection(c))
        return;
    if (mode == M_AUTO)
        co.o.format = NULL; /* the parser chooses from the template, as in the server */
    const char *text = jstr(c, "text");
    size_t len = strlen(text);
    bool partial = !strcmp(jstr(c, "mode"), "partial");
    char key[96];
    snprintf(key, sizeof key, "%.60s#%d", tc->file, tc->index);
    const char *judged = jstr(wrong, key);

    tc_coll whole;
    tc_run_chunked(&co.o, text, len, CH_WHOLE, 0, false, &whole, NULL);
    n_runs++;
    CHECK_MSG(!whole.bad[0], "%s: event stream: %s", key, whole.bad);
    const char *want_syntax = jstr(c, "expected_syntax");
    if (is_detection(c))
        CHECK_MSG(want_syntax ? whole.detected && !strcmp(cv_tc_format_name(whole.detected), want_syntax)
                              : !whole.detected || whole.res.n_calls == 0,
                  "%s (%s): detected %s, expected %s", key, mode_name[mode],
                  whole.detected ? cv_tc_format_name(whole.detected) : "nothing", want_syntax ? want_syntax : "none");
    CHECK_MSG(args_are_objects(&whole.res), "%s: arguments are not JSON objects", key);

    char why[512];
    if (partial) {
        tc_coll part;
        tc_run_chunked(&co.o, text, len, CH_WHOLE, 0, true, &part, NULL);
        bool ok = matches(c, &part.res, true, why, sizeof why);
        CHECK_MSG(ok || judged, "%s (%s, partial): %s", key, tmpl ? tmpl : "-", why);
        n_fail_runs += !ok;
        tc_coll_fini(&part);
    } else {
        bool ok = matches(c, &whole.res, false, why, sizeof why);
        if (judged) {
            CHECK_MSG(!ok, "%s is listed in judged_wrong.txt but now passes: remove it", key);
            n_judged += tmpl == NULL || !strcmp(tmpl, json_string_value(json_array_get(json_object_get(c, "templates"), 0)));
        } else {
            CHECK_MSG(ok, "%s (%s) [%s, %s]: %s\n    text: %.300s", key, tmpl ? tmpl : "-", jstr(c, "format"),
                      mode_name[mode], why, text);
            n_fail_runs += !ok;
        }
    }

    /* parity: every chunking gives the same result */
    static const int hows[] = { CH_BYTES, CH_RANDOM, CH_RANDOM, CH_RANDOM, CH_TOKENS };
    for (size_t h = 0; h < CV_ARRAY_LEN(hows); h++) {
        tc_coll other;
        tc_run_chunked(&co.o, text, len, hows[h], 1000 + h, false, &other, NULL);
        char pw[512];
        bool same = tc_same_result(&whole.res, &other.res, pw, sizeof pw);
        CHECK_MSG(same, "%s: chunking %zu differs: %s", key, h, pw);
        CHECK_MSG(!other.bad[0], "%s: chunking %zu event stream: %s", key, h, other.bad);
        tc_coll_fini(&other);
    }
    tc_coll_fini(&whole);
    cv_buf_free(&co.tmpl);
}

static void run_all(void)
{
    n_runs = n_judged = n_fail_runs = 0;
    for (int i = 0; i < n_cases; i++) {
        const json_t *t = json_object_get(cases[i].j, "templates");
        if (is_llamacpp(cases[i].j) && json_array_size(t)) {
            for (size_t k = 0; k < json_array_size(t); k++)
                run_case(&cases[i], json_string_value(json_array_get(t, k)));
        } else {
            run_case(&cases[i], NULL);
        }
    }
    printf("  %s: %d cases (%d runs, one per template, each in 6 chunkings): %d judged wrong (judged_wrong.txt), "
           "%d runs not matching their peer\n", mode_name[mode], n_cases, n_runs, n_judged, n_fail_runs);
}

TEST(every_fixture_case_parses_as_its_peer_expects_in_every_chunking)
{
    mode = M_NAMED;
    run_all();
    CHECK(n_cases >= 588);
}

TEST(every_fixture_case_parses_the_same_with_output_detection_on)
{
    mode = M_DETECT;
    run_all();
}

TEST(every_fixture_case_parses_the_same_with_no_format_named)
{
    mode = M_AUTO;
    run_all();
    mode = M_NAMED;
}

TEST(judged_wrong_list_names_real_cases)
{
    const char *key;
    json_t *v;
    json_object_foreach(wrong, key, v) {
        bool found = false;
        for (int i = 0; i < n_cases && !found; i++) {
            char k[96];
            snprintf(k, sizeof k, "%.60s#%d", cases[i].file, cases[i].index);
            found = !strcmp(k, key);
        }
        CHECK_MSG(found, "judged_wrong.txt names %s, which is not a fixture case", key);
    }
}

TEST(each_case_template_selects_the_case_format)
{
    json_t *seen = json_object();
    for (int i = 0; i < n_cases; i++) {
        const json_t *c = cases[i].j;
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(c, "templates"), k, t) {
            const char *name = json_string_value(t);
            cv_buf src = { 0 };
            cv_err err = { 0 };
            char rel[512];
            snprintf(rel, sizeof rel, "templates/%s", name);
            if (cv_read_file(test_data(rel), &src, 1u << 20, &err)) {
                CHECK_MSG(0, "%s", err.msg);
                continue;
            }
            char model[256];
            snprintf(model, sizeof model, "%.*s", (int)(strlen(name) - 6), name);
            const char *why = NULL;
            const cv_tc_format *f = cv_tc_detect_why((cv_str){ src.data, src.len }, cv_str_of(model), &why);
            CHECK_MSG(!strcmp(cv_tc_format_name(f), jstr(c, "format")), "template %s selects %s (by %s), cases say %s",
                      name, cv_tc_format_name(f), why, jstr(c, "format"));
            json_object_set_new(seen, name, json_true());
            cv_buf_free(&src);
        }
    }
    printf("  %zu templates checked\n", json_object_size(seen));
    CHECK(json_object_size(seen) >= 50);
    json_decref(seen);
}

/* Both ways: a case names a registered format (or "auto" for detection
 * cases), and every registered format has cases, so a new row is tested
 * the day it is added (and a removed one cannot leave cases behind). */
TEST(every_fixture_format_is_registered_and_every_format_has_fixtures)
{
    int *per = calloc((size_t)cv_tc_format_count(), sizeof *per);
    for (int i = 0; i < n_cases; i++) {
        const json_t *c = cases[i].j;
        const char *name = jstr(c, "format"), *syn = jstr(c, "expected_syntax");
        const cv_tc_format *f = cv_tc_format_find(name);
        CHECK_MSG(f || (is_detection(c) && !strcmp(name, "auto")), "%s#%d: format %s is not registered", cases[i].file,
                  cases[i].index, name);
        CHECK_MSG(!syn || cv_tc_format_find(syn), "%s#%d: expected_syntax %s is not registered", cases[i].file,
                  cases[i].index, syn);
        for (int k = 0; k < cv_tc_format_count(); k++) {
            const char *row = cv_tc_format_name(cv_tc_format_at(k));
            per[k] += (f == cv_tc_format_at(k) && !is_detection(c)) || (syn && !strcmp(syn, row));
        }
    }
    for (int k = 0; k < cv_tc_format_count(); k++)
        CHECK_MSG(per[k] > 0, "format %s has no fixture cases", cv_tc_format_name(cv_tc_format_at(k)));
    free(per);
}

int main(void)
{
    test_require_data();
    load_cases();
    render_all();
    load_wrong();
    RUN(every_fixture_format_is_registered_and_every_format_has_fixtures);
    RUN(every_fixture_case_parses_as_its_peer_expects_in_every_chunking);
    RUN(every_fixture_case_parses_the_same_with_output_detection_on);
    RUN(every_fixture_case_parses_the_same_with_no_format_named);
    RUN(judged_wrong_list_names_real_cases);
    RUN(each_case_template_selects_the_case_format);
    for (int i = 0; i < n_cases; i++)
        json_decref(cases[i].j);
    json_decref(prompts);
    json_decref(wrong);
    return test_report();
}
