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

typedef struct qs_eval_shard {
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
} qs_eval_shard;

/* Validates as qs_llm_eval_run does; one group. */
int qs_eval_shard_init(qs_eval_shard *sh, const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg,
                       const int32_t *text, size_t ntext, const qs_eval_setup *s, qs_err *e);
void qs_eval_shard_free(qs_eval_shard *sh);
/* Spread the wanted configurations over ngroup groups (round-robin in order; clamped to 1..nwant). */
void qs_eval_shard_groups(qs_eval_shard *sh, int ngroup);
size_t qs_eval_shard_units(const qs_eval_shard *sh);
/* Relative cost of every unit (forward-pass work of the reference and the group's configurations). */
void qs_eval_shard_costs(const qs_eval_shard *sh, double *cost);
/* Compute unit u: its bytes in *b (malloc'd). */
int qs_eval_shard_unit(qs_eval_shard *sh, size_t u, uint8_t **b, size_t *len, qs_err *e);
/* Merge unit u's bytes into sh->out (units must come in order 0, 1, ...). */
int qs_eval_shard_merge(qs_eval_shard *sh, size_t u, const uint8_t *b, size_t len, qs_err *e);

#endif
