/*
** ggml's non-linear 4-bit types (format_ggml.h): each 4-bit code indexes the table
** kvalues_iq4nl = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}.
**   iq4_nl  32 values, FP16 d; y = d t[q]
**   iq4_xs  256 values in 8 x 32, a 6-bit signed scale per 32 under FP16 d; y = d (ls - 32) t[q]
** The encoder is ggml's quantize_row_iq4_nl_impl without an importance matrix and with ntry = 7 (what
** quantize_iq4_nl / quantize_iq4_xs, hence llama-quantize, run): per 32 values the weights x^2, a
** first scale -max/-127 and 15 candidate scales (itry - 127)/max, the least-squares scale of the best,
** then (iq4_xs) the 6-bit sub-scales against d = -max_scale/32 and every value requantized under its
** rounded sub-scale; (iq4_nl) the values requantized under the FP32 least-squares scale.  Note that
** ggml's quantize_row_iq4_nl_ref runs ntry = -1 (no search), which gives other blocks; model files are
** written by quantize_iq4_nl.
*/
#include <stdio.h>

#include "format_ggml.h"
#include "simd.h"

static const int8_t kT[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* best_index_int8: the nearest entry, the upper one on a tie.  ggml's binary search ends at the largest
** k with t[k] <= x; counting the entries <= x finds the same k without its branches (a NaN, which
** the search sends to 15, is taken first). */
static inline int best_index(float x)
{
    if (x <= (float)kT[0]) return 0;
    if (x >= (float)kT[15] || x != x) return 15;
    int ml = 0;
    for (int k = 1; k < 15; k++) ml += (float)kT[k] <= x;
    return x - (float)kT[ml] < (float)kT[ml + 1] - x ? ml : ml + 1;
}

/* One sub-block of 32 (ntry 7, weights x^2): the least-squares scale (ggml also writes codes here,
** which both types overwrite: not reproduced). */
static float fit32_scalar(const float *xb, const float *w)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
    if (amax < QS_GG_EPS) return 0;
    float d = -max / (float)kT[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        float q = (float)kT[best_index(id * xb[j])];
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (float)(itry + kT[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = (float)kT[best_index(id * xb[j])];
            sumqx += w[j] * q * xb[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/*
** Speed: the 16 scales ggml tries one after another (the first, then itry = -7..7) are the 16 lanes of
** one vector here (two of 8 with AVX2), each lane summing over the 32 values in ggml's order with
** ggml's float operations, and the lanes are then compared in ggml's order: the same bits (tested
** against ggml's vectors at every level, tests/unit/test_format_ggml.c).  The table index below a
** value is found by a branch-free binary search (AVX-512) or by counting the entries <= it (AVX2),
** the same k as ggml's search; a NaN, which ggml sends to the top entry, is set apart.  QS_SIMD=scalar
** runs the loop above.
*/
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define IQ_X86 1

/* the signed max and the 16 trial reciprocals; 0 when the sub-block is all-zero for ggml */
static int fit32_prep(const float *xb, float *id)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
    if (amax < QS_GG_EPS) return 0;
    id[0] = 1 / (-max / (float)kT[0]);
    for (int t = 1; t < 16; t++) id[t] = (float)(t - 8 + kT[0]) / max;
    return 1;
}
static float fit32_pick(const float *sqx, const float *sq2)
{
    float d = sq2[0] > 0 ? sqx[0] / sq2[0] : 0.f, best = d * sqx[0];
    for (int t = 1; t < 16; t++)
        if (sq2[t] > 0 && sqx[t] * sqx[t] > best * sq2[t]) {
            d = sqx[t] / sq2[t];
            best = d * sqx[t];
        }
    return d;
}

__attribute__((target("avx512f"))) static float fit32_avx512(const float *xb, const float *w)
{
    float idv[16], sqx[16], sq2[16];
    if (!fit32_prep(xb, idv)) return 0;
    const __m512 T = _mm512_setr_ps(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    const __m512 top = _mm512_set1_ps(113);
    const __m512i c15 = _mm512_set1_epi32(15), one = _mm512_set1_epi32(1);
    __m512 id = _mm512_loadu_ps(idv), ax = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
    for (int j = 0; j < 32; j++) {
        __m512 xj = _mm512_set1_ps(xb[j]), x = _mm512_mul_ps(id, xj);
        __m512i k = _mm512_setzero_si512();
        for (int step = 8; step; step >>= 1) {
            __m512i c = _mm512_add_epi32(k, _mm512_set1_epi32(step));
            __mmask16 m = _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(c, T), _CMP_GE_OQ);
            k = _mm512_mask_mov_epi32(k, m, c);
        }
        __m512 lo = _mm512_permutexvar_ps(k, T);
        __m512 hi = _mm512_permutexvar_ps(_mm512_min_epi32(_mm512_add_epi32(k, one), c15), T);
        __mmask16 below = _mm512_cmp_ps_mask(_mm512_sub_ps(x, lo), _mm512_sub_ps(hi, x), _CMP_LT_OQ);
        __m512 q = _mm512_mask_mov_ps(hi, below, lo);
        q = _mm512_mask_mov_ps(q, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), top);
        __m512 wq = _mm512_mul_ps(_mm512_set1_ps(w[j]), q);
        ax = _mm512_add_ps(ax, _mm512_mul_ps(wq, xj));
        a2 = _mm512_add_ps(a2, _mm512_mul_ps(wq, q));
    }
    _mm512_storeu_ps(sqx, ax);
    _mm512_storeu_ps(sq2, a2);
    return fit32_pick(sqx, sq2);
}

__attribute__((target("avx2"))) static float fit32_avx2(const float *xb, const float *w)
{
    float idv[16], sqx[16], sq2[16];
    if (!fit32_prep(xb, idv)) return 0;
    const __m256 T0 = _mm256_setr_ps(-127, -104, -83, -65, -49, -35, -22, -10);
    const __m256 T1 = _mm256_setr_ps(1, 13, 25, 38, 53, 69, 89, 113);
    const __m256i c7 = _mm256_set1_epi32(7), c15 = _mm256_set1_epi32(15);
    for (int h = 0; h < 2; h++) {
        __m256 id = _mm256_loadu_ps(idv + 8 * h), ax = _mm256_setzero_ps(), a2 = _mm256_setzero_ps();
        for (int j = 0; j < 32; j++) {
            __m256 xj = _mm256_set1_ps(xb[j]), x = _mm256_mul_ps(id, xj);
            __m256i k = _mm256_setzero_si256();
            for (int e = 1; e < 15; e++)   /* k = the number of entries 1..14 <= x */
                k = _mm256_sub_epi32(k, _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps((float)kT[e]), _CMP_GE_OQ)));
            __m256i k1 = _mm256_min_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(1)), c15);
            __m256 lo = _mm256_blendv_ps(_mm256_permutevar8x32_ps(T0, k), _mm256_permutevar8x32_ps(T1, k),
                                         _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, c7)));
            __m256 hi = _mm256_blendv_ps(_mm256_permutevar8x32_ps(T0, k1), _mm256_permutevar8x32_ps(T1, k1),
                                         _mm256_castsi256_ps(_mm256_cmpgt_epi32(k1, c7)));
            __m256 q = _mm256_blendv_ps(hi, lo, _mm256_cmp_ps(_mm256_sub_ps(x, lo), _mm256_sub_ps(hi, x), _CMP_LT_OQ));
            q = _mm256_blendv_ps(q, _mm256_set1_ps(113), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            __m256 wq = _mm256_mul_ps(_mm256_set1_ps(w[j]), q);
            ax = _mm256_add_ps(ax, _mm256_mul_ps(wq, xj));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(wq, q));
        }
        _mm256_storeu_ps(sqx + 8 * h, ax);
        _mm256_storeu_ps(sq2 + 8 * h, a2);
    }
    return fit32_pick(sqx, sq2);
}
#else
#define IQ_X86 0
#endif

/* weights: qw * sqrt(sigma2 + x^2) with importances qw, else x^2 */
static float fit32(const float *xb, const float *qw, float sigma2, int lvl)
{
    float w[32];
    for (int j = 0; j < 32; j++) w[j] = qw ? qw[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
#if IQ_X86
    if (lvl >= QS_SIMD_AVX512) return fit32_avx512(xb, w);
    if (lvl >= QS_SIMD_AVX2) return fit32_avx2(xb, w);
#else
    (void)lvl;
#endif
    return fit32_scalar(xb, w);
}

/* ggml's sigma2 of a super-block of n: 2 / n times its sum of squares */
static float sigma2_of(const float *x, int n)
{
    float s = 0;
    for (int j = 0; j < n; j++) s += x[j] * x[j];
    return s * (2.f / (float)n);
}

static void enc_iq4_nl_w(const float *x, const float *qw, uint8_t *L, uint8_t *m)
{
    float s = fit32(x, qw, qw ? sigma2_of(x, 32) : 0, qs_simd_level());
    qs_gg_wr16(m, qs_gg_f16(s));
    float id = s != 0 ? 1 / s : 0;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_index(id * x[j]);
}
static void enc_iq4_nl(const float *x, uint8_t *L, uint8_t *m) { enc_iq4_nl_w(x, NULL, L, m); }
static void encw_iq4_nl(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { (void)s2; enc_iq4_nl_w(x, qw, L, m); }
static void dec_iq4_nl(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m));
    for (int j = 0; j < 32; j++) y[j] = d * (float)kT[L[j] & 15];
}

/* iq4_xs header: d, scales_h (2 bits per sub-block, little-endian uint16), scales_l[4] (nibbles) */
static int xs_scale(const uint8_t *m, int ib)
{
    return ((m[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | ((qs_gg_rd16(m + 2) >> 2 * ib) & 3) << 4;
}
static void enc_iq4_xs_w(const float *x, const float *qw, uint8_t *L, uint8_t *m)
{
    float scales[8], max_scale = 0, amax_scale = 0, sigma2 = qw ? sigma2_of(x, 256) : 0;
    int lvl = qs_simd_level();
    for (int ib = 0; ib < 8; ib++) {
        scales[ib] = fit32(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, lvl);
        if (fabsf(scales[ib]) > amax_scale) { amax_scale = fabsf(scales[ib]); max_scale = scales[ib]; }
    }
    float d = -max_scale / 32;
    qs_gg_wr16(m, qs_gg_f16(d));
    float id = d != 0 ? 1 / d : 0.f;
    uint16_t sh = 0;
    memset(m + 4, 0, 4);
    for (int ib = 0; ib < 8; ib++) {
        int l = qs_gg_nearest(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        float dl = d * (float)l, idl = dl != 0 ? 1 / dl : 0.f;
        for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)best_index(idl * x[32 * ib + j]);
        l += 32;
        m[4 + ib / 2] = (uint8_t)(m[4 + ib / 2] | (l & 0xf) << 4 * (ib % 2));
        sh = (uint16_t)(sh | (l >> 4) << 2 * (ib % 8));
    }
    qs_gg_wr16(m + 2, sh);
}
static void enc_iq4_xs(const float *x, uint8_t *L, uint8_t *m) { enc_iq4_xs_w(x, NULL, L, m); }
static void encw_iq4_xs(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { (void)s2; enc_iq4_xs_w(x, qw, L, m); }
static void dec_iq4_xs(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m));
    for (int ib = 0; ib < 8; ib++) {
        float dl = d * (float)(xs_scale(m, ib) - 32);
        for (int j = 0; j < 32; j++) y[32 * ib + j] = dl * (float)kT[L[32 * ib + j] & 15];
    }
}

/* codes of each 32: byte j holds element j (low) and j + 16 (high) */
static void pack_nib32(const uint8_t *L, uint8_t *qs, int n)
{
    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++) qs[16 * i + j] = (uint8_t)((L[32 * i + j] & 15) | (L[32 * i + 16 + j] & 15) << 4);
}
static void unpack_nib32(const uint8_t *qs, uint8_t *L, int n)
{
    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++) {
            L[32 * i + j] = qs[16 * i + j] & 15;
            L[32 * i + 16 + j] = qs[16 * i + j] >> 4;
        }
}
static void pack_iq4_nl(const uint8_t *L, const uint8_t *m, uint8_t *o) { memcpy(o, m, 2); pack_nib32(L, o + 2, 32); }
static void unpack_iq4_nl(const uint8_t *in, uint8_t *L, uint8_t *m) { memcpy(m, in, 2); unpack_nib32(in + 2, L, 32); }
static void pack_iq4_xs(const uint8_t *L, const uint8_t *m, uint8_t *o) { memcpy(o, m, 8); pack_nib32(L, o + 8, 256); }
static void unpack_iq4_xs(const uint8_t *in, uint8_t *L, uint8_t *m) { memcpy(m, in, 8); unpack_nib32(in + 8, L, 256); }

/* The analysis' uniform grid stands in for the table: S = 16 |d| (240 / 15, the table's mean
** spacing), Q = 127 |d|. */
static void steps_iq4_nl(const uint8_t *m, float *S, float *Q)
{
    float d = fabsf(qs_gg_f32(qs_gg_rd16(m)));
    S[0] = 16 * d;
    Q[0] = 127 * d;
}
static void steps_iq4_xs(const uint8_t *m, float *S, float *Q)
{
    float d = qs_gg_f32(qs_gg_rd16(m));
    for (int ib = 0; ib < 8; ib++) {
        float dl = fabsf(d * (float)(xs_scale(m, ib) - 32));
        S[ib] = 16 * dl;
        Q[ib] = 127 * dl;
    }
}
static void text_iq4_nl(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m);
    snprintf(out, cap, "d FP16 0x%04x = %.6g (times the table -127..113)", d, (double)qs_gg_f32(d));
}
static void text_iq4_xs(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, 6-bit scales - 32: %d %d %d %d %d %d %d %d", d, (double)qs_gg_f32(d),
             xs_scale(m, 0) - 32, xs_scale(m, 1) - 32, xs_scale(m, 2) - 32, xs_scale(m, 3) - 32, xs_scale(m, 4) - 32,
             xs_scale(m, 5) - 32, xs_scale(m, 6) - 32, xs_scale(m, 7) - 32);
}

const qs_ggml_codec qs_ggml_iq4_nl = {"iq4_nl", 32, 18, 2, 32, enc_iq4_nl, dec_iq4_nl, pack_iq4_nl, unpack_iq4_nl,
                                      steps_iq4_nl, text_iq4_nl, encw_iq4_nl};
const qs_ggml_codec qs_ggml_iq4_xs = {"iq4_xs", 256, 136, 8, 32, enc_iq4_xs, dec_iq4_xs, pack_iq4_xs, unpack_iq4_xs,
                                      steps_iq4_xs, text_iq4_xs, encw_iq4_xs};
