/*
** The training runs in `qscope runs` (train_run, store/train_store.h): their section of the list,
** their JSON, `--export NAME` as the per-step CSV of `train --csv`, and which names `--rm` removes.
*/
#ifndef QS_RUNS_TRAIN_H
#define QS_RUNS_TRAIN_H

#include <jansson.h>

#include "cli.h"

/* The training runs whose name matches pat: a "training runs" section on stdout (nothing when
** there are none), or, with arr, one object each appended to arr.  Exit code. */
int qs_runs_train_list(qs_cli *cli, qs_db *db, const char *pat, json_t *arr);
/* 1 when a training run has that name, 0 not, -1 error (printed). */
int qs_runs_train_exists(qs_db *db, const char *name);
/* Its steps as CSV to out ("-": stdout).  Exit code. */
int qs_runs_train_export(qs_db *db, const char *name, const char *out);

#endif
