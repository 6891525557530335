/*
** Element minifloats: rounding float32 values onto the grid of a small floating-point format and
** encoding/decoding its codes.  The building block of the plain casts (fp16, bf16, FP8, FP6, FP4)
** and of the block formats (MX, NVFP4, M2XFP), which scale values into the element range first.
**
** Semantics (ml_dtypes conventions unless `sat`):
**   - rounding is exact: the result is the grid point chosen by the mode from the exact float32
**     input (no double rounding), subnormals included;
**   - overflow of a finite value (after rounding): QS_MF_IEEE -> ±Inf, QS_MF_FN -> NaN,
**     QS_MF_FINITE -> ±max (always saturates); with sat = 1 every kind saturates to ±max;
**   - ±Inf input: IEEE -> ±Inf (±max with sat), FN -> NaN (±max with sat), FINITE -> ±max;
**   - NaN input: IEEE/FN -> NaN; FINITE -> see minifloat.c (documented there, matches ml_dtypes);
**   - the sign of zero is kept (a negative value that rounds to zero gives -0).
*/
#ifndef QS_MINIFLOAT_H
#define QS_MINIFLOAT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "sr.h"

typedef enum qs_mf_kind {
    QS_MF_IEEE,    /* top exponent field = Inf (mantissa 0) / NaN: fp32, fp16, bf16, e5m2 */
    QS_MF_FN,      /* no Inf; only S.1..1.1..1 is NaN: e4m3 (OCP E4M3FN) */
    QS_MF_FINITE,  /* every code is finite: fp6 e3m2/e2m3, fp4 e2m1 */
} qs_mf_kind;

typedef struct qs_minifloat {
    const char *name;
    int ebits, mbits, bias;
    qs_mf_kind kind;
} qs_minifloat;

/* Element layouts, written once: ebits, mbits, bias, kind.  The qs_mf_* descriptors below, the
** registry rows (QS_MF_ROW) and the MX element table are all made from these. */
#define QS_MF_LAYOUT_fp32 8, 23, 127, QS_MF_IEEE
#define QS_MF_LAYOUT_fp16 5, 10, 15, QS_MF_IEEE
#define QS_MF_LAYOUT_bf16 8, 7, 127, QS_MF_IEEE
#define QS_MF_LAYOUT_e4m3 4, 3, 7, QS_MF_FN
#define QS_MF_LAYOUT_e5m2 5, 2, 15, QS_MF_IEEE
#define QS_MF_LAYOUT_e3m2 3, 2, 3, QS_MF_FINITE
#define QS_MF_LAYOUT_e2m3 2, 3, 1, QS_MF_FINITE
#define QS_MF_LAYOUT_e2m1 2, 1, 1, QS_MF_FINITE

/* Constant expressions of a layout (QS_MF_LAYOUT_x): the row fields, Inf and NaN, the exponent of the
** top binade, and for layouts with emax < 32 the largest finite value and the smallest normal and
** subnormal magnitudes. */
#define QS_MF_ROW(...) QS_MF_ROW_(__VA_ARGS__)
#define QS_MF_ROW_(E, M, B, K) .ebits = (E), .mbits = (M), .bias = (B)
#define QS_MF_HAS_INF(...) QS_MF_HAS_INF_(__VA_ARGS__)
#define QS_MF_HAS_INF_(E, M, B, K) ((K) == QS_MF_IEEE)
#define QS_MF_HAS_NAN(...) QS_MF_HAS_NAN_(__VA_ARGS__)
#define QS_MF_HAS_NAN_(E, M, B, K) ((K) != QS_MF_FINITE)
#define QS_MF_EMAX(...) QS_MF_EMAX_(__VA_ARGS__)
#define QS_MF_EMAX_(E, M, B, K) ((1 << (E)) - 1 - (B) - ((K) == QS_MF_IEEE))
#define QS_MF_SMALL_MAX(...) QS_MF_SMALL_MAX_(__VA_ARGS__)
#define QS_MF_SMALL_MAX_(E, M, B, K) \
    ((double)(1u << QS_MF_EMAX_(E, M, B, K)) * (2.0 - ((K) == QS_MF_FN ? 2.0 : 1.0) / (1u << (M))))
#define QS_MF_SMALL_MIN_NORMAL(...) QS_MF_SMALL_MIN_NORMAL_(__VA_ARGS__)
#define QS_MF_SMALL_MIN_NORMAL_(E, M, B, K) (1.0 / (1u << ((B) - 1)))
#define QS_MF_SMALL_MIN_SUB(...) QS_MF_SMALL_MIN_SUB_(__VA_ARGS__)
#define QS_MF_SMALL_MIN_SUB_(E, M, B, K) (1.0 / (1u << ((B) - 1 + (M))))
#define QS_MF_GRID(...) QS_MF_GRID_(__VA_ARGS__)   /* the row's grid: binades of the normals, top included */
#define QS_MF_GRID_(E, M, B, K) QS_GRID(1 - (B), QS_MF_EMAX_(E, M, B, K), (M))
#define QS_MF_BITS(...) QS_MF_BITS_(__VA_ARGS__)
#define QS_MF_BITS_(E, M, B, K) (1 + (E) + (M))

extern const qs_minifloat qs_mf_fp32, qs_mf_fp16, qs_mf_bf16, qs_mf_e4m3, qs_mf_e5m2,
                          qs_mf_e3m2, qs_mf_e2m3, qs_mf_e2m1;

/* Largest finite, smallest normal and smallest subnormal magnitudes. */
double qs_mf_max(const qs_minifloat *f);
double qs_mf_min_normal(const qs_minifloat *f);
double qs_mf_min_subnormal(const qs_minifloat *f);

/* Round x to the grid.  mode: RNE, TA, TZ, RTZ or SR (u in [0,1) is the stochastic draw: round up in
** magnitude when u < fractional distance; ignored otherwise). */
float qs_mf_round(const qs_minifloat *f, float x, qs_round mode, double u, int sat);

/* Code of the value x rounds to (sign bit at bit ebits+mbits).  Canonical NaN code for NaN. */
uint32_t qs_mf_encode(const qs_minifloat *f, float x, qs_round mode, double u, int sat);

/* Value of a code (NaN codes -> NaN, Inf codes -> ±Inf). */
float qs_mf_decode(const qs_minifloat *f, uint32_t code);

/* Code tables of the small element types, for qs_format.code_value (value of code c). */
float qs_mf_value_e4m3(unsigned c);
float qs_mf_value_e5m2(unsigned c);
float qs_mf_value_e3m2(unsigned c);
float qs_mf_value_e2m3(unsigned c);
float qs_mf_value_e2m1(unsigned c);

/* E8M0 scale type (OCP): code c in 0..254 is 2^(c-127), 0xFF is NaN; no zero, no sign.
** qs_e8m0_encode: float -> code with ml_dtypes' float8_e8m0fnu cast semantics (see minifloat.c). */
uint8_t qs_e8m0_encode(float x, qs_round mode);
float qs_e8m0_decode(uint8_t c);

/*
** y[i] = qs_mf_round(f, x[i], mode, u_i, sat) for i < n, with u_i = qs_sr_uniform(seed, index0 + i)
** (SR only).  RNE and SR run vectorised when the level allows (SR: AVX2 and up; the portable SR loop
** is integer code with the same bits); other modes run the scalar path.
** x and y may be the same array.  The level is qs_simd_level() (simd.h).
*/
void qs_mf_round_n(const qs_minifloat *f, const float *x, size_t n, float *y, qs_round mode, int sat,
                   uint64_t seed, uint64_t index0);

/* codes[i] = qs_mf_encode(f, x[i], mode, u_i, sat), the same way (rounding vectorised for RNE, the
** value-to-code step vectorised for every mode). */
void qs_mf_encode_n(const qs_minifloat *f, const float *x, size_t n, uint32_t *codes, qs_round mode,
                    int sat, uint64_t seed, uint64_t index0);

#endif
