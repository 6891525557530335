/*
** Rollout-ResQ (spec formats-hifloat.md §4): Ŷ = Q(X)·Q(W)ᵀ + S(Q(X − Q(X)))·Q(W)ᵀ with one FP4 quantizer
** Q (hif4, mxfp4, nvfp4, or any registry format; blocks along the input dimension d) and a 50 %
** sparsifier S of the quantized residual:
**   none      no correction term (the naive FP4 layer)
**   dense     S = identity (Rollout-ResQ-Dense)
**   2:4       in every run of 4 consecutive channels keep the 2 largest magnitudes (ties: lower index)
**   ch50      keep the d/2 channels with the largest residual L2 norm over the tokens
**   blk50     keep half of the bh×bw blocks (tokens × channels, default 32×64) with the largest L2 norm
** ΔX is computed over the whole tensor; NVFP4's per-tensor scale is the absmax of X (resp. ΔX).
*/
#ifndef QS_RESQ_H
#define QS_RESQ_H

#include <stddef.h>

#include "format_apply.h"
#include "qs_err.h"

typedef enum { QS_RESQ_NONE = 0, QS_RESQ_DENSE, QS_RESQ_24, QS_RESQ_CH50, QS_RESQ_BLK50, QS_RESQ_COUNT } qs_resq_sparse;

const char *qs_resq_name(qs_resq_sparse s);
int qs_resq_parse(const char *name, qs_resq_sparse *s);

typedef struct qs_resq_stats {
    double underflow;   /* fraction of non-zero x with Q(x) = 0 */
    double recovered;   /* of those, the fraction whose correction term is non-zero */
    double kept;        /* fraction of the quantized residual's energy that S keeps */
    double density;     /* fraction of non-zero entries in S(Q(ΔX)) */
} qs_resq_stats;

/* Fake-quantize a rows×cols matrix with blocks along the rows (axis 1). */
int qs_fakeq_matrix(const qs_apply *a, const float *x, size_t rows, size_t cols, float *y, qs_err *e);

/* Apply S to R[m][d] in place (blk50: blocks of bh tokens × bw channels). */
int qs_resq_sparsify(float *R, size_t m, size_t d, qs_resq_sparse sp, size_t bh, size_t bw, qs_err *e);

/* Y[m][n] (float, FP32 GEMMs) from X[m][d] and the already-quantized weights Wq[n][d]. */
int qs_resq_layer(const qs_apply *a, const float *X, size_t m, size_t d, const float *Wq, size_t n,
                  qs_resq_sparse sp, size_t bh, size_t bw, float *Y, qs_resq_stats *st, qs_err *e);

#endif
