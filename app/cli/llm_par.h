/*
** An evaluation's units (analysis/llm_eval_shard.h) on the ranks of `mpirun` (app/cli/par.h), for
** `llm eval` and `llm sensitivity`.
*/
#ifndef QS_LLM_PAR_H
#define QS_LLM_PAR_H

#include "../../analysis/llm_eval_shard.h"

/* Pick the number of configuration groups (one on a single rank; else the fewest whose largest-first
** schedule ends soonest, every group repeating its chunk's reference pass) and run every unit.  On
** rank 0 sh->out then holds the whole evaluation, bit-identical to qs_llm_eval_run's.  All ranks
** call it alike; 0, or -1 with e set (on every rank) when any rank failed. */
int qs_llm_shard_run(qs_eval_shard *sh, const char *what, qs_err *e);

#endif
