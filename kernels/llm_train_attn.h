/*
** Causal grouped-query attention of the training pass (kernels/llm_train.c), forward with the
** probabilities kept and backward, as SGEMMs per (sequence, head) on the thread pool.
**
** Per sequence b and head h (KV head kh = h / (H / KV)), with Q, K, V the head's T x hd slices:
**   forward   S = scale · Q Kᵀ,  P = causal row softmax of S (zeros above the diagonal),  O = P V
**   backward  dP = dO Vᵀ,  dV += Pᵀ dO,  dS = P ∘ (dP − rowsum(P ∘ dP)) · scale,  dQ = dS K,  dK += dSᵀ Q
** The forward runs one task per (b, h); the backward one task per (b, kh) that walks the group's heads
** in order, so dK and dV are summed in a fixed order: the same bits for any thread count.
*/
#ifndef QS_LLM_TRAIN_ATTN_H
#define QS_LLM_TRAIN_ATTN_H

#include "qs_err.h"

typedef struct qs_lt_attn {
    int B, T, H, KV, hd;
    const float *q, *k, *v;   /* [B*T][H*hd], [B*T][KV*hd] x 2 (after RoPE) */
    float *P;                 /* [B][H][T][T] probabilities (forward writes, backward reads) */
    float *att;               /* [B*T][H*hd] forward output */
    const float *datt;        /* backward: dLoss/d(att) */
    float *dq, *dk, *dv;      /* backward: set (not added) */
} qs_lt_attn;

/* Forward: P and att.  threads as qs_pool_for. */
void qs_llm_train_attn_fwd(const qs_lt_attn *a, int threads);
/* Backward: dq, dk, dv.  Needs T*T floats of scratch per thread (allocated here): fails only on that. */
int qs_llm_train_attn_back(const qs_lt_attn *a, int threads, qs_err *e);

#endif
