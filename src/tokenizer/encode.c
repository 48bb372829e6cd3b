/* encode.c — text -> ids for every family: BOS/EOS, the added-token split
 * (CONTROL and USER_DEFINED tokens found leftmost-longest in the raw text,
 * as Hugging Face's AddedVocabulary does), then per fragment between them
 * the family's encoder. Byte-level fragments also get the reference
 * normalizer (NFC for Qwen) and are split into valid UTF-8 runs: a byte that
 * is not part of a valid sequence becomes its own byte token, so any input,
 * however broken, encodes and decodes back to the same bytes. All scratch is
 * per call, which keeps cv_tok shareable between threads. */
#include "tokenizer/tok_int.h"

#include <stdlib.h>
#include <utf8proc.h>

void tok_ids_push(cv_tok_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->ids = cv_xrealloc(v->ids, v->cap * sizeof(int32_t));
    }
    v->ids[v->n++] = id;
}

void cv_tok_ids_free(cv_tok_ids *v)
{
    free(v->ids);
    *v = (cv_tok_ids){ 0 };
}

void *tok_grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < n)
            c *= 2;
        *p = cv_xrealloc(*p, c * sz);
        *cap = c;
    }
    return *p;
}

void tok_scratch_fini(tok_scratch *s)
{
    for (int i = 0; i < TOK_MAX_REGEX; i++)
        pcre2_match_data_free(s->md[i]);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit);
    cv_buf_free(&s->norm);
    cv_buf_free(&s->word);
    free(s->sym);
    free(s->heap);
    free(s->cache);
}

/* ---- byte-level fragments ---- */

/* NFC without paying for it on ASCII: an ASCII character is a starter that
 * never composes with what precedes it, so text can be cut before any ASCII
 * character and each piece normalized alone. ASCII stretches are copied;
 * only a window holding non-ASCII characters (with the ASCII character just
 * before it, which a combining mark may join) goes through utf8proc. */
static const char *nfc(tok_scratch *s, const char *p, size_t n, size_t *out_len)
{
    size_t i = 0;
    while (i < n && (unsigned char)p[i] < 0x80)
        i++;
    if (i == n) {
        *out_len = n;
        return p;
    }
    cv_buf *b = &s->norm;
    cv_buf_reset(b);
    size_t copied = 0;
    while (i < n) {
        /* window: [start, end) from the ASCII char before i to the next
         * ASCII char after the non-ASCII run */
        size_t start = i > copied && (unsigned char)p[i - 1] < 0x80 ? i - 1 : i;
        size_t end = i;
        while (end < n && (unsigned char)p[end] >= 0x80)
            end++;
        cv_buf_append(b, p + copied, start - copied);
        utf8proc_uint8_t *out = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)p + start, (utf8proc_ssize_t)(end - start), &out,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (r >= 0)
            cv_buf_append(b, out, (size_t)r);
        else /* cannot happen on valid UTF-8: keep the text as it is */
            cv_buf_append(b, p + start, end - start);
        free(out);
        copied = i = end;
        while (i < n && (unsigned char)p[i] < 0x80)
            i++;
    }
    cv_buf_append(b, p + copied, n - copied);
    *out_len = b->len;
    return b->data;
}

static void bpe_valid_run(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out)
{
    if (t->norm == TOK_NORM_NFC)
        p = nfc(s, p, n, &n);
    tok_pre_split(t, s, p, n, tok_bpe_word, out);
}

static void bpe_fragment(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out)
{
    size_t run = 0, i = 0;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int l = cv_utf8_decode(p + i, n - i, &cp);
        if (l > 0) {
            i += (size_t)l;
            continue;
        }
        if (i > run)
            bpe_valid_run(t, s, p + run, i - run, out);
        tok_bpe_word(t, s, p + i, 1, out);
        run = ++i;
    }
    if (n > run)
        bpe_valid_run(t, s, p + run, n - run, out);
}

/* ---- added-token split ---- */

/* Longest allowed added token starting at p, or -1; *len gets its length. */
static int32_t added_at(const cv_tok *t, const char *p, size_t n, bool parse_special, size_t *len)
{
    const tok_trie *tr = &t->added;
    int32_t cur = 0, best = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t ch = tr->nodes[cur].child;
        while (ch >= 0 && tr->nodes[ch].byte != (uint8_t)p[i])
            ch = tr->nodes[ch].sibling;
        if (ch < 0)
            break;
        cur = ch;
        int32_t id = tr->nodes[cur].id;
        if (id >= 0 && (parse_special || t->type[id] == CV_TOKTYPE_USER_DEFINED)) {
            best = id;
            *len = i + 1;
        }
    }
    return best;
}

static void encode_fragment(const cv_tok *t, tok_scratch *s, const char *p, size_t n, bool after_special,
                            cv_tok_ids *out)
{
    switch (t->kind) {
    case CV_TOK_BPE:
        bpe_fragment(t, s, p, n, out);
        break;
    case CV_TOK_SPM:
        tok_spm_text(t, s, p, n, t->add_space_prefix && after_special, out);
        break;
    case CV_TOK_WPM:
        tok_wpm_text(t, s, p, n, out);
        break;
    }
}

int tok_encode_work(const cv_tok *t, const char *text, size_t len, unsigned flags, cv_tok_ids *out, size_t *work,
                    cv_err *err)
{
    if (len > CV_MAX_TOK_INPUT)
        return cv_err_set(err, CV_ELIMIT, "text to tokenize is %zu bytes, at most %u allowed", len, CV_MAX_TOK_INPUT);
    tok_scratch s = { 0 };
    bool add = (flags & CV_TOK_ADD_SPECIAL) != 0;
    bool parse_special = (flags & CV_TOK_PARSE_SPECIAL) != 0;
    if (add && t->add_bos && t->bos >= 0)
        tok_ids_push(out, t->bos);

    bool after_special = true; /* the start of the text counts as one */
    size_t frag = 0;
    if (t->added.n > 0) {
        for (size_t i = 0; i < len;) {
            uint8_t c = (uint8_t)text[i];
            size_t mlen = 0;
            int32_t id = -1;
            if (t->added.first[c >> 3] & (1u << (c & 7)))
                id = added_at(t, text + i, len - i, parse_special, &mlen);
            if (id < 0) {
                i++;
                continue;
            }
            if (i > frag)
                encode_fragment(t, &s, text + frag, i - frag, after_special, out);
            tok_ids_push(out, id);
            s.work++;
            after_special = true;
            i += mlen;
            frag = i;
            continue;
        }
    }
    if (len > frag) {
        encode_fragment(t, &s, text + frag, len - frag, after_special, out);
    }
    if (add && t->add_eos && t->eos >= 0)
        tok_ids_push(out, t->eos);
    if (work)
        *work = s.work;
    tok_scratch_fini(&s);
    return 0;
}

int cv_tok_encode(const cv_tok *t, const char *text, size_t len, unsigned flags, cv_tok_ids *out, cv_err *err)
{
    return tok_encode_work(t, text, len, flags, out, NULL, err);
}

int cv_tok_count(const cv_tok *t, const char *text, size_t len, unsigned flags, size_t *n, cv_err *err)
{
    cv_tok_ids ids = { 0 };
    int rc = tok_encode_work(t, text, len, flags, &ids, NULL, err);
    *n = rc == 0 ? ids.n : 0;
    cv_tok_ids_free(&ids);
    return rc;
}
