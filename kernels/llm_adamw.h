/*
** AdamW on the FP32 master weights of a qs_llm_model (issue 26, second part), with the gradients of
** kernels/llm_train.h, a learning-rate schedule and global gradient-norm clipping.
**
** Update (Loshchilov & Hutter, decoupled weight decay; the form of llm.c's adamw_kernel), step t >= 1:
**   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  mh = m / (1 - b1^t),  vh = v / (1 - b2^t)
**   w -= lr * (mh / (sqrt(vh) + eps) + wd * w)
** where g is the accumulated gradient times `gscale` (1/accum times the clip factor).  Weight decay
** applies to the matrices only (embedding, output projection, Q/K/V/O, gate/up/down), as llm.c
** decays 2-D tensors only; RMSNorm weights and Q/K/V biases are not decayed.
** Everything is FP32 in plain loops over contiguous spans of the model's arenas; the result depends
** on nothing but the inputs (no threads, no reductions in the update).
*/
#ifndef QS_LLM_ADAMW_H
#define QS_LLM_ADAMW_H

#include <stddef.h>

#include "llm.h"
#include "llm_train.h"
#include "qs_err.h"

typedef struct qs_adamw_opts {
    double beta1, beta2, eps, wd;   /* llm.c defaults: 0.9, 0.95, 1e-8, 0.0 (qscope train: wd 0.1) */
} qs_adamw_opts;

typedef struct qs_adamw_span { size_t off, n; int bias, decay; } qs_adamw_span;   /* bias: in bias_arena */

typedef struct qs_adamw {
    float *m, *v;             /* moments: arena_len floats, then bias_len floats */
    size_t arena_len, bias_len;
    qs_adamw_span *span;      /* every tensor of the model once (tied: the embedding once) */
    int nspan;
    long t;                   /* steps taken */
} qs_adamw;

/* Zeroed moments for the model m (its shape and layout). */
int qs_adamw_new(qs_adamw *o, const qs_llm_model *m, qs_err *e);
void qs_adamw_free(qs_adamw *o);

/* One AdamW step of m with gradients g (shaped like m) scaled by gscale, at learning rate lr. */
int qs_adamw_step(qs_adamw *o, qs_llm_model *m, const qs_llm_grads *g, double gscale, double lr,
                  const qs_adamw_opts *opt, qs_err *e);

/* The update of one span (exposed for the unit test): bc1 = 1 - b1^t, bc2 = 1 - b2^t. */
void qs_adamw_update(float *w, const float *g, float *m, float *v, size_t n, float gscale, float lr, float b1, float b2,
                     float bc1, float bc2, float eps, float wd);

/* L2 norm of every gradient (each tensor once; double accumulation in a fixed order). */
double qs_llm_grads_norm(const qs_llm_grads *g);

/* Learning rate of step s (0-based) of `steps`: linear warm-up lr*(s+1)/warmup over the first
** `warmup` steps, then cosine from lr down to lr*min_frac at the last step (llm.c's schedule). */
double qs_lr_schedule(int s, int steps, int warmup, double lr, double min_frac);

#endif
