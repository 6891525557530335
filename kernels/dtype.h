/*
** Storage dtypes: how tensor elements are laid out in the files qscope imports.
**
** This is the table of element encodings that *files* use (npy descr, safetensors dtype, ggml
** type).  It is not the quantization-format registry (that lives in format.h): a
** storage dtype only needs a name, a block geometry and a decoder to float32.
**
** Shaped after ggml's type_traits: one descriptor per enum value, designated initialisers,
** enum values are never reused (they are not stored on disk; the *name* is, so names are stable).
*/
#ifndef QS_DTYPE_H
#define QS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum qs_dtype {
    QS_DT_INVALID = 0,
    QS_DT_F32,
    QS_DT_F64,
    QS_DT_F16,
    QS_DT_BF16,
    QS_DT_F8_E4M3,   /* OCP E4M3FN: no Inf, NaN = S.1111.111, max 448 */
    QS_DT_F8_E5M2,   /* IEEE-like: Inf and NaN */
    QS_DT_F8_E8M0,   /* unsigned power of two 2^(e-127), 0xFF = NaN */
    QS_DT_I8,
    QS_DT_U8,
    QS_DT_I16,
    QS_DT_U16,
    QS_DT_I32,
    QS_DT_U32,
    QS_DT_I64,
    QS_DT_U64,
    QS_DT_BOOL,
    /* ggml block types (GGUF); values follow ggml-common.h */
    QS_DT_Q8_0,      /* 32 elems: f16 d, i8 qs[32] */
    QS_DT_Q4_0,      /* 32 elems: f16 d, u8 qs[16] */
    QS_DT_Q4_1,      /* 32 elems: f16 d, f16 m, u8 qs[16] */
    QS_DT_Q5_0,      /* 32 elems: f16 d, u8 qh[4], u8 qs[16] */
    QS_DT_Q5_1,      /* 32 elems: f16 d, f16 m, u8 qh[4], u8 qs[16] */
    QS_DT_Q4_K,      /* 256 elems, 144 bytes */
    QS_DT_Q6_K,      /* 256 elems, 210 bytes */
    QS_DT_GGML_MXFP4,/* 32 elems: u8 e8m0, u8 qs[16] (ggml nibble order j / j+16) */
    QS_DT_GGML_NVFP4,/* 64 elems: u8 ue4m3 d[4], u8 qs[32] (per sub-block j / j+8) */
    QS_DT_F4_E2M1,   /* safetensors F4: two per byte, element 2i in the low nibble */
    /* more ggml block types, decoded by the registry's codecs (format_ggml_*.c) */
    QS_DT_Q2_K,      /* 256 elems, 84 bytes */
    QS_DT_Q3_K,      /* 256 elems, 110 bytes */
    QS_DT_Q5_K,      /* 256 elems, 176 bytes */
    QS_DT_Q8_K,      /* 256 elems, 292 bytes: f32 d, i8 qs[256], i16 bsums[16] */
    QS_DT_IQ4_NL,    /* 32 elems, 18 bytes: f16 d, u8 qs[16] (non-linear 4-bit grid) */
    QS_DT_IQ4_XS,    /* 256 elems, 136 bytes */
    QS_DT_COUNT
} qs_dtype;

/* Decode `nblocks` whole blocks starting at `src` into `dst` (nblocks * block_elems floats). */
typedef void (*qs_decode_fn)(const uint8_t *src, float *dst, size_t nblocks);

typedef struct qs_dtype_traits {
    const char   *name;        /* canonical lower-case name stored in the database */
    unsigned      block_elems; /* elements per block (1 for plain element types) */
    unsigned      block_bytes; /* bytes per block */
    int           is_float;    /* decodes to non-integer values */
    qs_decode_fn  decode;
} qs_dtype_traits;

const qs_dtype_traits *qs_dtype_get(qs_dtype t);

/* Canonical name -> enum; QS_DT_INVALID if unknown. */
qs_dtype qs_dtype_from_name(const char *name);

/* Bytes for `nelem` elements; -1 (as int) and *out untouched if nelem is not a whole number of
** blocks or the product overflows. */
int qs_dtype_nbytes(qs_dtype t, uint64_t nelem, uint64_t *out);

/* Scalar element decoders, exposed for the importers and tests. */
float qs_f16_to_f32(uint16_t h);
float qs_bf16_to_f32(uint16_t h);
float qs_e4m3_to_f32(uint8_t v);
float qs_e5m2_to_f32(uint8_t v);
float qs_e8m0_to_f32(uint8_t v);
float qs_ue4m3_to_f32(uint8_t v);   /* NVFP4 block scale as ggml reads it: 0x7F is 0, else the sign bit is ignored */

#endif
