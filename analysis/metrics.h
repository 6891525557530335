/*
** Quantization metrics of one tensor under one format: one streaming pass that fake-quantizes the
** tensor (kernels/format_apply) and accumulates error metrics, histograms and per-block statistics,
** with bounded memory (except per-block/row/column arrays, which are O(blocks + rows + cols)) and
** both cores, bit-identical for any thread count.
*/
#ifndef QS_METRICS_H
#define QS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/format_apply.h"

#define QS_REL_FLOOR_DEFAULT 1e-6   /* relative errors use max(|x|, floor * absmax) as denominator */

typedef struct qs_metrics {
    uint64_t n;              /* elements */
    uint64_t n_finite;       /* finite inputs (the metrics below are over these) */
    double mse, rmse;
    double sqnr_db;          /* 10 log10(sum x^2 / sum e^2); +inf when the error is zero */
    double eff_bits_energy;  /* -1/2 log2(sum e^2 / sum x^2); +inf when exact */
    double eff_bits_sqnr;    /* (SQNR - 1.76) / 6.02; +inf when exact */
    double max_abs_err;
    double max_rel_err, mean_rel_err;   /* |e| / max(|x|, rel_floor * absmax) */
    double rel_floor;        /* the floor used (relative to the tensor absmax) */
    double mean_err;         /* bias: mean of q - x */
    double cosine;           /* cos(x, q) */
    double underflow_frac;   /* non-zero finite inputs that became 0, over n_finite */
    double clip_frac;        /* finite inputs whose magnitude was reduced to a saturation level
                             ** (|q| < |x| and |q| is the largest magnitude its block could represent) */
    double nonfinite_frac;   /* finite inputs that became NaN or Inf, over n_finite */
    double bits_per_elem;    /* including metadata */
    double sum_x2, sum_e2;
} qs_metrics;

typedef struct qs_hist {
    int kind;                /* 0 log2 bins of |v|, 1 linear bins, 2 code bins (0..255) */
    int nbins;
    double lo, hi;           /* edges: lo + (hi-lo)*i/nbins (log2 exponents for kind 0) */
    uint64_t *counts;        /* nbins */
    uint64_t zero, under, over, nonfinite;
} qs_hist;

typedef struct qs_analysis {
    qs_metrics m;
    qs_hist value, abs_err, rel_err, ulp_err, scale_code, block_err;
    /* per block (in the run order of format_apply: rows first for axis 1, columns for axis 0) */
    uint64_t nblocks;
    uint8_t *block_scale_code; /* NULL when the format has no one-byte block scale */
    float *block_absmax, *block_ratio, *block_rmse;
    /* 2-D: per row and per column RMSE (NULL for 1-D) */
    uint64_t rows, cols;
    float *row_rmse, *col_rmse;
} qs_analysis;

typedef struct qs_analyze_opts {
    int threads;             /* >= 1 */
    int blocks;              /* compute per-block arrays (needs encode) */
    double rel_floor;        /* 0 = QS_REL_FLOOR_DEFAULT */
    /* progress: called from the calling thread with done/total elements; may be NULL.  Returning
    ** non-zero cancels (the call then fails with "cancelled"). */
    int (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Extension (zero-initialised = the old behaviour).  The relative-error floor and NVFP4's
    ** per-tensor scale need the tensor's largest finite |x| before the pass; when absmax_known is 0
    ** qs_analyze reads the tensor once more to find it (counted in progress).  Callers that have it
    ** (tensor_stats.absmax of the same tensor) pass it to keep the analysis to one read. */
    int absmax_known;
    double absmax;           /* largest finite |x| (NaN and Inf ignored; 0 for no finite non-zero) */
} qs_analyze_opts;

typedef int (*qs_an_read)(void *ctx, uint64_t start, size_t n, float *out, qs_err *e);

/* Analyze a rows x cols tensor (C order) under the format and options of `a`. */
int qs_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
               const qs_analyze_opts *o, qs_analysis *out, qs_err *e);
void qs_analysis_free(qs_analysis *an);

/* JSON texts for the result store (caller frees): the "metrics" and "hist" kinds of results.h. */
char *qs_metrics_json(const qs_metrics *m);
char *qs_hists_json(const qs_analysis *an);

#endif
