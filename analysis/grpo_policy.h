/*
** The default policy of `qscope rl grpo` (issue 27): a small byte-level Llama model that the training
** service (train_service.h, as `qscope train` runs it) pre-trains on the task's own solved examples
** ("7+5=12\n" lines, rl_task.h), for a budget measured so that the initial GRPO reward is between 0.1
** and 0.5.  It is trained once and kept as a Hugging Face checkpoint in
**     $QSCOPE_CACHE, else $XDG_CACHE_HOME/qscope, else $HOME/.cache/qscope   + /policies/TASK-HASH
** (HASH: of the pre-training settings and the tool version), written to a temporary directory and
** renamed into place, so a killed pre-training leaves nothing that is later taken for a policy.
*/
#ifndef QS_GRPO_POLICY_H
#define QS_GRPO_POLICY_H

#include <stddef.h>

#include "rl_task.h"
#include "../kernels/qs_err.h"

typedef struct qs_grpo_policy {
    char dir[1024];        /* the checkpoint directory */
    int trained;           /* 1: pre-trained by this call; 0: found in the cache */
    double secs;           /* pre-training wall time (0 when found) */
    int steps;             /* pre-training steps */
    double val_loss;       /* validation loss after pre-training (NAN when found) */
} qs_grpo_policy;

/* The settings in one line (for the run's metadata and the hash). */
const char *qs_grpo_policy_settings(qs_rl_task t, char *buf, size_t cap);
/* The policy of task t: found in the cache, or pre-trained now (progress on stderr unless quiet). */
int qs_grpo_policy_get(qs_rl_task t, int quiet, qs_grpo_policy *p, qs_err *e);

#endif
