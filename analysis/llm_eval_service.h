/*
** The "compute or reuse an evaluation" service of `qscope llm eval` (as analyze_service.h is for
** `analyze`): every variant (the FP32 reference and each configuration) is one stored result of kind
** "llm_eval" keyed by model hash, text hash, ctx, chunks, scoring, BOS and the variant's numerics;
** the stored ones are reused unless force, the others computed (chunks x configurations on the ranks
** of the caller's runner), stored with their per-token arrays in one transaction, and the answer is
** assembled from the stored data — so a reused result prints exactly as a computed one.  The
** statistics of a variant are the rows of llm_eval_stats.h.
*/
#ifndef QS_LLM_EVAL_SERVICE_H
#define QS_LLM_EVAL_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "llm_eval_shard.h"
#include "../store/db.h"
#include "../store/llm_load.h"

/* A configuration: the formats of its weights, activations and KV cache, and its name. */
typedef struct qs_eval_cfg {
    char label[256];
    qs_apply w, a, kv;
    int has_w, has_a, has_kv;
    qs_llm_resq resq;
    qs_llm_model wm;          /* rounded weights (has_w; made by the service, freed by qs_eval_cfgs_free) */
    const qs_llm_model *m;
} qs_eval_cfg;

/* Runs every unit of a shard on this process's ranks (app/cli/llm_par.h's qs_llm_shard_run). */
typedef int (*qs_eval_runner)(qs_eval_shard *sh, const char *what, qs_err *e);

typedef struct qs_eval_request {
    const char *text_path;    /* stored as the run's text name (the key holds only hashes) */
    const char *text_hash;    /* 32 hex digits */
    const qs_llm_file *f;
    const int32_t *ids;
    size_t nids;
    qs_eval_setup su;
    int scaled, force;
    qs_eval_cfg *cfg;
    int ncfg;
    qs_eval_runner run;
    const char *what;         /* names the command in the runner's messages */
    int rank;                 /* this process's rank: rank 0 alone stores and answers */
} qs_eval_request;

typedef struct qs_eval_result {
    json_t *ref;              /* the reference's stored data, with "cached" and "failed" */
    json_t *cfgs;             /* per configuration: label, numerics, its stored data, "cached", "failed"
                              ** (llm_eval_stats.h: no finite row, null statistics) */
    /* The stored per-token arrays of every variant (tok.var[0] the reference, tok.var[i] configuration
    ** i - 1; nll, and kl/dp for configurations; float32 as stored, widened), tok.n scored tokens,
    ** per_chunk of them per chunk (chunk c holds tokens c * per_chunk ..): what intervals over chunks
    ** (bootstrap), paired comparisons and CSV export read.  Same for computed and reused results. */
    qs_eval_out tok;
    size_t per_chunk;
    int computed;             /* some variant was computed */
    double compute_seconds;
} qs_eval_result;

/* Lookup, compute what is missing (or everything with force), store, answer (rank 0; other ranks
** return 0 with an empty result after their share of the computation).  0, or -1 with e set. */
int qs_eval_service(qs_db *db, qs_eval_request *rq, qs_eval_result *res, qs_err *e);
void qs_eval_result_free(qs_eval_result *r);
/* The rounded weights the service made. */
void qs_eval_cfgs_free(qs_eval_cfg *cfg, int n);

#endif
