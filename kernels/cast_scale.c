/*
** Per-run scaling of element casts (see cast_scale.h).
*/
#include "cast_scale.h"

#include <math.h>
#include <string.h>

double qs_cast_scale_target(const qs_format *f)
{
    if (f->block != 1 || f->meta_bytes != 0 || !(f->max_finite < 1e30)) return 0;
    if (!strcmp(f->name, "hif8")) return 15.0;   /* 1.875 * 2^3: the last binade with 3 mantissa bits */
    return f->max_finite;
}

int qs_cast_scaled(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    const double target = qs_cast_scale_target(f);
    float amax = 0;
    for (size_t i = 0; i < n; i++) { float v = fabsf(x[i]); if (v > amax && v != INFINITY) amax = v; }
    if (!(target > 0) || !(amax > 0)) return f->fakeq(f, o, x, n, y, e);
    const float s = (float)(target / amax), inv = (float)(amax / target);
    for (size_t i = 0; i < n; i++) y[i] = x[i] * s;
    if (f->fakeq(f, o, y, n, y, e)) return -1;
    for (size_t i = 0; i < n; i++) y[i] *= inv;
    return 0;
}
