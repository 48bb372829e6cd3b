/* test_engine_batch.c — the batch shape and the paged cache: several
 * sequences at different lengths and positions, interleaved in one forward
 * call, give the logits each gets alone; prefill split in chunks equals one
 * call; a forked sequence shares blocks and copies only on write; truncate
 * rewinds; every malformed batch fails without changing any state. Runs on
 * the reference models (qwen3 F32: exact path; qwen2 Q4_K_M: int8 fast path
 * with biases; qwen3moe: routed experts, including steps where every token
 * picks the same experts and steps where no two share one), with f32, f16
 * and q8_0 KV caches; on reference2's sliding-window models (gpt-oss with
 * sinks and experts, gemma3), whose rows must be the same bits batched,
 * alone and prefilled in chunks across the window (reference3's mistral3,
 * whose query temperature steps with the position, and gemma4, with heads
 * of two sizes and shared K/V, too); and on reference2's
 * hybrids (Gated DeltaNet layers with a recurrent state per sequence):
 * their sequences in one batch get the bits each gets alone, a fork copies
 * the state, and a truncate the state cannot follow goes back only as far
 * as the state can. On reference3's latent attention (deepseek2 with and
 * without q_lora: one cached row a position for every head) the same bits
 * batched, alone, chunked and cut across threads, with every cache type;
 * and qwen3next's grouped hybrid batched as qwen35's. The threads a call
 * computes with never change its bits, and the hidden states a call can
 * keep are what its logits are made of. */
#include "ref_util.h"
#include "engine/engine_int.h"

#define REF "reference/"
#define REF2 "R2" /* a model name with this prefix is in reference2/ */
#define REF3 "R3" /* ... in reference3/ */

static json_t *g_seqs;

typedef struct fixture {
    cv_model *m;
    cv_engine *e;
    int32_t V;
} fixture;

static bool open_fixture(fixture *f, const char *model, const cv_engine_params *ep)
{
    cv_err err = { 0 };
    memset(f, 0, sizeof *f);
    char rel[256];
    if (!strncmp(model, REF2, 2) || !strncmp(model, REF3, 2))
        snprintf(rel, sizeof rel, "reference%c/models/%s.gguf", model[1], model + 2);
    else if (model[0] == '/')
        snprintf(rel, sizeof rel, "%s", model);
    else
        snprintf(rel, sizeof rel, REF "models/%s.gguf", model);
    if (cv_model_open(rel[0] == '/' ? rel : test_data(rel), NULL, &f->m, &err) ||
        cv_engine_create(f->m, ep, &f->e, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        if (f->m) cv_model_close(f->m);
        return false;
    }
    f->V = f->m->hp.n_vocab;
    return true;
}

static void close_fixture(fixture *f)
{
    cv_engine_destroy(f->e);
    cv_model_close(f->m);
}

/* Logits of every position of ids when run alone in one call: [n][V]. */
static float *alone(fixture *f, const int32_t *ids, int32_t n)
{
    bool *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++)
        want[i] = true;
    float *out = malloc((size_t)n * f->V * sizeof(float));
    CHECK(ref_run(f->e, ids, n, want, out) == 0);
    free(want);
    return out;
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double d = 0;
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Three sequences of different lengths fed as: call 1 = A[0..90) interleaved
 * with B[0..17) and C[0..1); call 2 = A[90..200), B[17..40), C[1..5)
 * interleaved; then 6 single-token steps of all three at once. Every row's
 * logits are compared with the sequence run alone. */
static void check_interleaved(const char *model, double tol, uint32_t kv_type, bool mla_decompress)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 4, .n_batch = 256, .n_logits = 256,
                            .kv_type = kv_type, .mla_decompress = mla_decompress };
    fixture f;
    if (!open_fixture(&f, model, &ep))
        return;
    int32_t n200;
    int32_t *src = ref_seq(g_seqs, strstr(model, "llama") ? "llama_spm" : "gpt2", "len200", &n200);
    /* A: 206 ids; B: the same text from id 50 (46 ids); C: from id 120 (11). */
    int32_t lens[3] = { 206, 46, 11 };
    int32_t *ids[3];
    for (int s = 0; s < 3; s++) {
        ids[s] = malloc((size_t)lens[s] * sizeof(int32_t));
        int32_t off = s == 0 ? 0 : s == 1 ? 50 : 120;
        for (int32_t i = 0; i < lens[s]; i++)
            ids[s][i] = src[(off + i) % n200];
    }
    float *ref[3];
    for (int s = 0; s < 3; s++)
        ref[s] = alone(&f, ids[s], lens[s]);

    int32_t seq[3];
    cv_err err = { 0 };
    for (int s = 0; s < 3; s++)
        CHECK(cv_engine_seq_open(f.e, &seq[s], &err) == 0);
    int32_t stops[3][3] = { { 90, 200, 206 }, { 17, 40, 46 }, { 1, 5, 11 } };
    int32_t done[3] = { 0, 0, 0 };
    double worst = 0;
    for (int call = 0; call < 8; call++) {
        int32_t tok[256], sq[256], pos[256], who[256];
        bool want[256];
        int32_t n = 0;
        /* Round-robin one token from each sequence until each reaches this
         * call's stop (calls 2..7 are single steps). */
        int32_t goal[3];
        for (int s = 0; s < 3; s++)
            goal[s] = call < 2 ? stops[s][call] : CV_MIN(done[s] + 1, lens[s]);
        for (bool more = true; more;) {
            more = false;
            for (int s = 0; s < 3; s++) {
                if (done[s] + (int32_t)0 >= goal[s])
                    continue;
                int32_t p = done[s]++;
                tok[n] = ids[s][p], sq[n] = seq[s], pos[n] = p, who[n] = s, want[n] = true;
                n++;
                more = true;
            }
        }
        if (n == 0)
            break;
        const float *lg;
        int32_t nl;
        if (cv_engine_forward(f.e, &(cv_batch){ n, tok, sq, pos, want }, &lg, &nl, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            break;
        }
        CHECK_EQ_INT(nl, n);
        for (int32_t r = 0; r < nl; r++) {
            double d = max_diff(lg + (size_t)r * f.V, ref[who[r]] + (size_t)pos[r] * f.V, f.V);
            worst = fmax(worst, d);
        }
    }
    for (int s = 0; s < 3; s++)
        CHECK_EQ_INT(cv_engine_seq_len(f.e, seq[s]), lens[s]);
    printf("  %s, %s KV: interleaved batch vs alone: max|Δ| %.3g (tolerance %g)\n", model,
           cv_engine_kv_type_name(kv_type), worst, tol);
    CHECK_MSG(worst <= tol, "%s: interleaved logits differ from single-sequence ones by %g > %g", model, worst, tol);
    for (int s = 0; s < 3; s++) {
        free(ids[s]);
        free(ref[s]);
    }
    free(src);
    close_fixture(&f);
}

TEST(interleaved_sequences_give_the_logits_each_gets_alone)
{
    /* Bit for bit: every matmul path computes a row alone (the int8 path
     * quantizes each row alone; tiles sum a token's products in the same
     * order whatever the tile's other tokens), attention reads each
     * sequence's own blocks, and an MoE token's routed experts give it the
     * same result whoever else was routed there. */
    check_interleaved("tiny-qwen3-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved("tiny-qwen2-gpt2-Q4_K_M", 0, CV_GGML_F32, false);
    check_interleaved("tiny-llama-spm-Q8_0", 0, CV_GGML_F32, false);
    check_interleaved(REF2 "tiny-qwen3moe-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF2 "tiny-qwen3moe-gpt2-Q4_K_M", 0, CV_GGML_F32, false);
    /* Quantized caches too: a position's key and value are converted alone,
     * so sharing a call with other sequences changes none of their bytes. */
    check_interleaved("tiny-qwen2-gpt2-Q4_K_M", 0, CV_GGML_F16, false);
    check_interleaved("tiny-qwen3-gpt2-F32", 0, CV_GGML_Q8_0, false);
    /* Sliding windows, sinks and routed experts (gpt-oss), 5:1 windows and
     * post-norms (gemma3): the 206 positions cross every window. */
    check_interleaved(REF2 "tiny-gptoss-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF2 "tiny-gemma3-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF2 "tiny-gemma3-gpt2-Q4_K_M", 0, CV_GGML_F16, false);
    /* The query temperature scales each row by its own position (mistral3);
     * per-layer inputs, heads of two sizes and shared K/V (gemma4); a dense
     * FFN beside routed experts (gemma4moe). */
    check_interleaved(REF3 "tiny-mistral3-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF3 "tiny-gemma4-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF3 "tiny-gemma4-gpt2-Q4_K_M", 0, CV_GGML_F16, false);
    check_interleaved(REF3 "tiny-gemma4moe-gpt2-F32", 0, CV_GGML_F32, false);
    /* A hybrid: alone is one call (chunked DeltaNet), interleaved runs
     * other pieces (and single steps), which agree to rounding: measured
     * 3.9e-5 and 2.7e-5 on logits of magnitude ~20. An f16 cache would
     * round those differences into an f16 step now and then (measured up to
     * 8e-4), so these run an f32 one; batched vs alone with the same pieces
     * is exact whatever the cache (the next test). */
    check_interleaved(REF2 "tiny-qwen35-gpt2-F32", 2e-4, CV_GGML_F32, false);
    check_interleaved(REF2 "tiny-qwen35moe-gpt2-F32", 2e-4, CV_GGML_F32, false);
    check_interleaved(REF3 "tiny-qwen3next-gpt2-F32", 2e-4, CV_GGML_F32, false);
    /* Latent attention: a token's tile rows and its GEMMs' sums do not
     * depend on the other tokens (mix_mla.c), with every latent type. */
    check_interleaved(REF3 "tiny-deepseek2-gpt2-F32", 0, CV_GGML_F32, false);
    check_interleaved(REF3 "tiny-deepseek2lite-gpt2-F32", 0, CV_GGML_F16, false);
    check_interleaved(REF3 "tiny-deepseek2-gpt2-F32", 0, CV_GGML_Q8_0, false);
    /* With the decompressed prefill (mla_decompress), alone is one call
     * (positions 0..127, a whole group of CV_MLA_GROUP, decompressed),
     * interleaved runs 0..89 and 90..199, all absorbed: the two forms agree
     * to rounding (measured 1.8e-4 and 1.2e-4 on logits of ~20). As for the
     * hybrids an f16 or q8_0 cache would round those differences into a
     * cache step now and then (an f16 one measured 7e-3), so these run an
     * f32 one; batched vs alone with the same pieces is exact with every
     * latent type (the next test). */
    check_interleaved(REF3 "tiny-deepseek2-gpt2-F32", 5e-4, CV_GGML_F32, true);
    check_interleaved(REF3 "tiny-deepseek2lite-gpt2-F32", 5e-4, CV_GGML_F32, true);
}

/* A copy of a GGUF file with every router matrix (blk.N.ffn_gate_inp)
 * zeroed: every expert then gets the same probability, and the tie goes to
 * the lowest indices, so every token of every step picks experts 0..k-1. */
static bool write_zero_router_copy(const char *src, const char *dst)
{
    cv_err err = { 0 };
    cv_gguf *g;
    if (cv_gguf_open(src, &g, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return false;
    }
    cv_gguf_writer *w = cv_gguf_writer_create();
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        cv_str k = cv_gguf_kv_key(g, i);
        char *key = cv_xstrndup(k.ptr, k.len);
        cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(g, i));
        free(key);
    }
    void *zeros[64];
    int n_zero = 0;
    bool ok = true;
    for (int64_t i = 0; i < cv_gguf_n_tensors(g) && ok; i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        const void *data = t->data;
        if (strstr(t->name, "ffn_gate_inp") && n_zero < 64)
            data = zeros[n_zero++] = calloc(1, t->n_bytes);
        ok = cv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data, t->n_bytes, &err) == 0;
    }
    ok = ok && cv_gguf_writer_write(w, dst, &err) == 0;
    CHECK_MSG(ok, "%s", err.msg);
    cv_gguf_writer_destroy(w);
    for (int i = 0; i < n_zero; i++)
        free(zeros[i]);
    cv_gguf_close(g);
    return ok && n_zero > 0;
}

/* n one-token sequences (token ids[s] at position 0) in one step; each row
 * must equal that token alone bit for bit. Returns the step's
 * (layer, expert) pairs read, or -1. */
static int32_t one_step(fixture *f, const int32_t *ids, int32_t n, const float *alone_rows)
{
    int32_t seq[8], pos[8] = { 0 };
    bool want[8];
    cv_err err = { 0 };
    for (int32_t s = 0; s < n; s++) {
        CHECK(cv_engine_seq_open(f->e, &seq[s], &err) == 0);
        want[s] = true;
    }
    const float *lg;
    int32_t nl, read = -1;
    if (cv_engine_forward(f->e, &(cv_batch){ n, ids, seq, pos, want }, &lg, &nl, &err) == 0) {
        read = cv_engine_last_stats(f->e)->experts_read;
        if (alone_rows)
            for (int32_t s = 0; s < n; s++)
                CHECK_MSG(memcmp(lg + (size_t)s * f->V, alone_rows + (size_t)s * f->V, (size_t)f->V * 4) == 0,
                          "row %d of a %d-token step differs from the token alone", s, n);
    } else {
        CHECK_MSG(0, "%s", err.msg);
    }
    for (int32_t s = 0; s < n; s++)
        cv_engine_seq_close(f->e, seq[s]);
    return read;
}

/* Logits of each token alone at position 0, and the experts it read. */
static float *alone_rows(fixture *f, const int32_t *ids, int32_t n, int32_t *read)
{
    float *out = malloc((size_t)n * f->V * sizeof(float));
    for (int32_t s = 0; s < n; s++) {
        CHECK(ref_run(f->e, &ids[s], 1, NULL, out + (size_t)s * f->V) == 0);
        read[s] = cv_engine_last_stats(f->e)->experts_read;
    }
    return out;
}

TEST(moe_step_where_every_token_picks_the_same_experts_equals_each_alone)
{
    char path[512];
    ref_tmp_path(path, sizeof path, "zero-router");
    if (!write_zero_router_copy(test_data("reference2/models/tiny-qwen3moe-gpt2-Q4_K_M.gguf"), path)) {
        unlink(path);
        return;
    }
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 64, .n_seq_max = 8, .n_batch = 64, .n_logits = 8 };
    fixture f;
    if (open_fixture(&f, path, &ep)) {
        const int32_t k = f.m->hp.n_expert_used, L = f.m->hp.n_layer;
        int32_t ids[8] = { 3, 141, 592, 653, 589, 793, 2384, 626 }, read[8];
        float *ref = alone_rows(&f, ids, 8, read);
        /* Eight tokens, one expert set: the step reads k experts per layer,
         * as one token does. */
        CHECK_EQ_INT(read[0], k * L);
        CHECK_EQ_INT(one_step(&f, ids, 8, ref), k * L);
        free(ref);
        close_fixture(&f);
    }
    unlink(path);
}

TEST(moe_step_where_no_two_tokens_share_an_expert_equals_each_alone)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 64, .n_seq_max = 8, .n_batch = 64, .n_logits = 8 };
    fixture f;
    if (!open_fixture(&f, REF2 "tiny-qwen3moe-gpt2-Q4_K_M", &ep))
        return;
    /* Three tokens whose experts are disjoint in every layer read 3 k
     * experts per layer. Random routers make about one triple in 80 so;
     * the search is deterministic (fixed file, fixed ids). */
    const int32_t k = f.m->hp.n_expert_used, L = f.m->hp.n_layer;
    int32_t found[3] = { -1, -1, -1 };
    for (int32_t a = 0; a < 40 && found[0] < 0; a++)
        for (int32_t b = a + 1; b < 40 && found[0] < 0; b++)
            for (int32_t c = b + 1; c < 40 && found[0] < 0; c++) {
                int32_t ids[3] = { a * 97 + 5, b * 97 + 5, c * 97 + 5 };
                if (one_step(&f, ids, 3, NULL) == 3 * k * L)
                    memcpy(found, ids, sizeof found);
            }
    CHECK_MSG(found[0] >= 0, "no triple of tokens with disjoint experts among the candidates");
    if (found[0] >= 0) {
        int32_t read[3];
        float *ref = alone_rows(&f, found, 3, read);
        printf("  tokens %d %d %d route to disjoint experts in every layer\n", found[0], found[1], found[2]);
        CHECK_EQ_INT(one_step(&f, found, 3, ref), 3 * k * L);
        free(ref);
    }
    close_fixture(&f);
}

/* The batch = alone invariant for a hybrid, bit for bit: three sequences
 * fed with the interleaved schedule of check_interleaved (calls of 90/17/1
 * tokens, then 110/23/4, then single steps of all three), and each alone
 * with the very same calls. A sequence's recurrent state sees only its own
 * tokens, in the same pieces, so every row matches exactly. */
static void check_hybrid_bits(const char *model, int n_threads, uint32_t kv_type, int32_t a_first)
{
    /* (mla_decompress: a latent model's first sequence then takes both forms) */
    cv_engine_params ep = { .n_threads = n_threads, .n_ctx = 256, .n_seq_max = 4, .n_batch = 256, .n_logits = 256,
                            .kv_type = kv_type, .mla_decompress = true };
    fixture f;
    if (!open_fixture(&f, model, &ep))
        return;
    int32_t n200;
    int32_t *src = ref_seq(g_seqs, "gpt2", "len200", &n200);
    const int32_t lens[3] = { 206, 46, 11 }, offs[3] = { 0, 50, 120 };
    const int32_t stops[3][2] = { { a_first, 200 }, { 17, 40 }, { 1, 5 } };
    enum { CALLS = 8 };
    /* rows[call][s]: the logits of sequence s's tokens in that call */
    float *mine[CALLS][3] = { { 0 } }, *together[CALLS][3] = { { 0 } };
    int32_t from[CALLS][3], cnt[CALLS][3];
    for (int s = 0; s < 3; s++) {
        int32_t done = 0;
        for (int c = 0; c < CALLS; c++) {
            const int32_t goal = c < 2 ? stops[s][c] : CV_MIN(done + 1, lens[s]);
            from[c][s] = done, cnt[c][s] = goal - done, done = goal;
        }
    }
    cv_err err = { 0 };
    for (int way = 0; way < 4; way++) { /* 0..2: sequence `way` alone; 3: all three together */
        int32_t seq[3];
        for (int s = 0; s < 3; s++)
            CHECK(cv_engine_seq_open(f.e, &seq[s], &err) == 0);
        for (int c = 0; c < CALLS; c++) {
            int32_t tok[256], sq[256], pos[256], who[256], n = 0;
            bool want[256];
            /* round-robin, as check_interleaved feeds them */
            for (int32_t k = 0; k < 256; k++)
                for (int s = 0; s < 3; s++)
                    if ((way == 3 || way == s) && k < cnt[c][s]) {
                        const int32_t p = from[c][s] + k;
                        tok[n] = src[(offs[s] + p) % n200], sq[n] = seq[s], pos[n] = p, who[n] = s, want[n] = true;
                        n++;
                    }
            if (n == 0)
                continue;
            const float *lg;
            int32_t nl;
            if (cv_engine_forward(f.e, &(cv_batch){ n, tok, sq, pos, want }, &lg, &nl, &err)) {
                CHECK_MSG(0, "%s", err.msg);
                break;
            }
            for (int s = 0; s < 3; s++) {
                float **dst = way == 3 ? &together[c][s] : &mine[c][s];
                if (!(way == 3 || way == s) || cnt[c][s] == 0)
                    continue;
                *dst = malloc((size_t)cnt[c][s] * f.V * sizeof(float));
                for (int32_t r = 0, k = 0; r < nl; r++)
                    if (who[r] == s)
                        memcpy(*dst + (size_t)k++ * f.V, lg + (size_t)r * f.V, (size_t)f.V * sizeof(float));
            }
        }
        for (int s = 0; s < 3; s++)
            cv_engine_seq_close(f.e, seq[s]);
    }
    int same = 0, rows = 0;
    for (int c = 0; c < CALLS; c++)
        for (int s = 0; s < 3; s++)
            for (int32_t k = 0; k < cnt[c][s]; k++) {
                rows++;
                const size_t at = (size_t)k * f.V;
                same += mine[c][s] && together[c][s] &&
                        !memcmp(mine[c][s] + at, together[c][s] + at, (size_t)f.V * sizeof(float));
            }
    printf("  %s, %d threads: %d of %d rows the same bits batched as alone\n", model, n_threads, same, rows);
    CHECK_MSG(same == rows && rows == 206 + 46 + 11, "%s: %d of %d rows differ batched from alone", model,
              rows - same, rows);
    for (int c = 0; c < CALLS; c++)
        for (int s = 0; s < 3; s++)
            free(mine[c][s]), free(together[c][s]);
    free(src);
    close_fixture(&f);
}

TEST(hybrid_sequences_batched_get_the_bits_each_gets_alone)
{
    check_hybrid_bits(REF2 "tiny-qwen35-gpt2-F32", 2, CV_GGML_F32, 90);
    check_hybrid_bits(REF2 "tiny-qwen35-gpt2-Q4_K_M", 2, CV_GGML_F32, 90);
    check_hybrid_bits(REF2 "tiny-qwen35moe-gpt2-Q4_K_M", 1, CV_GGML_F32, 90);
    /* Latent attention's two forms (mla_decompress): the first sequence's
     * first call holds a whole group (0..127) in the decompressed form
     * beside the others' absorbed tokens; every latent type. */
    check_hybrid_bits(REF3 "tiny-deepseek2-gpt2-F32", 2, CV_GGML_F32, 150);
    check_hybrid_bits(REF3 "tiny-deepseek2lite-gpt2-F32", 2, CV_GGML_F16, 150);
    check_hybrid_bits(REF3 "tiny-deepseek2-gpt2-F32", 1, CV_GGML_Q8_0, 150);
}

/* Two 48-id sequences sharing their first 40 ids (2.5 blocks), a from
 * len200 and b continuing with ids 100..107, and the last logits each gets
 * alone (ra, rb: the caller frees them and the returned ids). */
static int32_t *two_continuations(fixture *f, int32_t a[48], int32_t b[48], float **ra, float **rb)
{
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", "len200", &n);
    memcpy(a, ids, 48 * sizeof *a);
    memcpy(b, ids, 40 * sizeof *b);
    memcpy(b + 40, ids + 100, 8 * sizeof *b);
    *ra = malloc((size_t)f->V * sizeof(float));
    *rb = malloc((size_t)f->V * sizeof(float));
    CHECK(ref_run(f->e, a, 48, NULL, *ra) == 0);
    CHECK(ref_run(f->e, b, 48, NULL, *rb) == 0);
    return ids;
}

/* A fork copies the recurrent state: both branches then continue as
 * sequences run alone from the start; truncating to 0 restarts one. */
TEST(hybrid_fork_copies_the_recurrent_state)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 3 };
    fixture f;
    if (!open_fixture(&f, REF2 "tiny-qwen35-gpt2-F32", &ep))
        return;
    int32_t a[48], b[48];
    float *ra, *rb;
    int32_t *ids = two_continuations(&f, a, b, &ra, &rb);
    cv_err err = { 0 };
    int32_t s0, s1, pos[48], sq[48], nl;
    const float *lg;
    CHECK(cv_engine_seq_open(f.e, &s0, &err) == 0);
    for (int i = 0; i < 40; i++)
        pos[i] = i, sq[i] = s0;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 40, a, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK(cv_engine_seq_fork(f.e, s0, &s1, &err) == 0);
    for (int i = 0; i < 8; i++)
        pos[i] = 40 + i, sq[i] = s1;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 8, b + 40, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_MSG(max_diff(lg, rb, f.V) <= 1e-4, "fork continuation b differs by %g", max_diff(lg, rb, f.V));
    for (int i = 0; i < 8; i++)
        sq[i] = s0;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 8, a + 40, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_MSG(max_diff(lg, ra, f.V) <= 1e-4, "original continuation a differs by %g (did the fork's state leak?)",
              max_diff(lg, ra, f.V));
    /* Back to 0 and run a again: the same logits as a fresh sequence. */
    cv_engine_seq_truncate(f.e, s0, 0);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s0), 0);
    for (int i = 0; i < 48; i++)
        pos[i] = i, sq[i] = s0;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 48, a, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_MSG(memcmp(lg, ra, (size_t)f.V * sizeof(float)) == 0, "after truncate to 0: %g", max_diff(lg, ra, f.V));
    free(ra);
    free(rb);
    free(ids);
    close_fixture(&f);
}

/* Feeds tok[0..n) to seq at positions from its length, in one call; the
 * last row's logits into out (may be NULL). */
static int feed_one_call(fixture *f, int32_t seq, const int32_t *tok, int32_t n, float *out)
{
    int32_t pos[64], sq[64], nl;
    const int32_t at = cv_engine_seq_len(f->e, seq);
    for (int32_t i = 0; i < n; i++)
        pos[i] = at + i, sq[i] = seq;
    const float *lg;
    cv_err err = { 0 };
    int rc = cv_engine_forward(f->e, &(cv_batch){ n, tok, sq, pos, NULL }, &lg, &nl, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc == 0 && out)
        memcpy(out, lg, (size_t)f->V * sizeof(float));
    return rc;
}

/* The recurrent state sums every position, so a sequence goes back only
 * where a copy of it is kept: its checkpoint, or 0. The engine says so up
 * front (cv_engine_seq_truncatable) and truncate goes exactly there; the
 * positions between are the caller's to recompute, and recomputing them
 * in the same calls gives the same bits. A fork copies the state but not
 * the checkpoint. A held prefix resumes only where a snapshot of the state
 * was kept, and a restore anywhere else is refused. */
TEST(hybrid_truncate_goes_back_only_where_the_state_is_kept)
{
    cv_engine_params ep = { .n_threads = 1, .n_ctx = 128, .n_seq_max = 3, .n_kv_tokens = 1024 };
    fixture f;
    if (!open_fixture(&f, REF2 "tiny-qwen35-gpt2-Q8_0", &ep))
        return;
    CHECK_EQ_INT(f.m->hp.n_recurrent, 3);
    cv_mem_info mi;
    cv_engine_mem_info(f.e, &mi);
    CHECK(mi.state_bytes > 0 && mi.n_state_layers == 3 && mi.split_align == 64 && mi.step_run > CV_SCHED_DRAFT_MAX);
    cv_err err = { 0 };
    int32_t tok[48];
    for (int i = 0; i < 48; i++)
        tok[i] = i + 10;
    float *cont = malloc((size_t)f.V * sizeof(float)), *got = malloc((size_t)f.V * sizeof(float));
    float *fresh = malloc((size_t)f.V * sizeof(float));
    int32_t s, s2;
    /* the bits of 40 in one call, then 8 more in one call */
    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    CHECK(feed_one_call(&f, s, tok, 40, fresh) == 0 && feed_one_call(&f, s, tok + 40, 8, cont) == 0);
    cv_engine_seq_close(f.e, s);

    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    CHECK(feed_one_call(&f, s, tok, 40, NULL) == 0);
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, s, 40), 40); /* the whole length: nothing to do */
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, s, 20), 0);  /* no copy of the state at 20 */
    /* a checkpoint at 40: a cut to anywhere from 40 on goes back to it */
    cv_engine_seq_checkpoint(f.e, s);
    CHECK(feed_one_call(&f, s, tok + 40, 8, got) == 0);
    CHECK(!memcmp(got, cont, (size_t)f.V * sizeof(float)));
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, s, 44), 40);
    CHECK_EQ_INT(cv_engine_seq_truncate(f.e, s, 44), 40);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s), 40);
    CHECK(feed_one_call(&f, s, tok + 40, 8, got) == 0);
    CHECK_MSG(!memcmp(got, cont, (size_t)f.V * sizeof(float)), "back at the checkpoint and fed again: %g",
              max_diff(got, cont, f.V));
    /* a fork copies the state, not the checkpoint */
    CHECK(cv_engine_seq_fork(f.e, s, &s2, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, s2, 44), 0);
    cv_engine_seq_close(f.e, s2);
    /* below the checkpoint only 0 is left, and the checkpoint goes */
    CHECK_EQ_INT(cv_engine_seq_truncate(f.e, s, 30), 0);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s), 0);
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, s, 40), 0);
    CHECK(feed_one_call(&f, s, tok, 40, got) == 0);
    CHECK_MSG(!memcmp(got, fresh, (size_t)f.V * sizeof(float)), "after a truncate to 0: %g", max_diff(got, fresh, f.V));

    /* held spans: no snapshot, no resume; a snapshot at 32 resumes there */
    cv_engine_seq_close(f.e, s);
    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    CHECK(feed_one_call(&f, s, tok, 32, NULL) == 0);
    cv_mem_span held[2];
    const cv_mem_span *hp[2] = { &held[0], &held[1] };
    for (int i = 0; i < 2; i++) {
        CHECK(cv_engine_seq_span(f.e, s, i, &held[i]));
        cv_engine_span_ref(f.e, &held[i]);
    }
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 2, 32), 0);
    CHECK(cv_engine_seq_open(f.e, &s2, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_restore(f.e, s2, hp, 2, 32, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "snapshot") != NULL);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s2), 0);
    CHECK(cv_engine_snapshot_take(f.e, s, &held[1].snap, &err) == 0);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 2, 32), 32);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 2, 31), 0); /* 31: inside a block, no state there */
    CHECK(cv_engine_seq_restore(f.e, s2, hp, 2, 32, &err) == 0);
    CHECK(feed_one_call(&f, s2, tok + 32, 16, got) == 0);
    CHECK(feed_one_call(&f, s, tok + 32, 16, cont) == 0);
    CHECK_MSG(!memcmp(got, cont, (size_t)f.V * sizeof(float)), "resumed from the snapshot: %g",
              max_diff(got, cont, f.V));
    for (int i = 0; i < 2; i++)
        cv_engine_span_release(f.e, &held[i]);
    cv_engine_seq_close(f.e, s);
    cv_engine_seq_close(f.e, s2);
    CHECK_EQ_INT(cv_engine_kv_free_blocks(f.e), cv_engine_kv_n_blocks(f.e));
    free(cont);
    free(got);
    free(fresh);
    close_fixture(&f);
}

TEST(prefill_in_chunks_equals_prefill_in_one_call)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_batch = 256 };
    fixture f;
    if (!open_fixture(&f, "tiny-llama-spm-Q4_K_M", &ep))
        return;
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "llama_spm", "len200", &n);
    float *one = malloc((size_t)f.V * sizeof(float));
    CHECK(ref_run(f.e, ids, n, NULL, one) == 0);
    static const int32_t chunks[] = { 1, 7, 16, 17, 33, 126 }; /* 200 in all, crossing block edges */
    int32_t seq, at = 0;
    cv_err err = { 0 };
    CHECK(cv_engine_seq_open(f.e, &seq, &err) == 0);
    const float *lg = NULL;
    for (size_t c = 0; c < CV_ARRAY_LEN(chunks); c++) {
        int32_t pos[200], sq[200];
        for (int32_t i = 0; i < chunks[c]; i++)
            pos[i] = at + i, sq[i] = seq;
        int32_t nl;
        CHECK(cv_engine_forward(f.e, &(cv_batch){ chunks[c], ids + at, sq, pos, NULL }, &lg, &nl, &err) == 0);
        at += chunks[c];
    }
    CHECK_EQ_INT(at, n);
    double d = lg ? max_diff(one, lg, f.V) : 1;
    CHECK_MSG(d <= 1e-3, "chunked prefill differs by %g", d);
    free(one);
    free(ids);
    close_fixture(&f);
}

TEST(forked_sequence_shares_blocks_and_copies_only_on_write)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 3, .n_kv_tokens = 256 };
    fixture f;
    if (!open_fixture(&f, "tiny-qwen3-gpt2-F32", &ep))
        return;
    int32_t a[48], b[48];
    float *ra, *rb;
    int32_t *ids = two_continuations(&f, a, b, &ra, &rb);

    cv_err err = { 0 };
    const int32_t total = cv_engine_kv_free_blocks(f.e);
    int32_t s0, s1, pos[48], sq[48], nl;
    const float *lg;
    CHECK(cv_engine_seq_open(f.e, &s0, &err) == 0);
    for (int i = 0; i < 40; i++)
        pos[i] = i, sq[i] = s0;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 40, a, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 3);
    CHECK(cv_engine_seq_fork(f.e, s0, &s1, &err) == 0);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 3); /* shared, not copied */
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s1), 40);
    /* s1 writes into the shared third block: exactly one copy. */
    for (int i = 0; i < 8; i++)
        pos[i] = 40 + i, sq[i] = s1;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 8, b + 40, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 4);
    CHECK_MSG(max_diff(lg, rb, f.V) <= 1e-4, "fork continuation b differs by %g", max_diff(lg, rb, f.V));
    for (int i = 0; i < 8; i++)
        sq[i] = s0;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 8, a + 40, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 4); /* s0 now owns its block alone */
    CHECK_MSG(max_diff(lg, ra, f.V) <= 1e-4, "original continuation a differs by %g (did the fork's write leak?)",
              max_diff(lg, ra, f.V));
    cv_engine_seq_close(f.e, s0);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 3); /* s1's blocks: 2 shared-then-sole + its copy */
    cv_engine_seq_close(f.e, s1);
    CHECK_EQ_INT(cv_engine_kv_free_blocks(f.e), total);
    free(ra);
    free(rb);
    free(ids);
    close_fixture(&f);
}

/* Feeds seq n ids (2040: two chunks of attention) in calls of 256. */
static bool fill_deep(fixture *f, int32_t seq, const int32_t *ids, int32_t n)
{
    cv_err err = { 0 };
    int32_t pos[256], sq[256], nl;
    const float *lg;
    for (int32_t at = 0; at < n; at += 256) {
        const int32_t k = CV_MIN(256, n - at);
        for (int32_t i = 0; i < k; i++)
            pos[i] = at + i, sq[i] = seq;
        if (cv_engine_forward(f->e, &(cv_batch){ k, ids + at, sq, pos, NULL }, &lg, &nl, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            return false;
        }
    }
    return true;
}

/* The full-attention layers' plan (window 0). */
static const att_plan *full_plan(const cv_engine *e)
{
    for (int32_t k = 0; k < e->att_n_plans; k++)
        if (e->att_plans[k].window == 0)
            return &e->att_plans[k];
    return NULL;
}

/* A deep sequence decoding alone has too few tiles x kv heads for the
 * threads, so its attention is cut into chunks run on different threads
 * and merged; in a batch of five (over enough kv heads), or with one
 * thread, each tile runs its chunks in one thread. Its logits are the same
 * bits all three ways (with sinks too: they join after the merge). */
static void check_cut(const char *model)
{
    int32_t n200;
    int32_t *src = ref_seq(g_seqs, "gpt2", "len200", &n200);
    enum { DEEP = 2040 };
    int32_t *ids = malloc((DEEP + 1) * sizeof *ids);
    for (int32_t i = 0; i <= DEEP; i++)
        ids[i] = src[(i * 7) % n200];
    float *got[3] = { NULL, NULL, NULL };
    for (int way = 0; way < 3; way++) {
        cv_engine_params ep = { .n_threads = way == 2 ? 1 : 4, .n_ctx = 2048, .n_seq_max = 5, .n_batch = 256,
                                .kv_type = CV_GGML_F16 };
        fixture f;
        if (!open_fixture(&f, model, &ep))
            break;
        cv_err err = { 0 };
        int32_t seq[5], tok[5], pos[5], nl;
        bool want[5];
        const float *lg;
        CHECK(cv_engine_seq_open(f.e, &seq[0], &err) == 0);
        CHECK(fill_deep(&f, seq[0], ids, DEEP));
        const int32_t n = way == 1 ? 5 : 1;
        for (int32_t s = 1; s < n; s++)
            CHECK(cv_engine_seq_fork(f.e, seq[0], &seq[s], &err) == 0);
        for (int32_t s = 0; s < n; s++)
            tok[s] = ids[DEEP - s], pos[s] = DEEP, want[s] = true;
        CHECK(cv_engine_forward(f.e, &(cv_batch){ n, tok, seq, pos, want }, &lg, &nl, &err) == 0);
        /* cut where the step has fewer (tile, kv head) pairs than twice the
         * threads (attention.c, plan_items): alone on 4 threads, and 5
         * sequences of a model with one kv head (latent attention; gemma4's
         * full layers) */
        const int32_t n_kv = full_plan(f.e)->n_head_kv, n_split = full_plan(f.e)->n_split;
        const int32_t cut = way != 2 && n * n_kv < 2 * 4 ? n * n_kv : 0;
        CHECK_MSG(n_split == cut, "%s, %d sequences on %d threads: %d of %d (tile, kv head) pairs cut into chunks, "
                  "expected %d", model, n, way == 2 ? 1 : 4, n_split, n * n_kv, cut);
        got[way] = malloc((size_t)f.V * sizeof(float));
        memcpy(got[way], lg, (size_t)f.V * sizeof(float));
        CHECK_MSG(memcmp(got[way], got[0], (size_t)f.V * sizeof(float)) == 0, "%s: way %d differs", model, way);
        close_fixture(&f);
    }
    for (int way = 0; way < 3; way++)
        free(got[way]);
    free(ids);
    free(src);
}

TEST(attention_cut_across_threads_gives_the_bits_of_one_thread)
{
    check_cut("tiny-qwen2-gpt2-Q4_K_M");
    check_cut(REF2 "tiny-gptoss-gpt2-F32");
    check_cut(REF3 "tiny-deepseek2-gpt2-F32");
    check_cut(REF3 "tiny-gemma4-gpt2-F32");
}

/* Prefill in chunks whose edges fall before, on and past the 32-position
 * window (and inside blocks) gives every position the bits of one call
 * (tol 0), or, on an engine whose bits depend on how its positions are
 * split off its grid (cv_mem_info.split_align), logits within tol. */
static void check_chunks_across_window(const char *model, double tol, bool mla_decompress)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_batch = 256, .n_logits = 256,
                            .mla_decompress = mla_decompress };
    fixture f;
    if (!open_fixture(&f, model, &ep))
        return;
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", "len200", &n);
    float *one = alone(&f, ids, n), *lg_all = malloc((size_t)n * f.V * sizeof(float));
    static const int32_t chunks[] = { 1, 30, 1, 2, 16, 17, 33, 100 }; /* 200 in all */
    int32_t seq, at = 0;
    cv_err err = { 0 };
    CHECK(cv_engine_seq_open(f.e, &seq, &err) == 0);
    for (size_t c = 0; c < CV_ARRAY_LEN(chunks); c++) {
        int32_t pos[200], sq[200], nl;
        bool want[200];
        for (int32_t i = 0; i < chunks[c]; i++)
            pos[i] = at + i, sq[i] = seq, want[i] = true;
        const float *lg;
        if (cv_engine_forward(f.e, &(cv_batch){ chunks[c], ids + at, sq, pos, want }, &lg, &nl, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            break;
        }
        memcpy(lg_all + (size_t)at * f.V, lg, (size_t)chunks[c] * f.V * sizeof(float));
        at += chunks[c];
    }
    CHECK_EQ_INT(at, n);
    const double d = max_diff(one, lg_all, (int64_t)n * f.V);
    printf("  %s: prefill in chunks across the window vs one call, every position: max|Δ| %.3g\n", model, d);
    CHECK_MSG(d <= tol, "%s: chunked prefill differs by %g > %g", model, d, tol);
    free(one);
    free(lg_all);
    free(ids);
    close_fixture(&f);
}

/* The threads a forward call computes with (cv_engine_set_threads: how the
 * engines of several models in one process share the cores) never change
 * its bits: a prefill and decode steps on 4 threads, and the same calls
 * with the count changed before each (1, 3, 2, 4, ...), give the same
 * logits. */
static void check_threads(const char *model)
{
    int32_t n200;
    int32_t *src = ref_seq(g_seqs, "gpt2", "len200", &n200);
    enum { PROMPT = 120, STEPS = 8 };
    float *got[2] = { NULL, NULL };
    int32_t V = 0;
    for (int way = 0; way < 2; way++) {
        cv_engine_params ep = { .n_threads = 4, .n_ctx = 256, .n_batch = 256 };
        fixture f;
        if (!open_fixture(&f, model, &ep))
            break;
        V = f.V;
        got[way] = malloc((size_t)(STEPS + 1) * f.V * sizeof(float));
        cv_err err = { 0 };
        int32_t seq, sq[PROMPT], pos[PROMPT], nl;
        const float *lg;
        CHECK(cv_engine_seq_open(f.e, &seq, &err) == 0);
        for (int32_t call = 0, at = 0; call <= STEPS; call++) {
            static const int32_t counts[] = { 1, 3, 2, 4 };
            if (way == 1)
                cv_engine_set_threads(f.e, counts[call % 4]);
            const int32_t n = call == 0 ? PROMPT : 1;
            for (int32_t i = 0; i < n; i++)
                sq[i] = seq, pos[i] = at + i;
            if (cv_engine_forward(f.e, &(cv_batch){ n, src + at, sq, pos, NULL }, &lg, &nl, &err)) {
                CHECK_MSG(0, "%s: %s", model, err.msg);
                break;
            }
            memcpy(got[way] + (size_t)call * f.V, lg, (size_t)f.V * sizeof(float));
            at += n;
        }
        close_fixture(&f);
    }
    if (got[0] && got[1])
        CHECK_MSG(!memcmp(got[0], got[1], (size_t)(STEPS + 1) * V * sizeof(float)),
                  "%s: other thread counts changed the logits", model);
    free(got[0]);
    free(got[1]);
    free(src);
}

TEST(fewer_threads_give_the_same_bits)
{
    check_threads("tiny-qwen2-gpt2-Q4_K_M");
    check_threads(REF2 "tiny-qwen3moe-gpt2-Q4_K_M");
    check_threads(REF2 "tiny-qwen35-gpt2-Q4_K_M");
    check_threads(REF2 "tiny-gptoss-gpt2-F32");
}

/* Hidden states (what embeddings pool): with cv_engine_keep_hidden on,
 * every row of a call keeps its final hidden state; on the tied qwen3 F32 model, whose
 * output matrix is its token embedding, each row's hidden state times that
 * matrix is its row of logits, and asking for them changes no logit. */
TEST(hidden_states_times_the_output_matrix_are_the_logits)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_batch = 64, .n_logits = 64 };
    fixture f;
    if (!open_fixture(&f, "tiny-qwen3-gpt2-F32", &ep))
        return;
    int32_t n17;
    int32_t *ids = ref_seq(g_seqs, "gpt2", "len17", &n17);
    const int32_t E = f.m->hp.n_embd;
    float *plain = alone(&f, ids, n17), *lg_h = malloc((size_t)n17 * f.V * sizeof(float));
    float *hid = malloc((size_t)n17 * E * sizeof(float)), *row = malloc((size_t)E * sizeof(float));
    cv_err err = { 0 };
    int32_t seq, sq[64], pos[64], nl;
    bool want[64];
    const float *lg;
    CHECK(cv_engine_seq_open(f.e, &seq, &err) == 0);
    for (int32_t i = 0; i < n17; i++)
        sq[i] = seq, pos[i] = i, want[i] = true;
    cv_engine_keep_hidden(f.e, true);
    CHECK(cv_engine_forward(f.e, &(cv_batch){ n17, ids, sq, pos, want }, &lg, &nl, &err) == 0);
    CHECK_EQ_INT(nl, n17);
    memcpy(lg_h, lg, (size_t)n17 * f.V * sizeof(float));
    memcpy(hid, cv_engine_hidden(f.e), (size_t)n17 * E * sizeof(float));
    CHECK_MSG(!memcmp(plain, lg_h, (size_t)n17 * f.V * sizeof(float)), "asking for hidden states changed logits");
    double worst = 0;
    for (int32_t v = 0; v < f.V; v++) {
        cv_model_embed(f.m, v, row);
        for (int32_t t = 0; t < n17; t++) {
            double d = 0;
            for (int32_t i = 0; i < E; i++)
                d += (double)hid[(size_t)t * E + i] * row[i];
            worst = fmax(worst, fabs(d - lg_h[(size_t)t * f.V + v]));
        }
    }
    printf("  hidden x token_embd vs logits: max |diff| %.2e\n", worst);
    CHECK_MSG(worst < 1e-4, "hidden states times the output matrix differ from the logits by %g", worst);
    cv_engine_seq_close(f.e, seq);
    free(plain), free(lg_h), free(hid), free(row), free(ids);
    close_fixture(&f);
}

TEST(prefill_in_chunks_across_the_window_equals_one_call)
{
    check_chunks_across_window(REF2 "tiny-gptoss-gpt2-F32", 0, false);
    check_chunks_across_window(REF2 "tiny-gemma3-gpt2-Q8_0", 0, false);
    /* No window, but its temperature steps at 64, 128 and 192 */
    check_chunks_across_window(REF3 "tiny-mistral3-gpt2-F32", 0, false);
    /* Latent attention (no window: every chunking is one call's bits) */
    check_chunks_across_window(REF3 "tiny-deepseek2-gpt2-F32", 0, false);
    check_chunks_across_window(REF3 "tiny-deepseek2lite-gpt2-F32", 0, false);
    /* and with its decompressed prefill: these chunks hold no whole group
     * of CV_MLA_GROUP, so positions 0..127 take the absorbed form where one
     * call takes the decompressed one (measured 1.8e-4 and 1.2e-4, f32
     * cache); on its grid the next test holds it to the bit */
    check_chunks_across_window(REF3 "tiny-deepseek2-gpt2-F32", 5e-4, true);
    check_chunks_across_window(REF3 "tiny-deepseek2lite-gpt2-F32", 5e-4, true);
    check_chunks_across_window(REF3 "tiny-gemma4-gpt2-Q4_K_M", 0, false);
}

/* Latent attention's split grid with its decompressed prefill
 * (mla_decompress; cv_mem_info.split_align = CV_MLA_GROUP, 1 without):
 * prefill in chunks cut only at multiples of it gives every position the
 * bits of one call, the tail past the last whole group included, and so
 * does a run of fewer tokens than a group, which computes what one call
 * per token does (step_run). */
TEST(latent_prefill_cut_on_its_grid_equals_one_call)
{
    static const char *const models[] = { REF3 "tiny-deepseek2-gpt2-F32", REF3 "tiny-deepseek2lite-gpt2-F32" };
    /* 300 positions: one call takes 0..255 decompressed, 256..299 absorbed */
    enum { N = 300 };
    static const int32_t ways[][4] = { { 128, 128, 44, 0 }, { 256, 44, 0, 0 }, { 128, 172, 0, 0 }, { 256, 1, 43, 0 } };
    for (size_t m = 0; m < CV_ARRAY_LEN(models); m++) {
        cv_engine_params ep = { .n_threads = 2, .n_ctx = 512, .n_batch = 512, .n_logits = 512,
                                .kv_type = CV_GGML_F16 };
        fixture f;
        if (!open_fixture(&f, models[m], &ep))
            continue;
        cv_mem_info mi;
        cv_engine_mem_info(f.e, &mi); /* the absorbed form alone: any split exact */
        CHECK(mi.split_align == 1 && mi.step_run == INT32_MAX);
        close_fixture(&f);
        ep.mla_decompress = true;
        if (!open_fixture(&f, models[m], &ep))
            continue;
        cv_engine_mem_info(f.e, &mi);
        CHECK(mi.split_align == CV_MLA_GROUP && mi.step_run == CV_MLA_GROUP - 1);
        int32_t n200, n = N;
        int32_t *src = ref_seq(g_seqs, "gpt2", "len200", &n200), ids[N];
        for (int32_t i = 0; i < N; i++)
            ids[i] = src[(i * 7) % n200];
        float *one = alone(&f, ids, n), *lg_all = malloc((size_t)n * f.V * sizeof(float));
        for (size_t w = 0; w < CV_ARRAY_LEN(ways); w++) {
            int32_t seq, at = 0;
            cv_err err = { 0 };
            CHECK(cv_engine_seq_open(f.e, &seq, &err) == 0);
            /* the way's chunks (N positions in all) */
            for (size_t c = 0; at < n; c++) {
                const int32_t k = c < 4 && ways[w][c] ? ways[w][c] : 1;
                int32_t pos[N], sq[N], nl;
                bool want[N];
                for (int32_t i = 0; i < k; i++)
                    pos[i] = at + i, sq[i] = seq, want[i] = true;
                const float *lg;
                if (cv_engine_forward(f.e, &(cv_batch){ k, ids + at, sq, pos, want }, &lg, &nl, &err)) {
                    CHECK_MSG(0, "%s", err.msg);
                    break;
                }
                memcpy(lg_all + (size_t)at * f.V, lg, (size_t)k * f.V * sizeof(float));
                at += k;
            }
            cv_engine_seq_close(f.e, seq);
            CHECK_MSG(at == n && memcmp(one, lg_all, (size_t)n * f.V * sizeof(float)) == 0,
                      "%s: prefill cut on the grid (way %zu) differs from one call by %g", models[m], w,
                      max_diff(one, lg_all, (int64_t)n * f.V));
        }
        free(one);
        free(lg_all);
        free(src);
        close_fixture(&f);
    }
}

TEST(truncated_sequence_continues_as_if_the_tail_never_happened)
{
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256 };
    fixture f;
    if (!open_fixture(&f, "tiny-qwen2-gpt2-F32", &ep))
        return;
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, "gpt2", "len200", &n);
    int32_t want_ids[60];
    memcpy(want_ids, ids, 37 * sizeof(int32_t));
    memcpy(want_ids + 37, ids + 150, 23 * sizeof(int32_t));
    float *ref = malloc((size_t)f.V * sizeof(float));
    CHECK(ref_run(f.e, want_ids, 60, NULL, ref) == 0);
    cv_err err = { 0 };
    int32_t s, pos[100], sq[100], nl;
    const float *lg;
    const int32_t total = cv_engine_kv_free_blocks(f.e);
    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    for (int i = 0; i < 100; i++)
        pos[i] = i, sq[i] = s;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 100, ids, sq, pos, NULL }, &lg, &nl, &err) == 0);
    cv_engine_seq_truncate(f.e, s, 37);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s), 37);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(f.e), 3);
    for (int i = 0; i < 23; i++)
        pos[i] = 37 + i;
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 23, ids + 150, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK_MSG(max_diff(lg, ref, f.V) <= 1e-4, "after truncate: %g", max_diff(lg, ref, f.V));
    free(ref);
    free(ids);
    close_fixture(&f);
}

TEST(malformed_batches_fail_and_change_nothing)
{
    cv_engine_params ep = { .n_threads = 1, .n_ctx = 40, .n_seq_max = 2, .n_kv_tokens = 48, .n_batch = 32,
                            .n_logits = 4 };
    fixture f;
    if (!open_fixture(&f, "tiny-qwen3-gpt2-Q8_0", &ep))
        return;
    cv_err err = { 0 };
    int32_t s, s2, s3;
    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    CHECK(cv_engine_seq_open(f.e, &s2, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_open(f.e, &s3, &err), CV_EBUSY);
    int32_t tok[40], pos[40], sq[40], nl;
    for (int i = 0; i < 40; i++)
        tok[i] = i + 10, pos[i] = i, sq[i] = s;
    const float *lg;
    const int32_t free0 = cv_engine_kv_free_blocks(f.e);
    struct {
        const char *what;
        cv_batch b;
        int code;
        const char *msg;
    } cases[] = {
        { "empty batch", { 0, tok, sq, pos, NULL }, CV_EINVAL, "1..32" },
        { "more tokens than n_batch", { 33, tok, sq, pos, NULL }, CV_EINVAL, "1..32" },
        { "token id past the vocabulary", { 1, (int32_t[]){ 4096 }, sq, pos, NULL }, CV_EINVAL, "0..4095" },
        { "negative token id", { 1, (int32_t[]){ -1 }, sq, pos, NULL }, CV_EINVAL, "0..4095" },
        { "closed sequence", { 1, tok, (int32_t[]){ 3 }, pos, NULL }, CV_EINVAL, "not open" },
        { "position gap", { 2, tok, sq, (int32_t[]){ 0, 2 }, NULL }, CV_EINVAL, "expected 1" },
        { "position not at the end", { 1, tok, sq, (int32_t[]){ 5 }, NULL }, CV_EINVAL, "expected 0" },
        { "too many logit rows", { 5, tok, sq, pos, (bool[]){ 1, 1, 1, 1, 1 } }, CV_EINVAL, "4 rows" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_err_clear(&err);
        int rc = cv_engine_forward(f.e, &cases[i].b, &lg, &nl, &err);
        CHECK_MSG(rc == cases[i].code && strstr(err.msg, cases[i].msg), "%s: rc %d, \"%s\"", cases[i].what, rc,
                  err.msg);
        CHECK_EQ_INT(cv_engine_seq_len(f.e, s), 0);
        CHECK_EQ_INT(cv_engine_kv_free_blocks(f.e), free0);
    }
    /* Context: 32 fit, then 8 more reach 40, then one more is refused. */
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 32, tok, sq, pos, NULL }, &lg, &nl, &err) == 0);
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 8, tok + 32, sq, pos + 32, NULL }, &lg, &nl, &err) == 0);
    int32_t p40 = 40;
    CHECK_EQ_INT(cv_engine_forward(f.e, &(cv_batch){ 1, tok, sq, &p40, NULL }, &lg, &nl, &err), CV_ELIMIT);
    CHECK(strstr(err.msg, "context") != NULL);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s), 40);
    /* KV pool: 3 blocks of 16 in all; s holds 3 (40 positions), so s2 gets none. */
    int32_t sq2[1] = { s2 };
    CHECK_EQ_INT(cv_engine_forward(f.e, &(cv_batch){ 1, tok, sq2, pos, NULL }, &lg, &nl, &err), CV_ELIMIT);
    CHECK(strstr(err.msg, "KV cache is full") != NULL);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, s2), 0);
    cv_engine_seq_close(f.e, s);
    CHECK(cv_engine_forward(f.e, &(cv_batch){ 1, tok, sq2, pos, NULL }, &lg, &nl, &err) == 0);
    close_fixture(&f);
}

TEST(engine_parameters_out_of_range_are_refused)
{
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(test_data(REF "models/tiny-qwen3-gpt2-Q8_0.gguf"), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    struct {
        cv_engine_params p;
        int code;
    } cases[] = {
        { { .n_ctx = CV_MAX_CONTEXT + 1 }, CV_ELIMIT },
        { { .n_seq_max = CV_MAX_SEQS + 1 }, CV_ELIMIT },
        { { .n_batch = CV_MAX_BATCH_TOKENS + 1 }, CV_ELIMIT },
        { { .kv_type = CV_GGML_Q4_0 }, CV_EINVAL },
        { { .n_threads = 5000 }, CV_EINVAL },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_engine *e = NULL;
        int rc = cv_engine_create(m, &cases[i].p, &e, &err);
        CHECK_MSG(rc == cases[i].code && e == NULL, "case %zu: rc %d (%s)", i, rc, err.msg);
    }
    cv_model_close(m);
}

int main(void)
{
    test_require_data();
    g_seqs = ref_json(test_data(REF "sequences.json"));
    if (!g_seqs)
        return 1;
    RUN(interleaved_sequences_give_the_logits_each_gets_alone);
    RUN(moe_step_where_every_token_picks_the_same_experts_equals_each_alone);
    RUN(moe_step_where_no_two_tokens_share_an_expert_equals_each_alone);
    RUN(prefill_in_chunks_equals_prefill_in_one_call);
    RUN(forked_sequence_shares_blocks_and_copies_only_on_write);
    RUN(attention_cut_across_threads_gives_the_bits_of_one_thread);
    RUN(fewer_threads_give_the_same_bits);
    RUN(hidden_states_times_the_output_matrix_are_the_logits);
    RUN(prefill_in_chunks_across_the_window_equals_one_call);
    RUN(latent_prefill_cut_on_its_grid_equals_one_call);
    RUN(truncated_sequence_continues_as_if_the_tail_never_happened);
    RUN(malformed_batches_fail_and_change_nothing);
    RUN(engine_parameters_out_of_range_are_refused);
    RUN(hybrid_sequences_batched_get_the_bits_each_gets_alone);
    RUN(hybrid_fork_copies_the_recurrent_state);
    RUN(hybrid_truncate_goes_back_only_where_the_state_is_kept);
    json_decref(g_seqs);
    return test_report();
}
