/*
** Sweeps of `qscope rl grpo` runs (`rl grpo --sweep SPEC`): the spec's parsing, the named presets of
** issue 27's experiments, and the sweep's name stored in each run's metadata ("sweep").  The run list
** is plain data so that MPI ranks can hand out its entries (rank r takes runs r, r+N, ...).
*/
#ifndef QS_GRPO_LLM_SWEEP_H
#define QS_GRPO_LLM_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

#define QS_RL_SWEEP_PRESETS "hif4-rl, ais, resq"
#define QS_RL_SWEEP_MAX 1024

typedef struct qs_rl_sweep_run {
    char rollout[96];     /* a --rollout spec; "" = the trainer's own forward formats */
    char trainer[32];     /* a recipe preset */
    char correction[16];
    uint64_t seed;
} qs_rl_sweep_run;

typedef struct qs_rl_sweep {
    char name[32];        /* the preset's name, else "sweep-" and 8 hex digits of the spec's hash */
    qs_rl_sweep_run run[QS_RL_SWEEP_MAX];
    size_t n;
} qs_rl_sweep;

/* A preset name (optionally ";seeds=LIST": only those of its runs, e.g. to run a preset in pieces), or "KEY=LIST;KEY=LIST..." with keys rollouts (items separated by '|', each a --rollout
** spec or "default"), trainers, corrections and seeds (items separated by ',' or '|').  A missing key
** takes: rollouts default, trainers fp32, corrections none, seeds 1,2,3.  Runs are seed-major, then
** rollout, trainer, correction.  Names are checked by the caller (recipes, formats, methods); here the
** syntax, lengths, duplicates and the run count. */
int qs_rl_sweep_parse(const char *spec, qs_rl_sweep *s, qs_err *e);

#endif
