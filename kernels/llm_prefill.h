/*
** Row passes and fused products of a many-row forward pass (prefill, model evaluation), on the thread
** pool: residual add + RMSNorm in one pass, gate|up products with SwiGLU per panel of 32 columns
** (kernels/llm_pgemm.h), and biases + RoPE + KV-cache write per row.  Each computes a row (or an
** element) exactly as the one-row code of llm.c does.
*/
#ifndef QS_LLM_PREFILL_H
#define QS_LLM_PREFILL_H

#include "llm.h"

/* x[r] += add[r] (add may be NULL), then out[r] = rmsnorm(x[r]) . w (out may be NULL); R rows of d. */
void qs_prefill_add_norm(float *x, const float *add, float *out, const float *w, int R, int d, float eps);

/* h[R][F] = SwiGLU(x . w_gate^T, x . w_up^T); u[R][F] is scratch (the up products); pc: packed weights or NULL;
** tw_gate, tw_up: typed weights in place of w_gate, w_up (llm_wtype.h; released after), or NULL. */
struct qs_pgemm_cache;
struct qs_wt;
void qs_prefill_swiglu(struct qs_pgemm_cache *pc, float *h, float *u, const float *x, const float *w_gate,
                       const float *w_up, const struct qs_wt *tw_gate, const struct qs_wt *tw_up, int R, int d, int F);

/* Row r = b * T + t of q/k/v (position pos0 + t of sequence b): add the biases (NULL: none), rotate q
** and k, and write k and v (through kvf when not NULL) into the cache rows of sequence b.  kp/vp (not
** NULL, pos0 0): the same K and V also packed for attention's panel products (llm_pgemm.h), per
** sequence b and kv head h at (b * n_kv_head + h) * ldp * hdp: K as [key / 32][hd][32], V as
** [dim / 32][ldp][32] (ldp, hdp: max_pos, hd rounded up to 32). */
typedef struct qs_prefill_rope {
    float *q, *k, *v, *kc, *vc;       /* kc/vc: this layer's cache, [batch][max_pos][kv_dim] */
    float *kp, *vp;
    int ldp;
    const float *bq, *bk, *bv, *rcos, *rsin;
    const qs_apply *kvf;
    int scaled, R, T, pos0, max_pos, n_head, n_kv_head, hd, neox;
    const float *qn, *kn;             /* QK-norm gains (after the biases, before RoPE), or NULL */
    float eps;
} qs_prefill_rope;
int qs_prefill_rope_kv(const qs_prefill_rope *a, qs_err *e);

#endif
