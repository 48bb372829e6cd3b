/* grammar_int.h — the grammar layer's private structures, shared by its
 * files and its tests (never included by another layer).
 *
 * A grammar is a set of rules; each rule's body is a regular expression over
 * bytes, calls to rules and special-token literals, compiled to a
 * deterministic automaton (gram_build.c). Together they form a pushdown
 * automaton: a frame is a DFA state; a call pushes the callee's start state
 * and remembers where to return. All states of all rules live in one array,
 * so a stack is just a list of state ids. */
#ifndef CV_GRAMMAR_INT_H
#define CV_GRAMMAR_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "grammar/grammar.h"

/* ---- expressions (what compilers build, gram_build.c turns into automata) ---- */

typedef enum gx_kind {
    GX_EMPTY,   /* matches the empty string */
    GX_NONE,    /* matches nothing */
    GX_LIT,     /* bytes */
    GX_BYTES,   /* one byte from a 256-bit set */
    GX_CPS,     /* one code point from ranges, as UTF-8 */
    GX_SEQ,
    GX_ALT,
    GX_REP,     /* kid{min,max}, max < 0 = unbounded */
    GX_CALL,    /* rule */
    GX_SPECIAL, /* a special token named by its text (or the same bytes as text) */
    GX_UNTIL,   /* any bytes not containing lit */
    GX_MEMBERS, /* kids in order, any subsequence that keeps every required one, joined by sep */
} gx_kind;

typedef struct gx gx;
struct gx {
    gx_kind kind;
    int n;            /* kids / ranges count */
    gx **kids;
    const char *lit;  /* LIT, SPECIAL, UNTIL */
    size_t len;
    uint32_t *ranges; /* CPS: n pairs lo, hi (inclusive), sorted, disjoint */
    uint64_t bits[4]; /* BYTES */
    int min, max;     /* REP */
    int rule;         /* CALL */
    bool *required;   /* MEMBERS: per kid */
    gx *sep;          /* MEMBERS */
};

typedef struct gbuild {
    cv_arena arena;
    int n_rules, cap_rules;
    struct { char *name; gx *body; } *rules;
    cv_buf *warnings;  /* NULL: cv_warn */
    int n_warnings;
    char **specials;   /* texts of special-token literals, interned */
    int n_specials, cap_specials;
} gbuild;

void gb_init(gbuild *b, cv_buf *warnings);
void gb_fini(gbuild *b);
void gb_warn(gbuild *b, const char *fmt, ...) CV_PRINTF(2, 3);
int gb_rule_new(gbuild *b, const char *name);
void gb_rule_set(gbuild *b, int rule, gx *body);
/* Compiles every rule; root is the start symbol. Consumes nothing of b. */
int gb_compile(gbuild *b, int root, cv_grammar **out, cv_err *err);

gx *gx_empty(gbuild *b);
gx *gx_none(gbuild *b);
gx *gx_lit(gbuild *b, const char *s, size_t len);
gx *gx_litz(gbuild *b, const char *z);
gx *gx_byteset(gbuild *b, const uint64_t bits[4]);
gx *gx_byterange(gbuild *b, uint8_t lo, uint8_t hi);
gx *gx_cps(gbuild *b, const uint32_t *ranges, int n_pairs); /* normalises (sort, merge) */
gx *gx_seq(gbuild *b, int n, gx **kids);
gx *gx_alt(gbuild *b, int n, gx **kids);
gx *gx_seq2(gbuild *b, gx *x, gx *y);
gx *gx_seq3(gbuild *b, gx *x, gx *y, gx *z);
gx *gx_alt2(gbuild *b, gx *x, gx *y);
gx *gx_rep(gbuild *b, gx *x, int min, int max);
gx *gx_opt(gbuild *b, gx *x);
gx *gx_call(gbuild *b, int rule);
gx *gx_special(gbuild *b, const char *z);
gx *gx_until(gbuild *b, const char *s, size_t len);
gx *gx_members(gbuild *b, int n, gx **kids, const bool *required, gx *sep);

/* A list of gx under construction. */
typedef struct gx_list { gx **v; int n, cap; } gx_list;
void gxl_push(gbuild *b, gx_list *l, gx *x);

/* Regular-expression subset -> expression over code points (gram_regex.c).
 * json_escape: the code points are emitted as the inside of a JSON string
 * (quote, backslash and controls escaped). anchored: the whole string must
 * match (otherwise a JSON Schema "pattern": a match anywhere). */
int gx_regex(gbuild *b, const char *re, size_t len, bool json_escape, bool anchored, gx **out, cv_err *err);

/* JSON Schema -> expressions (gram_schema.c), used by the schema and the
 * tool-call front ends. One context per grammar; root is the document that
 * "#" references resolve against (set per tool). */
typedef struct gschema gschema;
gschema *gs_new(gbuild *b, cv_err *err);
void gs_free(gschema *c);
void gs_set_root(gschema *c, const json_t *root, const char *where);
/* A JSON value matching schema; NULL on error (the context holds it). */
gx *gs_value(gschema *c, const json_t *schema);
/* The raw text of a value as XML-style tool calls write it: strings bare,
 * everything else as JSON. */
gx *gs_value_raw(gschema *c, const json_t *schema, const char *terminator);
/* Whitespace allowed between JSON tokens. */
gx *gs_ws(gschema *c);
/* A JSON string literal for s (quotes included), as gx. */
gx *gs_json_string_lit(gschema *c, const char *s);
int gs_status(const gschema *c);

/* ---- compiled grammar ---- */

enum { GE_BYTE, GE_CALL, GE_SPECIAL };

typedef struct gstate {
    uint32_t e_byte, n_byte;  /* into g->bytes: sorted disjoint ranges */
    uint32_t e_call, n_call;  /* into g->calls */
    uint32_t e_spec, n_spec;  /* into g->specs */
    int32_t rule;
    bool accept;
} gstate;

typedef struct gbyte_edge { uint8_t lo, hi; int32_t to; } gbyte_edge;
typedef struct gcall_edge { int32_t rule; int32_t ret; } gcall_edge;
typedef struct gspec_edge { int32_t special; int32_t to; } gspec_edge;

/* Per-state token cache (gram_mask.c): tokens accepted without leaving the
 * state's rule, and a suffix trie of the tokens that leave it part-way and
 * must be checked against the caller's stack. */
typedef struct gsuffix_node {
    int32_t child;   /* first child, -1 none */
    int32_t sibling;
    uint32_t tok_at, n_tok; /* token ids ending here, in cache->toks */
    uint8_t byte;
} gsuffix_node;

typedef struct gcache {
    uint64_t *acc;        /* n_vocab bits */
    gsuffix_node *sfx;    /* node 0 is the root (no byte) */
    int32_t n_sfx;
    int32_t *toks;
    uint32_t n_toks;
} gcache;

struct cv_grammar {
    int n_rules;
    struct { char *name; int32_t start; bool nullable; } *rules;
    int root;
    int n_states;
    gstate *states;
    int32_t *dist;        /* [n_states] fewest bytes from the state to its rule's end */
    gbyte_edge *bytes;
    gcall_edge *calls;
    gspec_edge *specs;
    int n_specials;
    char **specials;      /* texts of special literals */

    /* token cache, bound to one vocabulary */
    pthread_mutex_t lock;
    const cv_grammar_vocab *vocab;
    int32_t *special_tok; /* [n_specials] token id or -1 */
    _Atomic(gcache *) *cache; /* [n_states] */
    atomic_int n_cached;
};

static inline int32_t gs_next_byte(const cv_grammar *g, int32_t s, uint8_t c)
{
    const gstate *st = &g->states[s];
    const gbyte_edge *e = g->bytes + st->e_byte;
    for (uint32_t i = 0; i < st->n_byte; i++) {
        if (c < e[i].lo)
            return -1;
        if (c <= e[i].hi)
            return e[i].to;
    }
    return -1;
}

/* ---- vocabulary ---- */

typedef struct gtrie_node {
    int32_t child;   /* first child, -1 none; children sorted by byte */
    int32_t sibling;
    int32_t tok;     /* a token ending here, -1 none (more in extra) */
    int32_t extra;   /* index into v->dup for further tokens with the same bytes, -1 none */
    int32_t subtree_end; /* nodes are in DFS order: the subtree is [self, subtree_end) */
    uint8_t byte;
} gtrie_node;

struct cv_grammar_vocab {
    int32_t n_vocab;
    char *bytes;        /* all pieces */
    uint32_t *off;      /* [n_vocab + 1] */
    uint8_t *flags;     /* [n_vocab] */
    gtrie_node *trie;   /* node 0 is the root */
    int32_t n_trie;
    int32_t *dup;       /* chains: dup[k] = token, dup[k+1] = next index or -1 */
    int32_t n_dup;
    int32_t *eog;       /* EOG token ids */
    int32_t n_eog;
    int32_t *special;   /* ids flagged SPECIAL (not EOG), for literal lookup */
    int32_t n_special;
};

/* ---- stacks (gram_match.c) ---- */

/* A stack is a node index into a pool of interned (state, parent) pairs, so
 * equal stacks are equal ints. Parent -1 is the bottom; -2 is the sentinel
 * the cache builder uses to notice that a token left the frame it starts in. */
enum { GSTK_BOTTOM = -1, GSTK_SENTINEL = -2 };

typedef struct gnode { int32_t state, parent; int32_t depth; } gnode;

typedef struct gpool {
    gnode *nodes;
    int32_t n, cap;
    int32_t *table;   /* open addressing: node index or -1 */
    uint32_t table_cap;
    uint32_t *mark;   /* per node: epoch of the last visit */
    uint32_t epoch;
} gpool;

void gpool_init(gpool *p);
void gpool_fini(gpool *p);
void gpool_reset(gpool *p);
int32_t gpool_intern(gpool *p, int32_t state, int32_t parent);

/* A set of stacks that are ready to read a byte (or a special token), plus
 * whether the whole grammar may end here and whether a frame started at the
 * sentinel returned (cache building). */
typedef struct gset {
    int32_t *v;
    int32_t n, cap;
    bool can_end;
    bool returned;
} gset;

void gset_free(gset *s);
/* Adds the closure of stack top to out: pushes callees, pops finished frames. */
void gm_expand(const cv_grammar *g, gpool *p, int32_t top, gset *out);
/* out = closure of every stack of in advanced by byte c. out is reset first. */
void gm_step(const cv_grammar *g, gpool *p, const gset *in, uint8_t c, gset *out);
/* The same for a special-token edge. */
void gm_step_special(const cv_grammar *g, gpool *p, const gset *in, int32_t special, gset *out);

/* Mask cache (gram_mask.c). */
const gcache *gcache_get(cv_grammar *g, int32_t state);
void gcache_free(gcache *c);
int gm_bind_vocab(cv_grammar *g, const cv_grammar_vocab *v, cv_err *err);

#endif
