/*
** What `qscope llm eval` prints of an answer (issue 28): the statistics table with columns sized by
** their cells, the interval method (--ci delta|bootstrap[:N[:SEED]], analysis/llm_eval_ci.h), the
** paired comparisons (--paired: every configuration against the first, on the same tokens), the
** note on what the intervals do not cover, the JSON additions and the CSV export (--csv [FILE]).
** The command's header lines (model, text) and its driving stay in cmd_llm_eval.c.
*/
#ifndef QS_LLM_EVAL_OUT_H
#define QS_LLM_EVAL_OUT_H

#include <stdio.h>

#include <jansson.h>

#include "../../analysis/llm_eval_ci.h"
#include "../../analysis/llm_eval_service.h"

/* The output options. */
typedef struct qs_evout_opts {
    qs_evci_opts ci;
    int paired;
    const char *csv;          /* NULL: none; "-": stdout (instead of the table); else a file */
} qs_evout_opts;

/* The run's description for CSV rows. */
typedef struct qs_evout_run {
    const char *model, *text, *score;
    int ctx, chunks;
    size_t ntok;
} qs_evout_run;

/* The intervals computed for an answer. */
typedef struct qs_evout {
    int nvar;                 /* 1 + configurations */
    qs_evci_var *var;         /* bootstrap only: per variant */
    qs_evci_pair *pair;       /* --paired: pair[i] = configuration i + 1 against configuration 0 (i < nvar - 2) */
} qs_evout;

/* The long options, for a command's option table (values 'Q', 'P', 'V'). */
#define QS_EVOUT_LONGOPTS \
    {"ci", required_argument, 0, 'Q'}, {"paired", no_argument, 0, 'P'}, {"csv", optional_argument, 0, 'V'}
/* Handle one of them (ch 'Q', 'P' or 'V'; --csv takes FILE or - as the next word too). 0, or 2 after a
** usage message. */
int qs_evout_opt(const char *cmd, int ch, const char *arg, int argc, char **argv, qs_evout_opts *o);
/* Checks once the options, configurations and chunks are known (--paired needs 2 configurations;
** intervals over chunks 2 chunks; --csv to stdout excludes --json).  0, or 2 after a usage message. */
int qs_evout_check(const char *cmd, const qs_evout_opts *o, int json, int ncfg, int nchunks);

/* The intervals of the answer res.  0, or -1 with e set. */
int qs_evout_compute(const qs_evout_opts *o, const qs_eval_result *res, qs_evout *ev, qs_err *e);
void qs_evout_free(qs_evout *ev);

/* The table from the scored-tokens line on: statistics, paired comparisons, footnotes. */
void qs_evout_table(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, size_t ntok);
/* The JSON additions to the answer j: "ci", per variant "bootstrap", "paired". */
void qs_evout_json(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, json_t *j);
/* The CSV (header and one row per variant) to f. */
void qs_evout_csv(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, const qs_evout_run *run, FILE *f);
/* Write the CSV where --csv asks (stdout or the file).  0, or 1 after an error message naming the file. */
int qs_evout_write_csv(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, const qs_evout_run *run);

#endif
