/*
** M2XFP (ASPLOS'26, arXiv 2601.19213) in the registry: m2xfp4, FP4 E2M1 elements in groups of 32
** with an 8-bit shared exponent and 2 extra bits for each sub-group of 8, 4.5 bits per element,
** after spec/formats-mx.md §4 (the arithmetic of the reference fake-quantizer
** mxq/quantize/quant_func.py), vectors T37-T40.  Two modes (o->m2x):
**
**   em (default; the repository's activation mode `mxem`, §4.1): e0 = floor(log2 max(amax, 1e-8))
**     - 2, s = 2^e0; every element is E2M1_RNE_sat(|x|/s) with its sign; in each sub-group the
**     element with the largest E2M1 magnitude (the first one on ties) also gets its E2M3 index j
**     (RNE_sat), clamped to [4k-1, 4k+2] (k its E2M1 magnitude code); d = j - 4k is stored and the
**     element decodes to E2M3(4k + d) * s.  The decoder finds that element again from the codes.
**   es (the weight mode `mxes`, §4.2): for bias in -1, 0, +1 (in that order) and, in each sub-group,
**     for ratio r = 1 + m/4, m = 0..3 (in that order), quantize the 8 elements with scale
**     cs = 2^(e0+bias) * r as E2M1_RNE_sat(fl32(|x| / cs)) * cs; keep the first ratio with the least
**     squared error per sub-group and the first bias with the least mean of the sub-group MSEs.
**     Elements decode to E2M1 * 2^(e0+bias) * (1 + m/4).
**
** Metadata record [INFERRED: the repository has no packing; this layout is ours], 2 bytes per group:
**   byte 0: E8M0 code of the shared exponent (em: e0 + 127; es: e0 + bias + 127; 0xFF: NaN group);
**   byte 1: sub-group j's 2-bit field at bits 2j..2j+1 (LSB first, like qs_pack_codes):
**           em: d + 1 (d = -1, 0, +1, +2 -> 0..3), es: m (ratio 1 + m/4).
** Codes: one E2M1 code per element (bit 3 sign), unpacked.  No tensor scale: encode stores 1.0.
**
** Choices where the reference is silent or not reproducible:
**   - Exponent from the float32 bits of max(amax, 1e-8f) (the reference uses torch.log2, with
**     §1.7's log2 pitfall).  The 1e-8 floor is kept, so e0 is in [-29, 125] and needs no clamp; an
**     all-zero group stores e0 = -29 (code 0x62), as the reference computes.
**   - Ties: E2M1 and E2M3 rounding are exact RNE (the reference's +5e-7 nudge at odd midpoints
**     is exactly ties-to-even-index); the top element is the first of equal magnitude codes
**     [INFERRED: torch.topk's tie order is unspecified]; es keeps the first minimum of each search.
**   - [Choice] es squared errors are summed in double from the float32 candidates (the reference
**     reduces in float32 with PyTorch's order): exact ties (e.g. T40) resolve as the reference
**     does, near-ties within float32 rounding may not.
**   - [Choice] NaN or ±Inf in a group: exponent 0xFF, fields 0, codes 0, the group decodes to NaN
**     (the reference would propagate NaN through log2).
**   - [Choice] Signs: codes keep the sign of x, so -0.2 -> -0 (T37/T39).  The reference's em output
**     computes fp4*(1-mask) + fp6*mask and its sign of zero follows that sum; tests compare em
**     zeros by value.
**   - Rounding: RNE only (the reference has no other mode); the group is fixed at 32 (o->block 0
**     or 32): the 2-byte record and the 4.5 bits/element assume it.  A final partial group is its
**     own group with partial sub-groups (the reference requires whole groups); its mean-of-MSE
**     runs over the sub-groups present.
**   - Registry range: the decoded value set over all exponent codes, es's 1.75 * 6 * 2^127 at the
**     top and em's E2M3 0.125 * 2^-127 at the bottom.
*/
#include "fbits.h"
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format_families.h"
#include "minifloat.h"

#define M2_GROUP 32
#define M2_SUB 8


static int m2_opts(const qs_format *f, const qs_qopts *o, int *es, qs_err *e)
{
    static const qs_qopts defaults;
    if (!o) o = &defaults;
    if (o->round != QS_RND_DEFAULT && o->round != QS_RND_RNE)
        return qs_fail(e, "format %s does not support rounding '%s' (supported: rne)", f->name,
                       qs_round_name(o->round));
    if (o->block != 0 && o->block != M2_GROUP)
        return qs_fail(e, "format %s has a fixed group of %d values (block %d given)", f->name, M2_GROUP,
                       o->block);
    if (o->m2x != QS_M2X_EM && o->m2x != QS_M2X_ES) return qs_fail(e, "format %s: unknown mode", f->name);
    *es = o->m2x == QS_M2X_ES;
    return 0;
}

/* 2^k for k in [-127, 127] (2^-127 is a float32 subnormal). */
static inline float pow2f(int k) { return u2f(k == -127 ? 0x00400000u : (uint32_t)(k + 127) << 23); }

static inline uint32_t e2m1(float a) { return qs_mf_encode(&qs_mf_e2m1, a, QS_RND_RNE, 0, 1); }
static inline uint32_t sign4(float x) { return (f2u(x) >> 31) << 3; }

/* Index of the first largest magnitude code of sub-group codes c[0..n). */
static inline size_t top_of(const uint32_t *c, size_t n)
{
    size_t t = 0;
    for (size_t i = 1; i < n; i++)
        if ((c[i] & 7) > (c[t] & 7)) t = i;
    return t;
}

/* Encode one group of len <= 32 values. */
static void m2_encode_group(int es, const float *x, size_t len, uint32_t *codes, uint8_t *meta)
{
    uint32_t ab = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        ab = a > ab ? a : ab;
    }
    meta[1] = 0;
    if (ab >= 0x7f800000u) {
        meta[0] = 0xFF;
        memset(codes, 0, len * sizeof *codes);
        return;
    }
    float am = u2f(ab);
    if (am < 1e-8f) am = 1e-8f;
    int e0 = (int)(f2u(am) >> 23) - 127 - 2;                 /* am is normal */
    size_t nsub = (len + M2_SUB - 1) / M2_SUB;
    if (!es) {
        float inv = pow2f(-e0);
        for (size_t i = 0; i < len; i++) codes[i] = e2m1(fabsf(x[i]) * inv) | sign4(x[i]);
        for (size_t j = 0; j < nsub; j++) {
            size_t s0 = j * M2_SUB, n = len - s0 < M2_SUB ? len - s0 : M2_SUB;
            size_t t = s0 + top_of(codes + s0, n);
            int k = (int)(codes[t] & 7);
            int j6 = (int)qs_mf_encode(&qs_mf_e2m3, fabsf(x[t]) * inv, QS_RND_RNE, 0, 1);
            if (j6 < 4 * k - 1) j6 = 4 * k - 1;
            if (j6 > 4 * k + 2) j6 = 4 * k + 2;
            meta[1] |= (uint8_t)((j6 - 4 * k + 1) << (2 * j));
        }
        meta[0] = (uint8_t)(e0 + 127);
        return;
    }
    int best_bias = 0;
    double best_cost = INFINITY;
    unsigned best_m[M2_GROUP / M2_SUB] = {0};
    for (int bias = -1; bias <= 1; bias++) {
        float base = pow2f(e0 + bias);
        unsigned mj[M2_GROUP / M2_SUB];
        double cost = 0;
        for (size_t j = 0; j < nsub; j++) {
            size_t s0 = j * M2_SUB, n = len - s0 < M2_SUB ? len - s0 : M2_SUB;
            double best = INFINITY;
            mj[j] = 0;
            for (unsigned m = 0; m < 4; m++) {
                float cs = base * (1.0f + 0.25f * (float)m);
                double sse = 0;
                for (size_t i = s0; i < s0 + n; i++) {
                    float a = fabsf(x[i]);
                    float q = qs_mf_decode(&qs_mf_e2m1, e2m1(a / cs)) * cs;
                    double d = (double)q - (double)a;
                    sse += d * d;
                }
                if (sse < best) { best = sse; mj[j] = m; }
            }
            cost += best / (double)n;
        }
        if (cost < best_cost) {
            best_cost = cost;
            best_bias = bias;
            memcpy(best_m, mj, sizeof mj);
        }
    }
    float base = pow2f(e0 + best_bias);
    for (size_t j = 0; j < nsub; j++) {
        size_t s0 = j * M2_SUB, n = len - s0 < M2_SUB ? len - s0 : M2_SUB;
        float cs = base * (1.0f + 0.25f * (float)best_m[j]);
        for (size_t i = s0; i < s0 + n; i++) codes[i] = e2m1(fabsf(x[i]) / cs) | sign4(x[i]);
        meta[1] |= (uint8_t)(best_m[j] << (2 * j));
    }
    meta[0] = (uint8_t)(e0 + best_bias + 127);
}

/* Decode one group; -1 on a malformed record (em: d = -1 on a zero top element). */
static int m2_decode_group(int es, const uint32_t *codes, const uint8_t *meta, size_t len, float *y)
{
    if (meta[0] == 0xFF) {
        for (size_t i = 0; i < len; i++) y[i] = NAN;
        return 0;
    }
    float X = meta[0] == 0 ? u2f(0x00400000u) : u2f((uint32_t)meta[0] << 23);
    size_t nsub = (len + M2_SUB - 1) / M2_SUB;
    for (size_t j = 0; j < nsub; j++) {
        size_t s0 = j * M2_SUB, n = len - s0 < M2_SUB ? len - s0 : M2_SUB;
        unsigned fld = (meta[1] >> (2 * j)) & 3u;
        if (es) {
            float cs = X * (1.0f + 0.25f * (float)fld);
            for (size_t i = s0; i < s0 + n; i++) y[i] = qs_mf_decode(&qs_mf_e2m1, codes[i]) * cs;
        } else {
            for (size_t i = s0; i < s0 + n; i++) y[i] = qs_mf_decode(&qs_mf_e2m1, codes[i]) * X;
            size_t t = s0 + top_of(codes + s0, n);
            int j6 = 4 * (int)(codes[t] & 7) + (int)fld - 1;
            if (j6 < 0) return -1;
            y[t] = qs_mf_decode(&qs_mf_e2m3, (uint32_t)j6 | (codes[t] & 8u) << 2) * X;
        }
    }
    return 0;
}

static int m2_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                     uint8_t *meta, float *tensor_scale, qs_err *e)
{
    int es;
    if (m2_opts(f, o, &es, e)) return -1;
    for (size_t g = 0, i0 = 0; i0 < n; g++, i0 += M2_GROUP)
        m2_encode_group(es, x + i0, n - i0 < M2_GROUP ? n - i0 : M2_GROUP, codes + i0, meta + 2 * g);
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int m2_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta,
                     float tensor_scale, size_t n, float *y, qs_err *e)
{
    int es;
    if (m2_opts(f, o, &es, e)) return -1;
    for (size_t i = 0; i < n; i++)
        if (codes[i] > 15)
            return qs_fail(e, "format %s: code 0x%x of element %zu has more than 4 bits", f->name,
                           (unsigned)codes[i], i);
    for (size_t g = 0, i0 = 0; i0 < n; g++, i0 += M2_GROUP)
        if (m2_decode_group(es, codes + i0, meta + 2 * g, n - i0 < M2_GROUP ? n - i0 : M2_GROUP, y + i0))
            return qs_fail(e, "format %s: group %zu: field d = -1 on a zero element", f->name, g);
    return 0;
}

static int m2_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    int es;
    if (m2_opts(f, o, &es, e)) return -1;
    uint32_t codes[M2_GROUP];
    uint8_t meta[2];
    for (size_t i0 = 0; i0 < n; i0 += M2_GROUP) {
        size_t len = n - i0 < M2_GROUP ? n - i0 : M2_GROUP;
        m2_encode_group(es, x + i0, len, codes, meta);
        (void)m2_decode_group(es, codes, meta, len, y + i0);  /* records made here are well formed */
    }
    return 0;
}

static double m2_scale_value(unsigned c) { return qs_e8m0_decode((uint8_t)c); }

static void m2_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                         char *out, size_t cap)
{
    (void)f; (void)ts; (void)step;
    char v[32];
    num(qs_e8m0_decode(m[0]), v, sizeof v);
    snprintf(out, cap, "E8M0 0x%02x = %s; sub-group fields %d %d %d %d (%s)", m[0], v, m[1] & 3, (m[1] >> 2) & 3,
             (m[1] >> 4) & 3, (m[1] >> 6) & 3, o->m2x == QS_M2X_ES ? "ratio m: x(1+m/4)" : "top element d+1");
}

/* The step of every element is the group's power of two (em: the top element's extra E2M3 bits do
** not change it), times the sub-group's ratio under es. */
static void m2_elem_steps(const qs_format *f, const qs_qopts *o, const uint8_t *m, size_t n, float *step)
{
    (void)f;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *mm = m + (k / M2_GROUP) * 2;
        float X = qs_e8m0_decode(mm[0]);
        step[k] = o->m2x == QS_M2X_ES ? X * (1 + ((mm[1] >> (2 * ((k % M2_GROUP) / M2_SUB))) & 3) / 4.0f) : X;
    }
}

/* The analysis engine's segment scales: each sub-group's step (the power of two, times its ratio under
** es) and 6 times it. */
static void m2_seg_scales(const qs_format *f, const qs_qopts *o, const uint8_t *meta, size_t n, float *S, float *Q)
{
    (void)f;
    const int es = o->m2x == QS_M2X_ES;
    for (size_t g = 0; g < n; g++) {
        const uint8_t *m = meta + 2 * g;
        float X = m[0] == 0 ? u2f(0x00400000u) : u2f((uint32_t)m[0] << 23);
        for (size_t k = 0; k < M2_GROUP / M2_SUB; k++) {
            unsigned fld = (m[1] >> (2 * k)) & 3u;
            float cs = es ? X * (1.0f + 0.25f * (float)fld) : X;
            S[g * (M2_GROUP / M2_SUB) + k] = m[0] == 0xFF ? NAN : cs;
            Q[g * (M2_GROUP / M2_SUB) + k] = 6.0f * cs;
        }
    }
}

const qs_format qs_formats_m2xfp[] = {
    {
        .name = "m2xfp4",
        .family = QS_FAM_M2XFP,
        .elem = QS_ELEM_FLOAT,
        .mf = &qs_mf_e2m1,
        .scale_kind = QS_SK_M2XFP,
        .fopts = QS_FOPT_M2X_MODE,
        .scale_value = m2_scale_value,
        .meta_text = m2_meta_text,
        .elem_steps = m2_elem_steps,
        .summary = "M2XFP: 32 x FP4 E2M1 + E8M0 exponent + 4 x 2-bit sub-group fields (em|es), 4.5 bits",
        .elem_bits = 4,
        QS_MF_ROW(QS_MF_LAYOUT_e2m1),
        .block = M2_GROUP,
        .meta_bytes = 2,
        .meta_bits = 16,
        .has_inf = 0,
        .has_nan = 1,
        .max_finite = 10.5 * 0x1p127,
        .min_normal = 0x1p-127,
        .min_subnormal = 0x1p-130,
        .default_round = QS_RND_RNE,
        .round_modes = 1u << QS_RND_RNE,
        .encode = m2_encode,
        .decode = m2_decode,
        .fakeq = m2_fakeq,
        .grid = QS_MF_GRID(QS_MF_LAYOUT_e2m1),
        .scale_seg = M2_SUB,
        .seg_scales = m2_seg_scales,
    },
};
const size_t qs_formats_m2xfp_n = sizeof qs_formats_m2xfp / sizeof qs_formats_m2xfp[0];
