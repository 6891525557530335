/*
** Storage dtypes: descriptor table and decoders to float32 (see dtype.h).
**
** Block layouts follow ggml's ggml-common.h / ggml-quants.c (dequantize_row_*), as described in
** spec/data.md §1.4.  Decoders are exact: every code maps to the float32 value it denotes.
*/
#include "dtype.h"

#include "format_ggml.h"
#include "minifloat.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

float qs_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));  /* Inf / NaN (payload kept) */
    if (exp == 0) {
        if (man == 0) return bits_to_f32(sign);
        float v = ldexpf((float)man, -24);       /* subnormal: man * 2^-24, exact in f32 */
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

float qs_bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

/* The 8-bit float types decode through the one minifloat decoder (minifloat.h); a file's NaN reads as
** the canonical quiet NaN. */
static inline float mf_value(const qs_minifloat *mf, unsigned v)
{
    float x = qs_mf_decode(mf, v);
    return isnan(x) ? NAN : x;
}

float qs_e4m3_to_f32(uint8_t v) { return mf_value(&qs_mf_e4m3, v); }
float qs_e5m2_to_f32(uint8_t v) { return mf_value(&qs_mf_e5m2, v); }
float qs_e8m0_to_f32(uint8_t v) { return qs_e8m0_decode(v); }

/* ggml reads the NaN code 0x7F as 0 and ignores the sign bit, so 0xFF is 480: E4M3 with every code finite. */
static const qs_minifloat kUE4M3 = {"ue4m3", 4, 3, 7, QS_MF_FINITE};
float qs_ue4m3_to_f32(uint8_t v) { return v == 0x7f ? 0.0f : qs_mf_decode(&kUE4M3, v & 0x7f); }

/* E2M1 values, doubled so they fit int8 (ggml's kvalues_mxfp4 / kvalues_fp4). */
static const int8_t kE2M1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ---- plain element decoders ---- */
static void dec_f32(const uint8_t *s, float *d, size_t n) { memcpy(d, s, n * 4); }
static void dec_f64(const uint8_t *s, float *d, size_t n)
{
    for (size_t i = 0; i < n; i++) { double x; memcpy(&x, s + 8 * i, 8); d[i] = (float)x; }
}
static void dec_f16(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = qs_f16_to_f32(rd16(s + 2 * i)); }
static void dec_bf16(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = qs_bf16_to_f32(rd16(s + 2 * i)); }
/* 8-bit codes decode through 256-entry tables, filled once from the scalar decoders above. */
static float kLutE4M3[256], kLutE5M2[256], kLutE8M0[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;
static void lut_init(void)
{
    for (int v = 0; v < 256; v++) {
        kLutE4M3[v] = qs_e4m3_to_f32((uint8_t)v);
        kLutE5M2[v] = qs_e5m2_to_f32((uint8_t)v);
        kLutE8M0[v] = qs_e8m0_to_f32((uint8_t)v);
    }
}
static void dec_lut(const float *lut, const uint8_t *s, float *d, size_t n)
{
    pthread_once(&lut_once, lut_init);
    for (size_t i = 0; i < n; i++) d[i] = lut[s[i]];
}
static void dec_e4m3(const uint8_t *s, float *d, size_t n) { dec_lut(kLutE4M3, s, d, n); }
static void dec_e5m2(const uint8_t *s, float *d, size_t n) { dec_lut(kLutE5M2, s, d, n); }
static void dec_e8m0(const uint8_t *s, float *d, size_t n) { dec_lut(kLutE8M0, s, d, n); }
static void dec_i8(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = (float)(int8_t)s[i]; }
static void dec_u8(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = (float)s[i]; }
static void dec_bool(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = s[i] ? 1.0f : 0.0f; }
static void dec_i16(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = (float)(int16_t)rd16(s + 2 * i); }
static void dec_u16(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) d[i] = (float)rd16(s + 2 * i); }
static void dec_i32(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) { int32_t x; memcpy(&x, s + 4 * i, 4); d[i] = (float)x; } }
static void dec_u32(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) { uint32_t x; memcpy(&x, s + 4 * i, 4); d[i] = (float)x; } }
static void dec_i64(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) { int64_t x; memcpy(&x, s + 8 * i, 8); d[i] = (float)x; } }
static void dec_u64(const uint8_t *s, float *d, size_t n) { for (size_t i = 0; i < n; i++) { uint64_t x; memcpy(&x, s + 8 * i, 8); d[i] = (float)x; } }
/* OCP E2M1 code; unlike ggml's int8 table, code 8 is -0. */
static inline float e2m1(unsigned q) { float v = 0.5f * kE2M1x2[q & 7]; return q & 8 ? -v : v; }
static void dec_f4(const uint8_t *s, float *d, size_t n)  /* n blocks of 2 elements (one byte) */
{
    for (size_t i = 0; i < n; i++) {
        d[2 * i] = e2m1(s[i] & 15);
        d[2 * i + 1] = e2m1(s[i] >> 4);
    }
}

/* ---- ggml block decoders (dequantize_row_* in ggml-quants.c) ---- */
static void dec_q8_0(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 34, y += 32) {
        float d = qs_f16_to_f32(rd16(s));
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)s[2 + j] * d;
    }
}
static void dec_q4_0(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 18, y += 32) {
        float d = qs_f16_to_f32(rd16(s));
        const uint8_t *qs = s + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 15) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}
static void dec_q4_1(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 20, y += 32) {
        float d = qs_f16_to_f32(rd16(s)), m = qs_f16_to_f32(rd16(s + 2));
        const uint8_t *qs = s + 4;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 15) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}
static void dec_q5(const uint8_t *s, float *y, size_t nb, int has_min)
{
    size_t bsz = has_min ? 24 : 22;
    for (size_t b = 0; b < nb; b++, s += bsz, y += 32) {
        float d = qs_f16_to_f32(rd16(s)), m = has_min ? qs_f16_to_f32(rd16(s + 2)) : 0.0f;
        const uint8_t *p = s + (has_min ? 4 : 2);
        uint32_t qh = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        const uint8_t *qs = p + 4;
        for (int j = 0; j < 16; j++) {
            int x0 = (qs[j] & 15) | (int)(((qh >> j) << 4) & 0x10);
            int x1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            if (has_min) { y[j] = (float)x0 * d + m; y[j + 16] = (float)x1 * d + m; }
            else { y[j] = (float)(x0 - 16) * d; y[j + 16] = (float)(x1 - 16) * d; }
        }
    }
}
static void dec_q5_0(const uint8_t *s, float *y, size_t nb) { dec_q5(s, y, nb, 0); }
static void dec_q5_1(const uint8_t *s, float *y, size_t nb) { dec_q5(s, y, nb, 1); }

static void scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}
static void dec_q4_k(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 144) {
        float d = qs_f16_to_f32(rd16(s)), dmin = qs_f16_to_f32(rd16(s + 2));
        const uint8_t *sc = s + 4, *q = s + 16;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            int s1, m1, s2, m2;
            scale_min_k4(is, sc, &s1, &m1);
            scale_min_k4(is + 1, sc, &s2, &m2);
            float d1 = d * (float)s1, mm1 = dmin * (float)m1, d2 = d * (float)s2, mm2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 15) - mm1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - mm2;
        }
    }
}
static void dec_q6_k(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 210) {
        const uint8_t *ql = s, *qh = s + 128;
        const int8_t *sc = (const int8_t *)(s + 192);
        float d = qs_f16_to_f32(rd16(s + 208));
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}
static void dec_ggml_mxfp4(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 17, y += 32) {
        float h = ldexpf(1.0f, (int)s[0] - 128);     /* ½·2^(e-127): the table holds doubled values */
        for (int j = 0; j < 16; j++) {
            y[j] = (float)kE2M1x2[s[1 + j] & 15] * h;
            y[j + 16] = (float)kE2M1x2[s[1 + j] >> 4] * h;
        }
    }
}
static void dec_ggml_nvfp4(const uint8_t *s, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, s += 36, y += 64) {
        for (int sb = 0; sb < 4; sb++) {
            float h = 0.5f * qs_ue4m3_to_f32(s[sb]);
            const uint8_t *qs = s + 4 + 8 * sb;
            for (int j = 0; j < 8; j++) {
                y[16 * sb + j] = (float)kE2M1x2[qs[j] & 15] * h;
                y[16 * sb + j + 8] = (float)kE2M1x2[qs[j] >> 4] * h;
            }
        }
    }
}

/* The other ggml block types: the registry's codecs (kernels/format_ggml_*.c, checked block for block
** against ggml's dequantize_row_*), one block at a time, so there is one decoder per type. */
static void dec_codec(const qs_ggml_codec *c, const uint8_t *s, float *y, size_t nb)
{
    uint8_t L[256], m[64];
    for (size_t b = 0; b < nb; b++, s += c->bytes, y += c->blk) {
        c->unpack(s, L, m);
        c->dec(L, m, y);
    }
}
#define DEC_CODEC(name) \
    static void dec_##name(const uint8_t *s, float *y, size_t nb) { dec_codec(&qs_ggml_##name, s, y, nb); }
DEC_CODEC(q2_k)
DEC_CODEC(q3_k)
DEC_CODEC(q5_k)
DEC_CODEC(q8_k)
DEC_CODEC(iq4_nl)
DEC_CODEC(iq4_xs)

static const qs_dtype_traits kTraits[QS_DT_COUNT] = {
    [QS_DT_INVALID]    = {"invalid", 0, 0, 0, NULL},
    [QS_DT_F32]        = {"f32", 1, 4, 1, dec_f32},
    [QS_DT_F64]        = {"f64", 1, 8, 1, dec_f64},
    [QS_DT_F16]        = {"f16", 1, 2, 1, dec_f16},
    [QS_DT_BF16]       = {"bf16", 1, 2, 1, dec_bf16},
    [QS_DT_F8_E4M3]    = {"f8_e4m3", 1, 1, 1, dec_e4m3},
    [QS_DT_F8_E5M2]    = {"f8_e5m2", 1, 1, 1, dec_e5m2},
    [QS_DT_F8_E8M0]    = {"f8_e8m0", 1, 1, 1, dec_e8m0},
    [QS_DT_I8]         = {"i8", 1, 1, 0, dec_i8},
    [QS_DT_U8]         = {"u8", 1, 1, 0, dec_u8},
    [QS_DT_I16]        = {"i16", 1, 2, 0, dec_i16},
    [QS_DT_U16]        = {"u16", 1, 2, 0, dec_u16},
    [QS_DT_I32]        = {"i32", 1, 4, 0, dec_i32},
    [QS_DT_U32]        = {"u32", 1, 4, 0, dec_u32},
    [QS_DT_I64]        = {"i64", 1, 8, 0, dec_i64},
    [QS_DT_U64]        = {"u64", 1, 8, 0, dec_u64},
    [QS_DT_BOOL]       = {"bool", 1, 1, 0, dec_bool},
    [QS_DT_Q8_0]       = {"q8_0", 32, 34, 1, dec_q8_0},
    [QS_DT_Q4_0]       = {"q4_0", 32, 18, 1, dec_q4_0},
    [QS_DT_Q4_1]       = {"q4_1", 32, 20, 1, dec_q4_1},
    [QS_DT_Q5_0]       = {"q5_0", 32, 22, 1, dec_q5_0},
    [QS_DT_Q5_1]       = {"q5_1", 32, 24, 1, dec_q5_1},
    [QS_DT_Q4_K]       = {"q4_k", 256, 144, 1, dec_q4_k},
    [QS_DT_Q6_K]       = {"q6_k", 256, 210, 1, dec_q6_k},
    [QS_DT_GGML_MXFP4] = {"ggml_mxfp4", 32, 17, 1, dec_ggml_mxfp4},
    [QS_DT_GGML_NVFP4] = {"ggml_nvfp4", 64, 36, 1, dec_ggml_nvfp4},
    [QS_DT_F4_E2M1]    = {"f4_e2m1", 2, 1, 1, dec_f4},
    [QS_DT_Q2_K]       = {"q2_k", 256, 84, 1, dec_q2_k},
    [QS_DT_Q3_K]       = {"q3_k", 256, 110, 1, dec_q3_k},
    [QS_DT_Q5_K]       = {"q5_k", 256, 176, 1, dec_q5_k},
    [QS_DT_Q8_K]       = {"q8_k", 256, 292, 1, dec_q8_k},
    [QS_DT_IQ4_NL]     = {"iq4_nl", 32, 18, 1, dec_iq4_nl},
    [QS_DT_IQ4_XS]     = {"iq4_xs", 256, 136, 1, dec_iq4_xs},
};

const qs_dtype_traits *qs_dtype_get(qs_dtype t)
{
    if ((int)t <= QS_DT_INVALID || t >= QS_DT_COUNT) return NULL;
    return &kTraits[t];
}

qs_dtype qs_dtype_from_name(const char *name)
{
    if (!name) return QS_DT_INVALID;
    for (int t = 1; t < QS_DT_COUNT; t++)
        if (strcmp(kTraits[t].name, name) == 0) return (qs_dtype)t;
    return QS_DT_INVALID;
}

int qs_dtype_nbytes(qs_dtype t, uint64_t nelem, uint64_t *out)
{
    const qs_dtype_traits *tr = qs_dtype_get(t);
    if (!tr || nelem % tr->block_elems) return -1;
    uint64_t nb = nelem / tr->block_elems;
    if (nb > UINT64_MAX / tr->block_bytes) return -1;
    *out = nb * tr->block_bytes;
    return 0;
}
