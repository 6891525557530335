/*
** `qscope train` on MPI ranks (docs/scale.md, "Training"): the data-parallel sums of one run over the
** ranks (analysis/train_loop.h's qs_train_par on app/cli/par.h).
*/
#ifndef QS_TRAIN_PAR_H
#define QS_TRAIN_PAR_H

#include "../../analysis/train_loop.h"
#include "train_capture.h"

/* p set up for this process's rank of `mpirun -np N`: gradients and losses summed in rank order
** (qs_par_sum_f32/_f64).  Returns p, or NULL with one rank (the serial loop). */
const qs_train_par *qs_train_par_mpi(qs_train_par *p);
/* Seconds this rank has spent waiting for the slowest rank before the gradients' sums, and in the
** sums' exchange itself. */
void qs_train_par_seconds(double *wait, double *sum);

/* A sweep's n runs over the ranks (par.h's qs_par_run, equal costs: run i on rank i mod N for n a
** multiple of N): run(i) trains run i whole on this rank into c (data parallelism off); rank 0
** receives every run's record and calls store(i, c) in run order 0..n-1 once every rank has finished
** (nothing is stored when a run fails or a rank dies).  A rank's BLAS runs single-threaded when
** several ranks share the node and OPENBLAS_NUM_THREADS is not set (the results do not depend on it).
** With one rank: each run is stored right after it ran.  0, or -1 with e set. */
typedef int (*qs_train_sweep_run_fn)(size_t i, void *ctx, qs_train_capture *c, qs_err *e);
typedef int (*qs_train_sweep_store_fn)(size_t i, const qs_train_capture *c, void *ctx, qs_err *e);
int qs_train_sweep_ranks(size_t n, qs_train_sweep_run_fn run, qs_train_sweep_store_fn store, void *ctx,
                         const char *what, qs_err *e);

#endif
