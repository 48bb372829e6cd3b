/* test_engine_kv_share.c — memory held outside sequences (the prefix
 * cache's and the cache file's view of the engine: spans), on models
 * without recurrent state (test_engine_batch holds the hybrids' restores,
 * snapshots and checkpoints; test_engine_window the window layers'): a block computed for one sequence,
 * kept alive by an outside span after that sequence closed, serves a new
 * sequence restored from it, which continues with bit-identical logits; a
 * held prefix resumes at any length within it (a hole ends it); a shared
 * partly used last block is copied before the new sequence writes into it
 * (the outside holder's bytes never change); a block copied byte for byte
 * into a fresh block serves as well; KV truncates anywhere, a checkpoint is
 * a no-op and there is no state to snapshot; needs and shortfalls count
 * blocks; bad calls change nothing; references balance to an empty pool. Three
 * forks of a 2,100-token prefix (131 shared blocks) decoding in one batch
 * give, bit for bit, what each gets decoding alone and what a prefill
 * ending in the same token gives.
 *
 * Bit-identical (memcmp) rather than a tolerance: the scheduler's exactness
 * (N concurrent requests give the tokens each gets alone) rests on
 * the forward pass computing each row independently of the rest of the
 * batch, and this is the engine-level statement of that property. */
#include "ref_util.h"

#define REF "reference/"

static json_t *g_seqs;

static bool open_engine(const char *model, cv_model **m, cv_engine **e)
{
    cv_err err = { 0 };
    char rel[256];
    snprintf(rel, sizeof rel, REF "models/%s.gguf", model);
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256, .n_seq_max = 4, .n_kv_tokens = 512 };
    *m = NULL;
    *e = NULL;
    if (cv_model_open(test_data(rel), NULL, m, &err) || cv_engine_create(*m, &ep, e, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        if (*m)
            cv_model_close(*m);
        return false;
    }
    return true;
}

/* Feeds ids[from..to) to seq; copies the last row's logits to out. */
static int feed(cv_engine *e, int32_t seq, const int32_t *ids, int32_t from, int32_t to, float *out)
{
    int32_t n = to - from, pos[256], sq[256], nl;
    for (int32_t i = 0; i < n; i++)
        pos[i] = from + i, sq[i] = seq;
    const float *lg;
    cv_err err = { 0 };
    int rc = cv_engine_forward(e, &(cv_batch){ n, ids + from, sq, pos, NULL }, &lg, &nl, &err);
    if (rc)
        fprintf(stderr, "forward: %s\n", err.msg);
    else
        memcpy(out, lg, (size_t)cv_engine_model(e)->hp.n_vocab * sizeof(float));
    return rc;
}

/* A span holding block b of group 0 alone. */
static cv_mem_span span_of(int32_t b)
{
    cv_mem_span sp = { .kv = { b, -1, -1, -1 } };
    return sp;
}

static void check_model(const char *model, const char *family)
{
    cv_model *m;
    cv_engine *e;
    if (!open_engine(model, &m, &e))
        return;
    const int32_t V = m->hp.n_vocab;
    int32_t n;
    int32_t *ids = ref_seq(g_seqs, family, "len200", &n);
    float *ref = malloc((size_t)V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
    CHECK(ref_run(e, ids, 48, NULL, ref) == 0); /* the truth: 48 ids alone, one call */
    const int32_t total = cv_engine_kv_free_blocks(e);
    CHECK_EQ_INT(cv_engine_kv_n_blocks(e), 32);
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    CHECK(mi.n_groups == 1 && mi.group[0].kind == CV_MEM_GROUP_FULL && mi.group[0].n_blocks == 32);
    CHECK(mi.state_bytes == 0 && mi.n_state_layers == 0 && mi.snapshot_blocks == 0);
    CHECK(mi.max_positions == 32 * CV_KV_BLOCK);
    cv_err err = { 0 };

    /* A computes 40 positions (2.5 blocks); an outside holder keeps its two
     * full blocks; A closes. */
    int32_t a;
    cv_mem_span held[2], sp;
    CHECK(cv_engine_seq_open(e, &a, &err) == 0);
    CHECK(feed(e, a, ids, 0, 40, got) == 0);
    CHECK(cv_engine_seq_span(e, a, 2, &sp) && !cv_engine_seq_span(e, a, 3, &sp)); /* 3 blocks */
    cv_mem_need need = { 0 };
    cv_engine_seq_need(e, a, 8, &need);
    CHECK_EQ_INT(need.blocks[0], 0); /* 40 + 8 fits the third block */
    cv_engine_seq_need(e, a, 9, &need);
    CHECK_EQ_INT(need.blocks[0], 1);
    CHECK_EQ_INT(cv_engine_mem_short(e, &need, NULL), 0);
    for (int i = 0; i < 2; i++) {
        CHECK(cv_engine_seq_span(e, a, i, &held[i]) && held[i].snap == NULL);
        cv_engine_span_ref(e, &held[i]);
    }
    CHECK_EQ_INT(cv_engine_kv_refs(e, 0, held[0].kv[0]), 2);
    CHECK(!cv_engine_span_sole(e, &held[0]));
    /* Without recurrent state, KV cuts back anywhere and a checkpoint is a
     * no-op; there is no state to snapshot. */
    CHECK_EQ_INT(cv_engine_seq_truncatable(e, a, 17), 17);
    cv_engine_seq_checkpoint(e, a);
    cv_snapshot *snap = NULL;
    CHECK(cv_engine_snapshot_take(e, a, &snap, &err) == CV_EINVAL && snap == NULL);
    cv_engine_seq_close(e, a);
    CHECK_EQ_INT(total - cv_engine_kv_free_blocks(e), 2);
    CHECK_EQ_INT(cv_engine_kv_refs(e, 0, held[1].kv[0]), 1);
    CHECK(cv_engine_span_sole(e, &held[1]));
    cv_mem_need frees = { 0 };
    cv_engine_span_frees(e, &held[0], &frees);
    cv_engine_span_frees(e, &held[1], &frees);
    CHECK_EQ_INT(frees.blocks[0], 2);

    cv_kv_format fmt;
    cv_engine_kv_format(e, &fmt);
    CHECK_EQ_INT(fmt.block_positions, CV_KV_BLOCK);
    CHECK_EQ_INT(fmt.n_layer, m->hp.n_layer);
    CHECK(fmt.block_bytes == (size_t)fmt.n_layer * 2 * fmt.n_head_kv * fmt.head_dim * CV_KV_BLOCK * 4);
    unsigned char *saved = malloc(fmt.block_bytes), *now = malloc(fmt.block_bytes);
    cv_engine_kv_block_read(e, 0, held[1].kv[0], saved);

    /* The held prefix resumes anywhere within it. */
    const cv_mem_span *path[2] = { &held[0], &held[1] };
    CHECK_EQ_INT(cv_engine_resume_len(e, path, 2, 100), 32);
    CHECK_EQ_INT(cv_engine_resume_len(e, path, 2, 31), 31);
    CHECK_EQ_INT(cv_engine_resume_len(e, path, 1, 100), 16);

    /* B restores both blocks at length 32 and continues: the same logits. */
    int32_t b;
    CHECK(cv_engine_seq_open(e, &b, &err) == 0);
    CHECK(cv_engine_seq_restore(e, b, path, 2, 32, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_len(e, b), 32);
    need = (cv_mem_need){ 0 };
    cv_engine_seq_need(e, b, 16, &need);
    CHECK_EQ_INT(need.blocks[0], 1);
    CHECK(feed(e, b, ids, 32, 48, got) == 0);
    CHECK_MSG(memcmp(got, ref, (size_t)V * sizeof(float)) == 0, "%s: shared at 32: logits differ", model);
    cv_engine_seq_close(e, b);

    /* C restores them at length 31: its write at 31 copies the second block
     * first, so the holder's block keeps its bytes. */
    int32_t c;
    CHECK(cv_engine_seq_open(e, &c, &err) == 0);
    CHECK(cv_engine_seq_restore(e, c, path, 2, 31, &err) == 0);
    need = (cv_mem_need){ 0 };
    cv_engine_seq_need(e, c, 1, &need);
    CHECK_EQ_INT(need.blocks[0], 1); /* the copy */
    CHECK(feed(e, c, ids, 31, 48, got) == 0);
    CHECK_MSG(memcmp(got, ref, (size_t)V * sizeof(float)) == 0, "%s: shared at 31: logits differ", model);
    cv_mem_span c0, c1;
    CHECK(cv_engine_seq_span(e, c, 0, &c0) && cv_engine_seq_span(e, c, 1, &c1) && cv_engine_seq_span(e, c, 2, &sp));
    CHECK(c0.kv[0] == held[0].kv[0] && c1.kv[0] != held[1].kv[0]);
    cv_engine_kv_block_read(e, 0, held[1].kv[0], now);
    CHECK(memcmp(saved, now, fmt.block_bytes) == 0);
    cv_engine_seq_close(e, c);

    /* A block restored from bytes (as from a cache file) serves as well. */
    cv_mem_span fresh = span_of(cv_engine_kv_alloc(e, 0));
    int32_t d;
    CHECK(fresh.kv[0] >= 0 && cv_engine_kv_refs(e, 0, fresh.kv[0]) == 1);
    cv_engine_kv_block_write(e, 0, fresh.kv[0], saved);
    const cv_mem_span *restored[2] = { &held[0], &fresh };
    CHECK(cv_engine_seq_open(e, &d, &err) == 0);
    CHECK(cv_engine_seq_restore(e, d, restored, 2, 32, &err) == 0);
    CHECK(feed(e, d, ids, 32, 48, got) == 0);
    CHECK_MSG(memcmp(got, ref, (size_t)V * sizeof(float)) == 0, "%s: restored block: logits differ", model);

    /* Bad calls: nothing changes. */
    int32_t free_before = cv_engine_kv_free_blocks(e);
    cv_mem_span bad_free = span_of(-1), out_of_range = span_of(cv_engine_kv_n_blocks(e)), hole = span_of(-1);
    for (int32_t i = 0; i < cv_engine_kv_n_blocks(e); i++)
        if (cv_engine_kv_refs(e, 0, i) == 0) {
            bad_free.kv[0] = i;
            break;
        }
    const cv_mem_span *p_free[1] = { &bad_free }, *p_range[1] = { &out_of_range }, *p_hole[2] = { &held[0], &hole };
    CHECK_EQ_INT(cv_engine_resume_len(e, p_hole, 2, 100), 16); /* a hole in the path ends it */
    int32_t g;
    CHECK(cv_engine_seq_open(e, &g, &err) == 0);
    struct {
        int32_t seq;
        const cv_mem_span *const *spans;
        int32_t n, len;
        const char *msg;
    } bad[] = {
        { d, path, 2, 32, "not open and empty" },      /* d holds blocks already */
        { 3, path, 2, 32, "not open and empty" },      /* slot 3 is closed */
        { g, path, 2, 33, "cannot hold" },             /* 33 needs 3 blocks */
        { g, path, 0, 1, "cannot hold" },
        { g, path, 2, -1, "cannot hold" },
        { g, p_free, 1, 16, "not a block in use" },
        { g, p_range, 1, 16, "not a block in use" },
        { g, p_hole, 2, 17, "not held" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        cv_err e2 = { 0 };
        int rc = cv_engine_seq_restore(e, bad[i].seq, bad[i].spans, bad[i].n, bad[i].len, &e2);
        CHECK_MSG(rc == CV_EINVAL && strstr(e2.msg, bad[i].msg), "case %zu: rc %d \"%s\"", i, rc, e2.msg);
    }
    CHECK_EQ_INT(cv_engine_seq_len(e, g), 0);
    CHECK_EQ_INT(cv_engine_kv_free_blocks(e), free_before);
    CHECK_EQ_INT(cv_engine_kv_refs(e, 0, -1), 0);
    need = (cv_mem_need){ 0 };
    cv_engine_seq_need(e, 3, 5, &need);
    CHECK_EQ_INT(need.blocks[0], 0);
    CHECK(!cv_engine_seq_span(e, 3, 0, &sp) && sp.kv[0] == -1);
    CHECK_EQ_INT(cv_engine_seq_truncatable(e, 3, 5), 0);
    CHECK_EQ_INT(cv_engine_seq_truncate(e, 3, 5), 0);

    /* Everyone lets go: the pool is whole again. */
    cv_engine_seq_close(e, g);
    cv_engine_seq_close(e, d);
    cv_engine_span_release(e, &fresh);
    cv_engine_span_release(e, &held[0]);
    cv_engine_span_release(e, &held[1]);
    CHECK(held[0].kv[0] == -1 && held[0].snap == NULL);
    CHECK_EQ_INT(cv_engine_kv_free_blocks(e), total);

    /* The pool runs dry: alloc says so, and so does the need of one more. */
    int32_t *all = malloc((size_t)total * sizeof *all);
    for (int32_t i = 0; i < total; i++)
        all[i] = cv_engine_kv_alloc(e, 0);
    CHECK_EQ_INT(cv_engine_kv_alloc(e, 0), -1);
    need = (cv_mem_need){ .blocks = { 1 } };
    CHECK_EQ_INT(cv_engine_mem_short(e, &need, NULL), 1);
    cv_mem_need more = { .blocks = { 1 } };
    CHECK_EQ_INT(cv_engine_mem_short(e, &need, &more), 0);
    for (int32_t i = 0; i < total; i++) {
        cv_mem_span one = span_of(all[i]);
        cv_engine_span_release(e, &one);
    }
    CHECK_EQ_INT(cv_engine_kv_free_blocks(e), total);

    free(all);
    free(saved);
    free(now);
    free(ref);
    free(got);
    free(ids);
    cv_engine_destroy(e);
    cv_model_close(m);
}

/* Feeds ids[0..n) to seq in calls of at most `step` tokens. */
static int feed_all(cv_engine *e, int32_t seq, const int32_t *ids, int32_t n, int32_t step, float *out)
{
    for (int32_t at = 0; at < n; at += step)
        if (feed(e, seq, ids, at, CV_MIN(n, at + step), out))
            return -1;
    return 0;
}

static void check_long_prefix(const char *model, const char *family, uint32_t kv_type)
{
    enum { PREFIX = 2100, STEPS = 3, FORKS = 3 };
    cv_model *m;
    cv_engine *e;
    cv_err err = { 0 };
    char rel[256];
    snprintf(rel, sizeof rel, REF "models/%s.gguf", model);
    cv_engine_params ep = { .n_threads = 2, .n_ctx = PREFIX + 64, .n_seq_max = 4, .n_batch = 256, .kv_type = kv_type };
    if (cv_model_open(test_data(rel), NULL, &m, &err) || cv_engine_create(m, &ep, &e, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        return;
    }
    const int32_t V = m->hp.n_vocab;
    int32_t n;
    int32_t *src = ref_seq(g_seqs, family, "len200", &n);
    int32_t *ids[FORKS];
    for (int f = 0; f < FORKS; f++) { /* a common prefix, then each fork's own tokens */
        ids[f] = malloc((PREFIX + STEPS) * sizeof(int32_t));
        for (int32_t i = 0; i < PREFIX + STEPS; i++)
            ids[f][i] = src[(i < PREFIX ? i * 7 : i * 7 + 13 * (f + 1)) % n];
    }
    float *got = malloc((size_t)FORKS * STEPS * V * sizeof(float)), *alone = malloc((size_t)V * sizeof(float));
    /* together: the prefix once, two forks sharing its blocks, then every
     * step one batch of the three forks' next tokens */
    int32_t seq[FORKS];
    CHECK(cv_engine_seq_open(e, &seq[0], &err) == 0);
    CHECK(feed_all(e, seq[0], ids[0], PREFIX, 256, alone) == 0);
    for (int f = 1; f < FORKS; f++)
        CHECK(cv_engine_seq_fork(e, seq[0], &seq[f], &err) == 0);
    for (int32_t t = 0; t < STEPS; t++) {
        int32_t tok[FORKS], pos[FORKS], nl;
        bool want[FORKS];
        for (int f = 0; f < FORKS; f++)
            tok[f] = ids[f][PREFIX + t], pos[f] = PREFIX + t, want[f] = true;
        const float *lg;
        if (cv_engine_forward(e, &(cv_batch){ FORKS, tok, seq, pos, want }, &lg, &nl, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            break;
        }
        CHECK_EQ_INT(nl, FORKS);
        memcpy(got + (size_t)t * FORKS * V, lg, (size_t)FORKS * V * sizeof(float));
    }
    for (int f = 0; f < FORKS; f++)
        cv_engine_seq_close(e, seq[f]);
    /* alone: each fork's prefix computed afresh, its tokens one at a time */
    for (int f = 0; f < FORKS; f++) {
        int32_t s;
        CHECK(cv_engine_seq_open(e, &s, &err) == 0);
        CHECK(feed_all(e, s, ids[f], PREFIX, 256, alone) == 0);
        for (int32_t t = 0; t < STEPS; t++) {
            CHECK(feed(e, s, ids[f], PREFIX + t, PREFIX + t + 1, alone) == 0);
            CHECK_MSG(memcmp(alone, got + ((size_t)t * FORKS + f) * V, (size_t)V * sizeof(float)) == 0,
                      "%s %s KV: fork %d step %d: batched logits differ from alone", model,
                      cv_engine_kv_type_name(kv_type), f, t);
        }
        cv_engine_seq_close(e, s);
        /* and the last step's token at the end of a 5-token prefill call */
        CHECK(cv_engine_seq_open(e, &s, &err) == 0);
        CHECK(feed_all(e, s, ids[f], PREFIX + STEPS - 5, 256, alone) == 0);
        CHECK(feed(e, s, ids[f], PREFIX + STEPS - 5, PREFIX + STEPS, alone) == 0);
        CHECK_MSG(memcmp(alone, got + ((size_t)(STEPS - 1) * FORKS + f) * V, (size_t)V * sizeof(float)) == 0,
                  "%s %s KV: fork %d: prefilled logits differ from decoded ones", model,
                  cv_engine_kv_type_name(kv_type), f);
        cv_engine_seq_close(e, s);
    }
    for (int f = 0; f < FORKS; f++)
        free(ids[f]);
    free(src);
    free(got);
    free(alone);
    cv_engine_destroy(e);
    cv_model_close(m);
}

TEST(decode_rows_over_a_shared_long_prefix_match_each_alone)
{
    check_long_prefix("tiny-qwen2-gpt2-Q4_K_M", "gpt2", CV_GGML_F16);
    check_long_prefix("tiny-qwen3-gpt2-F32", "gpt2", CV_GGML_F32);
    check_long_prefix("tiny-llama-spm-Q8_0", "llama_spm", CV_GGML_Q8_0);
}

TEST(shared_blocks_continue_with_bit_identical_logits)
{
    check_model("tiny-llama-spm-Q8_0", "llama_spm");    /* int8 tiles */
    check_model("tiny-qwen3-gpt2-F32", "gpt2");         /* f32 dots, Q/K norm */
    check_model("tiny-qwen2-gpt2-Q4_K_M", "gpt2");      /* k-quants, biases */
}

int main(void)
{
    test_require_data();
    g_seqs = ref_json(test_data(REF "sequences.json"));
    RUN(shared_blocks_continue_with_bit_identical_logits);
    RUN(decode_rows_over_a_shared_long_prefix_match_each_alone);
    json_decref(g_seqs);
    return test_report();
}
