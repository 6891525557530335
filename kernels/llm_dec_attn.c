/* The decoder's attention for one row (llm_dec_attn.h). */
#include "llm_dec_attn.h"
#include "llm_rows.h"
#include "simd.h"

#include <immintrin.h>
#include <string.h>

/* ---------------------------------------------------------------- one key at a time (reference) */

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int n)
{
    __m256 s = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* o[0..hd) = sum_t p[t] v[t*ld + i], keys in order (hd a multiple of 8): the scalar loop below, 8 lanes. */
__attribute__((target("avx2,fma"))) static void pv_avx2(float *o, const float *p, const float *v, int ld, int n, int hd)
{
    for (int i = 0; i < hd; i += 8) {
        __m256 a = _mm256_setzero_ps();
        for (int t = 0; t < n; t++)   /* multiply, then add: the scalar loop's bits */
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(v + (size_t)t * ld + i)));
        _mm256_storeu_ps(o + i, a);
    }
}

static float dot_scalar(const float *a, const float *b, int n)
{
    float r = 0;
    for (int i = 0; i < n; i++) r += a[i] * b[i];
    return r;
}

/* ---------------------------------------------------------------- vectorised (the same sums) */

/* S[t] = dot_avx2(q, k_t, hd) * scale for t in [0, n), hd a multiple of 8: eight keys' FMA chains side
** by side, then the reduction tree of dot_avx2 for all eight at once (a transpose that adds). */
__attribute__((target("avx2,fma"))) static void scores8_avx2(float *S, const float *q, const float *kb, int ld, int n,
                                                             int hd, float scale)
{
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 a[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
        for (int i = 0; i < hd; i += 8) {
            const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) a[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kb + (size_t)(t + r) * ld + i), a[r]);
        }
        __m256 w[4];   /* w[p]: key 2p's lanes j + (j+4) in the low half, key 2p+1's in the high half */
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            w[p] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x20),
                                 _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x31));
        /* (h0 + h2, h1 + h3) of keys 0, 2 | 1, 3 and 4, 6 | 5, 7 */
        __m256 z0 = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], 0x44), _mm256_shuffle_ps(w[0], w[1], 0xEE));
        __m256 z1 = _mm256_add_ps(_mm256_shuffle_ps(w[2], w[3], 0x44), _mm256_shuffle_ps(w[2], w[3], 0xEE));
        /* keys 0, 2, 4, 6 | 1, 3, 5, 7 */
        __m256 s = _mm256_add_ps(_mm256_shuffle_ps(z0, z1, 0x88), _mm256_shuffle_ps(z0, z1, 0xDD));
        _mm256_storeu_ps(S + t, _mm256_permutevar8x32_ps(_mm256_mul_ps(s, sc), order));
    }
    for (; t < n; t++) S[t] = dot_avx2(q, kb + (size_t)t * ld, hd) * scale;
}

/* out[h0*hd .. h0*hd + 64) += the terms of keys [t0, t1), heads h0 .. h0 + 8/CPH of CPH*8 elements
** each: eight independent add chains, each continuing that of pv_avx2 for its 8 elements (CPH a
** constant: every pointer in a register). */
__attribute__((target("avx2,fma"), always_inline)) static inline void pv64_heads(float *out, const float *S,
                                                                                 const float *vb, int kvd, int t0, int t1,
                                                                                 int nn, int grp, int h0, const int CPH)
{
    enum { NH_MAX = 4 };
    const int nh = 8 / CPH, hd = CPH * 8;
    const float *p[NH_MAX], *v[NH_MAX];
    __m256 a[8];
    for (int g = 0; g < nh; g++) { p[g] = S + (size_t)(h0 + g) * nn; v[g] = vb + (size_t)((h0 + g) / grp) * hd; }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) a[k] = _mm256_loadu_ps(out + (size_t)h0 * hd + 8 * k);
    for (int t = t0; t < t1; t++) {
        const size_t at = (size_t)t * kvd;
#pragma GCC unroll 4
        for (int g = 0; g < nh; g++) {
            const __m256 pt = _mm256_set1_ps(p[g][t]);
#pragma GCC unroll 8
            for (int c = 0; c < CPH; c++)
                a[g * CPH + c] = _mm256_add_ps(a[g * CPH + c], _mm256_mul_ps(pt, _mm256_loadu_ps(v[g] + at + 8 * c)));
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) _mm256_storeu_ps(out + (size_t)h0 * hd + 8 * k, a[k]);
}

__attribute__((target("avx2,fma"))) static void pv64_hd64(float *o, const float *S, const float *vb, int kvd, int t0, int t1,
                                                          int nn, int grp, int h0)
{
    pv64_heads(o, S, vb, kvd, t0, t1, nn, grp, h0, 8);
}
__attribute__((target("avx2,fma"))) static void pv64_hd32(float *o, const float *S, const float *vb, int kvd, int t0, int t1,
                                                          int nn, int grp, int h0)
{
    pv64_heads(o, S, vb, kvd, t0, t1, nn, grp, h0, 4);
}
__attribute__((target("avx2,fma"))) static void pv64_hd16(float *o, const float *S, const float *vb, int kvd, int t0, int t1,
                                                          int nn, int grp, int h0)
{
    pv64_heads(o, S, vb, kvd, t0, t1, nn, grp, h0, 2);
}

/* The same for 8 elements. */
__attribute__((target("avx2,fma"))) static void pv8_avx2(float *o, const float *p, const float *v, int ld, int t0, int t1)
{
    __m256 a = _mm256_loadu_ps(o);
    for (int t = t0; t < t1; t++) a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(v + (size_t)t * ld)));
    _mm256_storeu_ps(o, a);
}

/* Keys in blocks of TB (their K or V rows, every head's, in L1): the cache read once, in order. */
#define TB 16

void qs_dec_attn_row(float *out, const float *q, const float *kb, const float *vb, int kvd, int n, int n_head, int hd,
                     int grp, float scale, float *S, int fast)
{
    const int avx = qs_simd_level() >= QS_SIMD_AVX2, qd = n_head * hd;
    if (fast && avx && hd % 8 == 0) {
        for (int t0 = 0; t0 < n; t0 += TB) {
            const int tn = n - t0 < TB ? n - t0 : TB;
            for (int h = 0; h < n_head; h++)
                scores8_avx2(S + (size_t)h * n + t0, q + (size_t)h * hd, kb + (size_t)t0 * kvd + (size_t)(h / grp) * hd, kvd,
                             tn, hd, scale);
        }
        for (int h = 0; h < n_head; h++) qs_softmax_row(S + (size_t)h * n, (size_t)n);
        memset(out, 0, (size_t)qd * sizeof(float));   /* each chain from +0, as pv_avx2's */
        for (int t0 = 0; t0 < n; t0 += TB) {
            const int t1 = n - t0 < TB ? n : t0 + TB;
            int h = 0;
            if (hd == 64 || hd == 32 || hd == 16) {   /* 64 elements (1, 2 or 4 heads) at a time */
                const int nh = 64 / hd;
                for (; h + nh <= n_head; h += nh)
                    (hd == 64 ? pv64_hd64 : hd == 32 ? pv64_hd32 : pv64_hd16)(out, S, vb, kvd, t0, t1, n, grp, h);
            }
            for (int c0 = h * hd; c0 < qd; c0 += 8) {   /* the rest 8 elements at a time */
                const int hh = c0 / hd;
                pv8_avx2(out + c0, S + (size_t)hh * n, vb + (size_t)(hh / grp) * hd + c0 % hd, kvd, t0, t1);
            }
        }
        return;
    }
    for (int h = 0; h < n_head; h++) {
        const float *qh = q + (size_t)h * hd, *kh = kb + (size_t)(h / grp) * hd, *vh = vb + (size_t)(h / grp) * hd;
        float *Sh = S + (size_t)h * n, *o = out + (size_t)h * hd;
        for (int t = 0; t < n; t++) Sh[t] = (avx ? dot_avx2(qh, kh + (size_t)t * kvd, hd) : dot_scalar(qh, kh + (size_t)t * kvd, hd)) * scale;
        qs_softmax_row(Sh, (size_t)n);
        if (avx && hd % 8 == 0) { pv_avx2(o, Sh, vh, kvd, n, hd); continue; }
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int t = 0; t < n; t++) {   /* elementwise over the head, the same order for every row */
            const float *vt = vh + (size_t)t * kvd;
            const float p = Sh[t];
            for (int i = 0; i < hd; i++) o[i] += p * vt[i];
        }
    }
}
