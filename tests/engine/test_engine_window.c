/* test_engine_window.c — the window layers' K/V (engine_int.h "layer
 * groups") on reference2's sliding-window models and reference3's gemma4
 * (whose shared layers read the window and full layers' caches): a long
 * conversation
 * (prefill chunks, greedy replies, eight turns, 821 positions) holds,
 * after every forward call, exactly the window layers' blocks its next
 * position can see (read through cv_engine_mem_info), while the full
 * layers hold every position, and its logits are the bits of a run that
 * keeps every window layer's block (kv_keep_window). Then what other
 * holders see: a block referenced before the sequence's next forward keeps
 * its window block and a later sequence resumes from it with the same bits;
 * one held after lost it, and cv_engine_resume_len and
 * cv_engine_seq_restore refuse the lengths that would need it; a fork shares
 * the window parts and each side lets go of its own; truncating before the
 * window forgets the sequence; references balance to empty pools. */
#include "ref_util.h"
#include "engine/engine_int.h"

#define REF2 "reference2/"

static json_t *g_seqs;

typedef struct fixture {
    cv_model *m;
    cv_engine *e;
    int32_t V;
} fixture;

/* model: a file of reference2/, or of reference3/ after "R3". */
static bool open_fixture(fixture *f, const char *model, bool keep)
{
    cv_err err = { 0 };
    char rel[256];
    if (!strncmp(model, "R3", 2))
        snprintf(rel, sizeof rel, "reference3/models/%s.gguf", model + 2);
    else
        snprintf(rel, sizeof rel, REF2 "models/%s.gguf", model);
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 1024, .n_seq_max = 4, .n_kv_tokens = 4096, .n_batch = 128,
                            .kv_keep_window = keep };
    memset(f, 0, sizeof *f);
    if (cv_model_open(test_data(rel), NULL, &f->m, &err) || cv_engine_create(f->m, &ep, &f->e, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        if (f->m)
            cv_model_close(f->m);
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

/* Feeds n ids to seq at its end; the last row's logits into out. */
static bool feed(fixture *f, int32_t seq, const int32_t *ids, int32_t n, float *out)
{
    int32_t pos[128], sq[128], nl;
    const int32_t at = cv_engine_seq_len(f->e, seq);
    for (int32_t i = 0; i < n; i++)
        pos[i] = at + i, sq[i] = seq;
    const float *lg;
    cv_err err = { 0 };
    if (cv_engine_forward(f->e, &(cv_batch){ n, ids, sq, pos, NULL }, &lg, &nl, &err)) {
        CHECK_MSG(0, "forward: %s", err.msg);
        return false;
    }
    memcpy(out, lg, (size_t)f->V * sizeof(float));
    return true;
}

/* Layer group g: its window and layers, and its blocks in use (n_used). */
typedef struct group_use {
    int32_t window, n_layer, n_used;
} group_use;

static group_use group(const fixture *f, int32_t g)
{
    cv_mem_info mi;
    cv_engine_mem_info(f->e, &mi);
    CHECK(mi.n_groups == 2 && mi.group[1].kind == CV_MEM_GROUP_WINDOW);
    const cv_mem_group_info *k = &mi.group[g];
    return (group_use){ k->window, k->format.n_layer, k->n_blocks - k->n_free };
}

/* Window blocks a lone sequence holds after a forward call took it from
 * len0 to len positions: from len0's window (what the call read; it lets
 * go of what is before len's window when it next grows) to its last. */
static int32_t window_blocks(int32_t len0, int32_t len, int32_t w)
{
    return (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK - cv_att_first_block(len0, w);
}

static void check_conversation(const char *model)
{
    fixture a, b;
    if (!open_fixture(&a, model, false))
        return;
    if (!open_fixture(&b, model, true)) {
        close_fixture(&a);
        return;
    }
    int32_t n200;
    int32_t *src = ref_seq(g_seqs, "gpt2", "len200", &n200);
    const int32_t W = a.m->hp.n_swa;
    group_use g1 = group(&a, 1);
    CHECK_EQ_INT(g1.window, W);
    int32_t n_shared = 0; /* layers that read another's K/V and keep none */
    for (int32_t il = 0; il < a.m->hp.n_layer; il++)
        n_shared += a.m->layers[il].kv_src != il;
    CHECK(group(&a, 0).n_layer + g1.n_layer == a.m->hp.n_layer - n_shared);
    float *la = malloc((size_t)a.V * sizeof(float)), *lb = malloc((size_t)a.V * sizeof(float));
    int32_t sa, sb, used_max = 0, steps = 0;
    cv_err err = { 0 };
    CHECK(cv_engine_seq_open(a.e, &sa, &err) == 0 && cv_engine_seq_open(b.e, &sb, &err) == 0);
    bool same = true, ok = true;
    static const int32_t turn_prompt[] = { 100, 37, 64, 5, 128, 77, 50, 40 };
    for (size_t t = 0; t < CV_ARRAY_LEN(turn_prompt) && ok; t++) {
        /* the turn's prompt: in chunks of up to 48 tokens */
        for (int32_t done = 0; done < turn_prompt[t] && ok;) {
            const int32_t k = CV_MIN(48, turn_prompt[t] - done), at = cv_engine_seq_len(a.e, sa);
            int32_t ids[48];
            for (int32_t i = 0; i < k; i++)
                ids[i] = src[(at + i) % n200];
            ok = feed(&a, sa, ids, k, la) && feed(&b, sb, ids, k, lb);
            same = same && ok && !memcmp(la, lb, (size_t)a.V * sizeof(float));
            done += k;
        }
        /* the reply: greedy, one token per call */
        for (int32_t r = 0; r < 40 && ok; r++) {
            int32_t tok = cv_argmax(la, a.V);
            ok = feed(&a, sa, &tok, 1, la) && feed(&b, sb, &tok, 1, lb);
            same = same && ok && !memcmp(la, lb, (size_t)a.V * sizeof(float));
            const int32_t len = cv_engine_seq_len(a.e, sa), used = group(&a, 1).n_used;
            CHECK_MSG(used == window_blocks(len - 1, len, W), "%s at %d: %d window blocks held, %d seen", model, len,
                      used, window_blocks(len - 1, len, W));
            CHECK_EQ_INT(group(&a, 0).n_used, (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK);
            CHECK_EQ_INT(group(&b, 1).n_used, group(&b, 0).n_used);
            used_max = CV_MAX(used_max, used);
            steps++;
        }
    }
    const int32_t len = cv_engine_seq_len(a.e, sa);
    printf("  %s: %d positions in 8 turns; window layers (W %d) held at most %d blocks, full layers %d; "
           "logits %s the keep-everything run's\n",
           model, len, W, used_max, group(&a, 0).n_used, same ? "equal" : "DIFFER from");
    CHECK(len == 821 && steps == 320);
    CHECK_MSG(same, "%s: freeing the window layers' passed blocks changed the logits", model);
    CHECK(used_max <= (W + CV_KV_BLOCK - 1) / CV_KV_BLOCK + 1);
    cv_engine_seq_close(a.e, sa);
    cv_engine_seq_close(b.e, sb);
    for (int32_t g = 0; g < 2; g++)
        CHECK_EQ_INT(group(&a, g).n_used, 0);
    free(la);
    free(lb);
    free(src);
    close_fixture(&a);
    close_fixture(&b);
}

TEST(a_long_conversation_holds_the_window_and_computes_what_keeping_everything_does)
{
    check_conversation("tiny-gptoss-gpt2-F32");
    check_conversation("tiny-gemma3-gpt2-Q8_0");
    /* window and full layers of their own head sizes, three reading the
     * caches of earlier ones */
    check_conversation("R3tiny-gemma4-gpt2-Q4_K_M");
}

TEST(other_holders_resume_where_the_window_parts_are_kept)
{
    fixture f;
    if (!open_fixture(&f, "tiny-gptoss-gpt2-F32", false))
        return;
    int32_t n200;
    int32_t *ids = ref_seq(g_seqs, "gpt2", "len200", &n200);
    const int32_t W = f.m->hp.n_swa; /* 32: position p sees from block (p - 31) / 16 */
    float *ref = malloc((size_t)f.V * sizeof(float)), *got = malloc((size_t)f.V * sizeof(float));
    CHECK(ref_run(f.e, ids, 120, NULL, ref) == 0);
    cv_err err = { 0 };
    int32_t s, t, u;
    CHECK(cv_engine_seq_open(f.e, &s, &err) == 0);
    CHECK(feed(&f, s, ids, 64, got));
    /* A holder that takes its spans now, as the prefix cache does after
     * each step, keeps the window blocks of blocks 0..3. */
    cv_mem_span held[4], late[8];
    const cv_mem_span *hp[8];
    for (int32_t i = 0; i < 4; i++) {
        CHECK(cv_engine_seq_span(f.e, s, i, &held[i]));
        CHECK(held[i].kv[1] >= 0);
        cv_engine_span_ref(f.e, &held[i]);
        hp[i] = &held[i];
    }
    CHECK(!cv_engine_seq_span(f.e, s, 4, &late[0]));
    CHECK(feed(&f, s, ids + 64, 48, got)); /* at 64 s lets go of its own window blocks 0, 1 */
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 4, 64), 64);
    CHECK(cv_engine_seq_open(f.e, &t, &err) == 0);
    CHECK(cv_engine_seq_restore(f.e, t, hp, 4, 64, &err) == 0);
    CHECK(feed(&f, t, ids + 64, 56, got));
    CHECK_MSG(!memcmp(got, ref, (size_t)f.V * sizeof(float)), "resumed at 64 and continued: not the bits of one run");
    cv_engine_seq_close(f.e, t);
    for (int32_t i = 0; i < 4; i++)
        cv_engine_span_release(f.e, &held[i]); /* window blocks 0, 1 go with them */
    /* s at 112 continues to 120 and lets go of window blocks 2..4; a
     * holder taking its spans after that has blocks 0..4 without one, so
     * only lengths whose window starts at block 5 resume. */
    CHECK(feed(&f, s, ids + 112, 8, got));
    for (int32_t i = 0; i < 8; i++) {
        CHECK(cv_engine_seq_span(f.e, s, i, &late[i]));
        CHECK_EQ_INT(late[i].kv[1] >= 0, i >= 5);
        cv_engine_span_ref(f.e, &late[i]);
        hp[i] = &late[i];
    }
    CHECK(!cv_engine_span_read(f.e, &late[0], NULL) && cv_engine_span_read(f.e, &late[5], NULL));
    CHECK_EQ_INT(cv_att_first_block(112, W), 5);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 8, 120), 120);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 7, 112), 112);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 8, 119), 119);
    CHECK_EQ_INT(cv_engine_resume_len(f.e, hp, 6, 96), 0); /* 96 sees from block 4, and so on down */
    CHECK(cv_engine_seq_open(f.e, &t, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_restore(f.e, t, hp, 6, 96, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "not held") != NULL);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, t), 0);
    CHECK(cv_engine_seq_restore(f.e, t, hp, 7, 112, &err) == 0);
    CHECK(feed(&f, t, ids + 112, 8, got));
    CHECK_MSG(!memcmp(got, ref, (size_t)f.V * sizeof(float)), "resumed at 112: not the bits of one run");
    /* A fork shares the window blocks; truncating a side back before its
     * window forgets it, within it keeps the length. */
    CHECK(cv_engine_seq_fork(f.e, t, &u, &err) == 0);
    CHECK_EQ_INT(cv_engine_seq_truncatable(f.e, u, 100), 0);
    CHECK_EQ_INT(cv_engine_seq_truncate(f.e, u, 100), 0);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, u), 0);
    CHECK_EQ_INT(cv_engine_seq_truncate(f.e, t, 115), 115);
    CHECK_EQ_INT(cv_engine_seq_len(f.e, t), 115);
    for (int32_t i = 0; i < 8; i++)
        cv_engine_span_release(f.e, &late[i]);
    cv_engine_seq_close(f.e, s);
    cv_engine_seq_close(f.e, t);
    cv_engine_seq_close(f.e, u);
    for (int32_t g = 0; g < 2; g++)
        CHECK_EQ_INT(group(&f, g).n_used, 0);
    free(ref);
    free(got);
    free(ids);
    close_fixture(&f);
}

int main(void)
{
    test_require_data();
    g_seqs = ref_json(test_data("reference2/sequences.json"));
    if (!g_seqs)
        return 1;
    RUN(a_long_conversation_holds_the_window_and_computes_what_keeping_everything_does);
    RUN(other_holders_resume_where_the_window_parts_are_kept);
    json_decref(g_seqs);
    return test_report();
}
