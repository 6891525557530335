/* Batch-independent GEMM for the batched sampler (llm_gemm.h). */
#include "llm_gemm.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Every element is the same sum whatever kernel computes it: an FMA chain from +0 over each block of KB
** k's, the blocks' sums added in order (shorter chains, smaller rounding error); vectorised across input
** rows (x transposed once per call, rows padded to MB), broadcasting one weight at a time. */
#define KB 64
#define MB 32      /* input rows per tile (two AVX-512 vectors) */
#define NW 12      /* weight rows per tile (AVX-512: 24 accumulators) */
#define NW2 6      /* weight rows per tile (AVX2: 4 vectors of 8 rows x 6 = 24 accumulators) */

/* ---------------------------------------------------------------- AVX-512 */

__attribute__((target("avx512f"))) static void tile512(float *y, int ldy, const float *xt, int mp, int mc,
                                                       const float *const *w, int nr, int in)
{
    __m512 t0[NW], t1[NW];
    for (int k0 = 0; k0 < in; k0 += KB) {
        const int k1 = in - k0 < KB ? in : k0 + KB;
        __m512 a0[NW], a1[NW];
#pragma GCC unroll 12
        for (int j = 0; j < NW; j++) a0[j] = a1[j] = _mm512_setzero_ps();
        if (mc > 16) {
            for (int k = k0; k < k1; k++) {
                __m512 x0 = _mm512_loadu_ps(xt + (size_t)k * mp), x1 = _mm512_loadu_ps(xt + (size_t)k * mp + 16);
#pragma GCC unroll 12
                for (int j = 0; j < NW; j++) {
                    __m512 b = _mm512_set1_ps(w[j][k]);
                    a0[j] = _mm512_fmadd_ps(x0, b, a0[j]);
                    a1[j] = _mm512_fmadd_ps(x1, b, a1[j]);
                }
            }
        } else {
            for (int k = k0; k < k1; k++) {
                __m512 x0 = _mm512_loadu_ps(xt + (size_t)k * mp);
#pragma GCC unroll 12
                for (int j = 0; j < NW; j++) a0[j] = _mm512_fmadd_ps(x0, _mm512_set1_ps(w[j][k]), a0[j]);
            }
        }
#pragma GCC unroll 12
        for (int j = 0; j < NW; j++) {
            t0[j] = k0 ? _mm512_add_ps(t0[j], a0[j]) : a0[j];
            t1[j] = k0 ? _mm512_add_ps(t1[j], a1[j]) : a1[j];
        }
    }
    float t[NW][MB];   /* then row by row: each output row's nr values stored together */
    for (int j = 0; j < nr; j++) {
        _mm512_storeu_ps(t[j], t0[j]);
        _mm512_storeu_ps(t[j] + 16, t1[j]);
    }
    for (int m = 0; m < mc; m++) {
        float *ym = y + (size_t)m * ldy;
        for (int j = 0; j < nr; j++) ym[j] = t[j][m];
    }
}

/* ---------------------------------------------------------------- AVX2 */

__attribute__((target("avx2,fma"))) static void tile256(float *y, int ldy, const float *xt, int mp, int mc,
                                                        const float *const *w, int nr, int in)
{
    for (int m0 = 0; m0 < mc; m0 += 16) {   /* 16 rows at a time: 2 vectors x NW2 weight rows */
        for (int j0 = 0; j0 < nr; j0 += NW2) {
            __m256 t0[NW2], t1[NW2];
            const float *const *wj = w + j0;
            for (int k0 = 0; k0 < in; k0 += KB) {
                const int k1 = in - k0 < KB ? in : k0 + KB;
                __m256 a0[NW2], a1[NW2];
#pragma GCC unroll 6
                for (int j = 0; j < NW2; j++) a0[j] = a1[j] = _mm256_setzero_ps();
                for (int k = k0; k < k1; k++) {
                    __m256 x0 = _mm256_loadu_ps(xt + (size_t)k * mp + m0), x1 = _mm256_loadu_ps(xt + (size_t)k * mp + m0 + 8);
#pragma GCC unroll 6
                    for (int j = 0; j < NW2; j++) {
                        __m256 b = _mm256_set1_ps(wj[j][k]);
                        a0[j] = _mm256_fmadd_ps(x0, b, a0[j]);
                        a1[j] = _mm256_fmadd_ps(x1, b, a1[j]);
                    }
                }
#pragma GCC unroll 6
                for (int j = 0; j < NW2; j++) {
                    t0[j] = k0 ? _mm256_add_ps(t0[j], a0[j]) : a0[j];
                    t1[j] = k0 ? _mm256_add_ps(t1[j], a1[j]) : a1[j];
                }
            }
            float t[NW2][16];   /* then row by row (see tile512) */
            const int nj = nr - j0 < NW2 ? nr - j0 : NW2;
            for (int j = 0; j < nj; j++) {
                _mm256_storeu_ps(t[j], t0[j]);
                _mm256_storeu_ps(t[j] + 8, t1[j]);
            }
            for (int m = m0; m < mc && m < m0 + 16; m++)
                for (int j = 0; j < nj; j++) y[(size_t)m * ldy + j0 + j] = t[j][m - m0];
        }
    }
}

/* ---------------------------------------------------------------- portable (fmaf: the same chains) */

static float chain(const float *x, size_t xs, const float *w, int in)
{
    float tot = 0;
    for (int k0 = 0; k0 < in; k0 += KB) {
        const int k1 = in - k0 < KB ? in : k0 + KB;
        float a = 0;
        for (int k = k0; k < k1; k++) a = fmaf(x[(size_t)k * xs], w[k], a);
        tot = k0 ? tot + a : a;
    }
    return tot;
}

static void tile_scalar(float *y, int ldy, const float *xt, int mp, int mc, const float *const *w, int nr, int in)
{
    for (int m = 0; m < mc; m++)
        for (int j = 0; j < nr; j++) {
            y[(size_t)m * ldy + j] = chain(xt + m, mp, w[j], in);
        }
}

/* ---------------------------------------------------------------- driver */

/* One task: weight rows [o0, o0 + chunk) (NW: small tasks balance two threads on a 256-row product), in L1,
** against every tile of input rows (L2). */
void qs_llm_gemm_task(const qs_llm_gemm_job *j, size_t task)
{
    int o0 = (int)task * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    for (int o = o0; o < o1; o += NW) {
        int nr = o1 - o < NW ? o1 - o : NW;
        const float *w[NW];
        for (int i = 0; i < NW; i++) w[i] = j->W + (size_t)(o + (i < nr ? i : 0)) * j->in;   /* tail: repeat, discard */
        for (int m0 = 0; m0 < j->R; m0 += MB) {
            int mc = j->R - m0 < MB ? j->R - m0 : MB;
            float *y = j->y + (size_t)m0 * j->out + o;
            const float *xt = j->xt + m0;
            if (j->level >= QS_SIMD_AVX512) tile512(y, j->out, xt, j->mp, mc, w, nr, j->in);
            else if (j->level >= QS_SIMD_AVX2) tile256(y, j->out, xt, j->mp, mc, w, nr, j->in);
            else tile_scalar(y, j->out, xt, j->mp, mc, w, nr, j->in);
        }
    }
}

int qs_llm_gemm_mp(int R) { return (R + MB - 1) / MB * MB; }

size_t qs_llm_gemm_prep(qs_llm_gemm_job *j, float *y, const float *xt, const float *W, int R, int in, int out)
{
    *j = (qs_llm_gemm_job){y, xt, W, R, qs_llm_gemm_mp(R), in, out, NW, qs_simd_level()};
    return (size_t)(out + j->chunk - 1) / (size_t)j->chunk;
}

static void gemm_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    qs_llm_gemm_task(ctx, task);
}

void qs_llm_gemm_nt(float *y, const float *x, const float *W, int R, int in, int out, int threads)
{
    const int mp = qs_llm_gemm_mp(R);
    float *xt = malloc((size_t)mp * in * sizeof(float));
    if (!xt) {   /* no room to transpose: the same chains, one element at a time */
        for (int m = 0; m < R; m++)
            for (int o = 0; o < out; o++) {
                y[(size_t)m * out + o] = chain(x + (size_t)m * in, 1, W + (size_t)o * in, in);
            }
        return;
    }
    for (int k = 0; k < in; k++) {
        float *row = xt + (size_t)k * mp;
        for (int m = 0; m < R; m++) row[m] = x[(size_t)m * in + k];
        for (int m = R; m < mp; m++) row[m] = 0;
    }
    qs_llm_gemm_job j;
    size_t ntask = qs_llm_gemm_prep(&j, y, xt, W, R, in, out);
    if (threads > 1 && ntask > 1) qs_pool_for(threads, ntask, gemm_task, &j);
    else
        for (size_t t = 0; t < ntask; t++) qs_llm_gemm_task(&j, t);
    free(xt);
}
