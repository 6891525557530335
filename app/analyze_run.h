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
** JSON object (caller decrefs); *cached tells which.  vcache (may be NULL) carries the tensor's value
** histogram from one format to the next of a sweep: empty (counts NULL) it is filled by the first
** analysis computed, then reused; the caller frees it (qs_value_cache_clear) between tensors. */
int qs_analyze_one(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                   int show_progress, qs_hist *vcache, json_t **metrics_out, int *cached, qs_err *e);
/* The same with the engine's progress callback (which may cancel: nothing is then stored) in place
** of the terminal progress bar; metrics_out may be NULL.  The workbench's worker uses it. */
int qs_analyze_one_cb(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                      int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, json_t **metrics_out,
                      int *cached, qs_err *e);
void qs_value_cache_clear(qs_hist *vcache);

#endif
