/* share.c — compute threads shared by the schedulers of several models in
 * one process (sched.h, cv_sched_share). Each scheduler's engine has a
 * stream with a pool of every thread; the share decides, before each step,
 * how many of them that step computes with: n_threads over the schedulers
 * that have work at that moment, so the pools together never run more
 * threads than the machine was given, and a model alone gets all of them.
 *
 * The set of schedulers with work is a list in the order they joined; the
 * first n_threads % k of k get one thread more. A scheduler joins when its
 * engine thread finds work and leaves before it sleeps, so the figures move
 * at step boundaries only, and a step is at most batch_tokens tokens. */
#include <stdlib.h>

#include "sched/sched_int.h"

struct cv_sched_share {
    pthread_mutex_t mu;
    int32_t n_threads;
    const void **busy; /* [cap] the schedulers with work, in the order they joined */
    int32_t n_busy, cap;
};

cv_sched_share *cv_sched_share_create(int32_t n_threads)
{
    cv_sched_share *sh = cv_xcalloc(1, sizeof *sh);
    sh->n_threads = n_threads > 0 ? n_threads : cv_cpu_count();
    pthread_mutex_init(&sh->mu, NULL);
    return sh;
}

void cv_sched_share_destroy(cv_sched_share *sh)
{
    if (!sh)
        return;
    pthread_mutex_destroy(&sh->mu);
    free(sh->busy);
    free(sh);
}

int32_t cv_sched_share_threads(const cv_sched_share *sh) { return sh->n_threads; }

int32_t cv_sched_share_busy(cv_sched_share *sh)
{
    pthread_mutex_lock(&sh->mu);
    const int32_t n = sh->n_busy;
    pthread_mutex_unlock(&sh->mu);
    return n;
}

int32_t cv_sched_share_enter(cv_sched_share *sh, const void *who)
{
    pthread_mutex_lock(&sh->mu);
    int32_t i = 0;
    while (i < sh->n_busy && sh->busy[i] != who)
        i++;
    if (i == sh->n_busy) {
        if (sh->n_busy == sh->cap) {
            sh->cap = sh->cap ? 2 * sh->cap : 8;
            sh->busy = cv_xrealloc(sh->busy, (size_t)sh->cap * sizeof *sh->busy);
        }
        sh->busy[sh->n_busy++] = who;
    }
    const int32_t k = sh->n_busy;
    /* With more schedulers at work than threads each still gets one: the
     * machine is then oversubscribed by the difference. */
    const int32_t n = CV_MAX(1, sh->n_threads / k + (i < sh->n_threads % k));
    pthread_mutex_unlock(&sh->mu);
    return n;
}

void cv_sched_share_leave(cv_sched_share *sh, const void *who)
{
    pthread_mutex_lock(&sh->mu);
    for (int32_t i = 0; i < sh->n_busy; i++)
        if (sh->busy[i] == who) {
            memmove(sh->busy + i, sh->busy + i + 1, (size_t)(sh->n_busy - i - 1) * sizeof *sh->busy);
            sh->n_busy--;
            break;
        }
    pthread_mutex_unlock(&sh->mu);
}
