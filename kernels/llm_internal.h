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
/* Round a weight matrix [rows][cols] in place as qs_llm_quantize_weights does (experts, llm_moe.c). */
int qs_llm_quant_matrix(const qs_apply *w, int scaled, float *p, size_t rows, size_t cols, qs_err *e);
/* QK-norm: RMSNorm of each head of R rows of q [R][n_head*hd] and k [R][n_kv_head*hd] with gains qn/kn [hd]. */
void qs_llm_qk_norm(float *q, float *k, const float *qn, const float *kn, int R, int n_head, int n_kv_head, int hd, float eps);

/* The working arrays of a state (llm.c's qs_llm_state) for the Gemma block (llm_gemma.c). */
typedef struct qs_llm_sbuf {
    float *kc, *vc;           /* [layer][batch][max_pos][kv_dim] */
    float *x, *xn, *q, *k, *v, *att, *h1, *h2, *tmp;
    int batch, max_pos, max_rows;
    struct qs_pgemm_cache *pc;
    const qs_llm_cfg *c;      /* the shape the state was made for */
} qs_llm_sbuf;
void qs_llm__state_bufs(qs_llm_state *s, qs_llm_sbuf *b);
/* y[R][out] = x[R][in] . W[out][in]^T, as the forward pass multiplies (packed weights when pc). */
void qs_llm__linear(struct qs_pgemm_cache *pc, float *y, const float *x, const float *W, int R, int in, int out);

#endif
