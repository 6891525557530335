/*
** An evaluation (analysis/llm_eval.h) cut into units of work whose results are bytes, for
** `llm eval` and `llm sensitivity` under `mpirun` (app/cli/par.h): unit u is chunk u / ngroup with the
** configurations of group u % ngroup (every unit runs its chunk's reference pass, since each
** configuration is measured against it).  Merging every unit's bytes in unit order rebuilds the
** per-token arrays of qs_llm_eval_run bit for bit — a token's results depend only on its chunk —
** so the summaries computed from them are those of a single process.  The bytes are native
** doubles: every rank must run the same binary on the same kind of CPU.
*/
#ifndef QS_LLM_EVAL_SHARD_H
#define QS_LLM_EVAL_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "llm_eval.h"

/* What the chunk being merged holds of a variant (qs_eval_shard.cur). */
typedef struct qs_eval_chunk_var {
    int have;                      /* computed in this chunk */
    qs_eval_nonfinite nf;
    double seconds;                /* its forward passes and head */
} qs_eval_chunk_var;

typedef struct qs_eval_shard qs_eval_shard;
/* Called by qs_eval_shard_merge once every unit of a chunk is merged. */
typedef int (*qs_eval_chunk_fn)(void *ctx, qs_eval_shard *sh, int chunk, qs_err *e);

struct qs_eval_shard {
    const qs_llm_model *ref;       /* borrowed, as the rest of the inputs */
    const qs_eval_variant *cfg;
    int ncfg;
    const int32_t *text;
    qs_eval_setup su;
    int resid;                     /* some wanted configuration starts above layer 0 */
    int nwant, ngroup;
    int *group;                    /* [ncfg]: group of configuration i, -1 when not wanted */
    double *vcost;                 /* [ncfg]: relative cost of configuration i per chunk */
    double rcost;                  /* the reference's */
    qs_eval_work *w;               /* this process's buffers, made by its first unit */
    qs_eval_out out;               /* the merged result (qs_eval_shard_merge; rank 0) */
    size_t merged;                 /* units merged so far */
    /* Optional, set after init (before qs_eval_shard_groups): the chunks to compute (ascending;
    ** default all nchunks) and per chunk which wanted configurations it computes (need[c * ncfg + i];
    ** NULL: every wanted one) — what a resumed evaluation still lacks. */
    const int *run;
    int nrun;
    const uint8_t *need;
    /* Optional: called by merge when every unit of a chunk is merged: the chunk's per-token results
    ** are at chunk * per in out, cur[v] (v = 0 the reference) says what it computed.  It may set
    ** enough: the units not computed yet are then skipped (their bytes are empty). */
    qs_eval_chunk_fn chunk_done;
    void *done_ctx;
    qs_eval_chunk_var *cur;        /* [1 + ncfg] */
    int enough;
};

/* Validates as qs_llm_eval_run does; one group. */
int qs_eval_shard_init(qs_eval_shard *sh, const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg,
                       const int32_t *text, size_t ntext, const qs_eval_setup *s, qs_err *e);
void qs_eval_shard_free(qs_eval_shard *sh);
/* Spread the wanted configurations over ngroup groups (round-robin in order; clamped to 1..nwant). */
void qs_eval_shard_groups(qs_eval_shard *sh, int ngroup);
size_t qs_eval_shard_units(const qs_eval_shard *sh);
/* Relative cost of every unit (forward-pass work of the reference and the group's configurations). */
void qs_eval_shard_costs(const qs_eval_shard *sh, double *cost);
/* The chunk of unit u. */
int qs_eval_shard_chunk(const qs_eval_shard *sh, size_t u);
/* Compute unit u: its bytes in *b (malloc'd; none once enough is set).  A stop asked for
** (kernels/qs_stop.h) fails it with "interrupted". */
int qs_eval_shard_unit(qs_eval_shard *sh, size_t u, uint8_t **b, size_t *len, qs_err *e);
/* Merge unit u's bytes into sh->out (units must come in order 0, 1, ...). */
int qs_eval_shard_merge(qs_eval_shard *sh, size_t u, const uint8_t *b, size_t len, qs_err *e);

#endif
