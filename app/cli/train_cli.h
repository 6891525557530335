/*
** What `qscope train` lends to other commands: the default sweep, for the pre-training claim
** (analysis/claims_train.h binds it when `qscope claims` runs).
*/
#ifndef QS_TRAIN_CLI_H
#define QS_TRAIN_CLI_H

#include <stdio.h>

#include "cli.h"

/* `qscope train --sweep default` with the default model and texts, stored in cli's database; one
** line per run on out.  Runs already stored are not run again. */
int qs_train_sweep_default(qs_cli *cli, FILE *out, qs_err *e);

#endif
