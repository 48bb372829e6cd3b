/* test_gguf.c — the GGUF reader and writer: a round trip through every
 * metadata type, every real file in testdata opening cleanly, a file
 * truncated at every offset and mutated at random failing with clear
 * errors (run under ASan), targeted corruptions each caught by name, and the
 * llama2.c importer (stories260K, and its vocabulary conversion checked
 * against llama.cpp's own GGUF of the same Llama 2 vocabulary). */
#include <dirent.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

/* Builds a small file with every value type and three tensors. */
static void build_sample(cv_buf *out, uint32_t alignment)
{
    static float f32[2 * 64];
    static uint16_t f16[32];
    static uint8_t q4[18 * 4];
    for (int i = 0; i < 128; i++) f32[i] = (float)i * 0.5f;
    for (int i = 0; i < 32; i++) f16[i] = (uint16_t)(0x3C00 + i);
    for (int i = 0; i < (int)sizeof q4; i++) q4[i] = (uint8_t)i;
    cv_gguf_writer *w = cv_gguf_writer_create();
    if (alignment) cv_gguf_writer_set_alignment(w, alignment);
    cv_gguf_writer_set_str(w, "general.architecture", CV_STR("llama"));
    cv_gguf_writer_set_u32(w, "u32", 4000000000u);
    cv_gguf_writer_set_i32(w, "i32", -7);
    cv_gguf_writer_set_u64(w, "u64", 1ull << 40);
    cv_gguf_writer_set_f32(w, "f32", 1.5f);
    cv_gguf_writer_set_bool(w, "flag", true);
    int16_t i16[3] = { -1, 2, -3 };
    cv_gguf_writer_set_arr(w, "arr.i16", CV_GGUF_INT16, 3, i16);
    double f64[2] = { 0.25, -8.0 };
    cv_gguf_writer_set_arr(w, "arr.f64", CV_GGUF_FLOAT64, 2, f64);
    uint8_t u8[4] = { 0, 1, 255, 7 };
    cv_gguf_writer_set_arr(w, "arr.u8", CV_GGUF_UINT8, 4, u8);
    cv_str strs[3] = { CV_STR("a"), CV_STR(""), CV_STR("\xE2\x96\x81hello") };
    cv_gguf_writer_set_str_arr(w, "arr.str", 3, strs);
    cv_gguf_writer_set_i32(w, "replaced", 1);
    cv_gguf_writer_set_i32(w, "replaced", 2);
    int64_t ne_a[2] = { 64, 2 }, ne_b[1] = { 32 }, ne_c[2] = { 64, 2 };
    CHECK(cv_gguf_writer_add_tensor(w, "a.weight", CV_GGML_F32, 2, ne_a, f32, sizeof f32, NULL) == 0);
    CHECK(cv_gguf_writer_add_tensor(w, "b.weight", CV_GGML_F16, 1, ne_b, f16, sizeof f16, NULL) == 0);
    CHECK(cv_gguf_writer_add_tensor(w, "c.weight", CV_GGML_Q4_0, 2, ne_c, q4, sizeof q4, NULL) == 0);
    cv_err e = { 0 };
    CHECK(cv_gguf_writer_add_tensor(w, "a.weight", CV_GGML_F32, 2, ne_a, f32, sizeof f32, &e) == CV_EINVAL);
    int64_t bad[1] = { 33 };
    CHECK(cv_gguf_writer_add_tensor(w, "d", CV_GGML_Q4_0, 1, bad, q4, 18, &e) == CV_EINVAL);
    CHECK(cv_gguf_writer_to_buf(w, out, NULL) == 0);
    cv_gguf_writer_destroy(w);
}

TEST(writer_round_trips_every_value_type)
{
    cv_buf b = { 0 };
    build_sample(&b, 0);
    cv_gguf *g = NULL;
    cv_err e = { 0 };
    CHECK(cv_gguf_open_memory(b.data, b.len, "sample", &g, &e) == 0);
    if (!g) { fprintf(stderr, "%s\n", e.msg); cv_buf_free(&b); return; }
    CHECK(cv_gguf_version(g) == 3);
    int64_t i = 0;
    double f = 0;
    bool flag = false;
    cv_str s;
    CHECK(cv_gguf_get_int(g, "u32", &i, NULL) == 0 && i == 4000000000ll);
    CHECK(cv_gguf_get_int(g, "i32", &i, NULL) == 0 && i == -7);
    CHECK(cv_gguf_get_int(g, "u64", &i, NULL) == 0 && i == (1ll << 40));
    CHECK(cv_gguf_get_int(g, "replaced", &i, NULL) == 0 && i == 2);
    CHECK(cv_gguf_get_float(g, "f32", &f, NULL) == 0 && f == 1.5);
    CHECK(cv_gguf_get_bool(g, "flag", &flag, NULL) == 0 && flag);
    CHECK(cv_gguf_get_str(g, "general.architecture", &s, NULL) == 0 && cv_str_eqz(s, "llama"));
    CHECK(cv_gguf_get_int(g, "missing", &i, NULL) == CV_ENOTFOUND);
    CHECK(cv_gguf_get_int(g, "general.architecture", &i, &e) == CV_ECORRUPT && strstr(e.msg, "general.architecture"));
    const cv_gguf_value *a = NULL;
    CHECK(cv_gguf_get_arr(g, "arr.i16", CV_GGUF_INT16, &a, NULL) == 0 && a->arr.n == 3);
    CHECK(a && cv_gguf_arr_int(a, 2) == -3);
    CHECK(cv_gguf_get_arr(g, "arr.f64", -1, &a, NULL) == 0 && cv_gguf_arr_float(a, 1) == -8.0);
    CHECK(cv_gguf_get_arr(g, "arr.u8", CV_GGUF_UINT8, &a, NULL) == 0 && cv_gguf_arr_int(a, 2) == 255);
    CHECK(cv_gguf_get_arr(g, "arr.str", CV_GGUF_STRING, &a, NULL) == 0 && a->arr.n == 3);
    CHECK(a && cv_str_eqz(a->arr.strs[2], "\xE2\x96\x81hello") && a->arr.strs[1].len == 0);
    CHECK(cv_gguf_get_arr(g, "arr.str", CV_GGUF_INT32, &a, &e) == CV_ECORRUPT);
    CHECK(cv_gguf_n_tensors(g) == 3);
    const cv_gguf_tensor *t = cv_gguf_find_tensor(g, "a.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 2 && t->n_bytes == 512 && ((const float *)t->data)[3] == 1.5f);
    t = cv_gguf_find_tensor(g, "c.weight");
    CHECK(t && t->type == CV_GGML_Q4_0 && t->n_bytes == 72 && ((const uint8_t *)t->data)[5] == 5);
    CHECK(t && ((uintptr_t)t->data - (uintptr_t)b.data) % 32 == 0);
    CHECK(cv_gguf_find_tensor(g, "nope") == NULL);
    cv_gguf_close(g);
    cv_buf_free(&b);
}

TEST(writer_honours_a_custom_alignment)
{
    cv_buf b = { 0 };
    build_sample(&b, 256);
    cv_gguf *g = NULL;
    CHECK(cv_gguf_open_memory(b.data, b.len, "aligned", &g, NULL) == 0);
    if (g) {
        CHECK(cv_gguf_alignment(g) == 256);
        for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++)
            CHECK(cv_gguf_tensor_at(g, i)->offset % 256 == 0);
        cv_gguf_close(g);
    }
    cv_buf_free(&b);
}

/* Every prefix of a valid file must fail cleanly (or, past the last tensor
 * byte, succeed), and say which file. */
TEST(truncation_at_every_offset_fails_cleanly)
{
    cv_buf b = { 0 };
    build_sample(&b, 0);
    int failures = 0;
    for (size_t n = 0; n < b.len; n++) {
        char *copy = malloc(n ? n : 1);
        memcpy(copy, b.data, n);
        cv_gguf *g = NULL;
        cv_err e = { 0 };
        int rc = cv_gguf_open_memory(copy, n, "trunc.gguf", &g, &e);
        if (rc == 0) {
            failures++;
            cv_gguf_close(g);
        } else if (!strstr(e.msg, "trunc.gguf") || rc != CV_ECORRUPT) {
            CHECK_MSG(0, "prefix %zu: rc %d message '%s'", n, rc, e.msg);
        }
        free(copy);
    }
    CHECK_EQ_INT(failures, 0);
    cv_buf_free(&b);
}

TEST(random_mutations_never_crash)
{
    cv_buf b = { 0 };
    build_sample(&b, 0);
    cv_rng r;
    cv_rng_seed(&r, 1234);
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char *copy = malloc(b.len);
        memcpy(copy, b.data, b.len);
        int flips = 1 + (int)cv_rng_below(&r, 4);
        /* Mutate mostly the header and index, where the parser looks. */
        size_t span = CV_MIN(b.len, (size_t)600);
        for (int k = 0; k < flips; k++)
            copy[cv_rng_below(&r, span)] ^= (char)(1u << cv_rng_below(&r, 8));
        cv_gguf *g = NULL;
        cv_err e = { 0 };
        if (cv_gguf_open_memory(copy, b.len, "mut.gguf", &g, &e) == 0) {
            /* A file that opens must be safe to walk completely. */
            for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
                const cv_gguf_value *v = cv_gguf_kv_value(g, i);
                if (v->type == CV_GGUF_ARRAY && v->arr.type == CV_GGUF_STRING)
                    for (uint64_t j = 0; j < v->arr.n; j++)
                        (void)v->arr.strs[j].ptr[v->arr.strs[j].len ? v->arr.strs[j].len - 1 : 0];
            }
            for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
                const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
                if (t->n_bytes) (void)((volatile const char *)t->data)[t->n_bytes - 1];
            }
            ok++;
            cv_gguf_close(g);
        } else {
            bad++;
            CHECK(e.msg[0] != 0);
        }
        free(copy);
    }
    CHECK(bad > 1000);
    printf("  mutations: %d opened, %d rejected\n", ok, bad);
    cv_buf_free(&b);
}

/* Byte offsets of fields in the sample file, found by searching. */
static size_t find(const cv_buf *b, const char *needle, size_t n)
{
    for (size_t i = 0; i + n <= b->len; i++)
        if (!memcmp(b->data + i, needle, n))
            return i;
    return 0;
}

static int open_mutated(const cv_buf *b, size_t off, const void *bytes, size_t n, cv_err *e)
{
    char *copy = malloc(b->len);
    memcpy(copy, b->data, b->len);
    memcpy(copy + off, bytes, n);
    cv_gguf *g = NULL;
    cv_err_clear(e);
    int rc = cv_gguf_open_memory(copy, b->len, "bad.gguf", &g, e);
    cv_gguf_close(g);
    free(copy);
    return rc;
}

TEST(targeted_corruptions_are_named)
{
    cv_buf b = { 0 };
    build_sample(&b, 0);
    cv_err e;
    uint32_t v32;
    uint64_t v64;
    CHECK(open_mutated(&b, 0, "GGUX", 4, &e) == CV_ECORRUPT && strstr(e.msg, "not a GGUF file"));
    v32 = 1;
    CHECK(open_mutated(&b, 4, &v32, 4, &e) == CV_EUNSUPPORTED && strstr(e.msg, "version 1"));
    v32 = 4;
    CHECK(open_mutated(&b, 4, &v32, 4, &e) == CV_ECORRUPT && strstr(e.msg, "version 4"));
    v64 = 1ull << 40;
    CHECK(open_mutated(&b, 16, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "metadata keys"));
    CHECK(open_mutated(&b, 8, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "tensors"));
    /* The key "u32" is preceded by its u64 length 3; make the length huge. */
    size_t k = find(&b, "u32", 3) - 8;
    v64 = 1ull << 62;
    CHECK(open_mutated(&b, k, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "length"));
    /* Value type of "u32" → 77. */
    v32 = 77;
    CHECK(open_mutated(&b, k + 8 + 3, &v32, 4, &e) == CV_ECORRUPT && strstr(e.msg, "value type 77"));
    /* Rename "i32" to "u32": duplicate key. */
    size_t k2 = find(&b, "i32", 3);
    CHECK(open_mutated(&b, k2, "u32", 3, &e) == CV_ECORRUPT && strstr(e.msg, "twice"));
    /* Tensor "b.weight": name, n_dims, ne[0], type, offset. */
    size_t t = find(&b, "b.weight", 8) + 8;
    v32 = 5;
    CHECK(open_mutated(&b, t, &v32, 4, &e) == CV_ECORRUPT && strstr(e.msg, "dims"));
    v64 = (uint64_t)-4;
    CHECK(open_mutated(&b, t + 4, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "negative"));
    v32 = 31; /* a removed type id */
    CHECK(open_mutated(&b, t + 12, &v32, 4, &e) == CV_ECORRUPT && strstr(e.msg, "unknown type id 31"));
    v64 = 520; /* not a multiple of 32 */
    CHECK(open_mutated(&b, t + 16, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "alignment"));
    v64 = 0; /* on top of a.weight */
    CHECK(open_mutated(&b, t + 16, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "overlap"));
    v64 = 1ull << 30;
    CHECK(open_mutated(&b, t + 16, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "past the end"));
    /* Rename c.weight to a.weight: duplicate tensor. */
    size_t c = find(&b, "c.weight", 8);
    CHECK(open_mutated(&b, c, "a.weight", 8, &e) == CV_ECORRUPT && strstr(e.msg, "twice"));
    /* Row of a Q4_0 tensor not a multiple of 32: c.weight ne[0] 64 → 48. */
    v64 = 48;
    CHECK(open_mutated(&b, c + 8 + 4, &v64, 8, &e) == CV_ECORRUPT && strstr(e.msg, "multiple of its block"));
    cv_buf_free(&b);
}

TEST(missing_file_is_not_found)
{
    cv_gguf *g;
    cv_err e = { 0 };
    CHECK(cv_gguf_open("/nonexistent/x.gguf", &g, &e) == CV_ENOTFOUND && strstr(e.msg, "/nonexistent/x.gguf"));
}

/* Every GGUF under testdata opens, and its basic facts hold. */
TEST(every_real_file_opens)
{
    const char *dirs[] = { "vocab", "reference/models" };
    int n_files = 0;
    for (int d = 0; d < 2; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", test_data(dirs[d]));
        DIR *dp = opendir(dir);
        CHECK(dp != NULL);
        if (!dp) continue;
        struct dirent *de;
        while ((de = readdir(dp))) {
            size_t n = strlen(de->d_name);
            if (n < 5 || strcmp(de->d_name + n - 5, ".gguf")) continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            cv_gguf *g = NULL;
            cv_err e = { 0 };
            int rc = cv_gguf_open(path, &g, &e);
            CHECK_MSG(rc == 0, "%s", e.msg);
            if (rc) continue;
            n_files++;
            cv_str arch;
            CHECK(cv_gguf_get_str(g, "general.architecture", &arch, NULL) == 0);
            const cv_gguf_value *tokens;
            CHECK(cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &tokens, NULL) == 0);
            if (d == 1) CHECK(cv_gguf_find_tensor(g, "token_embd.weight") != NULL);
            cv_gguf_close(g);
        }
        closedir(dp);
    }
    CHECK(n_files == 12 + 16);
}

/* The same real file truncated at sampled offsets fails cleanly. */
TEST(real_model_truncated_fails_cleanly)
{
    cv_buf b = { 0 };
    cv_err e = { 0 };
    CHECK(cv_read_file(test_data("reference/models/tiny-qwen3-gpt2-Q4_K_M.gguf"), &b, 1u << 26, &e) == 0);
    for (size_t n = 0; n < b.len; n += 1 + n / 7) {
        cv_gguf *g = NULL;
        char *copy = malloc(n ? n : 1);
        memcpy(copy, b.data, n);
        CHECK_MSG(cv_gguf_open_memory(copy, n, "tiny.gguf", &g, &e) != 0, "prefix %zu opened", n);
        cv_gguf_close(g);
        free(copy);
    }
    cv_buf_free(&b);
}

#include "../../src/gguf/import_llama2c.c"

/* llama2.c's export of the Llama 2 vocabulary, converted by the importer,
 * equals llama.cpp's GGUF of the same vocabulary token for token. */
TEST(llama2c_vocab_conversion_matches_llamacpp_gguf)
{
    mapped m = { 0 };
    l2c_vocab v = { 0 };
    cv_err e = { 0 };
    CHECK(map_file(test_data("tokenizers/llama2-tokenizer.llama2c.bin"), &m, &e) == 0);
    CHECK(read_vocab("llama2c.bin", &m, 32000, &v, &e) == 0);
    cv_gguf *g = NULL;
    CHECK(cv_gguf_open(test_data("vocab/ggml-vocab-llama-spm.gguf"), &g, &e) == 0);
    const cv_gguf_value *tokens = NULL, *types = NULL, *scores = NULL;
    if (g) {
        cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &tokens, NULL);
        cv_gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &types, NULL);
        cv_gguf_get_arr(g, "tokenizer.ggml.scores", -1, &scores, NULL);
    }
    CHECK(tokens && types && scores && tokens->arr.n == 32000);
    int mismatched = 0;
    for (int i = 0; tokens && types && scores && i < 32000 && v.tokens; i++) {
        if (!cv_str_eq(v.tokens[i], tokens->arr.strs[i]) || v.types[i] != cv_gguf_arr_int(types, i) ||
            v.scores[i] != (float)cv_gguf_arr_float(scores, (uint64_t)i)) {
            if (mismatched++ < 5)
                fprintf(stderr, "token %d: '%.*s' type %d vs '%.*s' type %lld\n", i, (int)v.tokens[i].len,
                        v.tokens[i].ptr, v.types[i], (int)tokens->arr.strs[i].len, tokens->arr.strs[i].ptr,
                        (long long)cv_gguf_arr_int(types, i));
        }
    }
    CHECK_EQ_INT(mismatched, 0);
    cv_gguf_close(g);
    free_vocab(&v);
    unmap_file(&m);
}

TEST(llama2c_import_writes_a_loadable_stories260k)
{
    char out[] = "/tmp/cv_test_stories_XXXXXX";
    int fd = mkstemp(out);
    close(fd);
    cv_err e = { 0 };
    int rc = cv_import_llama2c(test_data("models/stories260K.bin"), test_data("models/tok512.bin"), out, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    cv_gguf *g = NULL;
    CHECK(cv_gguf_open(out, &g, &e) == 0);
    if (g) {
        int64_t x = 0;
        CHECK(cv_gguf_get_int(g, "llama.embedding_length", &x, NULL) == 0 && x == 64);
        CHECK(cv_gguf_get_int(g, "llama.attention.head_count_kv", &x, NULL) == 0 && x == 4);
        CHECK(cv_gguf_get_int(g, "llama.feed_forward_length", &x, NULL) == 0 && x == 172);
        CHECK(cv_gguf_n_tensors(g) == 1 + 5 * 9 + 1); /* tied: no output.weight */
        const cv_gguf_tensor *t = cv_gguf_find_tensor(g, "blk.4.ffn_down.weight");
        CHECK(t && t->ne[0] == 172 && t->ne[1] == 64);
        t = cv_gguf_find_tensor(g, "blk.0.attn_k.weight");
        CHECK(t && t->ne[0] == 64 && t->ne[1] == 32);
        const cv_gguf_value *tok = NULL;
        CHECK(cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &tok, NULL) == 0 && tok->arr.n == 512);
        if (tok) {
            CHECK(cv_str_eqz(tok->arr.strs[1], "<s>"));
            CHECK(cv_str_eqz(tok->arr.strs[3], "<0x00>"));
        }
        cv_gguf_close(g);
    }
    /* A checkpoint cut short is refused with both sizes named. */
    cv_buf ck = { 0 };
    cv_read_file(test_data("models/stories260K.bin"), &ck, 1u << 24, NULL);
    char cut[] = "/tmp/cv_test_cut_XXXXXX";
    fd = mkstemp(cut);
    CHECK(write(fd, ck.data, ck.len - 100) == (ssize_t)(ck.len - 100));
    close(fd);
    rc = cv_import_llama2c(cut, test_data("models/tok512.bin"), out, &e);
    CHECK(rc == CV_ECORRUPT && strstr(e.msg, "bytes of weights"));
    unlink(cut);
    unlink(out);
    cv_buf_free(&ck);
}

int main(void)
{
    RUN(writer_round_trips_every_value_type);
    RUN(writer_honours_a_custom_alignment);
    RUN(truncation_at_every_offset_fails_cleanly);
    RUN(random_mutations_never_crash);
    RUN(targeted_corruptions_are_named);
    RUN(missing_file_is_not_found);
    test_require_data();
    RUN(every_real_file_opens);
    RUN(real_model_truncated_fails_cleanly);
    RUN(llama2c_vocab_conversion_matches_llamacpp_gguf);
    RUN(llama2c_import_writes_a_loadable_stories260k);
    return test_report();
}
