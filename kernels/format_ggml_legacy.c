/*
** ggml's legacy block types (format_ggml.h): 32 values per block, one FP16 scale d (and an FP16 min m,
** or Q8_1's FP16 block sum s):
**   q4_0  d = max / -8 (max: the value of largest magnitude), q = min(15, trunc(x/d + 8.5)), y = (q - 8) d
**   q4_1  d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5)), y = q d + m
**   q5_0  d = max / -16, q = min(31, trunc(x/d + 16.5)), y = (q - 16) d
**   q5_1  d = (max - min) / 31, m = min, q = trunc((x - min)/d + 0.5), y = q d + m
**   q8_0  d = amax / 127, q = roundf(x/d) (ties away), y = q d
**   q8_1  q8_0's d and q, plus s = FP16(d * sum q) (the activation side of q4_1 / q5_1 dot products)
** where x/d is x times the float32 reciprocal 1/d of the unrounded d (0 when d is 0), and d, m, s are
** stored rounded to FP16 (decode uses the rounded ones): quantize_row_*_ref of ggml-quants.c,
** operation for operation.  Codes: q (unsigned), for q8_* the int8 in two's complement.
*/
#include <float.h>
#include <stdio.h>

#include "format_ggml.h"

/* The value of largest magnitude, first of equals (ggml's `if (amax < fabsf(v))`). */
static float signed_max(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* (int8_t)(v) then MIN(cap, .): ggml's clamp of a truncated code. */
static inline uint8_t trunc_cap(float v, int cap)
{
    int q = qs_gg_s8(qs_gg_cvtt(v));
    return (uint8_t)(q < cap ? q : cap);
}

/* ---- q4_0 / q5_0: symmetric, d = max / -(2^(bits-1)) -------------------------------------------- */

static void enc_sym(const float *x, uint8_t *L, uint8_t *m, int half, int cap)
{
    float d = signed_max(x, 32) / (float)-half;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    qs_gg_wr16(m, qs_gg_f16(d));
    for (int j = 0; j < 32; j++) L[j] = trunc_cap(x[j] * id + ((float)half + 0.5f), cap);
}
static void dec_sym(const uint8_t *L, const uint8_t *m, float *y, int half)
{
    float d = qs_gg_f32(qs_gg_rd16(m));
    for (int j = 0; j < 32; j++) y[j] = (float)((int)L[j] - half) * d;
}
static void enc_q4_0(const float *x, uint8_t *L, uint8_t *m) { enc_sym(x, L, m, 8, 15); }
static void dec_q4_0(const uint8_t *L, const uint8_t *m, float *y) { dec_sym(L, m, y, 8); }
static void enc_q5_0(const float *x, uint8_t *L, uint8_t *m) { enc_sym(x, L, m, 16, 31); }
static void dec_q5_0(const uint8_t *L, const uint8_t *m, float *y) { dec_sym(L, m, y, 16); }

/* ---- q4_1 / q5_1: d and the block minimum ------------------------------------------------------- */

static void enc_min(const float *x, uint8_t *L, uint8_t *m, int nmax)
{
    float lo, hi;
    min_max(x, 32, &lo, &hi);
    float d = (hi - lo) / (float)nmax;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    qs_gg_wr16(m, qs_gg_f16(d));
    qs_gg_wr16(m + 2, qs_gg_f16(lo));
    for (int j = 0; j < 32; j++) {
        float v = (x[j] - lo) * id + 0.5f;
        /* q4_1 clamps (int8_t) at 15; q5_1 takes (uint8_t) unclamped */
        L[j] = nmax == 15 ? trunc_cap(v, 15) : (uint8_t)qs_gg_cvtt(v);
    }
}
static void dec_min(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m)), mn = qs_gg_f32(qs_gg_rd16(m + 2));
    for (int j = 0; j < 32; j++) y[j] = (float)L[j] * d + mn;
}
static void enc_q4_1(const float *x, uint8_t *L, uint8_t *m) { enc_min(x, L, m, 15); }
static void enc_q5_1(const float *x, uint8_t *L, uint8_t *m) { enc_min(x, L, m, 31); }

/* ---- q8_0 / q8_1 -------------------------------------------------------------------------------- */

static float enc_q8(const float *x, uint8_t *L, uint8_t *m)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;   /* ggml's MAX(amax, a): a NaN resets it */
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    qs_gg_wr16(m, qs_gg_f16(d));
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)qs_gg_cvtt(roundf(x[j] * id));
    return d;
}
/* ggml-cpu's x86 quantize_row_q8_0 / q8_1 (AVX, AVX2, AVX-512 builds: the activations of llama.cpp's
** CPU dot products): the same d, but x times id = 127/amax (one rounding, not 1/d's two) rounded to
** nearest even (_mm256_round_ps) and converted with saturation (a NaN's INT_MIN packs to -128). */
static float enc_q8_cpu(const float *x, uint8_t *L, uint8_t *m, int *sum)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    qs_gg_wr16(m, qs_gg_f16(d));
    uint32_t s = 0;   /* ggml sums the int32 lanes (wrapping) before packing them to int8 */
    for (int j = 0; j < 32; j++) {
        int32_t q = qs_gg_cvtt(rintf(x[j] * id));
        s += (uint32_t)q;
        L[j] = (uint8_t)(q < -128 ? -128 : q > 127 ? 127 : q);
    }
    *sum = (int)(s >= 0x80000000u ? -(int64_t)(0x100000000ull - s) : (int64_t)s);
    return d;
}
static void enc_q8_0_cpu(const float *x, uint8_t *L, uint8_t *m)
{
    int sum;
    enc_q8_cpu(x, L, m, &sum);
}
static void enc_q8_1_cpu(const float *x, uint8_t *L, uint8_t *m)
{
    int sum;
    float d = enc_q8_cpu(x, L, m, &sum);
    qs_gg_wr16(m + 2, qs_gg_f16(d * (float)sum));
}

static void enc_q8_0(const float *x, uint8_t *L, uint8_t *m) { enc_q8(x, L, m); }
static void enc_q8_1(const float *x, uint8_t *L, uint8_t *m)
{
    float d = enc_q8(x, L, m);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += qs_gg_s8(L[j]);
    qs_gg_wr16(m + 2, qs_gg_f16((float)sum * d));
}
static void dec_q8(const uint8_t *L, const uint8_t *m, float *y)
{
    float d = qs_gg_f32(qs_gg_rd16(m));
    for (int j = 0; j < 32; j++) y[j] = (float)qs_gg_s8(L[j]) * d;
}

/* ---- with an importance matrix: quantize_row_q4_0_impl .. q5_1_impl ------------------------------- */

/* ggml's weights qw * sqrt(sigma2 + x^2), sigma2 the row's mean square */
static void imp_weights(const float *x, const float *qw, float sigma2, float *w)
{
    for (int j = 0; j < 32; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}
static void encw_sym(const float *x, const float *qw, float sigma2, uint8_t *L, uint8_t *m, int nmax)
{
    float w[32];
    imp_weights(x, qw, sigma2, w);
    float d = qs_gg_qxfit(32, nmax, x, (int8_t *)L, w);
    qs_gg_wr16(m, qs_gg_f16(d));
}
static void encw_q4_0(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { encw_sym(x, qw, s2, L, m, 8); }
static void encw_q5_0(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { encw_sym(x, qw, s2, L, m, 16); }
static void encw_min(const float *x, const float *qw, float sigma2, uint8_t *L, uint8_t *m, int nmax)
{
    float w[32], mn;
    imp_weights(x, qw, sigma2, w);
    float d = qs_gg_qkx2(32, nmax, x, w, L, &mn, -0.9f, 0.05f, 36, 0);   /* make_qkx3_quants */
    qs_gg_wr16(m, qs_gg_f16(d));
    qs_gg_wr16(m + 2, qs_gg_f16(-mn));
}
static void encw_q4_1(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { encw_min(x, qw, s2, L, m, 15); }
static void encw_q5_1(const float *x, const float *qw, float s2, uint8_t *L, uint8_t *m) { encw_min(x, qw, s2, L, m, 31); }

/* ---- ggml's block bytes --------------------------------------------------------------------------- */

/* nibbles: element j low, j + 16 high; 5-bit types add qh: bit j = bit 4 of element j */
static void pack_nib(const uint8_t *L, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 15) | (L[j + 16] & 15) << 4);
        h |= (uint32_t)(L[j] >> 4 & 1) << j | (uint32_t)(L[j + 16] >> 4 & 1) << (j + 16);
    }
    if (qh)
        for (int b = 0; b < 4; b++) qh[b] = (uint8_t)(h >> 8 * b);
}
static void unpack_nib(const uint8_t *qs, const uint8_t *qh, uint8_t *L)
{
    uint32_t h = qh ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;
    for (int j = 0; j < 16; j++) {
        L[j] = (uint8_t)((qs[j] & 15) | (h >> j & 1) << 4);
        L[j + 16] = (uint8_t)((qs[j] >> 4) | (h >> (j + 16) & 1) << 4);
    }
}
/* hb header bytes, then (5-bit) qh, then qs; q8: header, then 32 int8 */
static void pack_4(const uint8_t *L, const uint8_t *m, uint8_t *o, int hb, int five)
{
    memcpy(o, m, (size_t)hb);
    pack_nib(L, o + hb + (five ? 4 : 0), five ? o + hb : NULL);
}
static void unpack_4(const uint8_t *in, uint8_t *L, uint8_t *m, int hb, int five)
{
    memcpy(m, in, (size_t)hb);
    unpack_nib(in + hb + (five ? 4 : 0), five ? in + hb : NULL, L);
}
static void pack_q4_0(const uint8_t *L, const uint8_t *m, uint8_t *o) { pack_4(L, m, o, 2, 0); }
static void unpack_q4_0(const uint8_t *i, uint8_t *L, uint8_t *m) { unpack_4(i, L, m, 2, 0); }
static void pack_q4_1(const uint8_t *L, const uint8_t *m, uint8_t *o) { pack_4(L, m, o, 4, 0); }
static void unpack_q4_1(const uint8_t *i, uint8_t *L, uint8_t *m) { unpack_4(i, L, m, 4, 0); }
static void pack_q5_0(const uint8_t *L, const uint8_t *m, uint8_t *o) { pack_4(L, m, o, 2, 1); }
static void unpack_q5_0(const uint8_t *i, uint8_t *L, uint8_t *m) { unpack_4(i, L, m, 2, 1); }
static void pack_q5_1(const uint8_t *L, const uint8_t *m, uint8_t *o) { pack_4(L, m, o, 4, 1); }
static void unpack_q5_1(const uint8_t *i, uint8_t *L, uint8_t *m) { unpack_4(i, L, m, 4, 1); }
static void pack_q8_0(const uint8_t *L, const uint8_t *m, uint8_t *o) { memcpy(o, m, 2); memcpy(o + 2, L, 32); }
static void unpack_q8_0(const uint8_t *i, uint8_t *L, uint8_t *m) { memcpy(m, i, 2); memcpy(L, i + 2, 32); }
static void pack_q8_1(const uint8_t *L, const uint8_t *m, uint8_t *o) { memcpy(o, m, 4); memcpy(o + 4, L, 32); }
static void unpack_q8_1(const uint8_t *i, uint8_t *L, uint8_t *m) { memcpy(m, i, 4); memcpy(L, i + 4, 32); }

/* ---- the analysis' scales and the inspector's text ------------------------------------------------ */

static float fmax2(float a, float b) { return a > b ? a : b; }
static void steps_sym(const uint8_t *m, float *S, float *Q, int half)
{
    float d = fabsf(qs_gg_f32(qs_gg_rd16(m)));
    *S = d;
    *Q = d * (float)half;
}
static void steps_q4_0(const uint8_t *m, float *S, float *Q) { steps_sym(m, S, Q, 8); }
static void steps_q5_0(const uint8_t *m, float *S, float *Q) { steps_sym(m, S, Q, 16); }
static void steps_q8(const uint8_t *m, float *S, float *Q) { steps_sym(m, S, Q, 127); }
static void steps_min(const uint8_t *m, float *S, float *Q, int nmax)
{
    float d = qs_gg_f32(qs_gg_rd16(m)), mn = qs_gg_f32(qs_gg_rd16(m + 2));
    *S = fabsf(d);
    *Q = fmax2(fabsf(mn), fabsf((float)nmax * d + mn));
}
static void steps_q4_1(const uint8_t *m, float *S, float *Q) { steps_min(m, S, Q, 15); }
static void steps_q5_1(const uint8_t *m, float *S, float *Q) { steps_min(m, S, Q, 31); }

static void text_d(const uint8_t *m, char *out, size_t cap)
{
    uint16_t d = qs_gg_rd16(m);
    snprintf(out, cap, "d FP16 0x%04x = %.6g", d, (double)qs_gg_f32(d));
}
static void text_dm(const uint8_t *m, char *out, size_t cap, const char *second)
{
    uint16_t d = qs_gg_rd16(m), s = qs_gg_rd16(m + 2);
    snprintf(out, cap, "d FP16 0x%04x = %.6g, %s FP16 0x%04x = %.6g", d, (double)qs_gg_f32(d), second, s,
             (double)qs_gg_f32(s));
}
static void text_q4_1(const uint8_t *m, char *out, size_t cap) { text_dm(m, out, cap, "m"); }
static void text_q8_1(const uint8_t *m, char *out, size_t cap) { text_dm(m, out, cap, "s = d * sum q"); }

#define CODEC(NAME, BYTES, META, ENC, DEC, PACK, UNPACK, STEPS, TEXT) CODECW(NAME, BYTES, META, ENC, DEC, PACK, UNPACK, STEPS, TEXT, NULL)
#define CODECW(NAME, BYTES, META, ENC, DEC, PACK, UNPACK, STEPS, TEXT, ENCW) \
    {NAME, 32, BYTES, META, 32, ENC, DEC, PACK, UNPACK, STEPS, TEXT, ENCW}

const qs_ggml_codec qs_ggml_q4_0 = CODECW("q4_0", 18, 2, enc_q4_0, dec_q4_0, pack_q4_0, unpack_q4_0, steps_q4_0, text_d, encw_q4_0);
const qs_ggml_codec qs_ggml_q4_1 = CODECW("q4_1", 20, 4, enc_q4_1, dec_min, pack_q4_1, unpack_q4_1, steps_q4_1, text_q4_1, encw_q4_1);
const qs_ggml_codec qs_ggml_q5_0 = CODECW("q5_0", 22, 2, enc_q5_0, dec_q5_0, pack_q5_0, unpack_q5_0, steps_q5_0, text_d, encw_q5_0);
const qs_ggml_codec qs_ggml_q5_1 = CODECW("q5_1", 24, 4, enc_q5_1, dec_min, pack_q5_1, unpack_q5_1, steps_q5_1, text_q4_1, encw_q5_1);
const qs_ggml_codec qs_ggml_q8_0 = CODEC("q8_0", 34, 2, enc_q8_0, dec_q8, pack_q8_0, unpack_q8_0, steps_q8, text_d);
const qs_ggml_codec qs_ggml_q8_1 = CODEC("q8_1", 36, 4, enc_q8_1, dec_q8, pack_q8_1, unpack_q8_1, steps_q8, text_q8_1);
const qs_ggml_codec qs_ggml_q8_0_cpu = CODEC("q8_0", 34, 2, enc_q8_0_cpu, dec_q8, pack_q8_0, unpack_q8_0, steps_q8, text_d);
const qs_ggml_codec qs_ggml_q8_1_cpu = CODEC("q8_1", 36, 4, enc_q8_1_cpu, dec_q8, pack_q8_1, unpack_q8_1, steps_q8, text_q8_1);
