/*
** The MPI layer: heavy commands shard their units of work over the ranks of `mpirun -np N qscope ...`.
**
** MPI is used only when a launcher started the process (Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE,
** PMIx launchers PMIX_RANK); libmpi is then loaded with dlopen, so a plain run neither links nor starts
** it and is one rank.  Tensor bytes never travel: every rank reads its units' inputs itself; only the
** units' results do.  Only rank 0 writes the database, and only once every rank has succeeded.
*/
#ifndef QS_PAR_H
#define QS_PAR_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/qs_err.h"

/* --rank-timeout: under mpirun a rank silent for longer than this many seconds (a stopped process)
** ends the job with one line naming it (0: never); set before qs_par_init. */
#define QS_PAR_TIMEOUT_DEFAULT 300.0
void qs_par_set_timeout(double seconds);
/* Start MPI when launched by mpirun (else one rank, no MPI).  0, or -1 with e set (libmpi missing). */
int qs_par_init(int *argc, char ***argv, qs_err *e);
int qs_par_rank(void);
int qs_par_size(void);
void qs_par_finalize(void);
/* The end of a command with exit code rc: every rank meets there, then MPI is finalized.  A rank
** that failed and is not joined by the others within seconds (they wait for it in a run) ends the
** whole job instead, so nothing hangs.  Returns rc. */
int qs_par_exit(int rc);
/* isatty(fd) of the user's terminal: under mpirun, of the launcher's descriptor (the rank's own
** stdout is always a pseudo-terminal there, its stderr a pipe). */
int qs_par_isatty(int fd);
/* Wait for every rank (nothing with one rank). */
void qs_par_barrier(void);
/* On a rank > 0 under MPI: keep msg (printed only if this rank must end the job alone: rank 0
** prints the errors every rank shares) and return 1; else 0 (print it). */
int qs_par_hold_error(const char *msg);
/* Rank 0 runs the command alone (one that does not shard; the other ranks have left): from here
** it is a single process (qs_par_size() 1). */
void qs_par_alone(void);

/* Runs unit i = 0..n-1 (cost[i] = its size; largest first, deterministic assignment) on the ranks.
** fn computes one unit's result as bytes (malloc'd, handed over; may be NULL with length 0).  Rank 0
** receives every unit's bytes and calls collect(i, ...) in unit order 0..n-1 only after every rank
** finished successfully, so the database (written only by rank 0, inside collect) stays unchanged
** when a rank fails or dies.  Rank 0 prints one progress line (what; none when NULL) on a terminal.
** Returns 0, or -1 with e set on any rank's failure (all ranks return -1 with the same message).
** With one rank (no mpirun) the units run in order, each collected right after it is computed. */
typedef int (*qs_par_unit_fn)(size_t i, void *ctx, uint8_t **out, size_t *out_len, qs_err *e);
typedef int (*qs_par_collect_fn)(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e);
int qs_par_run(size_t n, const double *cost, qs_par_unit_fn fn, qs_par_collect_fn collect, void *ctx,
               const char *what, qs_err *e);

/* Data-parallel training (analysis/train_loop.h's qs_train_par): x[0..n) summed element-wise over the
** ranks in place, every rank calling with the same n.  The order is fixed: the vector is cut into
** segments of 4M elements and each segment into size parts; part p is summed on rank p as
** ((x_0 + x_1) + x_2) + ... in rank order (MPI_Alltoallv) and sent back to every rank (MPI_Allgatherv),
** so every rank holds the same bits and a rerun on as many ranks gives them again.  Rank 0 judges the
** others' silence (--rank-timeout) meanwhile.  Nothing to do on one rank.  0, or -1 with e set. */
int qs_par_sum_f32(float *x, size_t n, qs_err *e);
int qs_par_sum_f64(double *x, size_t n, qs_err *e);
/* A training run under way on the ranks (1) or over (0): a rank that dies or stalls then ends the job
** with "the training run stopped; nothing more of it was stored" (its completed steps stay). */
void qs_par_training(int on);

/* The rank each unit runs on under qs_par_run's assignment (owner[i] for i < n): a greedy
** longest-processing-time schedule, ties to the lower unit index and the lower rank. */
void qs_par_assign(size_t n, const double *cost, int nranks, int *owner);

#endif
