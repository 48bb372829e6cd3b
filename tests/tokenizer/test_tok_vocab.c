/* test_tok_vocab — the tokenizers against real fixtures: every
 * ../shared/testdata/vocab/ggml-vocab-*.gguf with .inp/.out (llama.cpp's
 * test-tokenizer-0 protocol: split on "\n__ggml_vocab_test__\n", no BOS, no
 * special parsing, ids compared exactly), reference/sequences.json on the
 * truncated vocabularies of reference/models, and stories260K's documented
 * greedy output decoded through the llama2.c importer's vocabulary.
 *   test_tok_vocab                      all of the above
 *   test_tok_vocab VOCAB.gguf FIXTURE   one .inp/.out pair (FIXTURE without
 *                                       the extension) with another vocabulary
 *                                       (tests/tokenizer/diff.sh uses this for
 *                                       vocab/no-gguf with imported vocabularies) */
#include <dirent.h>
#include <unistd.h>

#include "test.h"
#include "tokenizer/tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"

/* Runs one fixture; returns the number of inputs that matched, *total gets
 * the number of inputs. Also checks per input that streaming equals one-shot
 * decoding and, for byte-level BPE and SentencePiece, that decoding gives
 * the input back. */
static int run_fixture(const char *gguf, const char *fixture, int *total)
{
    char path[4096];
    cv_err err = { 0 };
    cv_tok *t = NULL;
    cv_buf inp = { 0 }, out = { 0 };
    int ok = 0;
    *total = 0;
    CHECK_MSG(cv_tok_load_file(gguf, &t, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s.inp", fixture);
    CHECK(cv_read_file(path, &inp, 1u << 24, NULL) == 0);
    snprintf(path, sizeof path, "%s.out", fixture);
    CHECK(cv_read_file(path, &out, 1u << 24, NULL) == 0);
    if (!t || !inp.data || !out.data)
        goto done;
    /* the .out has one line per input; the .inp ends with a separator */
    const char *ip = inp.data, *op = out.data;
    const char *iend = inp.data + inp.len, *oend = out.data + out.len;
    while (op < oend) {
        const char *ol = memchr(op, '\n', (size_t)(oend - op));
        if (!ol)
            ol = oend;
        const char *is = memmem(ip, (size_t)(iend - ip), SEP, strlen(SEP));
        if (!is)
            is = iend;
        (*total)++;
        cv_tok_ids ids = { 0 };
        cv_tok_encode(t, ip, (size_t)(is - ip), 0, &ids, NULL);
        /* expected ids */
        bool same = true;
        size_t k = 0;
        for (const char *q = op; q < ol;) {
            while (q < ol && *q == ' ')
                q++;
            if (q >= ol)
                break;
            long v = strtol(q, (char **)&q, 10);
            same = same && k < ids.n && ids.ids[k] == v;
            k++;
        }
        same = same && k == ids.n;
        ok += same;
        if (!same) {
            fprintf(stderr, "  %s input %d (\"%.*s\") differs; corvid:", fixture, *total, (int)CV_MIN(is - ip, 40), ip);
            for (size_t j = 0; j < ids.n && j < 20; j++)
                fprintf(stderr, " %d", ids.ids[j]);
            fprintf(stderr, "\n    expected: %.*s\n", (int)CV_MIN(ol - op, 120), op);
        }
        unsigned dflags = CV_TOK_AT_START;
        cv_buf one = { 0 }, streamed = { 0 };
        cv_tok_decode(t, ids.ids, ids.n, dflags, &one, NULL);
        cv_tok_stream st;
        cv_tok_stream_init(&st, t, dflags);
        for (size_t j = 0; j < ids.n; j++)
            cv_tok_stream_feed(&st, ids.ids[j], &streamed, NULL);
        cv_tok_stream_flush(&st, &streamed);
        CHECK_MSG(streamed.len == one.len && (one.len == 0 || !memcmp(streamed.data, one.data, one.len)),
                  "%s input %d: streamed text differs from one-shot decoding", fixture, *total);
        CHECK(cv_utf8_valid(one.data ? one.data : "", one.len));
        if (cv_tok_get_kind(t) != CV_TOK_WPM && strstr(gguf, "qwen") == NULL) {
            bool back = one.len == (size_t)(is - ip) && (one.len == 0 || !memcmp(one.data, ip, one.len));
            CHECK_MSG(back, "%s input %d: decode(encode(x)) != x", fixture, *total);
        }
        cv_buf_free(&one);
        cv_buf_free(&streamed);
        cv_tok_ids_free(&ids);
        op = ol + 1;
        ip = is < iend ? is + strlen(SEP) : iend;
    }
done:
    cv_buf_free(&inp);
    cv_buf_free(&out);
    cv_tok_destroy(t);
    return ok;
}

TEST(every_vocab_fixture_tokenizes_exactly_as_the_reference)
{
    const char *dir = test_data("vocab");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    DIR *d = opendir(dirbuf);
    CHECK(d != NULL);
    if (!d)
        return;
    int n_files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".gguf"))
            continue;
        char gguf[8400], inp[8500];
        snprintf(gguf, sizeof gguf, "%s/%s", dirbuf, e->d_name);
        snprintf(inp, sizeof inp, "%s.inp", gguf);
        if (access(inp, R_OK) != 0)
            continue;
        int total = 0, ok = run_fixture(gguf, gguf, &total);
        printf("  %-34s %d/%d\n", e->d_name, ok, total);
        CHECK_MSG(ok == total && total > 0, "%s: %d of %d inputs match", e->d_name, ok, total);
        n_files++;
    }
    closedir(d);
    CHECK_EQ_INT(n_files, 10);
}

/* reference/sequences.json: llama.cpp's ids for one text with the tiny
 * models' truncated vocabularies (BOS for llama-spm, none for gpt2). */
TEST(reference_model_vocabularies_give_llamacpp_sequences)
{
    cv_buf b = { 0 };
    CHECK(cv_read_file(test_data("reference/sequences.json"), &b, 1u << 24, NULL) == 0);
    json_t *j = cv_json_parse(b.data ? b.data : "", b.len, NULL);
    CHECK(j != NULL);
    const char *text = json_string_value(json_object_get(j, "text"));
    struct {
        const char *model, *family;
    } cases[] = {
        { "reference/models/tiny-llama-spm-F32.gguf", "llama_spm" },
        { "reference/models/tiny-llama-spm-Q4_K_M.gguf", "llama_spm" },
        { "reference/models/tiny-qwen2-gpt2-F32.gguf", "gpt2" },
        { "reference/models/tiny-qwen3-gpt2-Q8_0.gguf", "gpt2" },
    };
    for (size_t c = 0; j && text && c < CV_ARRAY_LEN(cases); c++) {
        cv_tok *t = NULL;
        cv_err err = { 0 };
        CHECK_MSG(cv_tok_load_file(test_data(cases[c].model), &t, &err) == 0, "%s", err.msg);
        if (!t)
            continue;
        cv_tok_ids ids = { 0 };
        CHECK(cv_tok_encode(t, text, strlen(text), CV_TOK_ADD_SPECIAL, &ids, NULL) == 0);
        json_t *seqs = json_object_get(json_object_get(j, "sequences"), cases[c].family);
        const char *key;
        json_t *arr;
        json_object_foreach(seqs, key, arr)
        {
            size_t n = json_array_size(arr);
            bool same = ids.n >= n;
            for (size_t i = 0; same && i < n; i++)
                same = ids.ids[i] == json_integer_value(json_array_get(arr, i));
            CHECK_MSG(same, "%s %s: first %zu ids differ", cases[c].model, key, n);
        }
        cv_tok_ids_free(&ids);
        cv_tok_destroy(t);
    }
    json_decref(j);
    cv_buf_free(&b);
}

/* stories260K's greedy ids, after BOS, decode to llama2.c's documented text
 * through the vocabulary the llama2c importer writes from tok512.bin. */
TEST(stories260k_greedy_ids_decode_to_the_documented_text)
{
    char out[] = "/tmp/cv_test_tok512_XXXXXX";
    int fd = mkstemp(out);
    close(fd);
    cv_err err = { 0 };
    int rc = cv_import_llama2c(test_data("models/stories260K.bin"), test_data("models/tok512.bin"), out, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    cv_tok *t = NULL;
    if (rc == 0)
        CHECK_MSG(cv_tok_load_file(out, &t, &err) == 0, "%s", err.msg);
    unlink(out);
    cv_buf ids_json = { 0 }, expected = { 0 };
    CHECK(cv_read_file(test_data("models/stories260K.greedy_t0.token_ids.json"), &ids_json, 1u << 20, NULL) == 0);
    CHECK(cv_read_file(test_data("models/stories260K.greedy_t0.expected.txt"), &expected, 1u << 20, NULL) == 0);
    json_t *arr = cv_json_parse(ids_json.data ? ids_json.data : "", ids_json.len, NULL);
    if (t && arr) {
        CHECK_EQ_INT(cv_tok_n_vocab(t), 512);
        CHECK_EQ_INT(cv_tok_bos(t), 1);
        cv_tok_ids ids = { 0 };
        for (size_t i = 0; i < json_array_size(arr); i++) {
            if (ids.n == ids.cap) {
                ids.cap = ids.cap ? 2 * ids.cap : 256;
                ids.ids = realloc(ids.ids, ids.cap * sizeof(int32_t));
            }
            ids.ids[ids.n++] = (int32_t)json_integer_value(json_array_get(arr, i));
        }
        cv_buf text = { 0 };
        CHECK(cv_tok_decode(t, ids.ids, ids.n, CV_TOK_AT_START, &text, NULL) == 0);
        /* the documented file may end with a newline the generation lacks */
        size_t n = expected.len;
        while (n > 0 && expected.data[n - 1] == '\n' && (text.len < n))
            n--;
        CHECK_MSG(text.len == n && !memcmp(text.data, expected.data, n), "decoded: \"%.80s...\"", text.data);
        /* and the text encodes back to BOS + ids that decode to it */
        cv_tok_ids again = { 0 };
        CHECK(cv_tok_encode(t, text.data, text.len, CV_TOK_ADD_SPECIAL, &again, NULL) == 0);
        CHECK(again.n > 0 && again.ids[0] == 1);
        cv_buf back = { 0 };
        cv_tok_decode(t, again.ids + 1, again.n - 1, CV_TOK_AT_START, &back, NULL);
        CHECK(back.len == text.len && !memcmp(back.data, text.data, text.len));
        cv_buf_free(&back);
        cv_tok_ids_free(&again);
        cv_buf_free(&text);
        cv_tok_ids_free(&ids);
    }
    json_decref(arr);
    cv_buf_free(&ids_json);
    cv_buf_free(&expected);
    cv_tok_destroy(t);
}

int main(int argc, char **argv)
{
    if (argc == 3) {
        test_current = "fixture_with_given_vocabulary";
        int total = 0, ok = run_fixture(argv[1], argv[2], &total);
        printf("%s with %s: %d/%d\n", argv[2], argv[1], ok, total);
        CHECK_MSG(ok == total && total > 0, "%d of %d inputs match", ok, total);
        return test_report();
    }
    test_require_data();
    RUN(every_vocab_fixture_tokenizes_exactly_as_the_reference);
    RUN(reference_model_vocabularies_give_llamacpp_sequences);
    RUN(stories260k_greedy_ids_decode_to_the_documented_text);
    return test_report();
}
