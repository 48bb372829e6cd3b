/* test_engine_reference.c — the forward pass against real numbers:
 *   - stories260K (a real trained llama2.c model, imported to GGUF here)
 *     generates, greedy from BOS, exactly the documented 256 ids;
 *   - every model of testdata/reference/ (llama untied SPM, qwen2 with bias
 *     and tied output, qwen3 with q/k norm and head_dim 64 != 256/8, in
 *     F32, F16 and nine quantized types) against llama.cpp's logits, with
 *     the tolerances that folder's README derives:
 *       F32 files: max|Δ| <= 1e-3 at len1/len17/len200, top-1 equal, all
 *         32 greedy tokens equal;
 *       F16/quantized through the fp32 reference path (weights dequantized
 *         at load): the same against the `.deq` twin's logits and greedy;
 *       the fast path (int8 activations) against the native logits:
 *         cos >= 0.998, KL <= 0.1, rms <= 0.5, top-1 where the reference
 *         margin > 1, and teacher-forced argmax over the 32 greedy steps
 *         wherever the reference margin >= 1;
 *       F16 fast path: max|Δ| <= 0.05 against the native logits. */
#include "ref_util.h"
#include "tokenizer/tokenizer.h"

#define REF "reference/"
#define REF2 "reference2/"

/* The sanitizer build runs every model and path on the short sequences
 * (memory safety of every dtype's code); the whole oracle (len200, all 32
 * greedy steps) runs in the release build, which this build's CTest also
 * drives (tests/engine/CMakeLists.txt). */
#ifdef CV_TEST_QUICK
#define N_SEQS 2
#define N_GREEDY 8
#else
#define N_SEQS 3
#define N_GREEDY 32
#endif

typedef struct ref_model {
    const char *dir;    /* REF or REF2 */
    const char *name;
    const char *family; /* sequences.json key */
} ref_model;

static const ref_model models[] = {
    { REF, "tiny-llama-spm-F32", "llama_spm" },    { REF, "tiny-llama-spm-F16", "llama_spm" },
    { REF, "tiny-llama-spm-Q8_0", "llama_spm" },   { REF, "tiny-llama-spm-Q6_K", "llama_spm" },
    { REF, "tiny-llama-spm-Q5_K_M", "llama_spm" }, { REF, "tiny-llama-spm-Q5_1", "llama_spm" },
    { REF, "tiny-llama-spm-Q5_0", "llama_spm" },   { REF, "tiny-llama-spm-Q4_K_M", "llama_spm" },
    { REF, "tiny-llama-spm-Q4_1", "llama_spm" },   { REF, "tiny-llama-spm-Q4_0", "llama_spm" },
    { REF, "tiny-qwen2-gpt2-F32", "gpt2" },        { REF, "tiny-qwen2-gpt2-Q8_0", "gpt2" },
    { REF, "tiny-qwen2-gpt2-Q4_K_M", "gpt2" },     { REF, "tiny-qwen3-gpt2-F32", "gpt2" },
    { REF, "tiny-qwen3-gpt2-Q8_0", "gpt2" },       { REF, "tiny-qwen3-gpt2-Q4_K_M", "gpt2" },
    /* reference2/: routed MoE (qwen3moe). */
    { REF2, "tiny-qwen3moe-gpt2-F32", "gpt2" },    { REF2, "tiny-qwen3moe-gpt2-Q8_0", "gpt2" },
    { REF2, "tiny-qwen3moe-gpt2-Q4_K_M", "gpt2" },
    /* reference2/: hybrids (Gated DeltaNet + gated attention; qwen35moe
     * adds routed experts and a shared one). */
    { REF2, "tiny-qwen35-gpt2-F32", "gpt2" },      { REF2, "tiny-qwen35-gpt2-Q8_0", "gpt2" },
    { REF2, "tiny-qwen35-gpt2-Q4_K_M", "gpt2" },   { REF2, "tiny-qwen35moe-gpt2-F32", "gpt2" },
    { REF2, "tiny-qwen35moe-gpt2-Q4_K_M", "gpt2" },
};

static const char *const seq_names[N_SEQS] = { "len1", "len17",
#if N_SEQS > 2
                                               "len200"
#endif
};

static json_t *g_seqs, *g_manifest, *g_manifest2;

static bool is_f32(const ref_model *rm) { return strstr(rm->name, "-F32") != NULL; }
static bool is_f16(const ref_model *rm) { return strstr(rm->name, "-F16") != NULL; }

static cv_engine *open_engine(const ref_model *rm, bool dequantize, cv_model **model)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%smodels/%s.gguf", rm->dir, rm->name);
    cv_model_params mp = { .dequantize = dequantize };
    cv_err err = { 0 };
    if (cv_model_open(test_data(rel), &mp, model, &err)) {
        CHECK_MSG(0, "%s: %s", rm->name, err.msg);
        return NULL;
    }
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 2, .n_batch = 256, .n_logits = 64 };
    cv_engine *e;
    if (cv_engine_create(*model, &ep, &e, &err)) {
        CHECK_MSG(0, "%s: %s", rm->name, err.msg);
        cv_model_close(*model);
        return NULL;
    }
    return e;
}

/* Exact comparison: our logits vs `<model><suffix>.<seq>.bin` (suffix "" or
 * ".deq") within 1e-3 and the same top-1; then the 32 greedy tokens. */
static void check_exact(const ref_model *rm, cv_engine *e, const char *suffix)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    float *ours = malloc((size_t)V * sizeof(float));
    char rel[256];
    for (size_t s = 0; s < CV_ARRAY_LEN(seq_names); s++) {
        int32_t n;
        int32_t *ids = ref_seq(g_seqs, rm->family, seq_names[s], &n);
        snprintf(rel, sizeof rel, "%slogits/%s%s.%s.bin", rm->dir, rm->name, suffix, seq_names[s]);
        float *ref = ref_f32(test_data(rel), V);
        CHECK_MSG(ref != NULL, "%s: cannot read %s", rm->name, rel);
        if (ref && ref_run(e, ids, n, NULL, ours) == 0) {
            ref_metrics m = ref_compare(ref, ours, V);
            printf("  %-24s%-5s %-6s max|d| %.2e  rms %.2e\n", rm->name, suffix, seq_names[s], m.max_abs, m.rms);
            CHECK_MSG(m.max_abs <= 1e-3, "%s%s %s: max|Δ| = %g > 1e-3 (rms %g)", rm->name, suffix, seq_names[s],
                      m.max_abs, m.rms);
            CHECK_MSG(m.top1_a == m.top1_b, "%s%s %s: top-1 %d, reference %d", rm->name, suffix, seq_names[s],
                      m.top1_b, m.top1_a);
        }
        free(ref);
        free(ids);
    }
    int32_t n17, ref_ids[32], got[32];
    float margins[32];
    int32_t *p17 = ref_seq(g_seqs, rm->family, "len17", &n17);
    snprintf(rel, sizeof rel, "%sgreedy/%s%s.len17.greedy32.txt", rm->dir, rm->name, suffix);
    CHECK_MSG(ref_greedy(test_data(rel), ref_ids, margins) == 0, "cannot read %s", rel);
    if (ref_greedy_run(e, p17, n17, N_GREEDY, got) == 0) {
        int same = 0;
        while (same < N_GREEDY && got[same] == ref_ids[same])
            same++;
        CHECK_MSG(same == N_GREEDY, "%s%s: greedy agrees for %d of %d tokens (step %d: %d, reference %d)", rm->name,
                  suffix, same, N_GREEDY, same, same < N_GREEDY ? got[same] : -1,
                  same < N_GREEDY ? ref_ids[same] : -1);
    }
    free(p17);
    free(ours);
}

static double manifest_margin(const ref_model *rm, const char *seq)
{
    json_t *man = !strcmp(rm->dir, REF2) ? g_manifest2 : g_manifest;
    json_t *v = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(man, "models"), rm->name), "seqs"), seq),
        "top1_margin");
    return v ? json_number_value(v) : 0;
}

/* Statistical comparison of the fast path with the native logits. */
static void check_native(const ref_model *rm, cv_engine *e)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    float *ours = malloc((size_t)V * 48 * sizeof(float));
    char rel[256];
    for (size_t s = 0; s < CV_ARRAY_LEN(seq_names); s++) {
        int32_t n;
        int32_t *ids = ref_seq(g_seqs, rm->family, seq_names[s], &n);
        snprintf(rel, sizeof rel, "%slogits/%s.%s.bin", rm->dir, rm->name, seq_names[s]);
        float *ref = ref_f32(test_data(rel), V);
        CHECK_MSG(ref != NULL, "cannot read %s", rel);
        if (ref && ref_run(e, ids, n, NULL, ours) == 0) {
            ref_metrics m = ref_compare(ref, ours, V);
            printf("  %-24s fast  %-6s max|d| %.3f  rms %.3f  cos %.6f  KL %.5f\n", rm->name, seq_names[s], m.max_abs,
                   m.rms, m.cos, m.kl);
            if (is_f16(rm)) {
                CHECK_MSG(m.max_abs <= 0.05, "%s %s (fast): max|Δ| = %g > 0.05", rm->name, seq_names[s], m.max_abs);
            } else {
                CHECK_MSG(m.cos >= 0.998 && m.kl <= 0.1 && m.rms <= 0.5,
                          "%s %s (fast): cos %.6f (>= 0.998), KL %.4f (<= 0.1), rms %.3f (<= 0.5), max|Δ| %.3f",
                          rm->name, seq_names[s], m.cos, m.kl, m.rms, m.max_abs);
            }
            if (manifest_margin(rm, seq_names[s]) > 1.0)
                CHECK_MSG(m.top1_a == m.top1_b, "%s %s (fast): top-1 %d, reference %d (margin %.2f)", rm->name,
                          seq_names[s], m.top1_b, m.top1_a, manifest_margin(rm, seq_names[s]));
        }
        free(ref);
        free(ids);
    }
    /* Teacher forcing: prompt + the reference's 32 greedy tokens in one call,
     * logits at the 32 decision rows. */
    int32_t n17, ref_ids[32];
    float margins[32];
    int32_t *p17 = ref_seq(g_seqs, rm->family, "len17", &n17);
    snprintf(rel, sizeof rel, "%sgreedy/%s.len17.greedy32.txt", rm->dir, rm->name);
    CHECK_MSG(ref_greedy(test_data(rel), ref_ids, margins) == 0, "cannot read %s", rel);
    int32_t ids[17 + 32];
    bool want[17 + 32] = { 0 };
    memcpy(ids, p17, 17 * sizeof *ids);
    memcpy(ids + 17, ref_ids, 32 * sizeof *ids);
    for (int i = 16; i < 16 + N_GREEDY; i++)
        want[i] = true;
    if (n17 == 17 && ref_run(e, ids, 16 + N_GREEDY, want, ours) == 0) {
        int checked = 0;
        for (int k = 0; k < N_GREEDY; k++) {
            if (margins[k] < 1.0f)
                continue;
            checked++;
            int32_t got = cv_argmax(ours + (size_t)k * V, V);
            CHECK_MSG(got == ref_ids[k], "%s (fast) teacher-forced step %d: argmax %d, reference %d (margin %.2f)",
                      rm->name, k, got, ref_ids[k], margins[k]);
        }
        CHECK_MSG(checked > 0, "%s: no greedy step with margin >= 1", rm->name);
    }
    free(p17);
    free(ours);
}

TEST(f32_models_match_llamacpp_logits_and_greedy)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(models); i++) {
        if (!is_f32(&models[i]))
            continue;
        cv_model *m;
        cv_engine *e = open_engine(&models[i], false, &m);
        if (!e)
            continue;
        check_exact(&models[i], e, "");
        cv_engine_destroy(e);
        cv_model_close(m);
    }
}

TEST(quantized_models_through_fp32_path_match_dequantized_twins)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(models); i++) {
        if (is_f32(&models[i]))
            continue;
        cv_model *m;
        cv_engine *e = open_engine(&models[i], true, &m);
        if (!e)
            continue;
        CHECK(m->dequantized);
        check_exact(&models[i], e, ".deq");
        cv_engine_destroy(e);
        cv_model_close(m);
    }
}

TEST(quantized_models_fast_path_stay_within_llamacpp_native_noise)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(models); i++) {
        if (is_f32(&models[i]))
            continue;
        cv_model *m;
        cv_engine *e = open_engine(&models[i], false, &m);
        if (!e)
            continue;
        check_native(&models[i], e);
        cv_engine_destroy(e);
        cv_model_close(m);
    }
}

/* The F32 model with a quantized KV cache against the reference logits of
 * the longest sequence, within a loosened bound (README item 1). */
static void check_kv_type(uint32_t kv_type, double max_abs, double kl)
{
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(test_data(REF "models/tiny-qwen3-gpt2-F32.gguf"), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .kv_type = kv_type };
    cv_engine *e;
    CHECK(cv_engine_create(m, &ep, &e, &err) == 0);
    const int32_t V = m->hp.n_vocab;
    float *ours = malloc((size_t)V * sizeof(float));
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", seq_names[N_SEQS - 1], &n);
    char rel[128];
    snprintf(rel, sizeof rel, REF "logits/tiny-qwen3-gpt2-F32.%s.bin", seq_names[N_SEQS - 1]);
    float *ref = ref_f32(test_data(rel), V);
    if (ref && ref_run(e, ids, n, NULL, ours) == 0) {
        ref_metrics mt = ref_compare(ref, ours, V);
        printf("  %s KV: max|Δ| %.3g, KL %.3g, top-1 %s\n", cv_engine_kv_type_name(kv_type), mt.max_abs, mt.kl,
               cv_argmax(ref, V) == cv_argmax(ours, V) ? "equal" : "DIFFERS");
        CHECK_MSG(mt.max_abs <= max_abs && mt.kl <= kl, "%s KV: max|Δ| %g, KL %g", cv_engine_kv_type_name(kv_type),
                  mt.max_abs, mt.kl);
        CHECK_MSG(mt.max_abs > 0, "a %s cache that changes nothing was not used", cv_engine_kv_type_name(kv_type));
        CHECK_EQ_INT(cv_argmax(ref, V), cv_argmax(ours, V));
    }
    free(ref);
    free(ids);
    free(ours);
    cv_engine_destroy(e);
    cv_model_close(m);
}

/* Every position of the longest sequence with a kv_type cache against the
 * same model with an f32 one: mean and worst KL, top-1 agreement. One
 * position's KL swings several-fold with the last bits of the inputs (the
 * ASan build gets other ones than the release build); the mean over 200
 * does not. */
static void check_kv_type_every_position(const char *model, uint32_t kv_type, double mean_kl_max, double agree_min)
{
    cv_model *m;
    cv_err err = { 0 };
    char rel[128];
    snprintf(rel, sizeof rel, REF "models/%s.gguf", model);
    if (cv_model_open(test_data(rel), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const int32_t V = m->hp.n_vocab;
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, strstr(model, "llama") ? "llama_spm" : "gpt2", seq_names[N_SEQS - 1], &n);
    bool *want = malloc((size_t)n);
    memset(want, 1, (size_t)n);
    float *lg[2] = { malloc((size_t)n * V * sizeof(float)), malloc((size_t)n * V * sizeof(float)) };
    const uint32_t types[2] = { CV_GGML_F32, kv_type };
    bool ok = true;
    for (int t = 0; t < 2 && ok; t++) {
        cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_batch = 256, .n_logits = 256, .kv_type = types[t] };
        cv_engine *e;
        ok = cv_engine_create(m, &ep, &e, &err) == 0 && ref_run(e, ids, n, want, lg[t]) == 0;
        CHECK_MSG(ok, "%s", err.msg);
        if (e)
            cv_engine_destroy(e);
    }
    if (ok) {
        double sum_kl = 0, max_kl = 0;
        int32_t agree = 0;
        for (int32_t i = 0; i < n; i++) {
            ref_metrics mt = ref_compare(lg[0] + (size_t)i * V, lg[1] + (size_t)i * V, V);
            sum_kl += mt.kl;
            max_kl = fmax(max_kl, mt.kl);
            agree += mt.top1_a == mt.top1_b;
        }
        printf("  %s, %s KV vs f32 KV over %d positions: mean KL %.3g, worst %.3g, top-1 agrees %d/%d\n", model,
               cv_engine_kv_type_name(kv_type), n, sum_kl / n, max_kl, agree, n);
        CHECK_MSG(sum_kl / n <= mean_kl_max && agree >= agree_min * n, "%s %s KV: mean KL %g, top-1 %d/%d", model,
                  cv_engine_kv_type_name(kv_type), sum_kl / n, agree, n);
    }
    free(lg[0]);
    free(lg[1]);
    free(want);
    free(ids);
    cv_model_close(m);
}

TEST(quantized_kv_caches_keep_every_positions_distribution)
{
    /* Measured (release, 200 positions): f16 mean KL 1.2-1.5e-6, top-1
     * 199-200/200; q8_0 mean KL 6.4e-4 (llama) and 1.1e-3 (qwen3), worst
     * 4.8e-3, top-1 196-198/200. */
    check_kv_type_every_position("tiny-qwen3-gpt2-F32", CV_GGML_F16, 1e-5, 0.99);
    check_kv_type_every_position("tiny-llama-spm-F32", CV_GGML_F16, 1e-5, 0.99);
    check_kv_type_every_position("tiny-qwen3-gpt2-F32", CV_GGML_Q8_0, 5e-3, 0.95);
    check_kv_type_every_position("tiny-llama-spm-F32", CV_GGML_Q8_0, 5e-3, 0.95);
}

TEST(f32_model_with_f16_kv_cache_stays_within_loosened_tolerance)
{
    /* README item 1: an F16 KV cache loosens the bound to 0.05 / KL 1e-4. */
    check_kv_type(CV_GGML_F16, 0.05, 1e-4);
}

TEST(f32_model_with_q8_0_kv_cache_stays_within_loosened_tolerance)
{
    /* Measured 0.30 / KL 6.4e-4 in the release build, 0.21 / 2.6e-3 in the
     * ASan one (head size 32: one factor per position and head); bound 0.6 /
     * KL 1e-2 and the top token kept. The mean over every position is the
     * steadier figure (below). */
    check_kv_type(CV_GGML_Q8_0, 0.6, 1e-2);
}

TEST(stories260k_generates_the_documented_greedy_ids)
{
    char path[512];
    ref_tmp_path(path, sizeof path, "stories");
    cv_err err = { 0 };
    int rc = cv_import_llama2c(test_data("models/stories260K.bin"), test_data("models/tok512.bin"), path, &err);
    CHECK_MSG(rc == 0, "import: %s", err.msg);
    json_t *expect = ref_json(test_data("models/stories260K.greedy_t0.token_ids.json"));
    CHECK(expect && json_array_size(expect) == 256);
    cv_model *m;
    if (rc || !expect || cv_model_open(path, NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        unlink(path);
        json_decref(expect);
        return;
    }
    CHECK_EQ_INT(m->hp.n_vocab, 512);
    CHECK_EQ_INT(m->hp.n_head_kv, 4);
    CHECK(m->tied_output);
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 512 };
    cv_engine *e;
    CHECK(cv_engine_create(m, &ep, &e, &err) == 0);
    int32_t seq, tok = 1 /* BOS */, got[256];
    CHECK(cv_engine_seq_open(e, &seq, &err) == 0);
    int32_t n = 0;
    for (int32_t pos = 0; pos < 256; pos++) {
        cv_batch b = { .n_tokens = 1, .token = &tok, .seq = &seq, .pos = &pos };
        const float *lg;
        int32_t nl;
        if (cv_engine_forward(e, &b, &lg, &nl, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            break;
        }
        tok = cv_argmax(lg, 512);
        if (tok == 1)
            break;
        got[n++] = tok;
    }
    int same = 0;
    while (same < n && same < 256 && got[same] == (int32_t)json_integer_value(json_array_get(expect, same)))
        same++;
    CHECK_MSG(n == 256 && same == 256, "stories260K: %d ids generated, the first %d match", n, same);
    /* And the text: the model's own tokenizer decodes the ids to llama2.c's
     * documented output (which ends with the newline run.c prints). */
    cv_tok *vocab;
    if (cv_tok_load(m->gguf, &vocab, &err) == 0) {
        cv_buf text = { 0 }, want = { 0 };
        CHECK(cv_tok_decode(vocab, got, (size_t)n, CV_TOK_SKIP_SPECIAL | CV_TOK_AT_START, &text, &err) == 0);
        cv_buf_putc(&text, '\n');
        CHECK(cv_read_file(test_data("models/stories260K.greedy_t0.expected.txt"), &want, 1 << 20, &err) == 0);
        CHECK_MSG(text.len == want.len && memcmp(text.data, want.data, want.len) == 0,
                  "stories260K text differs:\n%s\nexpected:\n%s", text.data, want.data);
        cv_buf_free(&text);
        cv_buf_free(&want);
        cv_tok_destroy(vocab);
    } else {
        CHECK_MSG(0, "tokenizer: %s", err.msg);
    }
    json_decref(expect);
    cv_engine_destroy(e);
    cv_model_close(m);
    unlink(path);
}

int main(void)
{
    test_require_data();
    g_seqs = ref_json(test_data(REF "sequences.json"));
    g_manifest = ref_json(test_data(REF "manifest.json"));
    g_manifest2 = ref_json(test_data(REF2 "manifest.json"));
    if (!g_seqs || !g_manifest || !g_manifest2)
        return 1;
    RUN(stories260k_generates_the_documented_greedy_ids);
    RUN(f32_models_match_llamacpp_logits_and_greedy);
    RUN(quantized_models_through_fp32_path_match_dequantized_twins);
    RUN(quantized_models_fast_path_stay_within_llamacpp_native_noise);
    RUN(f32_model_with_f16_kv_cache_stays_within_loosened_tolerance);
    RUN(f32_model_with_q8_0_kv_cache_stays_within_loosened_tolerance);
    RUN(quantized_kv_caches_keep_every_positions_distribution);
    json_decref(g_seqs);
    json_decref(g_manifest);
    json_decref(g_manifest2);
    return test_report();
}
