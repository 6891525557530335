/*
** A training run recorded in memory instead of the database, to be stored elsewhere: the runs of a
** sweep under mpirun are trained on any rank and stored by rank 0 (docs/scale.md, "Training").
** train_record.c fills one when qs_trec.cap is set; it travels as bytes (pack/unpack) and rank 0
** writes it through store/train_store.h as the run would have been written in place.
*/
#ifndef QS_TRAIN_CAPTURE_H
#define QS_TRAIN_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/qs_err.h"
#include "../../store/db.h"
#include "../../store/train_store.h"

typedef struct qs_train_capture {
    char *model_json, *options_json, *recipe, *checkpoint /* NULL: none */, *why /* NULL: none */;
    char data_hash[33], status[16];   /* status "done", "stopped" or "failed" ("" before the end) */
    uint64_t seed;
    int steps;                        /* planned */
    double val0;                      /* NAN: not measured */
    double seconds;                   /* the run's wall-clock time on its rank (not stored) */
    int rank;                         /* the rank that trained it (not stored) */
    qs_train_step_row *step;          /* nstep completed steps */
    size_t nstep, cap_step;
    qs_train_opstat_row *ops;         /* their operand statistics; step k's are ops[op_at[k] .. op_at[k+1]) */
    size_t *op_at, nops, cap_ops;
} qs_train_capture;

/* Append a completed step and its operand statistics.  0, or -1 with e set (out of memory). */
int qs_train_capture_step(qs_train_capture *c, const qs_train_step_row *r, const qs_train_opstat_row *ops, size_t nops,
                          qs_err *e);
void qs_train_capture_free(qs_train_capture *c);

/* As bytes (malloc'd) and back; unpack checks every length against the buffer. */
int qs_train_capture_pack(const qs_train_capture *c, uint8_t **out, size_t *len, qs_err *e);
int qs_train_capture_unpack(const uint8_t *b, size_t len, qs_train_capture *c, qs_err *e);

/* Store c as the run `name` of sweep (NULL: none): the run row, val0, every step with its operand
** statistics, and its end, as qscope train writes them. */
int qs_train_capture_store(qs_db *db, const char *name, const char *sweep, const qs_train_capture *c, qs_err *e);

#endif
