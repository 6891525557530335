/*
** Weight formats over typed weights (`llm eval --weights mapped --config w=F`): a model whose seven
** matrices per layer are rounded on the fly, layer by layer, into one reused FP32 buffer: before layer
** l runs, its typed weights (llm_wtype.h) are widened into the buffer and rounded there exactly as
** qs_llm_quantize_weights rounds an FP32 copy (whole matrices: a per-tensor scale sees the matrix's
** amax), so the results equal the FP32 path's w=F bit for bit while memory holds one layer, not the
** model.  The output head is rounded once (its FP32 copy kept); a tied embedding reads that copy, as
** the FP32 path's does.  Costs a rounding of every weight per forward pass.
*/
#ifndef QS_LLM_WFLY_H
#define QS_LLM_WFLY_H

#include "llm.h"

/* dst = src with weights rounded by w (scaled as qs_llm_quantize_weights): src with typed weights gets
** the on-the-fly view above, any other model an FP32 copy (qs_llm_clone + qs_llm_quantize_weights).
** dst is freed with qs_llm_free; src must outlive it. */
int qs_llm_round_copy(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *w, int scaled, qs_err *e);

/* Called by the forward pass before layer l of a view (m->wfly): the layer's matrices into the buffer. */
int qs_llm_wfly_layer(const qs_llm_model *m, int l, qs_err *e);

#endif
