/* radix.c — the prefix cache: a tree over the engine's memory spans keyed
 * by token ids at block granularity, shared by every request (the layout
 * and the LRU rule are described in sched_int.h). The tree holds one
 * reference on each block of its spans; a running sequence that shares a
 * block holds another, which is how the tree knows a block is in use
 * without asking who uses it. Snapshots are the tree's alone (a sequence
 * resumed from one copies it).
 *
 * Only whole blocks are cached: a block's KV depends on every token before
 * it, so a node's identity is its whole path, and the hash key (parent id,
 * 16 token ids) makes each step of a lookup one probe. Invariants: every
 * node but the root is on the LRU list and in the hash table exactly once;
 * n_children counts a node's children; a parent is more recent than each
 * of its children on the list. */
#include <stdlib.h>

#include "sched/sched_int.h"

/* ---- hashing ---- */

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* A 64-bit multiply-rotate hash over 8-byte words (not cryptographic: it
 * detects accidents — flipped bits, truncation, another file — and spreads
 * hash-table keys). Four lanes keep the multiplies independent, so it runs
 * at several GB/s on the cache file. */
uint64_t cv_sched_hash(uint64_t seed, const void *data, size_t n)
{
    const uint64_t P1 = 0x9e3779b185ebca87ull, P2 = 0xc2b2ae3d27d4eb4full;
    const unsigned char *p = data;
    uint64_t a = seed + P1, b = seed ^ P2, c = seed - P1, d = ~seed;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        a = rotl(a + w[0] * P2, 31) * P1;
        b = rotl(b + w[1] * P2, 31) * P1;
        c = rotl(c + w[2] * P2, 31) * P1;
        d = rotl(d + w[3] * P2, 31) * P1;
    }
    uint64_t h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18) + (uint64_t)n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = rotl(h ^ (w * P2), 27) * P1;
    }
    for (; i < n; i++)
        h = rotl(h ^ (p[i] * P1), 11) * P2;
    return mix(h);
}

static uint64_t key_of(const rx_node *parent, const int32_t *tokens)
{
    return cv_sched_hash(parent->id, tokens, CV_KV_BLOCK * sizeof(int32_t));
}

/* ---- lists and the table ---- */

static void lru_unlink(rx_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

static void lru_push_recent(radix *t, rx_node *n)
{
    n->prev = t->lru.prev;
    n->next = &t->lru;
    t->lru.prev->next = n;
    t->lru.prev = n;
}

static void table_grow(radix *t)
{
    size_t nb = t->n_buckets ? t->n_buckets * 2 : 1024;
    rx_node **b = cv_xcalloc(nb, sizeof *b);
    for (size_t i = 0; i < t->n_buckets; i++)
        for (rx_node *n = t->buckets[i], *nx; n; n = nx) {
            nx = n->hnext;
            n->hnext = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    free(t->buckets);
    t->buckets = b;
    t->n_buckets = nb;
}

static rx_node *find_child(const radix *t, const rx_node *parent, const int32_t *tokens, uint64_t h)
{
    for (rx_node *n = t->buckets[h & (t->n_buckets - 1)]; n; n = n->hnext)
        if (n->hash == h && n->parent == parent && !memcmp(n->tokens, tokens, sizeof n->tokens))
            return n;
    return NULL;
}

static void table_remove(radix *t, rx_node *n)
{
    rx_node **pp = &t->buckets[n->hash & (t->n_buckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
}

/* ---- the tree ---- */

void rx_init(radix *t, cv_engine *e)
{
    memset(t, 0, sizeof *t);
    t->e = e;
    t->root.id = 0;
    t->next_id = 1;
    t->lru.prev = t->lru.next = &t->lru;
    table_grow(t);
}

void rx_fini(radix *t)
{
    for (rx_node *n = t->lru.next, *nx; n != &t->lru; n = nx) {
        nx = n->next;
        cv_engine_span_release(t->e, &n->span);
        free(n);
    }
    free(t->buckets);
    memset(t, 0, sizeof *t);
}

void rx_touch(radix *t, rx_node *n)
{
    for (; n && n != &t->root; n = n->parent) {
        lru_unlink(n);
        lru_push_recent(t, n);
    }
}

int32_t rx_match(radix *t, const int32_t *tokens, int32_t n, rx_node **path, int32_t max)
{
    rx_node *at = &t->root;
    int32_t k = 0;
    while (k < max && (int64_t)(k + 1) * CV_KV_BLOCK <= n) {
        const int32_t *blk = tokens + (size_t)k * CV_KV_BLOCK;
        rx_node *c = at->n_children ? find_child(t, at, blk, key_of(at, blk)) : NULL;
        if (!c)
            break;
        path[k++] = at = c;
    }
    if (k)
        rx_touch(t, path[k - 1]);
    return k;
}

rx_node *rx_insert(radix *t, rx_node *parent, const int32_t *tokens, const cv_mem_span *span)
{
    if (!parent)
        parent = &t->root;
    uint64_t h = key_of(parent, tokens);
    rx_node *c = parent->n_children ? find_child(t, parent, tokens, h) : NULL;
    if (c)
        return c;
    if ((size_t)t->n_nodes >= t->n_buckets)
        table_grow(t);
    c = cv_xcalloc(1, sizeof *c);
    memcpy(c->tokens, tokens, sizeof c->tokens);
    c->span = *span;
    c->span.snap = NULL;
    c->parent = parent;
    c->depth = parent->depth + 1;
    c->id = t->next_id++;
    c->hash = h;
    c->hnext = t->buckets[h & (t->n_buckets - 1)];
    t->buckets[h & (t->n_buckets - 1)] = c;
    /* New nodes start as the least recent: until the caller touches the
     * path, that keeps the parent more recent than the child. */
    c->next = t->lru.next;
    c->prev = &t->lru;
    t->lru.next->prev = c;
    t->lru.next = c;
    parent->n_children++;
    t->n_nodes++;
    cv_engine_span_ref(t->e, &c->span);
    return c;
}

void rx_set_snapshot(radix *t, rx_node *node, cv_snapshot *snap)
{
    if (node->span.snap) {
        cv_engine_snapshot_free(t->e, snap);
        return;
    }
    node->span.snap = snap;
    t->n_snaps++;
}

static bool evictable(const radix *t, const rx_node *n)
{
    return n->n_children == 0 && n->pins == 0 && cv_engine_span_sole(t->e, &n->span);
}

bool rx_evict(radix *t, const cv_mem_need *need)
{
    bool fits = cv_engine_mem_short(t->e, need, NULL) == 0;
    for (rx_node *n = t->lru.next, *nx; n != &t->lru && !fits; n = nx) {
        nx = n->next;
        if (!evictable(t, n))
            continue;
        rx_node *p = n->parent;
        lru_unlink(n);
        table_remove(t, n);
        p->n_children--;
        t->n_snaps -= n->span.snap != NULL;
        cv_engine_span_release(t->e, &n->span);
        free(n);
        t->n_nodes--;
        t->n_evicted++;
        fits = cv_engine_mem_short(t->e, need, NULL) == 0;
        /* p, now perhaps a leaf, is more recent than n: the walk meets it
         * later. */
    }
    return fits;
}

void rx_evictable(const radix *t, cv_mem_need *acc)
{
    for (const rx_node *n = t->lru.next; n != &t->lru; n = n->next)
        if (n->pins == 0 && cv_engine_span_sole(t->e, &n->span))
            cv_engine_span_frees(t->e, &n->span, acc);
}

void rx_walk_recent(const radix *t, bool (*fn)(void *ud, const rx_node *n), void *ud)
{
    for (const rx_node *n = t->lru.prev; n != &t->lru; n = n->prev)
        if (!fn(ud, n))
            return;
}
