/*
** Running (or reusing) one analysis: shared by `analyze` and `report`.
*/
#ifndef QS_ANALYZE_RUN_H
#define QS_ANALYZE_RUN_H

#include <jansson.h>

#include "../analysis/metrics.h"
#include "../store/tensor.h"

/* Canonical options JSON of a result (format options + analysis switches); caller frees. */
char *qs_analysis_options_json(const qs_apply *a, int blocks);

/* Analyze tensor t under a (or reuse the stored result unless force); *metrics_out is the metrics
** JSON object (caller decrefs); *cached tells which. */
int qs_analyze_one(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                   int show_progress, json_t **metrics_out, int *cached, qs_err *e);

#endif
