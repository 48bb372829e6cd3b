/* arena.c — bump allocation for per-request scratch. Chunks grow
 * geometrically; everything is released by one cv_arena_reset. Large
 * requests get a chunk of their own so they waste nothing. */
#include <stdlib.h>

#include "base/base.h"

struct cv_arena_chunk {
    cv_arena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void *cv_arena_alloc(cv_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    cv_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? c->cap * 2 : 4096;
        if (cap > (1u << 24)) cap = 1u << 24;
        if (cap < n) cap = n;
        cv_arena_chunk *nc = cv_xmalloc(sizeof *nc + cap);
        nc->cap = cap;
        nc->used = 0;
        nc->next = a->head;
        a->head = nc;
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used_bytes += n;
    memset(p, 0, n);
    return p;
}

char *cv_arena_strndup(cv_arena *a, const char *s, size_t n)
{
    char *d = cv_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void cv_arena_reset(cv_arena *a)
{
    cv_arena_chunk *c = a->head;
    while (c) {
        cv_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}
