/* fuzz_cache_file.c — libFuzzer target for the prefix-cache file loader
 * (src/sched/cache_file.c), the one parser of the scheduler. Two shapes of
 * input, chosen by the first byte:
 *   raw       the bytes are the file: the header checks must refuse it
 *             without reading past the end or allocating from its counts;
 *   fixed-up  the bytes are a node table (and block data) that the harness
 *             wraps in a correct header and correct checksums, so the fuzzer
 *             reaches what a damaged-but-consistent file exercises: parent
 *             links, token ids, duplicate paths, the load budget, the tree
 *             built from it and the numerics check.
 * After a load the tree must be consistent: every block of every node's
 * span held by the tree alone, no more nodes than blocks allowed. The model
 * is a random tiny llama written once to $TMPDIR. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "model/synth.h"
#include "sched/sched_int.h"

static cv_model *g_model;
static cv_engine *g_engine;
static char g_file[256];
static size_t g_block_bytes;
static int32_t g_n_groups;
static uint8_t g_header[64];

static void setup(void)
{
    char model[256];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(model, sizeof model, "%s/corvid-fuzz-cache-model-%d.gguf", tmp, (int)getpid());
    snprintf(g_file, sizeof g_file, "%s/corvid-fuzz-cache-%d.cvkv", tmp, (int)getpid());
    cv_synth_params sp = { .arch = "llama", .shape = "tiny", .dtype = "q8_0", .seed = 3 };
    cv_err err = { 0 };
    cv_engine_params ep = { .n_threads = 1, .n_ctx = 256, .n_seq_max = 2, .n_kv_tokens = 64 * CV_KV_BLOCK };
    if (cv_model_synth(&sp, model, &err) || cv_model_open(model, NULL, &g_model, &err) ||
        cv_engine_create(g_model, &ep, &g_engine, &err)) {
        fprintf(stderr, "fuzz_cache_file setup: %s\n", err.msg);
        abort();
    }
    unlink(model); /* mapped: the data stays while open */
    cv_mem_info mi;
    cv_engine_mem_info(g_engine, &mi);
    g_n_groups = mi.n_groups;
    g_block_bytes = mi.block_bytes;
    /* The header of a real save (a one-node tree): the fixed-up inputs
     * patch its node count and hash. */
    radix t;
    rx_init(&t, g_engine);
    void *zeros = calloc(1, g_block_bytes);
    cv_mem_span span;
    int32_t toks[CV_KV_BLOCK] = { 0 };
    if (!cv_engine_span_make(g_engine, zeros, &span))
        abort();
    free(zeros);
    rx_insert(&t, NULL, toks, &span); /* the tree takes its own references */
    cv_engine_span_release(g_engine, &span);
    int64_t saved = 0;
    cv_buf hdr = { 0 };
    if (cv_sched_cache_save(&t, g_file, 1 << 30, &saved, &err) || cv_read_file(g_file, &hdr, 1 << 30, &err) ||
        hdr.len < 64) {
        fprintf(stderr, "fuzz_cache_file setup: %s\n", err.msg);
        abort();
    }
    rx_fini(&t);
    memcpy(g_header, hdr.data, 64);
    cv_buf_free(&hdr);
    unlink(g_file);
}

/* A correct header and checksums around data's node table and blocks. */
static size_t wrap(const uint8_t *data, size_t n, uint8_t **out)
{
    const size_t per = 68 + g_block_bytes;
    uint32_t nodes = (uint32_t)CV_MIN(n / 68, (size_t)80);
    size_t size = 64 + nodes * per + 8;
    uint8_t *f = calloc(1, size);
    memcpy(f, g_header, 64);
    memcpy(f + 48, &nodes, 4);
    uint64_t hh = cv_sched_hash(0x6b76686561646572ull, f, 56);
    memcpy(f + 56, &hh, 8);
    memcpy(f + 64, data, CV_MIN(n, (size_t)nodes * 68));
    size_t rest = n > (size_t)nodes * 68 ? n - (size_t)nodes * 68 : 0;
    memcpy(f + 64 + nodes * 68, data + (size_t)nodes * 68, CV_MIN(rest, (size_t)nodes * g_block_bytes));
    uint64_t *sums = malloc(((size_t)nodes + 1) * sizeof *sums);
    sums[0] = cv_sched_hash(0x6b766e6f6465730aull, f + 64, (size_t)nodes * 68);
    for (uint32_t i = 0; i < nodes; i++)
        sums[i + 1] = cv_sched_hash(0x6b76626c6f636b0aull, f + 64 + nodes * 68 + i * g_block_bytes, g_block_bytes);
    uint64_t sum = cv_sched_hash(0x6b7673756d6d6172ull, sums, ((size_t)nodes + 1) * sizeof *sums);
    free(sums);
    memcpy(f + size - 8, &sum, 8);
    *out = f;
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_engine)
        setup();
    if (size < 1)
        return 0;
    uint8_t *file = NULL;
    size_t n;
    if (data[0] & 1) {
        n = wrap(data + 1, size - 1, &file);
    } else {
        n = size - 1;
        file = malloc(n ? n : 1);
        memcpy(file, data + 1, n);
    }
    FILE *fp = fopen(g_file, "wb");
    if (!fp)
        abort();
    fwrite(file, 1, n, fp);
    fclose(fp);
    free(file);

    const int32_t free_before = cv_engine_kv_free_blocks(g_engine);
    radix t;
    rx_init(&t, g_engine);
    int64_t loaded = 0;
    cv_err err = { 0 };
    int rc = cv_sched_cache_load(&t, g_file, 40, &loaded, &err);
    if (rc && loaded)
        abort(); /* a refused file loads nothing */
    if (loaded > 40 || loaded != t.n_nodes)
        abort();
    for (const rx_node *x = t.lru.next; x != &t.lru; x = x->next)
        for (int32_t g = 0; g < g_n_groups; g++)
            if (cv_engine_kv_refs(g_engine, g, x->span.kv[g]) != 1)
                abort();
    rx_fini(&t);
    if (cv_engine_kv_free_blocks(g_engine) != free_before)
        abort(); /* every block went back */
    unlink(g_file);
    return 0;
}
