/*
** What `qscope train` records (issue 26, item 4): the run row once the model and tokens are ready
** (so bad input stores nothing), every completed step as it completes (so Ctrl-C or a kill keeps
** them), its end; the steps as CSV (--csv, `runs --export`); and the SIGINT/SIGTERM flag that stops
** a run after the step in progress.  The store is store/train_store.h.
*/
#ifndef QS_TRAIN_RECORD_H
#define QS_TRAIN_RECORD_H

#include <signal.h>
#include <stdio.h>

#include "cli.h"
#include "train_capture.h"
#include "../../analysis/train_service.h"
#include "../../store/train_store.h"

typedef struct qs_trec {
    /* set by the command */
    qs_cli *cli;
    const char *name;                     /* --name, or NULL: train/RECIPE/sSEED (then -2, -3 ...) */
    const char *sweep;                    /* the sweep the run belongs to (train_run.sweep), or NULL */
    int store, csv, json;                 /* store: write the database; csv: print CSV rows; json: --json */
    const qs_train_job *job;
    const char *recipe;                   /* recipe name ("fp32" without one) */
    const char *plan_file, *plan_hash;    /* --recipe-file PLAN: its path and XXH64 (NULL: none) */
    const char *op_label[QS_OP_COUNT];    /* each operand's format label */
    const char *tokenizer;                /* "bytes" or the model path */
    const qs_train_result *res;           /* where the job puts val0 */
    qs_err *e;                            /* the job's error, for the step callback's */
    qs_train_capture *cap;                /* not NULL: record the run here, not in the database
                                          ** (a sweep's run on an MPI rank; train_capture.h) */
    /* the recording */
    qs_db *db;
    int64_t id;
    char run[512];                        /* the run's name */
    int val0_stored, n_layer;
    qs_train_opstat_row *ops;
} qs_trec;

/* The stop flag the signal handlers set (the signal's number) and the job polls. */
extern volatile sig_atomic_t qs_trec_stop;

/* For the job's ready hook: opens the database, creates the run row (with --resume: re-opens the
** checkpoint's stored run, qs_train_run_reopen, else creates one and says so), prints the CSV header,
** and installs the SIGINT/SIGTERM handlers. */
int qs_trec_ready(qs_trec *t, const qs_train_data *d, qs_err *e);
/* A completed step: its CSV row, and its row (with val0 at the first) and operand statistics. */
int qs_trec_step(qs_trec *t, const qs_train_rec *r);
/* The run's end: 'done', 'stopped' (qs_trec_stop set) or 'failed' with err's line; closes the
** database.  Returns the exit code: QS_EXIT_OK, 128 + the signal, or QS_EXIT_ERR. */
int qs_trec_end(qs_trec *t, int ok, const qs_train_result *res, const qs_err *err);

/* The steps as CSV: a header, then one row per step (val_loss empty where not measured). */
void qs_train_csv_header(FILE *f);
void qs_train_csv_row(FILE *f, const qs_train_step_row *r);

#endif
