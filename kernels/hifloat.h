/*
** HiFloat helpers beyond the registry interface (kernels/format_hifloat.c): single-value HiF8
** conversion with every option of spec/formats-hifloat.md §1.4-1.6 (including the two that
** qs_qopts has no field for: NaN->0 and the deterministic "simplified" stochastic rounding), field
** labels for `qscope explain`, and the pieces of a HiF4 unit (§2.1-2.2, §2.7).
*/
#ifndef QS_HIFLOAT_H
#define QS_HIFLOAT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* ---- HiF8 ---------------------------------------------------------------------------------- */

/* Flags of qs_hif8_encode1. */
#define QS_HIF8_SAT   1u   /* overflow and ±Inf saturate to ±32768 (code S|0x6E) instead of ±Inf */
#define QS_HIF8_NAN0  2u   /* NaN encodes as 0x00 (zero) instead of 0x80 (NaN) */
#define QS_HIF8_SSR   4u   /* mode SR: the paper's simplified SR (§1.6, SR14), whose threshold is
                           ** the 14 low fraction bits of the source, instead of the draw u
                           ** (Huawei's "storound"; HR always uses it for |E| >= 4) */
#define QS_HIF8_HUAWEI (QS_HIF8_SAT | QS_HIF8_NAN0)   /* Huawei golden over_mode=False */

/* Encode one float32.  mode: QS_RND_TA (or DEFAULT), RNE, RTZ, HR, SR; u in [0,1) is the
** stochastic draw of SR (round up in magnitude iff u < the fractional distance); HR is TA for a
** source exponent |E| < 4, SR14 otherwise (deterministic, the Huawei "hybrid" golden). */
uint8_t qs_hif8_encode1(float x, qs_round mode, double u, unsigned flags);

/* Value of a code: 0x80 -> NaN, 0x6F/0xEF -> ±Inf, 0x00 -> +0 (there is no -0). */
float qs_hif8_decode1(uint8_t code);

/* Label the fields of a code in buf, e.g. "0 01 01 101  sign=+ dot=01 (D=2) exp=01 (E=+3)
** mant=101 (W=3)".  Returns the length of the whole label (as snprintf); buf is always
** NUL-terminated when cap > 0. */
int qs_hif8_fields(uint8_t code, char *buf, size_t cap);

/* The kernels behind the registry's default-mode (TA) encode and fake-quantize with the path
** forced: simd = 0 the portable scalar code, 1 the AVX2 code when the CPU has it (else scalar).
** For tests that compare the paths bit for bit; the registry chooses through qs_simd_level(). */
void qs_hif8_encode_ta(int simd, const float *x, size_t n, uint32_t *codes, int sat);
void qs_hif8_fakeq_ta(int simd, const float *x, size_t n, float *y, int sat);

/* ---- HiF4 ---------------------------------------------------------------------------------- */

#define QS_HIF4_UNIT 64    /* elements per unit; also the only block size */
#define QS_HIF4_META 4     /* metadata bytes per unit */

/* One unit's metadata.  In the encode/decode meta array each unit is a 4-byte little-endian word
** bits 0-7 E6M2, bits 8-15 E1_8 (bit 8+j = group j of 8), bits 16-31 E1_16 (bit 16+k = group k
** of 4) -- the spec's §2.7 proposal, a project convention (the paper gives no byte layout). */
typedef struct qs_hif4_meta {
    uint8_t e6m2;     /* level-1 scale, unsigned E6M2 (bias 48); 0xFF = NaN unit */
    uint8_t e1_8;     /* level-2 flags, bit j: elements 8j..8j+7 are scaled by 2 */
    uint16_t e1_16;   /* level-3 flags, bit k: elements 4k..4k+3 are scaled by 2 */
} qs_hif4_meta;

void qs_hif4_meta_store(const qs_hif4_meta *m, uint8_t out[QS_HIF4_META]);
void qs_hif4_meta_load(const uint8_t in[QS_HIF4_META], qs_hif4_meta *m);

/* E6M2: value 2^(Eb-48) * (1 + m/4) (0xFF -> NaN), and BF16_RNE(1/value), the hardware LUT. */
double qs_hif4_e6m2_value(uint8_t c);
double qs_hif4_e6m2_rec(uint8_t c);

/* Quantize one unit of 64 values (Algorithm 1, §2.5): metadata and 64 element nibbles
** (bit 3 = sign, bits 2..0 = q).  rne = 0: TA elements (default), 1: RNE elements. */
void qs_hif4_quant_unit(const float v[QS_HIF4_UNIT], int rne, qs_hif4_meta *m,
                        uint8_t nib[QS_HIF4_UNIT]);

/* Fake-quantize a run (units of 64, the last one zero-padded) with the path forced: simd = a level of
** simd.h, 0 the portable scalar code, 1 AVX2, 2 AVX-512 (each only when the CPU has it, else the next
** lower one), so 1 is the AVX2 code as above. */
void qs_hif4_fakeq_run(int simd, const float *x, size_t n, float *y, int rne);

/* The same, and each unit's metadata as encode writes it (meta NULL: none). */
void qs_hif4_fakeq_meta_run(int simd, const float *x, size_t n, float *y, uint8_t *meta, int rne);

#endif
