/*
** The RL claims of issue 27 on a transformer (claims_grpo.c): they read stored `qscope rl grpo` runs
** grouped by sweep name (rl_run.metadata key "sweep": "hif4-rl", "resq", "ais"), never train inside
** `qscope claims`; `--quick` runs a tiny in-memory version instead (analysis/grpo_llm.h), labelled QUICK.
**
** A run's configuration comes from its metadata (rollout_format, trainer, correction, seed): a rollout
** label naming an FP4 format (hif4, mxfp4, nvfp4) is an FP4 rollout, "resq=M" (M not none) a ResQ one;
** a trainer preset of that format is the full-FP4 trainer, any other a high-precision one.  Only
** completed runs count (as many rl_step rows as the metadata's "steps").  A run's final reward is the
** mean rl_step.reward over its last K = min(50, max(1, steps / 4)) steps.
*/
#ifndef QS_CLAIMS_GRPO_H
#define QS_CLAIMS_GRPO_H

#include "claims.h"
#include "../store/db.h"

/* Bind the database the full measurement reads (NULL: unbind; the claims then say "not measured"). */
void qs_claims_grpo_bind(qs_db *db);

#endif
