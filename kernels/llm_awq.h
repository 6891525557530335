/*
** AWQ's per-channel scale search (Lin et al., "AWQ: Activation-aware Weight Quantization for LLM
** Compression and Acceleration", MLSys 2024), as its reference code's auto_scale: for one input site,
** s(a) = xmean^a (xmean = mean |x| per channel over the calibration tokens, clamped to >= 1e-4),
** normalised by sqrt(max s * min s), for a = i / grid, i = 0 .. grid-1 (the code's n_grid = 20, so a
** runs over [0, 1) and a = 0 is plain rounding); the error of a is the squared output error of the
** site's linear layers on the calibration inputs with their weights rounded as Q(W diag s) diag(1/s),
** from the Hessian H = 2/N X^T X (qs_gptq_layer_err), and the a of least error wins.  The reference
** code measures the output of the whole block for q/k/v and gate/up (attention, MLP); here the
** linear layers' own outputs are measured.  Its weight-clipping search (auto_clip) is not reproduced.
*/
#ifndef QS_LLM_AWQ_H
#define QS_LLM_AWQ_H

#include <stddef.h>

#include "format_apply.h"
#include "qs_err.h"

/* W[k] [rows[k]][cols] (nm matrices reading the site; unchanged), xmean [cols] (already tied across
** a KV group when the site needs it), H [cols][cols].  Writes the winning scales s [cols], the
** winning a, and when err is not NULL the error of every grid point (err[grid]). */
int qs_awq_search(const qs_apply *w, int scaled, float *const *W, const size_t *rows, int nm, size_t cols,
                  const double *H, const float *xmean, int grid, float *s, double *best_a, double *err, qs_err *e);

#endif
