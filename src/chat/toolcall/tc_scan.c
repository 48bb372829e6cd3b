/* tc_scan.c — the common scanner: finds the first of a set of markers in
 * text that arrives in pieces. A marker may be split across pieces, so text
 * that could be the start of one is reported for holding (SCAN_PARTIAL) and
 * re-examined when more arrives; the held tail is shorter than the longest
 * marker, which bounds the rescanning and keeps the work linear. Markers are
 * bucketed by first byte, so bytes that start no marker cost one lookup. */
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

void tc_markset_add(tc_markset *s, const char *text, int kind, int arg, const tc_start *st, const cv_tc_format *fmt)
{
    size_t len = strlen(text);
    if (!len)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->m[i].len == len && !memcmp(s->m[i].s, text, len))
            return; /* the first registration of a text wins */
    s->m = cv_xrealloc(s->m, (size_t)(s->n + 1) * sizeof *s->m);
    s->m[s->n++] = (tc_mark){ text, (uint16_t)len, (uint8_t)kind, (uint8_t)arg, st, fmt };
}

void tc_markset_build(tc_markset *s)
{
    for (int i = 0; i < 256; i++) {
        s->first[i] = -1;
        s->count[i] = 0;
    }
    /* a stable insertion sort by first byte: sets are small (< 200) and
     * built once per parser */
    for (int i = 1; i < s->n; i++) {
        tc_mark t = s->m[i];
        int k = i - 1;
        while (k >= 0 && (unsigned char)s->m[k].s[0] > (unsigned char)t.s[0]) {
            s->m[k + 1] = s->m[k];
            k--;
        }
        s->m[k + 1] = t;
    }
    s->maxlen = 0;
    for (int i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->m[i].s[0];
        if (s->first[c] < 0)
            s->first[c] = i;
        s->count[c]++;
        if (s->m[i].len > s->maxlen)
            s->maxlen = s->m[i].len;
    }
}

void tc_markset_fini(tc_markset *s)
{
    free(s->m);
    memset(s, 0, sizeof *s);
}

int tc_scan(const tc_markset *s, const char *p, size_t n, bool eof, size_t *at, const tc_mark **hit, uint64_t *work)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        int k = s->count[c];
        if (!k)
            continue;
        const tc_mark *best = NULL;
        bool partial = false;
        size_t avail = n - i;
        for (int m = s->first[c]; m < s->first[c] + k; m++) {
            const tc_mark *mk = &s->m[m];
            if (work)
                *work += 1;
            if (avail >= mk->len) {
                if (!memcmp(p + i, mk->s, mk->len) && (!best || mk->len > best->len))
                    best = mk;
            } else if (!memcmp(p + i, mk->s, avail)) {
                partial = true;
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
