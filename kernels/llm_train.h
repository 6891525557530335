/*
** Training forward and backward pass of the Llama-architecture model of llm.h, in FP32 (issue 26,
** first part: the verified gradient; no optimizer yet).  The forward pass is the one of
** qs_llm_forward without numerics (same RMSNorm, RoPE styles, grouped-query causal attention, SwiGLU,
** Q/K/V biases, tied or separate output projection) but keeps what the backward pass needs; the loss
** is the mean cross-entropy of every next token.  Matrix products go through OpenBLAS (cblas_sgemm);
** attention is SGEMMs per (sequence, head) on the thread pool (llm_train_attn.h).
**
** Memory (floats), R = batch * T rows, q = n_head * head_dim, kv = n_kv_head * head_dim, H = n_head:
**   weights  P = vocab*dim*(tied ? 1 : 2) + dim + n_layer*(2*dim + 2*q*dim + 2*kv*dim + 3*ffn*dim)
**              (+ n_layer*(q + 2*kv) with Q/K/V biases)
**   grads    P (the same layout: qs_llm_grads_new)
**   state    n_layer * (R*(4*dim + 2*q + 2*kv + 3*ffn + 2) + batch*H*T*T)      saved activations
**            + R*(2*dim + vocab + 1)                                            final norm, logits
**            + R*(2*dim + 2*q + 2*kv + 3*ffn) + T*head_dim                      backward scratch, RoPE
**   (qs_llm_train_state_floats gives the state's exact count).
**   kept     n_layer*(2*q*dim + 2*kv*dim + 3*ffn*dim) (+ vocab*dim, quantized head)  under a recipe
**            whose fwd.w and dgrad.w give the same matrix (qs_llm_train_state_set_recipe), <= P
*/
#ifndef QS_LLM_TRAIN_H
#define QS_LLM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"
#include "llm_recipe.h"
#include "qs_err.h"

/* Gradients have the model's layout: a qs_llm_model of the same shape (tied iff the model is, so
** the gradients of the lookup and of the output projection add up in one array; Q/K/V bias arrays
** iff the model has them). */
typedef qs_llm_model qs_llm_grads;

/* Allocate zeroed gradients shaped like m. */
int qs_llm_grads_new(qs_llm_grads *g, const qs_llm_model *m, qs_err *e);
void qs_llm_grads_zero(qs_llm_grads *g);
void qs_llm_grads_free(qs_llm_grads *g);

typedef struct qs_llm_train_state qs_llm_train_state;

/* Saved activations and scratch for `batch` sequences of T positions (positions 0 .. T-1). */
qs_llm_train_state *qs_llm_train_state_new(const qs_llm_cfg *c, int batch, int T, qs_err *e);
void qs_llm_train_state_free(qs_llm_train_state *s);
/* Floats the state of this size holds (the header's formula); 0 when the size is bad. */
size_t qs_llm_train_state_floats(const qs_llm_cfg *c, int batch, int T);

/* Forward `batch` sequences tokens[b*(T+1) + t] (t = 0 .. T-1 are inputs, t+1 the targets), write the
** mean over batch*T positions of -log p(next token) to *loss and, when g is not NULL, ADD its gradient
** with respect to every weight of m to g (zero g first to get the gradient of this batch alone).
** batch and T must not exceed the state's.  The model must have the shape the state was made for. */
int qs_llm_loss_grad(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                     double *loss, qs_llm_grads *g, qs_err *e);

/* The same with per-position weights (GRPO's policy gradient, analysis/grpo_llm.h): the loss is
** -sum_r wt[r] log p(target_r) over the batch*T positions r = b*T + t (wt NULL: wt[r] = 1/(batch*T), i.e.
** qs_llm_loss_grad, bit for bit); a position of weight 0 adds nothing to the gradient (a mask).  lp, when
** not NULL, gets every position's log p(target_r) (double, of the FP32 logits as qs_llm_logprob). */
int qs_llm_loss_grad_w(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                       const double *wt, double *lp, double *loss, qs_llm_grads *g, qs_err *e);

/* Run every linear layer's three GEMMs under the low-precision recipe r (llm_recipe.h; copied, so r
** need not outlive the call); NULL restores the FP32 path, bit for bit.  Attention products, norms,
** activations and (unless r->head) the output projection stay FP32 (docs/train.md, "Recipes").
** Allocates two scratch operands of max(batch*T, dim) * max(dim, q, ffn, vocab) floats each (a third
** when a slot has a Hadamard transform: the transformed input its counts need) and the operand counts;
** when fwd.w and dgrad.w give the same matrix (qs_llm_recipe_weight_reuse: nvfp4's 16x16 tiles), the
** forward's quantized linear weights, kept for the input-gradient GEMMs of the same pass instead of
** quantized again: n_layer*(2*q*dim + 2*kv*dim + 3*ffn*dim) floats, + vocab*dim when r->head (at most P;
** qs_llm_train_state_keep_floats).
** On failure the state is left without a recipe (the FP32 path). */
int qs_llm_train_state_set_recipe(qs_llm_train_state *s, const qs_llm_recipe *r, qs_err *e);

/* Per-linear recipes (`train --recipe-file PLAN`, docs/train.md "Plans"): n = qs_llm_train_recipe_count
** = n_layer*7 + 1 recipes, entry l*QS_LLM_TRAIN_NLIN + k for layer l's linear k in the order wq, wk, wv,
** wo, w_gate, w_up, w_down, entry n_layer*7 the output head (quantized iff its .head); each runs that
** linear's three GEMMs as set_recipe runs every linear's (copied; per NULL restores the FP32 path).
** Recipes all equal to r give set_recipe(r)'s bits.  The SR call counter is the state's, shared by every
** linear; an input shared by several GEMMs (Q/K/V, gate/up) is quantized once only where their slots
** agree; the forward's weights are kept for the input gradient per linear whose recipe allows it
** (qs_llm_recipe_weight_reuse).  A wrong n fails (the state is then left without a recipe). */
#define QS_LLM_TRAIN_NLIN 7
size_t qs_llm_train_recipe_count(const qs_llm_cfg *c);
int qs_llm_train_state_set_recipes(qs_llm_train_state *s, const qs_llm_recipe *per, size_t n, qs_err *e);

/* Cross-checks (`qscope train --operand-out`): under a recipe, tap(ctx, key, op, src, q, rows, cols) sees
** both operands of every GEMM the recipe quantizes, before the product: src the FP32 operand, q what the
** GEMM multiplies (an off slot's q is a copy of src), rows x cols row-major; key identifies the linear
** layer: its weight array (forward and input-gradient GEMMs) or its gradient array in the grads passed
** to qs_llm_loss_grad (weight-gradient GEMM).  NULL removes the tap. */
typedef void (*qs_llm_operand_tap)(void *ctx, const void *key, int op, const float *src, const float *q, size_t rows,
                                   size_t cols);
/* Floats of the kept quantized weights (0: the recipe does not keep them). */
size_t qs_llm_train_state_keep_floats(const qs_llm_train_state *s);

void qs_llm_train_state_set_tap(qs_llm_train_state *s, qs_llm_operand_tap tap, void *ctx);
/* Under a recipe: what quantizing the operands did since the last reset (or set_recipe), as counts
** per (layer, operand), (n_layer + 1) x QS_OP_COUNT, row n_layer the output head (zero unless
** recipe.head); NULL without a recipe.  The counts add over qs_llm_loss_grad calls. */
const qs_llm_opstat *qs_llm_train_state_opstats(const qs_llm_train_state *s);
void qs_llm_train_state_opstats_reset(qs_llm_train_state *s);

/* The recipe's GEMM call counter (SR seeds, RHT signs; set_recipe restarts it at 0): read before a call
** to re-run it identically, and set by a resumed run so it draws what the uninterrupted one would have. */
uint64_t qs_llm_train_state_calls(const qs_llm_train_state *s);
void qs_llm_train_state_set_calls(qs_llm_train_state *s, uint64_t calls);

/* Where a pass first produced a non-finite value: re-runs qs_llm_loss_grad on the batch (into gradients
** of its own; the recipe's call counter set to `calls`, as before the failed call, and restored after;
** the operand statistics kept) with a check after every GEMM (its FP32 operands, its quantized
** operands, its output, in that order), every layer's residual output and input gradient, the loss and
** the gradients, and writes the first failing one to site, e.g. "layer 1 fwd w_up GEMM: its weights",
** "layer 3 bwd dgrad wo GEMM: its output".  Returns 1 when a site was found, 0 when the re-run stayed
** finite, -1 on error.  The ordinary pass checks nothing (the hot path stays as fast). */
int qs_llm_nonfinite_site(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                          uint64_t calls, char *site, size_t cap, qs_err *e);

/* Wall seconds qs_llm_loss_grad spent in each part since the state was made (or the last reset), for
** `qscope bench train`; a clock read per part, never part of a result.  Forward and backward GEMMs
** exclude their operands' quantization (QS_LT_QUANT); ROWS is the norms, RoPE, SwiGLU, residuals and
** embedding; HEAD the softmax cross-entropy over the vocabulary (its GEMMs count as GEMMs). */
enum { QS_LT_FWD_GEMM, QS_LT_BWD_GEMM, QS_LT_QUANT, QS_LT_ATTN, QS_LT_ROWS, QS_LT_HEAD, QS_LT_COUNT };
void qs_llm_train_state_times(const qs_llm_train_state *s, double t[QS_LT_COUNT]);
void qs_llm_train_state_times_reset(qs_llm_train_state *s);

#endif
