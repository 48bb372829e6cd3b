/* detok.c — ids -> text: one token's bytes (byte-level characters back to
 * bytes, ▁ back to space, <0xXX> to the raw byte), and the streaming
 * detokenizer that turns those bytes into valid UTF-8 as tokens arrive.
 *
 * Invariant: streaming and one-shot decoding give identical text, because
 * both run the same decoder over the same byte sequence. The decoder follows
 * the WHATWG/Unicode "maximal subpart" rule (each maximal ill-formed subpart
 * becomes one U+FFFD), so its verdict on a byte never depends on bytes after
 * the first one that breaks a sequence; a valid but incomplete tail is all
 * the stream ever holds back. */
#include "tokenizer/tok_int.h"

#include <stdio.h>

/* ---- one token ---- */

static void unescape_spaces(cv_str s, cv_buf *out)
{
    for (size_t i = 0; i < s.len;) {
        if (i + 3 <= s.len && memcmp(s.ptr + i, "\xE2\x96\x81", 3) == 0) {
            cv_buf_putc(out, ' ');
            i += 3;
        } else {
            cv_buf_putc(out, s.ptr[i++]);
        }
    }
}

static void byte_level(const cv_tok *t, cv_str s, cv_buf *out)
{
    for (size_t i = 0; i < s.len;) {
        uint32_t cp;
        int l = cv_utf8_decode(s.ptr + i, s.len - i, &cp);
        if (l > 0 && cp < 324 && t->cp_byte[cp] >= 0) {
            cv_buf_putc(out, (char)t->cp_byte[cp]);
            i += (size_t)l;
        } else {
            /* not a byte-level character (a hand-edited vocabulary): keep it */
            size_t k = l > 0 ? (size_t)l : 1;
            cv_buf_append(out, s.ptr + i, k);
            i += k;
        }
    }
}

static int byte_token(cv_str s)
{
    /* "<0xAB>" */
    if (s.len != 6 || memcmp(s.ptr, "<0x", 3) != 0 || s.ptr[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s.ptr[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

int cv_tok_piece(const cv_tok *t, int32_t id, unsigned flags, cv_buf *out, cv_err *err)
{
    if (id < 0 || id >= t->n_vocab)
        return cv_err_set(err, CV_EINVAL, "token id %d is outside the vocabulary [0, %d)", id, t->n_vocab);
    cv_str s = t->text[id];
    switch (t->type[id]) {
    case CV_TOKTYPE_CONTROL:
    case CV_TOKTYPE_UNKNOWN:
    case CV_TOKTYPE_UNUSED:
        if (!(flags & CV_TOK_SKIP_SPECIAL))
            cv_buf_put_str(out, s);
        return 0;
    case CV_TOKTYPE_USER_DEFINED:
        /* added tokens are stored as their literal text */
        cv_buf_put_str(out, s);
        return 0;
    case CV_TOKTYPE_BYTE: {
        int b = byte_token(s);
        if (b >= 0) {
            cv_buf_putc(out, (char)b);
            return 0;
        }
        break;
    }
    default:
        break;
    }
    if (t->kind == CV_TOK_BPE)
        byte_level(t, s, out);
    else
        unescape_spaces(s, out);
    return 0;
}

/* ---- UTF-8 repair ---- */

/* Length of the sequence a lead byte announces and the range its second
 * byte must be in (Unicode Table 3-7); 0 when c cannot lead. */
static int lead_info(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) { *lo = 0xA0; return 3; }
    if (c >= 0xE1 && c <= 0xEC) return 3;
    if (c == 0xED) { *hi = 0x9F; return 3; }
    if (c >= 0xEE && c <= 0xEF) return 3;
    if (c == 0xF0) { *lo = 0x90; return 4; }
    if (c >= 0xF1 && c <= 0xF3) return 4;
    if (c == 0xF4) { *hi = 0x8F; return 4; }
    return 0;
}

/* Appends the valid text of p[0..n) with ill-formed subparts as U+FFFD.
 * Unless final, a valid but incomplete sequence at the end is not consumed;
 * returns the number of bytes consumed. */
static size_t utf8_repair(const char *p, size_t n, bool final, cv_buf *out)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0, clean = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        unsigned char lo, hi;
        int need = lead_info(s[i], &lo, &hi);
        size_t k = 1;
        bool bad = need == 0;
        while (!bad && k < (size_t)need) {
            if (i + k == n) {
                if (!final) {
                    /* incomplete so far: hold it */
                    cv_buf_append(out, p + clean, i - clean);
                    return i;
                }
                bad = true;
                break;
            }
            unsigned char c = s[i + k];
            if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) {
                bad = true;
                break;
            }
            k++;
        }
        if (bad) {
            cv_buf_append(out, p + clean, i - clean);
            cv_buf_append(out, "\xEF\xBF\xBD", 3);
            i += k; /* the maximal subpart: lead plus the continuation bytes that fitted */
            clean = i;
        } else {
            i += k;
        }
    }
    cv_buf_append(out, p + clean, n - clean);
    return n;
}

/* ---- stream ---- */

void cv_tok_stream_init(cv_tok_stream *s, const cv_tok *t, unsigned flags)
{
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->flags = flags;
    s->at_start = (flags & CV_TOK_AT_START) != 0;
}

static bool strips_first_space(const cv_tok *t)
{
    return (t->kind == CV_TOK_SPM && t->add_space_prefix) || t->kind == CV_TOK_WPM;
}

static void stream_bytes(cv_tok_stream *s, const char *p, size_t n, cv_buf *out)
{
    if (n == 0)
        return;
    char stack[256];
    cv_buf heap = { 0 };
    const char *all = p;
    size_t total = n;
    if (s->n_held > 0) {
        if (s->n_held + n <= sizeof stack) {
            memcpy(stack, s->held, s->n_held);
            memcpy(stack + s->n_held, p, n);
            all = stack;
        } else {
            cv_buf_append(&heap, s->held, s->n_held);
            cv_buf_append(&heap, p, n);
            all = heap.data;
        }
        total = s->n_held + n;
    }
    size_t used = utf8_repair(all, total, false, out);
    s->n_held = (uint8_t)(total - used);
    memcpy(s->held, all + used, s->n_held);
    cv_buf_free(&heap);
}

int cv_tok_stream_feed(cv_tok_stream *s, int32_t id, cv_buf *out, cv_err *err)
{
    const cv_tok *t = s->tok;
    cv_buf piece = { 0 };
    int rc = cv_tok_piece(t, id, s->flags, &piece, err);
    if (rc != 0)
        return rc;
    const char *p = piece.data;
    size_t n = piece.len;
    if (s->at_start && !cv_tok_is_special(t, id)) {
        if (n > 0 && p[0] == ' ' && strips_first_space(t))
            p++, n--;
        s->at_start = false;
    }
    stream_bytes(s, p, n, out);
    cv_buf_free(&piece);
    return 0;
}

void cv_tok_stream_flush(cv_tok_stream *s, cv_buf *out)
{
    if (s->n_held > 0)
        utf8_repair(s->held, s->n_held, true, out);
    s->n_held = 0;
}

/* One-shot: all bytes first, then one repair pass. Written apart from the
 * stream on purpose, so that tests comparing the two check the stream's
 * holding logic rather than comparing a function with itself. */
int cv_tok_decode(const cv_tok *t, const int32_t *ids, size_t n, unsigned flags, cv_buf *out, cv_err *err)
{
    cv_buf raw = { 0 };
    bool at_start = (flags & CV_TOK_AT_START) != 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        size_t before = raw.len;
        if ((rc = cv_tok_piece(t, ids[i], flags, &raw, err)) != 0)
            break;
        if (at_start && !cv_tok_is_special(t, ids[i])) {
            if (raw.len > before && raw.data[before] == ' ' && strips_first_space(t)) {
                memmove(raw.data + before, raw.data + before + 1, raw.len - before - 1);
                raw.len--;
            }
            at_start = false;
        }
    }
    utf8_repair(raw.data ? raw.data : "", raw.len, true, out);
    cv_buf_free(&raw);
    return rc;
}
