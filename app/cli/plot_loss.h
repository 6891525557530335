/*
** The figures of `qscope plot loss [RUN_GLOB...] [--baseline RECIPE_OR_RUN] [--val|--train]`
** (analysis/train_curves.h): the loss of the matching training runs against the step, seeds of one
** configuration as one mean curve with its band, and with a baseline the relative gap per step.
*/
#ifndef QS_PLOT_LOSS_H
#define QS_PLOT_LOSS_H

#include "cli.h"
#include "../../analysis/plot.h"

/* *fig the loss figure, *gap the gap figure (NULL without a baseline), *runs the names drawn
** (comma-separated, for the provenance).  An exit code; a message printed when not QS_EXIT_OK. */
int qs_plot_loss_figs(qs_cli *cli, char *const *globs, int nglobs, const char *baseline, int val, int logy,
                      qs_figure **fig, qs_figure **gap, char **runs);

#endif
