/* test_synth.c — `corvid synth` models: every type mix of the tiny shape
 * loads (the loader validates it against the same descriptor it was built
 * from) and runs; its logits stay close to the F16 model of the same seed
 * (the same underlying random weights), measured as mean KL(F16 ‖ quant)
 * over 48 positions, top-1 agreement over those positions, and greedy
 * agreement over 16 steps; files are byte-identical for a seed at any
 * thread count; --vocab copies the tokenizer and chat template; bad
 * arguments are refused. Thresholds are this fixture's measured values
 * with headroom (random weights quantize worse than trained ones: see
 * testdata/reference/README.md, "noise floor"). */
#include "../engine/ref_util.h"
#include "model/synth.h"

typedef struct mix_case {
    const char *dtype;
    const char *arch;
    double max_kl;       /* mean KL(F16 ‖ this) over the positions */
    double min_top1;     /* fraction of positions whose argmax agrees */
} mix_case;

/* Measured (seed 5): mean KL 0 / 0.0016 / 0.016 / 0.050 / 0.10 / 0.28 and
 * top-1 31/31, 18/18, 33/33, 26/31, 17/18, 21/33; bounds are about twice. */
static const mix_case mixes[] = {
    { "f32", "llama", 1e-4, 1.0 },    { "q8_0", "qwen2", 0.01, 0.95 },  { "q6_k", "qwen3", 0.05, 0.9 },
    { "q5_k_m", "llama", 0.15, 0.7 }, { "q4_k_m", "qwen2", 0.3, 0.7 },  { "q4_0", "qwen3", 0.6, 0.45 },
    /* measured 0.85 / 1.91 and 12 of 31, 5 of 33: 3 and 2 bits a weight */
    { "q3_k_m", "llama", 1.7, 0.2 },  { "q2_k", "qwen3", 4.0, 0.07 },
    /* MoE: a changed top-k moves a token's output by O(1), so random routers
     * amplify quantization noise (measured 0.50 / 11 of 24; llama.cpp's own
     * Q4_K_M of reference2's tiny qwen3moe is at KL 2.0 from its F32). */
    { "q4_k_m", "qwen3moe", 1.0, 0.35 },
    /* Hybrids (tiny: layer 0 Gated DeltaNet, layer 1 gated attention).
     * Measured 0.0047 / 0.029 / 0.33 and top-1 22/22, 24/25, 14/22: the
     * recurrence amplifies quantization noise (reference2's README: its
     * qwen35 Q4_K_M file is KL 16.8 from its own F32 under llama.cpp). */
    { "q8_0", "qwen35", 0.01, 0.95 },  { "q8_0", "qwen35moe", 0.06, 0.9 }, { "q4_k_m", "qwen35", 0.7, 0.3 },
};

static int synth(const char *arch, const char *dtype, uint64_t seed, const char *vocab, int threads, char *path,
                 size_t n)
{
    ref_tmp_path(path, n, dtype);
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(threads, &err);
    cv_synth_params p = { .arch = arch, .shape = "tiny", .dtype = dtype, .vocab = vocab, .seed = seed, .pool = pool };
    int rc = cv_model_synth(&p, path, &err);
    cv_pool_destroy(pool);
    CHECK_MSG(rc == 0, "synth %s %s: %s", arch, dtype, err.msg);
    return rc;
}

/* Logits of every position of a fixed 48-token sequence: [48][V]. */
static float *all_logits(const char *path, int32_t *V, cv_model **keep)
{
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(path, NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return NULL;
    }
    cv_engine *e;
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 128, .n_logits = 48 };
    CHECK(cv_engine_create(m, &ep, &e, &err) == 0);
    *V = m->hp.n_vocab;
    int32_t ids[48];
    bool want[48];
    for (int i = 0; i < 48; i++)
        ids[i] = (i * 331 + 7) % *V, want[i] = true;
    float *out = malloc((size_t)48 * *V * sizeof(float));
    CHECK(ref_run(e, ids, 48, want, out) == 0);
    cv_engine_destroy(e);
    *keep = m;
    return out;
}

static int greedy16(cv_model *m, int32_t *out)
{
    cv_engine *e;
    cv_err err = { 0 };
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 128 };
    if (cv_engine_create(m, &ep, &e, &err))
        return -1;
    int32_t prompt[4] = { 11, 22, 33, 44 };
    int rc = ref_greedy_run(e, prompt, 4, 16, out);
    cv_engine_destroy(e);
    return rc;
}

TEST(every_type_mix_loads_runs_and_stays_close_to_the_f16_model)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(mixes); i++) {
        char p16[512], pq[512];
        const mix_case *c = &mixes[i];
        if (synth(c->arch, "f16", 5, NULL, 2, p16, sizeof p16) || synth(c->arch, c->dtype, 5, NULL, 2, pq, sizeof pq))
            continue;
        int32_t V, V2;
        cv_model *m16 = NULL, *mq = NULL;
        float *a = all_logits(p16, &V, &m16), *b = all_logits(pq, &V2, &mq);
        if (a && b && V == V2) {
            double kl = 0;
            int top1 = 0, decisive = 0;
            for (int r = 0; r < 48; r++) {
                const float *ra = a + (size_t)r * V;
                ref_metrics mt = ref_compare(ra, b + (size_t)r * V, V);
                kl += mt.kl / 48;
                /* Top-1 counts only where F16's own margin is >= 0.5: a
                 * near-tie may flip under any rounding. */
                float best = ra[mt.top1_a], second = -INFINITY;
                for (int32_t k = 0; k < V; k++)
                    if (k != mt.top1_a && ra[k] > second)
                        second = ra[k];
                if (best - second >= 0.5f) {
                    decisive++;
                    top1 += mt.top1_a == mt.top1_b;
                }
            }
            int32_t g16[16], gq[16];
            int agree = 0;
            if (greedy16(m16, g16) == 0 && greedy16(mq, gq) == 0)
                while (agree < 16 && g16[agree] == gq[agree])
                    agree++;
            printf("  %-7s (%s) vs f16: mean KL %.5f, top-1 %d of %d decisive positions, greedy prefix %d/16\n",
                   c->dtype, c->arch, kl, top1, decisive, agree);
            CHECK_MSG(kl <= c->max_kl, "%s: mean KL %g > %g", c->dtype, kl, c->max_kl);
            CHECK_MSG(decisive >= 12, "%s: only %d positions with a margin >= 0.5", c->dtype, decisive);
            CHECK_MSG(top1 >= c->min_top1 * decisive, "%s: top-1 agrees at %d of %d decisive positions", c->dtype,
                      top1, decisive);
            /* A quantized model identical to the F16 one was not quantized. */
            if (strcmp(c->dtype, "f32") != 0)
                CHECK_MSG(kl > 0, "%s: logits identical to f16", c->dtype);
        }
        free(a);
        free(b);
        if (m16) cv_model_close(m16);
        if (mq) cv_model_close(mq);
        unlink(p16);
        unlink(pq);
    }
}

TEST(every_architecture_synthesizes_a_tiny_model_that_loads_and_runs)
{
    /* The table walk: a row added to cv_archs must synthesize from the
     * `tiny` shape (whose extra fields give it experts, or whatever the
     * architecture's layer kinds need), load, and produce finite logits. */
    for (int i = 0; i < cv_n_archs; i++) {
        const cv_arch *a = cv_archs[i];
        char path[512];
        if (synth(a->name, "q8_0", 9, NULL, 2, path, sizeof path))
            continue;
        cv_model *m;
        cv_err err = { 0 };
        if (cv_model_open(path, NULL, &m, &err)) {
            CHECK_MSG(0, "%s: %s", a->name, err.msg);
            unlink(path);
            continue;
        }
        CHECK(m->arch == a);
        cv_engine *e;
        cv_engine_params ep = { .n_threads = 2, .n_ctx = 64 };
        if (cv_engine_create(m, &ep, &e, &err) == 0) {
            int32_t ids[8] = { 1, 2, 3, 5, 8, 13, 21, 34 };
            float *lg = malloc((size_t)m->hp.n_vocab * sizeof *lg);
            if (ref_run(e, ids, 8, NULL, lg) == 0) {
                bool finite = true;
                for (int32_t v = 0; v < m->hp.n_vocab; v++)
                    finite = finite && isfinite(lg[v]);
                CHECK_MSG(finite, "%s: non-finite logits", a->name);
                const cv_engine_stats *st = cv_engine_last_stats(e);
                CHECK_MSG(st->weight_bytes > 0, "%s: no weights read", a->name);
                if (m->hp.n_expert > 0)
                    CHECK_MSG(st->experts_read >= m->hp.n_expert_used * m->hp.n_layer, "%s: %d experts read",
                              a->name, st->experts_read);
            }
            cv_buf d = { 0 };
            cv_model_describe(m, &d);
            printf("  %s\n", d.data);
            cv_buf_free(&d);
            free(lg);
            cv_engine_destroy(e);
        } else {
            CHECK_MSG(0, "%s: %s", a->name, err.msg);
        }
        cv_model_close(m);
        unlink(path);
    }
}

static bool same_file(const char *x, const char *y)
{
    cv_buf a = { 0 }, b = { 0 };
    bool same = cv_read_file(x, &a, 1u << 30, NULL) == 0 && cv_read_file(y, &b, 1u << 30, NULL) == 0 &&
                a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
    cv_buf_free(&a);
    cv_buf_free(&b);
    return same;
}

TEST(same_seed_gives_the_same_bytes_at_any_thread_count)
{
    char a[512], b[512], c[512];
    if (synth("qwen3", "q4_k_m", 77, NULL, 1, a, sizeof a) || synth("qwen3", "q4_k_m", 77, NULL, 2, b, sizeof b) ||
        synth("qwen3", "q4_k_m", 78, NULL, 2, c, sizeof c))
        return;
    CHECK(same_file(a, b));
    CHECK(!same_file(a, c));
    unlink(a);
    unlink(b);
    unlink(c);
}

TEST(vocab_file_brings_its_tokenizer_and_chat_template)
{
    char path[512];
    if (synth("llama", "q8_0", 3, test_data("vocab/ggml-vocab-phi-3.gguf"), 2, path, sizeof path))
        return;
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(path, NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        unlink(path);
        return;
    }
    CHECK_EQ_INT(m->hp.n_vocab, 32064);
    const cv_gguf_value *tokens;
    CHECK(cv_gguf_get_arr(m->gguf, "tokenizer.ggml.tokens", CV_GGUF_STRING, &tokens, &err) == 0);
    cv_str tmpl, model;
    CHECK(cv_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &err) == 0 && tmpl.len > 0);
    CHECK(cv_gguf_get_str(m->gguf, "tokenizer.ggml.model", &model, &err) == 0 && cv_str_eqz(model, "llama"));
    cv_model_close(m);
    unlink(path);
}

/* A synthetic hybrid carries the hybrid's tensors with the distributions
 * of testdata/reference2 (so its recurrence behaves like a real one's): F32
 * conv taps, decay parameters and gate vector, ssm_a = -U(1, 16), a dt
 * bias that softplus maps into [1e-3, 0.1]; attn_qkv bumped like attn_v in
 * Q4_K_M; and it runs to finite logits of a real model's spread. */
TEST(synthetic_hybrids_carry_the_hybrid_tensors_and_run_sanely)
{
    static const char *const archs[2] = { "qwen35", "qwen35moe" };
    for (int a = 0; a < 2; a++) {
        char path[512];
        if (synth(archs[a], "q4_k_m", 9, NULL, 2, path, sizeof path))
            continue;
        cv_model *m;
        cv_err err = { 0 };
        if (cv_model_open(path, NULL, &m, &err)) {
            CHECK_MSG(0, "%s: %s", archs[a], err.msg);
            unlink(path);
            continue;
        }
        CHECK_EQ_INT(m->hp.n_recurrent, 1);
        CHECK(m->layers[0].mixer == CV_MIXER_DELTANET && m->layers[1].mixer == CV_MIXER_ATTN);
        CHECK(m->layers[1].attn_gate);
        CHECK_EQ_INT(m->layers[1].shexp_down != NULL, a == 1);
        const cv_gguf_tensor *conv = cv_gguf_find_tensor(m->gguf, "blk.0.ssm_conv1d.weight");
        const cv_gguf_tensor *qkv = cv_gguf_find_tensor(m->gguf, "blk.0.attn_qkv.weight");
        CHECK(conv && conv->type == CV_GGML_F32 && qkv && qkv->type == CV_GGML_Q4_K);
        for (int32_t h = 0; h < m->hp.ssm_heads; h++) {
            const float a_h = m->layers[0].ssm_a[h], dt = log1pf(expf(m->layers[0].ssm_dt_bias[h]));
            CHECK_MSG(a_h <= -1 && a_h >= -16, "ssm_a[%d] = %g", h, a_h);
            CHECK_MSG(dt >= 0.999e-3f && dt <= 0.1001f, "softplus(dt_bias[%d]) = %g", h, dt);
        }
        int32_t V;
        cv_model *keep;
        float *lg = all_logits(path, &V, &keep);
        if (lg) {
            double sum = 0, ss = 0;
            bool finite = true;
            for (int64_t i = 0; i < (int64_t)48 * V; i++) {
                finite &= isfinite(lg[i]);
                sum += lg[i];
                ss += (double)lg[i] * lg[i];
            }
            const double n = 48.0 * V, sd = sqrt(ss / n - (sum / n) * (sum / n));
            printf("  %s tiny q4_k_m: logits finite %s, spread %.2f\n", archs[a], finite ? "yes" : "NO", sd);
            CHECK(finite);
            CHECK_MSG(sd > 0.5 && sd < 20, "%s: logit spread %g", archs[a], sd);
            free(lg);
            cv_model_close(keep);
        }
        cv_model_close(m);
        unlink(path);
    }
}

/* --fast draws the first 1024 rows of a larger matrix and repeats them
 * (the bytes a benchmark streams, the same size), and leaves a smaller one
 * as drawn; --layers keeps a shape's first layers, a cut that loads and
 * runs, and refuses one that would drop the layers a kind needs. */
TEST(fast_repeats_rows_and_layers_cuts_a_shape)
{
    char slow[512], fast[512];
    ref_tmp_path(slow, sizeof slow, "slow");
    ref_tmp_path(fast, sizeof fast, "fast");
    cv_err err = { 0 };
    cv_synth_params p = { .arch = "llama", .shape = "tiny", .dtype = "q8_0", .seed = 4 };
    CHECK(cv_model_synth(&p, slow, &err) == 0);
    p.fast = true;
    CHECK(cv_model_synth(&p, fast, &err) == 0);
    cv_gguf *gs = NULL, *gf = NULL;
    if (cv_gguf_open(slow, &gs, &err) == 0 && cv_gguf_open(fast, &gf, &err) == 0) {
        /* the embedding: 2048 rows, the second 1024 the first's in the fast file */
        const cv_gguf_tensor *es = cv_gguf_find_tensor(gs, "token_embd.weight"),
                             *ef = cv_gguf_find_tensor(gf, "token_embd.weight");
        const size_t row = cv_ggml_row_bytes(ef->type, ef->ne[0]);
        CHECK_EQ_INT(ef->ne[1], 2048);
        CHECK(es->n_bytes == ef->n_bytes && !memcmp(es->data, ef->data, 1024 * row));
        CHECK(!memcmp(ef->data, (const char *)ef->data + 1024 * row, 1024 * row));
        CHECK(memcmp(es->data, (const char *)es->data + 1024 * row, row));
        /* a 256-row matrix is the same in both */
        const cv_gguf_tensor *qs = cv_gguf_find_tensor(gs, "blk.1.attn_q.weight"),
                             *qf = cv_gguf_find_tensor(gf, "blk.1.attn_q.weight");
        CHECK(qs->n_bytes == qf->n_bytes && !memcmp(qs->data, qf->data, qs->n_bytes));
    }
    CHECK_MSG(gs && gf, "%s", err.msg);
    cv_gguf_close(gs);
    cv_gguf_close(gf);
    unlink(slow);

    /* the first of tiny's two layers, as qwen3moe: a model of one layer */
    cv_synth_params c = { .arch = "qwen3moe", .shape = "tiny", .dtype = "q8_0", .seed = 4, .n_layer = 1 };
    CHECK(cv_model_synth(&c, fast, &err) == 0);
    cv_model *m = NULL;
    CHECK_MSG(cv_model_open(fast, NULL, &m, &err) == 0, "%s", err.msg);
    if (m) {
        CHECK_EQ_INT(m->hp.n_layer, 1);
        int32_t ids[16];
        CHECK(greedy16(m, ids) == 0);
        cv_model_close(m);
    }
    unlink(fast);
    /* a plan of the 80B hybrid's first 20 layers of 48 sizes like them */
    size_t whole = 0, cut = 0;
    cv_synth_params q = { .arch = "qwen3next", .shape = "qwen3-coder-next", .dtype = "q4_k_m", .plan_only = true,
                          .bytes_out = &whole };
    CHECK(cv_model_synth(&q, "/tmp/corvid-never-written.gguf", &err) == 0);
    q.n_layer = 20, q.bytes_out = &cut;
    CHECK(cv_model_synth(&q, "/tmp/corvid-never-written.gguf", &err) == 0);
    CHECK_MSG(cut > whole * 0.38 && cut < whole * 0.45, "20 of 48 layers: %zu of %zu bytes", cut, whole);
    /* what a cut cannot drop: a window and a full layer before the shared
     * ones (tiny-gemma4: 3 shared, a period of 3), MLA's dense layer and a
     * layer after it, a hybrid's attention layer */
    static const struct { const char *arch, *shape; int32_t n_layer; const char *msg; } bad[] = {
        { "gemma4", "tiny-gemma4", 5, "must be 6..6" },
        { "deepseek2", "tiny", 1, "must be 2..2" },
        { "qwen3next", "tiny", 1, "must be 2..2" },
        { "llama", "tiny", 3, "must be 1..2" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        cv_synth_params b = { .arch = bad[i].arch, .shape = bad[i].shape, .dtype = "f16", .n_layer = bad[i].n_layer };
        const int rc = cv_model_synth(&b, "/tmp/corvid-never-written.gguf", &err);
        CHECK_MSG(rc == CV_EINVAL && strstr(err.msg, bad[i].msg), "%s %s %d layers: %s", bad[i].arch,
                  bad[i].shape, bad[i].n_layer, err.msg);
    }
    CHECK(access("/tmp/corvid-never-written.gguf", F_OK) != 0);
}

TEST(bad_synth_arguments_are_refused)
{
    struct {
        cv_synth_params p;
        const char *msg;
    } cases[] = {
        { { .arch = "gemma", .shape = "tiny", .dtype = "f16" }, "architecture 'gemma'" },
        { { .arch = "llama", .shape = "huge", .dtype = "f16" }, "shape 'huge'" },
        { { .arch = "llama", .shape = "tiny", .dtype = "q3_k" }, "dtype 'q3_k'" },
        { { .arch = "llama", .shape = "tiny", .dtype = "f16", .vocab = "/nonexistent.gguf" }, "/nonexistent.gguf" },
        { { .arch = "qwen3moe", .shape = "qwen3-0.6b", .dtype = "f16" }, "has no experts" },
        { { .arch = "qwen35", .shape = "qwen3-0.6b", .dtype = "f16" }, "no Gated DeltaNet sizes" },
        { { .arch = "qwen3", .shape = "qwen3.6-35b-a3b", .dtype = "f16" }, "no dense FFN width" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_err err = { 0 };
        int rc = cv_model_synth(&cases[i].p, "/tmp/corvid-never-written.gguf", &err);
        CHECK_MSG(rc != 0 && strstr(err.msg, cases[i].msg), "case %zu: rc %d \"%s\"", i, rc, err.msg);
    }
    CHECK(access("/tmp/corvid-never-written.gguf", F_OK) != 0);
}

int main(void)
{
    test_require_data();
    RUN(every_type_mix_loads_runs_and_stays_close_to_the_f16_model);
    RUN(every_architecture_synthesizes_a_tiny_model_that_loads_and_runs);
    RUN(same_seed_gives_the_same_bytes_at_any_thread_count);
    RUN(vocab_file_brings_its_tokenizer_and_chat_template);
    RUN(synthetic_hybrids_carry_the_hybrid_tensors_and_run_sanely);
    RUN(fast_repeats_rows_and_layers_cuts_a_shape);
    RUN(bad_synth_arguments_are_refused);
    return test_report();
}
