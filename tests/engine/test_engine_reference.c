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
 *       F16 fast path: max|Δ| <= 0.05 against the native logits;
 *   - the hybrids (tiny-qwen35*, reference2 README "Guidance" item 4):
 *       len200 fed as 64 + 64 + 72 tokens in three calls equals the
 *         reference's chunked logits (tolerance of item 1) and our own one
 *         call within 1e-4;
 *       one call over len17 + the first 31 greedy tokens has, at the 32
 *         decision rows, the argmax of the reference's `onecall` file, and
 *         its logits match our step-by-step greedy decode (same argmax at
 *         every step, max|Δ| within 1e-4 on the fp32 paths);
 *       len200 fed in pieces of 1, 7 and 64 tokens gives the logits of one
 *         call (1e-4 on the fp32 paths, the statistical bounds on the int8
 *         one), and each way gives the same bits when run again;
 *   - reference3/'s files, with that folder's README "Guidance" bounds
 *     (the same as reference2's items 1 and 2). */
#include "ref_util.h"
#include "tokenizer/tokenizer.h"

#define REF "reference/"
#define REF2 "reference2/"
#define REF3 "reference3/"

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
    const char *dir;    /* REF, REF2 or REF3 */
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
    /* reference2/: routed MoE (qwen3moe); sliding window, sinks, YaRN,
     * biases, the clamped SwiGLU, top-k-then-softmax routing (gpt-oss);
     * 5:1 local/global layers, post-norms, GeGLU, per-layer RoPE (gemma3). */
    { REF2, "tiny-qwen3moe-gpt2-F32", "gpt2" },    { REF2, "tiny-qwen3moe-gpt2-Q8_0", "gpt2" },
    { REF2, "tiny-qwen3moe-gpt2-Q4_K_M", "gpt2" }, { REF2, "tiny-qwen3moe-gpt2-Q3_K_M", "gpt2" },
    { REF2, "tiny-qwen3moe-gpt2-Q2_K", "gpt2" },   { REF2, "tiny-qwen3moe-gpt2-IQ4_XS", "gpt2" },
    { REF2, "tiny-gptoss-gpt2-F32", "gpt2" },      { REF2, "tiny-gptoss-gpt2-MXFP4_MOE", "gpt2" },
    { REF2, "tiny-gemma3-gpt2-F32", "gpt2" },      { REF2, "tiny-gemma3-gpt2-Q8_0", "gpt2" },
    { REF2, "tiny-gemma3-gpt2-Q4_K_M", "gpt2" },
    /* reference2/: hybrids (Gated DeltaNet + gated attention; qwen35moe
     * adds routed experts and a shared one). */
    { REF2, "tiny-qwen35-gpt2-F32", "gpt2" },      { REF2, "tiny-qwen35-gpt2-Q8_0", "gpt2" },
    { REF2, "tiny-qwen35-gpt2-Q4_K_M", "gpt2" },   { REF2, "tiny-qwen35moe-gpt2-F32", "gpt2" },
    { REF2, "tiny-qwen35moe-gpt2-Q4_K_M", "gpt2" },
    /* reference3/: NORM RoPE with YaRN and the query temperature (mistral3). */
    { REF3, "tiny-mistral3-gpt2-F32", "gpt2" },
    /* reference3/: Qwen3-Next's grouped DeltaNet head order and fused
     * projections. */
    { REF3, "tiny-qwen3next-gpt2-F32", "gpt2" },
    /* reference3/: multi-head latent attention with q_lora, YaRN's mscale^2
     * in the score scale, sigmoid routing with a selection bias, expert
     * groups, scaled weights and a shared expert (deepseek2); and without
     * q_lora, softmax routing, two shared experts (deepseek2lite). */
    { REF3, "tiny-deepseek2-gpt2-F32", "gpt2" },    { REF3, "tiny-deepseek2lite-gpt2-F32", "gpt2" },
    /* reference3/: per-layer heads and RoPE, shared K/V, K=V, per-layer
     * inputs, output scales and soft-capped logits (gemma4); a dense FFN
     * beside routed experts, each with its own inputs and norms (gemma4moe,
     * 26B-A4B). */
    { REF3, "tiny-gemma4-gpt2-F32", "gpt2" },      { REF3, "tiny-gemma4-gpt2-Q4_K_M", "gpt2" },
    { REF3, "tiny-gemma4moe-gpt2-F32", "gpt2" },
};

static const char *const seq_names[N_SEQS] = { "len1", "len17",
#if N_SEQS > 2
                                               "len200"
#endif
};

static json_t *g_seqs, *g_manifest, *g_manifest2, *g_manifest3;

/* The exact paths' max |Δ|: 1e-3, but the Gemma files' looser bounds with
 * KL <= 1e-4: corvid computes the tanh GELU in f32 (vec.c's geglu), not
 * ggml's f16 lookup table, which the READMEs measured at 1.2e-2 / KL
 * 1.1e-5 (reference2, Gemma 3: bound 2e-2) and at up to 1.1e-2 / 4.0e-2
 * at any position (reference3, Gemma 4, whose attention scale 1 amplifies
 * it: bound 5e-2). 0 when the default holds. */
static double loose_tol(const ref_model *rm)
{
    return strstr(rm->name, "gemma3") ? 2e-2 : strstr(rm->name, "gemma4") ? 5e-2 : 0;
}

static bool is_f32(const ref_model *rm) { return strstr(rm->name, "-F32") != NULL; }
static bool is_hybrid(const ref_model *rm)
{
    return strstr(rm->name, "qwen35") != NULL || strstr(rm->name, "qwen3next") != NULL;
}
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
 * ".deq") within 1e-3 (the model's own bound, with KL <= 1e-4, where the
 * README sets a looser one) and the same top-1; then the 32 greedy tokens. */
static void check_exact(const ref_model *rm, cv_engine *e, const char *suffix)
{
    const double tol = loose_tol(rm) > 0 ? loose_tol(rm) : 1e-3;
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
            printf("  %-26s%-5s %-6s max|d| %.2e  rms %.2e  KL %.1e\n", rm->name, suffix, seq_names[s], m.max_abs,
                   m.rms, m.kl);
            CHECK_MSG(m.max_abs <= tol, "%s%s %s: max|Δ| = %g > %g (rms %g)", rm->name, suffix, seq_names[s],
                      m.max_abs, tol, m.rms);
            CHECK_MSG(loose_tol(rm) == 0 || m.kl <= 1e-4, "%s%s %s: KL %g > 1e-4", rm->name, suffix, seq_names[s], m.kl);
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
    json_t *man = !strcmp(rm->dir, REF3) ? g_manifest3 : !strcmp(rm->dir, REF2) ? g_manifest2 : g_manifest;
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
                /* README item 3: the two qwen35 files at len1 (the DeltaNet
                 * position-0 sign effect) get cos >= 0.98, rms <= 1.5;
                 * reference3's bounds are KL 0.03 and rms 0.4. */
                const bool loose = strstr(rm->name, "qwen35-") && s == 0, ref3 = !strcmp(rm->dir, REF3);
                const double cos_min = loose ? 0.98 : 0.998, rms_max = loose ? 1.5 : ref3 ? 0.4 : 0.5;
                const double kl_max = ref3 ? 0.03 : 0.1;
                CHECK_MSG(m.cos >= cos_min && m.kl <= kl_max && m.rms <= rms_max,
                          "%s %s (fast): cos %.6f (>= %g), KL %.4f (<= %g), rms %.3f (<= %g), max|Δ| %.3f",
                          rm->name, seq_names[s], m.cos, cos_min, m.kl, kl_max, m.rms, rms_max, m.max_abs);
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

#if N_SEQS > 2 /* len200 is the release build's */
/* ids fed to a fresh sequence in calls of `piece` tokens (0: one call);
 * the last row's logits into out. */
static int run_pieces(cv_engine *e, const int32_t *ids, int32_t n, int32_t piece, float *out)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    int32_t seq, *pos = malloc((size_t)n * sizeof *pos), *sq = malloc((size_t)n * sizeof *sq);
    cv_err err = { 0 };
    int rc = cv_engine_seq_open(e, &seq, &err);
    const float *lg = NULL;
    for (int32_t at = 0; rc == 0 && at < n;) {
        const int32_t k = piece > 0 ? CV_MIN(piece, n - at) : n;
        for (int32_t i = 0; i < k; i++)
            pos[i] = at + i, sq[i] = seq;
        int32_t nl;
        rc = cv_engine_forward(e, &(cv_batch){ k, ids + at, sq, pos, NULL }, &lg, &nl, &err);
        at += k;
    }
    if (rc == 0)
        memcpy(out, lg, (size_t)V * sizeof(float));
    else
        fprintf(stderr, "pieces of %d: %s\n", piece, err.msg);
    cv_engine_seq_close(e, seq);
    free(pos);
    free(sq);
    return rc;
}

/* Logits of len200 fed in three calls of 64, 64 and 72 tokens. */
static int run_64_64_72(cv_engine *e, const int32_t *ids, float *out)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    static const int32_t cuts[3] = { 64, 64, 72 };
    int32_t seq, pos[72], sq[72], at = 0, nl;
    cv_err err = { 0 };
    const float *lg = NULL;
    int rc = cv_engine_seq_open(e, &seq, &err);
    for (int c = 0; rc == 0 && c < 3; c++) {
        for (int32_t i = 0; i < cuts[c]; i++)
            pos[i] = at + i, sq[i] = seq;
        rc = cv_engine_forward(e, &(cv_batch){ cuts[c], ids + at, sq, pos, NULL }, &lg, &nl, &err);
        at += cuts[c];
    }
    if (rc == 0)
        memcpy(out, lg, (size_t)V * sizeof(float));
    cv_engine_seq_close(e, seq);
    return rc;
}
#endif

/* The recurrent checks of a hybrid (README "Guidance" item 4) on one path:
 * suffix "" or ".deq"; exact: the fp32 path (tight bounds), else the int8
 * one (the statistical bounds of item 3). */
static void check_recurrent(const ref_model *rm, cv_engine *e, const char *suffix, bool exact)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    char rel[256];
    float *one = malloc((size_t)V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
    float *again = malloc((size_t)V * sizeof(float));
#if N_SEQS > 2
    int32_t n200;
    int32_t *p200 = ref_seq(g_seqs, rm->family, "len200", &n200);
    snprintf(rel, sizeof rel, "%slogits/%s%s.len200.chunked-64-64-72.bin", rm->dir, rm->name, suffix);
    float *ref = ref_f32(test_data(rel), V);
    CHECK_MSG(ref != NULL, "cannot read %s", rel);
    if (ref && n200 == 200 && run_pieces(e, p200, n200, 0, one) == 0 && run_64_64_72(e, p200, got) == 0) {
        ref_metrics mr = ref_compare(ref, got, V), mo = ref_compare(one, got, V);
        printf("  %-26s%-5s %s 64+64+72: vs reference max|d| %.2e, vs our one call max|d| %.2e\n", rm->name, suffix,
               exact ? "fp32" : "fast", mr.max_abs, mo.max_abs);
        if (exact)
            CHECK_MSG(mr.max_abs <= 1e-3 && mr.top1_a == mr.top1_b, "%s%s 64+64+72: max|Δ| %g vs reference",
                      rm->name, suffix, mr.max_abs);
        else
            CHECK_MSG(mr.cos >= 0.998 && mr.kl <= 0.1 && mr.rms <= 0.5, "%s 64+64+72 (fast): cos %.6f KL %.4f rms %.3f",
                      rm->name, mr.cos, mr.kl, mr.rms);
        CHECK_MSG(mo.max_abs <= 1e-4, "%s%s: 64+64+72 differs from one call by %g", rm->name, suffix, mo.max_abs);
        /* Pieces of 1, 7 and 64 against one call, each run twice for its bits. */
        static const int32_t pieces[3] = { 1, 7, 64 };
        for (int i = 0; i < 3; i++) {
            if (run_pieces(e, p200, n200, pieces[i], got) || run_pieces(e, p200, n200, pieces[i], again))
                continue;
            ref_metrics mp = ref_compare(one, got, V);
            printf("  %-26s%-5s %s pieces of %-2d vs one call: max|d| %.2e  KL %.2e%s\n", rm->name, suffix,
                   exact ? "fp32" : "fast", pieces[i], mp.max_abs, mp.kl,
                   memcmp(got, again, (size_t)V * sizeof(float)) ? "  (NOT the same bits twice)" : "");
            if (exact)
                CHECK_MSG(mp.max_abs <= 1e-4, "%s%s: pieces of %d differ from one call by %g", rm->name, suffix,
                          pieces[i], mp.max_abs);
            else
                CHECK_MSG(mp.cos >= 0.998 && mp.kl <= 0.1 && mp.rms <= 0.5 && mp.top1_a == mp.top1_b,
                          "%s (fast): pieces of %d vs one call: cos %.6f KL %.4f rms %.3f", rm->name, pieces[i],
                          mp.cos, mp.kl, mp.rms);
            CHECK_MSG(memcmp(got, again, (size_t)V * sizeof(float)) == 0, "%s%s: pieces of %d gave other bits the "
                      "second time", rm->name, suffix, pieces[i]);
        }
        CHECK_MSG(run_pieces(e, p200, n200, 0, again) == 0 && memcmp(one, again, (size_t)V * sizeof(float)) == 0,
                  "%s%s: one call gave other bits the second time", rm->name, suffix);
    }
    free(ref);
    free(p200);
#endif
    /* Teacher forcing through the prefill path vs the reference's onecall
     * argmax, and vs our own step-by-step decode of the same tokens. */
    int32_t n17, ref_ids[32], one_ids[32], ids[48];
    float margins[32], one_margins[32];
    int32_t *p17 = ref_seq(g_seqs, rm->family, "len17", &n17);
    snprintf(rel, sizeof rel, "%sgreedy/%s%s.len17.greedy32.txt", rm->dir, rm->name, suffix);
    CHECK_MSG(ref_greedy(test_data(rel), ref_ids, margins) == 0, "cannot read %s", rel);
    snprintf(rel, sizeof rel, "%sgreedy/%s%s.len17.greedy32.onecall.txt", rm->dir, rm->name, suffix);
    CHECK_MSG(ref_greedy(test_data(rel), one_ids, one_margins) == 0, "cannot read %s", rel);
    memcpy(ids, p17, 17 * sizeof *ids);
    memcpy(ids + 17, ref_ids, 31 * sizeof *ids);
    bool want[48] = { 0 };
    for (int i = 16; i < 48; i++)
        want[i] = true;
    float *tf = malloc((size_t)32 * V * sizeof(float)), *st = malloc((size_t)32 * V * sizeof(float));
    if (n17 == 17 && ref_run(e, ids, 48, want, tf) == 0) {
        /* Step decode of the same 48 ids: the prompt in one call, then one
         * token per call, each row's logits kept. */
        int32_t seq, pos[17], sq[17], nl;
        cv_err err = { 0 };
        const float *lg;
        CHECK(cv_engine_seq_open(e, &seq, &err) == 0);
        for (int i = 0; i < 17; i++)
            pos[i] = i, sq[i] = seq;
        int rc = cv_engine_forward(e, &(cv_batch){ 17, ids, sq, pos, NULL }, &lg, &nl, &err);
        for (int k = 0; rc == 0 && k < 32; k++) {
            memcpy(st + (size_t)k * V, lg, (size_t)V * sizeof(float));
            if (k < 31) {
                int32_t p = 17 + k;
                rc = cv_engine_forward(e, &(cv_batch){ 1, &ids[17 + k], &seq, &p, NULL }, &lg, &nl, &err);
            }
        }
        CHECK_MSG(rc == 0, "%s: %s", rm->name, err.msg);
        cv_engine_seq_close(e, seq);
        int agree_ref = 0, agree_step = 0, decisive = 0;
        double worst = 0;
        for (int k = 0; k < 32; k++) {
            const int32_t a = cv_argmax(tf + (size_t)k * V, V), b = cv_argmax(st + (size_t)k * V, V);
            worst = fmax(worst, ref_compare(tf + (size_t)k * V, st + (size_t)k * V, V).max_abs);
            agree_step += a == b;
            /* the int8 path: only where llama.cpp's own margin is >= 1 */
            if (exact || one_margins[k] >= 1.0f) {
                decisive++;
                agree_ref += a == one_ids[k];
            }
        }
        printf("  %-26s%-5s %s one call: argmax = onecall file at %d/%d, = our step decode at %d/32, "
               "max|d| vs step %.2e\n", rm->name, suffix, exact ? "fp32" : "fast", agree_ref, decisive, agree_step,
               worst);
        CHECK_MSG(agree_ref == decisive, "%s%s: one-call argmax differs from the onecall file at %d of %d rows",
                  rm->name, suffix, decisive - agree_ref, decisive);
        if (exact) {
            CHECK_MSG(agree_step == 32 && worst <= 1e-4, "%s%s: one call vs step decode: argmax %d/32, max|Δ| %g",
                      rm->name, suffix, agree_step, worst);
        } else {
            for (int k = 0; k < 32; k++) {
                ref_metrics m = ref_compare(tf + (size_t)k * V, st + (size_t)k * V, V);
                CHECK_MSG(m.cos >= 0.998 && m.kl <= 0.1 && (one_margins[k] < 1.0f || m.top1_a == m.top1_b),
                          "%s (fast) row %d: one call vs step decode cos %.6f KL %.4f", rm->name, k, m.cos, m.kl);
            }
        }
    }
    free(tf);
    free(st);
    free(p17);
    free(one);
    free(got);
    free(again);
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
        if (is_hybrid(&models[i]))
            check_recurrent(&models[i], e, "", true);
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
        if (is_hybrid(&models[i]))
            check_recurrent(&models[i], e, ".deq", true);
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
        if (is_hybrid(&models[i]))
            check_recurrent(&models[i], e, "", false);
        cv_engine_destroy(e);
        cv_model_close(m);
    }
}

/* An F32 model (dir, name) with engine parameters ep against llama.cpp's
 * logits of sequence seq in one call: within max_abs and kl, the same
 * top-1 (label names the case in the output). Returns the largest
 * difference, or -1 when nothing ran (already a failure). */
static double check_one_call(const char *dir, const char *name, const char *seq, const cv_engine_params *ep,
                             const char *label, double max_abs, double kl)
{
    cv_model *m;
    cv_err err = { 0 };
    char rel[160];
    snprintf(rel, sizeof rel, "%smodels/%s.gguf", dir, name);
    if (cv_model_open(test_data(rel), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return -1;
    }
    cv_engine *e = NULL;
    CHECK(cv_engine_create(m, ep, &e, &err) == 0);
    const int32_t V = m->hp.n_vocab;
    float *ours = malloc((size_t)V * sizeof(float));
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", seq, &n);
    snprintf(rel, sizeof rel, "%slogits/%s.%s.bin", dir, name, seq);
    float *ref = ref_f32(test_data(rel), V);
    double worst = -1;
    if (e && ref && ref_run(e, ids, n, NULL, ours) == 0) {
        ref_metrics mt = ref_compare(ref, ours, V);
        printf("  %s, %s: max|Δ| %.3g, KL %.3g, top-1 %s\n", name, label, mt.max_abs, mt.kl,
               cv_argmax(ref, V) == cv_argmax(ours, V) ? "equal" : "DIFFERS");
        CHECK_MSG(mt.max_abs <= max_abs && mt.kl <= kl, "%s, %s: max|Δ| %g, KL %g", name, label, mt.max_abs, mt.kl);
        CHECK_EQ_INT(cv_argmax(ref, V), cv_argmax(ours, V));
        worst = mt.max_abs;
    } else {
        CHECK_MSG(0, "%s, %s: did not run", name, label);
    }
    free(ref);
    free(ids);
    free(ours);
    cv_engine_destroy(e);
    cv_model_close(m);
    return worst;
}

/* ... with a quantized KV cache, the longest sequence, within a loosened
 * bound (README item 1); a cache that changed nothing was not used. */
static void check_kv_type(const char *dir, const char *name, uint32_t kv_type, double max_abs, double kl)
{
    const cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .kv_type = kv_type };
    char label[32];
    snprintf(label, sizeof label, "%s KV", cv_engine_kv_type_name(kv_type));
    const double worst = check_one_call(dir, name, seq_names[N_SEQS - 1], &ep, label, max_abs, kl);
    CHECK_MSG(worst != 0, "a %s cache that changes nothing was not used", cv_engine_kv_type_name(kv_type));
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
        /* the share of flips allowed, at least one (the sanitizer build
         * checks 17 positions, where 5% would allow none) */
        const int32_t flips = CV_MAX(1, (int32_t)((1 - agree_min) * n));
        CHECK_MSG(sum_kl / n <= mean_kl_max && agree >= n - flips, "%s %s KV: mean KL %g, top-1 %d/%d", model,
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
     * 199-200/200; q8_0 (int8 queries against int8 keys, as llama.cpp's
     * CPU path) mean KL 1.2e-3 (llama) and 1.8e-3 (qwen3), worst 1.8e-2,
     * top-1 193-197/200; ASan (17 positions) 7.6e-4 and 2.0e-3, 16-17/17. */
    check_kv_type_every_position("tiny-qwen3-gpt2-F32", CV_GGML_F16, 1e-5, 0.99);
    check_kv_type_every_position("tiny-llama-spm-F32", CV_GGML_F16, 1e-5, 0.99);
    check_kv_type_every_position("tiny-qwen3-gpt2-F32", CV_GGML_Q8_0, 5e-3, 0.95);
    check_kv_type_every_position("tiny-llama-spm-F32", CV_GGML_Q8_0, 5e-3, 0.95);
}

TEST(f32_model_with_f16_kv_cache_stays_within_loosened_tolerance)
{
    /* README item 1: an F16 KV cache loosens the bound to 0.05 / KL 1e-4;
     * reference3's MLA files (llama.cpp itself moves by 0.057 / KL 1.7e-4
     * with F16 K/V) to 0.07 / KL 3e-4: an f16 latent row. */
    check_kv_type(REF, "tiny-qwen3-gpt2-F32", CV_GGML_F16, 0.05, 1e-4);
    check_kv_type(REF3, "tiny-deepseek2-gpt2-F32", CV_GGML_F16, 0.07, 3e-4);
    check_kv_type(REF3, "tiny-deepseek2lite-gpt2-F32", CV_GGML_F16, 0.07, 3e-4);
}

/* Latent attention's decompressed prefill (cv_engine_params.
 * mla_decompress) against llama.cpp: len200 in one call takes positions
 * 0..127 in it (a whole group of CV_MLA_GROUP) and the rest absorbed, so
 * its last logits see both forms; README item 1's 1e-3 (measured 9.3e-5
 * and 4.3e-5). In the sanitizer build too: one call of 200 tokens. */
TEST(latent_attention_decompressed_prefill_matches_llamacpp_logits)
{
    const cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_batch = 256, .mla_decompress = true };
    check_one_call(REF3, "tiny-deepseek2-gpt2-F32", "len200", &ep, "decompressed prefill", 1e-3, INFINITY);
    check_one_call(REF3, "tiny-deepseek2lite-gpt2-F32", "len200", &ep, "decompressed prefill", 1e-3, INFINITY);
}

TEST(f32_model_with_q8_0_kv_cache_stays_within_loosened_tolerance)
{
    /* Measured 0.30 / KL 6.4e-4 in the release build, 0.21 / 2.6e-3 in the
     * ASan one (head size 32: one factor per position and head); bound 0.6 /
     * KL 1e-2 and the top token kept. The mean over every position is the
     * steadier figure (below). */
    check_kv_type(REF, "tiny-qwen3-gpt2-F32", CV_GGML_Q8_0, 0.6, 1e-2);
}

/* tiny-qwen3next rewritten as today's converter writes it: ssm_in split
 * into attn_qkv (all q, all k, all v) and attn_gate (all z), ssm_ba as it
 * is. The loader regroups the fused rows into the same matrix, so both
 * files give the same bits (llama.cpp: the same, manifest
 * `layout_equivalence`). */
TEST(qwen3next_split_projections_give_the_fused_files_bits)
{
    cv_gguf *g;
    cv_err err = { 0 };
    if (cv_gguf_open(test_data(REF3 "models/tiny-qwen3next-gpt2-F32.gguf"), &g, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    char path[512];
    ref_tmp_path(path, sizeof path, "qwen3next-split");
    cv_gguf_writer *w = cv_gguf_writer_create();
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        cv_str k = cv_gguf_kv_key(g, i);
        char *key = cv_xstrndup(k.ptr, k.len);
        cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(g, i));
        free(key);
    }
    /* d = 32, H_k = 2 groups of R = 2 value heads: a group's 192 rows are
     * q (32), k (32), v (64), z (64) */
    enum { D = 32, HK = 2, VR = 64, PER = 2 * D + 2 * VR, N_IN = 256 };
    float *bufs[8];
    int n_bufs = 0;
    bool ok = true;
    for (int64_t i = 0; i < cv_gguf_n_tensors(g) && ok; i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        int il;
        if (!strstr(t->name, ".ssm_in.weight") || sscanf(t->name, "blk.%d.", &il) != 1) {
            ok = cv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes, &err) == 0;
            continue;
        }
        CHECK(t->type == CV_GGML_F32 && t->ne[0] == N_IN && t->ne[1] == HK * PER && n_bufs + 2 <= 8);
        const float *src = t->data;
        float *qkv = bufs[n_bufs++] = malloc((size_t)N_IN * HK * (2 * D + VR) * sizeof(float));
        float *z = bufs[n_bufs++] = malloc((size_t)N_IN * HK * VR * sizeof(float));
        /* rows: q of both groups, k of both, v of both; z of both */
        static const int off[3] = { 0, D, 2 * D }, len[3] = { D, D, VR };
        int r = 0;
        for (int sec = 0; sec < 3; sec++)
            for (int gr = 0; gr < HK; gr++, r += len[sec])
                memcpy(qkv + (size_t)r * N_IN, src + ((size_t)gr * PER + off[sec]) * N_IN,
                       (size_t)len[sec] * N_IN * sizeof(float));
        for (int gr = 0; gr < HK; gr++)
            memcpy(z + (size_t)gr * VR * N_IN, src + ((size_t)gr * PER + 2 * D + VR) * N_IN,
                   (size_t)VR * N_IN * sizeof(float));
        char name[64];
        const int64_t ne_qkv[2] = { N_IN, HK * (2 * D + VR) }, ne_z[2] = { N_IN, HK * VR };
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
        ok = cv_gguf_writer_add_tensor(w, name, CV_GGML_F32, 2, ne_qkv, qkv,
                                       (size_t)N_IN * HK * (2 * D + VR) * sizeof(float), &err) == 0;
        snprintf(name, sizeof name, "blk.%d.attn_gate.weight", il);
        ok = ok && cv_gguf_writer_add_tensor(w, name, CV_GGML_F32, 2, ne_z, z, (size_t)N_IN * HK * VR * sizeof(float),
                                             &err) == 0;
    }
    ok = ok && n_bufs == 6 && cv_gguf_writer_write(w, path, &err) == 0;
    CHECK_MSG(ok, "writing the split file: %s", err.msg);
    cv_gguf_writer_destroy(w);
    for (int i = 0; i < n_bufs; i++)
        free(bufs[i]);
    cv_gguf_close(g);
    const char *files[2] = { test_data(REF3 "models/tiny-qwen3next-gpt2-F32.gguf"), path };
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", seq_names[N_SEQS - 1], &n);
    float *lg[2] = { NULL, NULL };
    for (int f = 0; f < 2 && ok; f++) {
        cv_model *m;
        cv_engine *e;
        cv_engine_params ep = { .n_threads = 2, .n_ctx = 256 };
        ok = cv_model_open(files[f], NULL, &m, &err) == 0;
        CHECK_MSG(ok, "%s: %s", files[f], err.msg);
        if (!ok)
            break;
        if (cv_engine_create(m, &ep, &e, &err) == 0) {
            lg[f] = malloc((size_t)m->hp.n_vocab * sizeof(float));
            ok = ref_run(e, ids, n, NULL, lg[f]) == 0;
            cv_engine_destroy(e);
        }
        cv_model_close(m);
    }
    if (ok && lg[0] && lg[1])
        CHECK_MSG(memcmp(lg[0], lg[1], 4096 * sizeof(float)) == 0, "the split file's logits differ from the fused one's");
    free(lg[0]);
    free(lg[1]);
    free(ids);
    unlink(path);
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

int main(int argc, char **argv)
{
    /* oracle_at_level.sh asks which level CORVID_ISA gave before it runs
     * the oracle at it. */
    if (argc > 1 && !strcmp(argv[1], "--print-isa")) {
        printf("%s\n", cv_isa_name(cv_isa_active()));
        return 0;
    }
    printf("isa level %s\n", cv_isa_name(cv_isa_active()));
    test_require_data();
    g_seqs = ref_json(test_data(REF "sequences.json"));
    g_manifest = ref_json(test_data(REF "manifest.json"));
    g_manifest2 = ref_json(test_data(REF2 "manifest.json"));
    g_manifest3 = ref_json(test_data(REF3 "manifest.json"));
    if (!g_seqs || !g_manifest || !g_manifest2 || !g_manifest3)
        return 1;
    RUN(stories260k_generates_the_documented_greedy_ids);
    RUN(f32_models_match_llamacpp_logits_and_greedy);
    RUN(quantized_models_through_fp32_path_match_dequantized_twins);
    RUN(quantized_models_fast_path_stay_within_llamacpp_native_noise);
    RUN(f32_model_with_f16_kv_cache_stays_within_loosened_tolerance);
    RUN(f32_model_with_q8_0_kv_cache_stays_within_loosened_tolerance);
    RUN(latent_attention_decompressed_prefill_matches_llamacpp_logits);
    RUN(quantized_kv_caches_keep_every_positions_distribution);
    RUN(qwen3next_split_projections_give_the_fused_files_bits);
    json_decref(g_seqs);
    json_decref(g_manifest);
    json_decref(g_manifest2);
    json_decref(g_manifest3);
    return test_report();
}
