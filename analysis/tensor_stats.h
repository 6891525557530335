/*
** Tensor statistics: one streaming computation of everything `qscope show` reports.
**
** Input comes through a read callback (elements in logical C order, decoded to float32), so the
** same code serves mmapped files, SQLite blobs and generators, with bounded memory whatever the
** tensor size.  Work is split into fixed-size chunks whose partial results are merged in chunk
** order, so the result is bit-identical for any number of threads.
**
** Edge cases: with no finite values, min, max, mean, absmax and the percentiles are NaN, and std,
** kurtosis and both fractions are 0; std and kurtosis are 0 for constant data; NaN and Inf are
** counted but left out of every other statistic, including the matrix view.
*/
#ifndef QS_TENSOR_STATS_H
#define QS_TENSOR_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

/* Read n elements starting at element `start` into out.  0 ok, -1 error (message in e). */
typedef int (*qs_read_fn)(void *ctx, uint64_t start, size_t n, float *out, qs_err *e);

#define QS_NPCT 9
extern const double qs_stat_pcts[QS_NPCT];   /* 0.1 1 5 25 50 75 95 99 99.9 (percent) */

#define QS_TOPK 8

typedef struct qs_axis_summary {   /* summary of the per-row (or per-column) absmax vector */
    double min, median, max, mean;
    uint64_t argmax;               /* index of the row/column with the largest absmax */
} qs_axis_summary;

typedef struct qs_tensor_stats {
    uint64_t n, n_finite, n_nan, n_inf, n_zero;
    /* over finite values (NaN/Inf are counted above, excluded here) */
    double min, max, mean, std, absmax;
    double kurtosis;               /* Pearson m4/m2^2 (Gaussian = 3); 0 when std = 0 */
    double zero_frac;              /* exact zeros / n_finite */
    double outlier_frac;           /* |x - mean| > 6 std, / n_finite */
    double pct[QS_NPCT];           /* exact percentiles (numpy 'linear' interpolation) */
    /* matrix view: rows x cols (for ndim >= 2, rows = product of leading dims, cols = last) */
    uint64_t rows, cols;           /* 0, 0 when no matrix view was requested */
    qs_axis_summary row_absmax, col_absmax;
    int ntop;                      /* columns (channels) with the largest absmax, descending */
    uint64_t top_cols[QS_TOPK];
    double top_cols_absmax[QS_TOPK];
} qs_tensor_stats;

/* Compute all statistics.  rows*cols must equal numel when rows > 0.  nthreads >= 1.  If
** read_threadsafe is 0 the reads are serialised (compute still runs in parallel). */
int qs_tensor_stats_compute(qs_read_fn read, void *ctx, int read_threadsafe, uint64_t numel,
                            uint64_t rows, uint64_t cols, int nthreads, qs_tensor_stats *out,
                            qs_err *e);

#endif
