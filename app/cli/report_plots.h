/*
** The PNG plots of a report: per tensor, the error histograms of its formats and the Pareto
** scatter of bits per element against effective bits.  Appends {"title", "file"} objects (file
** relative to dir) to `out`.
*/
#ifndef QS_REPORT_PLOTS_H
#define QS_REPORT_PLOTS_H

#include <jansson.h>

#include "cli.h"
#include "quant_opts.h"
#include "../../store/tensor.h"

int qs_report_plots(qs_cli *cli, qs_db *db, const qs_tensor_rec *t, const qs_apply *apps, int napps, json_t *ranked,
                    const char *dir, int index, json_t *out, qs_err *e);

#endif
