/*
** HiFloat formats of the registry: hif8 (HiFloat8) and hif4 (HiFloat4), after
** spec/formats-hifloat.md (cited as §n below).  Encode, decode and fake-quantize agree bit for bit.
** hif8 TA encode / fake-quantize and hif4 fake-quantize have AVX2 paths (hif4 also AVX-512), chosen
** at run time (qs_simd_level(); QS_SIMD=scalar forces the portable path), tested bit-identical to the
** scalar ones.  Inputs are float32, so the spec's SR2 rule for FP16/BF16 sources (§1.6) does not arise.
**
** hif8 (§1).  Codes are the §1.1 words; decode is the §1.2 table (0x80 NaN, 0x6F/0xEF ±Inf,
** 0x00 the only zero).  Rounding, exact on the float32 input:
**   ta  (default) nearest on the value set, ties away from zero, with the virtual point 1.5*2^15
**       standing for overflow (§1.5): |x| >= 40960 -> Inf, |x| < 2^-23 -> 0, 2^-23 -> 2^-22;
**   hr  the paper's hybrid rounding (§1.6): TA when the source exponent |E| < 4, else the
**       simplified SR14 whose threshold is the source's own 14 low fraction bits (deterministic;
**       bit-exact to Huawei's "hybrid" golden).  Consequence kept from the golden (its
**       _fp32_ssr_round_to_hif8 rounds up iff F14 >= T14, and an exact value has F14 = T14 = 0):
**       a value already on the HiF8 grid with |E| >= 4 moves one step up, e.g. HR(16) = 20,
**       HR(-512) = -768;
**   sr  stochastic: round up in magnitude iff u < (discarded part)/(grid step), u =
**       qs_sr_uniform(seed, index0 + i) -- the exact version of §1.6's SR with a real random
**       number.  [Choice: the spec's SR14-everywhere ("storound") is deterministic and has no
**       qs_round slot; it is qs_hif8_encode1(..., QS_HIF8_SSR) in hifloat.h.]  As in the golden,
**       |x| < 2^-23 flushes to 0 and the overflow test precedes rounding (§1.10 item 3), so
**       x in [32768, 40960) may round to the overflow point: +Inf, or 32768 with --sat (item 2);
**   rne [Choice: the paper compares TA with "TE" but does not define it at every boundary.]
**       Nearest, ties to the candidate with the even code.  In the 1-3-bit binades that is the
**       even mantissa; it also settles the ties with no mantissa bit: 2^-23 -> 0 (0x00),
**       1.5*2^-16 -> 2^-15 (0x7E, not 0x07), 1.5*2^k in DML -> the even k code, and the
**       overflow tie 40960 -> 32768 (0x6E), so only |x| > 40960 overflows;
**   rtz [Choice] truncation on the value set (MindSpore's FromFloat32 truncates, §1.5): finite
**       |x| >= 32768 -> 32768 (IEEE: RTZ never overflows), |x| < 2^-22 -> 0.
** A negative value that rounds to zero gives 0x00 (+0) in every mode.  --sat (o->sat) saturates
** overflow and ±Inf to ±32768 (§1.5, §1.10 item 1), NaN stays NaN.  [Not exposed: NaN->0 has no
** field in qs_qopts; it is QS_HIF8_NAN0 of qs_hif8_encode1, and QS_HIF8_HUAWEI couples both as
** Huawei's over_mode=False does.]  Decoding NaN gives the quiet NaN 0x7FC00000.
**
** hif4 (§2).  One 64-element unit per block (the only block size; o->block must be 0 or 64).
** Metadata, 4 bytes per unit, little-endian word: bits 0-7 E6M2, bits 8-15 E1_8 (bit 8+j =
** elements 8j..8j+7), bits 16-31 E1_16 (bit 16+k = elements 4k..4k+3) -- the §2.7 proposal, a
** project convention (the paper is silent, Huawei code bases disagree).  Element codes: one 4-bit
** S1P2 nibble per element, unpacked (bit 3 sign, bits 2..0 q); qs_pack_codes puts element 2i in
** the low nibble, as §2.7 proposes.  4 + 32/64 = 4.5 bits per element.
** Quantization is Algorithm 1 of §2.5 with exact arithmetic (the GCC library / To_HiFX semantics,
** §2.8): SF = BF16_RNE(Vmax * 73/512) computed from the exact product [for FP32 inputs the CUDA
** kernel rounds the product to FP32 first; we do not], E6M2 = RNE(clamp(SF, 2^-48, 49152)),
** REC = the §2.2 LUT, flags by exact comparison, elements TA (default) or RNE (--round rne; the
** paper allows both; no other element rounding is defined, so others are rejected), clamped at
** q = 7, so finite values always saturate (at ±344064).  Sign: nibble bit 3 is set for x < 0, so
** -0.0 gives +0 and a negative value rounding to 0 gives -0.0 on decode (§2.3).
** [Choice, §2.5 recommendation] any NaN in a unit -> E6M2 = 0xFF, flags 0, nibbles 0, all 64
** outputs NaN; ±Inf (no NaN) saturates like the CUDA/Ascend kernels: SF -> 49152 (0xFE), the Inf
** element gets q = 7 and its groups' flags.  A final partial unit is padded with zeros; only its
** real elements get codes.  hif4 has no tensor scale: encode stores 1.0.
** [Choice] The registry's min_subnormal / min_normal / max_finite of hif4 describe the decoded
** value set: 2^-50 (0.25 * smallest E6M2), 2^-48 (1.0 * smallest E6M2) and 344064 (§2.4).
*/
#include "fbits.h"
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format_families.h"
#include "hifloat.h"
#include "simd.h"
#include "sr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HIF_X86 1
#include <immintrin.h>
#else
#define HIF_X86 0
#endif


#define F32_INF    0x7f800000u
#define F32_QNAN   0x7fc00000u
#define F32_2M23   0x34000000u   /* 2^-23: below it everything is 0 */
#define F32_2M22   0x34800000u   /* 2^-22: the smallest HiF8 magnitude */
#define F32_MAXF   0x47000000u   /* 2^15 = 32768: the largest finite HiF8 */
#define F32_OVF    0x47200000u   /* 40960 = 1.25*2^15: the TA overflow threshold */

/* ================================================================================================
** HiF8
** ============================================================================================== */

/* Value of every code (§1.2).  Bit 7 is the sign except for 0x80 (NaN). */
static const float kHif8Val[256] = {
    0.0f, 0x1p-22f, 0x1p-21f, 0x1p-20f, 0x1p-19f, 0x1p-18f, 0x1p-17f, 0x1p-16f,
    0x1p+0f, 0x1.2p+0f, 0x1.4p+0f, 0x1.6p+0f, 0x1.8p+0f, 0x1.ap+0f, 0x1.cp+0f, 0x1.ep+0f,
    0x1p+1f, 0x1.2p+1f, 0x1.4p+1f, 0x1.6p+1f, 0x1.8p+1f, 0x1.ap+1f, 0x1.cp+1f, 0x1.ep+1f,
    0x1p-1f, 0x1.2p-1f, 0x1.4p-1f, 0x1.6p-1f, 0x1.8p-1f, 0x1.ap-1f, 0x1.cp-1f, 0x1.ep-1f,
    0x1p+2f, 0x1.2p+2f, 0x1.4p+2f, 0x1.6p+2f, 0x1.8p+2f, 0x1.ap+2f, 0x1.cp+2f, 0x1.ep+2f,
    0x1p+3f, 0x1.2p+3f, 0x1.4p+3f, 0x1.6p+3f, 0x1.8p+3f, 0x1.ap+3f, 0x1.cp+3f, 0x1.ep+3f,
    0x1p-2f, 0x1.2p-2f, 0x1.4p-2f, 0x1.6p-2f, 0x1.8p-2f, 0x1.ap-2f, 0x1.cp-2f, 0x1.ep-2f,
    0x1p-3f, 0x1.2p-3f, 0x1.4p-3f, 0x1.6p-3f, 0x1.8p-3f, 0x1.ap-3f, 0x1.cp-3f, 0x1.ep-3f,
    0x1p+4f, 0x1.4p+4f, 0x1.8p+4f, 0x1.cp+4f, 0x1p+5f, 0x1.4p+5f, 0x1.8p+5f, 0x1.cp+5f,
    0x1p+6f, 0x1.4p+6f, 0x1.8p+6f, 0x1.cp+6f, 0x1p+7f, 0x1.4p+7f, 0x1.8p+7f, 0x1.cp+7f,
    0x1p-4f, 0x1.4p-4f, 0x1.8p-4f, 0x1.cp-4f, 0x1p-5f, 0x1.4p-5f, 0x1.8p-5f, 0x1.cp-5f,
    0x1p-6f, 0x1.4p-6f, 0x1.8p-6f, 0x1.cp-6f, 0x1p-7f, 0x1.4p-7f, 0x1.8p-7f, 0x1.cp-7f,
    0x1p+8f, 0x1.8p+8f, 0x1p+9f, 0x1.8p+9f, 0x1p+10f, 0x1.8p+10f, 0x1p+11f, 0x1.8p+11f,
    0x1p+12f, 0x1.8p+12f, 0x1p+13f, 0x1.8p+13f, 0x1p+14f, 0x1.8p+14f, 0x1p+15f, INFINITY,
    0x1p-8f, 0x1.8p-8f, 0x1p-9f, 0x1.8p-9f, 0x1p-10f, 0x1.8p-10f, 0x1p-11f, 0x1.8p-11f,
    0x1p-12f, 0x1.8p-12f, 0x1p-13f, 0x1.8p-13f, 0x1p-14f, 0x1.8p-14f, 0x1p-15f, 0x1.8p-15f,
    NAN, -0x1p-22f, -0x1p-21f, -0x1p-20f, -0x1p-19f, -0x1p-18f, -0x1p-17f, -0x1p-16f,
    -0x1p+0f, -0x1.2p+0f, -0x1.4p+0f, -0x1.6p+0f, -0x1.8p+0f, -0x1.ap+0f, -0x1.cp+0f, -0x1.ep+0f,
    -0x1p+1f, -0x1.2p+1f, -0x1.4p+1f, -0x1.6p+1f, -0x1.8p+1f, -0x1.ap+1f, -0x1.cp+1f, -0x1.ep+1f,
    -0x1p-1f, -0x1.2p-1f, -0x1.4p-1f, -0x1.6p-1f, -0x1.8p-1f, -0x1.ap-1f, -0x1.cp-1f, -0x1.ep-1f,
    -0x1p+2f, -0x1.2p+2f, -0x1.4p+2f, -0x1.6p+2f, -0x1.8p+2f, -0x1.ap+2f, -0x1.cp+2f, -0x1.ep+2f,
    -0x1p+3f, -0x1.2p+3f, -0x1.4p+3f, -0x1.6p+3f, -0x1.8p+3f, -0x1.ap+3f, -0x1.cp+3f, -0x1.ep+3f,
    -0x1p-2f, -0x1.2p-2f, -0x1.4p-2f, -0x1.6p-2f, -0x1.8p-2f, -0x1.ap-2f, -0x1.cp-2f, -0x1.ep-2f,
    -0x1p-3f, -0x1.2p-3f, -0x1.4p-3f, -0x1.6p-3f, -0x1.8p-3f, -0x1.ap-3f, -0x1.cp-3f, -0x1.ep-3f,
    -0x1p+4f, -0x1.4p+4f, -0x1.8p+4f, -0x1.cp+4f, -0x1p+5f, -0x1.4p+5f, -0x1.8p+5f, -0x1.cp+5f,
    -0x1p+6f, -0x1.4p+6f, -0x1.8p+6f, -0x1.cp+6f, -0x1p+7f, -0x1.4p+7f, -0x1.8p+7f, -0x1.cp+7f,
    -0x1p-4f, -0x1.4p-4f, -0x1.8p-4f, -0x1.cp-4f, -0x1p-5f, -0x1.4p-5f, -0x1.8p-5f, -0x1.cp-5f,
    -0x1p-6f, -0x1.4p-6f, -0x1.8p-6f, -0x1.cp-6f, -0x1p-7f, -0x1.4p-7f, -0x1.8p-7f, -0x1.cp-7f,
    -0x1p+8f, -0x1.8p+8f, -0x1p+9f, -0x1.8p+9f, -0x1p+10f, -0x1.8p+10f, -0x1p+11f, -0x1.8p+11f,
    -0x1p+12f, -0x1.8p+12f, -0x1p+13f, -0x1.8p+13f, -0x1p+14f, -0x1.8p+14f, -0x1p+15f, -INFINITY,
    -0x1p-8f, -0x1.8p-8f, -0x1p-9f, -0x1.8p-9f, -0x1p-10f, -0x1.8p-10f, -0x1p-11f, -0x1.8p-11f,
    -0x1p-12f, -0x1.8p-12f, -0x1p-13f, -0x1.8p-13f, -0x1p-14f, -0x1.8p-14f, -0x1p-15f, -0x1.8p-15f,
};

/* Code of 2^e (mantissa field 0, sign 0) and mantissa width W of the binade e = -22..15 (index
** e + 22).  DML binades -22..-16 are codes 1..7 with W = 0 (§1.1). */
static const uint8_t kBase[38] = {
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x7E, 0x7C, 0x7A, 0x78, 0x76, 0x74, 0x72, 0x70, 0x5C,
    0x58, 0x54, 0x50, 0x38, 0x30, 0x18, 0x08, 0x10, 0x20, 0x28, 0x40, 0x44, 0x48, 0x4C, 0x60, 0x62,
    0x64, 0x66, 0x68, 0x6A, 0x6C, 0x6E};
static const uint8_t kW[38] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                               3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};

float qs_hif8_decode1(uint8_t code)
{
    return code == 0x80 ? u2f(F32_QNAN) : kHif8Val[code];
}

uint8_t qs_hif8_encode1(float x, qs_round mode, double u, unsigned flags)
{
    uint32_t b = f2u(x), a = b & 0x7fffffffu;
    uint8_t sgn = (uint8_t)((b >> 31) << 7);
    uint8_t ovf = (flags & QS_HIF8_SAT) ? 0x6E : 0x6F;
    if (mode == QS_RND_DEFAULT) mode = QS_RND_TA;
    if (a > F32_INF) return (flags & QS_HIF8_NAN0) ? 0x00 : 0x80;
    if (a == F32_INF) return sgn | ovf;
    if (a >= F32_OVF) {
        /* 40960 is the tie between 2^15 and the overflow point 1.5*2^15 (code 0x6F, odd). */
        if (mode == QS_RND_RTZ || (mode == QS_RND_RNE && a == F32_OVF)) return sgn | 0x6E;
        return sgn | ovf;
    }
    if (a < F32_2M23) return 0x00;   /* nearest is 0; SR flushes too (golden, §1.10 item 3) */

    int e = (int)(a >> 23) - 127;               /* -23..15 */
    int eb = e < -22 ? -22 : e;                 /* [2^-23, 2^-22) is measured against 2^-22 */
    int w = kW[eb + 22];
    uint32_t m = 0x800000u | (a & 0x7fffffu);   /* |x| = m * 2^(e-23) */
    int sh = 23 - w + (eb - e);                 /* grid step 2^(eb-w) = 2^sh units of m */
    uint32_t k = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
    int ae = e < 0 ? -e : e, up;

    if (mode == QS_RND_HR) {                    /* §1.6 eq. 3: source exponent decides */
        mode = ae < 4 ? QS_RND_TA : QS_RND_SR;
        flags |= QS_HIF8_SSR;
    }
    switch (mode) {
    case QS_RND_RNE: {
        /* The lower candidate's code parity: its mantissa LSB, or in DML its k = eb + 23;
        ** k == 0 is the zero code. */
        int lo_odd = k == 0 ? 0 : w > 0 ? (int)(k & 1) : ((eb + 23) & 1);
        up = rem > half || (rem == half && lo_odd);
        break;
    }
    case QS_RND_RTZ: up = 0; break;
    case QS_RND_SR:
        if (flags & QS_HIF8_SSR)                 /* SR14: F14 = 14 MSBs of the discarded bits */
            up = (rem >> (sh - 14)) >= (a & 0x3fffu);
        else                                     /* u * 2^sh is exact */
            up = ldexp(u, sh) < (double)rem;
        break;
    default: up = rem >= half; break;           /* TA */
    }
    k += (uint32_t)up;
    if (k == 0) return 0x00;
    if (k == (2u << w)) {                        /* carry: exactly 2^(eb+1), maybe another W */
        eb++;
        w = kW[eb + 22];
        k = 1u << w;
    }
    uint8_t code = kBase[eb + 22] | (uint8_t)(k & ((1u << w) - 1));
    if (code == 0x6F) code = ovf;               /* SR at 2^15 reached the overflow point */
    return sgn | code;
}

/* ---- TA fast paths ----------------------------------------------------------------------------
** For |x| in [2^-22, 40960) the TA result is |x| with its fraction rounded half-up at the binade's
** W bits, a carry moving into the next binade's 2^(e+1) (§1.5 "bit-level form"). */

static inline uint32_t hif8_ta_mag(uint32_t a)
{
    int e = (int)(a >> 23) - 127, ae = e < 0 ? -e : e;
    unsigned w = 3u - (ae > 3) - (ae > 7) - (ae > 15);
    return (a + (0x400000u >> w)) & ~(0x7fffffu >> w);
}

static inline float hif8_fq_ta1(float x, uint32_t ovf_bits)
{
    uint32_t b = f2u(x), a = b & 0x7fffffffu, s = b & 0x80000000u;
    if (a < F32_2M22) return a < F32_2M23 ? 0.0f : u2f(s | F32_2M22);
    if (a >= F32_OVF) return a > F32_INF ? u2f(F32_QNAN) : u2f(s | ovf_bits);
    return u2f(s | hif8_ta_mag(a));
}

static inline uint32_t hif8_code_of_mag(uint32_t r)   /* r: a HiF8 magnitude in [2^-22, 2^15] */
{
    int i = (int)(r >> 23) - 127 + 22;
    return kBase[i] | ((r & 0x7fffffu) >> (23 - kW[i]));
}

static inline uint32_t hif8_enc_ta1(float x, uint32_t ovf_code)
{
    uint32_t b = f2u(x), a = b & 0x7fffffffu, s = (b >> 24) & 0x80u;
    if (a < F32_2M22) return a < F32_2M23 ? 0u : s | 1u;
    if (a >= F32_OVF) return a > F32_INF ? 0x80u : s | ovf_code;
    return s | hif8_code_of_mag(hif8_ta_mag(a));
}

static void hif8_fq_ta_scalar(const float *x, size_t n, float *y, int sat)
{
    uint32_t ovf = sat ? F32_MAXF : F32_INF;
    for (size_t i = 0; i < n; i++) y[i] = hif8_fq_ta1(x[i], ovf);
}

static void hif8_enc_ta_scalar(const float *x, size_t n, uint32_t *c, int sat)
{
    uint32_t ovf = sat ? 0x6Eu : 0x6Fu;
    for (size_t i = 0; i < n; i++) c[i] = hif8_enc_ta1(x[i], ovf);
}

#if HIF_X86
/* The TA magnitude of 8 lanes, with the special ranges blended in: *s_out gets the sign to OR
** back (cleared where the result is 0), *nan_out the NaN lanes. */
__attribute__((target("avx2"))) static inline __m256i hif8_ta_avx2(__m256i b, __m256i ovf,
                                                                  __m256i *s_out, __m256i *nan_out)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i a = _mm256_and_si256(b, absm);
    __m256i s = _mm256_andnot_si256(absm, b);
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32(127));
    __m256i ae = _mm256_abs_epi32(e);
    __m256i w = _mm256_add_epi32(_mm256_set1_epi32(3),                   /* compares give -1 */
                _mm256_add_epi32(_mm256_cmpgt_epi32(ae, _mm256_set1_epi32(3)),
                _mm256_add_epi32(_mm256_cmpgt_epi32(ae, _mm256_set1_epi32(7)),
                                 _mm256_cmpgt_epi32(ae, _mm256_set1_epi32(15)))));
    __m256i half = _mm256_srlv_epi32(_mm256_set1_epi32(0x400000), w);
    __m256i mask = _mm256_srlv_epi32(_mm256_set1_epi32(0x7fffff), w);
    __m256i r = _mm256_andnot_si256(mask, _mm256_add_epi32(a, half));
    __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)F32_2M22), a);   /* a < 2^-22 */
    __m256i zero = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)F32_2M23), a);   /* a < 2^-23 */
    __m256i big = _mm256_cmpgt_epi32(a, _mm256_set1_epi32((int)F32_OVF - 1)); /* a >= 40960 */
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32((int)F32_2M22), tiny);
    r = _mm256_andnot_si256(zero, r);
    r = _mm256_blendv_epi8(r, ovf, big);
    *s_out = _mm256_andnot_si256(zero, s);
    *nan_out = _mm256_cmpgt_epi32(a, _mm256_set1_epi32((int)F32_INF));
    return r;
}

__attribute__((target("avx2"))) static void hif8_fq_ta_avx2(const float *x, size_t n, float *y,
                                                            int sat)
{
    const __m256i ovf = _mm256_set1_epi32((int)(sat ? F32_MAXF : F32_INF));
    const __m256i qnan = _mm256_set1_epi32((int)F32_QNAN);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i s, nan;
        __m256i r = hif8_ta_avx2(_mm256_loadu_si256((const __m256i *)(x + i)), ovf, &s, &nan);
        r = _mm256_blendv_epi8(_mm256_or_si256(r, s), qnan, nan);
        _mm256_storeu_si256((__m256i *)(y + i), r);
    }
    hif8_fq_ta_scalar(x + i, n - i, y + i, sat);
}

/* Code = base(e) | mantissa >> (23 - W(e)) of the rounded magnitude; base(e) by a gather from
** kBase widened to 32 bits. */
static const int32_t kBase32[38] = {
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x7E, 0x7C, 0x7A, 0x78, 0x76, 0x74, 0x72, 0x70, 0x5C,
    0x58, 0x54, 0x50, 0x38, 0x30, 0x18, 0x08, 0x10, 0x20, 0x28, 0x40, 0x44, 0x48, 0x4C, 0x60, 0x62,
    0x64, 0x66, 0x68, 0x6A, 0x6C, 0x6E};

__attribute__((target("avx2"))) static void hif8_enc_ta_avx2(const float *x, size_t n,
                                                             uint32_t *c, int sat)
{
    const __m256i ovf = _mm256_set1_epi32((int)F32_MAXF);   /* any in-range magnitude; replaced */
    const __m256i ovf_code = _mm256_set1_epi32(sat ? 0x6E : 0x6F);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i s, nan;
        __m256i b = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i r = hif8_ta_avx2(b, ovf, &s, &nan);
        __m256i big = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32((int)F32_OVF - 1));
        __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(r, 23), _mm256_set1_epi32(127));
        __m256i idx = _mm256_add_epi32(e, _mm256_set1_epi32(22));
        idx = _mm256_min_epi32(idx, _mm256_set1_epi32(37));
        idx = _mm256_max_epi32(idx, _mm256_setzero_si256());
        __m256i ae = _mm256_abs_epi32(e);
        __m256i w = _mm256_add_epi32(_mm256_set1_epi32(3),
                    _mm256_add_epi32(_mm256_cmpgt_epi32(ae, _mm256_set1_epi32(3)),
                    _mm256_add_epi32(_mm256_cmpgt_epi32(ae, _mm256_set1_epi32(7)),
                                     _mm256_cmpgt_epi32(ae, _mm256_set1_epi32(15)))));
        __m256i mant = _mm256_and_si256(r, _mm256_set1_epi32(0x7fffff));
        __m256i code = _mm256_or_si256(_mm256_i32gather_epi32(kBase32, idx, 4),
                           _mm256_srlv_epi32(mant, _mm256_sub_epi32(_mm256_set1_epi32(23), w)));
        code = _mm256_andnot_si256(_mm256_cmpeq_epi32(r, _mm256_setzero_si256()), code);
        code = _mm256_blendv_epi8(code, ovf_code, big);
        code = _mm256_or_si256(code, _mm256_srli_epi32(s, 24));
        code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x80), nan);
        _mm256_storeu_si256((__m256i *)(c + i), code);
    }
    hif8_enc_ta_scalar(x + i, n - i, c + i, sat);
}
#endif

static int use_avx2(void)
{
#if HIF_X86
    return qs_simd_level() >= QS_SIMD_AVX2;
#else
    return 0;
#endif
}

/* simd = 1 asks for AVX2; the CPU is asked too, so a test may pass 1 anywhere. */
static int hif_level(void) { return HIF_X86 ? qs_simd_level() : QS_SIMD_SCALAR; }

static int avx2_ok(int simd)
{
#if HIF_X86
    return simd && qs_simd_cpu() >= QS_SIMD_AVX2;
#else
    return 0;
#endif
}

void qs_hif8_encode_ta(int simd, const float *x, size_t n, uint32_t *codes, int sat)
{
#if HIF_X86
    if (avx2_ok(simd)) { hif8_enc_ta_avx2(x, n, codes, sat); return; }
#endif
    hif8_enc_ta_scalar(x, n, codes, sat);
}

void qs_hif8_fakeq_ta(int simd, const float *x, size_t n, float *y, int sat)
{
#if HIF_X86
    if (avx2_ok(simd)) { hif8_fq_ta_avx2(x, n, y, sat); return; }
#endif
    hif8_fq_ta_scalar(x, n, y, sat);
}

static int hif8_round_ok(qs_round r)
{
    return r == QS_RND_DEFAULT || r == QS_RND_TA || r == QS_RND_RNE || r == QS_RND_HR ||
           r == QS_RND_SR || r == QS_RND_RTZ;
}

static int hif8_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n,
                       uint32_t *codes, uint8_t *meta, float *tensor_scale, qs_err *e)
{
    if (!hif8_round_ok(o->round)) return qs_fail(e, "hif8: unsupported rounding mode");
    if (tensor_scale) *tensor_scale = 1.0f;
    unsigned fl = o->sat ? QS_HIF8_SAT : 0;
    if (o->round == QS_RND_DEFAULT || o->round == QS_RND_TA) {
        qs_hif8_encode_ta(use_avx2(), x, n, codes, o->sat);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        double u = o->round == QS_RND_SR ? qs_sr_uniform(o->seed, o->index0 + i) : 0.0;
        codes[i] = qs_hif8_encode1(x[i], o->round, u, fl);
    }
    return 0;
}

static int hif8_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes,
                       const uint8_t *meta, float tensor_scale, size_t n, float *y, qs_err *e)
{
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) any |= codes[i];
    if (any > 0xffu) {
        for (size_t i = 0; i < n; i++)
            if (codes[i] > 0xffu)
                return qs_fail(e, "hif8: code 0x%x at element %zu is wider than 8 bits",
                               (unsigned)codes[i], i);
    }
    for (size_t i = 0; i < n; i++) y[i] = qs_hif8_decode1((uint8_t)codes[i]);
    return 0;
}

static int hif8_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y,
                      qs_err *e)
{
    if (!hif8_round_ok(o->round)) return qs_fail(e, "hif8: unsupported rounding mode");
    if (o->round == QS_RND_DEFAULT || o->round == QS_RND_TA) {
        qs_hif8_fakeq_ta(use_avx2(), x, n, y, o->sat);
        return 0;
    }
    unsigned fl = o->sat ? QS_HIF8_SAT : 0;
    for (size_t i = 0; i < n; i++) {
        double u = o->round == QS_RND_SR ? qs_sr_uniform(o->seed, o->index0 + i) : 0.0;
        y[i] = qs_hif8_decode1(qs_hif8_encode1(x[i], o->round, u, fl));
    }
    return 0;
}

static float hif8_code_value(unsigned c) { return qs_hif8_decode1((uint8_t)(c & 0xff)); }

int qs_hif8_fields(uint8_t code, char *buf, size_t cap)
{
    char bits[9];
    for (int i = 0; i < 8; i++) bits[i] = (char)('0' + ((code >> (7 - i)) & 1));
    bits[8] = 0;
    const char *sign = (code & 0x80) ? "-" : "+";
    unsigned p = code & 0x7f;
    if (p == 0)
        return snprintf(buf, cap, "%c %.4s %.3s  sign=%c dot=0000 (DML) k=000: %s", bits[0],
                        bits + 1, bits + 5, bits[0], code ? "NaN (the only NaN code)"
                                                          : "zero (the only zero; no -0)");
    if ((p & 0x78) == 0)
        return snprintf(buf, cap, "%c %.4s %.3s  sign=%s dot=0000 (DML) k=%.3s (E=%d, no mantissa)",
                        bits[0], bits + 1, bits + 5, sign, bits + 5, (int)(p & 7) - 23);
    /* Dot length and D from the prefix (§1.1 table). */
    int dl, d;
    if (p >> 5) { dl = 2; d = (int)(p >> 5) + 1; }   /* 11 -> 4, 10 -> 3, 01 -> 2 */
    else if (p >> 4) { dl = 3; d = 1; }
    else { dl = 4; d = 0; }
    int w = d >= 2 ? 5 - d : 3;
    int ebits = d, e = 0;
    unsigned rest = p & ((1u << (7 - dl)) - 1), fld = rest >> w;
    if (d > 0) {
        int mag = (1 << (d - 1)) + (int)(fld & ((1u << (d - 1)) - 1));
        e = (fld >> (d - 1)) ? -mag : mag;
    }
    const char *what = p == 0x6f ? "  Inf (the 1.5*2^15 slot)" : "";
    if (d == 0)
        return snprintf(buf, cap,
                        "%c %.*s %.*s  sign=%s dot=%.*s (D=0) exp=- (E=0) mant=%.*s (W=%d)%s",
                        bits[0], dl, bits + 1, w, bits + 1 + dl, sign, dl, bits + 1, w,
                        bits + 1 + dl, w, what);
    return snprintf(buf, cap,
                    "%c %.*s %.*s %.*s  sign=%s dot=%.*s (D=%d) exp=%.*s (E=%+d) "
                    "mant=%.*s (W=%d)%s",
                    bits[0], dl, bits + 1, ebits, bits + 1 + dl, w, bits + 1 + dl + ebits, sign, dl,
                    bits + 1, d, ebits, bits + 1 + dl, e, w, bits + 1 + dl + ebits, w, what);
}

/* ================================================================================================
** HiF4
** ============================================================================================== */

void qs_hif4_meta_store(const qs_hif4_meta *m, uint8_t out[QS_HIF4_META])
{
    out[0] = m->e6m2;
    out[1] = m->e1_8;
    out[2] = (uint8_t)(m->e1_16 & 0xff);
    out[3] = (uint8_t)(m->e1_16 >> 8);
}

void qs_hif4_meta_load(const uint8_t in[QS_HIF4_META], qs_hif4_meta *m)
{
    m->e6m2 = in[0];
    m->e1_8 = in[1];
    m->e1_16 = (uint16_t)(in[2] | in[3] << 8);
}

double qs_hif4_e6m2_value(uint8_t c)
{
    if (c == 0xff) return NAN;
    return u2d((uint64_t)((c >> 2) - 48 + 1023) << 52 | (uint64_t)(c & 3) << 50);
}

double qs_hif4_e6m2_rec(uint8_t c)
{
    /* §2.2: BF16_RNE(1/(1 + m/4)) = 1, 1.6015625/2, 1.3359375/2, 1.140625/2. */
    static const double kRecM[4] = {1.0, 0.80078125, 0.66796875, 0.5703125};
    if (c == 0xff) return NAN;
    return kRecM[c & 3] * u2d((uint64_t)(1023 - ((c >> 2) - 48)) << 52);
}

/* Round a positive finite normal double to 8 significant bits (BF16), ties to even.  BF16's
** subnormal range (< 2^-126) is not modelled: such SF values are clamped to 2^-48 anyway. */
static inline double bf16_rne(double v)
{
    uint64_t u = d2u(v);
    u += ((1ull << 44) - 1) + ((u >> 45) & 1);
    return u2d(u & ~((1ull << 45) - 1));
}

/* E6M2 code of SF in [2^-48, 49152]: 3 significant bits, ties to even (a carry bumps Eb). */
static inline uint8_t e6m2_rne(double sf)
{
    uint64_t u = d2u(sf);
    u += ((1ull << 49) - 1) + ((u >> 50) & 1);
    int eb = (int)((u >> 52) & 0x7ff) - 1023 + 48;
    return (uint8_t)(eb << 2 | (int)((u >> 50) & 3));
}

/* Metadata of a unit from its 16 group maxima (as |float| bit patterns, NaN-free); also the
** element multipliers: rmul[k] = REC * 2^(2 - d) for micro-group k (to units of 1/4) and
** smul[k] = E6M2 * 2^(d - 2) (back to values). */
/* E6M2 code of a unit from Vmax (as |float| bits, not NaN). */
static inline uint8_t hif4_scale(uint32_t vmax)
{
    if (vmax >= F32_INF) return 0xFE;            /* ±Inf saturates the scale (§2.5 choice) */
    /* SF = BF16_RNE(Vmax * 73/512): the product is exact in double (24 x 7 bits). */
    double sf = bf16_rne((double)u2f(vmax) * (73.0 / 512.0));
    if (vmax == 0 || sf < 0x1p-48) sf = 0x1p-48;
    if (sf > 49152.0) sf = 49152.0;
    return e6m2_rne(sf);
}

static void hif4_meta(const uint32_t v16[16], qs_hif4_meta *m, double rmul[16], float smul[16])
{
    uint32_t vmax = 0;
    for (int k = 0; k < 16; k++) vmax = v16[k] > vmax ? v16[k] : vmax;
    uint8_t c = hif4_scale(vmax);
    double rec = qs_hif4_e6m2_rec(c), val = qs_hif4_e6m2_value(c);
    const double rd[3] = {rec * 4, rec * 2, rec};
    const float sd[3] = {(float)(val * 0.25), (float)(val * 0.5), (float)val};
    /* V16 * REC against 2 and 4: 24 x 8 significant bits, exact in double (Inf compares true).
    ** E1_8[j] = V8[j] * REC >= 4 is "either V16 of the pair >= 4" (V8 is their max); E1_16[k] is
    ** V16 * REC >= 2 * 2^E1_8.  The flags are data-dependent coin flips: kept branch-free, as
    ** bit masks without a loop-carried chain. */
    unsigned a2 = 0, a4 = 0;
    for (int k = 0; k < 16; k++) {
        double p = (double)u2f(v16[k]) * rec;
        a2 |= (unsigned)(p >= 2.0) << k;
        a4 |= (unsigned)(p >= 4.0) << k;
    }
    unsigned pair = (a4 | a4 >> 1) & 0x5555u;            /* bit 2j: E1_8[j] */
    unsigned f8 = pair | pair << 1;                      /* E1_8 of each micro-group */
    unsigned e16 = (a2 & ~f8) | (a4 & f8);
    unsigned e8 = 0;
    for (int j = 0; j < 8; j++) e8 |= ((pair >> (2 * j)) & 1u) << j;
    for (int k = 0; k < 16; k++) {
        unsigned d = ((f8 >> k) & 1) + ((e16 >> k) & 1);
        rmul[k] = rd[d];
        smul[k] = sd[d];
    }
    m->e6m2 = c;
    m->e1_8 = (uint8_t)e8;
    m->e1_16 = (uint16_t)e16;
}

/* Group maxima of |v| as bit patterns; returns nonzero if any v is NaN. */
static inline int hif4_maxima(const float *v, uint32_t v16[16])
{
    uint32_t all = 0;
    for (int k = 0; k < 16; k++) {
        uint32_t mx = 0;
        for (int i = 0; i < 4; i++) {
            uint32_t a = f2u(v[4 * k + i]) & 0x7fffffffu;
            mx = a > mx ? a : mx;
        }
        v16[k] = mx;
        all = mx > all ? mx : all;
    }
    return all > F32_INF;
}

/* q = TA or RNE of t = |v| * rmul, clamped at 7.  t has <= 32 significant bits, so t + 0.5 and
** t + 2^52 are exact where it matters (t < 8). */
static inline uint32_t hif4_q(double t, int rne)
{
    t = t < 7.0 ? t : 7.0;
    if (rne) return (uint32_t)((t + 0x1p52) - 0x1p52);
    return (uint32_t)(t + 0.5);
}

/* One unit, scalar: nibbles (if nib) and fake-quantized values (if y). */
static void hif4_unit_scalar(const float *v, int rne, qs_hif4_meta *m, uint8_t *nib, float *y)
{
    uint32_t v16[16];
    double rmul[16];
    float smul[16];
    if (hif4_maxima(v, v16)) {
        m->e6m2 = 0xFF;
        m->e1_8 = 0;
        m->e1_16 = 0;
        for (int i = 0; i < QS_HIF4_UNIT; i++) {
            if (nib) nib[i] = 0;
            if (y) y[i] = u2f(F32_QNAN);
        }
        return;
    }
    hif4_meta(v16, m, rmul, smul);
    for (int i = 0; i < QS_HIF4_UNIT; i++) {
        uint32_t b = f2u(v[i]), a = b & 0x7fffffffu;
        uint32_t q = hif4_q((double)u2f(a) * rmul[i / 4], rne);
        uint32_t neg = a != 0 ? b >> 31 : 0;     /* v < 0: -0.0 is not negative */
        if (nib) nib[i] = (uint8_t)(neg << 3 | q);
        if (y) y[i] = u2f(f2u((float)q * smul[i / 4]) | neg << 31);
    }
}

void qs_hif4_quant_unit(const float v[QS_HIF4_UNIT], int rne, qs_hif4_meta *m,
                        uint8_t nib[QS_HIF4_UNIT])
{
    hif4_unit_scalar(v, rne, m, nib, NULL);
}

#if HIF_X86
/* One unit's fake-quantize, AVX2.  Group j of 8 elements is one __m256: after two in-lane max
** shuffles every lane holds the maximum of its micro-group (V16), so the flags, the multiplier
** REC * 2^(2-d) and the decode scale E6M2 * 2^(d-2) are computed per lane, in double (exact, as
** in the scalar path), without leaving the vector registers.  Only the E6M2 choice is scalar. */
__attribute__((target("avx2"))) static void hif4_unit_avx2(const float *v, int rne, float *y, qs_hif4_meta *m)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i g[8], vm = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(v + 8 * j)), absm);
        a = _mm256_max_epu32(a, _mm256_shuffle_epi32(a, 0xB1));       /* pairs */
        a = _mm256_max_epu32(a, _mm256_shuffle_epi32(a, 0x4E));       /* quads: V16 in all 4 */
        g[j] = a;
        vm = _mm256_max_epu32(vm, a);
    }
    vm = _mm256_max_epu32(vm, _mm256_permute2x128_si256(vm, vm, 1));
    uint32_t vmax = (uint32_t)_mm256_cvtsi256_si32(vm);   /* NaN bits sort above Inf */
    if (vmax > F32_INF) {
        for (int i = 0; i < QS_HIF4_UNIT; i++) y[i] = u2f(F32_QNAN);
        if (m) *m = (qs_hif4_meta){0xFF, 0, 0};
        return;
    }
    uint8_t c = hif4_scale(vmax);
    unsigned e8 = 0, e16 = 0;   /* the flags, for the metadata (every lane of a group agrees) */
    double rec = qs_hif4_e6m2_rec(c), val = qs_hif4_e6m2_value(c);
    const __m256d vrec = _mm256_set1_pd(rec), two = _mm256_set1_pd(2.0), four = _mm256_set1_pd(4.0);
    const __m256d half = _mm256_set1_pd(0.5), dbl = _mm256_set1_pd(2.0);
    const __m256d r4 = _mm256_set1_pd(rec * 4), s4 = _mm256_set1_pd(val * 0.25);
    const __m256d seven = _mm256_set1_pd(7.0), add = _mm256_set1_pd(rne ? 0x1p52 : 0.5);
    for (int j = 0; j < 8; j++) {
        __m256 gj = _mm256_castsi256_ps(g[j]);
        __m256d p[2] = {_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(gj)), vrec),
                        _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(gj, 1)), vrec)};
        /* E1_8: V8 * REC >= 4, i.e. either micro-group's V16 * REC >= 4 */
        __m256d f8 = _mm256_or_pd(_mm256_cmp_pd(p[0], four, _CMP_GE_OQ),
                                  _mm256_cmp_pd(p[1], four, _CMP_GE_OQ));
        e8 |= (unsigned)(_mm256_movemask_pd(f8) & 1) << j;
        __m256d thr = _mm256_blendv_pd(two, four, f8);
        __m256d rf = _mm256_blendv_pd(r4, _mm256_mul_pd(r4, half), f8);
        __m256d sf = _mm256_blendv_pd(s4, _mm256_mul_pd(s4, dbl), f8);
        __m256i x8 = _mm256_loadu_si256((const __m256i *)(v + 8 * j));
        __m256 ax = _mm256_castsi256_ps(_mm256_and_si256(x8, absm));
        __m128 out[2];
        for (int h = 0; h < 2; h++) {
            __m256d b = _mm256_cmp_pd(p[h], thr, _CMP_GE_OQ);          /* E1_16 */
            e16 |= (unsigned)(_mm256_movemask_pd(b) & 1) << (2 * j + h);
            __m256d r = _mm256_blendv_pd(rf, _mm256_mul_pd(rf, half), b);
            __m256d s = _mm256_blendv_pd(sf, _mm256_mul_pd(sf, dbl), b);
            __m256d t = _mm256_cvtps_pd(h ? _mm256_extractf128_ps(ax, 1)
                                          : _mm256_castps256_ps128(ax));
            t = _mm256_min_pd(_mm256_mul_pd(t, r), seven);
            t = _mm256_add_pd(t, add);
            if (rne) t = _mm256_sub_pd(t, add);
            __m128i q = _mm256_cvttpd_epi32(t);
            out[h] = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(q), s));   /* exact */
        }
        __m256 r8 = _mm256_set_m128(out[1], out[0]);
        /* sign of x < 0 only (-0.0 is not negative) */
        __m256i neg = _mm256_andnot_si256(
            _mm256_cmpeq_epi32(_mm256_castps_si256(ax), _mm256_setzero_si256()),
            _mm256_andnot_si256(absm, x8));
        _mm256_storeu_si256((__m256i *)(y + 8 * j), _mm256_or_si256(_mm256_castps_si256(r8), neg));
    }
    if (m) *m = (qs_hif4_meta){c, (uint8_t)e8, (uint16_t)e16};
}
#endif

#if HIF_X86
/* The same unit with each group of 8 in one __m512d (the AVX2 kernel's two halves at once): the same
** double operations on every lane, so the same bits; a group's E1_8 is one mask test. */
__attribute__((target("avx512f"))) static void hif4_unit_avx512(const float *v, int rne, float *y, qs_hif4_meta *m)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i g[8], vm = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(v + 8 * j)), absm);
        a = _mm256_max_epu32(a, _mm256_shuffle_epi32(a, 0xB1));
        a = _mm256_max_epu32(a, _mm256_shuffle_epi32(a, 0x4E));
        g[j] = a;
        vm = _mm256_max_epu32(vm, a);
    }
    vm = _mm256_max_epu32(vm, _mm256_permute2x128_si256(vm, vm, 1));
    uint32_t vmax = (uint32_t)_mm256_cvtsi256_si32(vm);
    if (vmax > F32_INF) {
        for (int i = 0; i < QS_HIF4_UNIT; i++) y[i] = u2f(F32_QNAN);
        if (m) *m = (qs_hif4_meta){0xFF, 0, 0};
        return;
    }
    uint8_t c = hif4_scale(vmax);
    unsigned e8 = 0, e16 = 0;
    double rec = qs_hif4_e6m2_rec(c), val = qs_hif4_e6m2_value(c);
    const __m512d vrec = _mm512_set1_pd(rec), two = _mm512_set1_pd(2.0), four = _mm512_set1_pd(4.0);
    const __m512d r4 = _mm512_set1_pd(rec * 4), s4 = _mm512_set1_pd(val * 0.25);
    const __m512d r2 = _mm512_set1_pd(rec * 4 * 0.5), s8 = _mm512_set1_pd(val * 0.25 * 2.0);
    const __m512d seven = _mm512_set1_pd(7.0), add = _mm512_set1_pd(rne ? 0x1p52 : 0.5);
    const __m512d half = _mm512_set1_pd(0.5), dbl = _mm512_set1_pd(2.0);
    for (int j = 0; j < 8; j++) {
        __m512d p = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(g[j])), vrec);
        int f8 = _mm512_cmp_pd_mask(p, four, _CMP_GE_OQ) != 0;        /* E1_8: either V16 * REC >= 4 */
        e8 |= (unsigned)f8 << j;
        __m512d thr = f8 ? four : two, rf = f8 ? r2 : r4, sf = f8 ? s8 : s4;
        __mmask8 b = _mm512_cmp_pd_mask(p, thr, _CMP_GE_OQ);              /* E1_16 of both halves */
        e16 |= (unsigned)((b & 1) | ((b >> 4) & 1) << 1) << (2 * j);
        __m512d r = _mm512_mask_blend_pd(b, rf, _mm512_mul_pd(rf, half));
        __m512d sc = _mm512_mask_blend_pd(b, sf, _mm512_mul_pd(sf, dbl));
        __m256i x8 = _mm256_loadu_si256((const __m256i *)(v + 8 * j));
        __m256 ax = _mm256_castsi256_ps(_mm256_and_si256(x8, absm));
        __m512d t = _mm512_min_pd(_mm512_mul_pd(_mm512_cvtps_pd(ax), r), seven);
        t = _mm512_add_pd(t, add);
        if (rne) t = _mm512_sub_pd(t, add);
        __m256i q = _mm512_cvttpd_epi32(t);
        __m256 r8 = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(q), sc));   /* exact */
        __m256i neg = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_castps_si256(ax), _mm256_setzero_si256()),
                                          _mm256_andnot_si256(absm, x8));
        _mm256_storeu_si256((__m256i *)(y + 8 * j), _mm256_or_si256(_mm256_castps_si256(r8), neg));
    }
    if (m) *m = (qs_hif4_meta){c, (uint8_t)e8, (uint16_t)e16};
}
#endif

static int hif4_check(const qs_qopts *o, qs_err *e)
{
    if (o->block != 0 && o->block != QS_HIF4_UNIT)
        return qs_fail(e, "hif4: the unit is 64 elements; block size %d is not supported",
                       o->block);
    if (o->round != QS_RND_DEFAULT && o->round != QS_RND_TA && o->round != QS_RND_RNE)
        return qs_fail(e, "hif4: elements round with 'ta' (default) or 'rne' only");
    return 0;
}

/* Iterate the units of a run: full units in place, the last partial one through a zero-padded
** copy. */
static int hif4_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n,
                       uint32_t *codes, uint8_t *meta, float *tensor_scale, qs_err *e)
{
    if (hif4_check(o, e)) return -1;
    if (tensor_scale) *tensor_scale = 1.0f;
    int rne = o->round == QS_RND_RNE;
    uint8_t nib[QS_HIF4_UNIT];
    float pad[QS_HIF4_UNIT];
    qs_hif4_meta m;
    for (size_t u = 0; u * QS_HIF4_UNIT < n; u++) {
        size_t i0 = u * QS_HIF4_UNIT, cnt = n - i0 < QS_HIF4_UNIT ? n - i0 : QS_HIF4_UNIT;
        const float *v = x + i0;
        if (cnt < QS_HIF4_UNIT) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, v, cnt * sizeof *pad);
            v = pad;
        }
        hif4_unit_scalar(v, rne, &m, nib, NULL);
        qs_hif4_meta_store(&m, meta + u * QS_HIF4_META);
        for (size_t i = 0; i < cnt; i++) codes[i0 + i] = nib[i];
    }
    return 0;
}

static int hif4_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes,
                       const uint8_t *meta, float tensor_scale, size_t n, float *y, qs_err *e)
{
    for (size_t u = 0; u * QS_HIF4_UNIT < n; u++) {
        size_t i0 = u * QS_HIF4_UNIT, cnt = n - i0 < QS_HIF4_UNIT ? n - i0 : QS_HIF4_UNIT;
        qs_hif4_meta m;
        qs_hif4_meta_load(meta + u * QS_HIF4_META, &m);
        double val = qs_hif4_e6m2_value(m.e6m2);
        for (size_t i = 0; i < cnt; i++) {
            uint32_t c = codes[i0 + i];
            if (c > 0xf)
                return qs_fail(e, "hif4: code 0x%x at element %zu is wider than 4 bits",
                               (unsigned)c, i0 + i);
            if (m.e6m2 == 0xFF) { y[i0 + i] = u2f(F32_QNAN); continue; }
            int d = ((m.e1_8 >> (i / 8)) & 1) + ((m.e1_16 >> (i / 4)) & 1);
            float s = (float)(val * (double)(1 << d) * 0.25);
            y[i0 + i] = u2f(f2u((float)(c & 7) * s) | (c >> 3) << 31);
        }
    }
    return 0;
}

void qs_hif4_fakeq_run(int simd, const float *x, size_t n, float *y, int rne)
{
    qs_hif4_fakeq_meta_run(simd, x, n, y, NULL, rne);
}

void qs_hif4_fakeq_meta_run(int simd, const float *x, size_t n, float *y, uint8_t *meta, int rne)
{
    int avx2 = avx2_ok(simd);
#if HIF_X86
    int avx512 = simd >= QS_SIMD_AVX512 && qs_simd_cpu() >= QS_SIMD_AVX512;
#endif
    float pad[QS_HIF4_UNIT], out[QS_HIF4_UNIT];
    qs_hif4_meta m;
    for (size_t i0 = 0; i0 < n; i0 += QS_HIF4_UNIT) {
        size_t cnt = n - i0 < QS_HIF4_UNIT ? n - i0 : QS_HIF4_UNIT;
        const float *v = x + i0;
        float *w = y + i0;
        if (cnt < QS_HIF4_UNIT) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, v, cnt * sizeof *pad);
            v = pad;
            w = out;
        }
#if HIF_X86
        if (avx512) hif4_unit_avx512(v, rne, w, &m);
        else if (avx2) hif4_unit_avx2(v, rne, w, &m);
        else
#endif
            hif4_unit_scalar(v, rne, &m, NULL, w);
        if (w == out) memcpy(y + i0, out, cnt * sizeof *out);
        if (meta) qs_hif4_meta_store(&m, meta + i0 / QS_HIF4_UNIT * QS_HIF4_META);
    }
    (void)avx2;
}

static int hif4_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y,
                      qs_err *e)
{
    if (hif4_check(o, e)) return -1;
    qs_hif4_fakeq_run(hif_level(), x, n, y, o->round == QS_RND_RNE);
    return 0;
}

/* The analysis engine's door: fakeq with encode's metadata, and the element step and saturation level
** of each group of 4 from it (the unit's E6M2 times 2^(flags of the 8 and the 4) / 4, as decode uses). */
static int hif4_fakeq_meta(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *meta,
                           qs_err *e)
{
    (void)f;
    if (hif4_check(o, e)) return -1;
    qs_hif4_fakeq_meta_run(hif_level(), x, n, y, meta, o->round == QS_RND_RNE);
    return 0;
}

static void hif4_seg_scales(const qs_format *f, const qs_qopts *o, const uint8_t *meta, size_t n, float *S, float *Q)
{
    (void)f; (void)o;
    for (size_t u = 0; u < n; u++) {
        qs_hif4_meta m;
        qs_hif4_meta_load(meta + u * QS_HIF4_META, &m);
        double val = qs_hif4_e6m2_value(m.e6m2);
        float sd[3], qd[3];   /* the unit's three levels: flags 0, 1, 2 */
        for (int d = 0; d < 3; d++) {
            float s = (float)(val * (double)(1 << d) * 0.25);
            sd[d] = m.e6m2 == 0xFF ? NAN : 4.0f * s;   /* the step of q = 4 (1.0) */
            qd[d] = 7.0f * s;
        }
        for (size_t k = 0; k < QS_HIF4_UNIT / 4; k++) {
            int d = ((m.e1_8 >> (k / 2)) & 1) + ((m.e1_16 >> k) & 1);
            S[u * (QS_HIF4_UNIT / 4) + k] = sd[d];
            Q[u * (QS_HIF4_UNIT / 4) + k] = qd[d];
        }
    }
}

/* ================================================================================================
** Registry entries
** ============================================================================================== */

#define RM(r) (1u << (r))

static int hif8_label(uint32_t code, char *buf, size_t cap) { return qs_hif8_fields((uint8_t)code, buf, cap); }
static double hif4_scale_value(unsigned c) { return qs_hif4_e6m2_value((uint8_t)c); }

static void hif4_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                           char *out, size_t cap)
{
    (void)f; (void)o; (void)ts; (void)step;
    qs_hif4_meta hm;
    qs_hif4_meta_load(m, &hm);
    char v[32], g8[9], g16[17];
    num(qs_hif4_e6m2_value(hm.e6m2), v, sizeof v);
    for (int i = 0; i < 8; i++) g8[i] = (hm.e1_8 >> i) & 1 ? '2' : '1';
    for (int i = 0; i < 16; i++) g16[i] = (hm.e1_16 >> i) & 1 ? '2' : '1';
    g8[8] = g16[16] = 0;
    snprintf(out, cap, "E6M2 0x%02x = %s; x2 per 8: %s; per 4: %s", hm.e6m2, v, g8, g16);
}

const qs_format qs_formats_hifloat[] = {
    {
        .name = "hif8",
        .family = QS_FAM_HIFLOAT,
        .elem = QS_ELEM_TAPERED,
        .code_label = hif8_label,
        .label_width = 11,
        .field_legend = "s d e m",
        .summary = "HiFloat8: tapered 8-bit float (dot-coded exponent width), 38 binades, TA",
        .elem_bits = 8,
        .block = 1,
        .has_inf = 1,
        .has_nan = 1,
        .max_finite = 32768.0,
        .min_normal = 0x1p-15,
        .min_subnormal = 0x1p-22,
        .default_round = QS_RND_TA,
        .round_modes = RM(QS_RND_TA) | RM(QS_RND_RNE) | RM(QS_RND_HR) | RM(QS_RND_SR) |
                       RM(QS_RND_RTZ),
        .encode = hif8_encode,
        .decode = hif8_decode,
        .fakeq = hif8_fakeq,
        .code_value = hif8_code_value,
        .ncodes = 256,
        .scale_target = 15.0,   /* 1.875 * 2^3: the last binade with 3 mantissa bits (cast_scale.h) */
    },
    {
        .name = "hif4",
        .family = QS_FAM_HIFLOAT,
        .elem = QS_ELEM_SIGN_MAG,
        .scale_kind = QS_SK_HIF4,
        .scale_value = hif4_scale_value,
        .meta_text = hif4_meta_text,
        .summary = "HiFloat4: 64 S1P2 elements, E6M2 scale + 8x E1 + 16x E1 sub-scales, 4.5 bits",
        .elem_bits = 4,
        .ebits = 1, .mbits = 2, .bias = 1,       /* S1P2 = E1M2 (§2.3) */
        .block = QS_HIF4_UNIT,
        .meta_bytes = QS_HIF4_META,
        .meta_bits = 32,
        .has_inf = 0,
        .has_nan = 1,
        .max_finite = 344064.0,
        .min_normal = 0x1p-48,
        .min_subnormal = 0x1p-50,
        .default_round = QS_RND_TA,
        .round_modes = RM(QS_RND_TA) | RM(QS_RND_RNE),
        .encode = hif4_encode,
        .decode = hif4_decode,
        .fakeq = hif4_fakeq,
        .grid = QS_GRID(0, 0, 2),           /* S1P2: q / 4, q = 0..7 */
        .scale_seg = 4,
        .seg_scales = hif4_seg_scales,
        .fakeq_meta = hif4_fakeq_meta,
    },
};
const size_t qs_formats_hifloat_n = sizeof qs_formats_hifloat / sizeof qs_formats_hifloat[0];

