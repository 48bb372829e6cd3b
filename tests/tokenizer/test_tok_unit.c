/* test_tok_unit — tokenizer properties that no fixture pins down: hostile
 * input (invalid UTF-8, NUL bytes, 10 MB of one character, repeated
 * patterns) with the work bounded by operation counts, special-token
 * parsing, end-of-generation ids, the streaming detokenizer's holding of
 * partial characters, thread safety of one shared cv_tok, and malformed
 * vocabulary metadata. */
#include <pthread.h>
#include <unistd.h>

#include "test.h"
#include "tokenizer/tok_int.h"

static cv_tok *load(const char *rel)
{
    cv_tok *t = NULL;
    cv_err err = { 0 };
    int rc = cv_tok_load_file(test_data(rel), &t, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    return t;
}

static int load_mem(cv_gguf_writer *w, cv_tok **out, cv_err *err);

/* gpt-2's vocabulary under another pre-tokenizer name (the Llama 3 / Qwen 2
 * regexes need no vocabulary of their own to be exercised). */
static cv_tok *gpt2_with_pre(const char *pre)
{
    cv_gguf *src = NULL;
    CHECK(cv_gguf_open(test_data("vocab/ggml-vocab-gpt-2.gguf"), &src, NULL) == 0);
    if (!src)
        return NULL;
    cv_gguf_writer *w = cv_gguf_writer_create();
    for (int64_t i = 0; i < cv_gguf_n_kv(src); i++) {
        cv_str k = cv_gguf_kv_key(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(src, i));
    }
    cv_gguf_writer_set_str(w, "tokenizer.ggml.pre", cv_str_of(pre));
    cv_tok *t = NULL;
    cv_err err = { 0 };
    CHECK_MSG(load_mem(w, &t, &err) == 0, "%s", err.msg);
    cv_gguf_writer_destroy(w);
    cv_gguf_close(src);
    return t;
}

static const char *const vocabs[] = {
    "vocab/ggml-vocab-gpt-2.gguf",     "vocab/ggml-vocab-llama-spm.gguf",    "vocab/ggml-vocab-bert-bge.gguf",
    "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-starcoder.gguf",
};

/* Raw pieces concatenated: the exact bytes the ids stand for. */
static void raw_bytes(const cv_tok *t, const cv_tok_ids *ids, cv_buf *out)
{
    for (size_t i = 0; i < ids->n; i++)
        cv_tok_piece(t, ids->ids[i], 0, out, NULL);
}

TEST(invalid_utf8_and_nul_bytes_encode_and_byte_level_round_trips_exactly)
{
    cv_rng r;
    cv_rng_seed(&r, 7);
    for (size_t v = 0; v < CV_ARRAY_LEN(vocabs); v++) {
        cv_tok *t = load(vocabs[v]);
        if (!t)
            continue;
        for (int k = 0; k < 300; k++) {
            char s[64];
            size_t n = (size_t)cv_rng_below(&r, sizeof s);
            for (size_t i = 0; i < n; i++) {
                /* bias toward bytes that make broken sequences */
                uint64_t x = cv_rng_below(&r, 8);
                s[i] = (char)(x < 3 ? 0x80 + cv_rng_below(&r, 0x80) : x < 4 ? 0 : x < 5 ? ' ' : cv_rng_below(&r, 256));
            }
            cv_tok_ids ids = { 0 };
            CHECK(cv_tok_encode(t, s, n, CV_TOK_PARSE_SPECIAL, &ids, NULL) == 0);
            cv_buf text = { 0 };
            CHECK(cv_tok_decode(t, ids.ids, ids.n, CV_TOK_AT_START, &text, NULL) == 0);
            CHECK(cv_utf8_valid(text.data ? text.data : "", text.len));
            if (cv_tok_get_kind(t) == CV_TOK_BPE) {
                /* Some vocabularies cannot spell bytes that never occur in
                 * UTF-8 (0xFF, 0xC0, ...): those, and only those, drop out. */
                char want[64 * 64];
                size_t nw = 0;
                for (size_t i = 0; i < n; i++) {
                    cv_str u = cv_tok_text(t, t->unk);
                    if (t->byte_id[(unsigned char)s[i]] >= 0)
                        want[nw++] = s[i];
                    else if (t->unk >= 0)
                        memcpy(want + nw, u.ptr, u.len), nw += u.len;
                }
                cv_buf raw = { 0 };
                raw_bytes(t, &ids, &raw);
                bool same = raw.len == nw && (nw == 0 || !memcmp(raw.data, want, nw));
                CHECK_MSG(same, "%s: bytes do not round-trip (case %d)", vocabs[v], k);
                if (!same && getenv("TOK_DEBUG")) {
                    for (size_t i = 0; i < n; i++) fprintf(stderr, "%02x ", (unsigned char)s[i]);
                    fprintf(stderr, "| ");
                    for (size_t i = 0; i < raw.len; i++) fprintf(stderr, "%02x ", (unsigned char)raw.data[i]);
                    fprintf(stderr, "\n");
                }
                cv_buf_free(&raw);
            } else if (cv_tok_get_kind(t) == CV_TOK_SPM) {
                /* byte fallback keeps every byte; spaces came back as ▁ */
                cv_buf raw = { 0 };
                raw_bytes(t, &ids, &raw);
                CHECK(n == 0 || (raw.len == n + 1 && raw.data[0] == ' ' && !memcmp(raw.data + 1, s, n)));
                cv_buf_free(&raw);
            }
            cv_buf_free(&text);
            cv_tok_ids_free(&ids);
        }
        cv_tok_destroy(t);
    }
}

static size_t work_of(const cv_tok *t, const char *s, size_t n, size_t *n_ids)
{
    cv_tok_ids ids = { 0 };
    size_t work = 0;
    CHECK(tok_encode_work(t, s, n, CV_TOK_PARSE_SPECIAL, &ids, &work, NULL) == 0);
    if (n_ids)
        *n_ids = ids.n;
    cv_tok_ids_free(&ids);
    return work;
}

static void fill_pattern(cv_buf *b, const char *pat, size_t n)
{
    cv_buf_reset(b);
    size_t pl = strlen(pat);
    while (b->len + pl <= n)
        cv_buf_append(b, pat, pl);
}

/* The work (regex matches, merge candidates pushed and popped, lookups) for
 * 8x the input is at most ~9x: no pattern makes any encoder quadratic. */
TEST(hostile_inputs_cost_work_linear_in_their_size)
{
    static const char *const pats[] = { "a", " ", "\n", "1", "é", "😀", "ab", " \n", "<|", "'s", "\xff", "\0",
                                        "a1 ", "\t\t\n", "<fim_prefix>" };
    cv_buf small = { 0 }, big = { 0 };
    const size_t S = 16 << 10, B = 128 << 10;
    for (size_t v = 0; v < CV_ARRAY_LEN(vocabs) + 2; v++) {
        cv_tok *t = v < CV_ARRAY_LEN(vocabs) ? load(vocabs[v]) : gpt2_with_pre(v == CV_ARRAY_LEN(vocabs) ? "qwen2" : "llama-bpe");
        if (!t)
            continue;
        const char *name = v < CV_ARRAY_LEN(vocabs) ? vocabs[v] : cv_tok_pre_name(t);
        for (size_t p = 0; p < CV_ARRAY_LEN(pats); p++) {
            const char *pat = pats[p];
            if (p == 11) {
                /* NUL bytes: build by hand, strlen would stop */
                cv_buf_reset(&small);
                cv_buf_reset(&big);
                for (size_t i = 0; i < S; i++)
                    cv_buf_putc(&small, 0);
                for (size_t i = 0; i < B; i++)
                    cv_buf_putc(&big, 0);
            } else {
                fill_pattern(&small, pat, S);
                fill_pattern(&big, pat, B);
            }
            size_t ws = work_of(t, small.data, small.len, NULL), wb = work_of(t, big.data, big.len, NULL);
            double ratio = (double)wb / (double)(ws ? ws : 1);
            CHECK_MSG(ratio < 9.0, "%s pattern %zu: work grows %.2fx for 8x input (%zu -> %zu)", name, p, ratio, ws,
                      wb);
            CHECK_MSG(wb < 40 * big.len + 1000, "%s pattern %zu: %zu operations for %zu bytes", name, p, wb, big.len);
        }
        cv_tok_destroy(t);
    }
    cv_buf_free(&small);
    cv_buf_free(&big);
}

TEST(ten_megabytes_of_one_character_encode_and_decode_back)
{
    cv_tok *t = load("vocab/ggml-vocab-gpt-2.gguf");
    if (!t)
        return;
    size_t n = 10u << 20;
    char *s = malloc(n);
    memset(s, 'a', n);
    cv_tok_ids ids = { 0 };
    size_t work = 0;
    CHECK(tok_encode_work(t, s, n, 0, &ids, &work, NULL) == 0);
    CHECK(ids.n > 0 && ids.n < n / 2);
    CHECK_MSG(work < 8 * n, "%zu operations for %zu bytes", work, n);
    cv_buf back = { 0 };
    CHECK(cv_tok_decode(t, ids.ids, ids.n, 0, &back, NULL) == 0);
    CHECK(back.len == n && !memcmp(back.data, s, n));
    cv_buf_free(&back);
    cv_tok_ids_free(&ids);
    free(s);
    cv_tok_destroy(t);
}

TEST(the_input_limit_is_enforced_before_reading)
{
    cv_tok *t = load("vocab/ggml-vocab-gpt-2.gguf");
    if (!t)
        return;
    cv_tok_ids ids = { 0 };
    cv_err err = { 0 };
    /* the length is checked before a byte is read */
    CHECK(cv_tok_encode(t, "x", (size_t)CV_MAX_TOK_INPUT + 1, 0, &ids, &err) == CV_ELIMIT);
    CHECK(strstr(err.msg, "at most") != NULL);
    CHECK(ids.n == 0);
    cv_tok_destroy(t);
}

static bool has_id(const cv_tok_ids *v, int32_t id)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->ids[i] == id)
            return true;
    return false;
}

TEST(control_tokens_come_from_text_only_with_parse_special)
{
    cv_tok *t = load("vocab/ggml-vocab-starcoder.gguf");
    if (!t)
        return;
    int32_t fim = cv_tok_find(t, CV_STR("<fim_prefix>"));
    CHECK(fim >= 0 && cv_tok_type(t, fim) == CV_TOKTYPE_CONTROL);
    const char *s = "x<fim_prefix>y <fim_prefix";
    cv_tok_ids a = { 0 }, b = { 0 };
    cv_tok_encode(t, s, strlen(s), 0, &a, NULL);
    cv_tok_encode(t, s, strlen(s), CV_TOK_PARSE_SPECIAL, &b, NULL);
    CHECK(!has_id(&a, fim));
    CHECK(has_id(&b, fim));
    /* the unparsed text still decodes to itself */
    cv_buf back = { 0 };
    cv_tok_decode(t, a.ids, a.n, 0, &back, NULL);
    CHECK_EQ_STR(back.data, s);
    /* skip-special drops the control token's text */
    cv_buf_reset(&back);
    cv_tok_decode(t, b.ids, b.n, CV_TOK_SKIP_SPECIAL, &back, NULL);
    CHECK_EQ_STR(back.data, "xy <fim_prefix");
    cv_buf_free(&back);
    cv_tok_ids_free(&a);
    cv_tok_ids_free(&b);
    cv_tok_destroy(t);

    /* USER_DEFINED tokens are matched without parse_special (deepseek-llm's
     * added single characters), as the reference tokenizer does. */
    t = load("vocab/ggml-vocab-deepseek-llm.gguf");
    if (!t)
        return;
    int32_t o = cv_tok_find(t, CV_STR("ø"));
    CHECK(o >= 0 && cv_tok_type(t, o) == CV_TOKTYPE_USER_DEFINED);
    cv_tok_encode(t, "ø", strlen("ø"), 0, &a, NULL);
    CHECK(a.n == 1 && a.ids[0] == o);
    cv_tok_ids_free(&a);
    cv_tok_destroy(t);
}

TEST(add_special_puts_bos_and_eos_where_the_vocabulary_says)
{
    cv_tok *t = load("vocab/ggml-vocab-llama-spm.gguf");
    if (t) {
        cv_tok_ids v = { 0 };
        cv_tok_encode(t, "Hello", 5, CV_TOK_ADD_SPECIAL, &v, NULL);
        CHECK(v.n >= 2 && v.ids[0] == 1 && v.ids[v.n - 1] != 2);
        CHECK(cv_tok_adds_bos(t) && !cv_tok_adds_eos(t));
        CHECK(cv_tok_is_eog(t, 2) && !cv_tok_is_eog(t, 1));
        size_t n = 0;
        CHECK(cv_tok_count(t, "Hello", 5, CV_TOK_ADD_SPECIAL, &n, NULL) == 0 && n == v.n);
        cv_tok_ids_free(&v);
        /* empty text with BOS is just BOS; without, nothing */
        cv_tok_encode(t, "", 0, CV_TOK_ADD_SPECIAL, &v, NULL);
        CHECK(v.n == 1 && v.ids[0] == 1);
        cv_tok_ids_free(&v);
        cv_tok_encode(t, "", 0, 0, &v, NULL);
        CHECK(v.n == 0);
        cv_tok_ids_free(&v);
        cv_tok_destroy(t);
    }
    t = load("vocab/ggml-vocab-bert-bge.gguf");
    if (t) {
        cv_tok_ids v = { 0 };
        cv_tok_encode(t, "Hello", 5, CV_TOK_ADD_SPECIAL, &v, NULL);
        CHECK(v.n == 3 && v.ids[0] == 101 && v.ids[2] == 102); /* [CLS] hello [SEP] */
        cv_tok_ids_free(&v);
        cv_tok_destroy(t);
    }
    t = load("vocab/ggml-vocab-phi-3.gguf");
    if (t) {
        int32_t end = cv_tok_find(t, CV_STR("<|end|>"));
        CHECK(end >= 0 && cv_tok_is_eog(t, end) && cv_tok_is_eog(t, cv_tok_eos(t)));
        CHECK_EQ_INT(cv_tok_eot(t), end);
        cv_tok_destroy(t);
    }
}

TEST(stream_holds_partial_characters_and_flush_repairs_them)
{
    cv_tok *t = load("vocab/ggml-vocab-gpt-2.gguf");
    if (!t)
        return;
    const char *s = "h\xC3\xA9llo \xF0\x9F\x98\x80!"; /* héllo 😀! */
    cv_tok_ids ids = { 0 };
    cv_tok_encode(t, s, strlen(s), 0, &ids, NULL);
    cv_tok_stream st;
    cv_tok_stream_init(&st, t, 0);
    cv_buf all = { 0 };
    int held = 0;
    for (size_t i = 0; i < ids.n; i++) {
        cv_buf chunk = { 0 };
        CHECK(cv_tok_stream_feed(&st, ids.ids[i], &chunk, NULL) == 0);
        CHECK(cv_utf8_valid(chunk.data ? chunk.data : "", chunk.len));
        held += st.n_held > 0;
        cv_buf_append(&all, chunk.data ? chunk.data : "", chunk.len);
        cv_buf_free(&chunk);
    }
    cv_tok_stream_flush(&st, &all);
    CHECK_EQ_STR(all.data, s);
    CHECK(held > 0); /* the emoji spans byte-level tokens */
    /* a sequence that never completes becomes one U+FFFD at flush */
    cv_tok_stream_init(&st, t, 0);
    cv_buf_reset(&all);
    int32_t f0 = t->byte_id[0xF0], a = t->byte_id['a'];
    cv_tok_stream_feed(&st, f0, &all, NULL);
    CHECK(all.len == 0 && st.n_held == 1);
    cv_tok_stream_flush(&st, &all);
    CHECK_EQ_STR(all.data, "\xEF\xBF\xBD");
    /* a broken sequence followed by ASCII: U+FFFD then the letter, at once */
    cv_tok_stream_init(&st, t, 0);
    cv_buf_reset(&all);
    cv_tok_stream_feed(&st, f0, &all, NULL);
    cv_tok_stream_feed(&st, a, &all, NULL);
    CHECK_EQ_STR(all.data, "\xEF\xBF\xBD" "a");
    /* out-of-range ids are refused without touching the state */
    cv_err err = { 0 };
    CHECK(cv_tok_stream_feed(&st, cv_tok_n_vocab(t), &all, &err) == CV_EINVAL);
    CHECK(cv_tok_stream_feed(&st, -1, &all, NULL) == CV_EINVAL);
    int32_t bad[] = { 1, 99999999 };
    cv_buf_reset(&all);
    CHECK(cv_tok_decode(t, bad, 2, 0, &all, NULL) == CV_EINVAL);
    cv_buf_free(&all);
    cv_tok_ids_free(&ids);
    cv_tok_destroy(t);
}

TEST(spm_decoding_at_start_drops_the_added_space_once)
{
    cv_tok *t = load("vocab/ggml-vocab-llama-spm.gguf");
    if (!t)
        return;
    const char *s = "  two leading spaces";
    cv_tok_ids ids = { 0 };
    cv_tok_encode(t, s, strlen(s), CV_TOK_ADD_SPECIAL, &ids, NULL);
    cv_buf a = { 0 }, b = { 0 };
    cv_tok_decode(t, ids.ids, ids.n, CV_TOK_AT_START, &a, NULL);
    CHECK_EQ_STR(a.data, "<s>  two leading spaces");
    cv_tok_decode(t, ids.ids, ids.n, CV_TOK_AT_START | CV_TOK_SKIP_SPECIAL, &b, NULL);
    CHECK_EQ_STR(b.data, "  two leading spaces");
    cv_buf_free(&a);
    cv_buf_free(&b);
    cv_tok_ids_free(&ids);
    cv_tok_destroy(t);
}

typedef struct thread_job {
    const cv_tok *t;
    const char *text;
    size_t n_expected;
    uint64_t hash_expected;
    int bad;
} thread_job;

static uint64_t hash_ids(const cv_tok_ids *v)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < v->n; i++)
        h = (h ^ (uint32_t)v->ids[i]) * 1099511628211ull;
    return h;
}

static void *encode_loop(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 30; i++) {
        cv_tok_ids v = { 0 };
        cv_tok_encode(j->t, j->text, strlen(j->text), CV_TOK_ADD_SPECIAL | CV_TOK_PARSE_SPECIAL, &v, NULL);
        j->bad += v.n != j->n_expected || hash_ids(&v) != j->hash_expected;
        cv_tok_ids_free(&v);
    }
    return NULL;
}

/* count_tokens bursts: many threads, one shared read-only tokenizer. */
TEST(one_tokenizer_serves_many_threads_at_once)
{
    cv_tok *t = load("vocab/ggml-vocab-deepseek-coder.gguf");
    if (!t)
        return;
    const char *text = "def f(x):\n    return x ** 2  # 平方 😀\n<｜begin▁of▁sentence｜>int main() { return 0; }";
    cv_tok_ids v = { 0 };
    cv_tok_encode(t, text, strlen(text), CV_TOK_ADD_SPECIAL | CV_TOK_PARSE_SPECIAL, &v, NULL);
    thread_job jobs[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        jobs[i] = (thread_job){ t, text, v.n, hash_ids(&v), 0 };
        pthread_create(&th[i], NULL, encode_loop, &jobs[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].bad, 0);
    }
    cv_tok_ids_free(&v);
    cv_tok_destroy(t);
}

/* ---- malformed vocabularies ---- */

static int load_mem(cv_gguf_writer *w, cv_tok **out, cv_err *err)
{
    cv_buf b = { 0 };
    int rc = cv_gguf_writer_to_buf(w, &b, err);
    cv_gguf *g = NULL;
    if (rc == 0)
        rc = cv_gguf_open_memory(b.data, b.len, "test.gguf", &g, err);
    if (rc == 0)
        rc = cv_tok_load(g, out, err);
    cv_gguf_close(g);
    cv_buf_free(&b);
    return rc;
}

TEST(malformed_vocabulary_metadata_is_refused_with_the_key_named)
{
    cv_str toks[] = { CV_STR("a"), CV_STR("b"), CV_STR("ab") };
    int32_t types3[] = { 1, 1, 1 }, types2[] = { 1, 1 };
    cv_str bad_merge[] = { CV_STR("ab") };
    struct {
        const char *what, *expect;
        int code;
    } cases[] = {
        { "no model", "tokenizer.ggml.model", CV_ENOTFOUND },
        { "unknown model", "not supported", CV_EUNSUPPORTED },
        { "no tokens", "tokenizer.ggml.tokens", CV_ECORRUPT },
        { "short token_type", "token_type", CV_ECORRUPT },
        { "merge without space", "merges", CV_ECORRUPT },
        { "unknown pre", "tokenizer.ggml.pre", CV_EUNSUPPORTED },
    };
    for (size_t c = 0; c < CV_ARRAY_LEN(cases); c++) {
        cv_gguf_writer *w = cv_gguf_writer_create();
        if (c != 0)
            cv_gguf_writer_set_str(w, "tokenizer.ggml.model", c == 1 ? CV_STR("t5") : CV_STR("gpt2"));
        if (c != 2)
            cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 3, toks);
        cv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", CV_GGUF_INT32, c == 3 ? 2 : 3, c == 3 ? types2 : types3);
        if (c == 4)
            cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", 1, bad_merge);
        if (c == 5)
            cv_gguf_writer_set_str(w, "tokenizer.ggml.pre", CV_STR("no-such-pre"));
        cv_tok *t = NULL;
        cv_err err = { 0 };
        int rc = load_mem(w, &t, &err);
        CHECK_MSG(rc == cases[c].code && strstr(err.msg, cases[c].expect), "%s: rc %d, \"%s\"", cases[c].what, rc,
                  err.msg);
        CHECK(t == NULL);
        cv_tok_destroy(t);
        cv_gguf_writer_destroy(w);
    }
    /* out-of-range special ids are dropped, not trusted */
    cv_gguf_writer *w = cv_gguf_writer_create();
    cv_gguf_writer_set_str(w, "tokenizer.ggml.model", CV_STR("gpt2"));
    cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 3, toks);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1000);
    cv_tok *t = NULL;
    CHECK(load_mem(w, &t, NULL) == 0);
    if (t) {
        CHECK_EQ_INT(cv_tok_eos(t), -1);
        cv_tok_ids v = { 0 };
        cv_tok_encode(t, "abc", 3, CV_TOK_ADD_SPECIAL, &v, NULL); /* no byte tokens: the vocabulary cannot spell c */
        CHECK(v.n >= 1);
        cv_tok_ids_free(&v);
    }
    cv_tok_destroy(t);
    cv_gguf_writer_destroy(w);
}


/* The hand-written ASCII matcher for the Llama 3 / Qwen 2 regex splits
 * exactly as PCRE2 does: the same vocabulary with and without it gives the
 * same ids on random text mixing every ASCII class with the non-ASCII
 * characters the fast path must hand over (letters, digits, spaces, ſ). */
TEST(the_ascii_fast_path_splits_exactly_as_the_regex)
{
    static const char *const alphabet[] = {
        "a", "Z", "q", "0", "7", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "'", "'s", "'S", "'re", "'LL",
        "'ve", "'d", "'m", "'t", ".", ",", "{", "}", "_", "-", "/", "\"", "<|", "é", "中", "٣", "\u2009", "\u00a0",
        "\u3000", "\xc2\x85", "\ufeff", "\u017f", "\u0301", "😀", "\u2028", "ß", "ǅ", "x", "123", "4567",
    };
    for (int pre = 0; pre < 2; pre++) {
        cv_tok *t = gpt2_with_pre(pre ? "qwen2" : "llama-bpe");
        if (!t)
            continue;
        CHECK(t->pre->fast_digits > 0);
        tok_pre_def slow = *t->pre;
        slow.fast_digits = 0;
        const tok_pre_def *fast = t->pre;
        cv_rng r;
        cv_rng_seed(&r, 11 + pre);
        int differ = 0;
        for (int k = 0; k < 8000; k++) {
            cv_buf b = { 0 };
            int n = 1 + (int)cv_rng_below(&r, 24);
            for (int i = 0; i < n; i++)
                cv_buf_puts(&b, alphabet[cv_rng_below(&r, CV_ARRAY_LEN(alphabet))]);
            cv_tok_ids a = { 0 }, c = { 0 };
            t->pre = fast;
            cv_tok_encode(t, b.data, b.len, 0, &a, NULL);
            t->pre = &slow;
            cv_tok_encode(t, b.data, b.len, 0, &c, NULL);
            bool same = a.n == c.n && (a.n == 0 || !memcmp(a.ids, c.ids, a.n * sizeof(int32_t)));
            if (!same && differ++ < 5) {
                cv_buf j = { 0 };
                cv_buf_put_json_str(&j, b.data, b.len);
                fprintf(stderr, "  fast path differs on %s\n", j.data);
                cv_buf_free(&j);
            }
            cv_tok_ids_free(&a);
            cv_tok_ids_free(&c);
            cv_buf_free(&b);
        }
        t->pre = fast;
        CHECK_EQ_INT(differ, 0);
        cv_tok_destroy(t);
    }
}

int main(void)
{
    RUN(malformed_vocabulary_metadata_is_refused_with_the_key_named);
    test_require_data();
    RUN(invalid_utf8_and_nul_bytes_encode_and_byte_level_round_trips_exactly);
    RUN(hostile_inputs_cost_work_linear_in_their_size);
    RUN(ten_megabytes_of_one_character_encode_and_decode_back);
    RUN(the_input_limit_is_enforced_before_reading);
    RUN(control_tokens_come_from_text_only_with_parse_special);
    RUN(add_special_puts_bos_and_eos_where_the_vocabulary_says);
    RUN(stream_holds_partial_characters_and_flush_repairs_them);
    RUN(spm_decoding_at_start_drops_the_added_space_once);
    RUN(one_tokenizer_serves_many_threads_at_once);
    RUN(the_ascii_fast_path_splits_exactly_as_the_regex);
    return test_report();
}
