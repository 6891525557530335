/*
** Per-run scaling of element casts (see cast_scale.h).
*/
#include "cast_scale.h"

#include <math.h>
#include <string.h>

double qs_cast_scale_target(const qs_format *f) { return f->scale_target; }   /* the row's */

static const char *const kCs[] = {"none", "tensor", "row", "col"};
const char *qs_cscale_name(int c) { return (unsigned)c < 4 ? kCs[c] : "?"; }
int qs_cscale_parse(const char *s, int *c)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, kCs[i])) { *c = i; return 0; }
    return -1;
}

void qs_cast_scale_of(const qs_format *f, float amax, float *s, float *inv)
{
    const double target = qs_cast_scale_target(f);
    *s = *inv = 0;
    if (!(target > 0) || !(amax > 0) || amax == INFINITY) return;
    *s = (float)(target / amax);
    *inv = (float)(amax / target);
}

int qs_cast_scaled_apply(const qs_format *f, const qs_qopts *o, const float *x, size_t n, const float *s,
                         const float *inv, size_t stride, float *y, qs_err *e)
{
    for (size_t i = 0; i < n; i++) { float si = s[i * stride]; y[i] = si != 0 ? x[i] * si : x[i]; }
    if (f->fakeq(f, o, y, n, y, e)) return -1;
    for (size_t i = 0; i < n; i++) if (s[i * stride] != 0) y[i] *= inv[i * stride];
    return 0;
}

int qs_cast_scaled(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    float amax = 0, s, inv;
    for (size_t i = 0; i < n; i++) { float v = fabsf(x[i]); if (v > amax && v != INFINITY) amax = v; }
    qs_cast_scale_of(f, amax, &s, &inv);
    if (s == 0) return f->fakeq(f, o, x, n, y, e);
    return qs_cast_scaled_apply(f, o, x, n, &s, &inv, 0, y, e);
}
