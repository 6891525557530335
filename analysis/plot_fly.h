/*
** Figures computed from a stored tensor in one streaming pass, when `analyze` has not stored them
** (`qscope plot`, the workbench's value histogram): fake-quantize with kernels/format_apply, then
** histograms of the relative and absolute error, of |x| and |Q(x)|, the error energy, and the
** per-block RMSE folded into the cells of a heatmap.
*/
#ifndef QS_PLOT_FLY_H
#define QS_PLOT_FLY_H

#include <stdint.h>

#include "plot.h"
#include "results.h"
#include "../kernels/format_apply.h"
#include "../store/db.h"
#include "../store/tensor.h"

#define BINS_PER_BINADE 4
#define HEAT_CELLS 400   /* cells per side of the block heatmap */

typedef struct qs_fly {
    qs_treader *r;
    uint64_t rows, cols;
    double absmax, floor_abs;
    int want_err, want_vals, want_q, want_tiles;
    qs_hist rel, abs, val, qval;
    double sum_x2, sum_e2;
    uint64_t n_finite;
    /* tiles for the heatmap: axis 1 -> rows x ceil(cols/B); axis 0 -> ceil(rows/B) x cols.  Only the
    ** tile-row being filled is held (data come in C order); each finished one goes into the R x C
    ** cells of the figure, as qs_plot_block_heatmap would add its block RMSEs */
    int axis;
    uint64_t tb, trows, tcols, trow;
    double *t_e2;
    uint32_t *t_n;
    size_t R, C;
    double *cell_sum, *cell_cnt;
    float *xbuf;
    size_t xcap;
} qs_fly;

/* A stored tensor open for reading, with its matrix view and absmax (stored statistics, else one
** pass). */
typedef struct qs_plot_tensor {
    qs_db *db;
    qs_tensor_rec t;
    int have_t;
    qs_treader *r;
    uint64_t rows, cols;
    double absmax;
} qs_plot_tensor;

int qs_plot_tensor_open(qs_db *db, const char *name, qs_plot_tensor *T, qs_err *e);
void qs_plot_tensor_close(qs_plot_tensor *T);
/* One pass over the tensor under format a (a == NULL: values only, no quantization), filling what
** F->want_* ask for. */
int qs_fly_run(qs_plot_tensor *T, const qs_apply *a, qs_fly *F, qs_err *e);
void qs_fly_free(qs_fly *F);

/* The value histogram of `qscope plot value-hist`, shared with the workbench so both draw the same
** labelled picture: the histogram of |x|, the histogram of |Q(x)| under the format, and the format's
** representable values in a block whose absmax is given, so that a block format's small values are
** seen to be reached (by other blocks' scales), not missing.  a == NULL: |x| only.  label names the
** format (its canonical label); amax <= 0: the tensor's absmax.  NULL with *e set on failure. */
qs_figure *qs_value_hist_fig(qs_plot_tensor *T, const qs_apply *a, const char *label, double amax, qs_err *e);
qs_figure *qs_value_hist_figure(qs_db *db, const char *tensor, const qs_apply *a, const char *label, double amax,
                                qs_err *e);

#endif
