/* test_tok_diff — corvid's tokenizer against the reference (transformers.js)
 * on the generated corpus: identical ids and identical decoded text for
 * every string, and the streaming detokenizer equal to one-shot decoding.
 *   test_tok_diff VOCAB.gguf CORPUS.json ORACLE.json
 * ORACLE.json is tests/js/tok_oracle.cjs's output for the same corpus; the
 * driver tests/tokenizer/diff.sh builds all three files. */
#include "test.h"
#include "tokenizer/tokenizer.h"

static const char *gguf_path, *corpus_path, *oracle_path;

static json_t *load_json(const char *path)
{
    cv_buf b = { 0 };
    cv_err err = { 0 };
    json_t *j = NULL;
    if (cv_read_file(path, &b, 1u << 30, &err) == 0) {
        json_error_t je;
        j = json_loadb(b.data, b.len, 0, &je);
        if (!j)
            fprintf(stderr, "%s: %s\n", path, je.text);
    } else {
        fprintf(stderr, "%s\n", err.msg);
    }
    cv_buf_free(&b);
    return j;
}

static void show(const char *what, const char *s, size_t n)
{
    cv_buf b = { 0 };
    cv_buf_put_json_str(&b, s, n);
    fprintf(stderr, "    %s: %.300s\n", what, b.data);
    cv_buf_free(&b);
}

TEST(every_corpus_string_matches_the_reference_tokenizer)
{
    cv_tok *t = NULL;
    cv_err err = { 0 };
    CHECK_MSG(cv_tok_load_file(gguf_path, &t, &err) == 0, "%s", err.msg);
    json_t *corpus = load_json(corpus_path), *oracle = load_json(oracle_path);
    CHECK(corpus && oracle);
    if (!t || !corpus || !oracle)
        goto done;
    CHECK_EQ_INT(json_array_size(corpus), json_array_size(oracle));
    size_t n = json_array_size(corpus), id_ok = 0, text_ok = 0, stream_ok = 0, shown = 0;
    for (size_t i = 0; i < n && i < json_array_size(oracle); i++) {
        json_t *js = json_array_get(corpus, i);
        const char *s = json_string_value(js);
        size_t len = json_string_length(js);
        json_t *o = json_array_get(oracle, i);
        json_t *oids = json_object_get(o, "ids");
        json_t *otext = json_object_get(o, "text");

        cv_tok_ids ids = { 0 };
        CHECK(cv_tok_encode(t, s, len, CV_TOK_PARSE_SPECIAL, &ids, &err) == 0);
        bool same = ids.n == json_array_size(oids);
        for (size_t k = 0; same && k < ids.n; k++)
            same = ids.ids[k] == json_integer_value(json_array_get(oids, k));
        id_ok += same;

        cv_buf one = { 0 }, streamed = { 0 };
        cv_tok_decode(t, ids.ids, ids.n, 0, &one, NULL);
        bool text_same = one.len == json_string_length(otext) && memcmp(one.data ? one.data : "", json_string_value(otext), one.len) == 0;
        text_ok += text_same;

        cv_tok_stream st;
        cv_tok_stream_init(&st, t, 0);
        bool valid = true;
        for (size_t k = 0; k < ids.n; k++) {
            size_t before = streamed.len;
            cv_tok_stream_feed(&st, ids.ids[k], &streamed, NULL);
            valid = valid && cv_utf8_valid(streamed.data + before, streamed.len - before);
        }
        cv_tok_stream_flush(&st, &streamed);
        bool stream_same = valid && streamed.len == one.len && memcmp(streamed.data ? streamed.data : "", one.data ? one.data : "", one.len) == 0;
        stream_ok += stream_same;

        if ((!same || !text_same || !stream_same) && shown++ < 12) {
            fprintf(stderr, "  string %zu differs (ids %s, text %s, stream %s):\n", i, same ? "ok" : "DIFFER",
                    text_same ? "ok" : "DIFFER", stream_same ? "ok" : "DIFFER");
            show("input", s, len);
            cv_buf b = { 0 };
            for (size_t k = 0; k < ids.n && k < 40; k++)
                cv_buf_printf(&b, "%d ", ids.ids[k]);
            fprintf(stderr, "    corvid: %s\n", b.data ? b.data : "");
            cv_buf_reset(&b);
            for (size_t k = 0; k < json_array_size(oids) && k < 40; k++)
                cv_buf_printf(&b, "%lld ", (long long)json_integer_value(json_array_get(oids, k)));
            fprintf(stderr, "    oracle: %s\n", b.data ? b.data : "");
            cv_buf_free(&b);
            if (!text_same) {
                show("corvid text", one.data ? one.data : "", one.len);
                show("oracle text", json_string_value(otext), json_string_length(otext));
            }
        }
        cv_buf_free(&one);
        cv_buf_free(&streamed);
        cv_tok_ids_free(&ids);
    }
    printf("%s: %zu strings: ids identical %zu, text identical %zu, stream = one-shot %zu\n", gguf_path, n, id_ok,
           text_ok, stream_ok);
    CHECK_EQ_INT(id_ok, n);
    CHECK_EQ_INT(text_ok, n);
    CHECK_EQ_INT(stream_ok, n);
    CHECK(n >= 2000);
done:
    json_decref(corpus);
    json_decref(oracle);
    cv_tok_destroy(t);
}


/* The imported vocabulary knows its end-of-generation tokens: the server
 * stops on every one of them. */
TEST(end_of_generation_tokens_are_known)
{
    static const struct {
        const char *file_part;
        const char *eog[3];
    } cases[] = {
        { "qwen3", { "<|im_end|>", "<|endoftext|>" } },
        { "llama3", { "<|eot_id|>", "<|end_of_text|>" } }, /* Llama 3.0: no <|eom_id|> */
        { "deepseek_v3", { "<｜end▁of▁sentence｜>" } },
        { "gptoss", { "<|return|>", "<|call|>", "<|endoftext|>" } },
    };
    cv_tok *t = NULL;
    CHECK(cv_tok_load_file(gguf_path, &t, NULL) == 0);
    for (size_t c = 0; t && c < CV_ARRAY_LEN(cases); c++) {
        if (!strstr(gguf_path, cases[c].file_part) || (c == 0 && strstr(gguf_path, "qwen35")))
            continue;
        for (int k = 0; k < 3 && cases[c].eog[k]; k++) {
            int32_t id = cv_tok_find(t, cv_str_of(cases[c].eog[k]));
            CHECK_MSG(id >= 0 && cv_tok_is_eog(t, id), "%s: %s is not an end-of-generation token", gguf_path,
                      cases[c].eog[k]);
        }
        CHECK(cv_tok_eot(t) >= 0 && cv_tok_is_eog(t, cv_tok_eot(t)));
    }
    cv_tok_destroy(t);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_tok_diff VOCAB.gguf CORPUS.json ORACLE.json\n");
        return 2;
    }
    gguf_path = argv[1], corpus_path = argv[2], oracle_path = argv[3];
    RUN(every_corpus_string_matches_the_reference_tokenizer);
    RUN(end_of_generation_tokens_are_known);
    return test_report();
}
