/*
** The "compute or reuse an evaluation" service of `qscope llm eval` (as analyze_service.h is for
** `analyze`): every variant (the FP32 reference and each configuration) is one stored result of kind
** "llm_eval" keyed by model hash, text hash, ctx, chunks, scoring, BOS and the variant's numerics;
** the stored ones are reused unless force.  The others are assembled from their chunks (kind
** "llm_eval_chunk", llm_eval_chunk.h): the stored chunks are read, the missing ones computed (chunks x
** configurations on the ranks of the caller's runner) and each stored in a transaction of its own as
** it is merged, so an interrupted run keeps them and the same command (or a larger --chunks) computes
** only what is missing, bit for bit as in one go.  The variant's result is then stored with its
** per-token arrays, and the answer is assembled from the stored data — so a reused result prints
** exactly as a computed one.  The statistics of a variant are the rows of llm_eval_stats.h.
*/
#ifndef QS_LLM_EVAL_SERVICE_H
#define QS_LLM_EVAL_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "llm_eval_shard.h"
#include "llm_imatrix.h"
#include "llm_wtrans.h"
#include "../store/db.h"
#include "../store/llm_load.h"
#include "../kernels/llm_rot.h"

/* A configuration: the formats of its weights, activations and KV cache, and its name. */
typedef struct qs_eval_cfg {
    char label[256];
    qs_apply w, a, kv;
    int has_w, has_a, has_kv;
    qs_llm_resq resq;
    qs_wtrans wt;             /* calibration transforms (smooth=, w=F:gptq, w=F:awq; llm_wtrans.h) */
    qs_llm_model wm;          /* rounded weights (has_w; made by the service, freed by qs_eval_cfgs_free) */
    const qs_llm_model *m;
    /* w=F:imatrix=FILE (app/cli/llm_imatrix_opt.c): the file read (owned, freed by qs_eval_cfgs_free), its
    ** hash (in the cache key) and what rounding with it did; imat NULL: none */
    qs_imatrix *imat;
    char imat_hash[33];
    qs_imat_use imat_use;
    qs_llm_xspec xs;          /* rot=, rht= (kernels/llm_rot.h): wm is then the transformed model */
    qs_llm_online *on;        /* their run-time part (made by the service, freed by qs_eval_cfgs_free) */
    /* A plan file's per-(layer, site) formats (`llm eval --plan`, llm_plan_model.h; owned by the caller)
    ** instead of w, a, kv; plan_hash (the file's) keys its results. */
    const struct qs_plan_numerics *plan;
    char plan_hash[17];
} qs_eval_cfg;

/* c's weights: a rounded copy of ref in c->wm (with c's importance matrix, if any), c->m pointing at it. */
int qs_eval_cfg_round(qs_eval_cfg *c, const qs_llm_model *ref, int scaled, qs_err *e);

/* Runs every unit of a shard on this process's ranks (app/cli/llm_par.h's qs_llm_shard_run). */
typedef int (*qs_eval_runner)(qs_eval_shard *sh, const char *what, qs_err *e);

/* Progress of the chunks (rank 0, after every merged chunk): complete = chunks 0 .. complete-1 are
** done for every variant, of total; computed of todo chunks needed computing in this run. */
typedef struct qs_eval_tick { int complete, total, computed, todo; } qs_eval_tick;
typedef void (*qs_eval_tick_fn)(void *ctx, const qs_eval_tick *t);

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
    /* > 0: --until-ci: the answer has the fewest chunks (at least 2, at most su.nchunks) at which the
    ** 95% interval of every configuration's dPPL (until_kl: KL mean) is narrower than until */
    double until;
    int until_kl;
    qs_eval_tick_fn tick;     /* optional */
    void *tick_ctx;
    const qs_calib_src *calib;   /* the calibration text of configurations with transforms (else NULL) */
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
    int nchunks;              /* chunks of the answer (fewer than asked when until was met) */
    int until_met;            /* until: the intervals are narrower than asked */
    int chunks_computed;      /* chunks computed (and stored) by this run, also on failure */
    int chunks_todo;          /* chunks this run had to compute */
} qs_eval_result;

/* Lookup, compute what is missing (or everything with force), store, answer (rank 0; other ranks
** return 0 with an empty result after their share of the computation).  0, or -1 with e set ("interrupted"
** when a stop was asked for, kernels/qs_stop.h: the chunks finished by then stay stored). */
int qs_eval_service(qs_db *db, qs_eval_request *rq, qs_eval_result *res, qs_err *e);
void qs_eval_result_free(qs_eval_result *r);
/* The rounded weights the service made. */
void qs_eval_cfgs_free(qs_eval_cfg *cfg, int n);

#endif
