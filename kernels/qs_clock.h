/* Monotonic seconds, for timing and progress only (never part of a result). */
#ifndef QS_CLOCK_H
#define QS_CLOCK_H

#include <time.h>

static inline double qs_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
