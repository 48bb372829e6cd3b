/* tok_int.h — the guts of the tokenizer layer, shared by its files only:
 * the cv_tok struct, the two hash tables (text -> id, id pair -> merge) and
 * the added-token trie, the pre-tokenizer table and the per-family encoders.
 * Nothing outside src/tokenizer/ includes this. */
#ifndef CV_TOK_INT_H
#define CV_TOK_INT_H

#include "tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- text -> id: open addressing over the token text table ---- */

typedef struct tok_strmap {
    uint32_t *slots; /* id + 1, 0 = empty */
    uint32_t mask;
} tok_strmap;

uint64_t tok_hash_bytes(const char *p, size_t n);

/* ---- (left id, right id) -> merge: open addressing, u64 keys ---- */

typedef struct tok_pair_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t id;   /* the merged token */
} tok_pair_slot;

typedef struct tok_pairmap {
    tok_pair_slot *slots;
    uint64_t mask;
} tok_pairmap;

static inline uint64_t tok_pair_key(int32_t a, int32_t b)
{
    return (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
}

static inline uint64_t tok_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline const tok_pair_slot *tok_pair_get(const tok_pairmap *m, int32_t a, int32_t b)
{
    if (!m->slots)
        return NULL;
    uint64_t key = tok_pair_key(a, b);
    for (uint64_t i = tok_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        const tok_pair_slot *s = &m->slots[i];
        if (s->key == key)
            return s;
        if (s->key == 0)
            return NULL;
    }
}

/* ---- added tokens: a byte trie for leftmost-longest matching ---- */

typedef struct tok_trie_node {
    int32_t child;   /* first child node, -1 = none */
    int32_t sibling; /* next sibling, -1 = none */
    int32_t id;      /* token ending here, -1 = none */
    uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes; /* node 0 is the root */
    int32_t n, cap;
    uint8_t first[32];    /* bitmap of bytes that start some token */
} tok_trie;

/* ---- pre-tokenizers ---- */

#define TOK_MAX_REGEX 8

typedef enum tok_norm {
    TOK_NORM_NONE = 0,
    TOK_NORM_NFC = 1,
} tok_norm;

/* One row per pre-tokenizer family: the regexes applied in order, each
 * splitting every piece of the one before into matches and the gaps between
 * them (Hugging Face Split with behavior "Isolated"). */
typedef struct tok_pre_def {
    const char *names;  /* space-separated tokenizer.ggml.pre values */
    const char *regex[TOK_MAX_REGEX];
    bool ignore_merges; /* a piece that is a whole token skips BPE (Llama 3, gpt-4o) */
    tok_norm norm;      /* normalizer of the reference tokenizer */
    int fast_digits;    /* > 0: the Llama 3 / Qwen 2 regex, whose ASCII matches pretok.c
                           finds by hand; the longest digit run it isolates */
} tok_pre_def;

const tok_pre_def *tok_pre_find(const char *name);
/* Name to store for a regex list (importer): the table row whose regexes are
 * exactly these, or NULL. */
const tok_pre_def *tok_pre_match(const char *const *regex, int n);

/* ---- the tokenizer ---- */

struct cv_tok {
    cv_tok_kind kind;
    int32_t n_vocab;
    cv_str *text;     /* [n_vocab] into blob */
    float *score;     /* [n_vocab] */
    uint8_t *type;    /* [n_vocab] CV_TOKTYPE_* */
    char *blob;
    tok_strmap map;

    /* BPE */
    tok_pairmap merges;
    int32_t n_merges;
    /* byte -> id of its one-byte token: the byte-level character for BPE,
     * <0xXX> for SPM (-1 where the vocabulary lacks it). */
    int32_t byte_id[256];
    /* byte -> its byte-level character in UTF-8 (GPT-2's bytes_to_unicode) */
    cv_str byte_chars[256];
    char byte_chars_buf[256 * 2];
    /* codepoint (< 324) -> byte for decoding byte-level text, -1 if none */
    int16_t cp_byte[324];
    size_t max_token_len;

    /* pre-tokenizer */
    char pre_name[64];
    const tok_pre_def *pre;
    pcre2_code *re[TOK_MAX_REGEX];
    int n_re;
    tok_norm norm;
    bool ignore_merges;

    /* special tokens */
    int32_t bos, eos, eot, eom, unk, pad, sep, cls, mask;
    bool add_bos, add_eos, add_space_prefix;
    int32_t *eog;
    size_t n_eog;
    tok_trie added;   /* CONTROL + USER_DEFINED tokens */

    /* WordPiece: id of "##x" continuation pieces are stored without the
     * prefix and word starts with ▁ (llama.cpp's GGUF convention). */
};

/* ---- internal entry points between the files ---- */

/* vocab.c */
int32_t tok_map_find(const cv_tok *t, const char *p, size_t n);

/* pretok.c: compiles t->pre's regexes into t->re. */
int tok_pre_compile(cv_tok *t, cv_err *err);

/* Per-call scratch shared by the encoders. */
typedef struct tok_scratch {
    pcre2_match_data *md[TOK_MAX_REGEX];
    cv_buf norm;      /* normalized text */
    cv_buf word;      /* one pre-token in byte-level form (BPE) or ▁ form (SPM) */
    void *sym;        /* symbol array (encoder-specific) */
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    size_t work;      /* operations done: regex matches, heap pushes and pops, lookups */
    struct tok_word_cache *cache; /* bpe.c: recent words -> ids, made once a text proves long */
    size_t n_words;
} tok_scratch;

/* encode.c: cv_tok_encode that also reports the work done (tests bound it). */
int tok_encode_work(const cv_tok *t, const char *text, size_t len, unsigned flags, cv_tok_ids *out, size_t *work,
                    cv_err *err);

void tok_scratch_fini(tok_scratch *s);
/* Grows *p to hold n elements of size sz (aborts on OOM: sizes are bounded by
 * CV_MAX_TOK_INPUT checked at the edge). */
void *tok_grow(void **p, size_t *cap, size_t n, size_t sz);

/* ---- the merge heap (bpe.c, spm.c) ----
 * Both BPE loops merge the best adjacent pair first: the lowest merge rank
 * (bpe) or the highest piece score (spm), the leftmost on ties. Both put
 * that order into (priority, position) of one candidate type, so one
 * min-heap serves both. Candidates go stale as symbols merge; the loops
 * check them when popped and skip stale ones. The comparison stays two
 * fields with branches: folding them into one 64-bit key ran fewer
 * instructions yet made a 1 MB SPM text about 30% slower, most likely
 * because the compiler then picks a child with a conditional move, which
 * waits for each level's loads where a predicted branch runs ahead into a
 * heap too large for the cache. */
typedef struct tok_cand {
    uint32_t priority; /* smaller first */
    int32_t pos;       /* the left symbol's index: smaller first on equal priority */
    int32_t x, y;      /* what the loop checks staleness by (bpe: the pair's ids; spm: right symbol, merged length) */
} tok_cand;

static inline bool tok_cand_less(const tok_cand *a, const tok_cand *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->pos < b->pos);
}

/* A piece score as a priority: higher scores first, -0 tied with 0, NaN last. */
static inline uint32_t tok_score_priority(float score)
{
    if (score != score)
        return UINT32_MAX;
    if (score == 0)
        score = 0;
    uint32_t u;
    memcpy(&u, &score, sizeof u);
    u = u & 0x80000000u ? ~u : u | 0x80000000u; /* unsigned order = float order */
    return ~u;
}

static inline void tok_heap_push(tok_cand *h, size_t *n, tok_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!tok_cand_less(&c, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static inline tok_cand tok_heap_pop(tok_cand *h, size_t *n)
{
    tok_cand top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        const tok_cand *best = &last;
        if (l < m && tok_cand_less(&h[l], best))
            b = l, best = &h[l];
        if (r < m && tok_cand_less(&h[r], best))
            b = r;
        if (b == i)
            break;
        h[i] = h[b];
        i = b;
    }
    if (m > 0)
        h[i] = last;
    return top;
}

void tok_ids_push(cv_tok_ids *v, int32_t id);

/* pretok.c: splits text (valid UTF-8) with t's regexes and calls fn on each
 * piece in order. */
typedef void (*tok_piece_fn)(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out);
void tok_pre_split(const cv_tok *t, tok_scratch *s, const char *text, size_t len, tok_piece_fn fn, cv_tok_ids *out);

/* bpe.c: one pre-token (raw bytes) -> ids. */
void tok_bpe_word(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out);
/* spm.c: one text fragment (raw, spaces not yet escaped) -> ids. */
void tok_spm_text(const cv_tok *t, tok_scratch *s, const char *p, size_t n, bool add_prefix, cv_tok_ids *out);
/* wpm.c: one text fragment -> ids. */
void tok_wpm_text(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out);

#endif
