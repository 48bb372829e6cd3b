/* gram_match.c — the byte-level pushdown matcher and the per-sequence state.
 * A state is a set of stacks, each ready to read its next byte (its top
 * state has byte or special-token edges), plus whether the whole grammar
 * may end here. Stacks are interned (state, parent) nodes in a per-state
 * pool, so equal stacks are the same int and sets deduplicate for free;
 * reading a byte replaces the top and takes the closure (push callees, pop
 * finished frames). The pool only grows while a sequence runs; when it gets
 * large the live stacks are copied into a fresh pool. Token masks are
 * gram_mask.c's business; this file gives it gm_step/gm_expand. */
#include <assert.h>
#include <stdlib.h>

#include "grammar/grammar_int.h"

/* ---- interned stacks ---- */

void gpool_init(gpool *p) { memset(p, 0, sizeof *p); }

void gpool_fini(gpool *p)
{
    free(p->nodes);
    free(p->table);
    free(p->mark);
    memset(p, 0, sizeof *p);
}

void gpool_reset(gpool *p)
{
    p->n = 0;
    for (uint32_t i = 0; i < p->table_cap; i++)
        p->table[i] = -1;
}

static uint32_t node_hash(int32_t state, int32_t parent)
{
    uint64_t k = (uint64_t)(uint32_t)state << 32 | (uint32_t)parent;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static void pool_grow_table(gpool *p)
{
    uint32_t cap = p->table_cap ? p->table_cap * 2 : 1024;
    int32_t *t = cv_xmalloc(cap * sizeof *t);
    for (uint32_t i = 0; i < cap; i++)
        t[i] = -1;
    for (int32_t i = 0; i < p->n; i++) {
        uint32_t h = node_hash(p->nodes[i].state, p->nodes[i].parent) & (cap - 1);
        while (t[h] >= 0)
            h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    free(p->table);
    p->table = t;
    p->table_cap = cap;
}

int32_t gpool_intern(gpool *p, int32_t state, int32_t parent)
{
    if ((uint32_t)(p->n + 1) * 2 > p->table_cap)
        pool_grow_table(p);
    uint32_t h = node_hash(state, parent) & (p->table_cap - 1);
    while (p->table[h] >= 0) {
        const gnode *nd = &p->nodes[p->table[h]];
        if (nd->state == state && nd->parent == parent)
            return p->table[h];
        h = (h + 1) & (p->table_cap - 1);
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 1024;
        p->nodes = cv_xrealloc(p->nodes, (size_t)p->cap * sizeof *p->nodes);
        p->mark = cv_xrealloc(p->mark, (size_t)p->cap * sizeof *p->mark);
    }
    int32_t depth = parent >= 0 ? p->nodes[parent].depth + 1 : 1;
    p->nodes[p->n] = (gnode){ state, parent, depth };
    p->mark[p->n] = 0;
    p->table[h] = p->n;
    return p->n++;
}

/* ---- sets and closure ---- */

void gset_free(gset *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

static void gset_push(gset *s, int32_t v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = cv_xrealloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = v;
}

static void expand_rec(const cv_grammar *g, gpool *p, int32_t top, gset *out)
{
    if (p->mark[top] == p->epoch)
        return;
    p->mark[top] = p->epoch;
    gnode nd = p->nodes[top];
    const gstate *st = &g->states[nd.state];
    if (st->n_byte || st->n_spec) {
        if (out->n < CV_MAX_GRAMMAR_STACKS)
            gset_push(out, top);
    }
    if (st->n_call && nd.depth < CV_MAX_GRAMMAR_STACK_DEPTH) {
        for (uint32_t k = 0; k < st->n_call; k++) {
            const gcall_edge *c = &g->calls[st->e_call + k];
            int32_t ret = gpool_intern(p, c->ret, nd.parent);
            int32_t callee = gpool_intern(p, g->rules[c->rule].start, ret);
            expand_rec(g, p, callee, out);
        }
    }
    if (st->accept) {
        if (nd.parent == GSTK_BOTTOM)
            out->can_end = true;
        else if (nd.parent == GSTK_SENTINEL)
            out->returned = true;
        else
            expand_rec(g, p, nd.parent, out);
    }
}

static void next_epoch(gpool *p)
{
    if (++p->epoch == 0) {
        memset(p->mark, 0, (size_t)p->cap * sizeof *p->mark);
        p->epoch = 1;
    }
}

void gm_expand(const cv_grammar *g, gpool *p, int32_t top, gset *out)
{
    next_epoch(p);
    expand_rec(g, p, top, out);
}

void gm_step(const cv_grammar *g, gpool *p, const gset *in, uint8_t c, gset *out)
{
    out->n = 0;
    out->can_end = out->returned = false;
    next_epoch(p);
    for (int32_t i = 0; i < in->n; i++) {
        int32_t top = in->v[i];
        int32_t s = p->nodes[top].state;
        int32_t t = gs_next_byte(g, s, c);
        if (t < 0)
            continue;
        expand_rec(g, p, gpool_intern(p, t, p->nodes[top].parent), out);
    }
}

void gm_step_special(const cv_grammar *g, gpool *p, const gset *in, int32_t special, gset *out)
{
    out->n = 0;
    out->can_end = out->returned = false;
    next_epoch(p);
    for (int32_t i = 0; i < in->n; i++) {
        int32_t top = in->v[i];
        const gstate *st = &g->states[p->nodes[top].state];
        for (uint32_t k = 0; k < st->n_spec; k++)
            if (g->specs[st->e_spec + k].special == special)
                expand_rec(g, p, gpool_intern(p, g->specs[st->e_spec + k].to, p->nodes[top].parent), out);
    }
}

/* ---- per-sequence state ---- */

struct cv_grammar_state {
    cv_grammar *g;
    const cv_grammar_vocab *v;
    gpool pool;
    gset cur, tmp;
    bool done;
    /* mask scratch */
    gset parent_set;
    gset *depth_sets;
    int n_depth_sets;
};

/* The mask code lives in gram_mask.c but needs the state's insides. */
int gm_state_mask(cv_grammar_state *s, uint64_t *allowed, cv_err *err);
void gm_state_internals(cv_grammar_state *s, cv_grammar **g, const cv_grammar_vocab **v, gpool **pool, gset **cur,
                        gset **parent_set, gset **depth_sets, int *n_depth_sets, bool **done);

void gm_state_internals(cv_grammar_state *s, cv_grammar **g, const cv_grammar_vocab **v, gpool **pool, gset **cur,
                        gset **parent_set, gset **depth_sets, int *n_depth_sets, bool **done)
{
    *g = s->g;
    *v = s->v;
    *pool = &s->pool;
    *cur = &s->cur;
    *parent_set = &s->parent_set;
    if (!s->depth_sets) {
        s->n_depth_sets = CV_MAX_GRAMMAR_TOKEN_BYTES + 2;
        s->depth_sets = cv_xcalloc((size_t)s->n_depth_sets, sizeof *s->depth_sets);
    }
    *depth_sets = s->depth_sets;
    *n_depth_sets = s->n_depth_sets;
    *done = &s->done;
}

int cv_grammar_state_create(cv_grammar *g, const cv_grammar_vocab *v, cv_grammar_state **out, cv_err *err)
{
    *out = NULL;
    if (v) {
        int rc = gm_bind_vocab(g, v, err);
        if (rc)
            return rc;
    }
    cv_grammar_state *s = cv_xcalloc(1, sizeof *s);
    s->g = g;
    s->v = v;
    gpool_init(&s->pool);
    int32_t root = gpool_intern(&s->pool, g->rules[g->root].start, GSTK_BOTTOM);
    gm_expand(g, &s->pool, root, &s->cur);
    *out = s;
    return 0;
}

void cv_grammar_state_destroy(cv_grammar_state *s)
{
    if (!s)
        return;
    gpool_fini(&s->pool);
    gset_free(&s->cur);
    gset_free(&s->tmp);
    gset_free(&s->parent_set);
    for (int i = 0; i < s->n_depth_sets; i++)
        gset_free(&s->depth_sets[i]);
    free(s->depth_sets);
    free(s);
}

/* Copies the stacks of set (nodes of src) into dst, returning the new tops. */
static int32_t copy_stack(gpool *dst, const gpool *src, int32_t top)
{
    if (top < 0)
        return top;
    int32_t parent = copy_stack(dst, src, src->nodes[top].parent);
    return gpool_intern(dst, src->nodes[top].state, parent);
}

int cv_grammar_state_clone(const cv_grammar_state *s, cv_grammar_state **out, cv_err *err)
{
    CV_UNUSED(err);
    cv_grammar_state *c = cv_xcalloc(1, sizeof *c);
    c->g = s->g;
    c->v = s->v;
    c->done = s->done;
    gpool_init(&c->pool);
    for (int32_t i = 0; i < s->cur.n; i++)
        gset_push(&c->cur, copy_stack(&c->pool, &s->pool, s->cur.v[i]));
    c->cur.can_end = s->cur.can_end;
    *out = c;
    return 0;
}

/* Keeps the pool proportional to the live stacks: sequences run for
 * thousands of tokens and mask computations intern scratch nodes. */
static void maybe_compact(cv_grammar_state *s)
{
    if (s->pool.n < 65536)
        return;
    gpool fresh;
    gpool_init(&fresh);
    for (int32_t i = 0; i < s->cur.n; i++)
        s->cur.v[i] = copy_stack(&fresh, &s->pool, s->cur.v[i]);
    gpool_fini(&s->pool);
    s->pool = fresh;
}

static int feed(cv_grammar_state *s, const uint8_t *p, size_t n)
{
    gset *a = &s->cur, *b = &s->tmp;
    gset save = *a;
    /* work on copies so that a failure leaves the state unchanged */
    gset x = { 0 }, y = { 0 };
    x.v = cv_xmalloc((size_t)(save.n ? save.n : 1) * sizeof *x.v);
    if (save.n)
        memcpy(x.v, save.v, (size_t)save.n * sizeof *x.v);
    x.n = x.cap = save.n;
    x.can_end = save.can_end;
    for (size_t i = 0; i < n; i++) {
        gm_step(s->g, &s->pool, &x, p[i], &y);
        gset t = x;
        x = y;
        y = t;
        if (x.n == 0 && !(i + 1 == n && x.can_end)) {
            gset_free(&x);
            gset_free(&y);
            return CV_EINVAL;
        }
    }
    gset_free(&y);
    free(a->v);
    *a = x;
    (void)b;
    return 0;
}

int cv_grammar_state_accept_bytes(cv_grammar_state *s, const char *p, size_t n, cv_err *err)
{
    if (s->done)
        return cv_err_set(err, CV_EINVAL, "grammar: the output is already complete; no more text is allowed");
    if (n == 0)
        return 0;
    if (feed(s, (const uint8_t *)p, n))
        return cv_err_set(err, CV_EINVAL, "grammar: %zu byte(s) starting with '%.*s' are not a valid continuation",
                          n, (int)CV_MIN(n, 40), p);
    maybe_compact(s);
    return 0;
}

static int special_index(const cv_grammar *g, const char *text)
{
    for (int i = 0; i < g->n_specials; i++)
        if (!strcmp(g->specials[i], text))
            return i;
    return -1;
}

static int accept_special_idx(cv_grammar_state *s, int idx)
{
    gset y = { 0 };
    gm_step_special(s->g, &s->pool, &s->cur, idx, &y);
    if (y.n == 0 && !y.can_end) {
        gset_free(&y);
        return CV_EINVAL;
    }
    gset_free(&s->cur);
    s->cur = y;
    return 0;
}

int cv_grammar_state_accept_special(cv_grammar_state *s, const char *text, cv_err *err)
{
    int idx = special_index(s->g, text);
    if (s->done || idx < 0 || accept_special_idx(s, idx))
        return cv_err_set(err, CV_EINVAL, "grammar: special token '%s' is not allowed here", text);
    return 0;
}

static bool is_eog(const cv_grammar_vocab *v, int32_t tok)
{
    return (v->flags[tok] & CV_GRAMMAR_TOK_EOG) != 0;
}

int cv_grammar_state_accept(cv_grammar_state *s, int32_t token, cv_err *err)
{
    const cv_grammar_vocab *v = s->v;
    if (!v)
        return cv_err_set(err, CV_EINVAL, "grammar: state has no vocabulary; use accept_bytes");
    if (token < 0 || token >= v->n_vocab)
        return cv_err_set(err, CV_EINVAL, "grammar: token %d out of range [0, %d)", token, v->n_vocab);
    if (s->done)
        return cv_err_set(err, CV_EINVAL, "grammar: token %d after the end of the output", token);
    if (is_eog(v, token)) {
        if (!s->cur.can_end)
            return cv_err_set(err, CV_EINVAL, "grammar: end-of-generation token %d before the output is complete",
                              token);
        s->done = true;
        s->cur.n = 0;
        return 0;
    }
    if (v->flags[token] & CV_GRAMMAR_TOK_SPECIAL) {
        for (int i = 0; i < s->g->n_specials; i++)
            if (s->g->special_tok && s->g->special_tok[i] == token && accept_special_idx(s, i) == 0)
                return 0;
        return cv_err_set(err, CV_EINVAL, "grammar: special token %d is not allowed here", token);
    }
    cv_str piece = cv_grammar_vocab_piece(v, token);
    if (piece.len == 0)
        return cv_err_set(err, CV_EINVAL, "grammar: token %d has no bytes and cannot advance the grammar", token);
    if (feed(s, (const uint8_t *)piece.ptr, piece.len))
        return cv_err_set(err, CV_EINVAL, "grammar: token %d ('%.*s') is not allowed here", token,
                          (int)CV_MIN(piece.len, 40), piece.ptr);
    maybe_compact(s);
    return 0;
}

bool cv_grammar_state_allows(cv_grammar_state *s, int32_t token)
{
    const cv_grammar_vocab *v = s->v;
    if (!v || token < 0 || token >= v->n_vocab || s->done)
        return false;
    if (is_eog(v, token))
        return s->cur.can_end;
    if (v->flags[token] & CV_GRAMMAR_TOK_SPECIAL) {
        for (int i = 0; i < s->g->n_specials; i++) {
            if (!s->g->special_tok || s->g->special_tok[i] != token)
                continue;
            gset y = { 0 };
            gm_step_special(s->g, &s->pool, &s->cur, i, &y);
            bool ok = y.n > 0 || y.can_end;
            gset_free(&y);
            if (ok)
                return true;
        }
        return false;
    }
    cv_str piece = cv_grammar_vocab_piece(v, token);
    if (piece.len == 0)
        return false;
    gset x = { 0 }, y = { 0 };
    const gset *in = &s->cur;
    bool ok = true;
    for (size_t i = 0; i < piece.len && ok; i++) {
        gm_step(s->g, &s->pool, in, (uint8_t)piece.ptr[i], &y);
        gset t = x;
        x = y;
        y = t;
        in = &x;
        ok = x.n > 0 || (i + 1 == piece.len && x.can_end);
    }
    gset_free(&x);
    gset_free(&y);
    return ok;
}

bool cv_grammar_state_can_end(const cv_grammar_state *s) { return !s->done && s->cur.can_end; }

bool cv_grammar_state_done(const cv_grammar_state *s) { return s->done || (s->cur.n == 0 && s->cur.can_end); }

int cv_grammar_state_mask(cv_grammar_state *s, uint64_t *allowed, cv_err *err)
{
    if (!s->v)
        return cv_err_set(err, CV_EINVAL, "grammar: state has no vocabulary; masks need one");
    return gm_state_mask(s, allowed, err);
}

/* ---- finishing within a budget ---- */

static int32_t stack_dist(const cv_grammar *g, const gpool *p, int32_t top)
{
    int64_t d = 0;
    for (int32_t n = top; n >= 0; n = p->nodes[n].parent)
        d += g->dist[p->nodes[n].state];
    return (int32_t)CV_MIN(d, INT32_MAX / 4);
}

static int32_t set_dist(const cv_grammar *g, const gpool *p, const gset *s)
{
    int32_t best = s->can_end ? 0 : INT32_MAX / 4;
    for (int32_t i = 0; i < s->n; i++)
        best = CV_MIN(best, stack_dist(g, p, s->v[i]));
    return best;
}

int32_t cv_grammar_state_min_bytes(cv_grammar_state *s)
{
    if (s->done)
        return 0;
    return set_dist(s->g, &s->pool, &s->cur);
}

/* Upper bound on the completion length after piece when it is read by the
 * top frame's automaton alone (no call, no return); -1 when it is not. */
static int32_t fast_dist(const cv_grammar *g, const gpool *p, const gset *cur, cv_str piece)
{
    int32_t best = -1;
    for (int32_t i = 0; i < cur->n; i++) {
        int32_t st = p->nodes[cur->v[i]].state;
        for (size_t k = 0; k < piece.len && st >= 0; k++)
            st = gs_next_byte(g, st, (uint8_t)piece.ptr[k]);
        if (st < 0)
            continue;
        int32_t d = g->dist[st];
        int32_t parent = p->nodes[cur->v[i]].parent;
        if (parent >= 0)
            d = (int32_t)CV_MIN((int64_t)d + stack_dist(g, p, parent), INT32_MAX / 4);
        if (best < 0 || d < best)
            best = d;
    }
    return best;
}

int32_t cv_grammar_state_min_bytes_after(cv_grammar_state *s, int32_t t)
{
    const cv_grammar_vocab *v = s->v;
    if (!v || t < 0 || t >= v->n_vocab || s->done)
        return -1;
    if (is_eog(v, t))
        return s->cur.can_end ? 0 : -1;
    gset x = { 0 }, y = { 0 };
    int32_t d = -1;
    if (v->flags[t] & CV_GRAMMAR_TOK_SPECIAL) {
        for (int i = 0; i < s->g->n_specials; i++) {
            if (!s->g->special_tok || s->g->special_tok[i] != t)
                continue;
            gm_step_special(s->g, &s->pool, &s->cur, i, &x);
            if (x.n > 0 || x.can_end) {
                int32_t e = set_dist(s->g, &s->pool, &x);
                d = d < 0 ? e : CV_MIN(d, e);
            }
        }
    } else {
        cv_str piece = cv_grammar_vocab_piece(v, t);
        const gset *in = &s->cur;
        bool ok = piece.len > 0;
        for (size_t i = 0; i < piece.len && ok; i++) {
            gm_step(s->g, &s->pool, in, (uint8_t)piece.ptr[i], &y);
            gset tmp = x;
            x = y;
            y = tmp;
            in = &x;
            ok = x.n > 0 || (i + 1 == piece.len && x.can_end);
        }
        if (ok)
            d = set_dist(s->g, &s->pool, &x);
    }
    gset_free(&x);
    gset_free(&y);
    return d;
}

int cv_grammar_state_mask_budget(cv_grammar_state *s, uint64_t *allowed, int32_t max_bytes, cv_err *err)
{
    const cv_grammar_vocab *v = s->v;
    if (!v)
        return cv_err_set(err, CV_EINVAL, "grammar: state has no vocabulary; masks need one");
    gset x = { 0 }, y = { 0 };
    for (int32_t t = 0; t < v->n_vocab; t++) {
        if (!(allowed[t >> 6] >> (t & 63) & 1))
            continue;
        bool keep = false;
        if (is_eog(v, t)) {
            keep = true;
        } else if (v->flags[t] & CV_GRAMMAR_TOK_SPECIAL) {
            for (int i = 0; i < s->g->n_specials && !keep; i++) {
                if (!s->g->special_tok || s->g->special_tok[i] != t)
                    continue;
                gm_step_special(s->g, &s->pool, &s->cur, i, &x);
                keep = (x.n > 0 || x.can_end) && set_dist(s->g, &s->pool, &x) <= max_bytes;
            }
        } else {
            cv_str piece = cv_grammar_vocab_piece(v, t);
            int32_t fd = fast_dist(s->g, &s->pool, &s->cur, piece);
            if (fd >= 0 && fd <= max_bytes) {
                keep = true;
            } else {
                const gset *in = &s->cur;
                bool ok = piece.len > 0;
                for (size_t i = 0; i < piece.len && ok; i++) {
                    gm_step(s->g, &s->pool, in, (uint8_t)piece.ptr[i], &y);
                    gset tmp = x;
                    x = y;
                    y = tmp;
                    in = &x;
                    ok = x.n > 0 || (i + 1 == piece.len && x.can_end);
                }
                keep = ok && set_dist(s->g, &s->pool, &x) <= max_bytes;
            }
        }
        if (!keep)
            allowed[t >> 6] &= ~(1ull << (t & 63));
    }
    gset_free(&x);
    gset_free(&y);
    return 0;
}
