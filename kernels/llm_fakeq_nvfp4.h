/*
** NVFP4's 16x16 weight tiles on the fused kernel (llm_fakeq_nvfp4.c): one scale per tile of 16 rows
** and 16 columns (partial tiles at the edges), RNE, the bits of tiles16's per-tile qs_fakeq_matrix.
*/
#ifndef QS_LLM_FAKEQ_NVFP4_H
#define QS_LLM_FAKEQ_NVFP4_H

#include <stddef.h>
#include <stdint.h>

#include "format_apply.h"
#include "qs_err.h"

/* 1 when qs_fq_nvfp4_tiles takes this format and options (TE NVFP4, RNE, AVX-512), else 0. */
int qs_fq_nvfp4_tiles_ok(const qs_apply *a);
/* The tiles of rows [r0, r1) (r0 a multiple of 16) of x into y (may equal x); a->o.tensor_scale is the
** matrix's finite absmax (0 when it is 0).  cnt: NULL or += the counts of qs_llm_opstat_add with tile2d 1.
** 0, or -1 with e set. */
int qs_fq_nvfp4_tiles(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, size_t r0, size_t r1,
                      uint64_t *cnt, qs_err *e);

/* The largest finite |v| (0 without any) of columns [c0, c1) of x (rows x cols) after qs_llm_rht16 along
** axis 0 with seed, without storing the transform: par's tensor scale before kernels that transform
** in registers.  Only where qs_fq_nvfp4_ok took axis 0 with the RHT (AVX-512). */
float qs_fq_nvfp4_rht_absmax(const float *x, size_t rows, size_t cols, size_t c0, size_t c1, uint64_t seed);

/* Both in one read of rows [r0, r1) (multiples of 16, or r1 = rows): *plain = their largest finite |v|,
** *rht = the same after qs_llm_rht16 along axis 0 with seed (AVX-512 with DQ; else 1, nothing done). */
int qs_fq_nvfp4_absmax2(const float *x, size_t rows, size_t cols, size_t r0, size_t r1, uint64_t seed, float *plain,
                        float *rht);

/* qs_finite_absmax_n(x, n) (the same value) on up to threads threads of the pool. */
float qs_fq_absmax_par(const float *x, size_t n, int threads);

#endif
