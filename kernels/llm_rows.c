/*
** Vectorised exponential row kernels (see llm_rows.h).
*/
#include "exp2_poly.h"
#include "llm_rows.h"
#include "simd.h"
#include "blas_threads.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LOG2E 1.4426950408889634f

/* 2^x for 8 lanes: x clamped to [-126, 127], nearest integer split, Taylor degree 7; below -126: 0 */
__attribute__((target("avx2,fma"))) static inline __m256 exp2_8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-126.0f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(127.0f));
    __m256 fl = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(xc, fl);
    __m256 p = _mm256_set1_ps(QS_EXP2_C7);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C6));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C5));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fl), _mm256_set1_epi32(127)), 23);
    __m256 r = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), r);   /* x < -126 (or NaN-free underflow) -> 0 */
}

__attribute__((target("avx2,fma"))) static double exp_row_avx2(const float *x, size_t n, float c, float *y)
{
    const __m256 vc = _mm256_set1_ps(c), l2 = _mm256_set1_ps(LOG2E);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = exp2_8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vc), l2));
        if (y) _mm256_storeu_ps(y + j, v);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; j < n; j++) {
        float v = expf(x[j] - c);
        if (y) y[j] = v;
        s += v;
    }
    return s;
}

/* One lane of exp2_8, in scalar code with the same operations (max/min as the instructions treat NaN,
** round to nearest even, fused multiply-adds), so the portable path gives the vector paths' bits. */
static float exp2_lane(float x)
{
    const float lo = -126.0f;
    float xc = x > lo ? x : lo;          /* _mm256_max_ps(x, lo): lo when x is NaN */
    xc = xc < 127.0f ? xc : 127.0f;
    float fl = nearbyintf(xc);
    float f = xc - fl;
    float p = QS_EXP2_C7;
    p = fmaf(p, f, QS_EXP2_C6);
    p = fmaf(p, f, QS_EXP2_C5);
    p = fmaf(p, f, QS_EXP2_C4);
    p = fmaf(p, f, QS_EXP2_C3);
    p = fmaf(p, f, QS_EXP2_C2);
    p = fmaf(p, f, QS_EXP2_C1);
    p = fmaf(p, f, 1.0f);
    union { float f; int32_t i; } u;
    u.i = (int32_t)(((uint32_t)((int32_t)fl + 127)) << 23);
    float r = p * u.f;
    return x < lo ? 0.0f : r;
}

/* exp_row_avx2 lane by lane: blocks of 8 through exp2_lane, each lane summed on its own in double,
** lanes k and k+4 added, then ((0+1) + (2+3)); the tail with libm, as the vector path. */
static double exp_row_scalar(const float *x, size_t n, float c, float *y)
{
    double acc[8] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            float v = exp2_lane((x[j + l] - c) * LOG2E);
            if (y) y[j + l] = v;
            acc[l] += (double)v;
        }
    double t[4];
    for (int k = 0; k < 4; k++) t[k] = acc[k] + acc[k + 4];
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; j < n; j++) {
        float v = expf(x[j] - c);
        if (y) y[j] = v;
        s += v;
    }
    return s;
}

/* exp2_8 on 16 lanes: the same operations lane by lane, so the same bits */
__attribute__((target("avx512f"))) static inline __m512 exp2_16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-126.0f);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(127.0f));
    __m512 fl = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(xc, fl);
    __m512 p = _mm512_set1_ps(QS_EXP2_C7);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C6));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C5));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(QS_EXP2_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fl), _mm512_set1_epi32(127)), 23);
    __m512 r = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), r);
}

/* exp_row_avx2's sums in its order: its two 4-lane accumulators are the halves of one 8-lane one, fed
** 8 values at a time (16 computed at once), then folded and finished as it does: the same bits. */
__attribute__((target("avx512f,avx2,fma"))) static double exp_row_avx512(const float *x, size_t n, float c, float *y)
{
    const __m512 vc = _mm512_set1_ps(c), l2 = _mm512_set1_ps(LOG2E);
    __m512d a = _mm512_setzero_pd();
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = exp2_16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), vc), l2));
        if (y) _mm512_storeu_ps(y + j, v);
        a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    if (j + 8 <= n) {
        __m256 v = exp2_8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), _mm512_castps512_ps256(vc)),
                                        _mm512_castps512_ps256(l2)));
        if (y) _mm256_storeu_ps(y + j, v);
        a = _mm512_add_pd(a, _mm512_cvtps_pd(v));
        j += 8;
    }
    double t[8];
    _mm512_storeu_pd(t, a);
    double s = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (; j < n; j++) {
        float v = expf(x[j] - c);
        if (y) y[j] = v;
        s += v;
    }
    return s;
}

double qs_exp_row(const float *x, size_t n, float c, float *y)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) return exp_row_avx512(x, n, c, y);
    return qs_simd_level() >= QS_SIMD_AVX2 ? exp_row_avx2(x, n, c, y) : exp_row_scalar(x, n, c, y);
}

/* x[j] *= a (a product per element at any width: the same bits) */
__attribute__((target("avx512f"))) static void scale_avx512(float *x, size_t n, float a)
{
    const __m512 va = _mm512_set1_ps(a);
    size_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), va));
    if (j < n) {
        const __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(x + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), va));
    }
}

void qs_scale_row(float *x, size_t n, float a)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) { scale_avx512(x, n, a); return; }
    for (size_t j = 0; j < n; j++) x[j] *= a;
}

/* out[j] = (x[j] * r) * w[j] and x[j] += a[j]: element by element, the same bits at any width */
__attribute__((target("avx512f"))) static void norm_scale_avx512(float *out, const float *x, float r, const float *w, size_t n)
{
    const __m512 vr = _mm512_set1_ps(r);
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), vr), _mm512_loadu_ps(w + j)));
    for (; j < n; j++) out[j] = x[j] * r * w[j];
}

void qs_norm_scale_row(float *out, const float *x, float r, const float *w, size_t n)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) { norm_scale_avx512(out, x, r, w, n); return; }
    for (size_t j = 0; j < n; j++) out[j] = x[j] * r * w[j];
}

__attribute__((target("avx512f"))) static void add_avx512(float *x, const float *a, size_t n)
{
    size_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_add_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(a + j)));
    for (; j < n; j++) x[j] += a[j];
}

void qs_add_row(float *x, const float *a, size_t n)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) { add_avx512(x, a, n); return; }
    for (size_t j = 0; j < n; j++) x[j] += a[j];
}

double qs_sum_exp_row(const float *x, size_t n, float m) { return qs_exp_row(x, n, m, NULL); }

__attribute__((target("avx2,fma"))) static float max_avx2(const float *x, size_t n)
{
    __m256 a = _mm256_set1_ps(-INFINITY);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) a = _mm256_max_ps(a, _mm256_loadu_ps(x + j));
    float t[8], m = -INFINITY;
    _mm256_storeu_ps(t, a);
    for (int i = 0; i < 8; i++) m = t[i] > m ? t[i] : m;
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

float qs_softmax_row(float *x, size_t n)
{
    float m = -INFINITY;
    if (qs_simd_level() >= QS_SIMD_AVX2) m = max_avx2(x, n);
    else
        for (size_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    double s = qs_exp_row(x, n, m, x);
    qs_scale_row(x, n, (float)(1.0 / s));
    return m;
}

__attribute__((target("avx2,fma"))) static void swiglu_avx2(float *g, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), nl2 = _mm256_set1_ps(-LOG2E);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(g + j);
        __m256 d = _mm256_add_ps(one, exp2_8(_mm256_mul_ps(x, nl2)));   /* 1 + e^-x (e^-x -> 0 for large x) */
        _mm256_storeu_ps(g + j, _mm256_mul_ps(_mm256_div_ps(x, d), _mm256_loadu_ps(u + j)));
    }
    for (; j < n; j++) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}

/* 16 lanes at a time, the rest as swiglu_avx2 cuts it (8 lanes, then libm): the AVX2 path's bits */
__attribute__((target("avx512f,avx2,fma"))) static void swiglu_avx512(float *g, const float *u, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f), nl2 = _mm512_set1_ps(-LOG2E);
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 x = _mm512_loadu_ps(g + j);
        __m512 d = _mm512_add_ps(one, exp2_16(_mm512_mul_ps(x, nl2)));
        _mm512_storeu_ps(g + j, _mm512_mul_ps(_mm512_div_ps(x, d), _mm512_loadu_ps(u + j)));
    }
    swiglu_avx2(g + j, u + j, n - j);
}

void qs_swiglu_row(float *g, const float *u, size_t n)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) { swiglu_avx512(g, u, n); return; }
    if (qs_simd_level() >= QS_SIMD_AVX2) { swiglu_avx2(g, u, n); return; }
    size_t j = 0;
    for (; j + 8 <= n; j += 8)   /* swiglu_avx2's blocks, lane by lane: the same bits */
        for (int l = 0; l < 8; l++) {
            float x = g[j + l];
            float d = 1.0f + exp2_lane(x * -LOG2E);
            g[j + l] = (x / d) * u[j + l];
        }
    for (; j < n; j++) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}

__attribute__((target("avx2,fma"))) static size_t nonfinite_avx2(const float *x, size_t n)
{
    const __m256i em = _mm256_set1_epi32(0x7f800000);
    size_t j = 0, c = 0;
    for (; j + 8 <= n; j += 8) {
        __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + j)), em);
        c += (size_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, em))));
    }
    for (; j < n; j++) c += !isfinite(x[j]);
    return c;
}

/* a count: any width gives the same */
__attribute__((target("avx512f"))) static size_t nonfinite_avx512(const float *x, size_t n)
{
    const __m512i em = _mm512_set1_epi32(0x7f800000);
    size_t j = 0, c = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i v = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + j)), em);
        c += (size_t)__builtin_popcount((unsigned)_mm512_cmpeq_epi32_mask(v, em));
    }
    for (; j < n; j++) c += !isfinite(x[j]);
    return c;
}

size_t qs_count_nonfinite(const float *x, size_t n)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) return nonfinite_avx512(x, n);
    if (qs_simd_level() >= QS_SIMD_AVX2) return nonfinite_avx2(x, n);
    size_t c = 0;
    for (size_t j = 0; j < n; j++) c += !isfinite(x[j]);
    return c;
}

__attribute__((target("avx2,fma"))) static double sumsq_avx2(const float *x, size_t n)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; j < n; j++) s += (double)x[j] * x[j];
    return s;
}

double qs_sumsq_row(const float *x, size_t n)
{
    if (qs_simd_level() >= QS_SIMD_AVX2) return sumsq_avx2(x, n);
    double s = 0;
    for (size_t j = 0; j < n; j++) s += (double)x[j] * x[j];
    return s;
}

int qs_llm_threads(void)
{
    int n = qs_blas_threads();
    return n < 1 ? 1 : n > 64 ? 64 : n;
}
