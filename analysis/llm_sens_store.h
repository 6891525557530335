/*
** Stored `llm sensitivity` results read back (kinds "llm_sensitivity" and "llm_plan" of
** analysis/results.h) for the workbench's Model view, `qscope plot sensitivity` and the report.
*/
#ifndef QS_LLM_SENS_STORE_H
#define QS_LLM_SENS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../store/db.h"
#include "plot.h"

#define QS_SENS_MAX_SITES 8

typedef struct qs_sensrun {
    char model_hash[40], model[128], text[160], format[96], score[8];
    int ctx, chunks, layers, nsites;
    char sites[QS_SENS_MAX_SITES][24];
    double ref_ppl;
    double *kl, *dppl;            /* layers x nsites, row-major; NaN when absent */
    /* the newest plan of the same options, when one is stored */
    int have_plan;
    char target[64];              /* "KL <= 0.05" or "bits <= 6" */
    unsigned char *bf16;          /* layers x nsites: kept in BF16 */
    int npromoted;
    double plan_pred_kl, plan_kl, plan_dppl, plan_bits;   /* predicted and measured KL; measured dPPL; average bits */
    double plan_kl_se;            /* the measured KL's standard error */
    double plan_kl_target, plan_bits_budget;              /* the plan's target (NaN: not that kind) */
} qs_sensrun;

/* Every stored sensitivity result of this qscope version, oldest first (malformed rows skipped). */
int qs_sensruns_load(qs_db *db, qs_sensrun **runs, size_t *n, qs_err *e);
void qs_sensruns_free(qs_sensrun *runs, size_t n);

/* The layers x sites heatmap of mean KL (log colour scale), the plan's BF16 cells marked "B". */
qs_figure *qs_plot_sensitivity(const qs_sensrun *s);

#endif
