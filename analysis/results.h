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
** "nll" (f32 per scored token) and, for configs, "kl" and "dp".  The data also carries "run" {model (name), text
** (the path given), tensor_types} for its readers (analysis/llm_eval_store.h: the workbench's Model
** view, `plot kl`, the report), since the key holds only hashes.  It is assembled from its chunks:
** "llm_eval_chunk" (analysis/llm_eval_chunk.h), one per variant and chunk, stored as the chunk is
** done (a transaction each): format = the config label, options = the variant's options without
** "chunks", with "chunk": c (0-based); data = {"scored" (tokens of the chunk), "logit_rows",
** "activation_values" (non-finite counts), "first_layer", "first_site" (-1 / site id), "compute_seconds"};
** blobs "nll" and, for configs, "kl", "dp" (f64 per scored token, as computed) and "same_top" (u8).  An
** interrupted or larger evaluation reuses them; the readers of "llm_eval" never see them.
** Kinds written by `qscope llm sensitivity` (docs/llm.md "llm sensitivity"), tensor_hash = the model
** file's hash, format = the format label (e.g. "mxfp4"):
**   "llm_sensitivity"  options = {text hash, ctx, chunks, score, bos, format (canonical options),
**                sites, scaled_casts}; data = {"model", "text", "tokens", "scored_tokens", "ctx",
**                "chunks", "score", "format", "sites": [S names], "layers": L, "reference": {ppl, ppl_se},
**                "kl_mean", "kl_se", "dppl", "top1_agree": [L][S] arrays (site s of layer l alone at the
**                format, all else FP32; dppl = PPL/PPL_ref - 1), "bits_fp32" (32 x all counted elements),
**                "bits_format", "bits_bf16", "site_params": [{site, unit "parameters"|"per_token",
**                elements (per layer), bits_per_elem}], "plan": {"order": [{layer, site, kl,
**                extra_bits, kl_per_bit, predicted_kl, bits_avg}] (the whole greedy ranking, cumulative),
**                "predicted_kl_format", "bits_avg_format"}}
**   "llm_plan"   options = the sensitivity options + {"kl_target": X} and/or {"bits_budget": B};
**                data = {"target": {kl, bits}, "steps", "promoted": [{layer, site}], "bf16": [L][S] 0/1,
**                "predicted_kl", "bits_avg", "measured": the `llm eval` summary of the combined plan (kl_mean,
**                kl_se, kl_median, kl_p99, kl_max, ppl, dppl_rel, dppl_rel_ci95, top1_agree), "refine": [{steps,
**                predicted_kl, bits_avg, measured {kl_mean, kl_se, dppl_rel, top1_agree}, met}] one round per
**                verification (a KL target missed adds cells of the ranking: qs_sens_plan_refine; the last
**                round is the plan), "target_met"}
** Options JSON is canonical (sorted keys, see app/cli/quant_opts.c) so equal options compare equal.
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
