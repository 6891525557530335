/*
** y[R][out] = x[R][in] . W[out][in]^T whose every element is computed the same way whatever R, the
** other rows, the tiling, the SIMD level or the thread count: one FMA chain over k = 0 .. in-1 from +0.
** The batched sampler (kernels/llm_decode.h) needs this: OpenBLAS's SGEMM picks other kernels for
** small M x N x K, so a row's result there depends on how many rows share the call (measured on
** OpenBLAS 0.3.21, docs/llm.md).  x is transposed once per call (rows padded to 32); tiles of 32 input
** rows x 12 weight rows (AVX-512, 24 accumulators; AVX2: 16 x 6), each weight broadcast in turn;
** weight rows split over the thread pool (kernels/pool.h).
*/
#ifndef QS_LLM_GEMM_H
#define QS_LLM_GEMM_H

/* threads <= 1: the calling thread only. */
void qs_llm_gemm_nt(float *y, const float *x, const float *W, int R, int in, int out, int threads);

#endif
