/* Timing helpers shared by the benchmarks (`qscope bench`, `qscope bench formats`). */
#ifndef QS_BENCH_UTIL_H
#define QS_BENCH_UTIL_H

#include <time.h>

static inline double qs_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator for doubles (timings are sorted to take min and median) */
static inline int qs_bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
