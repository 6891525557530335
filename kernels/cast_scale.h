/*
** The scaling default of an element cast (a format of block 1 without metadata: fp8_*, fp6_*,
** fp4_e2m1, fp16, hif8, ...) when it stands for a low-precision tensor in a model: one FP32 scale per
** run (a token's channels, a weight's output row), absmax -> the format's *scale target*, the usual
** FP8 recipe.  The target is the largest magnitude that still has the format's full mantissa:
**   - uniform-precision minifloats (fp8_e4m3, fp8_e5m2, fp6_*, fp4_e2m1, fp16): max_finite;
**   - hif8 (tapered): 15 = 1.875 * 2^3, the top of its 3-mantissa-bit binades (E in [-3, 3]); above,
**     the mantissa shrinks to 2, 1 and 0 bits, and 2^15 (max_finite) has none, so scaling absmax there
**     rounds the largest values of every row to a power of two;
**   - bf16 and formats with an FP32-like range: never scaled (target 0).
** Block formats carry their own scales and are not element casts.  docs/formats.md lists the table;
** `llm` (weights, activations, KV cache) and `attn --kv` use it; `analyze` shows a tensor's raw cast.
*/
#ifndef QS_CAST_SCALE_H
#define QS_CAST_SCALE_H

#include <stddef.h>

#include "format.h"

/* absmax target of f's per-run scale, or 0 when f is not scaled (not an element cast, or bf16-like). */
double qs_cast_scale_target(const qs_format *f);

/* y = Q(x * s) / s with s = target / absmax(finite |x|) (x unchanged when all zero or f is not
** scaled); y may equal x. */
int qs_cast_scaled(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e);

#endif
