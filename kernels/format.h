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
    QS_RND_GGML,         /* llama.cpp's quantizers' own rules, per type (format_ggml.h) */
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

/* The families, in registry order, one line each: QS_FAM_<U>, the name outputs and stored results
** show, and the family file's array qs_formats_<name>[] (format_families.h).  FLOAT is the plain
** minifloat casts. */
#define QS_FAMILY_LIST(X) X(FLOAT, float) X(HIFLOAT, hifloat) X(MX, mx) X(NVFP4, nvfp4) X(M2XFP, m2xfp) X(INT, int) X(GGML, ggml)

typedef enum qs_family {
#define QS_FAM_ENUM_(U, name) QS_FAM_##U,
    QS_FAMILY_LIST(QS_FAM_ENUM_)
#undef QS_FAM_ENUM_
    QS_FAM_COUNT
} qs_family;

const char *qs_family_name(qs_family fam);   /* "float", "hifloat", "mx", "nvfp4", "m2xfp", "int", "ggml" */

/* What the block metadata holds. */
typedef enum qs_scale_kind {
    QS_SK_NONE = 0,   /* element cast: no metadata */
    QS_SK_E8M0,       /* one E8M0 power of two per block (MX) */
    QS_SK_UE4M3,      /* one UE4M3 per block, under the FP32 tensor scale (NVFP4) */
    QS_SK_HIF4,       /* E6M2 + an E1 flag per 8 and per 4 elements (HiF4's three levels) */
    QS_SK_M2XFP,      /* E8M0 + a 2-bit field per sub-group of 8 */
    QS_SK_FP32,       /* one FP32 scale per block or run (int) */
    QS_SK_GGML,       /* llama.cpp's block header: FP16 scale(s), sub-block scales/mins (format_ggml.h) */
} qs_scale_kind;

/* How an element code's bits split (what `formats explain` and the inspector show). */
typedef enum qs_elem_kind {
    QS_ELEM_FLOAT = 0,   /* sign, ebits exponent (bias), mbits mantissa */
    QS_ELEM_UFLOAT,      /* no sign: ebits exponent, mbits mantissa (E8M0) */
    QS_ELEM_INT,         /* two's complement integer times a step */
    QS_ELEM_SIGN_MAG,    /* sign, then an unsigned magnitude times a step (HiF4's S1P2) */
    QS_ELEM_TAPERED,     /* variable-width fields, labelled by the row's code_label (HiF8) */
    QS_ELEM_UINT,        /* unsigned integer: an offset integer or a table index, per format (ggml's q4_k) */
} qs_elem_kind;

/* One field of a code as the inspector colours it. */
typedef enum qs_field_kind { QS_FIELD_SIGN = 0, QS_FIELD_EXP, QS_FIELD_MANT, QS_FIELD_PLAIN } qs_field_kind;
typedef struct qs_code_field { char bits[40]; qs_field_kind kind; } qs_code_field;
#define QS_MAX_FIELDS 4

/* qs_format.fopts: family options of qs_qopts the format reads (recorded in its options). */
enum { QS_FOPT_NVFP4_ORDER = 1u << 0, QS_FOPT_M2X_MODE = 1u << 1 };

/* Number formatting of the caller (the inspector's), for metadata texts. */
typedef void (*qs_num_fmt)(double v, char *buf, size_t cap);

struct qs_format;
struct qs_minifloat;

/* An element grid in units of the element step: binades elo..ehi are spaced 2^(E - mb), and values
** outside them take the nearest one's spacing (a uniform grid of step 2^-mb: elo = ehi = 0). */
typedef struct qs_grid { int elo, ehi, mb; } qs_grid;
#define QS_GRID(elo, ehi, mb) {(elo), (ehi), (mb)}

typedef int (*qs_encode_fn)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n,
                            uint32_t *codes, uint8_t *meta, float *tensor_scale, qs_err *e);
typedef int (*qs_decode_fn2)(const struct qs_format *f, const qs_qopts *o, const uint32_t *codes,
                             const uint8_t *meta, float tensor_scale, size_t n, float *y, qs_err *e);
typedef int (*qs_fakeq_fn)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n,
                           float *y, qs_err *e);

typedef struct qs_format {
    const char *name;        /* CLI name: "mxfp4", "fp8_e4m3", ... */
    qs_family family;
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
    /* The questions callers ask of a format, answered here instead of by its name. */
    qs_elem_kind elem;       /* code layout of an element */
    const struct qs_minifloat *mf;   /* the element minifloat (minifloat.h) when it is one, else NULL */
    qs_scale_kind scale_kind;
    int has_tensor_scale;    /* an FP32 number per tensor (NVFP4's global amax): applying it takes a first
                             ** pass for the absmax, and it costs 32 bits per tensor */
    unsigned fopts;          /* QS_FOPT_* */
    /* Labelled fields of a code (QS_ELEM_TAPERED), as qs_hif8_fields; NULL for the other layouts. */
    int (*code_label)(uint32_t code, char *buf, size_t cap);
    int label_width;         /* widest split of code_label in columns (QS_ELEM_TAPERED) */
    const char *field_legend;   /* names of code_label's fields (QS_ELEM_TAPERED) */
    /* Value of a one-byte block-scale code as the analysis stores it (NaN for the NaN code); NULL:
    ** the metadata has no one-byte scale. */
    double (*scale_value)(unsigned code);
    /* One line describing one block's metadata m (meta_bytes bytes): tensor_scale is encode's, step
    ** the block's element step; numbers formatted by num. */
    void (*meta_text)(const struct qs_format *f, const qs_qopts *o, const uint8_t *m, float tensor_scale, double step,
                      qs_num_fmt num, char *out, size_t cap);
    /* Element step (the decoded "one" code) of each of the n elements of a block with metadata m, where
    ** it is not decode's value of qs_format_one_code (M2XFP's top elements); NULL otherwise. */
    void (*elem_steps)(const struct qs_format *f, const qs_qopts *o, const uint8_t *m, size_t n, float *step);
    /* Element casts: the absmax one FP32 scale per run maps onto (kernels/cast_scale.h), the largest
    ** magnitude with the full mantissa; 0: never scaled (FP32-like ranges, block formats). */
    double scale_target;
    /* ---- What the analysis engine asks of a block format (analysis/metrics_*.c; element casts leave
    ** these 0/NULL).  S is a segment's element step (decode of the element 1.0), Q its saturation level
    ** (decode of the largest element); a NaN block has S = Q = NaN. */
    qs_grid grid;            /* the element grid in units of S */
    int scale_seg;           /* values sharing one S: 0 = the block; else a divisor of the block */
    /* Block scales from each block's largest magnitude amax[i]: the one-byte scale code (formats with
    ** scale_value), S and Q, as encode and decode give them; tensor_scale as encode's.  amax is the
    ** largest finite |x| when amax_finite, else the largest magnitude bits (NaN or Inf in the block). */
    int (*block_scales)(const struct qs_format *f, const qs_qopts *o, float tensor_scale, const float *amax, size_t n,
                        uint8_t *code, float *S, float *Q, qs_err *e);
    int amax_finite;
    /* fakeq that also gives each block's code, S and Q (block_scales' answers, found on the way). */
    int (*fakeq_scales)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y,
                        uint8_t *code, float *S, float *Q, qs_err *e);
    /* Formats whose scales depend on every element: S and Q of each scale_seg segment of n blocks from
    ** their metadata (block / scale_seg segments per block, a final partial block included). */
    void (*seg_scales)(const struct qs_format *f, const qs_qopts *o, const uint8_t *meta, size_t n, float *S, float *Q);
    /* fakeq that also writes the metadata as encode does (NULL: the engine runs encode and decode). */
    int (*fakeq_meta)(const struct qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *meta,
                      qs_err *e);
} qs_format;

/* Registry access. */
size_t qs_format_count(void);
const qs_format *qs_format_at(size_t i);
const qs_format *qs_format_find(const char *name);

/* Effective block size under the options (o->block or the default), and number of blocks for n. */
size_t qs_format_block(const qs_format *f, const qs_qopts *o);
size_t qs_format_nblocks(const qs_format *f, const qs_qopts *o, size_t n);

/* Bits per element including metadata at the effective block size. */
double qs_format_bits_per_elem(const qs_format *f, const qs_qopts *o);

/* The inspector's view of codes and metadata (format_inspect.c), every answer from the row. */
int qs_format_code_fields(const qs_format *f, uint32_t code, qs_code_field out[QS_MAX_FIELDS]);  /* count */
int qs_format_code_fields_width(const qs_format *f);   /* columns of the widest split, spaces included */
const char *qs_format_field_legend(const qs_format *f);   /* "s e m", "s int", ... */
void qs_format_code_text(const qs_format *f, uint32_t code, char *out, size_t cap);   /* `formats explain` */
uint32_t qs_format_one_code(const qs_format *f);   /* the element code of the step ("1" in element units) */
double qs_format_elem_ulp(const qs_format *f, float x, double S);   /* ulp at x in a block of step S */
double qs_format_scale_value(const qs_format *f, unsigned code);    /* NaN when f has no one-byte scale */
void qs_format_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float tensor_scale, double step,
                         qs_num_fmt num, char *out, size_t cap);
/* Element steps of a block of n elements: decode of the one code with its metadata, or the row's
** elem_steps; NaN where decode fails. */
void qs_format_elem_steps(const qs_format *f, const qs_qopts *o, const uint8_t *m, float tensor_scale, size_t n,
                          float *step);
/* A plain minifloat element cast (the float family): casts that saturate with sat and take a row scale. */
static inline int qs_format_is_minifloat_cast(const qs_format *f) { return f->family == QS_FAM_FLOAT && f->block == 1; }

/* The default format list of report and the workbench (two halves, so help texts can wrap it). */
#define QS_DEFAULT_FORMATS_1 "bf16,fp8_e4m3,fp8_e5m2,hif8,mxfp8_e4m3,mxfp6_e2m3,mxfp4,nvfp4,hif4,m2xfp4,"
#define QS_DEFAULT_FORMATS_2 "int8:gran=row,int4:block=32"
#define QS_DEFAULT_FORMATS QS_DEFAULT_FORMATS_1 QS_DEFAULT_FORMATS_2

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

#endif
