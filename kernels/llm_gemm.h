/*
** y[R][out] = x[R][in] . W[out][in]^T whose every element is computed the same way whatever R, the
** other rows, the tiling or the thread count: a dot product along `in` in 16 (AVX-512) or 8 (AVX2)
** lanes, the tail in masked lanes, then one fixed horizontal sum.  The batched sampler
** (kernels/llm_decode.h) needs this: OpenBLAS's SGEMM picks other kernels for small M x N x K, so a
** row's result there depends on how many rows share the call (BENCHMARKS.md, issue 27).  Register
** tiles of 4 rows x 4 weight rows; weight rows split over the thread pool (kernels/pool.h).
*/
#ifndef QS_LLM_GEMM_H
#define QS_LLM_GEMM_H

/* threads <= 1: the calling thread only. */
void qs_llm_gemm_nt(float *y, const float *x, const float *W, int R, int in, int out, int threads);

#endif
