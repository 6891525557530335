/*
** The main error source of a stored "metrics" result (metrics.h): the source that carries the
** largest share of the finite error energy sum e^2 (underflow, clipping, rounding of the rest), or,
** when some finite values became NaN/Inf (infinite error), that fact with its share of the values.
** One wording for `analyze`, `report` and the workbench.
*/
#ifndef QS_ERR_SOURCE_H
#define QS_ERR_SOURCE_H

#include <stddef.h>

#include <jansson.h>

typedef struct qs_err_src {
    double nonfinite;        /* nonfinite_frac: finite inputs that became NaN/Inf */
    double under, clip, round;   /* err_energy shares (NaN: no finite error energy, or not stored) */
    double n_finite, sum_e2;     /* exact: some finite inputs and no error */
} qs_err_src;

/* The fields of a stored metrics object (absent ones NaN). */
qs_err_src qs_err_src_of(json_t *metrics);

/* Short text: "rounding 96%", "underflow 52%", "clipping 71%", "NaN/Inf 0.08%" (of the values),
** "exact" (no error), "-" (not known).  Returns buf. */
const char *qs_err_src_short(const qs_err_src *s, char *buf, size_t cap);

/* Long text (reports): the short one, then the other shares from 0.1% up in parentheses, e.g.
** "rounding 83% (clipping 15%, underflow 2.6%)"; with NaN/Inf values "NaN/Inf 0.08% of values;
** finite error: rounding 96% (...)". */
const char *qs_err_src_long(const qs_err_src *s, char *buf, size_t cap);

/* A percentage with two significant digits below 10% ("0.00076%", "2.6%", "96%"), "<0.0001%" below
** that; never "100%" for a share below 1. */
const char *qs_pct(double frac, char *buf, size_t cap);

#endif
