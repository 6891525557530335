/*
** The scaling default of an element cast (a format of block 1 without metadata: fp8_*, fp6_*,
** fp4_e2m1, fp16, hif8, ...) when it stands for a low-precision tensor in a model: one FP32 scale per
** run (a token's channels, a weight's output row), absmax -> the format's *scale target*, the usual
** FP8 recipe.  The target, the row's scale_target (set in the family's file), is the largest magnitude
** that still has the format's full mantissa:
**   - uniform-precision minifloats (fp8_e4m3, fp8_e5m2, fp6_*, fp4_e2m1, fp16): max_finite;
**   - hif8 (tapered): 15 = 1.875 * 2^3, the top of its 3-mantissa-bit binades (E in [-3, 3]); above,
**     the mantissa shrinks to 2, 1 and 0 bits, and 2^15 (max_finite) has none, so scaling absmax there
**     rounds the largest values of every row to a power of two;
**   - bf16 and formats with an FP32-like range: never scaled (target 0).
** Block formats carry their own scales and are not element casts.  docs/formats.md lists the table;
** `llm` (weights, activations, KV cache) and `attn --kv` use it; `analyze`, `report`, `quant` and the
** workbench apply it with the per-format option `scale=tensor|row|col` (qs_apply.cscale, default none:
** the raw cast).
*/
#ifndef QS_CAST_SCALE_H
#define QS_CAST_SCALE_H

#include <stddef.h>

#include "format.h"

/* Granularity of the one FP32 scale of a scaled cast (`scale=` option); NONE: the raw cast. */
typedef enum qs_cscale { QS_CSCALE_NONE = 0, QS_CSCALE_TENSOR, QS_CSCALE_ROW, QS_CSCALE_COL } qs_cscale;
const char *qs_cscale_name(int c);
int qs_cscale_parse(const char *s, int *c);

/* absmax target of f's per-run scale (f->scale_target), or 0 when f is not scaled (not an element cast,
** or bf16-like). */
double qs_cast_scale_target(const qs_format *f);

/* y = Q(x * s) / s with s = target / absmax(finite |x|) (x unchanged when all zero or f is not
** scaled); y may equal x. */
int qs_cast_scaled(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e);

/* The scale of a run of absmax `amax`: s = fl32(target / amax), inv = fl32(amax / target); s = inv = 0
** when the run is not scaled (f not scaled, amax 0 or not finite). */
void qs_cast_scale_of(const qs_format *f, float amax, float *s, float *inv);

/* y[i] = Q(x[i] * s_i) * inv_i with s_i = s[i * stride], inv_i = inv[i * stride] (stride 0: one scale for
** the run; 1: one per element); an element whose s_i is 0 is cast unscaled.  Casts are element-wise, so
** this is qs_cast_scaled's arithmetic, bit for bit, whatever the runs.  y may equal x. */
int qs_cast_scaled_apply(const qs_format *f, const qs_qopts *o, const float *x, size_t n, const float *s,
                         const float *inv, size_t stride, float *y, qs_err *e);

#endif
