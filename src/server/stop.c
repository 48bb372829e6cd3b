/* stop.c — stop strings over streamed text. Generated text arrives in
 * pieces; a stop string may straddle pieces, and none of it may reach the
 * client. The matcher keeps back the longest tail of the pending text that
 * is a proper prefix of some stop string and releases the rest. Text is
 * whole UTF-8 characters (the detokenizer never splits one) and a stop
 * string starts on a character boundary, so a held tail never splits a
 * character either. Cost per piece: O(pending × stops), pending being at
 * most the longest stop string plus the piece. */
#include "server/stop.h"

void cv_stop_init(cv_stop *s, char *const *stops, int n_stops)
{
    memset(s, 0, sizeof *s);
    s->stops = stops;
    s->n_stops = n_stops;
}

void cv_stop_fini(cv_stop *s) { cv_buf_free(&s->pending); }

/* Earliest occurrence of any stop string; ties go to the longest, so
 * "</tool>" wins over "</" when both start at the same place. */
static int find_stop(const cv_stop *s, size_t *at)
{
    int best = -1;
    size_t best_at = 0, best_len = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t n = strlen(s->stops[i]);
        if (!n || n > s->pending.len)
            continue;
        const char *p = memmem(s->pending.data, s->pending.len, s->stops[i], n);
        if (!p)
            continue;
        size_t pos = (size_t)(p - s->pending.data);
        if (best < 0 || pos < best_at || (pos == best_at && n > best_len)) {
            best = i;
            best_at = pos;
            best_len = n;
        }
    }
    *at = best_at;
    return best;
}

/* Length of the longest suffix of pending that is a proper prefix of a stop. */
static size_t held_tail(const cv_stop *s)
{
    size_t hold = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t n = strlen(s->stops[i]);
        size_t max = CV_MIN(n ? n - 1 : 0, s->pending.len);
        for (size_t k = max; k > hold; k--)
            if (!memcmp(s->pending.data + s->pending.len - k, s->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

int cv_stop_feed(cv_stop *s, cv_str text, cv_buf *out)
{
    if (!s->n_stops) {
        cv_buf_append(out, text.ptr, text.len);
        return -1;
    }
    cv_buf_append(&s->pending, text.ptr, text.len);
    size_t at;
    int hit = find_stop(s, &at);
    if (hit >= 0) {
        cv_buf_append(out, s->pending.data, at);
        cv_buf_reset(&s->pending);
        return hit;
    }
    size_t keep = held_tail(s);
    cv_buf_append(out, s->pending.data, s->pending.len - keep);
    cv_buf_consume(&s->pending, s->pending.len - keep);
    return -1;
}

void cv_stop_flush(cv_stop *s, cv_buf *out)
{
    cv_buf_append(out, s->pending.data, s->pending.len);
    cv_buf_reset(&s->pending);
}
