/* test_grammar_corpus.c — the schema corpus, end to end: every schema in
 * tests/grammar/schemas plus every tool schema the recorded clients sent
 * (read in place from testdata/clients) is compiled, 20 documents are
 * sampled from a random-weight model over a real vocabulary at temperature
 * 1.0 with the grammar's masks, and every document is checked by Ajv (an
 * independent validator, tests/grammar/validate.js). Each generation has a
 * budget of MAX_TOKENS; when the tokens left come down to the shortest
 * completion plus a window, the mask is narrowed to tokens that keep it
 * within the budget (cv_grammar_state_min_bytes_after, drawing again when over), as the server does for max_tokens. A
 * generation that still fails to end counts as a failure. */
#include <dirent.h>
#include <sys/wait.h>

#include "grammar/grammar.h"
#include "gvocab.h"
#include "synth.h"
#include "test.h"

#define N_DOCS 20
#define MAX_TOKENS 400

typedef struct corpus { json_t *list; } corpus; /* [{id, schema}] */

static void add_schema(corpus *c, const char *id, json_t *schema)
{
    json_array_append_new(c->list, json_pack("{s:s,s:O}", "id", id, "schema", schema));
}

static void load_files(corpus *c)
{
    DIR *d = opendir("tests/grammar/schemas");
    CHECK(d != NULL);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
            continue;
        char path[600];
        snprintf(path, sizeof path, "tests/grammar/schemas/%s", e->d_name);
        json_error_t je;
        json_t *s = json_load_file(path, JSON_DECODE_ANY, &je);
        CHECK_MSG(s != NULL, "%s: %s", path, je.text);
        if (s)
            add_schema(c, e->d_name, s);
        json_decref(s);
    }
    closedir(d);
}

/* Tool schemas of the recorded clients, deduplicated by their text. */
static int load_client_tools(corpus *c)
{
    const char *root = test_data("clients");
    DIR *d = opendir(root);
    if (!d)
        return 0;
    json_t *seen = json_object();
    int added = 0;
    struct dirent *e;
    char rootcopy[4096];
    snprintf(rootcopy, sizeof rootcopy, "%s", root);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char dir[4600];
        snprintf(dir, sizeof dir, "%s/%s", rootcopy, e->d_name);
        DIR *d2 = opendir(dir);
        if (!d2)
            continue;
        struct dirent *f;
        while ((f = readdir(d2))) {
            if (!strstr(f->d_name, ".json"))
                continue;
            char path[5200];
            snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
            json_t *rec = json_load_file(path, 0, NULL);
            json_t *tools = json_object_get(json_object_get(rec, "body"), "tools");
            size_t i;
            json_t *t;
            json_array_foreach(tools, i, t) {
                json_t *fn = json_object_get(t, "function");
                json_t *s = json_object_get(t, "input_schema");
                if (!s)
                    s = json_object_get(fn ? fn : t, "parameters");
                const char *name = json_string_value(json_object_get(fn ? fn : t, "name"));
                if (!json_is_object(s) || !name)
                    continue;
                char *text = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
                if (!json_object_get(seen, text)) {
                    json_object_set_new(seen, text, json_true());
                    char id[700];
                    snprintf(id, sizeof id, "clients/%s/%s:%s", e->d_name, f->d_name, name);
                    add_schema(c, id, s);
                    added++;
                }
                free(text);
            }
            json_decref(rec);
        }
        closedir(d2);
    }
    closedir(d);
    json_decref(seen);
    return added;
}

TEST(corpus_generations_validate_against_an_independent_validator)
{
    if (access("tests/js/node_modules/ajv", F_OK) != 0)
        test_skip("tests/js/node_modules/ajv is absent (run scripts/install-deps.sh)");
    cv_grammar_vocab *v = gv_load(test_data("reference/models/tiny-qwen3-gpt2-F32.gguf"));
    CHECK(v != NULL);
    if (!v)
        return;
    corpus c = { json_array() };
    load_files(&c);
    int n_files = (int)json_array_size(c.list);
    int n_clients = load_client_tools(&c);
    printf("corpus: %d schema files, %d client tool schemas\n", n_files, n_clients);
    CHECK(n_files >= 100);
    CHECK(n_clients >= 50);

    int32_t n = cv_grammar_vocab_n(v);
    uint64_t *mask = calloc(((size_t)n + 63) / 64, 8);
    synth m;
    synth_init(&m, n, 1234);
    char out_path[] = "/tmp/corvid-grammar-corpus-XXXXXX";
    int fd = mkstemp(out_path);
    FILE *out = fdopen(fd, "w");
    int n_docs = 0, n_truncated = 0, n_tokens = 0, n_compile_fail = 0, n_finishing = 0;
    size_t i;
    json_t *rec;
    json_array_foreach(c.list, i, rec) {
        const char *id = json_string_value(json_object_get(rec, "id"));
        cv_grammar *g = NULL;
        cv_err err;
        cv_buf warn = { 0 };
        cv_grammar_opts o = { .warnings = &warn };
        if (cv_grammar_from_schema(json_object_get(rec, "schema"), &o, &g, &err)) {
            CHECK_MSG(false, "%s: %s", id, err.msg);
            n_compile_fail++;
            cv_buf_free(&warn);
            continue;
        }
        if (warn.len) /* looser than the schema there; the validator still judges the output */
            printf("%s: %s", id, warn.data);
        cv_buf_free(&warn);
        json_t *docs = json_array();
        for (int k = 0; k < N_DOCS; k++) {
            cv_grammar_state *s = NULL;
            CHECK(cv_grammar_state_create(g, v, &s, NULL) == 0);
            synth_reset(&m, 1000 * i + (size_t)k);
            cv_buf text = { 0 };
            int steps = 0;
            bool ended = false;
            for (; steps < MAX_TOKENS; steps++) {
                cv_grammar_state_mask(s, mask, NULL);
                int32_t left = MAX_TOKENS - steps;
                bool near_end = left <= cv_grammar_state_min_bytes(s) + CV_GRAMMAR_BUDGET_WINDOW;
                n_finishing += near_end;
                double sum = synth_weigh(&m, mask, 1.0f);
                int32_t tok = sum > 0 ? synth_draw(&m, mask, sum) : -1;
                /* near the budget: redraw while the drawn token would leave
                 * a completion longer than the tokens left */
                while (near_end && tok >= 0 && cv_grammar_state_min_bytes_after(s, tok) > left - 1) {
                    mask[tok >> 6] &= ~(1ull << (tok & 63));
                    sum -= m.logits[tok];
                    tok = sum > 0 ? synth_draw(&m, mask, sum) : -1;
                }
                if (tok < 0)
                    break;
                if (cv_grammar_state_accept(s, tok, &err)) {
                    CHECK_MSG(false, "%s: a masked-in token was refused: %s", id, err.msg);
                    break;
                }
                if (!(cv_grammar_vocab_flags(v, tok) & CV_GRAMMAR_TOK_EOG))
                    cv_buf_put_str(&text, cv_grammar_vocab_piece(v, tok));
                if (cv_grammar_state_done(s)) {
                    ended = true;
                    break;
                }
                synth_feed(&m, tok);
            }
            n_tokens += steps;
            if (!ended && cv_grammar_state_can_end(s))
                ended = true; /* complete when the budget ran out */
            if (!ended) {
                n_truncated++;
                CHECK_MSG(false, "%s doc %d: no end after %d tokens: %.200s", id, k, steps, text.data);
            }
            json_array_append_new(docs, json_stringn(text.data ? text.data : "", text.len));
            cv_buf_free(&text);
            cv_grammar_state_destroy(s);
            n_docs++;
        }
        json_t *line = json_pack("{s:s,s:O,s:o}", "id", id, "schema", json_object_get(rec, "schema"), "docs", docs);
        char *dump = json_dumps(line, JSON_COMPACT);
        fprintf(out, "%s\n", dump);
        free(dump);
        json_decref(line);
        cv_grammar_destroy(g);
    }
    fclose(out);
    printf("corpus: %d documents, %d tokens (%d under a finishing mask), %d truncated, %d schemas failed to compile\n",
           n_docs, n_tokens, n_finishing, n_truncated, n_compile_fail);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "node tests/grammar/validate.js %s", out_path);
    FILE *p = popen(cmd, "r");
    char line[1024];
    int passed = -1, failed = -1;
    while (p && fgets(line, sizeof line, p)) {
        if (sscanf(line, "%d passed, %d failed", &passed, &failed) == 2)
            continue;
        fputs(line, stderr);
    }
    int st = p ? pclose(p) : -1;
    printf("validator: %d passed, %d failed\n", passed, failed);
    CHECK_MSG(st == 0, "validator exit status %d", st);
    CHECK_EQ_INT(passed, n_docs);
    CHECK_EQ_INT(failed, 0);
    if (failed == 0)
        unlink(out_path);
    else
        fprintf(stderr, "documents kept in %s\n", out_path);
    free(mask);
    synth_free(&m);
    json_decref(c.list);
    cv_grammar_vocab_destroy(v);
}

int main(void)
{
    test_require_data();
    RUN(corpus_generations_validate_against_an_independent_validator);
    return test_report();
}
