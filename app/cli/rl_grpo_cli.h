/*
** `qscope rl grpo`'s settings and storage, shared by the single run (cmd_rl_grpo.c) and the sweep over
** runs (cmd_rl_sweep.c), so that a sweep's run is stored exactly as the same run alone.
*/
#ifndef QS_RL_GRPO_CLI_H
#define QS_RL_GRPO_CLI_H

#include "cli.h"
#include "../../analysis/grpo_llm.h"
#include "../../analysis/llm_eval_service.h"
#include "../../store/grpo_state.h"
#include "../../store/llm_load.h"

typedef struct gopts {
    const char *model, *name, *out, *rollout_spec, *trainer_name, *correction, *sweep, *resume;
    qs_grpo_llm_cfg c;
    qs_eval_cfg roll;
    qs_llm_recipe recipe;
    int replace, no_store, json, quiet, name_set, ckpt_every;   /* ckpt_every 0: not given */
    char *args[QS_GRPO_STATE_MAX_ARGS];   /* the settings given, "--key=value" (--resume checks them) */
    int nargs;
} gopts;

/* The settings that follow from rollout_spec (NULL: the trainer's forward formats), trainer_name and
** correction: the recipe, the rollout numerics, the method.  0 or a usage exit code (printed). */
int qs_rl_grpo_settle(gopts *o);
/* The run's name PREFIX/TASK/ROLLOUT/TRAINER/CORRECTION/sSEED; non-zero when it does not fit. */
int qs_rl_grpo_run_name(const gopts *o, char *buf, size_t cap);
/* rl_run.metadata (malloc'd JSON); sweep (NULL: none) is stored under the key "sweep". */
char *qs_rl_grpo_metadata(const gopts *o, const qs_llm_file *f, const char *model, const char *policy_set,
                          const char *sweep);
/* One step's rl_token, rl_seq and rl_step rows (the caller owns the transaction). */
int qs_rl_grpo_put_step(qs_db *db, int64_t run_id, const gopts *o, const qs_grpo_llm_step *r, const qs_rl_row *rows,
                        size_t n, const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e);

/* `rl grpo --sweep SPEC` (cmd_rl_sweep.c): o parsed, o->sweep set. */
int qs_rl_grpo_sweep(qs_cli *cli, gopts *o);

#endif
