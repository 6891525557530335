/*
** Stored analysis results: the `result` table (one row per tensor hash x kind x format x options x
** tool version, data as JSON) and `result_blob` (named binary arrays of a result, e.g. per-block
** errors as float32), so a result is computed once and reused by `analyze`, `report`, `plot` and
** the workbench.
**
** Kinds written by `qscope analyze` (all JSON objects):
**   "metrics"   the qs_metrics fields (see metrics.h) by name
**   "hist"      {"value": H, "abs_err": H, "rel_err": H, "ulp_err": H, "scale_code": H,
**                "block_err": H}  with H = {"scale": "log2"|"linear"|"code", "edges": [..n+1..],
**                "counts": [..n..], "zero": c, "under": c, "over": c, "nonfinite": c}
**   "blocks"    {"nblocks": N, "block": B, "axis": A, "rows": R, "cols": C} with blobs
**                "scale_code" (u8 per block, MX/NVFP4 only), "absmax" (f32 per block),
**                "ratio" (f32 amax/scale), "rmse" (f32 per block), "row_rmse", "col_rmse" (f32)
** Kind written by `qscope llm eval` (docs/llm.md "llm eval"): "llm_eval", tensor_hash = the model file's
** hash, format = the config label ("reference" for FP32), options = {text hash, ctx, chunks, score,
** bos, numerics}; data = the variant's statistics with "kl_hist" (log2 bins of per-token KL); blobs
** "nll" (f32 per scored token) and, for configs, "kl".  The data also carries "run" {model (name), text
** (the path given), tensor_types} for its readers (analysis/llm_eval_store.h: the workbench's Model
** view, `plot kl`, the report), since the key holds only hashes.
** Options JSON is canonical (sorted keys, see app/quant_opts.c) so equal options compare equal.
*/
#ifndef QS_RESULTS_H
#define QS_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "../store/db.h"

/* Insert or replace; returns the row id.  tool version is QS_VERSION. */
int qs_result_put(qs_db *db, const char *tensor_hash, const char *kind, const char *format,
                  const char *options_json, const char *data_json, int64_t *id, qs_err *e);
/* Look up a result of the current tool version: *data = malloc'd JSON text (NULL when absent). */
int qs_result_get(qs_db *db, const char *tensor_hash, const char *kind, const char *format,
                  const char *options_json, char **data, int64_t *id, qs_err *e);
int qs_result_blob_put(qs_db *db, int64_t result_id, const char *name, const void *data, size_t nbytes,
                       qs_err *e);
/* *data = malloc'd bytes (NULL, 0 when absent). */
int qs_result_blob_get(qs_db *db, int64_t result_id, const char *name, void **data, size_t *nbytes,
                       qs_err *e);

#endif
