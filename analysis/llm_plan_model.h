/*
** A per-(layer, site) format assignment applied to a model (cross-format plans, llm_plan.h): the
** per-layer activation and KV-cache formats (qs_llm_numerics.layer_fmt), a weight view rounding each
** layer's seven matrices with that layer's format, the bits each cell costs, and one evaluation of
** the whole assignment against the FP32 reference (`llm sensitivity --formats` verifies its plan so,
** `llm eval --plan` evaluates a plan file so).
**
** Cells: cell[l * QS_SENS_NSITE + s] for the sites of llm_sens.h (0..3 the linear inputs, 4 the K/V
** cache rows, 5 the layer's weights); NULL = FP32.  The output projection and its input stay FP32.
*/
#ifndef QS_LLM_PLAN_MODEL_H
#define QS_LLM_PLAN_MODEL_H

#include "llm_sens.h"

/* Bits per element of a site of one layer under a (NULL: FP32, 32): the registry's bits per element
** (qs_format_bits_per_elem: elements and block metadata) plus 32 bits for every FP32 scale of a run —
** the per-tensor scale of formats that have one (NVFP4: per weight matrix; per token row for
** activations and K/V rows, which are rounded one row at a time), and the per-run scale of a scaled
** element cast (`scaled`, or the format's scale= option: per output row of a weight matrix by default,
** per token row for activations). */
double qs_plan_site_bits(const qs_llm_cfg *c, int site, const qs_apply *a, int scaled);

typedef struct qs_plan_numerics {
    const qs_apply **layer_fmt;   /* [n_layer * QS_LLM_NLSITE] for qs_llm_numerics.layer_fmt */
    qs_llm_model view;            /* per-layer rounded weights (view.L NULL: no weight cell) */
    const qs_llm_model *m;        /* the weights to run: &view or the reference */
} qs_plan_numerics;

int qs_plan_numerics_make(const qs_llm_model *ref, const qs_apply *const *cell, int scaled, qs_plan_numerics *pn, qs_err *e);
void qs_plan_numerics_free(qs_plan_numerics *pn);
/* The variant of an evaluation (qs_llm_eval_run) that runs pn. */
qs_eval_variant qs_plan_variant(const qs_plan_numerics *pn, int scaled);

/* Evaluate the assignment against the reference: fills *s. */
int qs_plan_verify(const qs_llm_model *ref, const qs_apply *const *cell, int scaled, const int32_t *text, size_t ntext,
                   const qs_eval_setup *su, qs_eval_summary *s, qs_err *e);

#endif
