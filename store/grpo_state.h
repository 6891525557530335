/*
** grpo_state.json of an `rl grpo` checkpoint (a train_ckpt.h directory with this file in place of
** trainer_state.json): where the run stands, the options it was started with, the initial policy that
** is its KL reference, and the database run it belongs to.  Read back with every field checked, so a
** damaged file is refused with the field at fault (docs/rl.md, "Checkpoints and --resume").
*/
#ifndef QS_GRPO_STATE_H
#define QS_GRPO_STATE_H

#include <stdint.h>

#include "../kernels/qs_err.h"

#define QS_GRPO_STATE_MAX_ARGS 64

typedef struct qs_grpo_ckpt_state {
    int step, steps;                 /* steps completed, planned */
    long adam_t;                     /* AdamW steps taken (= step) */
    double lambda;                   /* AIS lambda after `step` */
    uint64_t calls, calls0;          /* trainer / initial-policy GEMM call counters (SR seeds) */
    char *args[QS_GRPO_STATE_MAX_ARGS];   /* the run's options, "--key=value", in order */
    int nargs;
    char *model;                     /* --model as an absolute path; NULL: the default policy */
    char *init_dir;                  /* the initial policy's directory or file (the KL reference) */
    char init_hash[33];              /* its hash (qs_llm_file.hash) */
    char *run_name;                  /* the rl_run; NULL: --no-store */
    int ckpt_every;
} qs_grpo_ckpt_state;

/* Write s as JSON to path (qs_ckpt_write's state writer). */
int qs_grpo_state_write(const char *path, const void *s, qs_err *e);
/* Read DIR/grpo_state.json; errors name the file and the field. */
int qs_grpo_state_read(const char *dir, qs_grpo_ckpt_state *s, qs_err *e);
void qs_grpo_state_free(qs_grpo_ckpt_state *s);

#endif
