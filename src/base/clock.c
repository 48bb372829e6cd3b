/* clock.c — monotonic and wall clocks. */
#include <time.h>

#include "base/base.h"

uint64_t cv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double cv_now_s(void) { return (double)cv_now_ns() * 1e-9; }

int64_t cv_unix_time(void) { return (int64_t)time(NULL); }
