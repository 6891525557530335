/*
** The Gemma 2 / Gemma 3 block (the cfg fields after rope_neox in llm.h): the forward pass of a model
** whose configuration asks for any of GeGLU, sandwich norms, embedding scaling, a score scale other
** than 1/sqrt(head_dim), attention soft-capping or per-layer RoPE (QK-norm and sliding-window layers
** alone run in the Llama block: Qwen3, Mistral).
** qs_llm_forward_from hands such a model here; the Llama block stays in llm.c untouched.
**
** Per layer (Hugging Face's Gemma2DecoderLayer / Gemma3DecoderLayer, llama.cpp's gemma2 / gemma3 graphs):
**   h = RMSNorm(x) -> Q, K, V (+ biases) -> [QK-norm: per-head RMSNorm of Q and K] -> RoPE (local layers:
**   rope_base_swa, global: rope_base with positions / rope_linear) -> K/V into the cache ->
**   scores = scale * Q K^T -> [cap * tanh(scores / cap)] -> causal mask (local layers: also the last
**   sliding_window positions only) -> softmax -> P V -> O projection -> [RMSNorm post_attn_norm] -> + x;
**   h = RMSNorm(x) -> act(gate) * up (GeGLU: gelu with the tanh approximation) -> down -> [RMSNorm
**   post_ffn_norm] -> + x.  The embeddings are scaled by emb_scale; the final logits capped by
**   qs_llm_logits (final_softcap).
** Norm weights are used as stored: Gemma's (1 + w) of Hugging Face checkpoints is added by the loader
** (llama.cpp's converter already stores w + 1 in GGUF files).
** Numerics (activation, KV-cache, per-layer formats) and taps are those of llm.h, at the same sites.
** The batched decoder (llm_decode.h) and training (llm_train.h) run the Llama block only and refuse
** these models (qs_llm_gemma_refuse).
*/
#ifndef QS_LLM_GEMMA_H
#define QS_LLM_GEMMA_H

#include "llm.h"

/* 1 when the configuration needs this block (a Gemma field set; final_softcap, qk_norm, sliding_window alone do not). */
int qs_llm_gemma_block(const qs_llm_cfg *c);
/* The Gemma fields' own checks (called by qs_llm_cfg_check). */
int qs_llm_gemma_check(const qs_llm_cfg *c, qs_err *e);
/* Floats per layer of the sandwich and QK norms (at the end of the model's arena), and their placement
** from p on (also sets L->sliding); returns the next free float. */
size_t qs_llm_gemma_layer_floats(const qs_llm_cfg *c);
float *qs_llm_gemma_place(const qs_llm_cfg *c, int l, qs_llm_layer *L, float *p);
/* 1 when layer l is a local (sliding-window) layer. */
int qs_llm_gemma_sliding(const qs_llm_cfg *c, int l);
/* -1 with "<what> runs the Llama block only: <arch features> ... not supported" when the block is needed. */
int qs_llm_gemma_refuse(const qs_llm_cfg *c, const char *what, qs_err *e);
/* cap * tanh(x / cap) over n values (final logits). */
void qs_llm_softcap(float *x, size_t n, float cap);

/* qs_llm_forward_from for such a model (the same contract, see llm.h). */
int qs_llm_gemma_forward(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok, int B,
                         int T, int pos0, int l0, const float *x0, float *hidden, qs_llm_tap_fn tap, void *tap_ctx,
                         qs_err *e);

#endif
