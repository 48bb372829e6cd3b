/* cache_file.c — the prefix cache on disk: the tree, its blocks and its
 * snapshots of recurrent state written at shutdown and read back at start,
 * so the first request after a restart hits. The file is trusted for
 * nothing: every field is checked against the engine it is loaded into, a
 * checksum covers every byte, and before the blocks are used one or two of
 * them (and their snapshots) are recomputed and compared byte for byte,
 * which catches a file from a build whose kernels round differently (the
 * model hash cannot see that). Any mismatch refuses the whole file, and the
 * caller reports it in one line: a refused file costs a cold start, never a
 * wrong token.
 *
 * Layout (little-endian, the machine's own: corvid runs on x86-64):
 *
 *   offset  size        field
 *   0       8           magic "CVKVCACH"
 *   8       4           version (3: snapshots of recurrent state; 2 had
 *                       none, so a v2 file on a hybrid model could not say
 *                       where it resumes)
 *   12      4           positions per block (CV_KV_BLOCK)
 *   16      8           model identity (model_identity below)
 *   24      4 x 4       KV format of a block of positions: n_layer (the
 *                       attention layers of every layer group), n_head_kv,
 *                       head_dim, element type
 *   40      8           block bytes (every group's: cv_mem_info.block_bytes)
 *   48      4           node count n
 *   52      4           ISA the blocks were computed with (cv_isa)
 *   56      8           hash of bytes 0..56
 *   64      n x 68      nodes: parent index (u32; 0xffffffff: a first
 *                       block), then CV_KV_BLOCK token ids (i32); a parent
 *                       always comes before its children
 *   64+68n  n x bytes   block data, in node order: each node's block of
 *                       every layer group, group 0 first (the engine's
 *                       block layout, cv_engine_span_read)
 *   then, only for a model with recurrent state (the model identity says
 *   which; cv_mem_info.state_bytes > 0), the snapshot section:
 *           8           state bytes S (must be the engine's)
 *           4           snapshot count s (<= n)
 *           4           0
 *           s x 4       node index of each snapshot, ascending; a
 *                       snapshot is the state at its node's end (depth x
 *                       CV_KV_BLOCK positions)
 *           s x S       snapshot data, in that order
 *   end-8   8           checksum: hash of (hash of the node table, the hash
 *                       of each block, then, with the section, the hash of
 *                       the index table and of each snapshot)
 *
 * Nodes are written most recently used first, so a size budget keeps the
 * hot prefixes, and a parent (always more recent than its children) is
 * written before them; a node whose snapshot does not fit the budget is
 * written without it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/sched_int.h"

#define MAGIC "CVKVCACH"
#define VERSION 3u
#define HEADER_BYTES 64
#define SNAP_HEADER_BYTES 16
#define NODE_BYTES (4 + 4 * CV_KV_BLOCK)
#define NO_PARENT 0xffffffffu
#define SEED_HEADER 0x6b76686561646572ull
#define SEED_NODES 0x6b766e6f6465730aull
#define SEED_BLOCK 0x6b76626c6f636b0aull
#define SEED_SUM 0x6b7673756d6d6172ull
#define SEED_SNAPS 0x6b76736e6170730aull
/* Blocks the load-time check of a model with recurrent state recomputes
 * at most: one chunk of the engine's split grid (cv_mem_info.split_align;
 * 64 positions, 4 blocks, on a Gated DeltaNet model). A wider grid goes
 * unchecked. */
#define CHECK_BLOCKS 16

typedef struct file_header {
    char magic[8];
    uint32_t version;
    uint32_t block_positions;
    uint64_t model_id;
    uint32_t n_layer, n_head_kv, head_dim, kv_type;
    uint64_t block_bytes;
    uint32_t n_nodes;
    uint32_t isa;
    uint64_t header_hash;
} file_header;
_Static_assert(sizeof(file_header) == HEADER_BYTES, "the header is 64 bytes");

/* ---- identity ---- */

static uint64_t hash_u64(uint64_t h, uint64_t v) { return cv_sched_hash(h, &v, sizeof v); }
static uint64_t hash_str(uint64_t h, cv_str s) { return cv_sched_hash(hash_u64(h, s.len), s.ptr, s.len); }

static uint64_t hash_value(uint64_t h, const cv_gguf_value *v)
{
    h = hash_u64(h, (uint64_t)v->type);
    switch (v->type) {
    case CV_GGUF_STRING:
        return hash_str(h, v->str);
    case CV_GGUF_ARRAY:
        h = hash_u64(hash_u64(h, (uint64_t)v->arr.type), v->arr.n);
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (v->arr.type == CV_GGUF_STRING) {
                h = hash_str(h, v->arr.strs[i]);
            } else if (v->arr.type == CV_GGUF_FLOAT32 || v->arr.type == CV_GGUF_FLOAT64) {
                double d = cv_gguf_arr_float(v, i);
                uint64_t bits;
                memcpy(&bits, &d, sizeof bits);
                h = hash_u64(h, bits);
            } else {
                h = hash_u64(h, (uint64_t)cv_gguf_arr_int(v, i));
            }
        }
        return h;
    case CV_GGUF_FLOAT32:
    case CV_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &v->f64, sizeof bits);
        return hash_u64(h, bits);
    }
    case CV_GGUF_BOOL:
        return hash_u64(h, v->b);
    default:
        return hash_u64(h, v->u64);
    }
}

/* What makes two model files compute the same KV: all metadata (hyper-
 * parameters, RoPE, tokenizer), each tensor's name, type and shape, and
 * its data sampled at the start, middle and end (4 KiB each: any retrain,
 * fine-tune or requantization changes essentially every block, and reading
 * whole multi-GB files at every start would cost seconds), plus how the
 * model was opened (dequantized weights compute differently). */
static uint64_t model_identity(const cv_model *m)
{
    const cv_gguf *g = m->gguf;
    uint64_t h = hash_u64(0x636f72766964ull, cv_gguf_file_bytes(g));
    h = hash_u64(h, m->dequantized);
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++)
        h = hash_value(hash_str(h, cv_gguf_kv_key(g, i)), cv_gguf_kv_value(g, i));
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        h = hash_str(h, cv_str_of(t->name));
        h = hash_u64(hash_u64(h, t->type), t->n_bytes);
        for (uint32_t d = 0; d < CV_MAX_TENSOR_DIMS; d++)
            h = hash_u64(h, (uint64_t)t->ne[d]);
        const size_t win = CV_MIN(t->n_bytes, (size_t)4096);
        const size_t at[3] = { 0, (t->n_bytes - win) / 2, t->n_bytes - win };
        for (int k = 0; k < 3; k++)
            h = cv_sched_hash(h, (const char *)t->data + at[k], win);
    }
    return h;
}

static uint64_t header_hash(const file_header *fh) { return cv_sched_hash(SEED_HEADER, fh, offsetof(file_header, header_hash)); }

static void fill_header(cv_engine *e, file_header *fh, uint32_t n_nodes)
{
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    cv_kv_format f = mi.group[0].format;
    for (int32_t g = 1; g < mi.n_groups; g++)
        f.n_layer += mi.group[g].format.n_layer;
    f.block_bytes = mi.block_bytes;
    memset(fh, 0, sizeof *fh);
    memcpy(fh->magic, MAGIC, 8);
    fh->version = VERSION;
    fh->block_positions = CV_KV_BLOCK;
    fh->model_id = model_identity(cv_engine_model(e));
    fh->n_layer = (uint32_t)f.n_layer;
    fh->n_head_kv = (uint32_t)f.n_head_kv;
    fh->head_dim = (uint32_t)f.head_dim;
    fh->kv_type = f.type;
    fh->block_bytes = f.block_bytes;
    fh->n_nodes = n_nodes;
    fh->isa = (uint32_t)cv_isa_active();
    fh->header_hash = header_hash(fh);
}

void cv_sched_cache_file_name(cv_engine *e, char *out, size_t n)
{
    file_header fh;
    fill_header(e, &fh, 0);
    /* The name hashes every header field a file must match but the magic
     * and the version (and the count and the header's own hash): another
     * model never finds this file, and a file of another version is found,
     * refused in one line and replaced, not left behind. */
    uint64_t h = cv_sched_hash(SEED_HEADER, &fh.block_positions,
                               offsetof(file_header, n_nodes) - offsetof(file_header, block_positions));
    h = hash_u64(h, fh.isa);
    snprintf(out, n, "kv-%016llx.cvkv", (unsigned long long)h);
}

/* ---- saving ---- */

typedef struct pick {
    const cv_engine *e;
    rx_node **nodes;
    bool *snap;          /* [cap] the node's snapshot is written too */
    int32_t n, cap, n_snaps;
    int64_t budget;      /* bytes left for nodes */
    int64_t per_node;    /* a node's row and block */
    int64_t per_snap;    /* a snapshot's index entry and data */
} pick;

static bool pick_fn(void *ud, const rx_node *n)
{
    pick *p = ud;
    if (p->n == p->cap || p->budget < p->per_node)
        return false;
    rx_node *node = (rx_node *)n; /* the walk is read-only; file_ix is save's own scratch */
    /* A parent more recent than its child is the tree's invariant; a node
     * whose parent was not picked cannot be written and neither can its
     * descendants, which then find no index either. */
    if ((node->parent->depth > 0 && node->parent->file_ix < 0) || !cv_engine_span_read(p->e, &node->span, NULL))
        return true;
    p->budget -= p->per_node;
    const bool snap = node->span.snap && p->per_snap > 0 && p->budget >= p->per_snap;
    p->budget -= snap ? p->per_snap : 0;
    p->n_snaps += snap;
    node->file_ix = p->n;
    p->snap[p->n] = snap;
    p->nodes[p->n++] = node;
    return true;
}

static bool clear_fn(void *ud, const rx_node *n)
{
    (void)ud;
    ((rx_node *)n)->file_ix = -1;
    return true;
}

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int make_dirs(const char *path)
{
    char *d = cv_xstrdup(path);
    char *slash = strrchr(d, '/');
    int rc = 0;
    if (slash && slash != d) {
        *slash = 0;
        for (char *p = d + 1; *p && rc == 0; p++) {
            if (*p != '/')
                continue;
            *p = 0;
            if (mkdir(d, 0700) != 0 && errno != EEXIST)
                rc = -1;
            *p = '/';
        }
        if (rc == 0 && mkdir(d, 0700) != 0 && errno != EEXIST)
            rc = -1;
    }
    free(d);
    return rc;
}

/* The snapshot section's head: S, s, 0. */
typedef struct snap_header {
    uint64_t state_bytes;
    uint32_t n_snaps;
    uint32_t zero;
} snap_header;
_Static_assert(sizeof(snap_header) == SNAP_HEADER_BYTES, "the snapshot section's head is 16 bytes");

int cv_sched_cache_save(radix *t, const char *path, int64_t max_bytes, int64_t *n_saved, cv_err *err)
{
    *n_saved = 0;
    if (t->n_nodes == 0)
        return 0;
    cv_mem_info mi;
    cv_engine_mem_info(t->e, &mi);
    const size_t bb = mi.block_bytes, sb = mi.state_bytes;
    pick p = {
        .e = t->e,
        .cap = t->n_nodes,
        .budget = max_bytes - HEADER_BYTES - 8 - (sb ? SNAP_HEADER_BYTES : 0),
        .per_node = NODE_BYTES + (int64_t)bb,
        .per_snap = sb ? 4 + (int64_t)sb : 0,
    };
    if (p.budget < p.per_node)
        return 0;
    p.nodes = cv_xmalloc((size_t)p.cap * sizeof *p.nodes);
    p.snap = cv_xmalloc((size_t)p.cap * sizeof *p.snap);
    rx_walk_recent(t, clear_fn, NULL);
    t->root.file_ix = -1;
    rx_walk_recent(t, pick_fn, &p);

    int rc = 0, fd = -1;
    cv_buf tmp = { 0 };
    uint32_t *node_tab = cv_xmalloc((size_t)p.n * NODE_BYTES);
    uint32_t *snap_ix = cv_xmalloc(((size_t)p.n_snaps + 1) * sizeof *snap_ix);
    uint64_t *sums = cv_xmalloc(((size_t)p.n + (size_t)p.n_snaps + 2) * sizeof *sums);
    uint8_t *data = cv_xmalloc(CV_MAX(bb, sb));
    size_t n_sums = 0;
    for (int32_t i = 0, k = 0; i < p.n; i++) {
        const rx_node *n = p.nodes[i];
        uint32_t *row = node_tab + (size_t)i * (NODE_BYTES / 4);
        row[0] = n->parent->depth == 0 ? NO_PARENT : (uint32_t)n->parent->file_ix;
        memcpy(row + 1, n->tokens, sizeof n->tokens);
        if (p.snap[i])
            snap_ix[k++] = (uint32_t)i;
    }
    sums[n_sums++] = cv_sched_hash(SEED_NODES, node_tab, (size_t)p.n * NODE_BYTES);
    file_header fh;
    fill_header(t->e, &fh, (uint32_t)p.n);

    if (make_dirs(path) != 0) {
        rc = cv_err_set(err, CV_EIO, "cache file %s: cannot create its directory: %s", path, strerror(errno));
        goto out;
    }
    cv_buf_printf(&tmp, "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = cv_err_set(err, CV_EIO, "cache file %s: %s", tmp.data, strerror(errno));
        goto out;
    }
    if (write_all(fd, &fh, sizeof fh) || write_all(fd, node_tab, (size_t)p.n * NODE_BYTES))
        goto io_fail;
    for (int32_t i = 0; i < p.n; i++) {
        cv_engine_span_read(t->e, &p.nodes[i]->span, data);
        sums[n_sums++] = cv_sched_hash(SEED_BLOCK, data, bb);
        if (write_all(fd, data, bb))
            goto io_fail;
    }
    if (sb) {
        const snap_header sh = { .state_bytes = sb, .n_snaps = (uint32_t)p.n_snaps };
        sums[n_sums++] = cv_sched_hash(SEED_SNAPS, snap_ix, (size_t)p.n_snaps * sizeof *snap_ix);
        if (write_all(fd, &sh, sizeof sh) || write_all(fd, snap_ix, (size_t)p.n_snaps * sizeof *snap_ix))
            goto io_fail;
        for (int32_t k = 0; k < p.n_snaps; k++) {
            cv_engine_snapshot_read(t->e, p.nodes[snap_ix[k]]->span.snap, data);
            sums[n_sums++] = cv_sched_hash(SEED_BLOCK, data, sb);
            if (write_all(fd, data, sb))
                goto io_fail;
        }
    }
    uint64_t sum = cv_sched_hash(SEED_SUM, sums, n_sums * sizeof *sums);
    if (write_all(fd, &sum, sizeof sum) || fsync(fd) != 0)
        goto io_fail;
    if (close(fd) != 0) {
        fd = -1;
        goto io_fail;
    }
    fd = -1;
    if (rename(tmp.data, path) != 0) {
        rc = cv_err_set(err, CV_EIO, "cache file: cannot rename %s to %s: %s", tmp.data, path, strerror(errno));
        unlink(tmp.data);
        goto out;
    }
    *n_saved = p.n;
    goto out;
io_fail:
    rc = cv_err_set(err, CV_EIO, "cache file %s: %s", tmp.data, strerror(errno));
    if (fd >= 0)
        close(fd);
    fd = -1;
    unlink(tmp.data);
out:
    if (fd >= 0)
        close(fd);
    cv_buf_free(&tmp);
    free(node_tab);
    free(snap_ix);
    free(sums);
    free(data);
    free(p.nodes);
    free(p.snap);
    return rc;
}

/* ---- loading ---- */

/* Feeds tok[0..n) to a fresh sequence in calls that end on multiples of
 * the engine's split grid (as the scheduler's prefill chunks do) and
 * compares its first n / CV_KV_BLOCK blocks with want[0..) (block indices
 * into the file's data) and, when snap is not NULL, its state at n with
 * it. */
static int recompute(cv_engine *e, const int32_t *tok, int32_t n, const uint32_t *want, const char *blocks,
                     size_t block_bytes, const char *snap, size_t state_bytes, cv_err *err)
{
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    const int32_t n_batch = cv_engine_params_get(e)->n_batch;
    const int32_t step = n_batch >= mi.split_align ? n_batch / mi.split_align * mi.split_align : n_batch;
    int32_t seq;
    if (cv_engine_seq_open(e, &seq, NULL))
        return cv_err_set(err, CV_EBUSY, "no sequence slot is free to check the cache file");
    int32_t *pos = cv_xmalloc((size_t)step * sizeof *pos), *sq = cv_xmalloc((size_t)step * sizeof *sq);
    int rc = 0;
    for (int32_t at = 0; at < n && rc == 0;) {
        const int32_t k = CV_MIN(n - at, step);
        for (int32_t i = 0; i < k; i++)
            pos[i] = at + i, sq[i] = seq;
        const float *lg;
        int32_t nl;
        rc = cv_engine_forward(e, &(cv_batch){ k, tok + at, sq, pos, NULL }, &lg, &nl, err);
        at += k;
    }
    if (rc) {
        cv_err_prefix(err, "checking the cache file: ");
        goto out;
    }
    uint8_t *mine = cv_xmalloc(CV_MAX(block_bytes, state_bytes));
    for (int32_t i = 0; i < n / CV_KV_BLOCK && rc == 0; i++) {
        cv_mem_span span;
        cv_engine_seq_span(e, seq, i, &span);
        /* (a window block the sequence let go of is not compared) */
        if (cv_engine_span_read(e, &span, mine) && memcmp(mine, blocks + (size_t)want[i] * block_bytes, block_bytes))
            rc = cv_err_set(err, CV_ECORRUPT, "its blocks differ from what this build computes for the same "
                            "tokens (another corvid version or kernel)");
    }
    cv_snapshot *sn = NULL;
    if (rc == 0 && snap) {
        if ((rc = cv_engine_snapshot_take(e, seq, &sn, err)) == 0) {
            cv_engine_snapshot_read(e, sn, mine);
            if (memcmp(mine, snap, state_bytes))
                rc = cv_err_set(err, CV_ECORRUPT, "its snapshots differ from the state this build computes for "
                                "the same tokens (another corvid version or kernel)");
            cv_engine_snapshot_free(e, sn);
        } else {
            cv_err_prefix(err, "checking the cache file: ");
        }
    }
    free(mine);
out:
    free(pos);
    free(sq);
    cv_engine_seq_close(e, seq);
    return rc;
}

/* Recomputes what the file holds for a few prefixes and compares it byte
 * for byte: the same model, format and kernels give the same bytes (the
 * forward pass is row-for-row exact), anything else does not. On a model
 * whose bits do not depend on how a sequence was split into calls, the
 * first block of up to two first-level nodes. Otherwise the first chunk
 * of the split grid (cv_mem_info.split_align: 64 positions for a hybrid,
 * 128 for latent attention's decompressed prefill) of a path that leads to a snapshot (with
 * recurrent state) or of any path that deep, and that chunk's snapshot if
 * it has one: the tree holds only a prompt's whole grid chunks, and a
 * snapshot lies inside a prompt, whose prefill chunks end on the grid, so
 * that chunk was computed as one, as the check computes it (a block of
 * another path was perhaps decoded, or a short prompt's one call, and
 * would not match). snaps[i]: node i's snapshot data, NULL if none;
 * depth[i] its depth in blocks. */
static int numerics_check(cv_engine *e, const file_header *fh, const uint32_t *node_tab, const char *blocks,
                          const char *const *snaps, const uint32_t *depth, size_t state_bytes, cv_err *err)
{
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    const uint32_t d = (uint32_t)CV_MAX(1, mi.split_align / CV_KV_BLOCK);
    if (state_bytes == 0 && d == 1) {
        int checked = 0;
        for (uint32_t i = 0; i < fh->n_nodes && checked < 2; i++) {
            const uint32_t *row = node_tab + (size_t)i * (NODE_BYTES / 4);
            if (row[0] != NO_PARENT)
                continue;
            int rc = recompute(e, (const int32_t *)(row + 1), CV_KV_BLOCK, &i, blocks, fh->block_bytes, NULL, 0, err);
            if (rc)
                return rc;
            checked++;
        }
        return 0;
    }
    uint32_t at = UINT32_MAX;
    for (uint32_t i = 0; i < fh->n_nodes && at == UINT32_MAX; i++)
        if ((state_bytes == 0 || snaps[i]) && depth[i] >= d)
            at = i;
    if (at == UINT32_MAX)
        return 0; /* no snapshot (or no whole chunk): nothing in the file can be resumed from, so nothing to trust */
    while (depth[at] > d)
        at = node_tab[(size_t)at * (NODE_BYTES / 4)];
    int32_t tok[CHECK_BLOCKS * CV_KV_BLOCK];
    uint32_t chain[CHECK_BLOCKS];
    if (d > CHECK_BLOCKS)
        return 0; /* a grid wider than the check reaches: not checked, as before snapshots */
    for (uint32_t k = d, i = at; k-- > 0; i = node_tab[(size_t)i * (NODE_BYTES / 4)]) {
        chain[k] = i;
        memcpy(tok + (size_t)k * CV_KV_BLOCK, node_tab + (size_t)i * (NODE_BYTES / 4) + 1,
               CV_KV_BLOCK * sizeof *tok);
    }
    return recompute(e, tok, (int32_t)d * CV_KV_BLOCK, chain, blocks, fh->block_bytes, snaps[at], state_bytes, err);
}

int cv_sched_cache_load(radix *t, const char *path, int32_t max_blocks, int64_t *n_loaded, cv_err *err)
{
    *n_loaded = 0;
    cv_engine *e = t->e;
    const int32_t n_vocab = cv_engine_model(e)->hp.n_vocab;
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    const uint64_t sb = mi.state_bytes;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? CV_ENOTFOUND : cv_err_set(err, CV_EIO, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = cv_err_set(err, CV_EIO, "%s", strerror(errno));
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cv_err_set(err, CV_ECORRUPT, "not a regular file");
    }
    const size_t size = (size_t)st.st_size;
    if (size < HEADER_BYTES) {
        close(fd);
        return cv_err_set(err, CV_ECORRUPT, "truncated: %zu bytes, the header alone is %d", size, HEADER_BYTES);
    }
    const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return cv_err_set(err, CV_EIO, "cannot map %zu bytes: %s", size, strerror(errno));

    int rc = 0;
    rx_node **nodes = NULL;
    const char **snaps = NULL;
    uint32_t *depth = NULL;
    uint64_t *sums = NULL;
    file_header fh, want;
    memcpy(&fh, map, sizeof fh);
    fill_header(e, &want, fh.n_nodes);
    if (memcmp(fh.magic, MAGIC, 8)) {
        rc = cv_err_set(err, CV_ECORRUPT, "not a corvid KV cache file (bad magic)");
        goto out;
    }
    if (fh.version != VERSION) {
        rc = cv_err_set(err, CV_ECORRUPT, "version %u, this build reads %u", fh.version, VERSION);
        goto out;
    }
    if (fh.header_hash != header_hash(&fh)) {
        rc = cv_err_set(err, CV_ECORRUPT, "the header's checksum does not match (a damaged file)");
        goto out;
    }
    if (fh.model_id != want.model_id) {
        rc = cv_err_set(err, CV_ECORRUPT, "made for another model (identity %016llx, this model is %016llx)",
                        (unsigned long long)fh.model_id, (unsigned long long)want.model_id);
        goto out;
    }
    if (fh.block_positions != want.block_positions || fh.n_layer != want.n_layer ||
        fh.n_head_kv != want.n_head_kv || fh.head_dim != want.head_dim || fh.kv_type != want.kv_type ||
        fh.block_bytes != want.block_bytes) {
        rc = cv_err_set(err, CV_ECORRUPT, "made for another KV format (%u layers, %u kv heads of %u, type %u, "
                        "%u positions a block; this engine: %u, %u of %u, type %u, %u)", fh.n_layer, fh.n_head_kv,
                        fh.head_dim, fh.kv_type, fh.block_positions, want.n_layer, want.n_head_kv, want.head_dim,
                        want.kv_type, want.block_positions);
        goto out;
    }
    if (fh.isa != want.isa) {
        rc = cv_err_set(err, CV_ECORRUPT, "computed with ISA %u, this process runs %u", fh.isa, want.isa);
        goto out;
    }
    /* Sizes from here are bounded by the file's own size. */
    const uint64_t per = NODE_BYTES + fh.block_bytes;
    const uint64_t body = size - HEADER_BYTES;
    const uint64_t tail = 8 + (sb ? SNAP_HEADER_BYTES : 0);
    if (body < tail || fh.n_nodes > (body - tail) / per) {
        rc = cv_err_set(err, CV_ECORRUPT, "%zu bytes, too few for %u nodes of %llu bytes (truncated)", size,
                        fh.n_nodes, (unsigned long long)per);
        goto out;
    }
    const uint32_t n = fh.n_nodes;
    const uint64_t kv_end = HEADER_BYTES + (uint64_t)n * per; /* the blocks' end: the section, or the checksum */
    snap_header sh = { 0 };
    if (sb) {
        memcpy(&sh, map + kv_end, sizeof sh);
        if (sh.state_bytes != sb || sh.zero != 0) {
            rc = cv_err_set(err, CV_ECORRUPT, "its snapshots are of %llu bytes of state, this engine keeps %llu",
                            (unsigned long long)sh.state_bytes, (unsigned long long)sb);
            goto out;
        }
        if (sh.n_snaps > n || sh.n_snaps > (size - kv_end - tail) / (4 + sb)) {
            rc = cv_err_set(err, CV_ECORRUPT, "%u snapshots of %llu bytes for %u nodes do not fit in %zu bytes "
                            "(truncated)", sh.n_snaps, (unsigned long long)sb, n, size);
            goto out;
        }
    }
    const uint64_t expect = kv_end + tail + (uint64_t)sh.n_snaps * (4 + sb);
    if (expect != size) {
        rc = cv_err_set(err, CV_ECORRUPT, "%zu bytes, but %u nodes of %llu bytes%s take %llu (truncated or padded)",
                        size, n, (unsigned long long)per, sb ? " and their snapshots" : "",
                        (unsigned long long)expect);
        goto out;
    }
    const uint32_t *node_tab = (const uint32_t *)(map + HEADER_BYTES);
    const char *blocks = map + HEADER_BYTES + (size_t)n * NODE_BYTES;
    const uint32_t *snap_ix = (const uint32_t *)(map + kv_end + SNAP_HEADER_BYTES);
    const char *snap_data = (const char *)(snap_ix + sh.n_snaps);
    size_t n_sums = 0;
    sums = cv_xmalloc(((size_t)n + sh.n_snaps + 2) * sizeof *sums);
    sums[n_sums++] = cv_sched_hash(SEED_NODES, node_tab, (size_t)n * NODE_BYTES);
    for (uint32_t i = 0; i < n; i++)
        sums[n_sums++] = cv_sched_hash(SEED_BLOCK, blocks + (size_t)i * fh.block_bytes, fh.block_bytes);
    if (sb) {
        sums[n_sums++] = cv_sched_hash(SEED_SNAPS, snap_ix, (size_t)sh.n_snaps * sizeof *snap_ix);
        for (uint32_t k = 0; k < sh.n_snaps; k++)
            sums[n_sums++] = cv_sched_hash(SEED_BLOCK, snap_data + (size_t)k * sb, sb);
    }
    uint64_t sum = cv_sched_hash(SEED_SUM, sums, n_sums * sizeof *sums), stored;
    memcpy(&stored, map + size - 8, 8);
    if (sum != stored) {
        rc = cv_err_set(err, CV_ECORRUPT, "the checksum does not match (a damaged file)");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t *row = node_tab + (size_t)i * (NODE_BYTES / 4);
        if (row[0] != NO_PARENT && row[0] >= i) {
            rc = cv_err_set(err, CV_ECORRUPT, "node %u names parent %u, which does not come before it", i, row[0]);
            goto out;
        }
        for (int k = 0; k < CV_KV_BLOCK; k++) {
            int32_t tok = (int32_t)row[1 + k];
            if (tok < 0 || tok >= n_vocab) {
                rc = cv_err_set(err, CV_ECORRUPT, "node %u holds token id %d, must be 0..%d", i, tok, n_vocab - 1);
                goto out;
            }
        }
    }
    snaps = cv_xcalloc(n ? n : 1, sizeof *snaps);
    depth = cv_xmalloc((n ? n : 1) * sizeof *depth);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t parent = node_tab[(size_t)i * (NODE_BYTES / 4)];
        depth[i] = parent == NO_PARENT ? 1 : depth[parent] + 1; /* a parent comes first: checked above */
    }
    for (uint32_t k = 0; k < sh.n_snaps; k++) {
        const uint32_t ix = snap_ix[k];
        if (ix >= n || (k > 0 && ix <= snap_ix[k - 1])) {
            rc = cv_err_set(err, CV_ECORRUPT, "snapshot %u names node %u: the nodes must ascend below %u", k, ix, n);
            goto out;
        }
        snaps[ix] = snap_data + (size_t)k * sb;
    }
    if ((rc = numerics_check(e, &fh, node_tab, blocks, snaps, depth, sb, err)))
        goto out;

    /* Build the tree in file order (most recent first): each new node goes
     * to the old end of the LRU list, which reproduces the saved order.
     * Blocks and snapshots together stay within max_blocks; a snapshot
     * that does not fit is left out, its node kept. */
    nodes = cv_xcalloc(n ? n : 1, sizeof *nodes);
    int64_t used = 0;
    for (uint32_t i = 0; i < n && used < max_blocks; i++) {
        const uint32_t *row = node_tab + (size_t)i * (NODE_BYTES / 4);
        rx_node *parent = row[0] == NO_PARENT ? NULL : nodes[row[0]];
        if (row[0] != NO_PARENT && !parent)
            continue; /* its parent was not loaded */
        cv_mem_span span;
        if (!cv_engine_span_make(e, blocks + (size_t)i * fh.block_bytes, &span))
            break;
        int32_t before = t->n_nodes;
        nodes[i] = rx_insert(t, parent, (const int32_t *)(row + 1), &span);
        cv_engine_span_release(e, &span); /* the tree's reference stays (none if the node existed: a duplicate) */
        used++;
        if (t->n_nodes == before)
            continue;
        (*n_loaded)++;
        cv_snapshot *snap;
        if (snaps[i] && used + mi.snapshot_blocks <= max_blocks &&
            cv_engine_snapshot_make(e, (int32_t)nodes[i]->depth * CV_KV_BLOCK, snaps[i], &snap, NULL) == 0) {
            rx_set_snapshot(t, nodes[i], snap);
            used += mi.snapshot_blocks;
        }
    }
out:
    free(nodes);
    free(snaps);
    free(depth);
    free(sums);
    munmap((void *)map, size);
    return rc;
}
