/*
** Training runs of `qscope train` in the database (issue 26, item 4): tables train_run, train_step
** and train_opstat (store/db.c, migration 4 -> 5; README "Database schema").
**
** Writing: qs_train_run_begin inserts the run row (status 'running') once the options, the model and
** the tokens are known and valid, so bad input stores nothing; every completed step is then committed
** on its own (qs_train_run_step), so Ctrl-C or a kill keeps every completed step; qs_train_run_end sets
** the final status.  A run that was killed stays 'running' with steps_done steps (`qscope runs` shows
** it as such; `--resume` continues it).
** Reading: the list the CLI, the workbench, `plot loss`, the report and the claims use, and the steps
** of one run.
*/
#ifndef QS_TRAIN_STORE_H
#define QS_TRAIN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"
#include "db.h"

typedef struct qs_train_run_meta {
    const char *name;           /* unique */
    const char *recipe;         /* preset name, "+op" suffixed when --op changed it */
    uint64_t seed;
    const char *sweep;          /* NULL: not part of a sweep */
    int steps;                  /* planned */
    const char *model_json;     /* JSON object: the model's shape (see the schema comment) */
    const char *options_json;   /* JSON object: the options and the recipe's operands */
    const char *data_hash;      /* hex xxh3-128 of the token streams */
    const char *checkpoint;     /* NULL: none */
} qs_train_run_meta;

typedef struct qs_train_step_row {
    int step;                   /* 1 .. steps */
    double train_loss, val_loss /* NAN: not measured */, grad_norm, lr, tok_s;
} qs_train_step_row;

typedef struct qs_train_opstat_row {
    int layer;                  /* 0 .. layers-1; layers = the output head */
    int operand;                /* qs_llm_operand (kernels/llm_recipe.h), stored by its name */
    int64_t n;                  /* values quantized */
    double underflow, clipped, nonfinite;   /* fractions of n */
} qs_train_opstat_row;

/* A new run; *id its row.  A name already taken is an error naming it. */
int qs_train_run_begin(qs_db *db, const qs_train_run_meta *m, int64_t *id, qs_err *e);
/* qs_train_run_begin under the first free name of m->name, m->name-2, m->name-3, ... (one
** transaction); the name taken is written to name (cap bytes; too long a name is an error). */
int qs_train_run_begin_unique(qs_db *db, const qs_train_run_meta *m, char *name, size_t cap, int64_t *id, qs_err *e);
/* Set val0 (the validation loss before the first step). */
int qs_train_run_val0(qs_db *db, int64_t id, double val0, qs_err *e);
/* One completed step and its operand statistics (nops may be 0), in one transaction; updates
** steps_done and val_final (when the step measured it). */
int qs_train_run_step(qs_db *db, int64_t id, const qs_train_step_row *r, const qs_train_opstat_row *ops, size_t nops,
                      qs_err *e);
/* status: "done", "stopped" or "failed"; why NULL or the reason (the error's one line). */
int qs_train_run_end(qs_db *db, int64_t id, const char *status, const char *why, qs_err *e);

/* What --resume knows of the stored run it continues (from the checkpoint's trainer_state.json). */
typedef struct qs_train_reopen {
    const char *name;           /* the run's name (trainer_state.json run_name) */
    const char *data_hash;      /* the checkpoint's token hash: the stored run must have it */
    int from_step;              /* the checkpoint's step: steps 1 .. from_step must be stored */
    int steps;                  /* planned (a --steps that extends the run) */
    const char *checkpoint;     /* the directory the resumed run checkpoints into; NULL: keep */
} qs_train_reopen;

/* Continue the stored run r->name, in one transaction: its steps and operand statistics beyond
** r->from_step (stored before a kill let their checkpoint be written) are deleted, status back to
** 'running', error and finished_at cleared, steps = r->steps (also in the options JSON), steps_done
** and val_final recounted from the steps kept.  1 reopened (*id its row), 0 no run of that name,
** 2 a run of that name that is not the checkpoint's (another data hash, or steps 1 .. from_step not
** all stored), -1 error; the database is unchanged unless 1. */
int qs_train_run_reopen(qs_db *db, const qs_train_reopen *r, int64_t *id, qs_err *e);

typedef struct qs_train_run_item {
    int64_t id;
    char *name, *recipe, *sweep /* "" when none */, *status, *model, *options, *data_hash, *tool_version;
    char *checkpoint, *error, *created_at, *finished_at;   /* "" when absent */
    uint64_t seed;
    int steps, steps_done;
    double val0, val_final;     /* NAN when absent */
} qs_train_run_item;

/* Runs whose name matches the GLOB pattern (NULL: all), by name. */
int qs_train_run_list(qs_db *db, const char *glob, qs_train_run_item **out, size_t *n, qs_err *e);
void qs_train_run_items_free(qs_train_run_item *r, size_t n);
/* The strings of one item (from qs_train_run_get), which is zeroed. */
void qs_train_run_item_clear(qs_train_run_item *x);
/* One run by name; 1 found, 0 not there, -1 error (free with qs_train_run_item_clear when found). */
int qs_train_run_get(qs_db *db, const char *name, qs_train_run_item *out, qs_err *e);

/* The steps of run id in step order (malloc'd, *n of them). */
int qs_train_run_steps(qs_db *db, int64_t id, qs_train_step_row **out, size_t *n, qs_err *e);
/* The operand statistics of run id at one step (step 0: the mean over all its steps), by (layer, operand). */
int qs_train_run_opstats(qs_db *db, int64_t id, int step, qs_train_opstat_row **out, size_t *n, qs_err *e);

/* Remove runs by name (one transaction; an unknown name is an error and removes nothing). */
int qs_train_run_remove(qs_db *db, const char *const *names, size_t n, qs_err *e);

#endif
