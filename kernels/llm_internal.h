/* Pieces of the forward pass (llm.c) that the batched decode step (llm_decode.c) shares, so that both
** round, normalise and rotate a row the same way. */
#ifndef QS_LLM_INTERNAL_H
#define QS_LLM_INTERNAL_H

#include "llm.h"

/* out = x / rms(x) * w over one row of n. */
void qs_llm_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps);
/* Round each row of x[rows][cols] in place with a (and Rollout-ResQ), rows on the pool; tmp holds
** 3 * cols floats. */
int qs_llm_round_rows(const qs_apply *a, int scaled, qs_llm_resq resq, float *x, int rows, int cols, float *tmp, qs_err *e);
/* RoPE of one row of nheads heads at the angles cs/sn of its position. */
void qs_llm_rope_row(float *v, int nheads, int hd, const float *cs, const float *sn, int neox);

#endif
