/* gram_mask.c — token masks. The vocabulary becomes a byte trie (tokens in
 * DFS order). For every automaton state that tops a stack, a cache entry
 * (built on first use, then shared by all sequences of the grammar) splits
 * the vocabulary in three by walking the trie from that state alone, with a
 * sentinel below it:
 *   accepted  — the token's bytes are read without leaving the state's rule
 *               (or leave it exactly at the token's end): allowed whatever
 *               lies below on the real stack;
 *   suffixes  — the rule ends part-way through the token: the rest of the
 *               token (a suffix) depends on the stack below; such tokens go
 *               into a suffix trie with the tokens listed at their suffix;
 *   rejected  — everything else.
 * A mask is then, per stack of the state, the accepted bitset OR-ed in plus
 * a walk of the (small) suffix trie against the real stack below. Inside a
 * JSON string almost every token is "accepted" and only the few hundred
 * distinct suffixes after a closing quote are walked at run time. */
#include <stdlib.h>

#include "grammar/grammar_int.h"

/* ---- vocabulary and trie ---- */

typedef struct tokref { const char *p; uint32_t len; int32_t id; } tokref;

static int cmp_tokref(const void *a, const void *b)
{
    const tokref *x = a, *y = b;
    size_t n = CV_MIN(x->len, y->len);
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int cv_grammar_vocab_create(int32_t n_vocab, const cv_str *pieces, const uint8_t *flags, cv_grammar_vocab **out,
                            cv_err *err)
{
    *out = NULL;
    if (n_vocab <= 0 || (uint32_t)n_vocab > CV_MAX_GRAMMAR_VOCAB)
        return cv_err_set(err, CV_ELIMIT, "grammar: vocabulary of %d tokens, must be in [1, %u]", n_vocab,
                          CV_MAX_GRAMMAR_VOCAB);
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (pieces[i].len > CV_MAX_GRAMMAR_TOKEN_BYTES)
            return cv_err_set(err, CV_ELIMIT, "grammar: token %d is %zu bytes, limit CV_MAX_GRAMMAR_TOKEN_BYTES = %d",
                              i, pieces[i].len, CV_MAX_GRAMMAR_TOKEN_BYTES);
        total += pieces[i].len;
    }
    cv_grammar_vocab *v = cv_xcalloc(1, sizeof *v);
    v->n_vocab = n_vocab;
    v->bytes = cv_xmalloc(total ? total : 1);
    v->off = cv_xmalloc(((size_t)n_vocab + 1) * sizeof *v->off);
    v->flags = cv_xcalloc((size_t)n_vocab, 1);
    size_t at = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        v->off[i] = (uint32_t)at;
        if (pieces[i].len)
            memcpy(v->bytes + at, pieces[i].ptr, pieces[i].len);
        at += pieces[i].len;
        v->flags[i] = flags ? flags[i] : 0;
    }
    v->off[n_vocab] = (uint32_t)at;
    if (total > UINT32_MAX) {
        cv_grammar_vocab_destroy(v);
        return cv_err_set(err, CV_ELIMIT, "grammar: vocabulary pieces total %zu bytes, more than 4 GiB", total);
    }

    tokref *refs = cv_xmalloc((size_t)n_vocab * sizeof *refs);
    int32_t nr = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (v->flags[i] & CV_GRAMMAR_TOK_EOG) {
            v->eog = cv_xrealloc(v->eog, (size_t)(v->n_eog + 1) * sizeof *v->eog);
            v->eog[v->n_eog++] = i;
            continue;
        }
        if (v->flags[i] & CV_GRAMMAR_TOK_SPECIAL) {
            v->special = cv_xrealloc(v->special, (size_t)(v->n_special + 1) * sizeof *v->special);
            v->special[v->n_special++] = i;
            continue;
        }
        uint32_t len = v->off[i + 1] - v->off[i];
        if (len == 0)
            continue;
        refs[nr++] = (tokref){ v->bytes + v->off[i], len, i };
    }
    if (nr > 1)
        qsort(refs, (size_t)nr, sizeof *refs, cmp_tokref);

    /* insert in sorted order: nodes come out in DFS preorder */
    size_t cap = (size_t)nr + 16;
    v->trie = cv_xmalloc(cap * sizeof *v->trie);
    v->trie[0] = (gtrie_node){ -1, -1, -1, -1, 0, 0 };
    v->n_trie = 1;
    int32_t path[CV_MAX_GRAMMAR_TOKEN_BYTES + 1];
    int32_t last_child[CV_MAX_GRAMMAR_TOKEN_BYTES + 1];
    int32_t depth = 0;
    path[0] = 0;
    last_child[0] = -1;
    const tokref *prev = NULL;
    for (int32_t k = 0; k < nr; k++) {
        const tokref *t = &refs[k];
        uint32_t common = 0;
        if (prev)
            while (common < prev->len && common < t->len && prev->p[common] == t->p[common])
                common++;
        while ((uint32_t)depth > common) {
            v->trie[path[depth]].subtree_end = v->n_trie;
            depth--;
        }
        if (prev && common == t->len && prev->len == t->len) {
            /* same bytes as the previous token: chain it */
            gtrie_node *nd = &v->trie[path[depth]];
            v->dup = cv_xrealloc(v->dup, (size_t)(v->n_dup + 2) * sizeof *v->dup);
            v->dup[v->n_dup] = t->id;
            v->dup[v->n_dup + 1] = nd->extra;
            nd->extra = v->n_dup;
            v->n_dup += 2;
            prev = t;
            continue;
        }
        for (uint32_t d = common; d < t->len; d++) {
            if ((size_t)v->n_trie == cap) {
                cap *= 2;
                v->trie = cv_xrealloc(v->trie, cap * sizeof *v->trie);
            }
            int32_t nn = v->n_trie++;
            v->trie[nn] = (gtrie_node){ -1, -1, -1, -1, 0, (uint8_t)t->p[d] };
            int32_t parent = path[depth];
            if (last_child[depth] < 0 || v->trie[parent].child < 0)
                v->trie[parent].child = nn;
            else
                v->trie[last_child[depth]].sibling = nn;
            last_child[depth] = nn;
            depth++;
            path[depth] = nn;
            last_child[depth] = -1;
        }
        v->trie[path[depth]].tok = t->id;
        prev = t;
    }
    while (depth >= 0) {
        v->trie[path[depth]].subtree_end = v->n_trie;
        depth--;
    }
    free(refs);
    *out = v;
    return 0;
}

void cv_grammar_vocab_destroy(cv_grammar_vocab *v)
{
    if (!v)
        return;
    free(v->bytes);
    free(v->off);
    free(v->flags);
    free(v->trie);
    free(v->dup);
    free(v->eog);
    free(v->special);
    free(v);
}

int32_t cv_grammar_vocab_n(const cv_grammar_vocab *v) { return v->n_vocab; }

cv_str cv_grammar_vocab_piece(const cv_grammar_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_vocab)
        return (cv_str){ "", 0 };
    return (cv_str){ v->bytes + v->off[id], v->off[id + 1] - v->off[id] };
}

unsigned cv_grammar_vocab_flags(const cv_grammar_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n_vocab ? v->flags[id] : 0;
}

/* ---- binding ---- */

int gm_bind_vocab(cv_grammar *g, const cv_grammar_vocab *v, cv_err *err)
{
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (g->vocab && g->vocab != v) {
        rc = cv_err_set(err, CV_EINVAL, "grammar: already bound to another vocabulary; compile one grammar per model");
    } else if (!g->vocab) {
        g->special_tok = cv_xmalloc((size_t)(g->n_specials ? g->n_specials : 1) * sizeof *g->special_tok);
        for (int i = 0; i < g->n_specials; i++) {
            g->special_tok[i] = -1;
            size_t len = strlen(g->specials[i]);
            for (int32_t k = 0; k < v->n_special; k++) {
                cv_str p = cv_grammar_vocab_piece(v, v->special[k]);
                if (p.len == len && !memcmp(p.ptr, g->specials[i], len)) {
                    g->special_tok[i] = v->special[k];
                    break;
                }
            }
        }
        g->vocab = v;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* ---- cache building ---- */

typedef struct cbuild {
    const cv_grammar *g;
    const cv_grammar_vocab *v;
    gpool pool;
    gset *sets;       /* per trie depth */
    gcache *c;
    int32_t cap_sfx;
    /* (suffix node, token) pairs, flattened at the end */
    int32_t *pairs;
    size_t n_pairs, cap_pairs;
} cbuild;

static void set_bit(uint64_t *bits, int32_t i) { bits[i >> 6] |= 1ull << (i & 63); }

static void node_tokens(const cv_grammar_vocab *v, const gtrie_node *nd, void (*fn)(void *, int32_t), void *ud)
{
    if (nd->tok >= 0)
        fn(ud, nd->tok);
    for (int32_t k = nd->extra; k >= 0; k = v->dup[k + 1])
        fn(ud, v->dup[k]);
}

static void acc_tok(void *ud, int32_t tok) { set_bit(((cbuild *)ud)->c->acc, tok); }

static int32_t sfx_child(cbuild *b, int32_t parent, uint8_t byte)
{
    gcache *c = b->c;
    for (int32_t k = c->sfx[parent].child; k >= 0; k = c->sfx[k].sibling)
        if (c->sfx[k].byte == byte)
            return k;
    if (c->n_sfx == b->cap_sfx) {
        b->cap_sfx = b->cap_sfx ? b->cap_sfx * 2 : 64;
        c->sfx = cv_xrealloc(c->sfx, (size_t)b->cap_sfx * sizeof *c->sfx);
    }
    int32_t nn = c->n_sfx++;
    c->sfx[nn] = (gsuffix_node){ -1, c->sfx[parent].child, 0, 0, byte };
    c->sfx[parent].child = nn;
    return nn;
}

typedef struct pair_ctx { cbuild *b; int32_t node; } pair_ctx;

static void pair_tok(void *ud, int32_t tok)
{
    pair_ctx *pc = ud;
    cbuild *b = pc->b;
    if (b->n_pairs + 2 > b->cap_pairs) {
        b->cap_pairs = b->cap_pairs ? b->cap_pairs * 2 : 256;
        b->pairs = cv_xrealloc(b->pairs, b->cap_pairs * sizeof *b->pairs);
    }
    b->pairs[b->n_pairs++] = pc->node;
    b->pairs[b->n_pairs++] = tok;
}

/* Every token strictly below trie node u gets its remaining bytes (after u)
 * as a suffix. Iterative over the DFS-ordered subtree. */
static void add_suffixes(cbuild *b, int32_t u)
{
    const cv_grammar_vocab *v = b->v;
    int32_t stack_t[CV_MAX_GRAMMAR_TOKEN_BYTES + 1], stack_s[CV_MAX_GRAMMAR_TOKEN_BYTES + 1];
    int32_t sp = 0;
    for (int32_t k = v->trie[u].child; k >= 0; k = v->trie[k].sibling) {
        stack_t[0] = k;
        stack_s[0] = sfx_child(b, 0, v->trie[k].byte);
        sp = 1;
        while (sp) {
            int32_t t = stack_t[--sp], s = stack_s[sp];
            pair_ctx pc = { b, s };
            node_tokens(v, &v->trie[t], pair_tok, &pc);
            for (int32_t ch = v->trie[t].child; ch >= 0; ch = v->trie[ch].sibling) {
                stack_t[sp] = ch;
                stack_s[sp] = sfx_child(b, s, v->trie[ch].byte);
                sp++;
            }
        }
    }
}

static void walk(cbuild *b, int32_t u, int depth)
{
    const cv_grammar_vocab *v = b->v;
    const gset *in = &b->sets[depth];
    for (int32_t k = v->trie[u].child; k >= 0; k = v->trie[k].sibling) {
        gset *out = &b->sets[depth + 1];
        gm_step(b->g, &b->pool, in, v->trie[k].byte, out);
        if (out->n == 0 && !out->returned)
            continue;
        node_tokens(v, &v->trie[k], acc_tok, b);
        if (out->returned)
            add_suffixes(b, k);
        if (out->n > 0 && v->trie[k].child >= 0)
            walk(b, k, depth + 1);
    }
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static gcache *build_cache(const cv_grammar *g, int32_t state)
{
    const cv_grammar_vocab *v = g->vocab;
    cbuild b = { .g = g, .v = v };
    gpool_init(&b.pool);
    b.sets = cv_xcalloc(CV_MAX_GRAMMAR_TOKEN_BYTES + 2, sizeof *b.sets);
    gcache *c = cv_xcalloc(1, sizeof *c);
    b.c = c;
    c->acc = cv_xcalloc(((size_t)v->n_vocab + 63) / 64, sizeof(uint64_t));
    b.cap_sfx = 16;
    c->sfx = cv_xmalloc((size_t)b.cap_sfx * sizeof *c->sfx);
    c->sfx[0] = (gsuffix_node){ -1, -1, 0, 0, 0 };
    c->n_sfx = 1;
    /* the frame alone, reading its first byte from its own edges */
    b.sets[0].v = cv_xmalloc(sizeof(int32_t));
    b.sets[0].cap = 1;
    b.sets[0].v[0] = gpool_intern(&b.pool, state, GSTK_SENTINEL);
    b.sets[0].n = 1;
    walk(&b, 0, 0);
    /* flatten the suffix tokens */
    if (b.n_pairs > 2)
        qsort(b.pairs, b.n_pairs / 2, 2 * sizeof(int32_t), cmp_pair);
    c->toks = cv_xmalloc((b.n_pairs / 2 + 1) * sizeof *c->toks);
    uint32_t nt = 0;
    for (size_t i = 0; i < b.n_pairs; i += 2) {
        int32_t node = b.pairs[i], tok = b.pairs[i + 1];
        if (i && b.pairs[i - 2] == node && b.pairs[i - 1] == tok)
            continue;
        if (c->sfx[node].n_tok == 0)
            c->sfx[node].tok_at = nt;
        c->sfx[node].n_tok++;
        c->toks[nt++] = tok;
    }
    c->n_toks = nt;
    free(b.pairs);
    for (int i = 0; i < CV_MAX_GRAMMAR_TOKEN_BYTES + 2; i++)
        gset_free(&b.sets[i]);
    free(b.sets);
    gpool_fini(&b.pool);
    return c;
}

void gcache_free(gcache *c)
{
    if (!c)
        return;
    free(c->acc);
    free(c->sfx);
    free(c->toks);
    free(c);
}

const gcache *gcache_get(cv_grammar *g, int32_t state)
{
    gcache *c = atomic_load_explicit(&g->cache[state], memory_order_acquire);
    if (c)
        return c;
    pthread_mutex_lock(&g->lock);
    c = atomic_load_explicit(&g->cache[state], memory_order_relaxed);
    if (!c) {
        c = build_cache(g, state);
        atomic_store_explicit(&g->cache[state], c, memory_order_release);
        atomic_fetch_add(&g->n_cached, 1);
    }
    pthread_mutex_unlock(&g->lock);
    return c;
}

/* ---- masks ---- */

int gm_state_mask(cv_grammar_state *s, uint64_t *allowed, cv_err *err);
void gm_state_internals(cv_grammar_state *s, cv_grammar **g, const cv_grammar_vocab **v, gpool **pool, gset **cur,
                        gset **parent_set, gset **depth_sets, int *n_depth_sets, bool **done);

typedef struct mwalk {
    const cv_grammar *g;
    const gcache *c;
    gpool *pool;
    gset *sets;
    uint64_t *allowed;
} mwalk;

static void walk_suffix(mwalk *m, int32_t node, int depth)
{
    const gcache *c = m->c;
    for (int32_t k = c->sfx[node].child; k >= 0; k = c->sfx[k].sibling) {
        gset *out = &m->sets[depth + 1];
        gm_step(m->g, m->pool, &m->sets[depth], c->sfx[k].byte, out);
        if (out->n == 0 && !out->can_end)
            continue;
        for (uint32_t i = 0; i < c->sfx[k].n_tok; i++)
            set_bit(m->allowed, c->toks[c->sfx[k].tok_at + i]);
        if (out->n > 0 && c->sfx[k].child >= 0)
            walk_suffix(m, k, depth + 1);
    }
}

int gm_state_mask(cv_grammar_state *s, uint64_t *allowed, cv_err *err)
{
    CV_UNUSED(err);
    cv_grammar *g;
    const cv_grammar_vocab *v;
    gpool *pool;
    gset *cur, *pset, *sets;
    int n_sets;
    bool *done;
    gm_state_internals(s, &g, &v, &pool, &cur, &pset, &sets, &n_sets, &done);
    size_t words = ((size_t)v->n_vocab + 63) / 64;
    memset(allowed, 0, words * sizeof *allowed);
    if (*done)
        return 0;
    for (int32_t i = 0; i < cur->n; i++) {
        int32_t top = cur->v[i];
        gnode nd = pool->nodes[top];
        const gstate *st = &g->states[nd.state];
        if (st->n_byte) {
            const gcache *c = gcache_get(g, nd.state);
            for (size_t w = 0; w < words; w++)
                allowed[w] |= c->acc[w];
            if (c->sfx[0].child >= 0 && nd.parent >= 0) {
                /* the rest of those tokens continue below the frame */
                sets[0].n = 0;
                sets[0].can_end = sets[0].returned = false;
                gm_expand(g, pool, nd.parent, &sets[0]);
                if (sets[0].n > 0) {
                    mwalk m = { g, c, pool, sets, allowed };
                    walk_suffix(&m, 0, 0);
                }
            }
        }
        for (uint32_t k = 0; k < st->n_spec; k++) {
            int32_t tok = g->special_tok ? g->special_tok[g->specs[st->e_spec + k].special] : -1;
            if (tok >= 0)
                set_bit(allowed, tok);
        }
    }
    if (cur->can_end)
        for (int32_t i = 0; i < v->n_eog; i++)
            set_bit(allowed, v->eog[i]);
    return 0;
}
