/*
** The statistics of an `llm eval` result, one row each (the shape of ggml's type_traits table):
** where the computation leaves it (a field of qs_eval_summary), its JSON key in the stored data and
** in --json, and how each view shows it — the `llm eval` table, the workbench's Model view and the
** report.  Every consumer iterates this table: the writer (qs_evstats_put), the reader of stored
** results (qs_evstats_get, used by llm_eval_store.c and the command's printing) and the three views
** (qs_evstat_column, qs_evstat_cell).  A new statistic is one row here plus, when it is not yet
** computed, its computation in qs_eval_summarize (llm_eval.c) — docs/architecture.md.
*/
#ifndef QS_LLM_EVAL_STATS_H
#define QS_LLM_EVAL_STATS_H

#include <stddef.h>

#include <jansson.h>

#include "llm_eval.h"

/* Row ids (index 0 is no statistic: a companion field left 0 means "none").  The order is the order
** of the keys in the stored JSON (jansson keeps insertion order): change it and stored bytes change. */
typedef enum qs_evstat_id {
    QS_EVS_NONE,
    /* of every variant (the reference's too) */
    QS_EVS_PPL, QS_EVS_PPL_SE, QS_EVS_NLL_MEAN, QS_EVS_NLL_SE,
    /* against the reference (configurations) */
    QS_EVS_KL_MEAN, QS_EVS_KL_SE,
    QS_EVS_KL_MIN, QS_EVS_KL_P0_1, QS_EVS_KL_P1, QS_EVS_KL_P5, QS_EVS_KL_P10, QS_EVS_KL_MEDIAN, QS_EVS_KL_P90,
    QS_EVS_KL_P95, QS_EVS_KL_P99, QS_EVS_KL_P99_9, QS_EVS_KL_MAX,
    QS_EVS_TOP1, QS_EVS_TOP1_SE, QS_EVS_DP_RMS, QS_EVS_DP_RMS_SE, QS_EVS_DP_MEAN, QS_EVS_DP_MEAN_SE,
    QS_EVS_DP_MIN, QS_EVS_DP_P0_1, QS_EVS_DP_P1, QS_EVS_DP_P5, QS_EVS_DP_P10, QS_EVS_DP_MEDIAN, QS_EVS_DP_P90,
    QS_EVS_DP_P95, QS_EVS_DP_P99, QS_EVS_DP_P99_9, QS_EVS_DP_MAX,
    QS_EVS_LNRATIO, QS_EVS_LNRATIO_SE, QS_EVS_PPL_RATIO, QS_EVS_PPL_RATIO_SE,
    QS_EVS_DPPL, QS_EVS_DPPL_LO, QS_EVS_DPPL_HI, QS_EVS_PPL_DIFF, QS_EVS_PPL_DIFF_SE, QS_EVS_COR,
    QS_EVS_N
} qs_evstat_id;

/* The views that show statistics as columns. */
enum { QS_EVV_CLI, QS_EVV_TUI, QS_EVV_REPORT, QS_EVV_N };

/* How a view prints a cell: printf of fmt with (v, se) or (v, lo, hi) (all times scale), or one of
** the named layouts. */
typedef enum qs_evfmt {
    QS_EVF_PRINTF,
    QS_EVF_SIG,       /* fmt with a %s for each of v and se (or lo, hi), each number as qs_evnum(dec, plus)
                      ** makes it: never a nonzero value printed as zeros (the `llm eval` table) */
    QS_EVF_KL7,       /* 3 significant digits, 2 in exponent form below 1e-3 (7 columns) */
    QS_EVF_INTERVAL,  /* "v±half-width" of [lo, hi] in at most 11 columns (the Model view's dPPL) */
} qs_evfmt;

/* One view's column of a statistic; col 0: not shown. */
typedef struct qs_evcol {
    int col;              /* position among the view's columns, from 1 */
    const char *head;     /* column header */
    int width;            /* right-aligned in this many columns (the Model view; the CLI table sizes
                          ** its columns from the cells) */
    qs_evfmt kind;
    const char *fmt;
    int wide_only;        /* the Model view shows it only on a wide terminal */
    int dec, plus;        /* QS_EVF_SIG: decimals, and a sign on every number */
} qs_evcol;

#define QS_EVS_REF 1u     /* also a statistic of the reference (else only of configurations) */

typedef struct qs_evstat {
    const char *key;      /* JSON key of the stored data and of --json */
    int elem;             /* 0: a number; 1, 2: element of the [lo, hi] array under key (written with elem 1) */
    size_t off;           /* offsetof(qs_eval_summary, ...): where qs_eval_summarize leaves it */
    unsigned flags;
    const char *label;    /* short name (the Model view's sort message) */
    int se, lo, hi;       /* companion rows a view prints with it (0: none) */
    double scale;         /* a view shows scale * v (0: 1) */
    int sort;             /* position in the Model view's sort cycle (0: not a sort key) */
    qs_evcol view[QS_EVV_N];
} qs_evstat;

extern const qs_evstat qs_evstats[QS_EVS_N];

/* The summary's value of statistic id. */
double qs_evstat_value(const qs_eval_summary *s, int id);
/* Put every statistic flagged (ref: the QS_EVS_REF ones; else the others) into j, in table order. */
void qs_evstats_put(json_t *j, const qs_eval_summary *s, int ref);
/* Put statistics ids[0..n) into j in that order (an interval by its first half). */
void qs_evstats_put_ids(json_t *j, const qs_eval_summary *s, const int *ids, int n);
/* Read every statistic of stored data d into v (NAN when absent or null, and all NAN when d failed). */
void qs_evstats_get(json_t *d, double v[QS_EVS_N]);
/* Stored data d of a variant failed: not one scored row was finite ("scored": 0), so it has no
** statistics (results stored before this rule carry PPL 1 and KL 0 for it).  *rows (may be NULL):
** its non-finite logit rows. */
int qs_evstats_failed(json_t *d, long long *rows);
/* Say so in d: "failed": true or false, and a failed one's statistics null.  Returns failed. */
int qs_evstats_mark_failed(json_t *d);
/* The statistic shown as column col (from 1) of view, or 0 past the last column. */
int qs_evstat_column(int view, int col);
/* Statistic id's cell of view from the values v (with ascii, "+-" for "±"); "-" when not finite
** (QS_EVV_CLI prints what printf makes of it). */
void qs_evstat_cell(int view, int id, const double *v, int ascii, char *buf, size_t cap);
/* A number for a table: dec decimals when they show at least two significant digits, else two
** significant digits in exponent form (3.2e-06), never zeros for a nonzero value; 0 exactly as
** "0"; 4 significant digits from 1e5 on (1.235e+05); "-" when not finite; plus: a sign on nonzero values. */
void qs_evnum(double v, int dec, int plus, char *buf, size_t cap);
/* The id of the Model view's sort key k (1 ..), or 0 when there is none. */
int qs_evstat_sort_key(int k);

#endif
