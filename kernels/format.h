/*
** The number-format registry: one descriptor per format, in one table (kernels/format.c), shaped
** after ggml's type_traits but carrying what ggml lacks: rounding, saturation and scale rules.
**
** Every format works on a contiguous 1-D run of float32 values.  Block formats cut the run into
** consecutive blocks of `block` values; a final partial block is its own block (HiF4 pads it with
** zeros).  Choosing the block axis of a 2-D tensor, or per-row/column granularity, is done by the
** caller (kernels/format_apply.c) by gathering the values into runs.
**
** Three operations, all of which must agree bit for bit:
**   encode: values -> per-element codes (one uint32 each, unpacked) + per-block metadata records
**           (meta_bytes bytes per block, layout documented per family) + a per-call tensor scale;
**   decode: codes + metadata + tensor scale -> values;
**   fakeq:  decode(encode(x)) computed directly (the fast path; may be vectorised).
** Packing codes into bytes is a separate, format-independent step (qs_pack_codes in format.c:
** LSB-first bit stream, so two FP4 codes per byte with element 2i in the low nibble).
*/
#ifndef QS_FORMAT_H
#define QS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "qs_err.h"

typedef enum qs_round {
    QS_RND_DEFAULT = 0,  /* the format's own default */
    QS_RND_RNE,          /* round to nearest, ties to even */
    QS_RND_TA,           /* round to nearest, ties away from zero */
    QS_RND_HR,           /* HiF8 hybrid rounding */
    QS_RND_SR,           /* stochastic, seeded and counter-based (reproducible) */
    QS_RND_RTZ,          /* toward zero */
    QS_RND_TZ,           /* round to nearest, ties toward zero (ggml CPU's lowest-index nearest search) */
    QS_RND_COUNT
} qs_round;

typedef enum qs_scale_rule {  /* power-of-two (E8M0) block scale of MX formats */
    QS_SCALE_FLOOR = 0,  /* OCP: 2^(floor(log2 amax) - emax_elem), exponent from the bits */
    QS_SCALE_CEIL,       /* torchao CEIL */
    QS_SCALE_EVEN,       /* torchao EVEN */
    QS_SCALE_RCEIL,      /* cuBLAS/TE/torchao RCEIL: 2^ceil(log2(fl32(amax * fl32(1/max_elem)))) */
    QS_SCALE_UOS,        /* MXAttention universal optimal scaling with clipping threshold uos_qmax */
    QS_SCALE_COUNT
} qs_scale_rule;

typedef enum qs_nvfp4_order { QS_NVFP4_TE = 0, QS_NVFP4_TORCHAO } qs_nvfp4_order;
typedef enum qs_m2x_mode { QS_M2X_EM = 0, QS_M2X_ES } qs_m2x_mode;

typedef struct qs_qopts {
    qs_round round;          /* element rounding; QS_RND_DEFAULT = the format's default */
    uint64_t seed;           /* QS_RND_SR: element i of a call uses the counter (seed, index0 + i) */
    uint64_t index0;
    int sat;                 /* plain element casts: saturate instead of NaN/Inf on overflow
                             ** (MX, NVFP4, HiF4 always saturate finite values) */
    qs_scale_rule scale_rule;
    double uos_qmax;         /* QS_SCALE_UOS threshold; 0 = the default (7.25 for FP4 elements) */
    int block;               /* block size; 0 = the format's default */
    qs_nvfp4_order nvfp4;
    qs_m2x_mode m2x;
    float tensor_scale;      /* NVFP4, and int8/int4 with one scale per run (no block size): the amax to
                             ** use (> 0), so a long run can come in pieces; 0 = the absmax of this call's values */
    /* Library variants (docs/formats.md, "Library variants"); 0 is always the default behaviour.
    ** Which formats take which is in qs_format.variants (qs_qopts_check rejects the others). */
    int floor_log2f;         /* MX, scale rule floor: exponent floorf(log2f(amax)) from libm (ggml CPU,
                             ** microxcaling's PyTorch path) instead of the float32 exponent bits */
    int zero_positive;       /* MX and plain casts: every zero result is +0 (ggml, microxcaling C++, TE) */
    int flush_subnormal_blocks; /* MX: a block whose amax is an FP32 subnormal becomes zeros (microxcaling
                             ** mx_flush_fp32_subnorms) */
    int nan_block_te;        /* MX: a block holding ±Inf (no NaN) gets scale 0xFE and saturates (TE's
                             ** float_to_e8m0); 0 = scale 0xFF, whole block NaN */
    int zero_block_scale;    /* MX: E8M0 code of an all-zero block plus one, QS_ZERO_BLOCK_SCALE(code) for
                             ** code 0x00..0xFE; 0 = the rule's default (0x00; 0x7F under uos) */
} qs_qopts;

#define QS_ZERO_BLOCK_SCALE(code) ((int)(code) + 1)

/* qs_format.variants: which library-variant options of qs_qopts a format implements. */
enum {
    QS_VAR_FLOOR_LOG2F = 1u << 0,
    QS_VAR_ZERO_POSITIVE = 1u << 1,
    QS_VAR_FLUSH_SUBNORMAL = 1u << 2,
    QS_VAR_NONFINITE_TE = 1u << 3,
    QS_VAR_ZERO_BLOCK_SCALE = 1u << 4,
};

struct qs_format;

typedef int (*qs_encode_fn)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n,
                            uint32_t *codes, uint8_t *meta, float *tensor_scale, qs_err *e);
typedef int (*qs_decode_fn2)(const struct qs_format *f, const qs_qopts *o, const uint32_t *codes,
                             const uint8_t *meta, float tensor_scale, size_t n, float *y, qs_err *e);
typedef int (*qs_fakeq_fn)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n,
                           float *y, qs_err *e);

typedef struct qs_format {
    const char *name;        /* CLI name: "mxfp4", "fp8_e4m3", ... */
    const char *family;      /* "float", "mx", "nvfp4", "hifloat", "m2xfp", "int" */
    const char *summary;     /* one line */
    int elem_bits;           /* bits of one element code */
    int ebits, mbits, bias;  /* element minifloat layout (0,0,0 when not a minifloat; e8m0: 8,0,127) */
    int block;               /* default block size; 1 for plain casts, 0 for per-tensor */
    int meta_bytes;          /* bytes of metadata per block (0 for plain casts) */
    double meta_bits;        /* bits of metadata per block actually needed (bits/elem accounting) */
    int has_inf, has_nan;    /* of the element (or the decoded value set) */
    /* Range of the decoded value set: for block formats the element grid times the extreme scales
    ** (so MX reaches 2^-127 times its smallest element and can exceed FLT_MAX on hand-made blocks;
    ** int8/int4 span 2^-149 .. FLT_MAX through their FP32 scale). */
    double max_finite;       /* largest finite decoded magnitude */
    double min_normal;       /* smallest normal magnitude (0 if the format has no normals) */
    double min_subnormal;    /* smallest positive magnitude */
    qs_round default_round;
    unsigned round_modes;    /* bitmask 1u << qs_round of supported modes */
    int has_scale_rule;      /* MX-style E8M0 block scale: scale_rule/uos apply */
    qs_encode_fn encode;
    qs_decode_fn2 decode;
    qs_fakeq_fn fakeq;
    /* Formats of <= 8 element bits with a fixed code table: value of code c (NaN for NaN codes);
    ** ncodes = 2^elem_bits.  NULL/0 otherwise. */
    float (*code_value)(unsigned c);
    unsigned ncodes;
    unsigned variants;       /* QS_VAR_* bits: library-variant options this format implements */
} qs_format;

/* Registry access. */
size_t qs_format_count(void);
const qs_format *qs_format_at(size_t i);
const qs_format *qs_format_find(const char *name);

/* Effective block size under the options (o->block or the default), and number of blocks for n. */
size_t qs_format_block(const qs_format *f, const qs_qopts *o);
size_t qs_format_nblocks(const qs_format *f, const qs_qopts *o, size_t n);

/* MX fakeq (the same values as f->fakeq) that also gives each block's E8M0 code, the decoded element
** 1.0 (S) and the decoded largest element (Q), as decode would: the analysis engine's block scales. */
int qs_mx_fakeq_scales(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *code,
                       float *S, float *Q, qs_err *e);
/* NVFP4, likewise (UE4M3 code, element multiplier, 6 x it) under the FP32 tensor scale. */
int qs_nvfp4_block_scales(const qs_format *f, const qs_qopts *o, float tensor_scale, const float *amax, size_t n,
                          uint8_t *code, float *S, float *Q, qs_err *e);
/* Bits per element including metadata at the effective block size. */
double qs_format_bits_per_elem(const qs_format *f, const qs_qopts *o);

/* Names of options, for the CLI and stored results. */
const char *qs_round_name(qs_round r);
int qs_round_parse(const char *s, qs_round *r);
const char *qs_scale_rule_name(qs_scale_rule r);
int qs_scale_rule_parse(const char *s, qs_scale_rule *r, double *qmax);   /* "uos=7.5" sets qmax */

/* Validate options against the format (unsupported rounding mode, block size, ...). */
int qs_qopts_check(const qs_format *f, const qs_qopts *o, qs_err *e);

/* Pack n codes of `bits` bits (1..32) LSB-first into out (ceil(n*bits/8) bytes), and back. */
void qs_pack_codes(const uint32_t *codes, size_t n, int bits, uint8_t *out);
void qs_unpack_codes(const uint8_t *in, size_t n, int bits, uint32_t *codes);

/* Counter-based uniform in [0,1) for stochastic rounding: a pure function of (seed, index). */
double qs_sr_uniform(uint64_t seed, uint64_t index);

#endif
