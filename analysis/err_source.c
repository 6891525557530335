/*
** The main error source of a metrics result (err_source.h).
*/
#include "err_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

qs_err_src qs_err_src_of(json_t *m)
{
    json_t *ee = json_object_get(m, "err_energy");
    qs_err_src s = {jnum(m, "nonfinite_frac"), jnum(ee, "underflow"), jnum(ee, "clip"), jnum(ee, "rounding"),
                    jnum(m, "n_finite"), jnum(m, "sum_e2")};
    return s;
}

const char *qs_pct(double f, char *buf, size_t cap)
{
    double p = 100 * f;
    if (!(p == p)) snprintf(buf, cap, "-");
    else if (p >= 99.5 && p < 100) snprintf(buf, cap, ">99%%");   /* %.0f would say 100 */
    else if (p >= 9.95) snprintf(buf, cap, "%.0f%%", p);
    else if (p > 0 && p < 1e-4) snprintf(buf, cap, "<0.0001%%");
    else snprintf(buf, cap, "%.2g%%", p);
    return buf;
}

/* The three sources by decreasing share (ties: rounding, underflow, clipping). */
static void order(const qs_err_src *s, const char **nm, double *v)
{
    const char *n0[3] = {"rounding", "underflow", "clipping"};
    double v0[3] = {s->round, s->under, s->clip};
    int ix[3] = {0, 1, 2};
    for (int i = 1; i < 3; i++)
        for (int k = i; k > 0 && v0[ix[k]] > v0[ix[k - 1]]; k--) { int t = ix[k]; ix[k] = ix[k - 1]; ix[k - 1] = t; }
    for (int i = 0; i < 3; i++) { nm[i] = n0[ix[i]]; v[i] = v0[ix[i]]; }
}

/* The finite error's sources: the main one, and with `rest` the others from 0.1% up. */
static void finite_part(const qs_err_src *s, int rest, char *buf, size_t cap)
{
    if (isnan(s->round) || isnan(s->under) || isnan(s->clip)) {
        snprintf(buf, cap, "%s", "-");
        return;
    }
    const char *nm[3];
    double v[3];
    char p[16];
    order(s, nm, v);
    size_t k = (size_t)snprintf(buf, cap, "%s %s", nm[0], qs_pct(v[0], p, sizeof p));
    int first = 1;
    for (int i = 1; rest && i < 3 && k < cap; i++) {
        if (!(v[i] >= 0.001)) continue;   /* below 0.1%: noise next to the main source */
        k += (size_t)snprintf(buf + k, cap - k, "%s%s %s", first ? " (" : ", ", nm[i], qs_pct(v[i], p, sizeof p));
        first = 0;
    }
    if (!first && k < cap) snprintf(buf + k, cap - k, ")");
}

static int exact(const qs_err_src *s) { return s->n_finite > 0 && s->sum_e2 == 0; }

const char *qs_err_src_short(const qs_err_src *s, char *buf, size_t cap)
{
    char p[16];
    if (s->nonfinite > 0) snprintf(buf, cap, "NaN/Inf %s", qs_pct(s->nonfinite, p, sizeof p));
    else if (exact(s)) snprintf(buf, cap, "exact");
    else finite_part(s, 0, buf, cap);
    return buf;
}

const char *qs_err_src_long(const qs_err_src *s, char *buf, size_t cap)
{
    char p[16], fin[160];
    if (s->nonfinite > 0) {
        finite_part(s, 1, fin, sizeof fin);
        if (!strcmp(fin, "-")) snprintf(buf, cap, "NaN/Inf %s of values", qs_pct(s->nonfinite, p, sizeof p));
        else snprintf(buf, cap, "NaN/Inf %s of values; finite error: %s", qs_pct(s->nonfinite, p, sizeof p), fin);
    } else if (exact(s)) snprintf(buf, cap, "none (exact)");
    else finite_part(s, 1, buf, cap);
    return buf;
}
