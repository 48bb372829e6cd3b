/* vocab.c — builds a cv_tok from GGUF metadata and answers questions about
 * the vocabulary. It owns the `tokenizer.ggml.*` keys (the names llama.cpp's
 * converter writes): model, pre, tokens, scores, token_type, merges, the
 * special ids and the add_* flags. Every array and id is validated against
 * the others and against base/limits.h before anything is sized from it; a
 * bad file gives one CV_ECORRUPT sentence naming the key. After load the
 * struct is immutable, which is what makes one tokenizer shareable by every
 * HTTP thread. */
#include "tokenizer/tok_int.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- hashing ---- */

uint64_t tok_hash_bytes(const char *p, size_t n)
{
    /* FNV-1a over 8-byte words then a finalizer: tokens are short, and this
     * runs once per merge candidate during loading and per word when a
     * vocabulary skips merges. */
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0x100000001b3ull;
    return tok_mix64(h);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

int32_t tok_map_find(const cv_tok *t, const char *p, size_t n)
{
    const tok_strmap *m = &t->map;
    for (uint32_t i = (uint32_t)tok_hash_bytes(p, n) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t s = m->slots[i];
        if (s == 0)
            return -1;
        cv_str k = t->text[s - 1];
        if (k.len == n && memcmp(k.ptr, p, n) == 0)
            return (int32_t)(s - 1);
    }
}

/* Later duplicates do not replace earlier ids: the first id of a text wins,
 * which is what both reference tokenizers resolve to for their vocabularies. */
static void map_build(cv_tok *t)
{
    size_t cap = pow2_at_least((size_t)t->n_vocab * 2 + 1);
    t->map.slots = cv_xcalloc(cap, sizeof(uint32_t));
    t->map.mask = (uint32_t)(cap - 1);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        cv_str k = t->text[id];
        uint32_t i = (uint32_t)tok_hash_bytes(k.ptr, k.len) & t->map.mask;
        for (;; i = (i + 1) & t->map.mask) {
            uint32_t s = t->map.slots[i];
            if (s == 0) {
                t->map.slots[i] = (uint32_t)id + 1;
                break;
            }
            cv_str o = t->text[s - 1];
            if (o.len == k.len && memcmp(o.ptr, k.ptr, k.len) == 0)
                break;
        }
    }
}

/* ---- byte-level alphabet (GPT-2's bytes_to_unicode) ---- */

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in
 * order, to U+0100.. so every byte has a visible, non-space character. */
static uint32_t byte_to_cp(int b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int i = 0; i < b; i++)
        if (!((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF)))
            n++;
    return 256u + (uint32_t)n;
}

/* ---- merges ---- */

static void pair_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    uint64_t key = tok_pair_key(a, b);
    for (uint64_t i = tok_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        tok_pair_slot *s = &m->slots[i];
        if (s->key == key)
            return; /* a repeated pair keeps its first (best) rank */
        if (s->key == 0) {
            s->key = key;
            s->rank = rank;
            s->id = id;
            return;
        }
    }
}

static int load_merges(cv_tok *t, const cv_gguf_value *arr, cv_err *err)
{
    uint64_t n = arr->arr.n;
    size_t cap = pow2_at_least((size_t)n * 2 + 1);
    t->merges.slots = cv_xcalloc(cap, sizeof(tok_pair_slot));
    t->merges.mask = cap - 1;
    cv_buf cat = { 0 };
    int32_t used = 0;
    for (uint64_t r = 0; r < n; r++) {
        cv_str m = arr->arr.strs[r];
        /* "left right": the separator is the first space after the first
         * byte, so a left part that is itself a space still parses. */
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp) {
            cv_buf_free(&cat);
            return CV_CORRUPT(err, "tokenizer.ggml.merges[%llu] = \"%.*s\" has no space between its two parts",
                              (unsigned long long)r, (int)CV_MIN(m.len, 64), m.ptr);
        }
        size_t la = (size_t)(sp - m.ptr), lb = m.len - la - 1;
        int32_t a = tok_map_find(t, m.ptr, la), b = tok_map_find(t, sp + 1, lb);
        cv_buf_reset(&cat);
        cv_buf_append(&cat, m.ptr, la);
        cv_buf_append(&cat, sp + 1, lb);
        int32_t ab = tok_map_find(t, cat.data, cat.len);
        /* A merge whose parts or result are not tokens can never fire on
         * token ids; the reference tokenizers reject or ignore it too. */
        if (a < 0 || b < 0 || ab < 0)
            continue;
        pair_put(&t->merges, a, b, (int32_t)r, ab);
        used++;
    }
    cv_buf_free(&cat);
    t->n_merges = used;
    return 0;
}

/* ---- added-token trie ---- */

static int32_t trie_node(tok_trie *tr, uint8_t byte)
{
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? tr->cap * 2 : 256;
        tr->nodes = cv_xrealloc(tr->nodes, (size_t)tr->cap * sizeof *tr->nodes);
    }
    tok_trie_node *nd = &tr->nodes[tr->n];
    nd->child = nd->sibling = nd->id = -1;
    nd->byte = byte;
    return tr->n++;
}

static void trie_add(tok_trie *tr, cv_str s, int32_t id)
{
    if (tr->n == 0)
        trie_node(tr, 0);
    int32_t cur = 0;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = (uint8_t)s.ptr[i];
        int32_t ch = tr->nodes[cur].child;
        while (ch >= 0 && tr->nodes[ch].byte != c)
            ch = tr->nodes[ch].sibling;
        if (ch < 0) {
            ch = trie_node(tr, c);
            tr->nodes[ch].sibling = tr->nodes[cur].child;
            tr->nodes[cur].child = ch;
        }
        cur = ch;
    }
    if (tr->nodes[cur].id < 0)
        tr->nodes[cur].id = id;
    tr->first[(uint8_t)s.ptr[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s.ptr[0] & 7));
}

/* ---- special ids ---- */

static int32_t get_id(const cv_gguf *g, const char *key, int32_t def, int32_t n_vocab)
{
    int64_t v;
    if (cv_gguf_get_int(g, key, &v, NULL) != 0)
        return def;
    if (v < 0 || v >= n_vocab) {
        if (v != -1)
            cv_warn("tokenizer: %s = %lld is outside the vocabulary [0, %d); ignored", key, (long long)v, n_vocab);
        return -1;
    }
    return (int32_t)v;
}

static bool get_flag(const cv_gguf *g, const char *key, bool def)
{
    bool b;
    return cv_gguf_get_bool(g, key, &b, NULL) == 0 ? b : def;
}

/* End-of-turn and end-of-generation tokens by their well-known text, for
 * files whose converter did not record eot_token_id (most do not). */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<｜end▁of▁sentence｜>", "<|end_of_turn|>",
};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<｜end▁of▁sentence｜>", "<|end_of_turn|>", "<|return|>", "<|call|>", "<|end_of_text|>", "<end_of_utterance>",
    "<|eot|>", "<turn|>",
};

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void build_eog(cv_tok *t)
{
    int32_t set[64];
    size_t n = 0;
    int32_t fixed[] = { t->eos, t->eot, t->eom };
    for (size_t i = 0; i < CV_ARRAY_LEN(fixed); i++)
        if (fixed[i] >= 0)
            set[n++] = fixed[i];
    for (size_t i = 0; i < CV_ARRAY_LEN(eog_texts) && n < CV_ARRAY_LEN(set); i++) {
        int32_t id = tok_map_find(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0 && (t->type[id] == CV_TOKTYPE_CONTROL || t->type[id] == CV_TOKTYPE_USER_DEFINED))
            set[n++] = id;
    }
    qsort(set, n, sizeof set[0], cmp_i32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || set[k - 1] != set[i])
            set[k++] = set[i];
    t->eog = cv_xmalloc((k ? k : 1) * sizeof(int32_t));
    memcpy(t->eog, set, k * sizeof(int32_t));
    t->n_eog = k;
}

/* ---- load, phase by phase ---- */

/* tokenizer.ggml.model: which of the three tokenizers this is. */
static int load_kind(cv_tok *t, const cv_gguf *g, cv_err *err)
{
    cv_str model;
    int rc = cv_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (rc == CV_ENOTFOUND)
        return cv_err_set(err, CV_ENOTFOUND, "%s has no vocabulary (key tokenizer.ggml.model is absent)",
                          cv_gguf_path(g));
    if (rc)
        return rc;
    if (cv_str_eqz(model, "llama"))
        t->kind = CV_TOK_SPM;
    else if (cv_str_eqz(model, "gpt2"))
        t->kind = CV_TOK_BPE;
    else if (cv_str_eqz(model, "bert"))
        t->kind = CV_TOK_WPM;
    else
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "tokenizer.ggml.model = \"%.*s\" is not supported (known: llama, gpt2, bert)",
                          (int)CV_MIN(model.len, 64), model.ptr);
    return 0;
}

/* The token texts (copied into one blob), scores and types, each array
 * checked against the vocabulary's size; then the text -> id map. */
static int load_tokens(cv_tok *t, const cv_gguf *g, cv_err *err)
{
    const cv_gguf_value *toks;
    int rc = cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &toks, err);
    if (rc == CV_ENOTFOUND)
        return CV_CORRUPT(err, "%s: tokenizer.ggml.tokens is absent", cv_gguf_path(g));
    if (rc)
        return rc;
    if (toks->arr.n == 0 || toks->arr.n > CV_MAX_TOK_VOCAB)
        return cv_err_set(err, CV_ELIMIT, "tokenizer.ggml.tokens has %llu entries, must be in [1, %u]",
                          (unsigned long long)toks->arr.n, CV_MAX_TOK_VOCAB);
    int32_t n = (int32_t)toks->arr.n;
    t->n_vocab = n;
    size_t blob_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        if (toks->arr.strs[i].len > CV_MAX_TOK_TEXT)
            return cv_err_set(err, CV_ELIMIT, "tokenizer.ggml.tokens[%d] is %zu bytes long, at most %u allowed", i,
                              toks->arr.strs[i].len, CV_MAX_TOK_TEXT);
        blob_bytes += toks->arr.strs[i].len + 1;
    }
    t->blob = cv_xmalloc(blob_bytes);
    t->text = cv_xmalloc((size_t)n * sizeof(cv_str));
    t->score = cv_xcalloc((size_t)n, sizeof(float));
    t->type = cv_xmalloc((size_t)n);
    memset(t->type, CV_TOKTYPE_NORMAL, (size_t)n);
    char *w = t->blob;
    for (int32_t i = 0; i < n; i++) {
        cv_str s = toks->arr.strs[i];
        memcpy(w, s.ptr, s.len);
        w[s.len] = 0;
        t->text[i] = (cv_str){ w, s.len };
        w += s.len + 1;
    }

    const cv_gguf_value *arr;
    rc = cv_gguf_get_arr(g, "tokenizer.ggml.scores", -1, &arr, err);
    if (rc == 0) {
        if (arr->arr.n != (uint64_t)n || (arr->arr.type != CV_GGUF_FLOAT32 && arr->arr.type != CV_GGUF_FLOAT64))
            return CV_CORRUPT(err, "tokenizer.ggml.scores has %llu %s entries, must be %d floats",
                              (unsigned long long)arr->arr.n, cv_gguf_type_name(arr->arr.type), n);
        for (int32_t i = 0; i < n; i++)
            t->score[i] = (float)cv_gguf_arr_float(arr, (uint64_t)i);
    } else if (rc != CV_ENOTFOUND)
        return rc;
    rc = cv_gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &arr, err);
    if (rc == 0) {
        if (arr->arr.n != (uint64_t)n || arr->arr.type > CV_GGUF_INT32)
            return CV_CORRUPT(err, "tokenizer.ggml.token_type has %llu %s entries, must be %d integers",
                              (unsigned long long)arr->arr.n, cv_gguf_type_name(arr->arr.type), n);
        for (int32_t i = 0; i < n; i++) {
            int64_t ty = cv_gguf_arr_int(arr, (uint64_t)i);
            /* An unknown type is treated as NORMAL: it can only make a token
             * ordinary, never special. */
            t->type[i] = (uint8_t)(ty >= CV_TOKTYPE_NORMAL && ty <= CV_TOKTYPE_BYTE ? ty : CV_TOKTYPE_NORMAL);
        }
    } else if (rc != CV_ENOTFOUND)
        return rc;
    cv_err_clear(err);
    map_build(t);
    return 0;
}

/* The pre-tokenizer's name, the special ids and add_* flags with the
 * per-family defaults (llama.cpp's, so files that rely on them behave the
 * same), and the end-of-turn / end-of-generation sets. */
static void load_specials(cv_tok *t, const cv_gguf *g)
{
    int32_t n = t->n_vocab;
    cv_str pre = CV_STR("default");
    if (cv_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL) != 0)
        pre = CV_STR("default");
    snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)CV_MIN(pre.len, sizeof t->pre_name - 1), pre.ptr);

    int32_t def_bos = -1, def_eos = -1, def_unk = -1, def_sep = -1, def_pad = -1, def_cls = -1, def_mask = -1;
    bool def_add_bos = false, def_add_eos = false;
    if (t->kind == CV_TOK_SPM) {
        def_bos = 1, def_eos = 2, def_unk = 0, def_add_bos = true;
    } else if (t->kind == CV_TOK_WPM) {
        def_bos = 101, def_eos = 102, def_unk = 100, def_sep = 102, def_pad = 0, def_cls = 101, def_mask = 103;
        def_add_bos = true, def_add_eos = true;
    }
#define CLAMP_DEF(x) ((x) < n ? (x) : -1)
    t->bos = get_id(g, "tokenizer.ggml.bos_token_id", CLAMP_DEF(def_bos), n);
    t->eos = get_id(g, "tokenizer.ggml.eos_token_id", CLAMP_DEF(def_eos), n);
    t->unk = get_id(g, "tokenizer.ggml.unknown_token_id", CLAMP_DEF(def_unk), n);
    t->sep = get_id(g, "tokenizer.ggml.seperator_token_id", CLAMP_DEF(def_sep), n);
    t->pad = get_id(g, "tokenizer.ggml.padding_token_id", CLAMP_DEF(def_pad), n);
    t->cls = get_id(g, "tokenizer.ggml.cls_token_id", CLAMP_DEF(def_cls), n);
    t->mask = get_id(g, "tokenizer.ggml.mask_token_id", CLAMP_DEF(def_mask), n);
    t->eot = get_id(g, "tokenizer.ggml.eot_token_id", -1, n);
    t->eom = get_id(g, "tokenizer.ggml.eom_token_id", -1, n);
#undef CLAMP_DEF
    if (t->kind == CV_TOK_WPM && t->cls >= 0)
        t->bos = t->cls;
    t->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", def_add_bos);
    t->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", def_add_eos);
    t->add_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix", t->kind == CV_TOK_SPM);
    if (t->eot < 0) {
        for (size_t i = 0; i < CV_ARRAY_LEN(eot_texts) && t->eot < 0; i++) {
            int32_t id = tok_map_find(t, eot_texts[i], strlen(eot_texts[i]));
            if (id >= 0 && (t->type[id] == CV_TOKTYPE_CONTROL || t->type[id] == CV_TOKTYPE_USER_DEFINED))
                t->eot = id;
        }
    }
    build_eog(t);
}

/* The byte tables (byte-level characters both ways, each byte's token) and
 * the trie of added tokens the special-token pass matches. */
static void build_tables(cv_tok *t)
{
    for (int i = 0; i < 324; i++)
        t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_to_cp(b);
        int l = cv_utf8_encode(cp, t->byte_chars_buf + 2 * b);
        t->byte_chars[b] = (cv_str){ t->byte_chars_buf + 2 * b, (size_t)l };
        t->cp_byte[cp] = (int16_t)b;
    }
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->max_token_len = CV_MAX(t->max_token_len, t->text[i].len);
    for (int b = 0; b < 256; b++) {
        char tmp[8];
        size_t len;
        if (t->kind == CV_TOK_BPE)
            len = (size_t)cv_utf8_encode(byte_to_cp(b), tmp);
        else
            len = (size_t)snprintf(tmp, sizeof tmp, "<0x%02X>", b);
        int32_t id = tok_map_find(t, tmp, len);
        /* only a NORMAL or BYTE token spells a raw byte: deepseek-llm has a
         * USER_DEFINED "ü" that means the character, not byte 0xFC */
        t->byte_id[b] = id >= 0 && (t->type[id] == CV_TOKTYPE_NORMAL || t->type[id] == CV_TOKTYPE_BYTE) ? id : -1;
    }
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == CV_TOKTYPE_CONTROL || t->type[i] == CV_TOKTYPE_USER_DEFINED) && t->text[i].len > 0)
            trie_add(&t->added, t->text[i], i);
}

/* Byte-level BPE only: the merges and the pre-tokenizer named by
 * tokenizer.ggml.pre, compiled. */
static int load_bpe(cv_tok *t, const cv_gguf *g, cv_err *err)
{
    const cv_gguf_value *arr;
    int rc = cv_gguf_get_arr(g, "tokenizer.ggml.merges", CV_GGUF_STRING, &arr, err);
    if (rc == 0) {
        if (arr->arr.n > CV_MAX_GGUF_ARRAY)
            return cv_err_set(err, CV_ELIMIT, "tokenizer.ggml.merges has %llu entries, at most %u allowed",
                              (unsigned long long)arr->arr.n, CV_MAX_GGUF_ARRAY);
        if ((rc = load_merges(t, arr, err)) != 0)
            return rc;
    } else if (rc != CV_ENOTFOUND)
        return rc;
    cv_err_clear(err);
    t->pre = tok_pre_find(t->pre_name);
    if (!t->pre)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "tokenizer.ggml.pre = \"%s\" is not a pre-tokenizer corvid knows (known: gpt-2, llama-bpe, "
                          "qwen2, deepseek-llm, deepseek-coder, deepseek-v3, starcoder, falcon, mpt, refact, gpt-4o, ...)",
                          t->pre_name);
    t->ignore_merges = t->pre->ignore_merges;
    t->norm = t->pre->norm;
    return tok_pre_compile(t, err);
}

int cv_tok_load(const cv_gguf *g, cv_tok **out, cv_err *err)
{
    *out = NULL;
    cv_tok *t = cv_xcalloc(1, sizeof *t);
    int rc;
    if ((rc = load_kind(t, g, err)) || (rc = load_tokens(t, g, err)))
        goto fail;
    load_specials(t, g);
    build_tables(t);
    if (t->kind == CV_TOK_BPE && (rc = load_bpe(t, g, err)))
        goto fail;
    *out = t;
    return 0;
fail:
    cv_tok_destroy(t);
    return rc;
}

int cv_tok_load_file(const char *path, cv_tok **out, cv_err *err)
{
    cv_gguf *g = NULL;
    int rc = cv_gguf_open(path, &g, err);
    if (rc != 0)
        return rc;
    rc = cv_tok_load(g, out, err);
    if (rc != 0)
        cv_err_prefix(err, "loading the vocabulary of %s: ", path);
    cv_gguf_close(g);
    return rc;
}

void cv_tok_destroy(cv_tok *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    free(t->text);
    free(t->score);
    free(t->type);
    free(t->blob);
    free(t->map.slots);
    free(t->merges.slots);
    free(t->eog);
    free(t->added.nodes);
    free(t);
}

/* ---- queries ---- */

cv_tok_kind cv_tok_get_kind(const cv_tok *t) { return t->kind; }
int32_t cv_tok_n_vocab(const cv_tok *t) { return t->n_vocab; }
const char *cv_tok_pre_name(const cv_tok *t) { return t->pre_name; }
int32_t cv_tok_bos(const cv_tok *t) { return t->bos; }
int32_t cv_tok_eos(const cv_tok *t) { return t->eos; }
int32_t cv_tok_eot(const cv_tok *t) { return t->eot; }
int32_t cv_tok_pad(const cv_tok *t) { return t->pad; }
int32_t cv_tok_unk(const cv_tok *t) { return t->unk; }
bool cv_tok_adds_bos(const cv_tok *t) { return t->add_bos && t->bos >= 0; }
bool cv_tok_adds_eos(const cv_tok *t) { return t->add_eos && t->eos >= 0; }

cv_str cv_tok_text(const cv_tok *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab)
        return (cv_str){ "", 0 };
    return t->text[id];
}

int cv_tok_type(const cv_tok *t, int32_t id)
{
    return id < 0 || id >= t->n_vocab ? 0 : t->type[id];
}

int32_t cv_tok_find(const cv_tok *t, cv_str s)
{
    return tok_map_find(t, s.ptr, s.len);
}

bool cv_tok_is_eog(const cv_tok *t, int32_t id)
{
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return true;
    return false;
}

const int32_t *cv_tok_eog_ids(const cv_tok *t, size_t *n)
{
    *n = t->n_eog;
    return t->eog;
}

bool cv_tok_is_special(const cv_tok *t, int32_t id)
{
    int ty = cv_tok_type(t, id);
    return ty == CV_TOKTYPE_CONTROL || ty == CV_TOKTYPE_UNKNOWN || ty == CV_TOKTYPE_UNUSED;
}
