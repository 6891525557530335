/*
** The state of one `llm sensitivity --formats ... --bits B` run (cmd_llm_sens_plan.c computes it,
** llm_plan_out.c writes the plan file and prints it).
*/
#ifndef QS_LLM_PLAN_RUN_H
#define QS_LLM_PLAN_RUN_H

#include <jansson.h>

#include "llm_sens_cli.h"
#include "../../analysis/llm_plan.h"

/* One verification: the plan's choice, predicted (additive model) and measured. */
typedef struct qs_plan_meas {
    double predicted, bits_avg, kl, kl_se, dppl, ppl, top1;
} qs_plan_meas;

#define QS_PLAN_MAX_ROUNDS 3

typedef struct qs_plan_run {
    sens_opts *o;
    qs_llm_text_run *t;
    int L, S, C, F;                  /* layers, sites, cells = L x S, formats */
    double *kl, *bits, *elems;       /* the problem as measured: [cell * F + f], [cell] */
    double *klw;                     /* the working table (rescaled by refinement) */
    qs_plan_solution sol;            /* the first solution (its front is printed) */
    int *choice;                     /* the final plan */
    qs_plan_meas plan;               /* of the final plan */
    qs_plan_meas single[QS_SENS_MAX_FMT];
    int computed[QS_SENS_MAX_FMT];
    /* refinement rounds: round 0 is the first plan's verification */
    int nround;
    qs_plan_meas round[QS_PLAN_MAX_ROUNDS];
    char round_note[QS_PLAN_MAX_ROUNDS][320];
    json_t *remeasured;              /* [{layer, site, format, best, kl_isolated, kl_in_context, factor}] */
    double compute;
    char plan_path[512];
} qs_plan_run;

/* Whether a verification misses its prediction: measured > predicted + max(2 SE, 10% of predicted). */
int qs_plan_missed(const qs_plan_meas *m);

/* The plan file's JSON (also --json's answer, with the comparisons). */
json_t *qs_plan_json(const qs_plan_run *r);
/* Write it to r->plan_path: 0 or an exit code (message printed). */
int qs_plan_write(const qs_plan_run *r, json_t *j);
void qs_plan_print(const qs_plan_run *r, double secs);

#endif
