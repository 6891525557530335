/*
** Per-token statistics of a model evaluation against a reference (`qscope llm eval`, docs/llm.md
** "Model evaluation"): the quantities llama.cpp's `llama-perplexity --kl-divergence` prints, from one
** row of reference logits and one row of logits of a configuration, and their summaries (means with
** standard errors, order-statistic quantiles, a log-spaced histogram).  libc + libm only.
**
** KL(P_ref || P_Q) = sum_v p_ref(v) (ln p_ref(v) - ln p_Q(v)) is computed without materialising
** ln p_Q: with l = logits, m = max l, Z = sum exp(l - m), ln p(v) = l_v - m - ln Z, so
**   sum_v p_ref(v) ln p(v) = sum_v p_ref(v) l_v - (m + ln Z) sum_v p_ref(v)
** for either row; the reference side and the configuration side go through the same arithmetic, so
** identical logits give KL = 0 exactly.
*/
#ifndef QS_LLM_STATS_H
#define QS_LLM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "qs_err.h"

/* The reference side of one row, kept between the reference pass and the configuration passes. */
typedef struct qs_ref_row {
    double lse;        /* m + ln Z of the reference logits */
    double s_ref;      /* sum_v p_ref(v) l_ref(v) (p_ref as stored in float) */
    double psum;       /* sum_v p_ref(v) (as stored; 1 up to rounding) */
    double lp_tok;     /* ln p_ref(next token) */
    int top;           /* argmax of the reference logits (lowest index on ties) */
    int finite;        /* 0: the row had a NaN/Inf logit (excluded from the statistics) */
} qs_ref_row;

/* One scored token of a configuration against the reference. */
typedef struct qs_tok_stat {
    double kl;         /* KL(P_ref || P_Q), nats */
    double lp_q;       /* ln p_Q(next token) */
    double dp;         /* p_Q(t) - p_ref(t) for the actual next token t (llama.cpp's Delta p) */
    int same_top;      /* argmax p_Q == argmax p_ref */
    int finite;        /* 0: NaN/Inf logit in the configuration's row */
} qs_tok_stat;

/* max and log-sum-exp of a logits row: returns m + ln sum exp(l - m) (double accumulation); *top =
** argmax; *finite = 0 when a logit is NaN or +-Inf. */
double qs_row_lse(const float *l, int V, int *top, int *finite);

/* Reference row: fills r and overwrites p[0..V) with p_ref (float), from the logits l (may alias p). */
void qs_ref_row_make(const float *l, int V, int tok, float *p, qs_ref_row *r);

/* A configuration's row against the stored reference probabilities p_ref and r. */
void qs_tok_stat_make(const float *lq, int V, int tok, const float *p_ref, const qs_ref_row *r, qs_tok_stat *t);

/* The same for rows consecutive rows (logits l[i*V..], next tokens tok[i], p/r/t indexed alike), on the
** task pool with one thread per OpenBLAS thread; bit-identical to the serial loop.  -1 when a thread
** cannot start its scratch (e set). */
int qs_ref_rows_make(const float *l, int rows, int V, const int32_t *tok, float *p, qs_ref_row *r, qs_err *e);
int qs_tok_stats_make(const float *lq, int rows, int V, const int32_t *tok, const float *p_ref, const qs_ref_row *r,
                      qs_tok_stat *t, qs_err *e);

/* ---------------------------------------------------------------- summaries */

/* Mean and standard error of the mean, sqrt((mean(x^2) - mean(x)^2) / (n - 1)) as llama.cpp
** computes it (0 for n < 2). */
void qs_mean_se(const double *x, size_t n, double *mean, double *se);

/* Pearson correlation of x and y (0 when either has no spread). */
double qs_pearson(const double *x, const double *y, size_t n);

/* Quantile q in [0, 1] of sorted[0..n): linear interpolation between the order statistics at
** position q (n - 1) (numpy's default); NaN when n == 0. */
double qs_quantile_sorted(const double *sorted, size_t n, double q);

/* Sort a copy of x ascending (caller frees), NULL on out-of-memory. */
double *qs_sorted_copy(const double *x, size_t n);

/* Fixed log-spaced histogram of positive values: bin k holds 2^(LO + k/PER) <= x < 2^(LO + (k+1)/PER).
** Values <= 0 (a KL that rounding makes 0 or slightly negative) go to zero, values below the first
** edge to under, above the last to over. */
#define QS_KLHIST_LO (-28)
#define QS_KLHIST_PER 4
#define QS_KLHIST_BINS 140    /* 2^-28 (3.7e-9) .. 2^7 (128) nats */
typedef struct qs_klhist {
    uint64_t counts[QS_KLHIST_BINS];
    uint64_t zero, under, over, nonfinite;
} qs_klhist;
void qs_klhist_add(qs_klhist *h, double x);
double qs_klhist_edge(int k);   /* k = 0 .. QS_KLHIST_BINS */

#endif
