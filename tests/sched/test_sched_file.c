/* test_sched_file.c — the prefix cache survives a restart: a scheduler
 * with a cache directory writes its tree at destroy; a new model, engine
 * and scheduler (a restart, minus the process) read it back, and the first
 * request reports the cached tokens and gives the uncached answer. Every
 * damaged file is refused with one warning line and the scheduler then
 * serves cold and exact: truncated at every interesting offset, a flipped
 * byte in each part, a file for another model (same shape, other weights)
 * or another KV format, random bytes, an empty file, a directory in its
 * place, and a file whose checksums are all correct but whose block
 * bytes differ from what this build computes (the numerics check). A size
 * budget keeps the most recent prefixes. The process-level test (SIGTERM
 * a real `corvid serve`) is in tests/server/test_server_serve_cli.c. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "sched/sched_int.h"
#include "sched_util.h"

static char g_model[512], g_other[512], g_dir[512];
static const cv_engine_params g_ep = { .n_threads = 1, .n_ctx = 512, .n_seq_max = 4, .n_batch = 256 };

static int32_t g_ids[3][200];
static cv_sched_params g_p[3];
static outcome g_ref[3];

/* ---- stderr capture (the warning line) ---- */

static int g_saved_fd = -1;
static char g_cap_path[600];

static void capture_begin(void)
{
    fflush(stderr);
    snprintf(g_cap_path, sizeof g_cap_path, "%s/stderr.txt", g_dir);
    int fd = open(g_cap_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    g_saved_fd = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Returns what was written (caller frees). */
static char *capture_end(void)
{
    fflush(stderr);
    dup2(g_saved_fd, 2);
    close(g_saved_fd);
    cv_buf b = { 0 };
    cv_read_file(g_cap_path, &b, 1 << 20, NULL);
    unlink(g_cap_path);
    return b.data ? cv_buf_steal(&b) : cv_xstrdup("");
}

static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* ---- helpers ---- */

static bool open_engine(const char *model, const cv_engine_params *ep, cv_model **m, cv_engine **e)
{
    cv_err err = { 0 };
    *m = NULL;
    *e = NULL;
    if (cv_model_open(model, NULL, m, &err) || cv_engine_create(*m, ep, e, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        if (*m)
            cv_model_close(*m);
        return false;
    }
    return true;
}

static void cache_path(cv_engine *e, char *out, size_t n)
{
    char name[64];
    cv_sched_cache_file_name(e, name, sizeof name);
    snprintf(out, n, "%s/%s", g_dir, name);
}

static cv_sched_config with_dir(void) { return (cv_sched_config){ .cache_dir = g_dir }; }

/* Fills the cache with the three prompts and saves it (destroy). */
/* Runs the three prompts and writes the file: *saved is the tree's nodes
 * (what file_blocks_loaded counts), *tree_blocks what they hold with their
 * snapshots (NULL: not wanted). */
static void fill_and_save_all(const char *model, const cv_engine_params *ep, int64_t *saved, int64_t *tree_blocks)
{
    rig r;
    cv_sched_config sc = with_dir();
    if (!rig_open_with(&r, model, ep, &sc))
        return;
    outcome o;
    for (int i = 0; i < 3; i++)
        CHECK(run_one(r.s, &g_p[i], &o) == 0);
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    *saved = st.tree_blocks - st.snapshot_blocks;
    if (tree_blocks)
        *tree_blocks = st.tree_blocks;
    rig_close(&r); /* writes the file */
}

static void fill_and_save(const char *model, const cv_engine_params *ep, int64_t *saved)
{
    fill_and_save_all(model, ep, saved, NULL);
}

static unsigned char *read_all(const char *path, size_t *n)
{
    cv_buf b = { 0 };
    if (cv_read_file(path, &b, (size_t)1 << 30, NULL)) {
        *n = 0;
        return NULL;
    }
    *n = b.len;
    return (unsigned char *)cv_buf_steal(&b);
}

static void write_all_file(const char *path, const void *data, size_t n)
{
    unlink(path);
    CHECK(cv_write_file_atomic(path, data, n, NULL) == 0);
}

/* Opens a fresh rig on the cache dir; checks how many blocks were loaded
 * and that a warning line was printed iff `warn`; runs prompt 0 and
 * compares with the uncached answer. Returns the cached count. */
static int32_t restart_and_serve(const char *why, bool warn, bool expect_loaded)
{
    rig r;
    cv_sched_config sc = with_dir();
    capture_begin();
    bool ok = rig_open_with(&r, g_model, &g_ep, &sc);
    char *log = capture_end();
    if (!ok) {
        free(log);
        return -1;
    }
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    int warnings = count_lines(log, "prefix cache: ignoring");
    CHECK_MSG(warnings == (warn ? 1 : 0), "%s: %d warning lines (want %d); log: %s", why, warnings, warn ? 1 : 0,
              log);
    if (warn && warnings)
        printf("  %s: %s", why, strstr(log, "prefix cache: ignoring"));
    CHECK_MSG((st.file_blocks_loaded > 0) == expect_loaded, "%s: %lld blocks loaded", why,
              (long long)st.file_blocks_loaded);
    free(log);
    outcome o;
    CHECK(run_one(r.s, &g_p[0], &o) == 0);
    CHECK_MSG(same_tokens(&o, &g_ref[0]), "%s: the answer differs from the uncached one", why);
    rig_close(&r);
    return o.n_cached;
}

/* ---- tests ---- */

TEST(the_cache_file_survives_a_restart_and_the_first_request_hits)
{
    int64_t saved = 0, saved_tree = 0;
    fill_and_save_all(g_model, &g_ep, &saved, &saved_tree);
    CHECK(saved > 0);
    /* A new model object, engine and scheduler: what a restart rebuilds. */
    rig r;
    cv_sched_config sc = with_dir();
    if (!rig_open_with(&r, g_model, &g_ep, &sc))
        return;
    char path[700];
    cache_path(r.e, path, sizeof path);
    struct stat stt;
    CHECK(stat(path, &stt) == 0);
    cv_sched_stats st;
    cv_sched_get_stats(r.s, &st);
    CHECK_EQ_INT((int)st.file_blocks_loaded, (int)saved);
    CHECK_EQ_INT(st.tree_blocks, (int)saved_tree); /* the snapshots came back too */
    for (int i = 0; i < 3; i++) {
        outcome o;
        CHECK(run_one(r.s, &g_p[i], &o) == 0);
        /* prompt i fed n_prompt + 7 positions before: its whole prompt
         * blocks are in the file; a whole-block prompt recomputes its last. */
        int32_t want = g_p[i].n_prompt / CV_KV_BLOCK * CV_KV_BLOCK;
        if (want == g_p[i].n_prompt)
            want--;
        want = util_resume_at(r.e, want); /* with recurrent state: the snapshot of the prompt */
        CHECK_MSG(o.n_cached == want, "prompt %d: %d cached after the restart, want %d", i, o.n_cached, want);
        CHECK_MSG(same_tokens(&o, &g_ref[i]), "prompt %d: the answer differs from the uncached one", i);
    }
    json_t *status = cv_sched_status(r.s);
    json_t *cache = json_object_get(status, "cache");
    CHECK(strstr(json_string_value(json_object_get(cache, "file")), ".cvkv") != NULL);
    CHECK_EQ_INT((int)JSON_INT(cache, "file_blocks_loaded"), (int)saved);
    json_decref(status);
    rig_close(&r);
    CHECK(restart_and_serve("intact file", false, true) > 0);
}

typedef struct damage {
    const char *what;
    long at;      /* truncate to / flip at (negative: from the end) */
    bool truncate;
} damage;

/* Writes a cache file's checksum (its last 8 bytes) for what buf holds:
 * the node table, each block and, with recurrent state, the snapshot
 * section's index and each snapshot (cache_file.c's layout and seeds). */
static void rechecksum(unsigned char *buf, size_t n, const cv_mem_info *f, uint32_t nodes, long blocks_at)
{
    const size_t kv_end = (size_t)blocks_at + (size_t)nodes * f->block_bytes;
    uint32_t n_snaps = 0;
    if (f->state_bytes)
        memcpy(&n_snaps, buf + kv_end + 8, 4);
    uint64_t *sums = malloc(((size_t)nodes + n_snaps + 2) * sizeof *sums);
    size_t n_sums = 0;
    sums[n_sums++] = cv_sched_hash(0x6b766e6f6465730aull, buf + 64, (size_t)nodes * 68);
    for (uint32_t i = 0; i < nodes; i++)
        sums[n_sums++] = cv_sched_hash(0x6b76626c6f636b0aull, buf + blocks_at + (size_t)i * f->block_bytes,
                                       f->block_bytes);
    if (f->state_bytes) {
        const unsigned char *ix = buf + kv_end + 16, *data = ix + (size_t)n_snaps * 4;
        sums[n_sums++] = cv_sched_hash(0x6b76736e6170730aull, ix, (size_t)n_snaps * 4);
        for (uint32_t k = 0; k < n_snaps; k++)
            sums[n_sums++] = cv_sched_hash(0x6b76626c6f636b0aull, data + (size_t)k * f->state_bytes, f->state_bytes);
    }
    const uint64_t sum = cv_sched_hash(0x6b7673756d6d6172ull, sums, n_sums * sizeof *sums);
    memcpy(buf + n - 8, &sum, 8);
    free(sums);
}

TEST(damaged_cache_files_are_refused_with_one_line_and_serving_stays_exact)
{
    int64_t saved = 0;
    fill_and_save(g_model, &g_ep, &saved);
    char path[700];
    cv_mem_info f; /* f.block_bytes: a node's blocks, every layer group's */
    {
        cv_model *m;
        cv_engine *e;
        if (!open_engine(g_model, &g_ep, &m, &e))
            return;
        cache_path(e, path, sizeof path);
        cv_engine_mem_info(e, &f);
        cv_engine_destroy(e);
        cv_model_close(m);
    }
    size_t n;
    unsigned char *good = read_all(path, &n);
    CHECK(good != NULL && n > 64);
    if (!good)
        return;
    uint32_t hdr_nodes;
    memcpy(&hdr_nodes, good + 48, 4);
    const long n_nodes = (long)hdr_nodes;
    const long blocks_at = 64 + 68 * n_nodes;
    damage cases[] = {
        { "truncated to 0 bytes", 0, true },
        { "truncated inside the header", 40, true },
        { "truncated after the header", 64, true },
        { "truncated inside the node table", 64 + 68 + 5, true },
        { "truncated inside a block", blocks_at + (long)f.block_bytes / 2, true },
        { "truncated by one byte", -1, true },
        { "flipped magic", 0, false },
        { "flipped version", 8, false },
        { "flipped model identity", 20, false },
        { "flipped node count", 48, false },
        { "flipped parent index", 64, false },
        { "flipped token id", 64 + 68 + 9, false },
        { "flipped byte in block data", blocks_at + (long)f.block_bytes + 100, false },
        { "flipped checksum", -3, false },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        unsigned char *bad = malloc(n);
        memcpy(bad, good, n);
        long at = cases[i].at < 0 ? (long)n + cases[i].at : cases[i].at;
        size_t len = n;
        if (cases[i].truncate)
            len = (size_t)at;
        else
            bad[at] ^= 0x20;
        write_all_file(path, bad, len);
        free(bad);
        CHECK_EQ_INT(restart_and_serve(cases[i].what, true, false), 0);
    }

    /* Appended bytes. */
    unsigned char *longer = malloc(n + 16);
    memcpy(longer, good, n);
    memset(longer + n, 0, 16);
    write_all_file(path, longer, n + 16);
    free(longer);
    CHECK_EQ_INT(restart_and_serve("16 bytes appended", true, false), 0);

    /* Random bytes of a plausible size; then an empty file. */
    unsigned char *noise = malloc(n);
    cv_rng rng;
    cv_rng_seed(&rng, 9);
    for (size_t i = 0; i < n; i++)
        noise[i] = (unsigned char)cv_rng_u64(&rng);
    write_all_file(path, noise, n);
    free(noise);
    CHECK_EQ_INT(restart_and_serve("random bytes", true, false), 0);
    write_all_file(path, "", 0);
    CHECK_EQ_INT(restart_and_serve("empty file", true, false), 0);

    /* A directory where the file should be: refused, and saving over it
     * at the end fails with a warning, not a crash. */
    unlink(path);
    CHECK(mkdir(path, 0700) == 0);
    CHECK_EQ_INT(restart_and_serve("a directory", true, false), 0);
    rmdir(path);

    /* All checksums right, block bytes wrong: only the numerics check sees
     * it. Node 0 is a first block (parents come first), so it is checked;
     * with recurrent state the check recomputes the first grid chunk of the
     * most recent path to a snapshot, which starts at node 0 here too. The
     * checksum covers the snapshot section as well when there is one. */
    unsigned char *forged = malloc(n);
    memcpy(forged, good, n);
    forged[blocks_at + 17] ^= 0x01;
    const uint32_t nodes = hdr_nodes;
    const size_t kv_end = (size_t)blocks_at + (size_t)nodes * f.block_bytes;
    uint32_t n_snaps = 0;
    if (f.state_bytes)
        memcpy(&n_snaps, forged + kv_end + 8, 4);
    rechecksum(forged, n, &f, nodes, blocks_at);
    write_all_file(path, forged, n);
    CHECK_EQ_INT(restart_and_serve("a block that this build computes differently", true, false), 0);
    if (f.state_bytes && n_snaps) {
        /* the blocks right, every snapshot a bit off (checksums right): the
         * check's snapshot is compared too */
        memcpy(forged, good, n);
        unsigned char *data = forged + kv_end + 16 + (size_t)n_snaps * 4;
        for (uint32_t k = 0; k < n_snaps; k++)
            data[(size_t)k * f.state_bytes + f.state_bytes / 2] ^= 0x01;
        rechecksum(forged, n, &f, nodes, blocks_at);
        write_all_file(path, forged, n);
        CHECK_EQ_INT(restart_and_serve("a snapshot that this build computes differently", true, false), 0);
    }
    free(forged);

    /* The good file again: it loads (the cases above really were the damage). */
    write_all_file(path, good, n);
    CHECK(restart_and_serve("the intact file again", false, true) > 0);
    free(good);
}

TEST(a_file_for_another_model_or_kv_format_is_refused)
{
    char path[700], other_path[700];
    int64_t saved = 0;
    /* Another model with the same shape and other weights. */
    fill_and_save(g_other, &g_ep, &saved);
    CHECK(saved > 0);
    cv_model *m, *mo;
    cv_engine *e, *eo, *e16;
    cv_err err = { 0 };
    cv_engine_params ep16 = g_ep;
    ep16.kv_type = CV_GGML_F16;
    if (!open_engine(g_model, &g_ep, &m, &e))
        return;
    if (!open_engine(g_other, &g_ep, &mo, &eo))
        return;
    if (cv_engine_create(m, &ep16, &e16, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    cache_path(e, path, sizeof path);
    cache_path(eo, other_path, sizeof other_path);
    CHECK_MSG(strcmp(path, other_path) != 0, "two models share the cache file name %s", path);
    char f16_path[700];
    cache_path(e16, f16_path, sizeof f16_path);
    CHECK(strcmp(path, f16_path) != 0);
    size_t n;
    unsigned char *data = read_all(other_path, &n);
    write_all_file(path, data, n);
    free(data);
    CHECK_EQ_INT(restart_and_serve("another model's file", true, false), 0);

    /* The same model with an F16 KV cache. */
    rig r;
    cv_sched_config sc = with_dir();
    cv_engine_destroy(e16);
    cv_engine_destroy(e);
    cv_engine_destroy(eo);
    cv_model_close(mo);
    cv_model_close(m);
    if (rig_open_with(&r, g_model, &ep16, &sc)) {
        outcome o;
        CHECK(run_one(r.s, &g_p[1], &o) == 0);
        rig_close(&r);
    }
    data = read_all(f16_path, &n);
    CHECK(data != NULL);
    write_all_file(path, data, n);
    free(data);
    CHECK_EQ_INT(restart_and_serve("an F16-KV file in the F32 name", true, false), 0);
    unlink(path);
    unlink(other_path);
    unlink(f16_path);
}

TEST(a_size_budget_keeps_the_most_recent_prefixes)
{
    /* Room for 5 blocks: prompt 2 (the most recent) keeps its first 5,
     * root first (a parent is always more recent than its children); with
     * recurrent state, room for one snapshot too (its prompt's, at 64). */
    rig r;
    cv_mem_info f;
    cv_sched_config sc = with_dir();
    if (!rig_open_with(&r, g_model, &g_ep, &sc))
        return;
    cv_engine_mem_info(r.e, &f);
    char path[700];
    cache_path(r.e, path, sizeof path);
    rig_close(&r);
    unlink(path);
    sc.cache_max_bytes = 64 + 8 + 5 * (68 + (int64_t)f.block_bytes) + (f.state_bytes ? 16 + 4 + (int64_t)f.state_bytes : 0);
    if (!rig_open_with(&r, g_model, &g_ep, &sc))
        return;
    outcome o;
    for (int i = 0; i < 3; i++)
        CHECK(run_one(r.s, &g_p[i], &o) == 0);
    rig_close(&r);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == sc.cache_max_bytes);
    sc.cache_max_bytes = 0;
    if (!rig_open_with(&r, g_model, &g_ep, &sc))
        return;
    cv_sched_stats s;
    cv_sched_get_stats(r.s, &s);
    CHECK_EQ_INT((int)s.file_blocks_loaded, 5);
    CHECK(run_one(r.s, &g_p[2], &o) == 0);
    CHECK_EQ_INT(o.n_cached, util_resume_at(r.e, 5 * CV_KV_BLOCK));
    CHECK(same_tokens(&o, &g_ref[2]));
    CHECK(run_one(r.s, &g_p[1], &o) == 0); /* the oldest prompt did not fit */
    CHECK_EQ_INT(o.n_cached, 0);
    CHECK(same_tokens(&o, &g_ref[1]));
    rig_close(&r);
    unlink(path);
}

int main(void)
{
    if (!util_synth(g_model, sizeof g_model, "sched-file", "q8_0", 7) ||
        !util_synth(g_other, sizeof g_other, "sched-file-other", "q8_0", 8))
        return 1;
    snprintf(g_dir, sizeof g_dir, "%s/corvid-test-sched-file-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    mkdir(g_dir, 0700);
    /* Three prompts: 150 ids, 96 (whole blocks), 120 sharing 64 with the first. */
    static const int32_t lens[3] = { 150, 96, 120 };
    for (int i = 0; i < 3; i++) {
        fill_ids(g_ids[i], lens[i], 90 + (uint64_t)i, g_vocab);
        g_p[i] = (cv_sched_params){ .prompt = g_ids[i], .n_prompt = lens[i], .max_tokens = 8 };
    }
    memcpy(g_ids[2], g_ids[0], 64 * sizeof(int32_t));
    {
        rig r;
        cv_sched_config off = { .no_prefix_cache = true };
        if (!rig_open_with(&r, g_model, &g_ep, &off))
            return 1;
        for (int i = 0; i < 3; i++)
            run_one(r.s, &g_p[i], &g_ref[i]);
        rig_close(&r);
    }
    RUN(the_cache_file_survives_a_restart_and_the_first_request_hits);
    RUN(damaged_cache_files_are_refused_with_one_line_and_serving_stays_exact);
    RUN(a_file_for_another_model_or_kv_format_is_refused);
    RUN(a_size_budget_keeps_the_most_recent_prefixes);
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *de;
        char p[1200];
        while ((de = readdir(d)))
            if (de->d_name[0] != '.') {
                snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(g_dir);
    unlink(g_model);
    unlink(g_other);
    return test_report();
}
