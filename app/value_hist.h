/*
** The value histogram of `qscope plot value-hist` (app/cmd_plot.c), shared with the workbench so both
** draw the same labelled picture: the histogram of |x|, the histogram of |Q(x)| under the format, and
** the format's representable values in a block whose absmax is given — so a block format's small
** values are seen to be reached (by other blocks' scales), not missing.
*/
#ifndef QS_VALUE_HIST_H
#define QS_VALUE_HIST_H

#include "../analysis/plot.h"
#include "../kernels/format_apply.h"
#include "../store/db.h"

/* One streaming pass over the stored tensor; a == NULL: |x| only.  label names the format (its
** canonical label); amax <= 0: the tensor's absmax.  NULL with *e set on failure. */
qs_figure *qs_value_hist_figure(qs_db *db, const char *tensor, const qs_apply *a, const char *label, double amax,
                                qs_err *e);

#endif
