/*
** ggml's K-quants (format_ggml.h): super-blocks of 256 values in sub-blocks of 16 or 32, each
** sub-block with a 4/6/8-bit scale (and a min) under FP16 super-block scales:
**   q2_k  16 x 16: 2-bit q, 4-bit scale and 4-bit min per 16, FP16 d and dmin; y = d sc q - dmin mn
**   q3_k  16 x 16: 3-bit q (signed, q - 4), 6-bit signed scale per 16, FP16 d; y = d (sc - 32)(q - 4)
**   q4_k  8 x 32: 4-bit q, 6-bit scale and min per 32, FP16 d and dmin; y = d sc q - dmin mn
**   q5_k  8 x 32: q4_k with 5-bit q
**   q6_k  16 x 16: 6-bit q (q - 32), int8 scale per 16, FP16 d; y = d sc (q - 32)
**   q8_k  256 int8 (amax -> -127/max), FP32 d and the 16 sums of 16 q (llama.cpp's activation type
**         for K-quant dot products); y = d q
** The sub-block fits (make_qkx2_quants: a min-and-scale search over nstep candidate scales weighted
** by |x| or av + |x|; make_q3_quants: an iterative refinement; make_qx_quants: 18 candidate scales
** weighted by x^2), the quantization of the sub-block scales against the super-block scale, and the
** final requantization of each value under the stored scales are quantize_row_*_ref of ggml-quants.c,
** operation for operation in float32 (the tie rule of nearest_int included).  A sub-block whose stored
** scale is 0 keeps the codes of its fit, as ggml's.
*/
#include <stdio.h>

#include "format_ggml.h"
#include "simd.h"

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/*
** Speed: the candidate scales ggml tries one after another (make_qkx2_quants' nstep + 1, make_qx_quants'
** 18) are fitted 8 at a time in the lanes of a vector (AVX2), each lane summing over the values in ggml's
** order with ggml's float operations (nearest_int's bit trick included); the trials are then taken in
** ggml's order with its comparisons: the same bits (tested against ggml's vectors at every SIMD level,
** tests/unit/test_format_ggml.c).  QS_SIMD=scalar runs ggml's loops as written.
*/
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define K_VEC 1
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define VSEL(m, a, b) ((v8f)(((m) & (v8i)(a)) | (~(m) & (v8i)(b))))

/* nearest_int and the clamp to [lo, hi] of 8 lanes */
__attribute__((target("avx2"))) static inline v8i near_clamp(v8f v, int lo, int hi)
{
    v8i l = ((v8i)(v + 12582912.f) & 0x007fffff) - 0x00400000;
    v8i a = l < lo, b = l > hi;
    l = (l & ~a) | (((v8i){0} + lo) & a);
    return (l & ~b) | (((v8i){0} + hi) & b);
}

/* qkx2's trials t0 .. t0+7: each lane's codes (lf[i]), error, scale and min; ok where D > 0 */
__attribute__((target("avx2")))
static void qkx2_lanes(int n, int nmax, const float *x, const float *w, float lo, float span, float sum_w, float sum_x,
                       float rmin, float rdelta, int t0, int mad, v8f *lf, v8f *cur, v8f *sc, v8f *mn, v8i *ok)
{
    v8f iscale;
    for (int k = 0; k < 8; k++) iscale[k] = (rmin + rdelta * (float)(t0 + k) + (float)nmax) / span;
    v8f sl = {0}, sl2 = {0}, sxl = {0};
    for (int i = 0; i < n; i++) {
        lf[i] = __builtin_convertvector(near_clamp(iscale * (x[i] - lo), 0, nmax), v8f);
        v8f wl = w[i] * lf[i];
        sl += wl;
        sl2 += wl * lf[i];
        sxl += wl * x[i];
    }
    v8f D = sum_w * sl2 - sl * sl;
    v8f ts = (sum_w * sxl - sum_x * sl) / D, tm = (sl2 * sum_x - sl * sxl) / D;
    v8i pos = tm > 0;
    tm = VSEL(pos, (v8f){0}, tm);
    ts = VSEL(pos, sxl / sl2, ts);
    v8f e = {0};
    for (int i = 0; i < n; i++) {
        v8f diff = ts * lf[i] + tm - x[i];
        diff = mad ? (v8f)((v8i)diff & 0x7fffffff) : diff * diff;
        e += w[i] * diff;
    }
    *cur = e;
    *sc = ts;
    *mn = tm;
    *ok = D > 0;
}

/* qxfit's trials (rmse_type 1): sumlx and suml2 of 8 scales iscale[] */
__attribute__((target("avx2")))
static void qx_lanes(int n, int nmax, const float *x, const float *qw, const float *its, float *sumlx, float *suml2)
{
    v8f a = {0}, b = {0}, iscale;
    memcpy(&iscale, its, sizeof iscale);
    for (int i = 0; i < n; i++) {
        v8f l = __builtin_convertvector(near_clamp(iscale * x[i], -nmax, nmax - 1), v8f);
        float w = qw ? qw[i] : x[i] * x[i];
        a += w * x[i] * l;
        b += w * l * l;
    }
    memcpy(sumlx, &a, sizeof a);
    memcpy(suml2, &b, sizeof b);
}
#else
#define K_VEC 0
#endif

/* make_qkx2_quants: codes 0..nmax, returns the scale, *mn = -(the min) >= 0. */
float qs_gg_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn, float rmin, float rdelta,
                 int nstep, int mad)
{
    uint8_t Laux[32];
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *mn = -lo;
        return 0.f;
    }
    float iscale = (float)nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(qs_gg_nearest(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * (float)L[i] + lo - x[i];
        diff = mad ? fabsf(diff) : diff * diff;
        best += w[i] * diff;
    }
#if K_VEC
    /* ggml's trials see the min of the last accepted one: a group of 8 is fitted under the current
    ** min, and refitted from the next trial whenever an accepted trial moves it */
    if (qs_simd_level() >= QS_SIMD_AVX2 && n <= 32) {
        v8f lf[32], cur, sc, mv;
        v8i ok;
        for (int t0 = 0; t0 <= nstep;) {
            qkx2_lanes(n, nmax, x, w, lo, hi - lo, sum_w, sum_x, rmin, rdelta, t0, mad, lf, &cur, &sc, &mv, &ok);
            int next = t0 + 8;
            for (int k = 0; k < 8 && t0 + k <= nstep; k++)
                if (ok[k] && cur[k] < best) {
                    for (int i = 0; i < n; i++) L[i] = (uint8_t)lf[i][k];
                    best = cur[k];
                    scale = sc[k];
                    int moved = qs_gg_bits(mv[k]) != qs_gg_bits(lo);
                    lo = mv[k];
                    if (moved) { next = t0 + k + 1; break; }
                }
            t0 = next;
        }
        *mn = -lo;
        return scale;
    }
#endif
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qs_gg_nearest(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * (float)Laux[i] + this_min - x[i];
            diff = mad ? fabsf(diff) : diff * diff;
            cur += w[i] * diff;
        }
        if (cur < best) {
            memcpy(L, Laux, (size_t)n);
            best = cur;
            scale = this_scale;
            lo = this_min;
        }
    }
    *mn = -lo;
    return scale;
}

/* The value of largest magnitude of x[0..n), first of equals. */
static float signed_max(const float *x, int n, float *amax_out)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    *amax_out = amax;
    return max;
}

/* make_q3_quants with do_rmse: codes 0..2 nmax - 1 (l + nmax). */
static float q3fit(int n, int nmax, const float *x, int8_t *L)
{
    float amax, max = signed_max(x, n, &amax);
    if (amax < QS_GG_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(qs_gg_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i], slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            int nl = clampi(qs_gg_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* make_qx_quants, rmse_type 1: weights qw, or x^2 without them; codes l + nmax. */
float qs_gg_qxfit(int n, int nmax, const float *x, int8_t *L, const float *qw)
{
    float amax, max = signed_max(x, n, &amax);
    if (amax < QS_GG_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(qs_gg_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
#if K_VEC
    if (qs_simd_level() >= QS_SIMD_AVX2) {   /* the 18 trials are independent: fitted 8 at a time */
        float its[24], ax[24], a2[24];
        int k = 0;
        for (int is = -9; is <= 9; is++)
            if (is) its[k++] = -((float)nmax + 0.1f * (float)is) / max;
        for (; k < 24; k++) its[k] = its[17];
        for (int g = 0; g < 24; g += 8) qx_lanes(n, nmax, x, qw, its + g, ax + g, a2 + g);
        int pick = -1;
        for (k = 0; k < 18; k++)
            if (a2[k] > 0 && ax[k] * ax[k] > best * a2[k]) {
                scale = ax[k] / a2[k];
                best = scale * ax[k];
                pick = k;
            }
        if (pick >= 0)
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(qs_gg_nearest(its[pick] * x[i]), -nmax, nmax - 1));
        return scale;
    }
#endif
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(qs_gg_nearest(iscale * x[i]), -nmax, nmax - 1);
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(qs_gg_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ---- q2_k: header scales[16] (low nibble scale, high nibble min), d, dmin ---------------------- */

static void enc_q2_k(const float *x, uint8_t *L, uint8_t *m)
{
    float w[16], mins[16], scales[16], max_scale = 0, max_min = 0;
    uint8_t *sc = m;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
        scales[j] = qs_gg_qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    uint16_t d16 = 0, m16 = 0;
    if (max_scale > 0) {
        float iscale = 15.f / max_scale;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)qs_gg_nearest(iscale * scales[j]);
        d16 = qs_gg_f16(max_scale / 15.f);
    } else {
        memset(sc, 0, 16);
        d16 = qs_gg_f16(0.f);
    }
    if (max_min > 0) {
        float iscale = 15.f / max_min;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)(sc[j] | (unsigned)qs_gg_nearest(iscale * mins[j]) << 4);
        m16 = qs_gg_f16(max_min / 15.f);
    } else {
        m16 = qs_gg_f16(0.f);
    }
    qs_gg_wr16(m + 16, d16);
    qs_gg_wr16(m + 18, m16);
    for (int j = 0; j < 16; j++) {
        float d = qs_gg_f32(d16) * (float)(sc[j] & 0xF);
        if (d == 0) continue;
        float dm = qs_gg_f32(m16) * (float)(sc[j] >> 4);
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(qs_gg_nearest((x[16 * j + i] + dm) / d), 0, 3);
    }
}
static void dec_q2_k(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 16)), mn = qs_gg_f32(qs_gg_rd16(m + 18));
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)(m[j] & 0xF), ml = mn * (float)(m[j] >> 4);
        for (int i = 0; i < 16; i++) y[16 * j + i] = dl * (float)L[16 * j + i] - ml;
    }
}
/* 2-bit codes: byte l of each 32-byte group holds elements l, l+32, l+64, l+96 of its 128 */
static void pack2(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((L[j + l] & 3) | (L[j + l + 32] & 3) << 2 | (L[j + l + 64] & 3) << 4 | (L[j + l + 96] & 3) << 6);
}
static void unpack2(const uint8_t *qs, uint8_t *L)
{
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            for (int s = 0; s < 4; s++) L[j + l + 32 * s] = (uint8_t)(qs[j / 4 + l] >> (2 * s) & 3);
}
static void pack_q2_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    memcpy(o, m, 16);
    pack2(L, o + 16);
    memcpy(o + 80, m + 16, 4);
}
static void unpack_q2_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    memcpy(m, in, 16);
    unpack2(in + 16, L);
    memcpy(m + 16, in + 80, 4);
}
static float fmax2(float a, float b) { return a > b ? a : b; }
static void steps_q2_k(const uint8_t *m, float *S, float *Q)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 16)), mn = qs_gg_f32(qs_gg_rd16(m + 18));
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)(m[j] & 0xF), ml = mn * (float)(m[j] >> 4);
        S[j] = fabsf(dl);
        Q[j] = fmax2(fabsf(ml), fabsf(3 * dl - ml));
    }
}
static void text_q2_k(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m + 16), mn = qs_gg_rd16(m + 18);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, dmin FP16 0x%04x = %.6g, scale|min nibbles %02x %02x %02x %02x ...", d,
             (double)qs_gg_f32(d), mn, (double)qs_gg_f32(mn), m[0], m[1], m[2], m[3]);
}

/* ---- q3_k: header scales[12] (16 x 6 bits), d ------------------------------------------------------ */

static int q3_scale(const uint8_t *s, int j)   /* the 6-bit scale j, minus 32 */
{
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return (lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}
static void enc_q3_k(const float *x, uint8_t *L, uint8_t *m)
{
    float scales[16], max_scale = 0, amax = 0;
    int8_t *Ls = (int8_t *)L;
    for (int j = 0; j < 16; j++) {
        scales[j] = q3fit(16, 4, x + 16 * j, Ls + 16 * j);
        if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
    }
    uint8_t *s = m;
    memset(s, 0, 12);
    uint16_t d16;
    if (max_scale != 0) {
        float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            int l = clampi(qs_gg_s8(qs_gg_nearest(iscale * scales[j])), -32, 31) + 32;
            if (j < 8) s[j] = (uint8_t)(l & 0xF);
            else s[j - 8] = (uint8_t)(s[j - 8] | (l & 0xF) << 4);
            s[j % 4 + 8] = (uint8_t)(s[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
        }
        d16 = qs_gg_f16(1 / iscale);
    } else {
        d16 = qs_gg_f16(0.f);
    }
    qs_gg_wr16(m + 12, d16);
    for (int j = 0; j < 16; j++) {
        float d = qs_gg_f32(d16) * (float)q3_scale(s, j);
        if (d == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clampi(qs_gg_nearest(x[16 * j + i] / d), -4, 3) + 4);
    }
}
static void dec_q3_k(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 12));
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)q3_scale(m, j);
        for (int i = 0; i < 16; i++) y[16 * j + i] = dl * (float)((int)L[16 * j + i] - 4);
    }
}
/* hmask (32 bytes): bit b of byte k is the high bit of element 32 b + k; then 2-bit qs as q2_k */
static void pack_q3_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    memset(o, 0, 32);
    uint8_t low[256];
    for (int j = 0; j < 256; j++) {
        o[j % 32] = (uint8_t)(o[j % 32] | (L[j] >> 2 & 1) << (j / 32));
        low[j] = L[j] & 3;
    }
    pack2(low, o + 32);
    memcpy(o + 96, m, 14);
}
static void unpack_q3_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    unpack2(in + 32, L);
    for (int j = 0; j < 256; j++) L[j] = (uint8_t)(L[j] | (in[j % 32] >> (j / 32) & 1) << 2);
    memcpy(m, in + 96, 14);
}
static void steps_q3_k(const uint8_t *m, float *S, float *Q)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 12));
    for (int j = 0; j < 16; j++) {
        S[j] = fabsf(d * (float)q3_scale(m, j));
        Q[j] = 4 * S[j];
    }
}
static void text_q3_k(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m + 12);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, 6-bit scales - 32: %d %d %d %d ...", d, (double)qs_gg_f32(d), q3_scale(m, 0),
             q3_scale(m, 1), q3_scale(m, 2), q3_scale(m, 3));
}

/* ---- q4_k / q5_k: header d, dmin, scales[12] (8 x 6-bit scale and min) --------------------------- */

static void scale_min_k4(int j, const uint8_t *q, int *d, int *mn)
{
    if (j < 4) { *d = q[j] & 63; *mn = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4; *mn = (q[j + 4] >> 4) | (q[j] >> 6) << 4; }
}
static void enc_qk_k(const float *x, uint8_t *L, uint8_t *m, int nmax, float rmin, int nstep)
{
    float w[32], mins[8], scales[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xb = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xb[l] * xb[l];
        float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(xb[l]);
        scales[j] = qs_gg_qkx2(32, nmax, xb, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *s = m + 4;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)qs_gg_nearest(inv_scale * scales[j]), lm = (uint8_t)qs_gg_nearest(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
            s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
        }
    }
    uint16_t d16 = qs_gg_f16(max_scale / 63.f), m16 = qs_gg_f16(max_min / 63.f);
    qs_gg_wr16(m, d16);
    qs_gg_wr16(m + 2, m16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, s, &sc, &mn);
        float d = qs_gg_f32(d16) * (float)sc;
        if (d == 0) continue;
        float dm = qs_gg_f32(m16) * (float)mn;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(qs_gg_nearest((x[32 * j + i] + dm) / d), 0, nmax);
    }
}
static void enc_q4_k(const float *x, uint8_t *L, uint8_t *m) { enc_qk_k(x, L, m, 15, -1.f, 20); }
static void enc_q5_k(const float *x, uint8_t *L, uint8_t *m) { enc_qk_k(x, L, m, 31, -0.5f, 15); }
static void dec_qk_k(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m)), mn = qs_gg_f32(qs_gg_rd16(m + 2));
    for (int j = 0; j < 8; j++) {
        int sc, mm;
        scale_min_k4(j, m + 4, &sc, &mm);
        float d1 = d * (float)sc, m1 = mn * (float)mm;
        for (int i = 0; i < 32; i++) y[32 * j + i] = d1 * (float)L[32 * j + i] - m1;
    }
}
/* 4-bit: byte l of each 32-byte group holds element l (low) and l + 32 (high) of its 64; q5_k's qh:
** bit 2 g (+1) of byte l is the fifth bit of element 64 g + l (+ 32) */
static void pack_q4_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    memcpy(o, m, 16);
    for (int j = 0; j < 256; j += 64)
        for (int l = 0; l < 32; l++) o[16 + j / 2 + l] = (uint8_t)((L[j + l] & 15) | (L[j + l + 32] & 15) << 4);
}
static void unpack_q4_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    memcpy(m, in, 16);
    for (int j = 0; j < 256; j += 64)
        for (int l = 0; l < 32; l++) {
            L[j + l] = in[16 + j / 2 + l] & 15;
            L[j + l + 32] = in[16 + j / 2 + l] >> 4;
        }
}
static void pack_q5_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    pack_q4_k(L, m, o);
    memmove(o + 48, o + 16, 128);   /* qs after qh */
    memset(o + 16, 0, 32);
    for (int j = 0; j < 256; j += 64)
        for (int l = 0; l < 32; l++)
            o[16 + l] = (uint8_t)(o[16 + l] | (L[j + l] >> 4 & 1) << (j / 32) | (L[j + l + 32] >> 4 & 1) << (j / 32 + 1));
}
static void unpack_q5_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    memcpy(m, in, 16);
    for (int j = 0; j < 256; j += 64)
        for (int l = 0; l < 32; l++) {
            const uint8_t q = in[48 + j / 2 + l], h = in[16 + l];
            L[j + l] = (uint8_t)((q & 15) | (h >> (j / 32) & 1) << 4);
            L[j + l + 32] = (uint8_t)((q >> 4) | (h >> (j / 32 + 1) & 1) << 4);
        }
}
static void steps_qk_k(const uint8_t *m, float *S, float *Q, int nmax)
{
    float d = qs_gg_f32(qs_gg_rd16(m)), mn = qs_gg_f32(qs_gg_rd16(m + 2));
    for (int j = 0; j < 8; j++) {
        int sc, mm;
        scale_min_k4(j, m + 4, &sc, &mm);
        float d1 = d * (float)sc, m1 = mn * (float)mm;
        S[j] = fabsf(d1);
        Q[j] = fmax2(fabsf(m1), fabsf((float)nmax * d1 - m1));
    }
}
static void steps_q4_k(const uint8_t *m, float *S, float *Q) { steps_qk_k(m, S, Q, 15); }
static void steps_q5_k(const uint8_t *m, float *S, float *Q) { steps_qk_k(m, S, Q, 31); }
static void text_qk_k(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m), mn = qs_gg_rd16(m + 2);
    int s0, m0, s1, m1;
    scale_min_k4(0, m + 4, &s0, &m0);
    scale_min_k4(1, m + 4, &s1, &m1);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, dmin FP16 0x%04x = %.6g, 6-bit scale/min %d/%d %d/%d ...", d,
             (double)qs_gg_f32(d), mn, (double)qs_gg_f32(mn), s0, m0, s1, m1);
}

/* ---- q6_k: header scales[16] (int8), d ------------------------------------------------------------ */

/* quantize_row_q6_K_ref, and with importances qw (NULL: none) quantize_row_q6_K_impl, whose sub-block
** fits weigh by qw alone */
static void enc_q6_k_w(const float *x, const float *qw, uint8_t *L, uint8_t *m)
{
    float scales[16], max_scale = 0, max_abs = 0;
    int8_t *Ls = (int8_t *)L;
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = qs_gg_qxfit(16, 32, x + 16 * ib, Ls + 16 * ib, qw ? qw + 16 * ib : NULL);
        if (fabsf(scales[ib]) > max_abs) { max_abs = fabsf(scales[ib]); max_scale = scales[ib]; }
    }
    if (max_abs < QS_GG_EPS) {   /* ggml zeroes the whole block */
        memset(L, 0, 256);
        memset(m, 0, 18);
        return;
    }
    float iscale = -128.f / max_scale;
    uint16_t d16 = qs_gg_f16(1 / iscale);
    qs_gg_wr16(m + 16, d16);
    for (int ib = 0; ib < 16; ib++) {
        int v = qs_gg_nearest(iscale * scales[ib]);
        m[ib] = (uint8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; j++) {
        float d = qs_gg_f32(d16) * (float)(int8_t)m[j];
        if (d == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clampi(qs_gg_nearest(x[16 * j + i] / d), -32, 31) + 32);
    }
}
static void enc_q6_k(const float *x, uint8_t *L, uint8_t *m) { enc_q6_k_w(x, NULL, L, m); }
static void encw_q6_k(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { (void)s2; enc_q6_k_w(x, qw, L, m); }
static void dec_q6_k(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 16));
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)(int8_t)m[j];
        for (int i = 0; i < 16; i++) y[16 * j + i] = dl * (float)((int)L[16 * j + i] - 32);
    }
}
/* ql: per 128, byte l holds elements l | l+64 << 4 and byte l+32 elements l+32 | l+96 << 4;
** qh: byte l holds the top 2 bits of l, l+32, l+64, l+96 */
static void pack_q6_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    uint8_t *ql = o, *qh = o + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = L + j + l;
            ql[l] = (uint8_t)((q[0] & 0xF) | (q[64] & 0xF) << 4);
            ql[l + 32] = (uint8_t)((q[32] & 0xF) | (q[96] & 0xF) << 4);
            qh[l] = (uint8_t)((q[0] >> 4 & 3) | (q[32] >> 4 & 3) << 2 | (q[64] >> 4 & 3) << 4 | (q[96] >> 4 & 3) << 6);
        }
    memcpy(o + 192, m, 18);
}
static void unpack_q6_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    const uint8_t *ql = in, *qh = in + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            uint8_t *q = L + j + l;
            q[0] = (uint8_t)((ql[l] & 0xF) | (qh[l] & 3) << 4);
            q[32] = (uint8_t)((ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4);
            q[64] = (uint8_t)((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
            q[96] = (uint8_t)((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
        }
    memcpy(m, in + 192, 18);
}
static void steps_q6_k(const uint8_t *m, float *S, float *Q)
{
    float d = qs_gg_f32(qs_gg_rd16(m + 16));
    for (int j = 0; j < 16; j++) {
        S[j] = fabsf(d * (float)(int8_t)m[j]);
        Q[j] = 32 * S[j];
    }
}
static void text_q6_k(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m + 16);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, int8 scales %d %d %d %d ...", d, (double)qs_gg_f32(d), (int8_t)m[0],
             (int8_t)m[1], (int8_t)m[2], (int8_t)m[3]);
}

/* ---- with an importance matrix: quantize_row_q2_K_impl .. q6_K_impl ------------------------------- */

/* make_qp_quants: codes 0..nmax of n non-negative x (sub-block scales) under importances w; ggml keeps
** the codes in bytes, so a negative code (a negative x) wraps as there. */
static float qpfit(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < QS_GG_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max, scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * (float)(uint8_t)qs_gg_nearest(iscale * x[i]);
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float isc = (0.1f * (float)is + (float)nmax) / max, sc = 1 / isc, mse = 0;
        for (int i = 0; i < n; i++) {
            int l = qs_gg_nearest(isc * x[i]);
            l = l < nmax ? l : nmax;
            float diff = x[i] - sc * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best) {
            best = mse;
            iscale = isc;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qs_gg_nearest(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i], sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int nl = qs_gg_nearest(x[i] * sl2 / slx);
            nl = nl < nmax ? nl : nmax;
            if (nl == L[i]) continue;
            slx += w[i] * x[i] * (float)nl;
            sl2 += w[i] * (float)nl * (float)nl;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* sum of x^2 of the super-block, in ggml's order */
static float sumsq256(const float *x)
{
    float s = 0;
    for (int j = 0; j < 256; j++) s += x[j] * x[j];
    return s;
}

static void encw_q2_k(const float *x, const float *qw, float sigma2_row, uint8_t *L, uint8_t *m)
{
    (void)sigma2_row;
    float w[16], sw[16], mins[16], scales[16], sigma2 = sumsq256(x) / 256;
    uint8_t Ls[16], Lm[16];
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        sw[j] = 0;
        for (int l = 0; l < 16; l++) sw[j] += w[l];
        scales[j] = qs_gg_qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36, 0);
    }
    uint16_t d16 = qs_gg_f16(qpfit(16, 15, scales, Ls, sw)), m16 = qs_gg_f16(qpfit(16, 15, mins, Lm, sw));
    qs_gg_wr16(m + 16, d16);
    qs_gg_wr16(m + 18, m16);
    float dm = qs_gg_f32(d16), mm = qs_gg_f32(m16);
    for (int j = 0; j < 16; j++) m[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
    for (int j = 0; j < 16; j++) {
        float d = dm * (float)(m[j] & 0xF);
        if (d == 0) continue;
        float mn = mm * (float)(m[j] >> 4);
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(qs_gg_nearest((x[16 * j + i] + mn) / d), 0, 3);
    }
}

static void encw_q3_k(const float *x, const float *qw, float sigma2_row, uint8_t *L, uint8_t *m)
{
    (void)sigma2_row;
    float w[16], sw[16], scales[16], sigma2 = 2 * sumsq256(x) / 256;
    int8_t Ls[16], *Lq = (int8_t *)L;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 16; l++) sumw += w[l];
        sw[j] = sumw;
        scales[j] = qs_gg_qxfit(16, 4, x + 16 * j, Lq + 16 * j, w);
    }
    uint8_t *s = m;
    memset(s, 0, 12);
    float d_block = qs_gg_qxfit(16, 32, scales, Ls, sw);
    for (int j = 0; j < 16; j++) {
        int l = Ls[j];
        if (j < 8) s[j] = (uint8_t)(l & 0xF);
        else s[j - 8] = (uint8_t)(s[j - 8] | (l & 0xF) << 4);
        s[j % 4 + 8] = (uint8_t)(s[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
    }
    uint16_t d16 = qs_gg_f16(d_block);
    qs_gg_wr16(m + 12, d16);
    for (int j = 0; j < 16; j++) {
        float d = qs_gg_f32(d16) * (float)q3_scale(s, j);
        if (d == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clampi(qs_gg_nearest(x[16 * j + i] / d), -4, 3) + 4);
    }
}

static void encw_qk_k(const float *x, const float *qw, uint8_t *L, uint8_t *m, int nmax)
{   /* q5_k's impl clamps the 6-bit codes to 63, q4_k's does not (they differ only on wrapped codes) */
    float w[32], sw[8], mins[8], scales[8], sigma2 = 2 * sumsq256(x) / 256;
    uint8_t Ls[8], Lm[8];
    for (int j = 0; j < 8; j++) {
        for (int l = 0; l < 32; l++) w[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; l++) sumw += w[l];
        sw[j] = sumw;
        scales[j] = qs_gg_qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36, 0);
    }
    float d_block = qpfit(8, 63, scales, Ls, sw), m_block = qpfit(8, 63, mins, Lm, sw);
    uint8_t *s = m + 4;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = Ls[j], lm = Lm[j];
        if (nmax == 31) {
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
        }
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
            s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
        }
    }
    uint16_t d16 = qs_gg_f16(d_block), m16 = qs_gg_f16(m_block);
    qs_gg_wr16(m, d16);
    qs_gg_wr16(m + 2, m16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, s, &sc, &mn);
        float d = qs_gg_f32(d16) * (float)sc;
        if (d == 0) continue;
        float dm = qs_gg_f32(m16) * (float)mn;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(qs_gg_nearest((x[32 * j + i] + dm) / d), 0, nmax);
    }
}
static void encw_q4_k(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { (void)s2; encw_qk_k(x, qw, L, m, 15); }
static void encw_q5_k(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { (void)s2; encw_qk_k(x, qw, L, m, 31); }

/* ---- q8_k: header d (FP32), bsums[16] (int16) ---------------------------------------------------- */

static void enc_q8_k(const float *x, uint8_t *L, uint8_t *m)
{
    float amax, max = signed_max(x, 256, &amax), d = 0;
    memset(m, 0, 36);
    if (amax != 0) {
        float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            int v = qs_gg_nearest(iscale * x[j]);
            L[j] = (uint8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += qs_gg_s8(L[16 * j + i]);
            qs_gg_wr16(m + 4 + 2 * j, (uint16_t)sum);
        }
        d = 1 / iscale;
    } else {
        memset(L, 0, 256);
    }
    memcpy(m, &d, 4);
}
static float q8k_d(const uint8_t *m) { float d; memcpy(&d, m, 4); return d; }
static void dec_q8_k(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = q8k_d(m);
    for (int j = 0; j < 256; j++) y[j] = d * (float)qs_gg_s8(L[j]);
}
static void pack_q8_k(const uint8_t *L, const uint8_t *m, uint8_t *o)
{
    memcpy(o, m, 4);
    memcpy(o + 4, L, 256);
    memcpy(o + 260, m + 4, 32);
}
static void unpack_q8_k(const uint8_t *in, uint8_t *L, uint8_t *m)
{
    memcpy(m, in, 4);
    memcpy(L, in + 4, 256);
    memcpy(m + 4, in + 260, 32);
}
static void steps_q8_k(const uint8_t *m, float *S, float *Q)
{
    S[0] = fabsf(q8k_d(m));
    Q[0] = 127 * S[0];
}
static void text_q8_k(const uint8_t *m, char *out, size_t cap)
{
    snprintf(out, cap, "d FP32 = %.9g, block sums of 16: %d %d %d %d ...", (double)q8k_d(m), (int16_t)qs_gg_rd16(m + 4),
             (int16_t)qs_gg_rd16(m + 6), (int16_t)qs_gg_rd16(m + 8), (int16_t)qs_gg_rd16(m + 10));
}

const qs_ggml_codec qs_ggml_q2_k = {"q2_k", 256, 84, 20, 16, enc_q2_k, dec_q2_k, pack_q2_k, unpack_q2_k, steps_q2_k, text_q2_k,
                                    encw_q2_k};
const qs_ggml_codec qs_ggml_q3_k = {"q3_k", 256, 110, 14, 16, enc_q3_k, dec_q3_k, pack_q3_k, unpack_q3_k, steps_q3_k, text_q3_k,
                                    encw_q3_k};
const qs_ggml_codec qs_ggml_q4_k = {"q4_k", 256, 144, 16, 32, enc_q4_k, dec_qk_k, pack_q4_k, unpack_q4_k, steps_q4_k, text_qk_k,
                                    encw_q4_k};
const qs_ggml_codec qs_ggml_q5_k = {"q5_k", 256, 176, 16, 32, enc_q5_k, dec_qk_k, pack_q5_k, unpack_q5_k, steps_q5_k, text_qk_k,
                                    encw_q5_k};
const qs_ggml_codec qs_ggml_q6_k = {"q6_k", 256, 210, 18, 16, enc_q6_k, dec_q6_k, pack_q6_k, unpack_q6_k, steps_q6_k, text_q6_k,
                                    encw_q6_k};
const qs_ggml_codec qs_ggml_q8_k = {"q8_k", 256, 292, 36, 256, enc_q8_k, dec_q8_k, pack_q8_k, unpack_q8_k, steps_q8_k, text_q8_k,
                                    NULL};
