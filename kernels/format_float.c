/*
** Registry descriptors of the plain element casts (format_families.h): fp32, bf16, fp16, fp8_e4m3,
** fp8_e5m2, fp6_e3m2, fp6_e2m3, fp4_e2m1, and e8m0 as a format of its own (each value cast to the
** E8M0 scale type).  Spec: shared/spec/formats-mx.md §1.2-1.4, §2.2 (ml_dtypes semantics, the
** defaults here), §7.2.
**
** Layout: one code per element (codes[i], the element's bit pattern in the low elem_bits bits, sign
** bit on top); no metadata; *tensor_scale, when asked for, is set to 1 (no per-call scale).
** Rounding: RNE by default, TA, TZ (nearest, ties toward zero: ggml's rule), RTZ and SR supported
** (SR: element i draws qs_sr_uniform(o->seed, o->index0 + i)); o->sat saturates overflow and Inf to
** ±max.  Everything else (NaN, -0, E8M0 quirks) is minifloat.c's.  fakeq and encode are
** qs_mf_round_n and qs_mf_encode_n (simd.h): vectorised for RNE.
** Library variant o->zero_positive (not e8m0, which has no zero): every zero result is +0 -- a
** pass over the output after the rounding, so every path keeps its speed; this includes the
** FP6/FP4 "NaN -> -0" quirk of ml_dtypes, which becomes +0 (ggml maps NaN to code 0 too).
*/
#include <math.h>
#include <string.h>

#include "format_families.h"
#include "minifloat.h"
#include "simd.h"
#include "sr.h"

#define RND_MODES ((1u << QS_RND_RNE) | (1u << QS_RND_TA) | (1u << QS_RND_RTZ) | (1u << QS_RND_SR))
#define MF_MODES (RND_MODES | (1u << QS_RND_TZ))

/* Effective rounding mode and saturation of a call (o may be NULL: the defaults). */
static int resolve(const qs_format *f, const qs_qopts *o, qs_round *mode, int *sat, qs_err *e)
{
    qs_round r = o ? o->round : QS_RND_DEFAULT;
    if (r == QS_RND_DEFAULT) r = f->default_round;
    if ((unsigned)r >= QS_RND_COUNT || !(f->round_modes & (1u << r)))
        return qs_fail(e, "format %s does not support rounding '%s'", f->name, qs_round_name(r));
    *mode = r;
    *sat = o ? o->sat != 0 : 0;
    return 0;
}

static inline uint64_t seed_of(const qs_qopts *o) { return o ? o->seed : 0; }
static inline uint64_t index0_of(const qs_qopts *o) { return o ? o->index0 : 0; }
static inline int zero_pos(const qs_qopts *o) { return o && o->zero_positive; }

/* zero_positive: -0 results become +0 (values by their bits, codes by their magnitude field). */
static void clear_neg_zero(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &y[i], 4);
        if (b == 0x80000000u) y[i] = 0.0f;
    }
}

/* ---- minifloat casts ---- */

static int mf_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                     uint8_t *meta, float *tensor_scale, qs_err *e)
{
    const qs_minifloat *mf = f->mf;
    qs_round mode;
    int sat;
    if (!mf) return qs_fail(e, "format %s: no element type", f->name);
    if (resolve(f, o, &mode, &sat, e)) return -1;
    qs_mf_encode_n(mf, x, n, codes, mode, sat, seed_of(o), index0_of(o));
    if (zero_pos(o)) {
        uint32_t sign = 1u << (f->elem_bits - 1);
        for (size_t i = 0; i < n; i++)
            if (codes[i] == sign) codes[i] = 0;
    }
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int mf_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta,
                     float tensor_scale, size_t n, float *y, qs_err *e)
{
    const qs_minifloat *mf = f->mf;
    if (!mf) return qs_fail(e, "format %s: no element type", f->name);
    uint32_t lim = f->elem_bits >= 32 ? 0xffffffffu : (1u << f->elem_bits) - 1;
    for (size_t i = 0; i < n; i++) {
        if (codes[i] > lim) return qs_fail(e, "format %s: code 0x%x out of range (element %zu)", f->name, codes[i], i);
        y[i] = qs_mf_decode(mf, codes[i]);
    }
    return 0;
}

static int mf_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    const qs_minifloat *mf = f->mf;
    qs_round mode;
    int sat;
    if (!mf) return qs_fail(e, "format %s: no element type", f->name);
    if (resolve(f, o, &mode, &sat, e)) return -1;
    qs_mf_round_n(mf, x, n, y, mode, sat, seed_of(o), index0_of(o));
    if (zero_pos(o)) clear_neg_zero(y, n);
    return 0;
}

/* ---- e8m0 as a cast ----
** RNE/TA: ml_dtypes' cast (nearest power of two, ties up; minifloat.c).  RTZ: the power of two at
** or below x.  SR: between the power of two at or below x and the next one, up with probability
** (x - lo) / lo (FP32 subnormals below 2^-127 go to 2^-127, the smallest code).  sat: a positive
** value or +Inf beyond the range gives 0xFE (2^127) instead of 0xFF; 0, negatives and NaN stay NaN. */
static uint8_t e8m0_cast(float x, qs_round mode, double u, int sat)
{
    uint8_t c;
    if (mode == QS_RND_SR) {
        c = qs_e8m0_encode(x, QS_RND_RTZ);
        if (c != 0xFF) {
            double lo = qs_e8m0_decode(c);
            if ((double)x > lo && u < ((double)x - lo) / lo) c = (uint8_t)(c + 1);   /* exact */
        }
    } else {
        c = qs_e8m0_encode(x, mode);
    }
    if (c == 0xFF && sat && x > 0) c = 0xFE;              /* finite overflow or +Inf */
    return c;
}

/* The non-SR cast on 8 lanes (AVX2; QS_SIMD=scalar keeps e8m0_cast): the rules of e8m0_cast and
** qs_e8m0_encode on the bits, branch-free.  Nearest: code (b >> 23) + bit 22, minus one for the one
** subnormal tie 0x00400000 (2^-127 itself -> 0x00), 0xFF above 254; RTZ: b >> 23.  Negative, ±0,
** Inf and NaN -> 0xFF, then sat: 0xFF of a positive value (b in 1..0x7f800000) -> 0xFE.  fakeq
** decodes: 0xFF NaN, 0x00 2^-127 (0x00400000), else c << 23.  Tested against e8m0_cast on every
** float32 boundary and random bits at each level (tests/unit/test_minifloat.c).  Returns how
** many values were done (a multiple of 8). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2")))
static size_t e8m0_avx2(const float *x, size_t n, int rtz, int sat, uint32_t *codes, float *y)
{
    const __m256i ff = _mm256_set1_epi32(0xFF), fe = _mm256_set1_epi32(0xFE), zero = _mm256_setzero_si256();
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x00400000);
    const __m256i maxfin = _mm256_set1_epi32(0x7f7fffff), infb = _mm256_set1_epi32(0x7f800001);
    const __m256i c254 = _mm256_set1_epi32(254), qnan = _mm256_set1_epi32(0x7fc00000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i e = _mm256_srli_epi32(b, 23), c;
        if (rtz) c = e;
        else c = _mm256_add_epi32(_mm256_add_epi32(e, _mm256_and_si256(_mm256_srli_epi32(b, 22), one)),
                                  _mm256_cmpeq_epi32(b, half));
        /* b as signed: negative values < 0; the bad set is b <= 0 or b > 0x7f7fffff */
        __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(one, b), _mm256_cmpgt_epi32(b, maxfin));
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(c, c254));
        c = _mm256_blendv_epi8(c, ff, bad);
        if (sat) {                                        /* positive: 0 < b < 0x7f800001 */
            __m256i pos = _mm256_and_si256(_mm256_cmpgt_epi32(b, zero), _mm256_cmpgt_epi32(infb, b));
            c = _mm256_blendv_epi8(c, fe, _mm256_and_si256(pos, _mm256_cmpeq_epi32(c, ff)));
        }
        if (codes) {
            _mm256_storeu_si256((__m256i *)(codes + i), c);
        } else {
            __m256i v = _mm256_slli_epi32(c, 23);
            v = _mm256_blendv_epi8(v, half, _mm256_cmpeq_epi32(c, zero));
            v = _mm256_blendv_epi8(v, qnan, _mm256_cmpeq_epi32(c, ff));
            _mm256_storeu_si256((__m256i *)(y + i), v);
        }
    }
    return i;
}
#define E8M0_X86 1
#else
#define E8M0_X86 0
#endif

static size_t e8m0_vec(const float *x, size_t n, qs_round mode, int sat, uint32_t *codes, float *y)
{
#if E8M0_X86
    if (mode != QS_RND_SR && qs_simd_level() >= QS_SIMD_AVX2) return e8m0_avx2(x, n, mode == QS_RND_RTZ, sat, codes, y);
#endif
    (void)x; (void)n; (void)mode; (void)sat; (void)codes; (void)y;
    return 0;
}

static int e8m0_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                       uint8_t *meta, float *tensor_scale, qs_err *e)
{
    qs_round mode;
    int sat;
    if (resolve(f, o, &mode, &sat, e)) return -1;
    uint64_t seed = seed_of(o), i0 = index0_of(o);
    for (size_t i = e8m0_vec(x, n, mode, sat, codes, NULL); i < n; i++)
        codes[i] = e8m0_cast(x[i], mode, mode == QS_RND_SR ? qs_sr_uniform(seed, i0 + i) : 0.0, sat);
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int e8m0_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta,
                       float tensor_scale, size_t n, float *y, qs_err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (codes[i] > 0xFF) return qs_fail(e, "format %s: code 0x%x out of range (element %zu)", f->name, codes[i], i);
        y[i] = qs_e8m0_decode((uint8_t)codes[i]);
    }
    return 0;
}

static int e8m0_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    qs_round mode;
    int sat;
    if (resolve(f, o, &mode, &sat, e)) return -1;
    uint64_t seed = seed_of(o), i0 = index0_of(o);
    for (size_t i = e8m0_vec(x, n, mode, sat, NULL, y); i < n; i++)
        y[i] = qs_e8m0_decode(e8m0_cast(x[i], mode, mode == QS_RND_SR ? qs_sr_uniform(seed, i0 + i) : 0.0, sat));
    return 0;
}

/* ---- code tables of the <= 8-bit formats ---- */
static float cv_e8m0(unsigned c) { return qs_e8m0_decode((uint8_t)c); }

/* The element layout comes from minifloat.h; the value-range fields are literals (checked against
** qs_mf_max/min_* in tests/unit/test_minifloat.c).  Scale target (cast_scale.h): max_finite, every
** binade having the full mantissa, except for FP32-like ranges (fp32, bf16), which are not scaled. */
#define MF(NAME, SUMMARY, T, MAX, MINN, MINS, CV, NC)                                                  \
    {.name = NAME, .family = QS_FAM_FLOAT, .elem = QS_ELEM_FLOAT, .mf = &qs_mf_##T, .summary = SUMMARY,  \
     .elem_bits = QS_MF_BITS(QS_MF_LAYOUT_##T), QS_MF_ROW(QS_MF_LAYOUT_##T),                   \
     .has_inf = QS_MF_HAS_INF(QS_MF_LAYOUT_##T), .has_nan = QS_MF_HAS_NAN(QS_MF_LAYOUT_##T), .block = 1, .meta_bytes = 0, \
     .meta_bits = 0, .max_finite = MAX, .min_normal = MINN, .min_subnormal = MINS,                     \
     .default_round = QS_RND_RNE, .round_modes = MF_MODES, .has_scale_rule = 0, .encode = mf_encode,    \
     .decode = mf_decode, .fakeq = mf_fakeq, .code_value = CV, .ncodes = NC, .variants = QS_VAR_ZERO_POSITIVE, \
     .scale_target = (MAX) < 1e30 ? (MAX) : 0}

const qs_format qs_formats_float[] = {
    MF("fp32", "IEEE binary32 (identity)", fp32, 0x1.fffffep+127, 0x1p-126, 0x1p-149, NULL, 0),
    MF("bf16", "bfloat16 (E8M7, IEEE-like with Inf/NaN)", bf16, 0x1.fep+127, 0x1p-126, 0x1p-133, NULL, 0),
    MF("fp16", "IEEE binary16 (E5M10)", fp16, 65504.0, 0x1p-14, 0x1p-24, NULL, 0),
    MF("fp8_e4m3", "OCP FP8 E4M3FN: no Inf, overflow -> NaN (--sat: 448)", e4m3, 448.0, 0x1p-6, 0x1p-9, qs_mf_value_e4m3, 256),
    MF("fp8_e5m2", "OCP FP8 E5M2: IEEE-like, overflow -> Inf (--sat: 57344)", e5m2, 57344.0, 0x1p-14, 0x1p-16,
       qs_mf_value_e5m2, 256),
    MF("fp6_e3m2", "OCP FP6 E3M2: finite only, saturating", e3m2, 28.0, 0.25, 0.0625, qs_mf_value_e3m2, 64),
    MF("fp6_e2m3", "OCP FP6 E2M3: finite only, saturating", e2m3, 7.5, 1.0, 0.125, qs_mf_value_e2m3, 64),
    MF("fp4_e2m1", "OCP FP4 E2M1: finite only, saturating", e2m1, 6.0, 1.0, 0.5, qs_mf_value_e2m1, 16),
    {.name = "e8m0", .family = QS_FAM_FLOAT, .elem = QS_ELEM_UFLOAT, .summary = "OCP E8M0 scale type: powers of two 2^-127..2^127, 0xFF NaN",
     .elem_bits = 8, .ebits = 8, .mbits = 0, .bias = 127, .block = 1, .meta_bytes = 0, .meta_bits = 0,
     .has_inf = 0, .has_nan = 1, .max_finite = 0x1p+127, .min_normal = 0x1p-127, .min_subnormal = 0x1p-127,
     .default_round = QS_RND_RNE, .round_modes = RND_MODES, .has_scale_rule = 0, .encode = e8m0_encode,
     .decode = e8m0_decode, .fakeq = e8m0_fakeq, .code_value = cv_e8m0, .ncodes = 256},
};
const size_t qs_formats_float_n = sizeof qs_formats_float / sizeof qs_formats_float[0];
