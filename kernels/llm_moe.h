/*
** Mixture-of-experts FFN of a layer (Mixtral, Qwen2-MoE, Qwen3-MoE): a router picks, per token, the
** n_expert_used experts of largest softmax probability; the FFN output is their SwiGLU FFNs' outputs
** weighted by those probabilities (renormalised to sum 1 when cfg.moe_norm_topk), plus, with
** cfg.ffn_shexp, a shared expert weighted by sigmoid(x . sh_inp) (Qwen2-MoE).
** Numerics: every expert GEMM is a linear layer like any other (weights rounded by
** qs_llm_quantize_weights, per expert matrix; the input of each down projection rounded row by row by
** the ffn_down_in activation format); the router's input is the FFN input as the gate/up products see
** it (rounded by ffn_in), its weights and the routing (logits, softmax, top-k, weights) stay FP32.
*/
#ifndef QS_LLM_MOE_H
#define QS_LLM_MOE_H

#include "llm.h"

/* x [R][dim]: the FFN input on entry (already rounded), the FFN output on return. */
int qs_llm_moe_ffn(const qs_llm_cfg *c, const qs_llm_moe_w *w, float *x, int R, const qs_apply *a_fd, int scaled,
                   qs_llm_resq resq, qs_err *e);
/* Round every expert matrix (router and shared-expert gate excepted) with w, one matrix at a time. */
int qs_llm_moe_quantize(const qs_llm_cfg *c, qs_llm_moe_w *m, const qs_apply *w, int scaled, qs_err *e);

#endif
