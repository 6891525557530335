/*
** The row-wise passes of the training pass (kernels/llm_train.c) on the thread pool: RMSNorm and its
** gradient, RoPE, SwiGLU and its gradient, residual sums, and the softmax cross-entropy over the
** vocabulary.  Work is cut into fixed ranges of rows (or of the RMSNorm weight's columns), each
** written by one task, and sums across rows run in a fixed order, so results do not depend on the
** thread count.  Exponentials are llm_rows.h's vectorised ones (as the inference pass).
*/
#ifndef QS_LLM_TRAIN_ROWS_H
#define QS_LLM_TRAIN_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* out = x * rinv * w per row, rinv[r] = (mean x_r^2 + eps)^-1/2. */
void qs_lt_rmsnorm(float *out, float *rinv, const float *x, const float *w, int R, int n, float eps);
/* dx += rinv (w dy) - rinv^3 x sum(w dy x) / n per row;  dw += sum over rows of dy x rinv (rows in order). */
void qs_lt_rmsnorm_back(float *dx, float *dw, const float *dy, const float *x, const float *rinv, const float *w,
                        int R, int n);
/* Rotate (dir 1) or rotate back (dir -1) every head of rows v[r] (nheads * hd floats), position r % T. */
void qs_lt_rope(float *v, int R, int T, int nheads, int hd, const float *rcos, const float *rsin, int neox, float dir);
/* h = silu(g) * u over n values. */
void qs_lt_swiglu(float *h, const float *g, const float *u, size_t n);
/* du = dh g sig(g),  dg = dh u sig(g) (1 + g (1 - sig(g))). */
void qs_lt_swiglu_back(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);
/* y = a + b over n values (y may be a or b). */
void qs_lt_add(float *y, const float *a, const float *b, size_t n);
/* Sum over the B*T rows of logits of -log p(target) (times wt[r] when wt is not NULL); lp (when not NULL)
** gets each row's log p(target).  With grad, the rows become d(mean loss)/d(logits), or with wt
** d(-sum wt log p)/d(logits) (a row of weight 0 becomes 0).  Targets are tokens[b*(T+1) + t + 1]. */
double qs_lt_xent(float *logits, const int32_t *tokens, int B, int T, int V, int grad, const double *wt, double *lp);

#endif
