/*
** The calibration transforms of an `llm eval` configuration (docs/llm.md, "Calibration
** transforms"): smooth=ALPHA (SmoothQuant), w=F:gptq (GPTQ) and w=F:awq (AWQ), applied to a copy of
** the FP32 model before its weights are rounded.  Per layer: SmoothQuant's scales folded at every
** site (or the norm sites only), then AWQ's searched scales folded site by site, then every linear
** weight rounded (GPTQ with the site's Hessian, else plainly); the output projection is rounded
** plainly.  The statistics come from the FP32 reference on the calibration text (analysis/llm_calib.h)
** and follow the folds exactly (x / s: max and mean divided by s, H by s_i s_j), so no second capture
** is needed.  Layers are processed in groups whose Hessians fit the capture's budget.
*/
#ifndef QS_LLM_WTRANS_H
#define QS_LLM_WTRANS_H

#include <jansson.h>

#include "llm_calib.h"
#include "../kernels/llm_gptq.h"

typedef enum qs_wt_round { QS_WT_PLAIN = 0, QS_WT_GPTQ, QS_WT_AWQ } qs_wt_round;

typedef struct qs_wtrans {
    int smooth;               /* SmoothQuant on */
    double alpha;             /* its migration strength */
    int smooth_norm;          /* only the sites after a norm (attn_in, ffn_in), as the reference code */
    qs_wt_round wround;       /* how the weights are rounded (needs a weight format unless plain) */
    qs_gptq_opts gptq;
    int awq_grid;             /* AWQ's grid points (20) */
} qs_wtrans;

/* Needs a calibration capture. */
static inline int qs_wtrans_on(const qs_wtrans *t) { return t->smooth || t->wround != QS_WT_PLAIN; }

/* The transform's part of a configuration's stored key: its parameters and the calibration's text hash,
** ctx and chunks (NULL when off). */
json_t *qs_wtrans_json(const qs_wtrans *t, const qs_calib_src *src);

/* dst = src transformed, its weights rounded with w (NULL: FP32 weights, smoothing only); cache holds
** the capture between calls (pass a zeroed one; free with qs_calib_free). */
int qs_wtrans_build(qs_llm_model *dst, const qs_llm_model *src, const qs_wtrans *t, const qs_apply *w, int scaled,
                    const qs_calib_src *cs, qs_calib *cache, qs_err *e);

#endif
