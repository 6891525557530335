/*
** GPTQ weight rounding (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative
** Pre-trained Transformers", ICLR 2023), reconstructed for any registry format (docs/llm.md,
** "Calibration transforms").  A weight matrix W [rows = out][cols = in] is rounded one input column at
** a time; the rounding error of column i is spread over the columns not yet rounded through the upper
** Cholesky factor U of H^-1 (H^-1 = U^T U), as the paper's Algorithm 1:
**     err = (w_i - q_i) / U[i][i];   w_k -= err * U[i][k]  for k > i,
** with the paper's lazy batches (o->block columns; the columns past a batch are updated once per batch
** by a matrix product) and its dampening (H + damp * mean(diag H) * I).  Columns whose diagonal is 0
** (an input never seen) are set to 0, as the reference code does.  act_order (the reference's
** --act-order) visits the columns by decreasing diagonal of H.
**
** The grid a column is rounded on:
**   - element casts (block 1, no metadata): one FP32 scale per output row when the weights are scaled
**     (absmax of the ORIGINAL row -> the format's scale target, as qs_llm_quantize_weights scales it;
**     scale=tensor: one for the matrix), fixed before the first column; unscaled casts round as is;
**   - block formats (blocks along the input dimension: mxfp4 32, nvfp4 16, hif4 64, int4:block=N,
**     ggml's q4_k 256, ...; gran=row is one block per row): a block's metadata (its scale, sub-scales,
**     minimum) is fixed when GPTQ first reaches one of the block's columns, by encoding the block's
**     values as they are then (every error update so far applied); the grid of each element of the
**     block is then the set of values decode gives for every element code under that metadata, and
**     each column is rounded to the nearest of them (ties to the lower code).  NVFP4's tensor scale is
**     the absmax of the original matrix, and so is int8/int4's one scale per tensor (gran=tensor).
**     This needs elements of at most 8 bits (a code table per
**     element); gran=tensor of fixed-block formats and stochastic rounding are refused, and so are formats whose metadata
**     refines chosen elements (M2XFP's top element per group: no per-element grid).
** H is [cols][cols] (2/N X^T X of the layer's inputs, or any positive semi-definite matrix; not
** changed).  W is replaced by its rounding.  0, or -1 with e set (H not positive definite after
** dampening, a format that cannot be rounded so, out of memory).
*/
#ifndef QS_LLM_GPTQ_H
#define QS_LLM_GPTQ_H

#include <stddef.h>

#include "format_apply.h"
#include "qs_err.h"

typedef struct qs_gptq_opts {
    double damp;              /* relative dampening (the paper's 1%: 0.01) */
    int act_order;            /* 1: columns by decreasing diag(H) */
    int block;                /* lazy-batch columns (the paper's 128) */
} qs_gptq_opts;
#define QS_GPTQ_DEFAULTS {0.01, 0, 128}

/* 0 when W can be GPTQ-rounded with a (and scaled, as qs_llm_quantize_weights), else -1 with e
** naming why (checked before any work). */
int qs_gptq_check(const qs_apply *a, qs_err *e);

int qs_gptq_quantize(const qs_apply *a, int scaled, float *W, size_t rows, size_t cols, const double *H,
                     const qs_gptq_opts *o, qs_err *e);

/* W (rows x cols) rounded as qs_llm_quantize_weights rounds one matrix (plain rounding; kernels/llm.c). */
int qs_llm_quant_matrix(const qs_apply *a, int scaled, float *W, size_t rows, size_t cols, qs_err *e);

/* sum over rows of (dW_r H dW_r^T) / 2 with dW = Q - W: the squared output error of the layer on the
** inputs H was built from (H = 2/N X^T X: the mean over the N inputs of ||(Q - W) x||^2). */
double qs_gptq_layer_err(const float *Q, const float *W, size_t rows, size_t cols, const double *H);

#endif
