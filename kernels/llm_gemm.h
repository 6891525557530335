/*
** y[R][out] = x[R][in] . W[out][in]^T whose every element is computed the same way whatever R, the
** other rows, the tiling, the SIMD level or the thread count: an FMA chain from +0 over each block of
** 64 k's, the blocks' sums added in order.
** The batched sampler (kernels/llm_decode.h) needs this: OpenBLAS's SGEMM picks other kernels for
** small M x N x K, so a row's result there depends on how many rows share the call (measured on
** OpenBLAS 0.3.21, docs/llm.md).  x is transposed once per call (rows padded to 32); tiles of 32 input
** rows x 12 weight rows (AVX-512, 24 accumulators; AVX2: 16 x 6), each weight broadcast in turn;
** weight rows split over the thread pool (kernels/pool.h).
*/
#ifndef QS_LLM_GEMM_H
#define QS_LLM_GEMM_H

#include <stddef.h>

/* threads <= 1: the calling thread only. */
void qs_llm_gemm_nt(float *y, const float *x, const float *W, int R, int in, int out, int threads);

/* The same product with x already transposed, for callers that pack it while computing it (the
** decoder's row passes) and run the tasks on their own pool call: xt[in][mp], mp = qs_llm_gemm_mp(R),
** rows R .. mp-1 zero.  prep returns the number of tasks; each task writes its own columns of y. */
typedef struct qs_llm_gemm_job {
    float *y;
    const float *xt, *W;
    int R, mp, in, out, chunk, level;
} qs_llm_gemm_job;
int qs_llm_gemm_mp(int R);
size_t qs_llm_gemm_prep(qs_llm_gemm_job *j, float *y, const float *xt, const float *W, int R, int in, int out);
void qs_llm_gemm_task(const qs_llm_gemm_job *j, size_t task);

#endif
