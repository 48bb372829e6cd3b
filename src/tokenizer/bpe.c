/* bpe.c — byte-level BPE over one pre-token (a "word"). The word starts as
 * one symbol per byte (the id of that byte's byte-level character); the pair
 * of adjacent symbols with the lowest merge rank is merged, leftmost first on
 * ties, until no adjacent pair has a merge. This is the merge order of
 * Hugging Face `tokenizers` (word.rs merge_all) and of GPT-2's encoder.
 *
 * Merges are looked up by token ids, not strings: at load time each merge
 * "a b" became (id(a), id(b)) -> (rank, id(ab)) in a hash table, so the inner
 * loop hashes two integers. A binary heap of candidate pairs with lazy
 * invalidation keeps a word of n bytes at O(n log n), so one 10 MB word costs
 * the same per byte as many short ones.
 *
 * Source code repeats its words, so a call that has seen many words keeps a
 * small direct-mapped cache of short words and their ids (per call, so the
 * tokenizer stays shareable). A hit gives the ids BPE would give: the
 * result depends only on the word's bytes. */
#include "tokenizer/tok_int.h"

#include <stdlib.h>

typedef struct bsym {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
} bsym;

static void try_pair(const cv_tok *t, bsym *sym, int32_t pos, tok_cand *heap, size_t *nh, size_t *work)
{
    if (pos < 0)
        return;
    int32_t nx = sym[pos].next;
    if (nx < 0 || sym[pos].id < 0 || sym[nx].id < 0)
        return;
    ++*work;
    const tok_pair_slot *m = tok_pair_get(&t->merges, sym[pos].id, sym[nx].id);
    if (m)
        tok_heap_push(heap, nh, (tok_cand){ (uint32_t)m->rank, pos, sym[pos].id, sym[nx].id });
}

static void push_byte(const cv_tok *t, unsigned char b, cv_tok_ids *out)
{
    int32_t id = t->byte_id[b];
    if (id < 0)
        id = t->unk;
    if (id >= 0)
        tok_ids_push(out, id);
}

#define CACHE_SLOTS 16384
#define CACHE_KEY 22
#define CACHE_IDS 8
/* Words before the cache is made: short texts never pay for it. */
#define CACHE_AFTER 512

typedef struct tok_word_cache {
    struct {
        uint64_t hash; /* 0 = empty */
        uint8_t len, n;
        char key[CACHE_KEY];
        int32_t ids[CACHE_IDS];
    } e[CACHE_SLOTS];
} tok_word_cache;

static void bpe_merge(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out);

void tok_bpe_word(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out)
{
    s->work++;
    if (n == 1) {
        push_byte(t, (unsigned char)p[0], out);
        return;
    }
    if (n > CACHE_KEY) {
        bpe_merge(t, s, p, n, out);
        return;
    }
    if (!s->cache) {
        if (++s->n_words < CACHE_AFTER) {
            bpe_merge(t, s, p, n, out);
            return;
        }
        s->cache = cv_xcalloc(1, sizeof *s->cache);
    }
    uint64_t h = tok_hash_bytes(p, n) | 1;
    typeof(s->cache->e[0]) *e = &s->cache->e[h & (CACHE_SLOTS - 1)];
    if (e->hash == h && e->len == n && memcmp(e->key, p, n) == 0) {
        for (int i = 0; i < e->n; i++)
            tok_ids_push(out, e->ids[i]);
        return;
    }
    size_t mark = out->n;
    bpe_merge(t, s, p, n, out);
    size_t got = out->n - mark;
    if (got <= CACHE_IDS) {
        e->hash = h;
        e->len = (uint8_t)n;
        e->n = (uint8_t)got;
        memcpy(e->key, p, n);
        memcpy(e->ids, out->ids + mark, got * sizeof(int32_t));
    }
}

static void bpe_merge(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out)
{
    if (t->ignore_merges) {
        /* Llama 3 and gpt-4o: a word that is itself a token is emitted
         * as-is, even where merge order would not reach it. */
        cv_buf_reset(&s->word);
        for (size_t i = 0; i < n; i++) {
            cv_str bc = t->byte_chars[(unsigned char)p[i]];
            cv_buf_append(&s->word, bc.ptr, bc.len);
        }
        int32_t id = tok_map_find(t, s->word.data, s->word.len);
        if (id >= 0) {
            tok_ids_push(out, id);
            return;
        }
    }
    bsym *sym = tok_grow(&s->sym, &s->sym_cap, n, sizeof(bsym));
    for (size_t i = 0; i < n; i++) {
        sym[i].id = t->byte_id[(unsigned char)p[i]];
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    /* Each merge adds at most two candidates to the n - 1 initial ones. */
    tok_cand *heap = tok_grow(&s->heap, &s->heap_cap, 3 * n, sizeof(tok_cand));
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < (int32_t)n; i++)
        try_pair(t, sym, i, heap, &nh, &s->work);
    while (nh > 0) {
        tok_cand c = tok_heap_pop(heap, &nh);
        s->work++;
        int32_t pos = c.pos, nx = sym[pos].next;
        /* Stale: one side merged since this candidate was pushed. */
        if (sym[pos].id != c.x || nx < 0 || sym[nx].id != c.y)
            continue;
        const tok_pair_slot *m = tok_pair_get(&t->merges, c.x, c.y);
        sym[pos].id = m->id;
        sym[pos].next = sym[nx].next;
        if (sym[nx].next >= 0)
            sym[sym[nx].next].prev = pos;
        sym[nx].id = -2; /* dead */
        try_pair(t, sym, sym[pos].prev, heap, &nh, &s->work);
        try_pair(t, sym, pos, heap, &nh, &s->work);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        if (sym[i].id >= 0)
            tok_ids_push(out, sym[i].id);
        else
            push_byte(t, (unsigned char)p[i], out);
    }
}
