/* wpm.c — WordPiece (GGUF model "bert"), as BERT's reference tokenizer does
 * it: the BertNormalizer (drop NUL, U+FFFD and control characters, whitespace
 * to space, space around CJK ideographs, NFD and drop nonspacing marks,
 * lower-case), the BertPreTokenizer (split on whitespace, each punctuation
 * character a word of its own), then per word a greedy longest-prefix match.
 * llama.cpp's GGUF spells a word-initial piece "▁piece" and a continuation
 * piece without the "##" the original vocabulary had; lookups use that
 * spelling. A word longer than 100 characters, or one that cannot be
 * spelled, becomes UNK (max_input_chars_per_word). */
#include "tokenizer/tok_int.h"

#include <utf8proc.h>

#define WPM_MAX_WORD_CHARS 100

static bool is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_ws(uint32_t c)
{
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        return true;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

static bool is_control(uint32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return false;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CN ||
           k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}

static bool is_punct(uint32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
        return true;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* Greedy longest match of one word (UTF-8, already normalized). */
static void word_pieces(const cv_tok *t, tok_scratch *s, const char *wd, size_t n, size_t n_chars, cv_tok_ids *out)
{
    size_t mark = out->n;
    if (n_chars > WPM_MAX_WORD_CHARS)
        goto unk;
    cv_buf *key = &s->word;
    for (size_t start = 0; start < n;) {
        int32_t found = -1;
        size_t found_end = 0;
        size_t end = n;
        while (end > start) {
            cv_buf_reset(key);
            if (start == 0)
                cv_buf_append(key, "\xE2\x96\x81", 3);
            cv_buf_append(key, wd + start, end - start);
            s->work++;
            int32_t id = key->len <= t->max_token_len ? tok_map_find(t, key->data, key->len) : -1;
            if (id >= 0) {
                found = id, found_end = end;
                break;
            }
            do /* step back one character */
                end--;
            while (end > start && ((unsigned char)wd[end] & 0xC0) == 0x80);
        }
        if (found < 0)
            goto unk;
        tok_ids_push(out, found);
        start = found_end;
    }
    return;
unk:
    out->n = mark;
    if (t->unk >= 0)
        tok_ids_push(out, t->unk);
}

void tok_wpm_text(const cv_tok *t, tok_scratch *s, const char *p, size_t n, cv_tok_ids *out)
{
    /* Normalize into s->norm as words separated by single spaces, so the
     * split below is trivial: punctuation and CJK get spaces around them. */
    cv_buf *nb = &s->norm;
    cv_buf_reset(nb);
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = cv_utf8_decode(p + i, n - i, &c);
        i += l > 0 ? (size_t)l : 1;
        if (l < 0 || c == 0 || c == 0xFFFD || is_control(c))
            continue;
        if (is_ws(c)) {
            cv_buf_putc(nb, ' ');
            continue;
        }
        utf8proc_int32_t dec[32];
        int last = 0;
        utf8proc_ssize_t nd = utf8proc_decompose_char((utf8proc_int32_t)c, dec, 32, UTF8PROC_DECOMPOSE, &last);
        if (nd < 0 || nd > 32) {
            dec[0] = (utf8proc_int32_t)c;
            nd = 1;
        }
        for (utf8proc_ssize_t k = 0; k < nd; k++) {
            uint32_t d = (uint32_t)dec[k];
            if (utf8proc_category((utf8proc_int32_t)d) == UTF8PROC_CATEGORY_MN)
                continue;
            d = (uint32_t)utf8proc_tolower((utf8proc_int32_t)d);
            char enc[4];
            int el = cv_utf8_encode(d, enc);
            bool alone = is_punct(d) || is_cjk(d);
            if (alone)
                cv_buf_putc(nb, ' ');
            cv_buf_append(nb, enc, (size_t)el);
            if (alone)
                cv_buf_putc(nb, ' ');
        }
    }
    /* Words are runs between spaces; other Unicode whitespace became space
     * above. The word buffer is reused for lookups, so copy words out of
     * the normalized text as we go. */
    size_t i = 0;
    while (i < nb->len) {
        while (i < nb->len && nb->data[i] == ' ')
            i++;
        size_t st = i, chars = 0;
        while (i < nb->len && nb->data[i] != ' ') {
            if (((unsigned char)nb->data[i] & 0xC0) != 0x80)
                chars++;
            i++;
        }
        if (i > st)
            word_pieces(t, s, nb->data + st, i - st, chars, out);
    }
}
