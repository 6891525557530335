/*
** The pre-training claim (claims_train.c): where it finds its runs, and its arithmetic (for tests).
**
** The full measurement reads the default sweep's runs from the database (train_run rows of sweep
** "default", train_sweep.h) and, when runs are missing, asks the command that runs the claims to run
** them (stored, so the next call reuses them): the database and that function are bound here by the
** command, since analysis/ cannot call app/.  Unbound, a missing run leaves the claim inconclusive.
** `--quick` trains a reduced sweep in memory instead and stores nothing.
*/
#ifndef QS_CLAIMS_TRAIN_H
#define QS_CLAIMS_TRAIN_H

#include "claims.h"
#include "../store/db.h"

typedef struct qs_claims_train_env {
    qs_db *db;                                  /* the stored runs; NULL: none */
    int (*run_sweep)(void *ctx, qs_err *e);     /* run the default sweep's missing runs and store them; NULL: do not */
    void *ctx;
} qs_claims_train_env;

/* Bind (a copy of *env) or unbind (NULL). */
void qs_claims_train_bind(const qs_claims_train_env *env);

/* Relative gaps (v[i] - b[i]) / b[i] over the i where both are finite, with a two-sided 95 %
** Student-t interval of their mean (n < 2: lo = -inf, hi = +inf). */
typedef struct qs_gap_ci {
    int n;
    double mean, lo, hi;
} qs_gap_ci;
void qs_paired_gap(const double *v, const double *b, int n, qs_gap_ci *out);

#endif
