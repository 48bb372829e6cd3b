/* resp_store.h — the /v1/responses store (resp_store.c), private to
 * src/server/: a bounded LRU of conversations for previous_response_id,
 * which the server owns and the Responses wire reads and fills. */
#ifndef CV_SERVER_RESP_STORE_H
#define CV_SERVER_RESP_STORE_H

#include "base/base.h"

typedef struct cv_resp_store cv_resp_store;

cv_resp_store *cv_resp_store_create(int capacity);
void cv_resp_store_destroy(cv_resp_store *s);
/* Keeps (id → conversation so far, messages in chat.h shape, including the
 * response's own output). The store takes a reference to messages. The
 * least recently used entry goes when full. */
void cv_resp_store_put(cv_resp_store *s, const char *id, json_t *messages);
/* A new reference (caller decrefs) or NULL when absent or evicted. */
json_t *cv_resp_store_get(cv_resp_store *s, const char *id);
int cv_resp_store_count(cv_resp_store *s);

#endif
