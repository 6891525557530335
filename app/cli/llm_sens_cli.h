/*
** `qscope llm sensitivity` inside the CLI: its options, shared by the one-format table and BF16 plan
** (cmd_llm_sens.c) and the plan across formats (cmd_llm_sens_plan.c, `--formats ... --bits B`).
*/
#ifndef QS_LLM_SENS_CLI_H
#define QS_LLM_SENS_CLI_H

#include "cli.h"
#include "llm_eval_out.h"
#include "llm_text_run.h"
#include "../../analysis/llm_sens.h"
#include "../../store/db.h"

#define CMD "llm sensitivity"
#define QS_SENS_MAX_FMT 8

typedef struct sens_opts {
    qs_evout_opts out;               /* --csv (llm_eval_out.h) */
    const char *model, *text, *fmt_spec;
    int ctx, chunks, score_all, json, force, scaled;
    int sites[QS_SENS_NSITE], nsite;
    double kl_target, bits_budget;   /* < 0: not given; --bits is --bits-budget */
    qs_apply fmt, hi;
    char label[128];
    /* --formats F1,F2,... (cmd_llm_sens_plan.c) */
    const char *formats, *plan_out;
    int nfmt;
    char fspec[QS_SENS_MAX_FMT][96], flabel[QS_SENS_MAX_FMT][128];
    qs_apply fmts[QS_SENS_MAX_FMT];
} sens_opts;

/* The one-format table of spec (fmt, its label) for o's text, chunks and sites: the stored
** "llm_sensitivity" result, or computed (on every rank) and stored.  On rank 0 *tab holds its KL
** ([layer * nsite + j]); *computed says whether it was.  0 or an exit code (message printed). */
int qs_sens_format_table(qs_db *db, qs_llm_text_run *t, const sens_opts *o, const qs_apply *fmt, const char *label,
                         qs_sens_table *tab, int *computed, double *compute_s);

/* --formats / --bits / --plan-out checked (after the common options): 0 or the usage error's code. */
int qs_sens_formats_opts(sens_opts *o);
/* The plan across formats: tables, solve, verify, refine, write the plan file, print. */
int qs_sens_formats_run(qs_cli *cli, sens_opts *o, qs_llm_text_run *t);

#endif
