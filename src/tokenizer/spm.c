/* spm.c — SentencePiece-style BPE (GGUF model "llama": Llama 2, Mistral,
 * Phi-3, Gemma-style vocabularies with byte fallback). A text fragment gets
 * the leading ▁ when it starts a text (the caller decides: start of input or
 * right after a special token) and every space becomes ▁ (U+2581). Symbols
 * start as single characters; the adjacent pair whose concatenation is a
 * vocabulary piece with the highest score merges first, leftmost on ties,
 * until none is left. A final symbol that is not a piece (a character the
 * vocabulary lacks) is spelled with <0xXX> byte tokens, or UNK without them.
 * Only NORMAL and USER_DEFINED pieces take part, as in SentencePiece:
 * CONTROL, BYTE and UNKNOWN pieces never come out of text here. */
#include "tokenizer/tok_int.h"

typedef struct ssym {
    uint32_t start, len; /* span in the escaped text; len 0 = merged away */
    int32_t prev, next;
} ssym;

static int32_t piece_id(const cv_tok *t, const char *p, size_t n)
{
    if (n > t->max_token_len)
        return -1;
    int32_t id = tok_map_find(t, p, n);
    if (id < 0)
        return -1;
    uint8_t ty = t->type[id];
    return ty == CV_TOKTYPE_NORMAL || ty == CV_TOKTYPE_USER_DEFINED ? id : -1;
}

static void try_pair(const cv_tok *t, const char *w, ssym *sym, int32_t left, tok_cand *heap, size_t *nh,
                     size_t *work)
{
    if (left < 0)
        return;
    int32_t right = sym[left].next;
    if (right < 0)
        return;
    uint32_t len = sym[left].len + sym[right].len;
    ++*work;
    int32_t id = piece_id(t, w + sym[left].start, len);
    if (id >= 0)
        tok_heap_push(heap, nh, (tok_cand){ tok_score_priority(t->score[id]), left, right, (int32_t)len });
}

void tok_spm_text(const cv_tok *t, tok_scratch *s, const char *p, size_t n, bool add_prefix, cv_tok_ids *out)
{
    static const char space[] = "\xE2\x96\x81"; /* ▁ */
    cv_buf *w = &s->word;
    cv_buf_reset(w);
    if (add_prefix)
        cv_buf_append(w, space, 3);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ')
            cv_buf_append(w, space, 3);
        else
            cv_buf_putc(w, p[i]);
    }
    if (w->len == 0)
        return;

    /* One symbol per character; a byte that does not start a valid
     * sequence is a symbol alone (it can only end as a byte token). */
    ssym *sym = tok_grow(&s->sym, &s->sym_cap, w->len, sizeof(ssym));
    int32_t ns = 0;
    for (size_t i = 0; i < w->len;) {
        uint32_t cp;
        int l = cv_utf8_decode(w->data + i, w->len - i, &cp);
        if (l < 1)
            l = 1;
        sym[ns] = (ssym){ (uint32_t)i, (uint32_t)l, ns - 1, -1 };
        if (ns > 0)
            sym[ns - 1].next = ns;
        ns++;
        i += (size_t)l;
    }
    tok_cand *heap = tok_grow(&s->heap, &s->heap_cap, 3 * (size_t)ns, sizeof(tok_cand));
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        try_pair(t, w->data, sym, i, heap, &nh, &s->work);
    while (nh > 0) {
        tok_cand c = tok_heap_pop(heap, &nh);
        s->work++;
        int32_t left = c.pos, right = c.x;
        ssym *l = &sym[left], *r = &sym[right];
        /* Stale: either side merged since this candidate was pushed. */
        if (l->len == 0 || r->len == 0 || l->next != right || l->len + r->len != (uint32_t)c.y)
            continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = left;
        try_pair(t, w->data, sym, l->prev, heap, &nh, &s->work);
        try_pair(t, w->data, sym, left, heap, &nh, &s->work);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        const char *sp = w->data + sym[i].start;
        int32_t id = piece_id(t, sp, sym[i].len);
        if (id >= 0) {
            tok_ids_push(out, id);
            continue;
        }
        bool bytes = true;
        for (uint32_t k = 0; k < sym[i].len; k++)
            bytes = bytes && t->byte_id[(unsigned char)sp[k]] >= 0;
        if (bytes) {
            for (uint32_t k = 0; k < sym[i].len; k++)
                tok_ids_push(out, t->byte_id[(unsigned char)sp[k]]);
        } else if (t->unk >= 0) {
            tok_ids_push(out, t->unk); /* one UNK per unknown character */
        }
    }
}
