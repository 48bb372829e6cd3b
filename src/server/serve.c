/* serve.c — running a server until SIGINT/SIGTERM: the signals are blocked
 * before any HTTP thread exists (threads inherit the mask), so only the
 * calling thread receives them, in sigwait. Then the drain (cv_server_stop):
 * requests for the model get 503 + Retry-After and /health/ready 503, those
 * running get grace_ms to finish, the rest are cut and end with their wire's
 * error, and the function returns 0; the caller then closes the backend
 * (which saves the prefix cache) and the process exits 0. */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "server/server.h"

int cv_server_run(const cv_server_config *cfg, const cv_server_backend *be, int grace_ms,
                  void (*on_listen)(void *ud, int port), void *ud, cv_err *err)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);
    cv_server *s;
    int rc = cv_server_start(cfg, be, &s, err);
    if (rc) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    if (on_listen)
        on_listen(ud, cv_server_port(s));
    int sig = 0;
    sigwait(&set, &sig);
    cv_info("%s: draining: new requests get 503, running ones get up to %d ms to finish",
            sig == SIGINT ? "SIGINT" : "SIGTERM", grace_ms);
    cv_server_stop(s, grace_ms);
    cv_server_destroy(s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return 0;
}
