/* Timing helpers shared by the benchmarks (`qscope bench`, `qscope bench formats`). */
#ifndef QS_BENCH_UTIL_H
#define QS_BENCH_UTIL_H

#include "../../kernels/qs_clock.h"

/* qsort comparator for doubles (timings are sorted to take min and median) */
static inline int qs_bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
