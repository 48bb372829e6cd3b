/* test_cli_models.c — the store and the resolver without a network: every
 * MODEL form (file, alias, ALIAS:QUANT, ORG/REPO[:QUANT], ORG/REPO/FILE,
 * hub and plain URLs, store names), hostile arguments, where the store is
 * ($CORVID_MODELS, $XDG_DATA_HOME, $HOME), quant names and the file picker,
 * SHA-256 against FIPS vectors and against the reference models' manifest,
 * what `ls` reads from a GGUF (on the real reference models), the alias
 * table's rows, and the client setups that recipe and launch share. */
#include <ctype.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#include "cli/models.h"
#include "model/synth.h"

static char tmp_root[256];

static void put_file(const char *path, const void *data, size_t len)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(dir, 0755);
            *s = '/';
        }
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

/* ---- where the store is ---- */

TEST(store_folder_follows_corvid_models_then_xdg_then_home)
{
    char out[PATH_MAX];
    cv_err err = { 0 };
    setenv("CORVID_MODELS", "/data/models/", 1);
    CHECK(cv_models_dir(out, sizeof out, &err) == 0);
    CHECK_EQ_STR(out, "/data/models"); /* trailing slash dropped */
    setenv("CORVID_MODELS", "relative/path", 1);
    CHECK_EQ_INT(cv_models_dir(out, sizeof out, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "absolute") != NULL);
    unsetenv("CORVID_MODELS");
    setenv("XDG_DATA_HOME", "/xdg", 1);
    CHECK(cv_models_dir(out, sizeof out, &err) == 0);
    CHECK_EQ_STR(out, "/xdg/corvid/models");
    setenv("XDG_DATA_HOME", "not-absolute", 1); /* the XDG spec says: ignore it */
    setenv("HOME", "/home/u", 1);
    CHECK(cv_models_dir(out, sizeof out, &err) == 0);
    CHECK_EQ_STR(out, "/home/u/.local/share/corvid/models");
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    CHECK_EQ_INT(cv_models_dir(out, sizeof out, &err), CV_EINVAL);
    char tiny[8];
    setenv("CORVID_MODELS", "/a/path/longer/than/eight", 1);
    CHECK_EQ_INT(cv_models_dir(tiny, sizeof tiny, &err), CV_ELIMIT);
}

/* ---- the resolver ---- */

TEST(every_model_form_resolves_to_its_place_in_the_store)
{
    char store[512];
    snprintf(store, sizeof store, "%s/resolve", tmp_root);
    setenv("CORVID_MODELS", store, 1);
    static const struct {
        const char *spec;
        cv_model_kind kind;
        const char *repo, *file, *quant, *rel; /* rel: path below the store ("" = not known yet) */
    } cases[] = {
        { "qwen3-0.6b", CV_MODEL_REMOTE, "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "",
          "Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf" },
        { "QWEN3-0.6B", CV_MODEL_REMOTE, "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "",
          "Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf" },
        { "qwen3-0.6b:Q8_0", CV_MODEL_REMOTE, "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "Q8_0",
          "Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf" },
        { "qwen3-coder-30b-a3b:q6_k", CV_MODEL_REMOTE, "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF", "", "Q6_K", "" },
        { "bartowski/Llama-3.2-3B-Instruct-GGUF", CV_MODEL_REMOTE, "bartowski/Llama-3.2-3B-Instruct-GGUF", "", "",
          "" },
        { "bartowski/Llama-3.2-3B-Instruct-GGUF:q5_k_m", CV_MODEL_REMOTE, "bartowski/Llama-3.2-3B-Instruct-GGUF", "",
          "Q5_K_M", "" },
        { "hf.co/org/repo:IQ4_XS", CV_MODEL_REMOTE, "org/repo", "", "IQ4_XS", "" },
        { "org/repo/sub/model-Q4_0.gguf", CV_MODEL_REMOTE, "org/repo", "sub/model-Q4_0.gguf", "",
          "org/repo/sub/model-Q4_0.gguf" },
        { "https://huggingface.co/org/repo/resolve/main/m-Q4_K_M.gguf?download=true", CV_MODEL_REMOTE, "org/repo",
          "m-Q4_K_M.gguf", "", "org/repo/m-Q4_K_M.gguf" },
        { "https://mirror.example:8443/files/x/model.gguf", CV_MODEL_REMOTE, "", "model.gguf", "",
          "mirror.example_8443/model.gguf" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_model_ref r;
        cv_err err = { 0 };
        int rc = cv_model_resolve(cases[i].spec, &r, &err);
        CHECK_MSG(rc == 0, "%s: %s", cases[i].spec, err.msg);
        if (rc)
            continue;
        CHECK_EQ_INT(r.kind, cases[i].kind);
        CHECK_EQ_STR(r.repo, cases[i].repo);
        CHECK_EQ_STR(r.file, cases[i].file);
        CHECK_EQ_STR(r.quant, cases[i].quant);
        CHECK(!r.local);
        char want[PATH_MAX] = "";
        if (cases[i].rel[0])
            snprintf(want, sizeof want, "%s/%s", store, cases[i].rel);
        CHECK_EQ_STR(r.path, want);
    }
    cv_model_ref r;
    cv_err err;
    CHECK(cv_model_resolve("qwen3-0.6b", &r, &err) == 0 && r.alias && !strcmp(r.alias->name, "qwen3-0.6b"));
    CHECK(cv_model_resolve("https://huggingface.co/o/r/resolve/v1.2/f.gguf", &r, &err) == 0);
    CHECK_EQ_STR(r.revision, "v1.2");
}

TEST(pulled_files_are_found_by_alias_repo_quant_and_file_name)
{
    char store[512], path[PATH_MAX];
    snprintf(store, sizeof store, "%s/found", tmp_root);
    setenv("CORVID_MODELS", store, 1);
    snprintf(path, sizeof path, "%s/Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", store);
    put_file(path, "GGUF", 4);
    snprintf(path, sizeof path, "%s/org/repo/model-Q4_K_M.gguf", store);
    put_file(path, "GGUF", 4);
    snprintf(path, sizeof path, "%s/org/repo/model-Q8_0.gguf", store);
    put_file(path, "GGUF", 4);
    snprintf(path, sizeof path, "%s/org/repo/other-Q6_K.gguf.part", store); /* partials are not models */
    put_file(path, "GG", 2);
    static const struct { const char *spec; cv_model_kind kind; const char *rel; } cases[] = {
        { "qwen3-0.6b", CV_MODEL_REMOTE, "Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf" },
        { "org/repo", CV_MODEL_REMOTE, "org/repo/model-Q4_K_M.gguf" },      /* default quant among local */
        { "org/repo:Q8_0", CV_MODEL_REMOTE, "org/repo/model-Q8_0.gguf" },
        { "model-Q8_0", CV_MODEL_STORE, "org/repo/model-Q8_0.gguf" },       /* a name in the store */
        { "Qwen3-0.6B-Q8_0.gguf", CV_MODEL_STORE, "Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_model_ref r;
        cv_err err = { 0 };
        int rc = cv_model_resolve(cases[i].spec, &r, &err);
        CHECK_MSG(rc == 0, "%s: %s", cases[i].spec, err.msg);
        char want[PATH_MAX];
        snprintf(want, sizeof want, "%s/%s", store, cases[i].rel);
        CHECK_MSG(r.local && !strcmp(r.path, want), "%s: local %d path %s", cases[i].spec, r.local, r.path);
        CHECK_EQ_INT(r.kind, cases[i].kind);
    }
    /* A path to a file is that file, wherever it is. */
    cv_model_ref r;
    cv_err err = { 0 };
    snprintf(path, sizeof path, "%s/org/repo/model-Q8_0.gguf", store);
    CHECK(cv_model_resolve(path, &r, &err) == 0 && r.kind == CV_MODEL_FILE && r.local);
    /* A remote quant not in the store stays remote. */
    CHECK(cv_model_resolve("org/repo:Q5_K_M", &r, &err) == 0 && !r.local && r.file[0] == 0);
    /* What info/tokenize/template use: a stored model by any of its names,
     * anything else passed through untouched. */
    char buf[PATH_MAX];
    snprintf(path, sizeof path, "%s/org/repo/model-Q8_0.gguf", store);
    CHECK_EQ_STR(cv_model_local_or_self("org/repo:Q8_0", buf, sizeof buf), path);
    CHECK_EQ_STR(cv_model_local_or_self("model-Q8_0", buf, sizeof buf), path);
    CHECK_EQ_STR(cv_model_local_or_self("not-pulled/repo:Q8_0", buf, sizeof buf), "not-pulled/repo:Q8_0");
    CHECK_EQ_STR(cv_model_local_or_self("./missing.gguf", buf, sizeof buf), "./missing.gguf");
    CHECK_EQ_STR(cv_model_local_or_self(tmp_root, buf, sizeof buf), tmp_root); /* exists: untouched */
    /* Two files of one name in different repos: ambiguous, say how to pick. */
    snprintf(path, sizeof path, "%s/other/repo/model-Q8_0.gguf", store);
    put_file(path, "GGUF", 4);
    CHECK_EQ_INT(cv_model_resolve("model-Q8_0", &r, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "ORG/REPO/FILE.gguf") != NULL);
}

TEST(hostile_or_unknown_model_arguments_are_refused_with_the_reason)
{
    char store[512];
    snprintf(store, sizeof store, "%s/hostile", tmp_root);
    setenv("CORVID_MODELS", store, 1);
    char longspec[CV_MAX_MODEL_SPEC + 16];
    memset(longspec, 'a', sizeof longspec - 1);
    longspec[sizeof longspec - 1] = 0;
    const struct { const char *spec; int code; const char *says; } cases[] = {
        { "", CV_EINVAL, "empty" },
        { "no-such-model", CV_ENOTFOUND, "corvid ls --aliases" },
        { "./missing.gguf", CV_ENOTFOUND, "no such file" },
        { "/nonexistent/m.gguf", CV_ENOTFOUND, "no such file" },
        { "../org/repo", CV_ENOTFOUND, "no such file" },
        { "org/../repo:Q4_0", CV_EINVAL, "ORG/REPO" },
        { "org/.hidden", CV_EINVAL, "ORG/REPO" },
        { "org/repo/../../../etc/passwd.gguf", CV_EINVAL, ".gguf name inside the repo" },
        { "org/repo/sub//x.gguf", CV_EINVAL, ".gguf name inside the repo" },
        { "org/repo/notes.txt", CV_EINVAL, ".gguf" },
        { "org/repo:Q4$(rm)", CV_EINVAL, "QUANT" },
        { "qwen3-0.6b:Q8 0", CV_EINVAL, "QUANT" },
        { "qwen3-0.6b:Q4_K_M_THAT_IS_FAR_TOO_LONG_TO_BE_A_QUANT", CV_EINVAL, "too long" },
        { "org/re po", CV_EINVAL, "ORG/REPO" },
        { "ftp://host/x.gguf", CV_EINVAL, "http" },
        { "https://host", CV_EINVAL, "no path" },
        { "https://host/org/repo/resolve/main/../../x.gguf", CV_EINVAL, "cannot store" },
        { "https://host/", CV_EINVAL, "file name" },
        { "bad\x01name", CV_EINVAL, "control character" },
        { longspec, CV_ELIMIT, "bytes long" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_model_ref r;
        cv_err err = { 0 };
        int rc = cv_model_resolve(cases[i].spec, &r, &err);
        CHECK_MSG(rc == cases[i].code, "'%.60s': rc %d (%s), want %d", cases[i].spec, rc, err.msg, cases[i].code);
        CHECK_MSG(strstr(err.msg, cases[i].says) != NULL, "'%.60s': '%s' not in: %s", cases[i].spec, cases[i].says,
                  err.msg);
    }
    /* A folder is not a model. */
    cv_model_ref r;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_model_resolve(tmp_root, &r, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "folder") != NULL);
}

/* ---- quant names and the picker ---- */

TEST(quant_is_read_from_file_names_of_every_common_style)
{
    static const struct { const char *name, *quant; } cases[] = {
        { "Qwen3-0.6B-Q8_0.gguf", "Q8_0" },
        { "qwen2.5-coder-7b-instruct-q4_k_m.gguf", "Q4_K_M" },
        { "Meta-Llama-3.1-8B-Instruct-IQ4_XS.gguf", "IQ4_XS" },
        { "gpt-oss-20b-mxfp4.gguf", "MXFP4" },
        { "model.Q5_K_S.gguf", "Q5_K_S" },
        { "Qwen3-Coder-30B-A3B-Instruct-UD-Q4_K_XL.gguf", "Q4_K_XL" },
        { "tinyllama-1.1b-chat-v1.0.F16.gguf", "F16" },
        { "gemma-3-4b-it-BF16.gguf", "BF16" },
        { "big-Q4_K_M-00001-of-00003.gguf", "Q4_K_M" },
        { "sub/dir/m-IQ2_XXS.gguf", "IQ2_XXS" },
        { "model.gguf", "" },
        { "Q-learning-3B.gguf", "" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        char q[32];
        cv_model_quant_of_name(cases[i].name, q, sizeof q);
        CHECK_MSG(!strcmp(q, cases[i].quant), "%s: '%s', want '%s'", cases[i].name, q, cases[i].quant);
    }
}

TEST(picker_prefers_q4_k_m_matches_whole_tokens_and_skips_side_files)
{
    const char *repo[] = { "README.md", "mmproj-model-f16.gguf", "model-IQ4_K_M.gguf", "model-Q4_K_M.gguf",
                           "model-Q8_0.gguf", "model-Q4_K_S.gguf", "model-Q6_K-00001-of-00002.gguf",
                           "model-Q6_K-00002-of-00002.gguf", "imatrix.gguf" };
    int n = (int)CV_ARRAY_LEN(repo);
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "", "o/r", &err), 3);
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "q8_0", "o/r", &err), 4);
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "Q4_K_S", "o/r", &err), 5);
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "IQ4_K_M", "o/r", &err), 2);
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "Q6_K", "o/r", &err), CV_EUNSUPPORTED);
    CHECK(strstr(err.msg, "split") != NULL);
    CHECK_EQ_INT(cv_model_pick_file(repo, n, "F16", "o/r", &err), CV_ENOTFOUND); /* mmproj's F16 is not a model */
    CHECK_MSG(strstr(err.msg, "Q4_K_M") && strstr(err.msg, "IQ4_K_M") && strstr(err.msg, "Q4_K_S"), "%s", err.msg);
    const char *two[] = { "a-Q4_K_M.gguf", "b-Q4_K_M.gguf" };
    CHECK_EQ_INT(cv_model_pick_file(two, 2, "", "o/r", &err), CV_EINVAL);
    CHECK(strstr(err.msg, "a-Q4_K_M.gguf") && strstr(err.msg, "b-Q4_K_M.gguf"));
    const char *odd[] = { "weird-name.gguf" };
    CHECK_EQ_INT(cv_model_pick_file(odd, 1, "", "o/r", &err), 0); /* the only GGUF */
    const char *odd2[] = { "x-IQ1_S.gguf", "y-IQ2_M.gguf" };
    CHECK_EQ_INT(cv_model_pick_file(odd2, 2, "", "o/r", &err), CV_ENOTFOUND);
    CHECK(strstr(err.msg, "IQ1_S") && strstr(err.msg, "IQ2_M"));
    const char *none[] = { "README.md" };
    CHECK_EQ_INT(cv_model_pick_file(none, 1, "", "o/r", &err), CV_ENOTFOUND);
}

/* ---- sha256 ---- */

TEST(sha256_matches_fips_vectors_in_any_chunking)
{
    static const struct { const char *in; const char *hex; } v[] = {
        { "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        { "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
    };
    for (size_t i = 0; i < 2 * CV_ARRAY_LEN(v); i++) {
        for (size_t step = 1; step <= 65; step += 16) {
            cv_sha256 s;
            cv_sha256_init(&s);
            if (i >= CV_ARRAY_LEN(v))
                s.use_ni = false; /* the second pass: the portable path */
            size_t k = i % CV_ARRAY_LEN(v);
            size_t len = strlen(v[k].in);
            for (size_t o = 0; o < len; o += step)
                cv_sha256_update(&s, v[k].in + o, CV_MIN(step, len - o));
            char hex[65];
            cv_sha256_final(&s, hex);
            CHECK_MSG(!strcmp(hex, v[k].hex), "'%s' step %zu: %s", v[k].in, step, hex);
        }
    }
    /* One million 'a' (FIPS 180-2 appendix B.3), fed in odd pieces. */
    cv_sha256 s;
    cv_sha256_init(&s);
    char a[1001];
    memset(a, 'a', sizeof a);
    for (int i = 0; i < 1000; i++)
        cv_sha256_update(&s, a, i % 2 ? 999 : 1001);
    char hex[65];
    cv_sha256_final(&s, hex);
    CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256_extension_path_equals_the_portable_one_on_every_length)
{
    cv_sha256 probe;
    cv_sha256_init(&probe);
    if (!probe.use_ni)
        printf("  (this CPU has no SHA extensions: both runs below take the portable path)\n");
    cv_rng rng;
    cv_rng_seed(&rng, 42);
    unsigned char data[1100];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)cv_rng_u64(&rng);
    for (size_t len = 0; len <= sizeof data; len += (len < 200 ? 1 : 37)) {
        char a[65], b[65];
        cv_sha256 s;
        cv_sha256_init(&s);
        cv_sha256_update(&s, data, len / 3);
        cv_sha256_update(&s, data + len / 3, len - len / 3);
        cv_sha256_final(&s, a);
        cv_sha256_init(&s);
        s.use_ni = false;
        cv_sha256_update(&s, data, len);
        cv_sha256_final(&s, b);
        CHECK_MSG(!strcmp(a, b), "length %zu: %s vs %s", len, a, b);
    }
}

TEST(sha256_of_every_reference_model_matches_the_manifest)
{
    cv_buf b = { 0 };
    CHECK(cv_read_file(test_data("reference/manifest.json"), &b, 16u << 20, NULL) == 0);
    json_t *m = cv_json_parse(b.data, b.len, NULL);
    cv_buf_free(&b);
    json_t *models = json_object_get(m, "models");
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(models, k, v)
    {
        cv_buf f = { 0 };
        char rel[256];
        snprintf(rel, sizeof rel, "reference/%s", json_string_value(json_object_get(v, "file")));
        CHECK(cv_read_file(test_data(rel), &f, 64u << 20, NULL) == 0);
        cv_sha256 s;
        cv_sha256_init(&s);
        cv_sha256_update(&s, f.data, f.len);
        char hex[65];
        cv_sha256_final(&s, hex);
        CHECK_MSG(!strcmp(hex, json_string_value(json_object_get(v, "sha256"))), "%s: %s", k, hex);
        cv_buf_free(&f);
        n++;
    }
    CHECK_EQ_INT(n, 16);
    json_decref(m);
}

/* ---- what ls reads ---- */

TEST(facts_of_the_reference_models_are_what_their_headers_say)
{
    static const struct { const char *file, *arch, *quant; int64_t ctx; } cases[] = {
        { "tiny-qwen3-gpt2-Q4_K_M.gguf", "qwen3", "Q4_K_M", 2048 },
        { "tiny-qwen3-gpt2-Q8_0.gguf", "qwen3", "Q8_0", 2048 },
        { "tiny-qwen2-gpt2-F32.gguf", "qwen2", "F32", 2048 },
        { "tiny-llama-spm-Q5_K_M.gguf", "llama", "Q5_K_M", 2048 },
        { "tiny-llama-spm-F16.gguf", "llama", "F16", 2048 },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "reference/models/%s", cases[i].file);
        cv_model_facts f;
        cv_err err = { 0 };
        CHECK_MSG(cv_model_facts_read(test_data(rel), &f, &err) == 0, "%s: %s", cases[i].file, err.msg);
        CHECK_EQ_STR(f.arch, cases[i].arch);
        CHECK_EQ_STR(f.quant, cases[i].quant);
        CHECK_EQ_INT(f.n_ctx, cases[i].ctx);
    }
    /* Parameters are the tensors' elements: in the F32 file each takes 4
     * bytes, and the rest of the file is the header (the vocabulary). */
    cv_model_facts f;
    cv_err err = { 0 };
    CHECK(cv_model_facts_read(test_data("reference/models/tiny-qwen3-gpt2-F32.gguf"), &f, &err) == 0);
    struct stat st;
    stat(test_data("reference/models/tiny-qwen3-gpt2-F32.gguf"), &st);
    CHECK(f.n_params > 0 && f.n_params * 4 < st.st_size && st.st_size - f.n_params * 4 < (1 << 20));
    /* A file the reader rejects is an error, not a crash. */
    char bad[PATH_MAX];
    snprintf(bad, sizeof bad, "%s/bad.gguf", tmp_root);
    put_file(bad, "GGUF\x03\0\0\0garbage", 15);
    CHECK(cv_model_facts_read(bad, &f, &err) == CV_ECORRUPT);
    CHECK_EQ_STR(cv_model_ftype_name(15), "Q4_K_M");
    CHECK(cv_model_ftype_name(5) == NULL && cv_model_ftype_name(-1) == NULL && cv_model_ftype_name(1000) == NULL);
}

TEST(store_listing_walks_folders_sorts_and_skips_hidden_and_foreign_files)
{
    char store[512], p[PATH_MAX];
    snprintf(store, sizeof store, "%s/list", tmp_root);
    const char *files[] = { "b/r/z.gguf", "a/r/m.gguf", "a/r/m2.gguf.part", "a/r/.hidden.gguf", "a/r/notes.txt",
                            "deep/1/2/3/4/5/6/7/too-deep.gguf" };
    for (size_t i = 0; i < CV_ARRAY_LEN(files); i++) {
        snprintf(p, sizeof p, "%s/%s", store, files[i]);
        put_file(p, "GGUF", 4);
    }
    snprintf(p, sizeof p, "%s/a/r/m2.gguf.part.json", store);
    const char *meta = "{\"url\":\"u\",\"total\":100,\"etag\":\"\"}";
    put_file(p, meta, strlen(meta));
    cv_store_entry *v;
    int n;
    cv_err err = { 0 };
    CHECK(cv_store_list(store, &v, &n, &err) == 0);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK_EQ_STR(v[0].rel, "a/r/m.gguf");
        CHECK_EQ_STR(v[1].rel, "a/r/m2.gguf.part");
        CHECK(v[1].partial && v[1].part_total == 100 && v[1].bytes == 4);
        CHECK_EQ_STR(v[2].rel, "b/r/z.gguf");
    }
    free(v);
    /* A symlink loop is not followed. */
    snprintf(p, sizeof p, "%s/a/loop", store);
    CHECK(symlink(store, p) == 0);
    CHECK(cv_store_list(store, &v, &n, &err) == 0 && n == 3);
    free(v);
    /* An absent store is empty, not an error. */
    snprintf(p, sizeof p, "%s/absent", tmp_root);
    CHECK(cv_store_list(p, &v, &n, &err) == 0 && n == 0);
    free(v);
}

/* ---- the tables ---- */

TEST(alias_rows_are_well_formed_and_resolve_to_themselves)
{
    setenv("CORVID_MODELS", tmp_root, 1);
    for (int i = 0; i < cv_n_model_aliases; i++) {
        const cv_model_alias *a = &cv_model_aliases[i];
        char q[32];
        cv_model_quant_of_name(a->file, q, sizeof q);
        CHECK_MSG(q[0] != 0, "%s: file %s has no recognizable quant", a->name, a->file);
        CHECK_MSG(strchr(a->repo, '/') && strlen(a->file) > 5 && !strcmp(a->file + strlen(a->file) - 5, ".gguf"),
                  "%s: repo %s file %s", a->name, a->repo, a->file);
        CHECK_MSG(a->n_ctx >= 32768, "%s: context %d is too small for coding agents", a->name, (int)a->n_ctx);
        /* an embedding model samples nothing: its row has a pooling instead */
        CHECK_MSG(a->pooling ? a->temperature == 0 && a->pooling <= 3 && a->min_dims >= 0
                             : a->temperature > 0 && a->temperature <= 1.5f && a->top_p > 0 && a->top_p <= 1,
                  "%s: sampling or pooling", a->name);
        CHECK(cv_model_alias_find(a->name) == a);
        CHECK(cv_model_alias_by_file(a->repo, a->file) == a);
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcasecmp(cv_model_aliases[j].name, a->name), "duplicate alias %s", a->name);
        cv_model_ref r;
        cv_err err = { 0 };
        CHECK_MSG(cv_model_resolve(a->name, &r, &err) == 0 && r.alias == a, "%s: %s", a->name, err.msg);
    }
    const char *must[] = { "qwen3-0.6b", "qwen2.5-coder-7b", "llama3.2-3b", "qwen3-coder-30b-a3b", "qwen3-30b-a3b" };
    for (size_t i = 0; i < CV_ARRAY_LEN(must); i++)
        CHECK_MSG(cv_model_alias_find(must[i]) != NULL, "alias %s is missing", must[i]);
}

TEST(every_alias_runs_or_is_refused_before_its_download)
{
    /* A row corvid runs names an architecture the loader knows, and its
     * synth shape (where it has one) is that architecture's, and in the
     * file's quant mix every tensor takes a type the kernels compute; the
     * 30B MoE rows size like their 18.6 GB files, gpt-oss-20b like its 12.1. A row it cannot run is
     * refused by cv_model_pull with the reason before any network access
     * (the endpoint here accepts no connection). */
    setenv("CORVID_MODELS", tmp_root, 1);
    for (int i = 0; i < cv_n_model_aliases; i++) {
        const cv_model_alias *a = &cv_model_aliases[i];
        CHECK_MSG(a->arch && *a->arch, "%s: no architecture", a->name);
        cv_err err = { 0 };
        if (cv_model_alias_runnable(a, &err) == 0) {
            if (!a->shape)
                continue;
            const cv_model_shape *sh = cv_model_shape_find(a->shape);
            CHECK_MSG(sh && !strcmp(sh->arch, a->arch), "%s: shape %s is not a %s shape", a->name, a->shape, a->arch);
            char q[32], mix[32];
            cv_model_quant_of_name(a->file, q, sizeof q);
            for (size_t k = 0; k <= strlen(q); k++)
                mix[k] = (char)tolower((unsigned char)q[k]);
            if (!strcmp(mix, "q4_k_xl")) /* unsloth's dynamic 4-bit: Q4_K_M's mix, a few tensors raised */
                snprintf(mix, sizeof mix, "q4_k_m");
            size_t bytes = 0;
            cv_synth_params sp = { .arch = a->arch, .shape = a->shape, .dtype = mix, .seed = 1, .plan_only = true,
                                   .bytes_out = &bytes };
            CHECK_MSG(cv_model_synth(&sp, "/nonexistent/never-written.gguf", &err) == 0, "%s: %s", a->name, err.msg);
            if (!strcmp(a->shape, "qwen3-30b-a3b") || !strcmp(a->shape, "qwen3-coder-30b-a3b"))
                CHECK_MSG(bytes > 17e9 && bytes < 20e9, "%s: the %s mix of its shape takes %.2f GB", a->name, mix,
                          bytes / 1e9);
            /* GLM-4.7-Flash's Q4_K_M files take 18.3-18.5 GB (bartowski's and
             * a quantizer's baseline) */
            if (!strcmp(a->shape, "glm-4.7-flash"))
                CHECK_MSG(bytes > 17.5e9 && bytes < 19.5e9, "%s: the %s mix of its shape takes %.2f GB", a->name, mix,
                          bytes / 1e9);
            /* DeepSeek-V2-Lite-Chat's Q4_K_M files: 10.4 GB (mradermacher's,
             * second-state's) */
            if (!strcmp(a->shape, "deepseek-v2-lite"))
                CHECK_MSG(bytes > 9.8e9 && bytes < 11e9, "%s: %.2f GB", a->name, bytes / 1e9);
            /* The published Q4_K_M files: Gemma 4 26B-A4B ~16.9 GB, E4B 4.98
             * GB (its per-layer embedding's type differs), Devstral Small 2
             * ~14.3 GB */
            if (!strcmp(a->shape, "gemma4-26b-a4b"))
                CHECK_MSG(bytes > 16e9 && bytes < 18e9, "%s: %.2f GB", a->name, bytes / 1e9);
            if (!strcmp(a->shape, "gemma4-e4b"))
                CHECK_MSG(bytes > 4.5e9 && bytes < 5.6e9, "%s: %.2f GB", a->name, bytes / 1e9);
            if (!strcmp(a->shape, "devstral-small-2-24b"))
                CHECK_MSG(bytes > 13.5e9 && bytes < 15e9, "%s: %.2f GB", a->name, bytes / 1e9);
            /* ggml-org's file is 12.1 GB (11.27 GiB): MXFP4 experts, Q8_0 else */
            if (!strcmp(a->shape, "gpt-oss-20b"))
                CHECK_MSG(bytes > 11.8e9 && bytes < 12.4e9, "%s: the %s mix of its shape takes %.2f GB", a->name, mix,
                          bytes / 1e9);
            continue;
        }
        CHECK_MSG(strstr(err.msg, a->arch) && strstr(err.msg, "corvid runs"), "%s: %s", a->name, err.msg);
        cv_model_ref r;
        CHECK(cv_model_resolve(a->name, &r, &err) == 0);
        cv_pull_opts po = { .endpoint = "http://127.0.0.1:1" };
        cv_err perr = { 0 };
        CHECK_EQ_INT(cv_model_pull(&r, &po, NULL, &perr), CV_EUNSUPPORTED);
        CHECK_MSG(strstr(perr.msg, "cannot run") && strstr(perr.msg, "nothing was downloaded"), "%s: pull said %s",
                  a->name, perr.msg);
    }
}

static const char *env_of(const cv_client_setup *s, const char *name)
{
    for (int i = 0; i < s->n_env; i++)
        if (!strcmp(s->env_name[i], name))
            return s->env_value[i];
    return NULL;
}

static bool has_arg(const cv_client_setup *s, const char *a)
{
    for (int i = 0; i < s->n_args; i++)
        if (!strcmp(s->args[i], a))
            return true;
    return false;
}

TEST(client_setups_carry_the_details_clients_md_records)
{
    cv_client_params p = { .host = "127.0.0.1", .port = 8123, .model = "qwen3-0.6b", .api_key = "k\"ey", .n_ctx = 32768 };
    cv_client_setup s = { 0 };

    cv_client_find("claude")->setup(&p, &s);
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:8123"); /* no /v1 */
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_MODEL"), "qwen3-0.6b");
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_DEFAULT_HAIKU_MODEL"), "qwen3-0.6b");
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_AUTH_TOKEN"), "k\"ey");
    CHECK_EQ_STR(env_of(&s, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"), "32768");
    CHECK_EQ_STR(env_of(&s, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "4096");
    CHECK(s.n_unset == 1 && !strcmp(s.unset[0], "ANTHROPIC_API_KEY"));
    cv_client_setup_fini(&s);

    cv_client_find("codex")->setup(&p, &s);
    CHECK(has_arg(&s, "model=\"qwen3-0.6b\""));
    CHECK(has_arg(&s, "model_providers.corvid.base_url=\"http://127.0.0.1:8123/v1\""));
    CHECK(has_arg(&s, "model_providers.corvid.wire_api=\"responses\""));
    CHECK(has_arg(&s, "model_provider=\"corvid\""));
    CHECK_EQ_STR(env_of(&s, "CORVID_API_KEY"), "k\"ey");
    CHECK(strstr(s.file_body, "wire_api = \"responses\"") && strstr(s.file_body, "model = \"qwen3-0.6b\""));
    cv_client_setup_fini(&s);

    cv_client_params q = p;
    q.model = "we\"ird\\name"; /* TOML strings are escaped */
    cv_client_find("codex")->setup(&q, &s);
    CHECK(has_arg(&s, "model=\"we\\\"ird\\\\name\""));
    cv_client_setup_fini(&s);

    cv_client_find("opencode")->setup(&p, &s);
    const char *cfg = env_of(&s, "OPENCODE_CONFIG_CONTENT");
    json_t *j = cfg ? cv_json_parse(cfg, strlen(cfg), NULL) : NULL;
    CHECK(j != NULL);
    json_t *prov = json_object_get(json_object_get(j, "provider"), "corvid");
    CHECK_EQ_STR(json_string_value(json_object_get(prov, "npm")), "@ai-sdk/openai-compatible");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(prov, "options"), "baseURL")),
                 "http://127.0.0.1:8123/v1");
    json_t *lim = json_object_get(json_object_get(json_object_get(prov, "models"), "qwen3-0.6b"), "limit");
    CHECK_EQ_INT(JSON_INT(lim, "context"), 32768);
    CHECK_EQ_INT(JSON_INT(lim, "output"), 4096);
    CHECK_EQ_STR(json_string_value(json_object_get(j, "model")), "corvid/qwen3-0.6b");
    CHECK_EQ_STR(json_string_value(json_object_get(j, "small_model")), "corvid/qwen3-0.6b");
    json_decref(j);
    cv_client_setup_fini(&s);

    cv_client_find("qwen")->setup(&p, &s);
    CHECK_EQ_STR(env_of(&s, "OPENAI_BASE_URL"), "http://127.0.0.1:8123/v1");
    CHECK_EQ_STR(env_of(&s, "OPENAI_MODEL"), "qwen3-0.6b");
    CHECK(has_arg(&s, "--auth-type") && has_arg(&s, "openai"));
    CHECK(strstr(s.file_body, "\"selectedType\": \"openai\"") != NULL);
    cv_client_setup_fini(&s);

    cv_client_find("aider")->setup(&p, &s);
    CHECK_EQ_STR(env_of(&s, "OPENAI_API_BASE"), "http://127.0.0.1:8123/v1");
    CHECK(has_arg(&s, "openai/qwen3-0.6b"));
    cv_client_setup_fini(&s);

    cv_client_find("openai-sdk")->setup(&p, &s);
    CHECK_EQ_STR(env_of(&s, "OPENAI_BASE_URL"), "http://127.0.0.1:8123/v1");
    cv_client_setup_fini(&s);
    cv_client_find("anthropic-sdk")->setup(&p, &s);
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:8123");
    cv_client_setup_fini(&s);

    /* Without a known context no limits are invented; without a key a
     * placeholder goes out (clients refuse an empty key). */
    cv_client_params r = { .host = "127.0.0.1", .port = 8000, .model = "m" };
    cv_client_find("claude-code")->setup(&r, &s);
    CHECK(env_of(&s, "CLAUDE_CODE_MAX_CONTEXT_TOKENS") == NULL);
    CHECK_EQ_STR(env_of(&s, "ANTHROPIC_AUTH_TOKEN"), "corvid");
    cv_client_setup_fini(&s);
    CHECK(cv_client_find("no-such-client") == NULL);
    CHECK(cv_client_find("CLAUDE-CODE") != NULL);
}

int main(void)
{
    test_require_data();
    snprintf(tmp_root, sizeof tmp_root, "/tmp/cv_test_models_XXXXXX");
    if (!mkdtemp(tmp_root))
        return 1;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    RUN(store_folder_follows_corvid_models_then_xdg_then_home);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    RUN(every_model_form_resolves_to_its_place_in_the_store);
    RUN(pulled_files_are_found_by_alias_repo_quant_and_file_name);
    RUN(hostile_or_unknown_model_arguments_are_refused_with_the_reason);
    RUN(quant_is_read_from_file_names_of_every_common_style);
    RUN(picker_prefers_q4_k_m_matches_whole_tokens_and_skips_side_files);
    RUN(sha256_matches_fips_vectors_in_any_chunking);
    RUN(sha256_extension_path_equals_the_portable_one_on_every_length);
    RUN(sha256_of_every_reference_model_matches_the_manifest);
    RUN(facts_of_the_reference_models_are_what_their_headers_say);
    RUN(store_listing_walks_folders_sorts_and_skips_hidden_and_foreign_files);
    RUN(alias_rows_are_well_formed_and_resolve_to_themselves);
    RUN(every_alias_runs_or_is_refused_before_its_download);
    RUN(client_setups_carry_the_details_clients_md_records);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_root);
    return test_report();
}
