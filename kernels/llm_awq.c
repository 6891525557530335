/*
** AWQ's scale search (llm_awq.h).
*/
#include "llm_awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_gptq.h"

static void scales_of(const float *xmean, size_t n, double a, float *s)
{
    double mx = 0, mn = INFINITY;
    for (size_t j = 0; j < n; j++) {
        double v = pow(fmax((double)xmean[j], 1e-4), a);
        s[j] = (float)v;
        mx = fmax(mx, v);
        mn = fmin(mn, v);
    }
    const double norm = sqrt(mx * mn);
    for (size_t j = 0; j < n; j++) s[j] = (float)(s[j] / norm);
}

/* Squared output error of the site's layers with weights Q(W diag s) diag(1/s). */
static int err_of(const qs_apply *w, int scaled, float *const *W, const size_t *rows, int nm, size_t cols, const double *H,
                  const float *s, float *buf, double *out, qs_err *e)
{
    double t = 0;
    for (int k = 0; k < nm; k++) {
        const size_t n = rows[k] * cols;
        for (size_t i = 0; i < n; i++) buf[i] = W[k][i] * s[i % cols];
        if (qs_llm_quant_matrix(w, scaled, buf, rows[k], cols, e)) return -1;
        for (size_t i = 0; i < n; i++) buf[i] /= s[i % cols];
        t += qs_gptq_layer_err(buf, W[k], rows[k], cols, H);
    }
    *out = t;
    return isfinite(t) ? 0 : qs_fail(e, "AWQ: the output error is not finite");
}

int qs_awq_search(const qs_apply *w, int scaled, float *const *W, const size_t *rows, int nm, size_t cols,
                  const double *H, const float *xmean, int grid, float *s, double *best_a, double *err, qs_err *e)
{
    size_t big = 0;
    for (int k = 0; k < nm; k++) big = rows[k] > big ? rows[k] : big;
    float *buf = malloc(big * cols * sizeof *buf), *cand = malloc(cols * sizeof *cand);
    int rc = -1;
    if (!buf || !cand) { qs_fail(e, "out of memory"); goto out; }
    double best = INFINITY;
    *best_a = 0;
    for (int i = 0; i < grid; i++) {
        const double a = (double)i / grid;
        double v;
        scales_of(xmean, cols, a, cand);
        if (err_of(w, scaled, W, rows, nm, cols, H, cand, buf, &v, e)) goto out;
        if (err) err[i] = v;
        if (v < best) { best = v; *best_a = a; memcpy(s, cand, cols * sizeof *s); }
    }
    rc = 0;
out:
    free(buf);
    free(cand);
    return rc;
}
