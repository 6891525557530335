/*
** Ragged batched decoding for sampling (the GRPO rollouts of issue 27): one call forwards R rows, row
** r being token tok[r] of the sequence in cache slot slot[r] at position pos[r] — different
** sequences, each at its own position (prompts of different lengths), or several positions of one
** sequence (a prompt's prefill).  Every weight matrix is one GEMM with M = R (kernels/llm_gemm.h),
** attention reads each row's own slot of the KV cache.  Same numerics as qs_llm_forward (llm.h:
** activation, KV and per-layer formats, Rollout-ResQ); every row is computed the same way whatever
** else is in the call or the thread count, so a sequence decoded alone equals itself in any batch.
** Optionally counts, per (layer, site), the non-zero values the activation rounding sends to zero.
*/
#ifndef QS_LLM_DECODE_H
#define QS_LLM_DECODE_H

#include <stdint.h>

#include "llm.h"
#include "pool.h"

typedef struct qs_llm_dec qs_llm_dec;

/* KV caches for `slots` sequences of up to max_pos positions, and room for max_rows rows per call. */
qs_llm_dec *qs_llm_dec_new(const qs_llm_cfg *c, int slots, int max_pos, int max_rows, qs_err *e);
void qs_llm_dec_free(qs_llm_dec *d);
/* Copy positions [0, npos) of slot src into slot dst, every layer (a prompt prefilled once, sampled
** G times). */
void qs_llm_dec_copy(qs_llm_dec *d, int dst, int src, int npos);

/* Underflow counters: QS_LLM_UF_LEN(n_layer) uint64_t, at QS_LLM_UF(l, site) the non-zero values
** rounded and at +1 those that became 0; sites 0..3 the linear inputs (QS_SITE_*), 4 the K/V cache
** rows; "layer" n_layer, site 0: the output projection's input. */
#define QS_LLM_UF_LEN(n_layer) ((size_t)((n_layer) + 1) * QS_LLM_NLSITE * 2)
#define QS_LLM_UF(l, site) (((size_t)(l) * QS_LLM_NLSITE + (size_t)(site)) * 2)

/* Forward R rows (see above); the K/V of every row is written before any row attends, so a row may
** attend to rows of the same call at lower positions of its slot; positions below the lowest of a
** slot's rows must already be in its cache.  hidden[r*dim]: the final RMSNorm output.  uf: counters
** to add to, or NULL. */
int qs_llm_dec_step(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                    const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e);

/* on = 0: run the step pass by pass (one pool call per GEMM, rounding and attention), the reference
** the fused passes equal bit for bit (tests); 1 (the default): fused. */
void qs_llm_dec_set_fused(qs_llm_dec *d, int on);

/* Logits of R hidden rows (act rounds them first, as qs_llm_logits): out[r*vocab + v]. */
int qs_llm_dec_logits(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                      float *out, uint64_t *uf, qs_err *e);
/* The same, then each(ctx, r, slot) for every row r once every logit is in out, in the same pool
** call (one hand-off less per decode step); slot < qs_llm_threads() at qs_llm_dec_new, a pool slot
** (kernels/pool.h: scratch indexed by it needs no lock).  each NULL: qs_llm_dec_logits. */
int qs_llm_dec_logits_each(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                           float *out, uint64_t *uf, qs_pool_fn each, void *ctx, qs_err *e);

#endif
