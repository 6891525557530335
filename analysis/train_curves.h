/*
** Loss curves of stored training runs (store/train_store.h) for `plot loss`, the workbench's
** Training view and the report: runs of the same recipe, model and options apart from the seed (a
** sweep's seeds) become one curve, the mean over the seeds with a band — min..max with two seeds,
** the 95% Student-t interval of the mean with three or more — and the relative gap of each curve to
** a baseline curve, step by step.
*/
#ifndef QS_TRAIN_CURVES_H
#define QS_TRAIN_CURVES_H

#include <stddef.h>

#include "plot.h"
#include "../store/train_store.h"

typedef enum qs_band { QS_BAND_NONE = 0, QS_BAND_MINMAX, QS_BAND_T95 } qs_band;

typedef struct qs_loss_curve {
    char label[128];            /* legend: the run's name, or "RECIPE (k seeds, BAND)" */
    char recipe[64];
    const char *model;          /* the first run's model JSON (owned by the run list) */
    int nruns;
    qs_band band;               /* by nruns */
    size_t n;
    double *x, *mean, *lo, *hi; /* per step (validation curves: step 0 is val0); lo/hi NaN without a band */
    double final, final_lo, final_hi;   /* over the runs' last measured values (val_final or the last train loss) */
} qs_loss_curve;

/* The curves of runs[0..n) (validation loss when val, else train loss), in the order of the runs'
** first appearance.  The steps are read from db. */
int qs_loss_curves(qs_db *db, const qs_train_run_item *runs, size_t n, int val, qs_loss_curve **out, size_t *nout,
                   qs_err *e);
void qs_loss_curves_free(qs_loss_curve *c, size_t n);

/* Whether two runs belong to one curve: same recipe, model and options apart from the seed and the
** checkpoint directory (`out`). */
int qs_train_same_config(const qs_train_run_item *a, const qs_train_run_item *b);

/* The two-sided 95% Student-t quantile for df degrees of freedom (1.96 beyond 30). */
double qs_t95(int df);

/* Loss against step: one line per curve, its band as two thin dotted lines of its colour. */
qs_figure *qs_plot_loss(const char *title, const qs_loss_curve *c, size_t n, int val, int logy);
/* (loss - baseline) / baseline in % per step, for every curve but the baseline itself. */
qs_figure *qs_plot_loss_gap(const char *title, const qs_loss_curve *c, size_t n, const qs_loss_curve *base);

#endif
