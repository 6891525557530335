/*
** Row kernels of the LLM forward pass and its evaluation: vectorised exponentials over rows of
** logits or attention scores (AVX-512 or AVX2/FMA when the CPU has it, chosen at run time, AVX-512
** giving AVX2's bits; libm expf otherwise).
** exp is evaluated as 2^(x·log2 e) with a degree-7 polynomial on [-1/2, 1/2] (relative error < 3e-7).
*/
#ifndef QS_LLM_ROWS_H
#define QS_LLM_ROWS_H

#include <stddef.h>

/* x[0..n) = exp(x - max) / sum in place (a softmax row); returns the max. */
float qs_softmax_row(float *x, size_t n);
/* sum_j exp(x[j] - m), accumulated in double. */
double qs_sum_exp_row(const float *x, size_t n, float m);
/* y[j] = exp(x[j] - c); returns sum_j y[j] in double. */
double qs_exp_row(const float *x, size_t n, float c, float *y);

/* x[j] *= a. */
void qs_scale_row(float *x, size_t n, float a);
/* out[j] = x[j] * r * w[j] (RMSNorm's last step). */
void qs_norm_scale_row(float *out, const float *x, float r, const float *w, size_t n);
/* x[j] += a[j]. */
void qs_add_row(float *x, const float *a, size_t n);

/* SwiGLU in place: g[i] = g[i] / (1 + exp(-g[i])) * u[i]. */
void qs_swiglu_row(float *g, const float *u, size_t n);

/* Number of NaN/Inf values in x[0..n). */
size_t qs_count_nonfinite(const float *x, size_t n);
/* sum_j x[j]^2 in double. */
double qs_sumsq_row(const float *x, size_t n);

/* Threads for the row-parallel parts of a prefill and of the evaluation's per-row statistics: as
** many as OpenBLAS uses (the cores), since they run between the matrix products. */
int qs_llm_threads(void);

#endif
