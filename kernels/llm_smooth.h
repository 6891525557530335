/*
** Per-channel scales folded into a Llama model (SmoothQuant, Xiao et al. ICML 2023; AWQ, Lin et al.
** MLSys 2024): the input x of the linear layers of one site becomes x / s, the matrices reading it
** W diag(s), so the FP32 function is unchanged (up to rounding) while the ranges the formats see move
** between activations and weights.  Where the division goes (docs/llm.md, "Calibration transforms"):
**   attn_in      the attention RMSNorm's weight /= s; wq, wk, wv columns *= s
**   ffn_in       the FFN RMSNorm's weight /= s;       w_gate, w_up columns *= s
**   attn_out     wv rows (and bv) /= s, wo columns *= s: the attention output is linear in V; under
**                grouped-query attention the query heads of a KV group read the same V rows, so s is
**                shared by them (qs_llm_tie_stat makes the statistics it is computed from shared)
**   ffn_down_in  w_up rows /= s, w_down columns *= s: silu(gate) * up is linear in up
** (SmoothQuant's reference code smooths only the sites after a norm; `smooth=A:norm` does that.)
*/
#ifndef QS_LLM_SMOOTH_H
#define QS_LLM_SMOOTH_H

#include <stddef.h>

#include "llm.h"
#include "qs_err.h"

/* Channels of a linear input site (QS_SITE_ATTN_IN .. QS_SITE_FFN_DOWN_IN). */
size_t qs_llm_site_width(const qs_llm_cfg *c, int site);

/* The matrices of layer L reading site: W[k] [rows[k]][width]; returns their count (1..3). */
int qs_llm_site_mats(const qs_llm_cfg *c, qs_llm_layer *L, int site, float **W, size_t *rows);

/* Fold s (width values, > 0 and finite) into layer l for site.  -1 with e set when s is not shared
** within a KV group at attn_out, or not positive and finite. */
int qs_llm_fold_scales(qs_llm_model *m, int l, int site, const float *s, qs_err *e);

/* attn_out under grouped-query attention: x[j] for every channel j = h * head_dim + d replaced by the
** maximum (mean = 0) or the mean (mean = 1) over the query heads h of j's KV group; other sites unchanged. */
void qs_llm_tie_stat(const qs_llm_cfg *c, int site, float *x, int mean);

/* Largest |W[r][j]| over the rows of every matrix reading the site, per input channel j. */
void qs_llm_site_wmax(const qs_llm_cfg *c, qs_llm_layer *L, int site, float *wmax);

/* SmoothQuant's scales: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), both clamped to >= 1e-5 and s
** to >= 1e-5 as the reference code; a channel never active (xmax 0) or of zero weights keeps s = 1. */
void qs_smooth_scales(const float *xmax, const float *wmax, size_t n, double alpha, float *s);

#endif
