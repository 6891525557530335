/*
** `qscope train` on MPI ranks (docs/scale.md, "Training"): the data-parallel sums of one run over the
** ranks (analysis/train_loop.h's qs_train_par on app/cli/par.h).
*/
#ifndef QS_TRAIN_PAR_H
#define QS_TRAIN_PAR_H

#include "../../analysis/train_loop.h"

/* p set up for this process's rank of `mpirun -np N`: gradients and losses summed in rank order
** (qs_par_sum_f32/_f64).  Returns p, or NULL with one rank (the serial loop). */
const qs_train_par *qs_train_par_mpi(qs_train_par *p);
/* Seconds this rank has spent waiting for the slowest rank before the gradients' sums, and in the
** sums' exchange itself. */
void qs_train_par_seconds(double *wait, double *sum);

#endif
