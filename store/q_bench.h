/*
** Synthetic database content for `qscope bench tui`, written by SQL so that a list of 10,000
** tensors or 400,000 RL tokens takes a second, not minutes.  The caller holds the transaction.
*/
#ifndef QS_Q_BENCH_H
#define QS_Q_BENCH_H

#include "db.h"

/* Copies of the first `base` tensors (by rowid) under the names "bench:copyNNN/NAME", with their
** statistics and embedded chunks, until the database holds `ntensors`. */
int qs_bench_replicate_tensors(qs_db *db, int ntensors, int base, qs_err *e);

/* Two RL runs, bench-a and bench-b (ids 1 and 2), of 50 steps x 64 sequences x 64 tokens with
** deterministic log-probabilities; bench-a's rollout and training agree, bench-b's differ. */
int qs_bench_rl_runs(qs_db *db, qs_err *e);

#endif
