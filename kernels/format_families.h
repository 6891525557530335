/*
** The descriptor arrays of each format family, declared from QS_FAMILY_LIST (format.h).
** kernels/format.c concatenates them into the one registry table; each family's file defines its
** array and its length:
**
**   format_float.c  fp32 bf16 fp16 fp8_e4m3 fp8_e5m2 fp6_e3m2 fp6_e2m3 fp4_e2m1 e8m0 (plain casts)
**   format_int.c    int8 int4 (symmetric absmax, FP32 scale per block)
**   format_mx.c     mxfp8_e4m3 mxfp8_e5m2 mxfp6_e3m2 mxfp6_e2m3 mxfp4 mxint8
**   format_nvfp4.c  nvfp4
**   format_m2xfp.c  m2xfp4
**   format_hifloat.c hif8 hif4
**   format_ggml.c   q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q8_1 q8_k (llama.cpp's
**                   types; codecs in format_ggml_legacy.c, format_ggml_k.c, format_ggml_iq.c)
*/
#ifndef QS_FORMAT_FAMILIES_H
#define QS_FORMAT_FAMILIES_H

#include <stddef.h>

#include "format.h"

#define QS_FAM_DECL_(U, name) extern const qs_format qs_formats_##name[]; extern const size_t qs_formats_##name##_n;
QS_FAMILY_LIST(QS_FAM_DECL_)
#undef QS_FAM_DECL_

#endif
