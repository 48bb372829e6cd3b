/* stop.h — stop strings over streamed text (stop.c), private to
 * src/server/: the generation pipeline holds text back through it. */
#ifndef CV_SERVER_STOP_H
#define CV_SERVER_STOP_H

#include "base/base.h"

/* Holds back generated text while it may be the start of a stop string, so
 * a stop string never reaches the client, not even in part. */
typedef struct cv_stop {
    char *const *stops;
    int n_stops;
    cv_buf pending;
} cv_stop;

void cv_stop_init(cv_stop *s, char *const *stops, int n_stops);
void cv_stop_fini(cv_stop *s);
/* Adds text; appends to out what can no longer be part of a stop string.
 * Returns the index of the stop string found (out then holds everything
 * before it, the rest is dropped), or -1. */
int cv_stop_feed(cv_stop *s, cv_str text, cv_buf *out);
/* End of generation: appends what was held back. */
void cv_stop_flush(cv_stop *s, cv_buf *out);

#endif
