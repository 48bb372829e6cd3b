/* tc_harness.h — helpers shared by the tool-call tests: running a parser over
 * a text split into chunks in several ways, a collector that checks the event
 * stream's grammar as it assembles the result, and loose JSON comparison
 * (numbers by value, key order ignored) the way the fixtures' peers compare.
 * Header-only: each test binary includes it once. */
#ifndef TC_HARNESS_H
#define TC_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"

/* ---- a checking collector ---- */

typedef struct tc_coll {
    cv_chat_parse_result res;
    int open;          /* index of the call between BEGIN and END, -1 none */
    int next;          /* the index the next BEGIN must carry */
    int n_args_events; /* TOOL_ARGS events seen */
    char bad[256];     /* the first grammar violation */
    const cv_tc_format *detected; /* cv_chat_parse_detected at the end */
} tc_coll;

static inline void tc_coll_init(tc_coll *c)
{
    memset(c, 0, sizeof *c);
    c->open = -1;
}

static inline void tc_coll_fini(tc_coll *c) { cv_chat_parse_result_fini(&c->res); }

static inline void tc_coll_bad(tc_coll *c, const char *why, int idx)
{
    if (!c->bad[0])
        snprintf(c->bad, sizeof c->bad, "%s (index %d)", why, idx);
}

static inline void tc_coll_fn(void *ud, const cv_chat_event *ev)
{
    tc_coll *c = ud;
    switch (ev->type) {
    case CV_CHAT_CONTENT:
    case CV_CHAT_REASONING:
        if (c->open >= 0)
            tc_coll_bad(c, "text inside a tool call", c->open);
        if (!ev->text.len)
            tc_coll_bad(c, "empty text event", -1);
        break;
    case CV_CHAT_TOOL_BEGIN:
        if (c->open >= 0)
            tc_coll_bad(c, "BEGIN inside a call", ev->index);
        if (ev->index != c->next)
            tc_coll_bad(c, "BEGIN index out of order", ev->index);
        if (!ev->name.len || !ev->id.len)
            tc_coll_bad(c, "BEGIN without name or id", ev->index);
        c->open = ev->index;
        c->next++;
        break;
    case CV_CHAT_TOOL_ARGS:
        if (ev->index != c->open)
            tc_coll_bad(c, "ARGS for a call that is not open", ev->index);
        c->n_args_events++;
        break;
    case CV_CHAT_TOOL_END:
        if (ev->index != c->open)
            tc_coll_bad(c, "END for a call that is not open", ev->index);
        c->open = -1;
        break;
    }
    cv_chat_parse_result_collect(&c->res, ev);
}

/* ---- chunkings ---- */

enum { CH_WHOLE, CH_BYTES, CH_RANDOM, CH_TOKENS };

/* Length of the next token-like piece at p: a special token (<|..|>,
 * <｜..｜>, [A-Z_]+, <tag>), a word, or one byte. */
static inline size_t tc_token_len(const char *p, size_t n)
{
    if (n >= 2 && p[0] == '<') {
        for (size_t i = 1; i < n && i < 48; i++) {
            if (p[i] == '>')
                return i + 1;
            if (p[i] == '<' || p[i] == '\n' || p[i] == ' ')
                break;
        }
    }
    if (p[0] == '[') {
        size_t i = 1;
        while (i < n && i < 24 && ((p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_' || p[i] == '/'))
            i++;
        if (i < n && p[i] == ']' && i > 1)
            return i + 1;
    }
    size_t i = 0;
    while (i < n && i < 12 && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
        i++;
    return i ? i : 1;
}

/* Feeds text to a new parser in the given chunking; finishes unless
 * partial. Returns 0 or the parser's error. */
static inline int tc_run_chunked(const cv_chat_parse_opts *o, const char *text, size_t len, int how, uint64_t seed,
                          bool partial, tc_coll *c, uint64_t *work)
{
    cv_chat_parse *p;
    cv_err err = { 0 };
    tc_coll_init(c);
    int rc = cv_chat_parse_create(o, tc_coll_fn, c, &p, &err);
    if (rc) {
        fprintf(stderr, "create: %s\n", err.msg);
        return rc;
    }
    cv_rng rng;
    cv_rng_seed(&rng, seed);
    size_t i = 0;
    while (i < len && !rc) {
        size_t k = len - i;
        if (how == CH_BYTES)
            k = 1;
        else if (how == CH_RANDOM)
            k = 1 + (size_t)cv_rng_below(&rng, 17);
        else if (how == CH_TOKENS)
            k = tc_token_len(text + i, len - i);
        if (k > len - i)
            k = len - i;
        rc = cv_chat_parse_feed(p, text + i, k, &err);
        i += k;
    }
    if (!rc && !partial)
        rc = cv_chat_parse_finish(p, &err);
    if (work)
        *work = cv_chat_parse_work(p);
    c->detected = cv_chat_parse_detected(p);
    cv_chat_parse_destroy(p);
    return rc;
}

/* Whether two results are identical, byte for byte. */
static inline bool tc_same_result(const cv_chat_parse_result *a, const cv_chat_parse_result *b, char *why, size_t wn)
{
    if (a->content.len != b->content.len || (a->content.len && memcmp(a->content.data, b->content.data, a->content.len))) {
        snprintf(why, wn, "content \"%.80s\" vs \"%.80s\"", a->content.data ? a->content.data : "",
                 b->content.data ? b->content.data : "");
        return false;
    }
    if (a->reasoning.len != b->reasoning.len ||
        (a->reasoning.len && memcmp(a->reasoning.data, b->reasoning.data, a->reasoning.len))) {
        snprintf(why, wn, "reasoning \"%.80s\" vs \"%.80s\"", a->reasoning.data ? a->reasoning.data : "",
                 b->reasoning.data ? b->reasoning.data : "");
        return false;
    }
    if (a->n_calls != b->n_calls) {
        snprintf(why, wn, "%d calls vs %d", a->n_calls, b->n_calls);
        return false;
    }
    for (int i = 0; i < a->n_calls; i++) {
        if (strcmp(a->calls[i].name, b->calls[i].name) || strcmp(a->calls[i].id, b->calls[i].id) ||
            strcmp(a->calls[i].arguments, b->calls[i].arguments)) {
            snprintf(why, wn, "call %d: %s %s %.100s vs %s %s %.100s", i, a->calls[i].name, a->calls[i].id,
                     a->calls[i].arguments, b->calls[i].name, b->calls[i].id, b->calls[i].arguments);
            return false;
        }
    }
    return true;
}

/* ---- JSON comparison ---- */

static inline bool tc_json_loose_eq(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !tc_json_loose_eq(v, w))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!tc_json_loose_eq(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

/* Copies s without the whitespace outside JSON strings. */
static inline char *tc_strip_json_ws(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1), *q = o;
    bool in = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in = false;
            *q++ = ch;
            continue;
        }
        if (ch == '"')
            in = true;
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r')
            continue;
        *q++ = ch;
    }
    *q = 0;
    return o;
}

/* Copies s[0..n) trimmed of surrounding whitespace. */
static inline char *tc_trim_dup(const char *s, size_t n)
{
    if (!s)
        s = "";
    while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return cv_xstrndup(s, n);
}

/* Copies s without any whitespace at all. */
static inline char *tc_no_ws(const char *s, size_t n)
{
    char *o = malloc(n + 1), *q = o;
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r')
            *q++ = s[i];
    *q = 0;
    return o;
}

#endif
