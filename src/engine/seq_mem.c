/* seq_mem.c — sequence memory (engine.h, "sequence memory"; docs/ENGINE.md):
 * what a sequence is besides its tokens — a block table per layer group
 * (kv_cache.c grows and cuts them) and, when some layer keeps recurrent
 * state, one state slot — and everything that copies, cuts or shares it:
 * open, close, fork, truncate and the checkpoint it may fall back to,
 * snapshots of the state stored in pool blocks, the spans a prefix holder
 * keeps, and the judgement of where a held prefix can resume. The rules
 * that keep it simple: full-group KV cuts back anywhere; a window group
 * only to a length whose window it still holds; a recurrent state only to
 * a copy of itself (a checkpoint, a snapshot) or to zero; and only this
 * file knows which applies. Invariants: a live slot holds the state after
 * exactly seqs[s].len positions; a checkpoint slot, when ckpt_len >= 0, the
 * state after ckpt_len <= len of them; a window group's table holds its
 * entries from win_lo on. */
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/engine_int.h"

/* ---- state slots ---- */

static char *live_slot(const cv_engine *e, int32_t seq) { return e->state + (size_t)seq * e->state_bytes; }
static char *ckpt_slot(const cv_engine *e, int32_t seq)
{
    return e->state + ((size_t)e->p.n_seq_max + (size_t)seq) * e->state_bytes;
}

int eng_state_init(cv_engine *e, cv_err *err)
{
    const cv_model *m = e->m;
    size_t off = 0;
    e->state_off = cv_xmalloc((size_t)m->hp.n_layer * sizeof *e->state_off);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const eng_kind *k = eng_mixers[m->layers[il].mixer];
        const size_t nb = k->state_bytes ? k->state_bytes(e, il) : 0;
        e->state_off[il] = nb ? off : SIZE_MAX;
        if (nb > ((size_t)1 << 40))
            return cv_err_set(err, CV_ELIMIT, "engine: layer %d keeps %zu bytes of state per sequence", il, nb);
        off += (nb + 63) & ~(size_t)63;
        e->n_state_layers += nb > 0;
    }
    e->state_bytes = off;
    if (!off)
        return 0;
    /* A snapshot lives in group 0's blocks: a model whose every layer is
     * recurrent would need a pool of its own. */
    if (e->kv[0].block_bytes == 0)
        return cv_err_set(err, CV_EUNSUPPORTED, "engine: a model with recurrent layers and no attention layer is "
                          "not supported (its snapshots live in the KV pool)");
    e->snap_blocks = (int32_t)((off + e->kv[0].block_bytes - 1) / e->kv[0].block_bytes);
    const double total = 2.0 * (double)e->p.n_seq_max * (double)off;
    if (total > (double)(1ull << 46))
        return cv_err_set(err, CV_ELIMIT, "engine: %d sequences' recurrent state would take %.0f GiB", e->p.n_seq_max,
                          total / (1ull << 30));
    /* Untouched pages cost nothing: checkpoint slots of a server that never
     * drafts stay unbacked (2 MiB at a time where huge pages are granted). */
    void *d = eng_map((size_t)total);
    if (!d)
        return cv_err_set(err, CV_ENOMEM, "engine: cannot map %.1f MiB of recurrent state", total / 1048576.0);
    e->state = d;
    return 0;
}

void eng_state_fini(cv_engine *e)
{
    if (e->state)
        munmap(e->state, 2 * (size_t)e->p.n_seq_max * e->state_bytes);
    e->state = NULL;
    free(e->state_off);
    e->state_off = NULL;
}

/* Copies a state between a slot and a snapshot's blocks, piece by piece
 * (a block's bytes are scattered over the pool's head-major regions). */
static void snap_copy(const kv_pool *p, const cv_snapshot *s, char *state, size_t bytes, bool to_blocks)
{
    size_t at = 0;
    const size_t n_reg = kv_regions(p);
    for (int32_t j = 0; j < s->n_blocks && at < bytes; j++)
        for (size_t r = 0; r < n_reg && at < bytes; r++) {
            const size_t n = CV_MIN(p->head_bytes, bytes - at);
            char *piece = kv_piece(p, r, s->blocks[j]);
            if (to_blocks)
                memcpy(piece, state + at, n);
            else
                memcpy(state + at, piece, n);
            at += n;
        }
}

/* ---- sequences ---- */

static kv_seq *seq_get(const cv_engine *e, int32_t seq)
{
    if (seq < 0 || seq >= e->p.n_seq_max || !e->seqs[seq].open)
        return NULL;
    return &e->seqs[seq];
}

int cv_engine_seq_open(cv_engine *e, int32_t *seq, cv_err *err)
{
    for (int32_t i = 0; i < e->p.n_seq_max; i++) {
        kv_seq *s = &e->seqs[i];
        if (!s->open) {
            s->open = true;
            s->len = 0;
            s->n_blocks = 0;
            s->win_lo = 0;
            s->ckpt_len = -1;
            if (e->state_bytes)
                memset(live_slot(e, i), 0, e->state_bytes);
            *seq = i;
            return 0;
        }
    }
    return cv_err_set(err, CV_EBUSY, "engine: all %d sequence slots are in use", e->p.n_seq_max);
}

void cv_engine_seq_close(cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    if (!s)
        return;
    kv_table_cut(e, s, 0);
    s->ckpt_len = -1;
    s->open = false;
}

int32_t cv_engine_seq_len(const cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    return s ? s->len : 0;
}

int cv_engine_seq_fork(cv_engine *e, int32_t src, int32_t *dst, cv_err *err)
{
    if (!seq_get(e, src))
        return cv_err_set(err, CV_EINVAL, "engine: cannot fork sequence %d: it is not open", src);
    int32_t d = -1;
    int rc = cv_engine_seq_open(e, &d, err);
    if (rc)
        return rc;
    const kv_seq *s = &e->seqs[src];
    kv_seq *t = &e->seqs[d];
    for (int32_t g = 0; g < e->n_groups; g++)
        for (int32_t i = 0; i < s->n_blocks; i++)
            if ((t->blocks[g][i] = s->blocks[g][i]) >= 0)
                kv_pool_ref(&e->kv[g], s->blocks[g][i]);
    t->n_blocks = s->n_blocks;
    t->win_lo = s->win_lo;
    t->len = s->len;
    if (e->state_bytes)
        memcpy(live_slot(e, d), live_slot(e, src), e->state_bytes);
    *dst = d;
    return 0;
}

/* ---- cutting back ---- */

int32_t cv_engine_seq_truncatable(const cv_engine *e, int32_t seq, int32_t len)
{
    const kv_seq *s = seq_get(e, seq);
    if (!s)
        return 0;
    if (len < 0)
        len = 0;
    if (len >= s->len)
        return s->len;
    if (e->state_bytes)
        len = s->ckpt_len >= 0 && s->ckpt_len <= len ? s->ckpt_len : 0;
    /* positions from len on see from its window's first block: the table
     * must still hold it */
    return kv_win_first(e, len) < s->win_lo ? 0 : len;
}

int32_t cv_engine_seq_truncate(cv_engine *e, int32_t seq, int32_t len)
{
    kv_seq *s = seq_get(e, seq);
    const int32_t to = cv_engine_seq_truncatable(e, seq, len);
    if (!s || to == s->len)
        return to;
    kv_table_cut(e, s, to);
    if (e->state_bytes) {
        if (to == s->ckpt_len)
            memcpy(live_slot(e, seq), ckpt_slot(e, seq), e->state_bytes);
        else
            memset(live_slot(e, seq), 0, e->state_bytes); /* to == 0: the state restarts */
        if (s->ckpt_len > to)
            s->ckpt_len = -1;
    }
    return to;
}

void cv_engine_seq_checkpoint(cv_engine *e, int32_t seq)
{
    kv_seq *s = seq_get(e, seq);
    if (!s || !e->state_bytes)
        return;
    memcpy(ckpt_slot(e, seq), live_slot(e, seq), e->state_bytes);
    s->ckpt_len = s->len;
}

/* ---- spans ---- */

static cv_mem_span empty_span(void)
{
    cv_mem_span s = { .snap = NULL };
    for (int g = 0; g < CV_MEM_MAX_GROUPS; g++)
        s.kv[g] = -1;
    return s;
}

bool cv_engine_seq_span(const cv_engine *e, int32_t seq, int32_t i, cv_mem_span *out)
{
    *out = empty_span();
    const kv_seq *s = seq_get(e, seq);
    if (!s || i < 0 || i >= s->n_blocks)
        return false;
    for (int32_t g = 0; g < e->n_groups; g++)
        out->kv[g] = s->blocks[g][i];
    return true;
}

void cv_engine_span_ref(cv_engine *e, const cv_mem_span *s)
{
    for (int32_t g = 0; g < e->n_groups; g++)
        if (s->kv[g] >= 0)
            kv_pool_ref(&e->kv[g], s->kv[g]);
}

void cv_engine_span_release(cv_engine *e, cv_mem_span *s)
{
    for (int32_t g = 0; g < e->n_groups; g++)
        if (s->kv[g] >= 0)
            kv_pool_unref(&e->kv[g], s->kv[g]);
    cv_engine_snapshot_free(e, s->snap);
    *s = empty_span();
}

bool cv_engine_span_sole(const cv_engine *e, const cv_mem_span *s)
{
    for (int32_t g = 0; g < e->n_groups; g++)
        if (s->kv[g] >= 0 && e->kv[g].refs[s->kv[g]] != 1)
            return false;
    return true;
}

bool cv_engine_span_read(const cv_engine *e, const cv_mem_span *s, void *dst)
{
    for (int32_t g = 0; g < e->n_groups; g++)
        if (s->kv[g] < 0)
            return false;
    for (int32_t g = 0; dst && g < e->n_groups; g++) {
        cv_engine_kv_block_read(e, g, s->kv[g], dst);
        dst = (char *)dst + e->kv[g].block_bytes;
    }
    return true;
}

bool cv_engine_span_make(cv_engine *e, const void *src, cv_mem_span *out)
{
    *out = empty_span();
    for (int32_t g = 0; g < e->n_groups; g++)
        if (e->kv[g].n_free == 0)
            return false;
    for (int32_t g = 0; g < e->n_groups; g++) {
        out->kv[g] = kv_pool_alloc(&e->kv[g]);
        cv_engine_kv_block_write(e, g, out->kv[g], src);
        src = (const char *)src + e->kv[g].block_bytes;
    }
    return true;
}

void cv_engine_span_frees(const cv_engine *e, const cv_mem_span *s, cv_mem_need *acc)
{
    for (int32_t g = 0; g < e->n_groups; g++)
        if (s->kv[g] >= 0 && e->kv[g].refs[s->kv[g]] == 1)
            acc->blocks[g]++;
    if (s->snap)
        acc->blocks[0] += s->snap->n_blocks;
}

/* ---- resuming a held prefix ---- */

/* The last span index + 1 below len that a group lacks among those a
 * sequence resumed at len needs (full group: every block below len; window
 * group: those from len's window on), or 0 when it holds them all. */
static int32_t kv_gap(const cv_engine *e, const cv_mem_span *const *spans, int32_t len)
{
    const int32_t hi = (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK;
    for (int32_t i = hi - 1; i >= 0; i--)
        for (int32_t g = 0; g < e->n_groups; g++)
            if (spans[i]->kv[g] < 0 && (g == 0 || i >= kv_win_first(e, len)))
                return i + 1;
    return 0;
}

/* Whether spans[0..n) hold what a sequence resumed at len needs: every
 * group's blocks (kv_gap), and with recurrent state a snapshot at len. */
static bool resumable(const cv_engine *e, const cv_mem_span *const *spans, int32_t n, int32_t len)
{
    if (len < 0 || len > (int64_t)n * CV_KV_BLOCK || len > e->p.n_ctx)
        return false;
    if (e->state_bytes && len > 0) {
        const cv_snapshot *sn = len % CV_KV_BLOCK ? NULL : spans[len / CV_KV_BLOCK - 1]->snap;
        if (!sn || sn->len != len)
            return false;
    }
    return kv_gap(e, spans, len) == 0;
}

int32_t cv_engine_resume_len(const cv_engine *e, const cv_mem_span *const *spans, int32_t n, int32_t max_len)
{
    int32_t len = (int32_t)CV_MIN((int64_t)n * CV_KV_BLOCK, (int64_t)CV_MIN(max_len, e->p.n_ctx));
    if (len <= 0)
        return 0;
    if (!e->state_bytes) {
        /* KV alone: past a block some group lacks, only lengths that end
         * before it (its start) can do, and a shorter length's window
         * starts no later, so the walk only goes down. */
        for (int32_t gap; len > 0 && (gap = kv_gap(e, spans, len)) > 0;)
            len = (gap - 1) * CV_KV_BLOCK;
        return len;
    }
    for (len -= len % CV_KV_BLOCK; len > 0; len -= CV_KV_BLOCK)
        if (resumable(e, spans, n, len))
            return len;
    return 0;
}

int cv_engine_seq_restore(cv_engine *e, int32_t seq, const cv_mem_span *const *spans, int32_t n, int32_t len,
                          cv_err *err)
{
    kv_seq *s = seq_get(e, seq);
    if (!s || s->len != 0 || s->n_blocks != 0)
        return cv_err_set(err, CV_EINVAL, "engine: cannot restore into sequence %d: it is not open and empty", seq);
    if (n < 0 || len < 0 || len > (int64_t)n * CV_KV_BLOCK || len > e->p.n_ctx)
        return cv_err_set(err, CV_EINVAL, "engine: %d held spans cannot hold a length of %d (context %d)", n, len,
                          e->p.n_ctx);
    const int32_t nb = (len + CV_KV_BLOCK - 1) / CV_KV_BLOCK, lo = CV_MIN(kv_win_first(e, len), nb);
    for (int32_t i = 0; i < nb; i++)
        for (int32_t g = 0; g < e->n_groups; g++) {
            const int32_t b = spans[i]->kv[g];
            if (b >= 0 && (b >= e->kv[g].n_blocks || e->kv[g].refs[b] == 0))
                return cv_err_set(err, CV_EINVAL, "engine: held span %d names block %d of group %d, not a block in "
                                  "use", i, b, g);
        }
    if (!resumable(e, spans, n, len))
        return cv_err_set(err, CV_EINVAL, "engine: the held prefix cannot resume at length %d (%s)", len,
                          kv_gap(e, spans, len) ? "a block its positions see is not held"
                                                : "no snapshot of the recurrent state there");
    for (int32_t i = 0; i < nb; i++)
        for (int32_t g = 0; g < e->n_groups; g++) {
            const int32_t b = g == 0 || i >= lo ? spans[i]->kv[g] : -1;
            if ((s->blocks[g][i] = b) >= 0)
                kv_pool_ref(&e->kv[g], b);
        }
    s->n_blocks = nb;
    s->win_lo = lo;
    s->len = len;
    if (e->state_bytes && len > 0)
        snap_copy(&e->kv[0], spans[nb - 1]->snap, live_slot(e, seq), e->state_bytes, false);
    return 0;
}

/* ---- snapshots ---- */

/* A snapshot of len with its blocks drawn from the pool; NULL with err
 * when the pool is short (nothing taken). */
static cv_snapshot *snap_alloc(cv_engine *e, int32_t len, cv_err *err)
{
    if (e->kv[0].n_free < e->snap_blocks) {
        cv_err_set(err, CV_ELIMIT, "engine: a snapshot takes %d KV blocks, %d are free", e->snap_blocks,
                   e->kv[0].n_free);
        return NULL;
    }
    cv_snapshot *s = cv_xmalloc(sizeof *s + (size_t)e->snap_blocks * sizeof s->blocks[0]);
    s->len = len;
    s->n_blocks = e->snap_blocks;
    for (int32_t j = 0; j < s->n_blocks; j++)
        s->blocks[j] = kv_pool_alloc(&e->kv[0]);
    return s;
}

int cv_engine_snapshot_take(cv_engine *e, int32_t seq, cv_snapshot **out, cv_err *err)
{
    *out = NULL;
    const kv_seq *q = seq_get(e, seq);
    if (!q || !e->state_bytes || q->len == 0 || q->len % CV_KV_BLOCK)
        return cv_err_set(err, CV_EINVAL, "engine: no snapshot of sequence %d at length %d (%s)", seq,
                          q ? q->len : 0,
                          !q ? "not open" : !e->state_bytes ? "the model keeps no recurrent state"
                                                            : "not a whole positive number of blocks");
    cv_snapshot *s = snap_alloc(e, q->len, err);
    if (!s)
        return CV_ELIMIT;
    snap_copy(&e->kv[0], s, live_slot(e, seq), e->state_bytes, true);
    *out = s;
    return 0;
}

void cv_engine_snapshot_free(cv_engine *e, cv_snapshot *s)
{
    if (!s)
        return;
    for (int32_t j = 0; j < s->n_blocks; j++)
        kv_pool_unref(&e->kv[0], s->blocks[j]);
    free(s);
}

int32_t cv_engine_snapshot_len(const cv_snapshot *s) { return s->len; }

void cv_engine_snapshot_read(const cv_engine *e, const cv_snapshot *s, void *dst)
{
    snap_copy(&e->kv[0], s, dst, e->state_bytes, false);
}

int cv_engine_snapshot_make(cv_engine *e, int32_t len, const void *src, cv_snapshot **out, cv_err *err)
{
    *out = NULL;
    if (!e->state_bytes || len <= 0 || len % CV_KV_BLOCK || len > e->p.n_ctx)
        return cv_err_set(err, CV_EINVAL, "engine: no snapshot at length %d (a whole positive number of blocks "
                          "within the context of %d, of a model with recurrent state)", len, e->p.n_ctx);
    cv_snapshot *s = snap_alloc(e, len, err);
    if (!s)
        return CV_ELIMIT;
    snap_copy(&e->kv[0], s, (char *)src, e->state_bytes, true);
    *out = s;
    return 0;
}

/* ---- needs ---- */

void cv_engine_seq_need(const cv_engine *e, int32_t seq, int32_t n_new, cv_mem_need *acc)
{
    const kv_seq *s = seq_get(e, seq);
    if (s)
        kv_table_need(e, s, s->len + n_new, acc);
}

void cv_engine_snapshot_need(const cv_engine *e, cv_mem_need *acc) { acc->blocks[0] += e->snap_blocks; }

int32_t cv_engine_mem_short(const cv_engine *e, const cv_mem_need *need, const cv_mem_need *more)
{
    int64_t missing = 0;
    for (int32_t g = 0; g < e->n_groups; g++) {
        const int64_t have = (int64_t)e->kv[g].n_free + (more ? more->blocks[g] : 0);
        missing += need->blocks[g] > have ? need->blocks[g] - have : 0;
    }
    return (int32_t)CV_MIN(missing, INT32_MAX);
}

void cv_engine_mem_info(const cv_engine *e, cv_mem_info *out)
{
    memset(out, 0, sizeof *out);
    out->n_groups = e->n_groups;
    for (int32_t g = 0; g < e->n_groups; g++) {
        kv_group_info(e, g, &out->group[g]);
        out->block_bytes += out->group[g].format.block_bytes;
    }
    out->n_state_layers = e->n_state_layers;
    out->state_bytes = e->state_bytes;
    out->snapshot_blocks = e->snap_blocks;
    out->max_positions = (int64_t)e->kv[0].n_blocks * CV_KV_BLOCK;
    out->committed_bytes = e->kv_committed;
    /* attention and the FFNs compute every row on its own: any split is
     * exact unless a kind in use says otherwise */
    out->split_align = 1;
    out->step_run = INT32_MAX;
    for (int k = 0; k < CV_MIXER_COUNT; k++) {
        const eng_kind *kind = eng_mixers[k];
        if (!(e->kinds_used[0] >> k & 1) || !kind)
            continue;
        if (kind->split_align > 0)
            out->split_align = CV_MAX(out->split_align, kind->split_align);
        if (kind->step_run > 0)
            out->step_run = CV_MIN(out->step_run, kind->step_run);
    }
    /* latent attention's decompressed prefill, where the engine takes it:
     * exact on its grid, and a run shorter than a group is all absorbed */
    if (eng_mla_decompresses(e)) {
        out->split_align = CV_MAX(out->split_align, CV_MLA_GROUP);
        out->step_run = CV_MIN(out->step_run, CV_MLA_GROUP - 1);
    }
}
