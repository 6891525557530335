/*
** Element minifloats (minifloat.h): exact rounding of float32 values onto the grid of a small
** binary floating-point format, code encode/decode, and the E8M0 scale type.
**
** Spec: shared/spec/formats-mx.md §1.2 (E8M0), §1.3-1.4 (element formats and value tables), §1.7
** step 5 (the integer rounding method generalised here to every format and mode), §2.2 (ml_dtypes
** semantics, which the non-saturating casts follow), §7.2 (vectors T29-T31).
**
** Rounding is done on the integers of the float32 representation: the input is split into a
** 24-bit significand and an exponent, shifted onto the target's quantum 2^q (q = max(e, emin) - M)
** and rounded by the mode using the exact remainder.  No floating-point arithmetic is involved
** (except the SR comparison, which is exact in double), so the result is the correctly rounded
** grid point, subnormal targets and float32-subnormal inputs included.
**
** Decisions where the header leaves room (all match ml_dtypes 0.6.0 where it defines them):
**   - NaN input to a FINITE format (fp6 e3m2/e2m3, fp4 e2m1; no NaN code): ml_dtypes returns its
**     quiet_NaN(), defined as the negative-zero code, with the input's sign applied by negation,
**     so +NaN -> -0 code (0x8 / 0x20) and -NaN -> +0 code (0x0), whatever the payload.  We do the
**     same, with or without sat (qs_mf_round(+NaN) = -0.0f).  Spec §2.2, T31.
**   - NaN input to IEEE/FN formats gives the canonical quiet NaN with the input's sign
**     (fp16 0x7E00/0xFE00, bf16 0x7FC0/0xFFC0, e5m2 0x7E/0xFE, e4m3 0x7F/0xFF); ml_dtypes does the
**     same except that numpy's float16 keeps payload bits (tests compare NaN codes by NaN-ness and
**     sign).  Decoding any NaN code gives a quiet float32 NaN: sign | 0x7FC00000 | payload.
**   - fp32 is the identity, NaN payloads included; only Inf with sat changes (to ±FLT_MAX).
**   - Overflow under RTZ gives ±max for every kind (IEEE 754 §7.4: round-toward-zero never
**     overflows to Inf); SR that rounds up past max overflows like RNE does (Inf / NaN / ±max).
**   - QS_RND_DEFAULT and QS_RND_HR are treated as RNE here (HR is a HiF8 mode).
**   - QS_RND_TZ (nearest, ties toward zero) is ggml's CPU element rule: its lowest-index search
**     over a table ordered by magnitude keeps the smaller magnitude on a tie (formats-mx.md §2.5,
**     T10).  It runs on the scalar path (qs_mf_round_n vectorises RNE only); under overflow it
**     behaves as RNE does (an exact tie just above max goes down to max: e4m3 464 -> 448).
**   - E8M0 (qs_e8m0_encode), ml_dtypes float8_e8m0fnu cast, measured on every float32 subnormal
**     and the boundaries: NaN, ±Inf, ±0 and every negative value -> 0xFF (NaN); a normal x =
**     1.f * 2^e goes to the nearest power of two with ties *up* (code e+127, plus one when the
**     first fraction bit is set: 1.5 -> 2, 3 -> 4, 1.4999 -> 1), and a result above 2^127
**     (x >= 1.5 * 2^127) is 0xFF; an FP32-subnormal x rounds up: x <= 2^-127 -> 0x00,
**     2^-127 < x < 2^-126 -> 0x01 (ml_dtypes' quirk, kept for conformance).  RNE, TA, SR and the
**     default all use this rule (nearest-ties-up is ties-away for positive values); RTZ takes the
**     power of two at or below x (FP32 subnormals -> 0x00, [2^127, Inf) -> 0xFE).
*/
#include "fbits.h"
#include "minifloat.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "simd.h"
#include "sr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define QS_HAVE_X86 1
#endif

const qs_minifloat qs_mf_fp32 = {"fp32", QS_MF_LAYOUT_fp32};
const qs_minifloat qs_mf_fp16 = {"fp16", QS_MF_LAYOUT_fp16};
const qs_minifloat qs_mf_bf16 = {"bf16", QS_MF_LAYOUT_bf16};
const qs_minifloat qs_mf_e4m3 = {"e4m3", QS_MF_LAYOUT_e4m3};
const qs_minifloat qs_mf_e5m2 = {"e5m2", QS_MF_LAYOUT_e5m2};
const qs_minifloat qs_mf_e3m2 = {"e3m2", QS_MF_LAYOUT_e3m2};
const qs_minifloat qs_mf_e2m3 = {"e2m3", QS_MF_LAYOUT_e2m3};
const qs_minifloat qs_mf_e2m1 = {"e2m1", QS_MF_LAYOUT_e2m1};


static inline int is_fp32(const qs_minifloat *f) { return f->ebits == 8 && f->mbits == 23; }

/* Magnitude code of the largest finite value. */
static inline uint32_t max_code(const qs_minifloat *f)
{
    uint32_t all = (1u << (f->ebits + f->mbits)) - 1;
    switch (f->kind) {
    case QS_MF_IEEE: return (((1u << f->ebits) - 1) << f->mbits) - 1;
    case QS_MF_FN: return all - 1;
    default: return all;
    }
}

/* Magnitude codes of Inf (IEEE) and of the canonical quiet NaN (IEEE and FN). */
static inline uint32_t inf_code(const qs_minifloat *f) { return ((1u << f->ebits) - 1) << f->mbits; }
static inline uint32_t nan_code(const qs_minifloat *f)
{
    if (f->kind == QS_MF_FN) return (1u << (f->ebits + f->mbits)) - 1;
    return inf_code(f) | (1u << (f->mbits - 1));
}

/*
** Magnitude code of a = |x| (float32 bits, finite, non-zero) rounded by mode; may exceed
** max_code (overflow, handled by the caller).  §1.7 step 5, generalised.
*/
static uint32_t round_mag(const qs_minifloat *f, uint32_t a, qs_round mode, double u)
{
    const int M = f->mbits, emin = 1 - f->bias;
    int e;
    uint32_t sig;
    if (a < 0x00800000u) { e = -126; sig = a; }              /* float32 subnormal */
    else { e = (int)(a >> 23) - 127; sig = (a & 0x7fffffu) | 0x800000u; }
    int ep = e > emin ? e : emin;                         /* exponent of the target's binade */
    int shift = 23 + ep - M - e;                          /* value = sig * 2^-shift quanta, >= 0 */
    uint32_t fl, rem, half;
    if (shift > 24) { fl = 0; rem = sig; half = 0; }      /* sig < 2^24 <= half: below any tie */
    else if (shift == 0) { fl = sig; rem = 0; half = 0; }
    else { fl = sig >> shift; rem = sig & ((1u << shift) - 1); half = 1u << (shift - 1); }
    int up = 0;
    if (rem != 0) {
        switch (mode) {
        case QS_RND_RTZ: up = 0; break;
        case QS_RND_TA: up = half != 0 && rem >= half; break;
        case QS_RND_TZ: up = half != 0 && rem > half; break;
        case QS_RND_SR: up = u < ldexp((double)rem, -shift); break;  /* exact in double */
        default: up = half != 0 && (rem > half || (rem == half && (fl & 1))); break;
        }
    }
    /* Exponent field and significand add: a carry out of the significand bumps the exponent. */
    return ((uint32_t)(ep - emin) << M) + fl + (uint32_t)up;
}

uint32_t qs_mf_encode(const qs_minifloat *f, float x, qs_round mode, double u, int sat)
{
    const int nb = f->ebits + f->mbits;
    uint32_t b = f2u(x), a = b & 0x7fffffffu, sbit = (b >> 31) << nb;
    uint32_t maxc = max_code(f);
    if (is_fp32(f)) {
        if (a == 0x7f800000u && sat) return sbit | maxc;
        return b;                                         /* identity, NaN payload kept */
    }
    if (a > 0x7f800000u) {                                /* NaN */
        if (f->kind == QS_MF_FINITE) return sbit ^ (1u << nb);   /* ml_dtypes: -(±0 code) */
        return sbit | nan_code(f);
    }
    if (a == 0x7f800000u) {                               /* ±Inf */
        if (sat || f->kind == QS_MF_FINITE) return sbit | maxc;
        return sbit | (f->kind == QS_MF_IEEE ? inf_code(f) : nan_code(f));
    }
    if (a == 0) return sbit;
    uint32_t mc = round_mag(f, a, mode, u);
    if (mc > maxc) {
        if (sat || f->kind == QS_MF_FINITE || mode == QS_RND_RTZ) return sbit | maxc;
        return sbit | (f->kind == QS_MF_IEEE ? inf_code(f) : nan_code(f));
    }
    return sbit | mc;
}

float qs_mf_decode(const qs_minifloat *f, uint32_t code)
{
    if (is_fp32(f)) return u2f(code);
    const int M = f->mbits, nb = f->ebits + f->mbits;
    uint32_t s = ((code >> nb) & 1u) << 31, mc = code & ((1u << nb) - 1);
    uint32_t e = mc >> M, m = mc & ((1u << M) - 1);
    if (f->kind == QS_MF_IEEE && e == (1u << f->ebits) - 1)
        return u2f(s | (m ? 0x7fc00000u | (m << (23 - M)) : 0x7f800000u));
    if (f->kind == QS_MF_FN && mc == (1u << nb) - 1) return u2f(s | 0x7fc00000u);
    if (e == 0) {                                         /* subnormal: m * 2^(emin - M), exact */
        float v = ldexpf((float)m, 1 - f->bias - M);
        return s ? -v : v;
    }
    return u2f(s | ((e - (uint32_t)f->bias + 127u) << 23) | (m << (23 - M)));
}

float qs_mf_round(const qs_minifloat *f, float x, qs_round mode, double u, int sat)
{
    if (is_fp32(f)) return (sat && isinf(x)) ? copysignf(FLT_MAX, x) : x;
    return qs_mf_decode(f, qs_mf_encode(f, x, mode, u, sat));
}

float qs_mf_value_e4m3(unsigned c) { return qs_mf_decode(&qs_mf_e4m3, c); }
float qs_mf_value_e5m2(unsigned c) { return qs_mf_decode(&qs_mf_e5m2, c); }
float qs_mf_value_e3m2(unsigned c) { return qs_mf_decode(&qs_mf_e3m2, c); }
float qs_mf_value_e2m3(unsigned c) { return qs_mf_decode(&qs_mf_e2m3, c); }
float qs_mf_value_e2m1(unsigned c) { return qs_mf_decode(&qs_mf_e2m1, c); }

double qs_mf_max(const qs_minifloat *f) { return qs_mf_decode(f, max_code(f)); }
double qs_mf_min_normal(const qs_minifloat *f) { return ldexp(1.0, 1 - f->bias); }
double qs_mf_min_subnormal(const qs_minifloat *f) { return ldexp(1.0, 1 - f->bias - f->mbits); }

/* ---- E8M0 (§1.2; cast semantics at the top of this file) ---- */

uint8_t qs_e8m0_encode(float x, qs_round mode)
{
    uint32_t b = f2u(x);
    if ((b >> 31) || b == 0 || b >= 0x7f800000u) return 0xFF;   /* negative, ±0, Inf, NaN */
    if (b < 0x00800000u) {                                  /* float32 subnormal */
        if (mode == QS_RND_RTZ) return 0x00;
        return b <= 0x00400000u ? 0x00 : 0x01;              /* ml_dtypes rounds these up */
    }
    uint32_t e = b >> 23;
    if (mode == QS_RND_RTZ) return (uint8_t)e;              /* <= 254 */
    e += (b >> 22) & 1u;                                    /* nearest, ties up */
    return e > 254 ? 0xFF : (uint8_t)e;
}

float qs_e8m0_decode(uint8_t c)
{
    if (c == 0xFF) return NAN;
    return u2f(c == 0 ? 0x00400000u : (uint32_t)c << 23);  /* 2^-127 is a float32 subnormal */
}

/* ---- array rounding and its vectorised RNE paths (simd.h) ----
**
** The RNE kernels use the bit form of §1.7 step 5 on all lanes at once: a target-normal result is
** the float32 bits rounded to M mantissa bits by an integer add (a carry into the exponent is the
** correct round-up); a target-subnormal result is (|x| + C) - C in float32 with C = 2^(emin-M+23),
** whose ulp is the target's subnormal step, so the hardware addition does the RNE (exact: no
** FTZ/DAZ, MXCSR at its default).  Then overflow, Inf and NaN are blended in as in qs_mf_encode,
** and the sign is put back with an XOR (which also turns a FINITE format's NaN marker 0x80000000
** into ml_dtypes' -(±0)).
*/
typedef struct rne_consts {
    uint32_t rbias, mask, minnorm, maxb, ovf, nanv;
    int shiftm;
    float c;
} rne_consts;

static void rne_setup(const qs_minifloat *f, int sat, rne_consts *k)     /* not for fp32 (M = 23) */
{
    const int M = f->mbits, emin = 1 - f->bias;
    k->shiftm = 23 - M;
    k->rbias = (1u << (22 - M)) - 1;
    k->mask = ~((1u << (23 - M)) - 1);
    k->minnorm = (uint32_t)(emin + 127) << 23;
    k->c = u2f((uint32_t)(emin - M + 23 + 127) << 23);   /* 2^(emin-M+23): normal for every format */
    k->maxb = f2u(qs_mf_decode(f, max_code(f)));
    if (sat || f->kind == QS_MF_FINITE) k->ovf = k->maxb;
    else k->ovf = f->kind == QS_MF_IEEE ? 0x7f800000u : 0x7fc00000u;
    k->nanv = f->kind == QS_MF_FINITE ? 0x80000000u : 0x7fc00000u;
}

/* The same bit form in portable C, one element at a time (compilers may auto-vectorise it with
** the baseline ISA): the scalar level's RNE loop, tested against qs_mf_round like the others. */
static size_t rne_portable(const rne_consts *k, const float *x, size_t n, float *y)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b = f2u(x[i]), a = b & 0x7fffffffu, s = b ^ a;
        uint32_t r = (a + k->rbias + ((a >> k->shiftm) & 1u)) & k->mask;
        if (a < k->minnorm) r = f2u((u2f(a) + k->c) - k->c);
        if (r > k->maxb) r = k->ovf;
        if (a > 0x7f800000u) r = k->nanv;
        y[i] = u2f(r ^ s);
    }
    return n;
}

#ifdef QS_HAVE_X86
__attribute__((target("avx2")))
static size_t rne_avx2(const rne_consts *k, const float *x, size_t n, float *y)
{
    const __m256i rbias = _mm256_set1_epi32((int)k->rbias), mask = _mm256_set1_epi32((int)k->mask);
    const __m256i one = _mm256_set1_epi32(1), absm = _mm256_set1_epi32(0x7fffffff);
    const __m256i minnorm = _mm256_set1_epi32((int)k->minnorm), maxb = _mm256_set1_epi32((int)k->maxb);
    const __m256i ovf = _mm256_set1_epi32((int)k->ovf), nanv = _mm256_set1_epi32((int)k->nanv);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256 c = _mm256_set1_ps(k->c);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i a = _mm256_and_si256(b, absm);
        __m256i s = _mm256_xor_si256(b, a);
        __m256i odd = _mm256_and_si256(_mm256_srl_epi32(a, sh), one);
        __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(a, rbias), odd), mask);
        __m256 t = _mm256_sub_ps(_mm256_add_ps(_mm256_castsi256_ps(a), c), c);
        /* all compared quantities are in [0, 0x7fffffff] except r of a NaN, replaced last */
        r = _mm256_blendv_epi8(r, _mm256_castps_si256(t), _mm256_cmpgt_epi32(minnorm, a));
        r = _mm256_blendv_epi8(r, ovf, _mm256_cmpgt_epi32(r, maxb));
        r = _mm256_blendv_epi8(r, nanv, _mm256_cmpgt_epi32(a, inf));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_xor_si256(r, s)));
    }
    return i;
}

__attribute__((target("avx512f")))
static size_t rne_avx512(const rne_consts *k, const float *x, size_t n, float *y)
{
    const __m512i rbias = _mm512_set1_epi32((int)k->rbias), mask = _mm512_set1_epi32((int)k->mask);
    const __m512i one = _mm512_set1_epi32(1), absm = _mm512_set1_epi32(0x7fffffff);
    const __m512i minnorm = _mm512_set1_epi32((int)k->minnorm), maxb = _mm512_set1_epi32((int)k->maxb);
    const __m512i ovf = _mm512_set1_epi32((int)k->ovf), nanv = _mm512_set1_epi32((int)k->nanv);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    const __m512 c = _mm512_set1_ps(k->c);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm);
    size_t i = 0;
    for (; i < n; i += 16) {
        /* full vectors unmasked (masked memory ops are slow on some CPUs); the tail masked */
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i b = m == 0xffff ? _mm512_castps_si512(_mm512_loadu_ps(x + i))
                                : _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
        __m512i a = _mm512_and_si512(b, absm);
        __m512i s = _mm512_xor_si512(b, a);
        __m512i odd = _mm512_and_si512(_mm512_srl_epi32(a, sh), one);
        __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(a, rbias), odd), mask);
        __m512 t = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), c), c);
        r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epu32_mask(a, minnorm), _mm512_castps_si512(t));
        r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(r, maxb), ovf);
        r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(a, inf), nanv);
        __m512 out = _mm512_castsi512_ps(_mm512_xor_si512(r, s));
        if (m == 0xffff) _mm512_storeu_ps(y + i, out);
        else _mm512_mask_storeu_ps(y + i, m, out);
    }
    return n;
}
#endif

/*
** Codes of values already on the grid (the output of the rounding above, NaN and Inf included):
** a target-subnormal magnitude m * 2^(emin-M) is bits(a + C) - bits(C) (exact: a is a multiple of
** C's ulp), a normal one is its float32 bits shifted down with the exponent re-biased; NaN and Inf
** take their codes; the sign goes on top.
*/
typedef struct code_consts {
    uint32_t minnorm, cbits, rebias, nanc, infc, nanb;
    int shiftm, signsh;
    float c;
} code_consts;

static void code_setup(const qs_minifloat *f, code_consts *k)
{
    const int M = f->mbits, emin = 1 - f->bias;
    k->shiftm = 23 - M;
    k->signsh = 31 - (f->ebits + f->mbits);
    k->minnorm = (uint32_t)(emin + 127) << 23;
    k->c = u2f((uint32_t)(emin - M + 23 + 127) << 23);
    k->cbits = f2u(k->c);
    k->rebias = (uint32_t)(127 - f->bias) << M;
    k->infc = f->kind == QS_MF_IEEE ? inf_code(f) : nan_code(f);  /* FN: no Inf value reaches here */
    k->nanc = f->kind == QS_MF_FINITE ? 0 : nan_code(f);
    k->nanb = 0x7f800000u;
}

static size_t codes_portable(const code_consts *k, const float *y, size_t n, uint32_t *codes)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b = f2u(y[i]), a = b & 0x7fffffffu;
        uint32_t c = a < k->minnorm ? f2u(u2f(a) + k->c) - k->cbits : (a >> k->shiftm) - k->rebias;
        if (a == k->nanb) c = k->infc;
        if (a > k->nanb) c = k->nanc;
        codes[i] = c | ((b >> 31) << (31 - k->signsh));
    }
    return n;
}

#ifdef QS_HAVE_X86
__attribute__((target("avx2")))
static size_t codes_avx2(const code_consts *k, const float *y, size_t n, uint32_t *codes)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), minnorm = _mm256_set1_epi32((int)k->minnorm);
    const __m256i cbits = _mm256_set1_epi32((int)k->cbits), rebias = _mm256_set1_epi32((int)k->rebias);
    const __m256i infb = _mm256_set1_epi32((int)k->nanb), infc = _mm256_set1_epi32((int)k->infc);
    const __m256i nanc = _mm256_set1_epi32((int)k->nanc);
    const __m256 c = _mm256_set1_ps(k->c);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_castps_si256(_mm256_loadu_ps(y + i));
        __m256i a = _mm256_and_si256(b, absm);
        __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), c)), cbits);
        __m256i nor = _mm256_sub_epi32(_mm256_srl_epi32(a, sh), rebias);
        __m256i r = _mm256_blendv_epi8(nor, sub, _mm256_cmpgt_epi32(minnorm, a));
        r = _mm256_blendv_epi8(r, infc, _mm256_cmpeq_epi32(a, infb));
        r = _mm256_blendv_epi8(r, nanc, _mm256_cmpgt_epi32(a, infb));
        r = _mm256_or_si256(r, _mm256_srl_epi32(_mm256_andnot_si256(absm, b), ssh));
        _mm256_storeu_si256((__m256i *)(codes + i), r);
    }
    return i;
}

__attribute__((target("avx512f")))
static size_t codes_avx512(const code_consts *k, const float *y, size_t n, uint32_t *codes)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), minnorm = _mm512_set1_epi32((int)k->minnorm);
    const __m512i cbits = _mm512_set1_epi32((int)k->cbits), rebias = _mm512_set1_epi32((int)k->rebias);
    const __m512i infb = _mm512_set1_epi32((int)k->nanb), infc = _mm512_set1_epi32((int)k->infc);
    const __m512i nanc = _mm512_set1_epi32((int)k->nanc);
    const __m512 c = _mm512_set1_ps(k->c);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_castps_si512(_mm512_loadu_ps(y + i));
        __m512i a = _mm512_and_si512(b, absm);
        __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), c)), cbits);
        __m512i r = _mm512_sub_epi32(_mm512_srl_epi32(a, sh), rebias);
        r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epu32_mask(a, minnorm), sub);
        r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epu32_mask(a, infb), infc);
        r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(a, infb), nanc);
        r = _mm512_or_si512(r, _mm512_srl_epi32(_mm512_andnot_si512(absm, b), ssh));
        _mm512_storeu_si512((void *)(codes + i), r);
    }
    return i;
}
#endif

/* fp32 as a cast: the identity on the bits, NaN payloads kept; with sat ±Inf -> ±FLT_MAX.  A copy
** (memmove: x and y may be the same array), then with sat a fix-up pass that the compiler
** vectorises (a select on the bits). */
static void fp32_ident(const float *x, size_t n, void *out, int sat)
{
    if ((const void *)x != out) memmove(out, x, n * sizeof *x);
    if (!sat) return;
    unsigned char *o = out;                               /* float or uint32_t: bytes, no aliasing */
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, o + 4 * i, 4);
        b = (b & 0x7fffffffu) == 0x7f800000u ? (b & 0x80000000u) | 0x7f7fffffu : b;
        memcpy(o + 4 * i, &b, 4);
    }
}

/* ---- stochastic rounding on arrays ----
** The scalar SR of round_mag on the integers, without the double comparison: with U = z >> 11 the
** draw's 53 bits (u = U * 2^-53, sr.c), "u < rem * 2^-shift" is U < rem << (53 - shift) when
** shift <= 53, and U < ceil(rem * 2^-(shift - 53)) = ((rem - 1) >> (shift - 53)) + 1 beyond (rem > 0
** there: rem = sig).  The draw is sr.c's SplitMix64 with the seed's mix taken once per call.  The
** code is then decoded as qs_mf_decode does, and zero, overflow, Inf and NaN take the RNE kernels'
** values (rne_consts), so every bit equals qs_mf_round(f, x, QS_RND_SR, qs_sr_uniform(...), sat):
** tested on random and edge inputs at every level (tests/unit/test_minifloat.c). */
typedef struct sr_consts {
    rne_consts r;
    uint32_t eminb, maxc, rebias, cbits;   /* biased float32 exponent of 2^emin; codes; decode */
    int m, shiftm;
    uint64_t smix;                         /* the seed's mix (sr.c) */
} sr_consts;

static inline uint64_t sr_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define SR_GAMMA 0x9e3779b97f4a7c15ULL

static void sr_setup(const qs_minifloat *f, int sat, uint64_t seed, sr_consts *k)
{
    rne_setup(f, sat, &k->r);
    k->eminb = (uint32_t)(1 - f->bias + 127);
    k->maxc = max_code(f);
    k->m = f->mbits;
    k->shiftm = 23 - f->mbits;
    k->rebias = (uint32_t)(127 - f->bias) << 23;
    k->cbits = f2u(k->r.c);
    k->smix = sr_mix64(seed ^ 0x5851f42d4c957f2dULL);
}

/* One element: float32 bits b, the draw's 53 bits U. */
static inline uint32_t sr_one(const sr_consts *k, uint32_t b, uint64_t U)
{
    uint32_t a = b & 0x7fffffffu, s = b ^ a;
    uint32_t E = a < 0x00800000u ? 1u : a >> 23;
    uint32_t sig = a < 0x00800000u ? a : (a & 0x7fffffu) | 0x800000u;
    uint32_t EP = E > k->eminb ? E : k->eminb;
    uint32_t shift = (uint32_t)k->shiftm + EP - E;
    uint32_t fl = shift >= 32 ? 0 : sig >> shift;
    uint32_t rem = sig - (shift >= 32 ? 0 : fl << shift);
    uint64_t T = shift <= 53 ? (uint64_t)rem << (53 - shift)
                             : (shift - 53 >= 64 ? 0 : (uint64_t)(rem - 1) >> (shift - 53)) + 1;
    uint32_t mc = ((EP - k->eminb) << k->m) + fl + (U < T);
    uint32_t r;
    if (mc > k->maxc) r = k->r.ovf;
    else if (mc < (1u << k->m)) r = f2u(u2f(k->cbits + mc) - k->r.c);   /* m * 2^(emin - M), exact */
    else r = (mc << k->shiftm) + k->rebias;
    if (a == 0) r = 0;
    if (a >= 0x7f800000u) r = a == 0x7f800000u ? k->r.ovf : k->r.nanv;
    return r ^ s;
}

static size_t sr_portable(const sr_consts *k, const float *x, size_t n, float *y, uint64_t index0)
{
    uint64_t w = k->smix + (index0 + 1) * SR_GAMMA;
    for (size_t i = 0; i < n; i++, w += SR_GAMMA) y[i] = u2f(sr_one(k, f2u(x[i]), sr_mix64(w) >> 11));
    return n;
}

#ifdef QS_HAVE_X86
/* Low 64 bits of a * C per lane (AVX2 has no 64-bit multiply): three 32 x 32 -> 64 products. */
__attribute__((target("avx2"), always_inline))
static inline __m256i sr_mul64(__m256i a, __m256i clo, __m256i chi)
{
    __m256i lo = _mm256_mul_epu32(a, clo);
    __m256i mid = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), clo), _mm256_mul_epu32(a, chi));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(mid, 32));
}

__attribute__((target("avx2"), always_inline))
static inline __m256i sr_mix64_avx2(__m256i z)
{
    const __m256i c1l = _mm256_set1_epi64x(0x1ce4e5b9), c1h = _mm256_set1_epi64x(0xbf58476d);
    const __m256i c2l = _mm256_set1_epi64x(0x133111eb), c2h = _mm256_set1_epi64x(0x94d049bb);
    z = sr_mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), c1l, c1h);
    z = sr_mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), c2l, c2h);
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* The up decisions of 4 lanes (64-bit): rem, shift widened from 32 bits; U the draws. */
__attribute__((target("avx2"), always_inline))
static inline __m256i sr_up4(__m128i rem32, __m128i shift32, __m256i U)
{
    const __m256i c53 = _mm256_set1_epi64x(53), one = _mm256_set1_epi64x(1);
    __m256i rem = _mm256_cvtepu32_epi64(rem32), sh = _mm256_cvtepu32_epi64(shift32);
    __m256i t1 = _mm256_sllv_epi64(rem, _mm256_sub_epi64(c53, sh));    /* count < 0 -> huge -> 0 */
    __m256i t2 = _mm256_add_epi64(_mm256_srlv_epi64(_mm256_sub_epi64(rem, one), _mm256_sub_epi64(sh, c53)), one);
    __m256i T = _mm256_blendv_epi8(t1, t2, _mm256_cmpgt_epi64(sh, c53));
    return _mm256_cmpgt_epi64(T, U);                                   /* both < 2^63 */
}

__attribute__((target("avx2")))
static size_t sr_avx2(const sr_consts *k, const float *x, size_t n, float *y, uint64_t index0)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), minf = _mm256_set1_epi32(0x00800000);
    const __m256i mant = _mm256_set1_epi32(0x7fffff), one = _mm256_set1_epi32(1);
    const __m256i eminb = _mm256_set1_epi32((int)k->eminb), shiftm = _mm256_set1_epi32(k->shiftm);
    const __m256i maxc = _mm256_set1_epi32((int)k->maxc), sub1 = _mm256_set1_epi32((int)(1u << k->m));
    const __m256i rebias = _mm256_set1_epi32((int)k->rebias), cbits = _mm256_set1_epi32((int)k->cbits);
    const __m256i ovf = _mm256_set1_epi32((int)k->r.ovf), nanv = _mm256_set1_epi32((int)k->r.nanv);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), zero = _mm256_setzero_si256();
    const __m256i pack = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256 c = _mm256_set1_ps(k->r.c);
    const __m128i msh = _mm_cvtsi32_si128(k->m), ssh = _mm_cvtsi32_si128(k->shiftm);
    const uint64_t g = SR_GAMMA;
    __m256i w0 = _mm256_add_epi64(_mm256_set1_epi64x((long long)(k->smix + (index0 + 1) * g)),
                                  _mm256_setr_epi64x(0, (long long)g, (long long)(2 * g), (long long)(3 * g)));
    const __m256i g4 = _mm256_set1_epi64x((long long)(4 * g)), g8 = _mm256_set1_epi64x((long long)(8 * g));
    size_t i = 0;
    for (; i + 8 <= n; i += 8, w0 = _mm256_add_epi64(w0, g8)) {
        __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i a = _mm256_and_si256(b, absm);
        __m256i s = _mm256_xor_si256(b, a);
        __m256i isub = _mm256_cmpgt_epi32(minf, a);
        __m256i E = _mm256_blendv_epi8(_mm256_srli_epi32(a, 23), one, isub);
        __m256i sig = _mm256_blendv_epi8(_mm256_or_si256(_mm256_and_si256(a, mant), minf), a, isub);
        __m256i EP = _mm256_max_epi32(E, eminb);
        __m256i shift = _mm256_add_epi32(shiftm, _mm256_sub_epi32(EP, E));
        __m256i fl = _mm256_srlv_epi32(sig, shift);                     /* count >= 32 -> 0 */
        __m256i rem = _mm256_sub_epi32(sig, _mm256_sllv_epi32(fl, shift));
        __m256i U0 = _mm256_srli_epi64(sr_mix64_avx2(w0), 11);
        __m256i U1 = _mm256_srli_epi64(sr_mix64_avx2(_mm256_add_epi64(w0, g4)), 11);
        __m256i up0 = sr_up4(_mm256_castsi256_si128(rem), _mm256_castsi256_si128(shift), U0);
        __m256i up1 = sr_up4(_mm256_extracti128_si256(rem, 1), _mm256_extracti128_si256(shift, 1), U1);
        up0 = _mm256_permutevar8x32_epi32(up0, pack);
        up1 = _mm256_permutevar8x32_epi32(up1, pack);
        __m256i up = _mm256_permute2x128_si256(up0, up1, 0x20);       /* -1 where rounding up */
        __m256i mc = _mm256_sub_epi32(_mm256_add_epi32(_mm256_sll_epi32(_mm256_sub_epi32(EP, eminb), msh), fl), up);
        __m256i sv = _mm256_castps_si256(_mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(cbits, mc)), c));
        __m256i nv = _mm256_add_epi32(_mm256_sll_epi32(mc, ssh), rebias);
        __m256i r = _mm256_blendv_epi8(nv, sv, _mm256_cmpgt_epi32(sub1, mc));
        /* mc, a are in [0, 2^31): signed compares are exact */
        r = _mm256_blendv_epi8(r, ovf, _mm256_cmpgt_epi32(mc, maxc));
        r = _mm256_blendv_epi8(r, zero, _mm256_cmpeq_epi32(a, zero));
        r = _mm256_blendv_epi8(r, ovf, _mm256_cmpeq_epi32(a, inf));
        r = _mm256_blendv_epi8(r, nanv, _mm256_cmpgt_epi32(a, inf));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_xor_si256(r, s)));
    }
    return i;
}
#endif

void qs_mf_encode_n(const qs_minifloat *f, const float *x, size_t n, uint32_t *codes, qs_round mode,
                    int sat, uint64_t seed, uint64_t index0)
{
    if (is_fp32(f)) {                                     /* identity on the bits (sat: Inf -> ±max) */
        fp32_ident(x, n, codes, sat);
        return;
    }
    code_consts k;
    code_setup(f, &k);
    int lvl = qs_simd_level();
    float tmp[512];
    for (size_t i0 = 0; i0 < n; i0 += 512) {          /* round a chunk, then turn it into codes */
        size_t m = n - i0 < 512 ? n - i0 : 512, i = 0;
        qs_mf_round_n(f, x + i0, m, tmp, mode, sat, seed, index0 + i0);
#ifdef QS_HAVE_X86
        if (lvl >= QS_SIMD_AVX512) i = codes_avx512(&k, tmp, m, codes + i0);
        else if (lvl >= QS_SIMD_AVX2) i = codes_avx2(&k, tmp, m, codes + i0);
#endif
        codes_portable(&k, tmp + i, m - i, codes + i0 + i);
    }
    (void)lvl;
}

void qs_mf_round_n(const qs_minifloat *f, const float *x, size_t n, float *y, qs_round mode, int sat,
                   uint64_t seed, uint64_t index0)
{
    if (mode != QS_RND_TA && mode != QS_RND_RTZ && mode != QS_RND_SR && mode != QS_RND_TZ) mode = QS_RND_RNE;
    if (is_fp32(f)) {                                     /* identity (sat: Inf -> ±max) */
        fp32_ident(x, n, y, sat);
        return;
    }
    size_t i = 0;
    if (mode == QS_RND_RNE) {
        rne_consts k;
        rne_setup(f, sat, &k);
        int lvl = qs_simd_level();
#ifdef QS_HAVE_X86
        if (lvl >= QS_SIMD_AVX512) i = rne_avx512(&k, x, n, y);
        else if (lvl >= QS_SIMD_AVX2) i = rne_avx2(&k, x, n, y);
#endif
        i += rne_portable(&k, x + i, n - i, y + i);
        (void)lvl;
    }
    if (mode == QS_RND_SR) {
        sr_consts k;
        sr_setup(f, sat, seed, &k);
#ifdef QS_HAVE_X86
        if (qs_simd_level() >= QS_SIMD_AVX2) i = sr_avx2(&k, x, n, y, index0);
#endif
        sr_portable(&k, x + i, n - i, y + i, index0 + i);
    } else {
        for (; i < n; i++) y[i] = qs_mf_round(f, x[i], mode, 0.0, sat);
    }
}
