/*
** Paper claims: one measurement per reproducible headline number of the papers qscope is built
** on, with fixed seeds and stated settings, and a verdict.
**
** A claim is a row of a table (claims.c concatenates the groups of claims_*.c, the way format.c
** concatenates format families).  Its measure function fills a qs_claim_out: the measured figure
** as the table shows it, the settings and per-case numbers, a verdict and, where a picture helps,
** a plot.  Claims marked must_hold are exact facts and bounds (a format's value set, an error bound
** never exceeded, a sum exact by construction): `qscope claims --quick` fails when one of them
** does not reproduce, and `make test` runs it.
*/
#ifndef QS_CLAIMS_H
#define QS_CLAIMS_H

#include <stddef.h>

#include "../kernels/qs_err.h"
#include "plot.h"

typedef enum qs_verdict {
    QS_VERDICT_REPRODUCED,   /* within the stated tolerance */
    QS_VERDICT_DIFFERS,      /* measured outside it; detail says by how much and the likely reason */
    QS_VERDICT_NOT_CPU,      /* cannot be measured on a CPU (detail says why) */
    QS_VERDICT_MODEL,        /* the figure of a model the project reconstructs: it checks the model's
                             ** arithmetic, not the paper (nothing is measured, so it cannot reproduce) */
    QS_VERDICT_INCONCLUSIVE, /* a statistical claim whose 95 % interval straddles the tolerance, or too few
                             ** runs to form one: neither reproduced nor contradicted */
} qs_verdict;

typedef struct qs_claim_out {
    qs_verdict verdict;
    double value;            /* the headline measured number (NaN when the claim is not numeric) */
    char measured[200];      /* as the table shows it, e.g. "1 : 1.31 : 1.89" */
    char detail[1200];       /* settings, per-case figures, the reason when it differs */
    qs_figure *fig;          /* optional plot (owned by the caller: qs_fig_free) */
} qs_claim_out;

typedef struct qs_claim {
    const char *id;          /* "hif8.binades" */
    const char *paper;       /* "HiFloat8 (arXiv 2409.16626)" */
    const char *claim;       /* what the paper says, in one line */
    const char *figure;      /* the paper's figure, e.g. "38" */
    const char *tolerance;   /* how close counts as reproduced, e.g. "exact", "±3 %" */
    int must_hold;           /* exact facts and bounds, checked by --quick */
    /* quick: the reduced sizes of `--quick` (same seeds); returns -1 only on an internal failure
    ** (out of memory, a format missing): a claim that does not reproduce is a verdict, not an error */
    int (*measure)(int quick, qs_claim_out *out, qs_err *e);
} qs_claim;

/* Every claim, in table order. */
size_t qs_claim_count(void);
const qs_claim *qs_claim_at(size_t i);
const char *qs_verdict_name(qs_verdict v);   /* "reproduced", "differs", "not on CPU", "model", "inconclusive" */

/* The groups (claims_*.c). */
extern const qs_claim qs_claims_formats[];
extern const size_t qs_claims_formats_n;
extern const qs_claim qs_claims_kernels[];
extern const size_t qs_claims_kernels_n;
extern const qs_claim qs_claims_rl[];
extern const size_t qs_claims_rl_n;
extern const qs_claim qs_claims_train[];
extern const size_t qs_claims_train_n;
extern const qs_claim qs_claims_grpo[];
extern const size_t qs_claims_grpo_n;
extern const qs_claim qs_claims_lopt[];   /* claims_lopt.c */
extern const size_t qs_claims_lopt_n;

#endif
