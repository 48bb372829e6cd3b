/* cli_int.h — helpers shared by the cli's commands and nobody else: a small
 * HTTP GET for local probes, and `corvid serve` as a child process (launch
 * starts one that outlives it, chat one that dies with it), and byte counts
 * as people read them. */
#ifndef CV_CLI_INT_H
#define CV_CLI_INT_H

#include <sys/types.h>

#include "base/base.h"

/* GET url (loopback: no proxy) with an optional Bearer key; returns the HTTP
 * status, or 0 when nothing answered. body receives at most 1 MiB. */
long cv_cli_http_get(const char *url, const char *key, long timeout_ms, cv_buf *body);

typedef struct cv_serve_child {
    const char *model_path;
    const char *served_name;
    const char *host;        /* where it listens */
    int port;
    long n_ctx;              /* 0: serve's default */
    const char *api_key;     /* given to it through CORVID_API_KEY, not argv; NULL: none */
    const char *log_path;    /* its stdout and stderr */
    bool die_with_parent;    /* chat: SIGTERM when this process exits; launch: outlive it */
    const char *const *extra; /* more arguments for serve (other models, --route ...), n_extra of them */
    int n_extra;
} cv_serve_child;

/* Starts `corvid serve` (this binary) in its own session, so a Ctrl-C in the
 * terminal does not reach it, and waits until GET /readyz answers 200. On
 * failure (it exited, or timeout_s passed) returns CV_EIO with the log's last
 * lines in err and leaves no child running. *pid receives its pid. */
int cv_serve_child_start(const cv_serve_child *c, int timeout_s, pid_t *pid, cv_err *err);

/* A loopback TCP port nothing listens on right now. */
int cv_cli_free_port(void);

/* b bytes as "1.9 GB" (decimal units, one decimal place above bytes). */
void cv_human_bytes(int64_t b, char *out, size_t n);

/* $XDG_STATE_HOME/corvid, else ~/.local/state/corvid (created). */
int cv_cli_state_dir(char *out, size_t n, cv_err *err);

#endif
