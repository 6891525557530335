/*
** Stored `llm eval` results read back (the "llm_eval" kind of analysis/results.h), grouped into
** runs — one per (model hash, text hash, ctx, chunks, score, bos) — each with its reference and its
** configurations, for the workbench's Model view, `qscope plot kl` and the report.
*/
#ifndef QS_LLM_EVAL_STORE_H
#define QS_LLM_EVAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm_stats.h"
#include "../store/db.h"
#include "llm_eval_stats.h"
#include "plot.h"

typedef struct qs_evcfg {
    int64_t id;                          /* result row */
    char label[96];
    int has_w;                           /* the config rounds the weights */
    size_t scored;
    int failed;                          /* no finite row: no statistics (qs_evstats_failed) */
    long long nonfinite_rows;            /* its non-finite logit rows */
    double v[QS_EVS_N];                  /* its statistics (llm_eval_stats.h), NAN when not stored */
    qs_klhist hist;
} qs_evcfg;

typedef struct qs_evrun {
    char model_hash[40], model[128], text[160], wtypes[96], score[8];
    int ctx, chunks;
    size_t scored;
    int have_ref;
    double ref[QS_EVS_N];                /* the FP32 reference's statistics (NAN without a reference) */
    qs_evcfg *cfg;
    int ncfg;
} qs_evrun;

/* Every stored evaluation of this qscope version, oldest first. */
int qs_evruns_load(qs_db *db, qs_evrun **runs, size_t *n, qs_err *e);
void qs_evruns_free(qs_evrun *runs, size_t n);
/* The weights were already quantized (a GGUF q-type): weight-format results are relative to that grid. */
int qs_evrun_quantized_origin(const qs_evrun *r);
/* The caveat line for r (empty when it does not apply: no weight config or full-precision weights). */
void qs_evrun_caveat(const qs_evrun *r, char *buf, size_t cap);
/* Short model name: the stored name, else the hash's first 12 digits. */
const char *qs_evrun_model(const qs_evrun *r);

/* The KL distribution of configs sel[0..nsel) of r: a histogram of per-token KL on a log2 x axis
** (fraction of tokens per quarter-octave bin), or with cdf the fraction of tokens with KL <= x. */
qs_figure *qs_plot_kl(const qs_evrun *r, const int *sel, int nsel, int cdf);

#endif
