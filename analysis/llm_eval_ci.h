/*
** Intervals over chunks for `llm eval` (issue 28; docs/llm.md "Intervals").  The default ± of the
** table treats scored tokens as independent (llama.cpp's standard errors); neighbouring tokens of
** one chunk share their context, so the honest unit of resampling is the chunk.  This file works on
** the per-token arrays every variant stores (qs_eval_out, chunk-major: chunk c holds tokens
** c * per_chunk ..) and gives:
**   - a percentile bootstrap over whole chunks (B resamples, seeded, deterministic: resample b draws
**     the same chunks for every statistic and variant, so intervals are comparable);
**   - a paired comparison of two configurations on the same tokens: the difference of their ln PPL
**     ratios (= ln PPL(B)/PPL(A)) and of their KL means, with a 95% interval from the per-chunk
**     differences (Student t over chunks) or from the bootstrap.
** A token counts where the reference's and the variant's (both variants') NLL are finite, as in
** qs_eval_summarize.  Every mean is the token-weighted ratio sum(x) / count over the chunks drawn.
*/
#ifndef QS_LLM_EVAL_CI_H
#define QS_LLM_EVAL_CI_H

#include <stddef.h>
#include <stdint.h>

#include "llm_eval.h"
#include "../kernels/qs_err.h"

#define QS_EVCI_DEFAULT_B 1000
#define QS_EVCI_DEFAULT_SEED 1u

typedef enum qs_evci_method { QS_EVCI_DELTA, QS_EVCI_BOOTSTRAP } qs_evci_method;

typedef struct qs_evci_opts {
    qs_evci_method method;
    int resamples;            /* B (bootstrap) */
    uint64_t seed;
} qs_evci_opts;

/* An estimate with its 95% interval (NaN when there is none). */
typedef struct qs_evci_est { double v, lo, hi; } qs_evci_est;

/* A variant's bootstrap intervals: PPL, and against the reference (configurations) the PPL ratio's
** ln, dPPL = ratio - 1 and the KL mean. */
typedef struct qs_evci_var {
    size_t n;                 /* tokens used */
    qs_evci_est ppl, lnratio, dppl, kl;
} qs_evci_var;

/* A paired comparison of configuration b against a (both against the reference). */
typedef struct qs_evci_pair {
    size_t n;                 /* tokens used: finite in the reference, a and b */
    int chunks;               /* chunks holding such tokens */
    qs_evci_est dln;          /* mean of nll_b - nll_a = ln PPL(b)/PPL(a) = lnratio(b) - lnratio(a) */
    qs_evci_est dkl;          /* KL mean of b minus that of a */
    double dln_se, dkl_se;    /* standard errors over chunks (the t interval's; NaN under bootstrap) */
} qs_evci_pair;

/* Parse "delta", "bootstrap" or "bootstrap:N" or "bootstrap:N:SEED" (N in 10 .. 1e6).  0, or -1. */
int qs_evci_parse(const char *s, qs_evci_opts *o);
/* "delta" or "bootstrap". */
const char *qs_evci_method_name(qs_evci_method m);

/* Two-sided 95% Student t quantile with df degrees of freedom (1.96 as df grows; NaN for df < 1). */
double qs_evci_t975(int df);

/* Chunk index j of resample b (0 <= j < nchunks): splitmix64 of (seed, b, j), so resample b is the
** same whatever is resampled. */
int qs_evci_draw(uint64_t seed, int b, int j, int nchunks);

/* Ratio estimate sum(s) / sum(n) of per-chunk sums s[c] over counts n[c] and its 95% percentile
** bootstrap interval (o->resamples resamples of nchunks chunks with replacement); NaN when no count. */
int qs_evci_boot_ratio(const double *s, const double *n, int nchunks, const qs_evci_opts *o, qs_evci_est *out, qs_err *e);
/* The same estimate with its standard error over chunks (clustered: sqrt(C/(C-1) sum (s_c - est n_c)^2)
** / sum(n), C the chunks with a count) and the t interval est -+ t(C-1) se; NaN interval for C < 2. */
void qs_evci_chunk_t(const double *s, const double *n, int nchunks, qs_evci_est *out, double *se);

/* Bootstrap intervals of variant v (0: the reference, only ppl) of tok.  0, or -1 with e set. */
int qs_evci_variant(const qs_eval_out *tok, size_t per_chunk, int v, const qs_evci_opts *o, qs_evci_var *out, qs_err *e);
/* Configuration b against configuration a (variant indices >= 1 of tok). */
int qs_evci_paired(const qs_eval_out *tok, size_t per_chunk, int a, int b, const qs_evci_opts *o, qs_evci_pair *out,
                   qs_err *e);

#endif
