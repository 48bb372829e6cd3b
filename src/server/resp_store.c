/* resp_store.c — the bounded in-memory store behind /v1/responses'
 * previous_response_id: response id → the conversation up to and including
 * that response's output (chat.h messages). Least recently used goes first
 * when full. A doubly linked list in recency order with a linear search:
 * capacities are hundreds to a few thousand and a lookup costs microseconds
 * next to rendering the conversation it returns. Thread-safe. */
#include <pthread.h>
#include <stdlib.h>

#include "server/resp_store.h"

typedef struct entry {
    struct entry *prev, *next; /* prev: more recent */
    char *id;
    json_t *messages;
} entry;

struct cv_resp_store {
    pthread_mutex_t mu;
    entry *head, *tail; /* head: most recent */
    int count, capacity;
};

cv_resp_store *cv_resp_store_create(int capacity)
{
    cv_resp_store *s = cv_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->capacity = capacity > 0 ? capacity : 1;
    return s;
}

static void unlink_entry(cv_resp_store *s, entry *e)
{
    if (e->prev) e->prev->next = e->next; else s->head = e->next;
    if (e->next) e->next->prev = e->prev; else s->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(cv_resp_store *s, entry *e)
{
    e->prev = NULL;
    e->next = s->head;
    if (s->head) s->head->prev = e;
    s->head = e;
    if (!s->tail) s->tail = e;
}

static void free_entry(entry *e)
{
    free(e->id);
    json_decref(e->messages);
    free(e);
}

void cv_resp_store_destroy(cv_resp_store *s)
{
    if (!s) return;
    for (entry *e = s->head, *n; e; e = n) {
        n = e->next;
        free_entry(e);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static entry *find(cv_resp_store *s, const char *id)
{
    for (entry *e = s->head; e; e = e->next)
        if (!strcmp(e->id, id))
            return e;
    return NULL;
}

void cv_resp_store_put(cv_resp_store *s, const char *id, json_t *messages)
{
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, id);
    if (e) {
        unlink_entry(s, e);
        json_decref(e->messages);
    } else {
        if (s->count == s->capacity) {
            entry *old = s->tail;
            unlink_entry(s, old);
            free_entry(old);
            s->count--;
        }
        e = cv_xcalloc(1, sizeof *e);
        e->id = cv_xstrdup(id);
        s->count++;
    }
    e->messages = json_incref(messages);
    push_front(s, e);
    pthread_mutex_unlock(&s->mu);
}

json_t *cv_resp_store_get(cv_resp_store *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, id);
    json_t *v = NULL;
    if (e) {
        unlink_entry(s, e);
        push_front(s, e);
        v = json_incref(e->messages);
    }
    pthread_mutex_unlock(&s->mu);
    return v;
}

int cv_resp_store_count(cv_resp_store *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}
