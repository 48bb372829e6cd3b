/* gram_build.c — turns rule bodies (gx expressions) into the automata of a
 * cv_grammar. Each body becomes a Thompson NFA over three kinds of labels
 * (byte ranges, calls to rules, special tokens), then a DFA by subset
 * construction, appended to the grammar's one state array. Afterwards the
 * whole pushdown automaton is checked and trimmed: rules that can derive no
 * finite string and states that cannot reach an accepting state lose their
 * incoming edges, so every configuration the matcher can reach can still be
 * completed (the matcher relies on this), and left recursion (a rule that
 * can call itself before reading a byte) is rejected because it would make
 * the matcher's closure infinite. Limits (base/limits.h) bound every
 * automaton so a hostile schema fails fast instead of compiling for long. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "grammar/grammar_int.h"

/* ---- expressions ---- */

void gb_init(gbuild *b, cv_buf *warnings)
{
    memset(b, 0, sizeof *b);
    b->warnings = warnings;
}

void gb_fini(gbuild *b)
{
    for (int i = 0; i < b->n_rules; i++)
        free(b->rules[i].name);
    free(b->rules);
    for (int i = 0; i < b->n_specials; i++)
        free(b->specials[i]);
    free(b->specials);
    cv_arena_reset(&b->arena);
    memset(b, 0, sizeof *b);
}

void gb_warn(gbuild *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (b->warnings) {
        cv_buf_vprintf(b->warnings, fmt, ap);
        cv_buf_putc(b->warnings, '\n');
    } else {
        char line[512];
        vsnprintf(line, sizeof line, fmt, ap);
        cv_warn("grammar: %s", line);
    }
    va_end(ap);
    b->n_warnings++;
}

int gb_rule_new(gbuild *b, const char *name)
{
    if (b->n_rules == b->cap_rules) {
        b->cap_rules = b->cap_rules ? b->cap_rules * 2 : 16;
        b->rules = cv_xrealloc(b->rules, (size_t)b->cap_rules * sizeof *b->rules);
    }
    b->rules[b->n_rules].name = cv_xstrdup(name);
    b->rules[b->n_rules].body = NULL;
    return b->n_rules++;
}

void gb_rule_set(gbuild *b, int rule, gx *body)
{
    assert(rule >= 0 && rule < b->n_rules);
    b->rules[rule].body = body;
}

static gx *gx_new(gbuild *b, gx_kind k)
{
    gx *x = cv_arena_alloc(&b->arena, sizeof *x);
    x->kind = k;
    return x;
}

gx *gx_empty(gbuild *b) { return gx_new(b, GX_EMPTY); }
gx *gx_none(gbuild *b) { return gx_new(b, GX_NONE); }

gx *gx_lit(gbuild *b, const char *s, size_t len)
{
    if (len == 0)
        return gx_empty(b);
    gx *x = gx_new(b, GX_LIT);
    x->lit = cv_arena_strndup(&b->arena, s, len);
    x->len = len;
    return x;
}

gx *gx_litz(gbuild *b, const char *z) { return gx_lit(b, z, strlen(z)); }

gx *gx_byteset(gbuild *b, const uint64_t bits[4])
{
    gx *x = gx_new(b, GX_BYTES);
    memcpy(x->bits, bits, sizeof x->bits);
    return x;
}

gx *gx_byterange(gbuild *b, uint8_t lo, uint8_t hi)
{
    uint64_t bits[4] = { 0 };
    for (int c = lo; c <= hi; c++)
        bits[c >> 6] |= 1ull << (c & 63);
    return gx_byteset(b, bits);
}

static int cmp_u32pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0;
}

gx *gx_cps(gbuild *b, const uint32_t *ranges, int n_pairs)
{
    uint32_t *r = cv_arena_alloc(&b->arena, (size_t)(n_pairs ? n_pairs : 1) * 2 * sizeof *r);
    int n = 0;
    for (int i = 0; i < n_pairs; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        if (hi > 0x10FFFF)
            hi = 0x10FFFF;
        if (lo > hi)
            continue;
        r[2 * n] = lo;
        r[2 * n + 1] = hi;
        n++;
    }
    if (n > 1)
        qsort(r, (size_t)n, 2 * sizeof *r, cmp_u32pair);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1])
                r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    if (m == 0)
        return gx_none(b);
    gx *x = gx_new(b, GX_CPS);
    x->ranges = r;
    x->n = m;
    return x;
}

static gx *gx_list_node(gbuild *b, gx_kind k, int n, gx **kids)
{
    gx *x = gx_new(b, k);
    x->kids = cv_arena_alloc(&b->arena, (size_t)(n ? n : 1) * sizeof *kids);
    if (n)
        memcpy(x->kids, kids, (size_t)n * sizeof *kids);
    x->n = n;
    return x;
}

gx *gx_seq(gbuild *b, int n, gx **kids)
{
    if (n == 0)
        return gx_empty(b);
    if (n == 1)
        return kids[0];
    return gx_list_node(b, GX_SEQ, n, kids);
}

gx *gx_alt(gbuild *b, int n, gx **kids)
{
    if (n == 0)
        return gx_none(b);
    if (n == 1)
        return kids[0];
    return gx_list_node(b, GX_ALT, n, kids);
}

gx *gx_seq2(gbuild *b, gx *x, gx *y) { gx *k[2] = { x, y }; return gx_seq(b, 2, k); }
gx *gx_seq3(gbuild *b, gx *x, gx *y, gx *z) { gx *k[3] = { x, y, z }; return gx_seq(b, 3, k); }
gx *gx_alt2(gbuild *b, gx *x, gx *y) { gx *k[2] = { x, y }; return gx_alt(b, 2, k); }

gx *gx_rep(gbuild *b, gx *x, int min, int max)
{
    if (max == 0)
        return gx_empty(b);
    if (min == 1 && max == 1)
        return x;
    gx *r = gx_new(b, GX_REP);
    r->kids = cv_arena_alloc(&b->arena, sizeof *r->kids);
    r->kids[0] = x;
    r->n = 1;
    r->min = min;
    r->max = max;
    return r;
}

gx *gx_opt(gbuild *b, gx *x) { return gx_rep(b, x, 0, 1); }

gx *gx_call(gbuild *b, int rule)
{
    gx *x = gx_new(b, GX_CALL);
    x->rule = rule;
    return x;
}

gx *gx_special(gbuild *b, const char *z)
{
    gx *x = gx_new(b, GX_SPECIAL);
    x->lit = cv_arena_strndup(&b->arena, z, strlen(z));
    x->len = strlen(z);
    return x;
}

gx *gx_until(gbuild *b, const char *s, size_t len)
{
    gx *x = gx_new(b, GX_UNTIL);
    x->lit = cv_arena_strndup(&b->arena, s, len);
    x->len = len;
    return x;
}

gx *gx_members(gbuild *b, int n, gx **kids, const bool *required, gx *sep)
{
    gx *x = gx_list_node(b, GX_MEMBERS, n, kids);
    x->required = cv_arena_alloc(&b->arena, (size_t)(n ? n : 1) * sizeof(bool));
    if (n)
        memcpy(x->required, required, (size_t)n * sizeof(bool));
    x->sep = sep;
    return x;
}

void gxl_push(gbuild *b, gx_list *l, gx *x)
{
    CV_UNUSED(b);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = cv_xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n++] = x;
}

/* ---- Thompson NFA ---- */

enum { NE_EPS, NE_BYTE, NE_CALL, NE_SPEC };

typedef struct nedge {
    uint8_t type, lo, hi;
    int32_t arg, to, next;
} nedge;

typedef struct nfa {
    int32_t *first; /* per state: first edge or -1 */
    int32_t n, cap;
    nedge *e;
    int32_t ne, cap_e;
    bool over;      /* CV_MAX_GRAMMAR_NFA_STATES exceeded */
} nfa;

static int32_t nf_state(nfa *f)
{
    if (f->n >= CV_MAX_GRAMMAR_NFA_STATES) {
        f->over = true;
        return 0;
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 256;
        f->first = cv_xrealloc(f->first, (size_t)f->cap * sizeof *f->first);
    }
    f->first[f->n] = -1;
    return f->n++;
}

static void nf_edge(nfa *f, int32_t from, int type, uint8_t lo, uint8_t hi, int32_t arg, int32_t to)
{
    if (f->over)
        return;
    if (f->ne == f->cap_e) {
        f->cap_e = f->cap_e ? f->cap_e * 2 : 512;
        f->e = cv_xrealloc(f->e, (size_t)f->cap_e * sizeof *f->e);
    }
    f->e[f->ne] = (nedge){ (uint8_t)type, lo, hi, arg, to, f->first[from] };
    f->first[from] = f->ne++;
}

static int intern_special(gbuild *b, const char *z)
{
    for (int i = 0; i < b->n_specials; i++)
        if (!strcmp(b->specials[i], z))
            return i;
    if (b->n_specials == b->cap_specials) {
        b->cap_specials = b->cap_specials ? b->cap_specials * 2 : 4;
        b->specials = cv_xrealloc(b->specials, (size_t)b->cap_specials * sizeof *b->specials);
    }
    b->specials[b->n_specials] = cv_xstrdup(z);
    return b->n_specials++;
}

/* UTF-8 encoding of the code points [lo, hi] as sequences of byte ranges,
 * each sequence one path in -> out. Splits the range where the encoded
 * length changes and where continuation bytes stop being "any". */
static void nf_utf8_range(nfa *f, uint32_t lo, uint32_t hi, int32_t in, int32_t out);

static void nf_seq_ranges(nfa *f, const uint8_t *los, const uint8_t *his, int n, int32_t in, int32_t out)
{
    int32_t s = in;
    for (int i = 0; i < n; i++) {
        int32_t t = i == n - 1 ? out : nf_state(f);
        nf_edge(f, s, NE_BYTE, los[i], his[i], 0, t);
        s = t;
    }
}

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }
static uint32_t utf8_max(int len) { return len == 1 ? 0x7F : len == 2 ? 0x7FF : len == 3 ? 0xFFFF : 0x10FFFF; }

static void nf_utf8_range(nfa *f, uint32_t lo, uint32_t hi, int32_t in, int32_t out)
{
    if (lo > hi || f->over)
        return;
    /* surrogates are not encodable */
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800)
            nf_utf8_range(f, lo, 0xD7FF, in, out);
        if (hi > 0xDFFF)
            nf_utf8_range(f, 0xE000, hi, in, out);
        return;
    }
    int n = utf8_len(lo);
    if (utf8_len(hi) != n) {
        nf_utf8_range(f, lo, utf8_max(n), in, out);
        nf_utf8_range(f, utf8_max(n) + 1, hi, in, out);
        return;
    }
    if (n == 1) {
        nf_edge(f, in, NE_BYTE, (uint8_t)lo, (uint8_t)hi, 0, out);
        return;
    }
    /* split so that every trailing continuation byte spans 80..BF or the
     * range shares all leading bytes */
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                nf_utf8_range(f, lo, lo | m, in, out);
                nf_utf8_range(f, (lo | m) + 1, hi, in, out);
                return;
            }
            if ((hi & m) != m) {
                nf_utf8_range(f, lo, (hi & ~m) - 1, in, out);
                nf_utf8_range(f, hi & ~m, hi, in, out);
                return;
            }
        }
    }
    char a[4], z[4];
    cv_utf8_encode(lo, a);
    cv_utf8_encode(hi, z);
    uint8_t los[4], his[4];
    for (int i = 0; i < n; i++) {
        los[i] = (uint8_t)a[i];
        his[i] = (uint8_t)z[i];
    }
    nf_seq_ranges(f, los, his, n, in, out);
}

static void nf_build(gbuild *b, nfa *f, const gx *x, int32_t in, int32_t out)
{
    if (f->over)
        return;
    switch (x->kind) {
    case GX_EMPTY:
        nf_edge(f, in, NE_EPS, 0, 0, 0, out);
        break;
    case GX_NONE:
        break;
    case GX_LIT: {
        int32_t s = in;
        for (size_t i = 0; i < x->len; i++) {
            int32_t t = i + 1 == x->len ? out : nf_state(f);
            uint8_t c = (uint8_t)x->lit[i];
            nf_edge(f, s, NE_BYTE, c, c, 0, t);
            s = t;
        }
        break;
    }
    case GX_BYTES:
        for (int c = 0; c < 256;) {
            if (!(x->bits[c >> 6] >> (c & 63) & 1)) {
                c++;
                continue;
            }
            int lo = c;
            while (c < 256 && (x->bits[c >> 6] >> (c & 63) & 1))
                c++;
            nf_edge(f, in, NE_BYTE, (uint8_t)lo, (uint8_t)(c - 1), 0, out);
        }
        break;
    case GX_CPS:
        for (int i = 0; i < x->n; i++)
            nf_utf8_range(f, x->ranges[2 * i], x->ranges[2 * i + 1], in, out);
        break;
    case GX_SEQ: {
        int32_t s = in;
        for (int i = 0; i < x->n; i++) {
            int32_t t = i == x->n - 1 ? out : nf_state(f);
            nf_build(b, f, x->kids[i], s, t);
            s = t;
        }
        break;
    }
    case GX_ALT:
        for (int i = 0; i < x->n; i++) {
            /* fresh entry and exit states keep one alternative's loops from
             * joining another's */
            int32_t s = nf_state(f), t = nf_state(f);
            nf_edge(f, in, NE_EPS, 0, 0, 0, s);
            nf_build(b, f, x->kids[i], s, t);
            nf_edge(f, t, NE_EPS, 0, 0, 0, out);
        }
        break;
    case GX_REP: {
        int32_t s = in;
        for (int i = 0; i < x->min && !f->over; i++) {
            int32_t t = nf_state(f);
            nf_build(b, f, x->kids[0], s, t);
            s = t;
        }
        if (x->max < 0) {
            int32_t m = nf_state(f), t = nf_state(f);
            nf_edge(f, s, NE_EPS, 0, 0, 0, m);
            nf_build(b, f, x->kids[0], m, t);
            nf_edge(f, t, NE_EPS, 0, 0, 0, m);
            nf_edge(f, m, NE_EPS, 0, 0, 0, out);
        } else {
            for (int i = x->min; i < x->max && !f->over; i++) {
                nf_edge(f, s, NE_EPS, 0, 0, 0, out);
                int32_t t = nf_state(f);
                nf_build(b, f, x->kids[0], s, t);
                s = t;
            }
            nf_edge(f, s, NE_EPS, 0, 0, 0, out);
        }
        break;
    }
    case GX_CALL:
        nf_edge(f, in, NE_CALL, 0, 0, x->rule, out);
        break;
    case GX_SPECIAL: {
        int id = intern_special(b, x->lit);
        nf_edge(f, in, NE_SPEC, 0, 0, id, out);
        gx lit = { .kind = GX_LIT, .lit = x->lit, .len = x->len };
        if (x->len)
            nf_build(b, f, &lit, in, out);
        break;
    }
    case GX_UNTIL: {
        /* KMP automaton of "valid UTF-8 text without NUL that does not
         * contain lit" (lit is ASCII: checked by gx_until): state k has
         * matched k bytes of lit; reaching len is forbidden. */
        size_t L = x->len;
        if (L == 0) {
            nf_edge(f, in, NE_EPS, 0, 0, 0, out);
            break;
        }
        int32_t *fail = cv_xcalloc(L + 1, sizeof *fail);
        int32_t *st = cv_xcalloc(L, sizeof *st);
        const uint8_t *p = (const uint8_t *)x->lit;
        fail[0] = -1;
        for (size_t i = 1; i <= L; i++) {
            int32_t k = fail[i - 1];
            while (k >= 0 && p[k] != p[i - 1])
                k = fail[k];
            fail[i] = i == 1 ? 0 : k + 1;
        }
        for (size_t k = 0; k < L; k++)
            st[k] = nf_state(f);
        nf_edge(f, in, NE_EPS, 0, 0, 0, st[0]);
        for (size_t k = 0; k < L && !f->over; k++) {
            nf_edge(f, st[k], NE_EPS, 0, 0, 0, out);
            int32_t tgt[128];
            for (int c = 1; c < 128; c++) {
                int32_t j = (int32_t)k;
                while (j >= 0 && p[j] != c)
                    j = fail[j];
                tgt[c] = j + 1; /* j == -1 gives 0 */
            }
            for (int c = 1; c < 128;) {
                int lo = c;
                while (c < 128 && tgt[c] == tgt[lo])
                    c++;
                if ((size_t)tgt[lo] < L)
                    nf_edge(f, st[k], NE_BYTE, (uint8_t)lo, (uint8_t)(c - 1), 0, st[tgt[lo]]);
            }
            /* the stop text is ASCII: any other character restarts the match */
            nf_utf8_range(f, 0x80, 0x10FFFF, st[k], st[0]);
        }
        free(fail);
        free(st);
        break;
    }
    case GX_MEMBERS: {
        /* Entry B_j reads member j, A_j is after it, C_j reads the
         * separator then member j. Member j may follow member i (or the
         * start) when no required member lies strictly between them. */
        int n = x->n;
        int32_t *A = cv_xcalloc((size_t)n + 1, sizeof *A);
        int32_t *B = cv_xcalloc((size_t)n + 1, sizeof *B);
        int32_t *C = cv_xcalloc((size_t)n + 1, sizeof *C);
        for (int j = 0; j < n && !f->over; j++) {
            A[j] = nf_state(f);
            B[j] = nf_state(f);
            C[j] = nf_state(f);
            nf_build(b, f, x->kids[j], B[j], A[j]);
            nf_build(b, f, x->sep, C[j], B[j]);
        }
        bool any_req = false;
        for (int j = 0; j < n && !f->over; j++) {
            if (!any_req)
                nf_edge(f, in, NE_EPS, 0, 0, 0, B[j]);
            any_req |= x->required[j];
        }
        if (!any_req)
            nf_edge(f, in, NE_EPS, 0, 0, 0, out);
        for (int i = 0; i < n && !f->over; i++) {
            bool req_between = false;
            for (int j = i + 1; j < n; j++) {
                if (!req_between)
                    nf_edge(f, A[i], NE_EPS, 0, 0, 0, C[j]);
                req_between |= x->required[j];
            }
            if (!req_between)
                nf_edge(f, A[i], NE_EPS, 0, 0, 0, out);
        }
        free(A);
        free(B);
        free(C);
        break;
    }
    }
}

/* ---- subset construction ---- */

typedef struct dfa_build {
    nfa *f;
    int32_t final;
    /* DFA states: key = sorted important NFA states */
    int32_t **keys;
    int32_t *key_len;
    int32_t n, cap;
    int32_t *table; /* hash -> dfa index, -1 empty */
    uint32_t table_cap;
    /* closure scratch */
    uint32_t *mark;
    uint32_t epoch;
    int32_t *stack;
    int32_t *buf;
} dfa_build;

static uint32_t hash_ints(const int32_t *v, int32_t n)
{
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)v[i];
        h *= 16777619u;
        h ^= h >> 15;
    }
    return h;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Epsilon closure of seeds; returns the count of important states in buf. */
static int32_t closure(dfa_build *d, const int32_t *seeds, int32_t n_seeds)
{
    nfa *f = d->f;
    d->epoch++;
    int32_t sp = 0, n = 0;
    for (int32_t i = 0; i < n_seeds; i++) {
        if (d->mark[seeds[i]] != d->epoch) {
            d->mark[seeds[i]] = d->epoch;
            d->stack[sp++] = seeds[i];
        }
    }
    while (sp) {
        int32_t s = d->stack[--sp];
        bool important = s == d->final;
        for (int32_t e = f->first[s]; e >= 0; e = f->e[e].next) {
            if (f->e[e].type == NE_EPS) {
                int32_t t = f->e[e].to;
                if (d->mark[t] != d->epoch) {
                    d->mark[t] = d->epoch;
                    d->stack[sp++] = t;
                }
            } else {
                important = true;
            }
        }
        if (important)
            d->buf[n++] = s;
    }
    if (n > 1)
        qsort(d->buf, (size_t)n, sizeof *d->buf, cmp_i32);
    return n;
}

/* Index of the DFA state for buf[0..n) (adding it), or -1 for the empty set,
 * or -2 when the limit is reached. */
static int32_t dfa_intern(dfa_build *d, int32_t n)
{
    if (n == 0)
        return -1;
    if ((uint32_t)d->n * 2 >= d->table_cap) {
        uint32_t cap = d->table_cap ? d->table_cap * 2 : 1024;
        int32_t *t = cv_xmalloc(cap * sizeof *t);
        for (uint32_t i = 0; i < cap; i++)
            t[i] = -1;
        for (int32_t i = 0; i < d->n; i++) {
            uint32_t h = hash_ints(d->keys[i], d->key_len[i]) & (cap - 1);
            while (t[h] >= 0)
                h = (h + 1) & (cap - 1);
            t[h] = i;
        }
        free(d->table);
        d->table = t;
        d->table_cap = cap;
    }
    uint32_t h = hash_ints(d->buf, n) & (d->table_cap - 1);
    while (d->table[h] >= 0) {
        int32_t i = d->table[h];
        if (d->key_len[i] == n && !memcmp(d->keys[i], d->buf, (size_t)n * sizeof(int32_t)))
            return i;
        h = (h + 1) & (d->table_cap - 1);
    }
    if (d->n >= CV_MAX_GRAMMAR_RULE_STATES)
        return -2;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 64;
        d->keys = cv_xrealloc(d->keys, (size_t)d->cap * sizeof *d->keys);
        d->key_len = cv_xrealloc(d->key_len, (size_t)d->cap * sizeof *d->key_len);
    }
    d->keys[d->n] = cv_xmalloc((size_t)n * sizeof(int32_t));
    memcpy(d->keys[d->n], d->buf, (size_t)n * sizeof(int32_t));
    d->key_len[d->n] = n;
    d->table[h] = d->n;
    return d->n++;
}

/* Growable output arrays of the grammar under construction. */
typedef struct gout {
    cv_grammar *g;
    int32_t cap_states;
    uint32_t n_bytes, cap_bytes, n_calls, cap_calls, n_specs, cap_specs;
} gout;

static void out_byte(gout *o, uint8_t lo, uint8_t hi, int32_t to)
{
    if (o->n_bytes == o->cap_bytes) {
        o->cap_bytes = o->cap_bytes ? o->cap_bytes * 2 : 256;
        o->g->bytes = cv_xrealloc(o->g->bytes, o->cap_bytes * sizeof *o->g->bytes);
    }
    o->g->bytes[o->n_bytes++] = (gbyte_edge){ lo, hi, to };
}

static void out_call(gout *o, int32_t rule, int32_t ret)
{
    if (o->n_calls == o->cap_calls) {
        o->cap_calls = o->cap_calls ? o->cap_calls * 2 : 64;
        o->g->calls = cv_xrealloc(o->g->calls, o->cap_calls * sizeof *o->g->calls);
    }
    o->g->calls[o->n_calls++] = (gcall_edge){ rule, ret };
}

static void out_spec(gout *o, int32_t sp, int32_t to)
{
    if (o->n_specs == o->cap_specs) {
        o->cap_specs = o->cap_specs ? o->cap_specs * 2 : 8;
        o->g->specs = cv_xrealloc(o->g->specs, o->cap_specs * sizeof *o->g->specs);
    }
    o->g->specs[o->n_specs++] = (gspec_edge){ sp, to };
}

typedef struct lab { int32_t key, to; } lab; /* a labelled NFA edge: key = rule or special */

static int cmp_lab(const void *a, const void *b)
{
    const lab *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->to < y->to ? -1 : x->to > y->to;
}

/* Determinises rule r's NFA into states appended to o->g. */
static int determinise(gbuild *b, gout *o, int r, nfa *f, int32_t start, int32_t final, cv_err *err)
{
    cv_grammar *g = o->g;
    dfa_build d = { .f = f, .final = final };
    d.mark = cv_xcalloc((size_t)f->n, sizeof *d.mark);
    d.stack = cv_xmalloc((size_t)f->n * sizeof *d.stack);
    d.buf = cv_xmalloc((size_t)f->n * sizeof *d.buf);
    int32_t *seeds = cv_xmalloc((size_t)f->n * sizeof *seeds);
    int32_t *bounds = NULL, *members = NULL;
    lab *labs = NULL;
    size_t cap_lab = 0;
    int rc = 0;
    int32_t base = g->n_states;

    int32_t n0 = closure(&d, &start, 1);
    if (n0 == 0) {
        d.buf[0] = final; /* a body that matches nothing still needs a start */
        n0 = 1;
    }
    dfa_intern(&d, n0);
    for (int32_t i = 0; i < d.n; i++) {
        if (base + d.n > CV_MAX_GRAMMAR_STATES) {
            rc = cv_err_set(err, CV_ELIMIT, "grammar: more than %d automaton states (limit CV_MAX_GRAMMAR_STATES); "
                            "the schema is too large", CV_MAX_GRAMMAR_STATES);
            goto done;
        }
        if (base + i >= o->cap_states) {
            o->cap_states = o->cap_states ? o->cap_states * 2 : 256;
            g->states = cv_xrealloc(g->states, (size_t)o->cap_states * sizeof *g->states);
        }
        gstate *st = &g->states[base + i];
        memset(st, 0, sizeof *st);
        st->rule = r;
        int32_t *key = d.keys[i], klen = d.key_len[i];
        /* byte edges: cut 0..255 at every range boundary */
        int32_t nb = 0, n_lab = 0;
        bounds = cv_xrealloc(bounds, (size_t)(2 * f->ne + 2) * sizeof *bounds);
        for (int32_t k = 0; k < klen; k++) {
            int32_t s = key[k];
            if (s == final)
                st->accept = true;
            for (int32_t e = f->first[s]; e >= 0; e = f->e[e].next) {
                const nedge *ed = &f->e[e];
                if (ed->type == NE_BYTE) {
                    bounds[nb++] = ed->lo;
                    bounds[nb++] = ed->hi + 1;
                } else if (ed->type == NE_CALL || ed->type == NE_SPEC) {
                    if ((size_t)n_lab == cap_lab) {
                        cap_lab = cap_lab ? cap_lab * 2 : 16;
                        labs = cv_xrealloc(labs, cap_lab * sizeof *labs);
                    }
                    labs[n_lab++] = (lab){ ed->type == NE_CALL ? ed->arg : -1 - ed->arg, ed->to };
                }
            }
        }
        if (nb > 1)
            qsort(bounds, (size_t)nb, sizeof *bounds, cmp_i32);
        int32_t nu = 0;
        for (int32_t k = 0; k < nb; k++)
            if (nu == 0 || bounds[nu - 1] != bounds[k])
                bounds[nu++] = bounds[k];
        st->e_byte = o->n_bytes;
        for (int32_t k = 0; k + 1 < nu; k++) {
            int lo = bounds[k], hi = bounds[k + 1] - 1;
            int32_t ns = 0;
            for (int32_t m = 0; m < klen; m++)
                for (int32_t e = f->first[key[m]]; e >= 0; e = f->e[e].next)
                    if (f->e[e].type == NE_BYTE && f->e[e].lo <= lo && f->e[e].hi >= lo)
                        seeds[ns++] = f->e[e].to;
            if (!ns)
                continue;
            int32_t t = dfa_intern(&d, closure(&d, seeds, ns));
            if (t == -2) {
                rc = cv_err_set(err, CV_ELIMIT, "grammar: rule '%s' needs more than %d automaton states (limit "
                                "CV_MAX_GRAMMAR_RULE_STATES); simplify its pattern or length bounds",
                                b->rules[r].name, CV_MAX_GRAMMAR_RULE_STATES);
                goto done;
            }
            if (t < 0)
                continue;
            gbyte_edge *last = o->n_bytes > st->e_byte ? &g->bytes[o->n_bytes - 1] : NULL;
            if (last && last->to == base + t && last->hi + 1 == lo)
                last->hi = (uint8_t)hi;
            else
                out_byte(o, (uint8_t)lo, (uint8_t)hi, base + t);
        }
        st = &g->states[base + i]; /* out_* may not move states, but stay safe */
        st->n_byte = o->n_bytes - st->e_byte;
        /* calls and specials, grouped by label */
        if (n_lab > 1)
            qsort(labs, (size_t)n_lab, sizeof *labs, cmp_lab);
        st->e_call = o->n_calls;
        st->e_spec = o->n_specs;
        for (int32_t k = 0; k < n_lab;) {
            int32_t key_l = labs[k].key, ns = 0;
            while (k < n_lab && labs[k].key == key_l)
                seeds[ns++] = labs[k++].to;
            int32_t t = dfa_intern(&d, closure(&d, seeds, ns));
            if (t == -2) {
                rc = cv_err_set(err, CV_ELIMIT, "grammar: rule '%s' needs more than %d automaton states (limit "
                                "CV_MAX_GRAMMAR_RULE_STATES)", b->rules[r].name, CV_MAX_GRAMMAR_RULE_STATES);
                goto done;
            }
            if (t < 0)
                continue;
            if (key_l >= 0)
                out_call(o, key_l, base + t);
            else
                out_spec(o, -1 - key_l, base + t);
        }
        st->n_call = o->n_calls - st->e_call;
        st->n_spec = o->n_specs - st->e_spec;
        (void)members;
    }
    g->n_states = base + d.n;
    g->rules[r].start = base;
done:
    for (int32_t i = 0; i < d.n; i++)
        free(d.keys[i]);
    free(d.keys);
    free(d.key_len);
    free(d.table);
    free(d.mark);
    free(d.stack);
    free(d.buf);
    free(seeds);
    free(bounds);
    free(labs);
    return rc;
}

/* ---- checks and trimming of the whole pushdown automaton ---- */

static bool state_nullable_reach(const cv_grammar *g, int32_t s, uint8_t *seen, int32_t *stack)
{
    /* can s reach an accepting state of its rule through calls to nullable rules only? */
    int32_t sp = 0;
    stack[sp++] = s;
    seen[s] = 1;
    bool found = false;
    while (sp) {
        int32_t t = stack[--sp];
        if (g->states[t].accept) {
            found = true;
            break;
        }
        const gstate *st = &g->states[t];
        for (uint32_t k = 0; k < st->n_call; k++) {
            const gcall_edge *c = &g->calls[st->e_call + k];
            if (g->rules[c->rule].nullable && !seen[c->ret]) {
                seen[c->ret] = 1;
                stack[sp++] = c->ret;
            }
        }
    }
    return found;
}

static int check_left_recursion(const cv_grammar *g, cv_err *err)
{
    int n = g->n_rules;
    /* first[r] = rules r can call before reading a byte */
    uint8_t *adj = cv_xcalloc((size_t)n * (size_t)n, 1);
    uint8_t *seen = cv_xcalloc((size_t)g->n_states, 1);
    int32_t *stack = cv_xmalloc((size_t)g->n_states * sizeof *stack);
    int rc = 0;
    if ((size_t)n * (size_t)n > (64u << 20)) {
        /* too many rules for the matrix: rely on the matcher's depth limit */
        goto done;
    }
    for (int r = 0; r < n; r++) {
        memset(seen, 0, (size_t)g->n_states);
        int32_t sp = 0;
        stack[sp++] = g->rules[r].start;
        seen[g->rules[r].start] = 1;
        while (sp) {
            const gstate *st = &g->states[stack[--sp]];
            for (uint32_t k = 0; k < st->n_call; k++) {
                const gcall_edge *c = &g->calls[st->e_call + k];
                adj[(size_t)r * n + c->rule] = 1;
                if (g->rules[c->rule].nullable && !seen[c->ret]) {
                    seen[c->ret] = 1;
                    stack[sp++] = c->ret;
                }
            }
        }
    }
    /* cycle detection by DFS colouring */
    uint8_t *color = cv_xcalloc((size_t)n, 1);
    int32_t *it = cv_xcalloc((size_t)n, sizeof *it);
    int32_t *rs = cv_xmalloc((size_t)n * sizeof *rs);
    for (int r0 = 0; r0 < n && !rc; r0++) {
        if (color[r0])
            continue;
        int32_t sp = 0;
        rs[sp++] = r0;
        color[r0] = 1;
        it[r0] = 0;
        while (sp && !rc) {
            int32_t r = rs[sp - 1];
            if (it[r] >= n) {
                color[r] = 2;
                sp--;
                continue;
            }
            int32_t q = it[r]++;
            if (!adj[(size_t)r * n + q])
                continue;
            if (color[q] == 1) {
                rc = cv_err_set(err, CV_EINVAL, "grammar: rule '%s' is left-recursive (it can reach itself "
                                "before reading anything, e.g. a $ref cycle with nothing in between)",
                                g->rules[q].name);
            } else if (color[q] == 0) {
                color[q] = 1;
                it[q] = 0;
                rs[sp++] = q;
            }
        }
    }
    free(color);
    free(it);
    free(rs);
done:
    free(adj);
    free(seen);
    free(stack);
    return rc;
}

/* Marks states that can reach acceptance (given productive callees) and
 * drops every edge into a dead state or a rule that derives nothing. */
static void trim(cv_grammar *g)
{
    int32_t ns = g->n_states;
    uint8_t *live = cv_xcalloc((size_t)ns, 1);
    /* reverse edges: preds of t through bytes/specials, and through call returns */
    int32_t *cnt = cv_xcalloc((size_t)ns + 1, sizeof *cnt);
    int32_t *ccnt = cv_xcalloc((size_t)g->n_rules + 1, sizeof *ccnt);
    for (int32_t s = 0; s < ns; s++) {
        const gstate *st = &g->states[s];
        for (uint32_t k = 0; k < st->n_byte; k++)
            cnt[g->bytes[st->e_byte + k].to + 1]++;
        for (uint32_t k = 0; k < st->n_spec; k++)
            cnt[g->specs[st->e_spec + k].to + 1]++;
        for (uint32_t k = 0; k < st->n_call; k++) {
            cnt[g->calls[st->e_call + k].ret + 1]++;
            ccnt[g->calls[st->e_call + k].rule + 1]++;
        }
    }
    for (int32_t s = 0; s < ns; s++)
        cnt[s + 1] += cnt[s];
    for (int r = 0; r < g->n_rules; r++)
        ccnt[r + 1] += ccnt[r];
    int32_t *pred = cv_xmalloc((size_t)(cnt[ns] ? cnt[ns] : 1) * sizeof *pred);  /* pred state (call preds: -2-s) */
    int32_t *predc = cv_xmalloc((size_t)(cnt[ns] ? cnt[ns] : 1) * sizeof *predc); /* call rule or -1 */
    int32_t *callers = cv_xmalloc((size_t)(ccnt[g->n_rules] ? ccnt[g->n_rules] : 1) * sizeof *callers);
    int32_t *fill = cv_xcalloc((size_t)ns, sizeof *fill);
    int32_t *cfill = cv_xcalloc((size_t)g->n_rules, sizeof *cfill);
    for (int32_t s = 0; s < ns; s++) {
        const gstate *st = &g->states[s];
        for (uint32_t k = 0; k < st->n_byte; k++) {
            int32_t t = g->bytes[st->e_byte + k].to;
            pred[cnt[t] + fill[t]] = s;
            predc[cnt[t] + fill[t]++] = -1;
        }
        for (uint32_t k = 0; k < st->n_spec; k++) {
            int32_t t = g->specs[st->e_spec + k].to;
            pred[cnt[t] + fill[t]] = s;
            predc[cnt[t] + fill[t]++] = -1;
        }
        for (uint32_t k = 0; k < st->n_call; k++) {
            const gcall_edge *c = &g->calls[st->e_call + k];
            pred[cnt[c->ret] + fill[c->ret]] = s;
            predc[cnt[c->ret] + fill[c->ret]++] = c->rule;
            callers[ccnt[c->rule] + cfill[c->rule]++] = (int32_t)(st->e_call + k);
        }
    }
    /* call edge k belongs to some state: keep a map edge -> state */
    int32_t *call_owner = cv_xmalloc((size_t)(g->n_states ? 1 : 1) * sizeof *call_owner);
    uint32_t n_calls_total = 0;
    for (int32_t s = 0; s < ns; s++)
        n_calls_total = CV_MAX(n_calls_total, g->states[s].e_call + g->states[s].n_call);
    free(call_owner);
    call_owner = cv_xmalloc((size_t)(n_calls_total ? n_calls_total : 1) * sizeof *call_owner);
    for (int32_t s = 0; s < ns; s++)
        for (uint32_t k = 0; k < g->states[s].n_call; k++)
            call_owner[g->states[s].e_call + k] = s;

    int32_t *work = cv_xmalloc((size_t)ns * sizeof *work);
    int32_t wn = 0;
    for (int32_t s = 0; s < ns; s++)
        if (g->states[s].accept) {
            live[s] = 1;
            work[wn++] = s;
        }
    while (wn) {
        int32_t t = work[--wn];
        for (int32_t k = cnt[t]; k < cnt[t + 1]; k++) {
            int32_t s = pred[k], rule = predc[k];
            if (live[s])
                continue;
            if (rule >= 0 && !live[g->rules[rule].start])
                continue;
            live[s] = 1;
            work[wn++] = s;
        }
        /* t is a rule start: its callers whose return state is live become live */
        int r = g->states[t].rule;
        if (g->rules[r].start == t) {
            for (int32_t k = ccnt[r]; k < ccnt[r + 1]; k++) {
                int32_t e = callers[k];
                int32_t s = call_owner[e];
                if (!live[s] && live[g->calls[e].ret]) {
                    live[s] = 1;
                    work[wn++] = s;
                }
            }
        }
    }
    /* drop dead edges in place */
    for (int32_t s = 0; s < ns; s++) {
        gstate *st = &g->states[s];
        uint32_t w = 0;
        for (uint32_t k = 0; k < st->n_byte; k++)
            if (live[g->bytes[st->e_byte + k].to])
                g->bytes[st->e_byte + w++] = g->bytes[st->e_byte + k];
        st->n_byte = w;
        w = 0;
        for (uint32_t k = 0; k < st->n_spec; k++)
            if (live[g->specs[st->e_spec + k].to])
                g->specs[st->e_spec + w++] = g->specs[st->e_spec + k];
        st->n_spec = w;
        w = 0;
        for (uint32_t k = 0; k < st->n_call; k++) {
            gcall_edge c = g->calls[st->e_call + k];
            if (live[c.ret] && live[g->rules[c.rule].start])
                g->calls[st->e_call + w++] = c;
        }
        st->n_call = w;
    }
    /* a live start state stays; remember liveness of starts through accept of
     * a dead rule: mark non-productive starts by clearing their edges */
    for (int r = 0; r < g->n_rules; r++) {
        gstate *st = &g->states[g->rules[r].start];
        if (!live[g->rules[r].start]) {
            st->n_byte = st->n_call = st->n_spec = 0;
            st->accept = false;
        }
    }
    free(live);
    free(cnt);
    free(ccnt);
    free(pred);
    free(predc);
    free(callers);
    free(fill);
    free(cfill);
    free(call_owner);
    free(work);
}

/* Shortest completion lengths: dist[s] = bytes from s to its rule's end,
 * with a call costing the callee's own shortest length and a special token
 * its text's length: the grammar is compiled before it meets a vocabulary,
 * and one without that token spells the text (counting it as one would let
 * the max_tokens budget run out before the end). Relaxed to a fixed
 * point (recursion makes it circular); states of a rule are numbered in BFS
 * order from the start, so sweeping backwards converges in few passes. */
static void compute_dist(cv_grammar *g)
{
    const int32_t inf = INT32_MAX / 4;
    g->dist = cv_xmalloc((size_t)(g->n_states ? g->n_states : 1) * sizeof *g->dist);
    for (int32_t s = 0; s < g->n_states; s++)
        g->dist[s] = g->states[s].accept ? 0 : inf;
    bool changed = true;
    for (int pass = 0; changed && pass < 100000; pass++) {
        changed = false;
        for (int32_t s = g->n_states - 1; s >= 0; s--) {
            const gstate *st = &g->states[s];
            int32_t best = g->dist[s];
            for (uint32_t k = 0; k < st->n_byte; k++)
                best = CV_MIN(best, 1 + g->dist[g->bytes[st->e_byte + k].to]);
            for (uint32_t k = 0; k < st->n_spec; k++) {
                const gspec_edge *e = &g->specs[st->e_spec + k];
                int64_t v = (int64_t)strlen(g->specials[e->special]) + g->dist[e->to];
                if (v < best)
                    best = (int32_t)v;
            }
            for (uint32_t k = 0; k < st->n_call; k++) {
                const gcall_edge *c = &g->calls[st->e_call + k];
                int64_t v = (int64_t)g->dist[g->rules[c->rule].start] + g->dist[c->ret];
                if (v < best)
                    best = (int32_t)v;
            }
            if (best < g->dist[s]) {
                g->dist[s] = best;
                changed = true;
            }
        }
    }
}

static bool rule_productive(const cv_grammar *g, int r)
{
    const gstate *st = &g->states[g->rules[r].start];
    return st->accept || st->n_byte || st->n_call || st->n_spec;
}

int gb_compile(gbuild *b, int root, cv_grammar **out, cv_err *err)
{
    *out = NULL;
    if (b->n_rules > CV_MAX_GRAMMAR_RULES)
        return cv_err_set(err, CV_ELIMIT, "grammar: %d rules, limit CV_MAX_GRAMMAR_RULES = %d", b->n_rules,
                          CV_MAX_GRAMMAR_RULES);
    cv_grammar *g = cv_xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    g->n_rules = b->n_rules;
    g->rules = cv_xcalloc((size_t)(b->n_rules ? b->n_rules : 1), sizeof *g->rules);
    g->root = root;
    gout o = { .g = g };
    nfa f = { 0 };
    int rc = 0;
    for (int r = 0; r < b->n_rules; r++) {
        g->rules[r].name = cv_xstrdup(b->rules[r].name);
        f.n = 0;
        f.ne = 0;
        f.over = false;
        int32_t start = nf_state(&f), final = nf_state(&f);
        if (b->rules[r].body)
            nf_build(b, &f, b->rules[r].body, start, final);
        if (f.over) {
            rc = cv_err_set(err, CV_ELIMIT, "grammar: rule '%s' needs more than %d NFA states (limit "
                            "CV_MAX_GRAMMAR_NFA_STATES); reduce its length or repetition bounds",
                            b->rules[r].name, CV_MAX_GRAMMAR_NFA_STATES);
            goto fail;
        }
        rc = determinise(b, &o, r, &f, start, final, err);
        if (rc)
            goto fail;
    }
    /* specials travel with the grammar */
    g->n_specials = b->n_specials;
    g->specials = cv_xcalloc((size_t)(b->n_specials ? b->n_specials : 1), sizeof *g->specials);
    for (int i = 0; i < b->n_specials; i++)
        g->specials[i] = cv_xstrdup(b->specials[i]);

    /* nullable rules: fixpoint */
    {
        uint8_t *seen = cv_xcalloc((size_t)g->n_states + 1, 1);
        int32_t *stack = cv_xmalloc(((size_t)g->n_states + 1) * sizeof *stack);
        bool changed = true;
        while (changed) {
            changed = false;
            for (int r = 0; r < g->n_rules; r++) {
                if (g->rules[r].nullable)
                    continue;
                memset(seen, 0, (size_t)g->n_states);
                if (state_nullable_reach(g, g->rules[r].start, seen, stack)) {
                    g->rules[r].nullable = true;
                    changed = true;
                }
            }
        }
        free(seen);
        free(stack);
    }
    trim(g);
    if (!rule_productive(g, root)) {
        rc = cv_err_set(err, CV_EINVAL, "grammar: no finite document matches (rule '%s' can never end, e.g. a "
                        "required property that recurses forever, or false/empty enum)", g->rules[root].name);
        goto fail;
    }
    rc = check_left_recursion(g, err);
    if (rc)
        goto fail;
    compute_dist(g);
    g->cache = cv_xcalloc((size_t)g->n_states, sizeof *g->cache);
    free(f.first);
    free(f.e);
    *out = g;
    return 0;
fail:
    free(f.first);
    free(f.e);
    cv_grammar_destroy(g);
    return rc;
}

void cv_grammar_destroy(cv_grammar *g)
{
    if (!g)
        return;
    if (g->cache) {
        for (int32_t s = 0; s < g->n_states; s++)
            gcache_free(atomic_load(&g->cache[s]));
        free(g->cache);
    }
    for (int r = 0; r < g->n_rules; r++)
        free(g->rules[r].name);
    free(g->rules);
    for (int i = 0; i < g->n_specials; i++)
        free(g->specials[i]);
    free(g->specials);
    free(g->special_tok);
    free(g->states);
    free(g->dist);
    free(g->bytes);
    free(g->calls);
    free(g->specs);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void cv_grammar_get_info(const cv_grammar *g, cv_grammar_info *out)
{
    out->n_rules = g->n_rules;
    out->n_states = g->n_states;
    out->n_cached = atomic_load(&((cv_grammar *)g)->n_cached);
}

static void dump_byte(cv_buf *out, uint8_t c)
{
    if (c >= 0x21 && c < 0x7f && c != '\\' && c != '-' && c != ']')
        cv_buf_putc(out, (char)c);
    else
        cv_buf_printf(out, "\\x%02x", c);
}

void cv_grammar_dump(const cv_grammar *g, cv_buf *out)
{
    for (int r = 0; r < g->n_rules; r++) {
        cv_buf_printf(out, "rule %d %s%s (start %d)\n", r, g->rules[r].name, r == g->root ? " [root]" : "",
                      g->rules[r].start);
        int32_t end = r + 1 < g->n_rules ? g->rules[r + 1].start : g->n_states;
        for (int32_t s = g->rules[r].start; s < end; s++) {
            const gstate *st = &g->states[s];
            cv_buf_printf(out, "  %d%s:", s, st->accept ? "*" : "");
            for (uint32_t k = 0; k < st->n_byte; k++) {
                const gbyte_edge *e = &g->bytes[st->e_byte + k];
                cv_buf_puts(out, " [");
                dump_byte(out, e->lo);
                if (e->hi != e->lo) {
                    cv_buf_putc(out, '-');
                    dump_byte(out, e->hi);
                }
                cv_buf_printf(out, "]->%d", e->to);
            }
            for (uint32_t k = 0; k < st->n_call; k++)
                cv_buf_printf(out, " %s->%d", g->rules[g->calls[st->e_call + k].rule].name,
                              g->calls[st->e_call + k].ret);
            for (uint32_t k = 0; k < st->n_spec; k++)
                cv_buf_printf(out, " <%s>->%d", g->specials[g->specs[st->e_spec + k].special],
                              g->specs[st->e_spec + k].to);
            cv_buf_putc(out, '\n');
        }
    }
}
