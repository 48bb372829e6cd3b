/* rec_state.c — the recurrent-state slots of a hybrid model's sequences:
 * one fixed region per sequence slot holding every Gated DeltaNet layer's
 * conv state and DeltaNet state (layout in engine_int.h, "recurrent
 * state"). The sequence operations in kv_cache.c clear a slot on close and
 * on a truncate to 0 and copy it on fork; the DeltaNet mixer reads and
 * writes it in place during a forward call. This file owns only the memory
 * and its layout, not what the numbers mean (mix_deltanet.c).
 * Invariant: a closed slot is all zero, so opening one needs no work. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/engine_int.h"

int rec_pool_init(rec_pool *p, const cv_model *m, int32_t n_seq, cv_err *err)
{
    const cv_hparams *hp = &m->hp;
    memset(p, 0, sizeof *p);
    if (hp->n_recurrent == 0)
        return 0;
    p->layer = cv_xmalloc((size_t)hp->n_layer * sizeof *p->layer);
    for (int32_t il = 0; il < hp->n_layer; il++)
        p->layer[il] = m->layers[il].mixer == CV_MIXER_DELTANET ? p->n_layer++ : -1;
    const size_t C = 2 * (size_t)hp->ssm_group * (size_t)hp->ssm_state + (size_t)hp->ssm_inner;
    p->conv_floats = (size_t)(hp->ssm_conv - 1) * C;
    p->ssm_floats = (size_t)hp->ssm_heads * (size_t)hp->ssm_state * (size_t)hp->ssm_state;
    p->layer_floats = (p->conv_floats + p->ssm_floats + 15) & ~(size_t)15;
    /* Whole pages, so that closing a slot can give its pages back. The
     * loader bounded every factor (limits.h); the product is checked in
     * double before it is trusted. */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const double bytes = (double)p->n_layer * (double)p->layer_floats * sizeof(float);
    if (bytes * n_seq > (double)(1ull << 46)) {
        int rc = cv_err_set(err, CV_ELIMIT, "engine: %d sequences of %.1f MiB of recurrent state each would take "
                            "%.0f GiB", n_seq, bytes / 1048576.0, bytes * n_seq / (1ull << 30));
        free(p->layer);
        memset(p, 0, sizeof *p);
        return rc;
    }
    p->seq_bytes = ((size_t)bytes + page - 1) / page * page;
    void *d = mmap(NULL, p->seq_bytes * (size_t)n_seq, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED) {
        int rc = cv_err_set(err, CV_ENOMEM, "engine: cannot map %.1f MiB of recurrent state for %d sequences",
                            (double)p->seq_bytes * n_seq / 1048576.0, n_seq);
        free(p->layer);
        memset(p, 0, sizeof *p);
        return rc;
    }
    p->data = d;
    return 0;
}

void rec_pool_fini(rec_pool *p, int32_t n_seq)
{
    if (p->data)
        munmap(p->data, p->seq_bytes * (size_t)n_seq);
    free(p->layer);
    memset(p, 0, sizeof *p);
}

size_t eng_rec_bytes(const cv_engine *e) { return e->rec.seq_bytes; }

void *eng_rec_state(const cv_engine *e, int32_t seq)
{
    assert(seq >= 0 && seq < e->p.n_seq_max);
    return e->rec.data ? e->rec.data + (size_t)seq * e->rec.seq_bytes : NULL;
}

float *eng_rec_conv(const cv_engine *e, int32_t seq, int32_t il)
{
    const rec_pool *p = &e->rec;
    assert(p->data && il >= 0 && il < e->m->hp.n_layer && p->layer[il] >= 0);
    return (float *)eng_rec_state(e, seq) + (size_t)p->layer[il] * p->layer_floats;
}

float *eng_rec_ssm(const cv_engine *e, int32_t seq, int32_t il)
{
    return eng_rec_conv(e, seq, il) + e->rec.conv_floats;
}

void eng_rec_clear(cv_engine *e, int32_t seq, bool closing)
{
    void *s = eng_rec_state(e, seq);
    if (!s)
        return;
    /* A closed slot's pages go back to the OS and read as zero when next
     * touched; an open one (a truncate to 0) is written at once. */
    if (!closing || madvise(s, e->rec.seq_bytes, MADV_DONTNEED) != 0)
        memset(s, 0, e->rec.seq_bytes);
}

void eng_rec_copy(cv_engine *e, int32_t dst, int32_t src)
{
    void *d = eng_rec_state(e, dst);
    if (d)
        memcpy(d, eng_rec_state(e, src), e->rec.seq_bytes);
}
