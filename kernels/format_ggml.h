/*
** llama.cpp's (ggml's) quantization types as registry formats: the per-block codecs the family's
** registry rows run (kernels/format_ggml.c), shared by the legacy types (format_ggml_legacy.c), the
** K-quants (format_ggml_k.c) and the non-linear IQ4 types (format_ggml_iq.c).
**
** A codec turns one block of `blk` float32 values into per-element codes (one byte each, unpacked:
** the integer index ggml stores, 0..2^bits-1, or an int8 in two's complement for q8_*) and the block's
** header (`meta` bytes: ggml's fields other than the packed quants, in ggml's byte order), and back.
** pack/unpack convert codes + header to and from ggml's block bytes (block_q4_K etc. of ggml-common.h),
** so a block's bytes are exactly what ggml writes.  The encoders follow ggml's reference quantizers
** (quantize_row_*_ref, quantize_iq4_nl / quantize_iq4_xs without an importance matrix, ggml-quants.c)
** operation for operation in float32, and the decoders ggml's dequantize_row_*; checked block for block
** against vectors from ggml itself (tests/unit/test_format_ggml.c, tests/verify/ggml_ref_gen.sh).
*/
#ifndef QS_FORMAT_GGML_H
#define QS_FORMAT_GGML_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "qs_err.h"

typedef struct qs_ggml_codec {
    const char *name;    /* the registry name, "q4_k" */
    int blk;             /* values per block: 32 or 256 */
    int bytes;           /* bytes of ggml's block */
    int meta;            /* header bytes (the registry row's meta_bytes) */
    int seg;             /* values sharing one element step (sub-block) */
    void (*enc)(const float *x, uint8_t *L, uint8_t *m);
    void (*dec)(const uint8_t *L, const uint8_t *m, float *y);
    void (*pack)(const uint8_t *L, const uint8_t *m, uint8_t *out);
    void (*unpack)(const uint8_t *in, uint8_t *L, uint8_t *m);
    /* per sub-block: element step S and the largest decoded magnitude Q (the analysis' scales) */
    void (*steps)(const uint8_t *m, float *S, float *Q);
    void (*text)(const uint8_t *m, char *out, size_t cap);   /* one line: the header's fields */
    /* With an importance matrix (ggml's quantize_*_impl with quant_weights): qw the block's importances,
    ** sigma2 the mean square of the whole row (the legacy types' weights use it); NULL: the type takes
    ** none (q8_*: ggml ignores it). */
    void (*encw)(const float *x, const float *qw, float sigma2, uint8_t *L, uint8_t *m);
} qs_ggml_codec;

/* The codec of a registry row of the ggml family, or NULL; qs_ggml_codec_opt: the one its options
** choose (q8_0 and q8_1 under QS_RND_RNE: ggml-cpu's x86 arithmetic). */
const qs_ggml_codec *qs_ggml_codec_of(const qs_format *f);
const qs_ggml_codec *qs_ggml_codec_opt(const qs_format *f, const qs_qopts *o);
const qs_ggml_codec *qs_ggml_codec_find(const char *name);

/* n values (a multiple of the block) to ggml's block bytes (n / blk * bytes), and ggml's blocks back
** to values (ggml's dequantize_row_*).  0, or -1 with e set. */
int qs_ggml_quantize(const qs_ggml_codec *c, const float *x, size_t n, uint8_t *out, qs_err *e);
/* nrows rows of n_per_row values (a multiple of the block) with the importances qw[n_per_row] of the
** row's columns (an importance matrix's entry for this weight): ggml's quantize_<type>(src, dst, nrows,
** n_per_row, qw).  Types without an importance variant (q8_0, q8_1, q8_k) quantize as without. */
int qs_ggml_quantize_imatrix(const qs_ggml_codec *c, const float *x, size_t nrows, size_t n_per_row, const float *qw,
                             uint8_t *out, qs_err *e);
int qs_ggml_dequantize(const qs_ggml_codec *c, const uint8_t *in, size_t n, float *y, qs_err *e);

/* The codecs of each file. */
extern const qs_ggml_codec qs_ggml_q4_0, qs_ggml_q4_1, qs_ggml_q5_0, qs_ggml_q5_1, qs_ggml_q8_0, qs_ggml_q8_1;
extern const qs_ggml_codec qs_ggml_q2_k, qs_ggml_q3_k, qs_ggml_q4_k, qs_ggml_q5_k, qs_ggml_q6_k, qs_ggml_q8_k;
extern const qs_ggml_codec qs_ggml_iq4_nl, qs_ggml_iq4_xs;
/* q8_0 / q8_1 as ggml-cpu's x86 SIMD quantize_row_q8_0 / q8_1 compute them (the formats' --round rne) */
extern const qs_ggml_codec qs_ggml_q8_0_cpu, qs_ggml_q8_1_cpu;

/* ---- ggml's scalar arithmetic, reproduced ------------------------------------------------------ */

static inline uint32_t qs_gg_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float qs_gg_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* GGML_FP32_TO_FP16: round to nearest even, overflow to Inf, NaN to 0x7E00 (sign kept). */
static inline uint16_t qs_gg_f16(float f)
{
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t w = qs_gg_bits(f), shl1 = w + w, sign = w & 0x80000000u, bias = shl1 & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = qs_gg_float((bias >> 1) + 0x07800000u) + base;
    uint32_t bits = qs_gg_bits(base);
    uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    return (uint16_t)((sign >> 16) | (shl1 > 0xFF000000u ? 0x7E00u : nonsign));
}

/* GGML_FP16_TO_FP32: exact. */
static inline float qs_gg_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return qs_gg_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return qs_gg_float(sign | ((exp + 112) << 23) | (man << 13));
}

/* nearest_int: adds 1.5 * 2^23 and reads the mantissa bits (round half to even for |x| < 2^22; the
** same bits for any input, as ggml's with its assert compiled out). */
static inline int qs_gg_nearest(float f)
{
    uint32_t i = qs_gg_bits(f + 12582912.f);
    return (int)(i & 0x007fffffu) - 0x00400000;
}

/* A float32 converted to an integer type by x86-64's truncating conversion (cvttss2si): in range it
** truncates toward zero; NaN and out-of-range values give INT32_MIN, whose low byte is 0.  ggml's
** (int8_t)/(uint8_t) casts of a float compile to this on ggml's x86-64 builds. */
static inline int32_t qs_gg_cvtt(float v)
{
    if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}
static inline int qs_gg_s8(int v) { v &= 255; return v >= 128 ? v - 256 : v; }   /* (int8_t) of an int */

static inline uint16_t qs_gg_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void qs_gg_wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* The sub-block fits the types share (format_ggml_k.c): make_qkx2_quants (also make_qkx3_quants when
** given weights: the same arithmetic) and make_qx_quants with rmse_type 1 (weights qw, or x^2 without). */
float qs_gg_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn, float rmin, float rdelta,
                 int nstep, int mad);
float qs_gg_qxfit(int n, int nmax, const float *x, int8_t *L, const float *qw);

/* ggml's GROUP_MAX_EPS: sub-blocks with a smaller absmax are all-zero. */
#define QS_GG_EPS 1e-15f

#endif
