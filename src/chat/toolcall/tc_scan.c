/* tc_scan.c — the common scanner: finds the first of a set of markers in
 * text that arrives in pieces. A marker may be split across pieces, so text
 * that could be the start of one is reported for holding (SCAN_PARTIAL) and
 * re-examined when more arrives; the held tail is shorter than the longest
 * marker, which bounds the rescanning and keeps the work linear. Markers are
 * indexed by their first byte (a byte that starts none costs one lookup) and
 * by their first two bytes, so a '<' in prose is compared only with the
 * markers that start like the bytes after it, not with every tag. */
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

void tc_markset_add(tc_markset *s, const char *text, int kind, int arg, const tc_start *st, const cv_tc_format *fmt)
{
    size_t len = strlen(text);
    if (!len)
        return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->m = cv_xrealloc(s->m, (size_t)s->cap * sizeof *s->m);
    }
    s->m[s->n++] = (tc_mark){ text, (uint16_t)len, (uint8_t)kind, (uint8_t)arg, st, fmt };
}

static unsigned pair_hash(unsigned char a, unsigned char b)
{
    return ((unsigned)a * 31u + b) % TC_PAIR_BUCKETS;
}

/* A marker's text and where it was registered, for finding repeats. */
typedef struct mark_key {
    const char *s;
    size_t len;
    int i;
} mark_key;

static int key_cmp(const void *a, const void *b)
{
    const mark_key *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len);
    return c ? c : x->i - y->i;
}

/* The first registration of a text wins: later ones go, the rest keep
 * their order. Sorting keys makes this O(n log n); an output-detection set
 * holds every row's markers, several hundred. */
static void drop_repeats(tc_markset *s)
{
    if (s->n < 2)
        return;
    mark_key *k = cv_xmalloc((size_t)s->n * sizeof *k);
    bool *drop = cv_xcalloc((size_t)s->n, sizeof *drop);
    for (int i = 0; i < s->n; i++)
        k[i] = (mark_key){ s->m[i].s, s->m[i].len, i };
    qsort(k, (size_t)s->n, sizeof *k, key_cmp);
    for (int i = 1; i < s->n; i++)
        if (k[i].len == k[i - 1].len && !memcmp(k[i].s, k[i - 1].s, k[i].len))
            drop[k[i].i] = true;
    int n = 0;
    for (int i = 0; i < s->n; i++)
        if (!drop[i])
            s->m[n++] = s->m[i];
    s->n = n;
    free(k);
    free(drop);
}

void tc_markset_build(tc_markset *s)
{
    drop_repeats(s);
    /* all-ones bytes are -1 in every table (a set is built once per row and
     * options, tc_stream.c's use_marks) */
    memset(s->first, 0xff, sizeof s->first);
    memset(s->count, 0, sizeof s->count);
    memset(s->pair, 0xff, sizeof s->pair);
    memset(s->single, 0xff, sizeof s->single);
    /* a stable counting sort by first byte */
    for (int i = 0; i < s->n; i++)
        s->count[(unsigned char)s->m[i].s[0]]++;
    int at[256];
    for (int c = 0, sum = 0; c < 256; c++) {
        at[c] = sum;
        sum += s->count[c];
    }
    tc_mark *sorted = cv_xmalloc((size_t)(s->n ? s->n : 1) * sizeof *sorted);
    for (int i = 0; i < s->n; i++)
        sorted[at[(unsigned char)s->m[i].s[0]]++] = s->m[i];
    free(s->m);
    s->m = sorted;
    s->cap = s->n ? s->n : 1;
    s->maxlen = 0;
    free(s->next);
    s->next = cv_xcalloc((size_t)(s->n ? s->n : 1), sizeof *s->next);
    for (int i = s->n - 1; i >= 0; i--) {
        const tc_mark *m = &s->m[i];
        unsigned char c = (unsigned char)m->s[0];
        if (m->len == 1) {
            s->single[c] = (int16_t)i;
        } else {
            unsigned h = pair_hash(c, (unsigned char)m->s[1]);
            s->next[i] = s->pair[h];
            s->pair[h] = (int16_t)i;
        }
    }
    for (int i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->m[i].s[0];
        if (s->first[c] < 0)
            s->first[c] = i;
        if (s->m[i].len > s->maxlen)
            s->maxlen = s->m[i].len;
    }
}

/* Compares marker mk with p[0..avail): updates best (longest full match)
 * and partial (a longer one may still match). */
static void try_mark(const tc_mark *mk, const char *p, size_t avail, const tc_mark **best, bool *partial)
{
    if (avail >= mk->len) {
        if (!memcmp(p, mk->s, mk->len) && (!*best || mk->len > (*best)->len))
            *best = mk;
    } else if (!memcmp(p, mk->s, avail)) {
        *partial = true;
    }
}

int tc_scan(const tc_markset *s, const char *p, size_t n, bool eof, size_t *at, const tc_mark **hit, uint64_t *work)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!s->count[c])
            continue;
        const tc_mark *best = NULL;
        bool partial = false;
        size_t avail = n - i;
        if (s->single[c] >= 0)
            try_mark(&s->m[s->single[c]], p + i, avail, &best, &partial);
        if (avail >= 2) {
            unsigned char d = (unsigned char)p[i + 1];
            for (int k = s->pair[pair_hash(c, d)]; k >= 0; k = s->next[k]) {
                const tc_mark *mk = &s->m[k];
                if (work)
                    *work += 1;
                if ((unsigned char)mk->s[0] == c && (unsigned char)mk->s[1] == d)
                    try_mark(mk, p + i, avail, &best, &partial);
            }
        } else {
            /* the last byte: any longer marker starting with it may follow */
            for (int m = s->first[c]; m < s->first[c] + s->count[c]; m++) {
                if (work)
                    *work += 1;
                try_mark(&s->m[m], p + i, avail, &best, &partial);
            }
        }
        if (partial && !eof) {
            /* a longer marker may still complete here: decide later */
            *at = i;
            *hit = NULL;
            return SCAN_PARTIAL;
        }
        if (best) {
            *at = i;
            *hit = best;
            return SCAN_HIT;
        }
    }
    if (work)
        *work += n;
    *at = n;
    *hit = NULL;
    return SCAN_NONE;
}
