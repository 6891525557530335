/*
** Running (or reusing) analyses from the command line: one with a terminal progress bar, and a
** sweep of tensors x formats over the ranks of an MPI job (app/cli/par.h).  Shared by `analyze` and
** `report`; the service itself is analysis/analyze_service.h.
*/
#ifndef QS_ANALYZE_RUN_H
#define QS_ANALYZE_RUN_H

#include <signal.h>

#include <jansson.h>

#include "../../analysis/analyze_service.h"

/* qs_analyze_one_cb with a progress bar on stderr when show_progress. */
int qs_analyze_one(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                   int show_progress, qs_hist *vcache, json_t **metrics_out, int *cached, qs_err *e);

/* Every (tensor, format) pair of names x apps, unit ti * napps + k, each computed or reused as
** qs_analyze_one does.  One rank: in order, each stored as soon as computed, with a progress bar per
** analysis on a terminal (stop, when set, cancels the one in progress).  Under mpirun the pairs
** are spread over the ranks by tensor size and rank 0 stores them all once every rank is done,
** showing one progress line.  On rank 0, row (may be NULL) gets each pair in unit order with its
** metrics object (borrowed) and whether it was reused. */
typedef struct qs_sweep {
    qs_db *db;
    char **names;
    size_t nnames;
    const qs_apply *apps;
    int napps, blocks, force, threads, tty;
    volatile sig_atomic_t *stop;
    int (*row)(void *ctx, const qs_tensor_rec *t, int k, json_t *metrics, int cached, qs_err *e);
    void *row_ctx;
} qs_sweep;
int qs_analyze_sweep(const qs_sweep *s, qs_err *e);

#endif
