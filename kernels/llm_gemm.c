/* Batch-independent GEMM for the batched sampler (llm_gemm.h). */
#include "llm_gemm.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>
#include <stddef.h>

#define MR 4
#define NR 4

/* ---------------------------------------------------------------- AVX-512 */

__attribute__((target("avx512f"))) static inline float hsum512(__m512 v)
{
    /* a fixed tree: 16 -> 8 -> 4 -> 2 -> 1 */
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* A tile of mr <= MR input rows x nr <= NR weight rows; every element in the same lanes and order. */
__attribute__((target("avx512f"))) static void tile512(float *y, int ldy, const float *x, const float *W, int mr, int nr,
                                                       int in)
{
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_ps();
    const float *xr[MR], *wr[NR];
    for (int i = 0; i < MR; i++) xr[i] = x + (size_t)(i < mr ? i : 0) * in;
    for (int j = 0; j < NR; j++) wr[j] = W + (size_t)(j < nr ? j : 0) * in;
    int k = 0;
    if (mr == MR && nr == NR) {
        for (; k + 16 <= in; k += 16) {
            __m512 w0 = _mm512_loadu_ps(wr[0] + k), w1 = _mm512_loadu_ps(wr[1] + k);
            __m512 w2 = _mm512_loadu_ps(wr[2] + k), w3 = _mm512_loadu_ps(wr[3] + k);
            for (int i = 0; i < MR; i++) {
                __m512 a = _mm512_loadu_ps(xr[i] + k);
                acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
                acc[i][2] = _mm512_fmadd_ps(a, w2, acc[i][2]);
                acc[i][3] = _mm512_fmadd_ps(a, w3, acc[i][3]);
            }
        }
    } else {
        for (; k + 16 <= in; k += 16)
            for (int i = 0; i < mr; i++) {
                __m512 a = _mm512_loadu_ps(xr[i] + k);
                for (int j = 0; j < nr; j++) acc[i][j] = _mm512_fmadd_ps(a, _mm512_loadu_ps(wr[j] + k), acc[i][j]);
            }
    }
    if (k < in) {   /* the tail in masked lanes (zeros elsewhere): same lanes as a full step */
        __mmask16 m = (__mmask16)((1u << (in - k)) - 1);
        for (int i = 0; i < mr; i++) {
            __m512 a = _mm512_maskz_loadu_ps(m, xr[i] + k);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m, wr[j] + k), acc[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) y[(size_t)i * ldy + j] = hsum512(acc[i][j]);
}

/* ---------------------------------------------------------------- AVX2 */

__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v)
{
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

__attribute__((target("avx2,fma"))) static void tile256(float *y, int ldy, const float *x, const float *W, int mr, int nr,
                                                        int in)
{
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= in; k += 8)
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_loadu_ps(x + (size_t)i * in + k);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm256_fmadd_ps(a, _mm256_loadu_ps(W + (size_t)j * in + k), acc[i][j]);
        }
    if (k < in) {
        static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        __m256i m = _mm256_loadu_si256((const __m256i *)(ones + 8 - (in - k)));
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_maskload_ps(x + (size_t)i * in + k, m);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm256_fmadd_ps(a, _mm256_maskload_ps(W + (size_t)j * in + k, m), acc[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) y[(size_t)i * ldy + j] = hsum256(acc[i][j]);
}

/* ---------------------------------------------------------------- portable */

static void tile_scalar(float *y, int ldy, const float *x, const float *W, int mr, int nr, int in)
{
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float s[8] = {0};
            for (int k = 0; k < in; k++) s[k & 7] += x[(size_t)i * in + k] * W[(size_t)j * in + k];
            y[(size_t)i * ldy + j] = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
        }
}

/* ---------------------------------------------------------------- driver */

typedef struct gemm_job {
    float *y;
    const float *x, *W;
    int R, in, out, chunk, level;
} gemm_job;

/* One task: weight rows [o0, o0 + chunk) against every input row, NR weight rows at a time so that
** they stay in L1 while all input rows stream past. */
static void gemm_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    const gemm_job *j = ctx;
    int o0 = (int)task * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    for (int o = o0; o < o1; o += NR) {
        int nr = o1 - o < NR ? o1 - o : NR;
        const float *w = j->W + (size_t)o * j->in;
        for (int r = 0; r < j->R; r += MR) {
            int mr = j->R - r < MR ? j->R - r : MR;
            float *y = j->y + (size_t)r * j->out + o;
            const float *x = j->x + (size_t)r * j->in;
            if (j->level >= QS_SIMD_AVX512) tile512(y, j->out, x, w, mr, nr, j->in);
            else if (j->level >= QS_SIMD_AVX2) tile256(y, j->out, x, w, mr, nr, j->in);
            else tile_scalar(y, j->out, x, w, mr, nr, j->in);
        }
    }
}

void qs_llm_gemm_nt(float *y, const float *x, const float *W, int R, int in, int out, int threads)
{
    gemm_job j = {y, x, W, R, in, out, 64, qs_simd_level()};
    size_t ntask = (size_t)(out + j.chunk - 1) / (size_t)j.chunk;
    if (threads > 1 && ntask > 1) qs_pool_for(threads, ntask, gemm_task, &j);
    else
        for (size_t t = 0; t < ntask; t++) gemm_task(&j, t, 0);
}
