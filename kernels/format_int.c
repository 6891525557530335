/*
** Registry descriptors of the symmetric absmax integer formats (format_families.h): int8 and int4.
**
** Per block (default: the whole run passed in, i.e. per tensor; the caller gets per-row/column by
** passing each row/column as a run, and blocks of N with o->block = N, a final partial block being
** its own block):
**     amax  = max |x| over the block's finite values
**     scale = fl32(amax / qmax)              qmax = 127 (int8), 7 (int4); codes -qmax..qmax
**     q     = clamp(round(x / scale), -qmax, qmax)
**     y     = fl32(q * scale)               (clamped to ±FLT_MAX, see below)
** Choices (the spec leaves them open):
**   - x / scale is an exact division, not a multiply by a reciprocal (which rounds twice) nor a
**     float32 division (whose rounding can land on a tie, e.g. 0.7f / fl32(1.4f/7) = 3.4999999
**     becomes 3.5f).  It is computed in double: the exact quotient of two floats with |q| <= 128
**     is either an integer or half-integer or at least 2^-26 away from one (24-bit significands),
**     and the double quotient is within 2^-46 of it, so RNE, TA and RTZ pick the integer of the
**     exact quotient (tests/unit/test_format_int.c checks this against exact products).
**   - The clamp only matters when fl32(amax/qmax) rounded down (then x/scale can exceed qmax by a
**     few ulps and SR could pick qmax+1) and for subnormal scales (below).
**   - NaN and ±Inf do not enter amax.  They have no integer code, so they take the otherwise unused
**     code -qmax-1 (0x80 / 0x8), which decodes to NaN -- like E4M3FN, a non-finite input becomes
**     NaN.  With o->sat, ±Inf saturates to ±qmax instead (decodes to ±amax).
**   - All-zero (or all non-finite) block: scale 0 stored, codes 0 (and the NaN code), values +0.
**   - Zero has one code: -0.0 and negatives that round to 0 decode to +0.
**   - amax so small that amax/qmax underflows to 0 in FP32 (amax < qmax * 2^-150): the scale is the
**     smallest subnormal 2^-149.  Subnormal scales are coarse, so such blocks may clip at ±qmax.
**   - amax near FLT_MAX: fl32(127 * fl32(FLT_MAX / 127)) rounds up to Inf; y is clamped to
**     ±FLT_MAX instead (decode does the same), so a finite input never comes back infinite.
** Range fields, like the MX family's (element grid x scale range): the largest finite value is
** FLT_MAX (127 or 7 x the largest scale, clamped), the smallest positive one 1 x 2^-149.
** Layout: codes[i] = q in two's complement, low 8 (int8) or 4 (int4) bits; meta = one FP32 scale
** per block, 4 bytes little-endian (meta_bytes 4, meta_bits 32); *tensor_scale = 1.
*/
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format_families.h"
#include "format.h"
#include "simd.h"
#include "sr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INT_X86 1
#else
#define INT_X86 0
#endif

#define RND_MODES ((1u << QS_RND_RNE) | (1u << QS_RND_TA) | (1u << QS_RND_RTZ) | (1u << QS_RND_SR))

static inline int qmax_of(const qs_format *f) { return (1 << (f->elem_bits - 1)) - 1; }

typedef struct int_ctx {
    qs_round mode;
    int sat, qmax;
    size_t block;      /* values per block; the whole run when the option and default are 0 */
    uint64_t seed, index0;
    float amax;        /* > 0: the whole run's amax, given (o->tensor_scale) so a long run can come in pieces */
} int_ctx;

static int setup(const qs_format *f, const qs_qopts *o, size_t n, int_ctx *c, qs_err *e)
{
    qs_round r = o ? o->round : QS_RND_DEFAULT;
    if (r == QS_RND_DEFAULT) r = f->default_round;
    if ((unsigned)r >= QS_RND_COUNT || !(f->round_modes & (1u << r)))
        return qs_fail(e, "format %s does not support rounding '%s'", f->name, qs_round_name(r));
    int b = o && o->block > 0 ? o->block : f->block;
    if (o && o->block < 0) return qs_fail(e, "block size must be positive");
    c->mode = r;
    c->sat = o ? o->sat != 0 : 0;
    c->qmax = qmax_of(f);
    c->block = b > 0 ? (size_t)b : (n > 0 ? n : 1);
    c->seed = o ? o->seed : 0;
    c->index0 = o ? o->index0 : 0;
    c->amax = b <= 0 && o && o->tensor_scale > 0 ? o->tensor_scale : 0;
    return 0;
}

static float scale_of(float amax, int qmax)
{
    float s = amax / (float)qmax;
    if (s == 0.0f && amax > 0.0f) s = FLT_TRUE_MIN;
    return s;
}

static float block_scale(const float *x, size_t n, int qmax)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isfinite(a) && a > amax) amax = a;
    }
    return scale_of(amax, qmax);
}

/* Signed integer code of x (the NaN code -qmax-1 for non-finite values, see above). */
static inline int quant(const int_ctx *c, float x, float scale, size_t i)
{
    if (isnan(x)) return -c->qmax - 1;
    if (isinf(x)) return c->sat ? (x > 0 ? c->qmax : -c->qmax) : -c->qmax - 1;
    if (scale == 0.0f) return 0;
    double qd = (double)x / (double)scale;
    double a = fabs(qd), fl = floor(a), d = a - fl;
    int up;
    switch (c->mode) {
    case QS_RND_RTZ: up = 0; break;
    case QS_RND_TA: up = d >= 0.5; break;
    case QS_RND_SR: up = d > 0 && qs_sr_uniform(c->seed, c->index0 + i) < d; break;
    default: up = d > 0.5 || (d == 0.5 && ((int64_t)fl & 1)); break;
    }
    double q = fl + up;
    if (q > c->qmax) q = c->qmax;
    return qd < 0 ? -(int)q : (int)q;
}

static inline float dequant(int q, int qmax, float scale)
{
    if (q == -qmax - 1) return NAN;
    float v = (float)q * scale;
    if (isinf(v) && isfinite(scale)) v = copysignf(FLT_MAX, v);   /* amax ~ FLT_MAX, int8 */
    return v;
}

static inline void put_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    p[0] = (uint8_t)u; p[1] = (uint8_t)(u >> 8); p[2] = (uint8_t)(u >> 16); p[3] = (uint8_t)(u >> 24);
}

static inline float get_f32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/*
** Speed.  RNE runs vectorised (AVX2, AVX-512; qs_simd_level(), QS_SIMD=scalar forces the portable
** path) on blocks with a normal scale: the same IEEE double operations as quant() -- (double)x /
** (double)scale, correctly rounded by the hardware division -- then rounding to nearest even in
** double (what quant()'s floor / half test computes), the clamp to ±qmax in double, and an integer
** conversion (so -0 becomes code 0 and +0).  fakeq's y = fl32(q * scale) is clamped to ±FLT_MAX
** (dequant()'s Inf rule; q is never the NaN code here).  A vector of 8 / 16 holding NaN or ±Inf,
** the block's tail, all-zero and subnormal-scale blocks and the other modes run quant().  Tested
** value for value and code for code against the scalar level (tests/unit/test_format_int.c).
** The block amax pass (finite values only) is vectorised the same way.
*/
static size_t int_vec_n(const int_ctx *c, float s, size_t m)
{
    if (c->mode != QS_RND_RNE || !(s >= FLT_MIN && s <= FLT_MAX)) return 0;
    int lvl = INT_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
    if (lvl >= QS_SIMD_AVX512) return m / 16 * 16;
    if (lvl >= QS_SIMD_AVX2) return m / 8 * 8;
    return 0;
}

#if INT_X86
/* RNE codes (y == NULL) or values (codes == NULL) of x[0..m), m a multiple of 8, scale s normal. */
__attribute__((target("avx2")))
static void int_rne_avx2(const int_ctx *c, const float *x, size_t m, float s, size_t i0, uint32_t *codes,
                         float *y, uint32_t mask)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), big = _mm256_set1_epi32(0x7f7fffff);
    const __m256i cmask = _mm256_set1_epi32((int)mask);
    const __m256d S = _mm256_set1_pd((double)s), hi = _mm256_set1_pd(c->qmax), lo = _mm256_set1_pd(-c->qmax);
    const __m256 sf = _mm256_set1_ps(s), fmax = _mm256_set1_ps(FLT_MAX), fmin = _mm256_set1_ps(-FLT_MAX);
    for (size_t i = 0; i < m; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        __m256i a = _mm256_and_si256(_mm256_castps_si256(xv), absm);
        if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(a, big))) {          /* NaN or Inf in these 8 */
            for (size_t j = i; j < i + 8; j++) {
                int q = quant(c, x[j], s, i0 + j);
                if (codes) codes[j] = (uint32_t)q & mask;
                else y[j] = dequant(q, c->qmax, s);
            }
            continue;
        }
        __m256d q0 = _mm256_div_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), S);
        __m256d q1 = _mm256_div_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), S);
        q0 = _mm256_round_pd(q0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q1 = _mm256_round_pd(q1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q0 = _mm256_max_pd(_mm256_min_pd(q0, hi), lo);
        q1 = _mm256_max_pd(_mm256_min_pd(q1, hi), lo);
        __m256i q = _mm256_set_m128i(_mm256_cvtpd_epi32(q1), _mm256_cvtpd_epi32(q0));
        if (codes) {
            _mm256_storeu_si256((__m256i *)(codes + i), _mm256_and_si256(q, cmask));
        } else {
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), sf);
            _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_min_ps(v, fmax), fmin));
        }
    }
}

__attribute__((target("avx512f")))
static void int_rne_avx512(const int_ctx *c, const float *x, size_t m, float s, size_t i0, uint32_t *codes,
                           float *y, uint32_t mask)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), big = _mm512_set1_epi32(0x7f7fffff);
    const __m512i cmask = _mm512_set1_epi32((int)mask);
    const __m512d S = _mm512_set1_pd((double)s), hi = _mm512_set1_pd(c->qmax), lo = _mm512_set1_pd(-c->qmax);
    const __m512 sf = _mm512_set1_ps(s), fmax = _mm512_set1_ps(FLT_MAX), fmin = _mm512_set1_ps(-FLT_MAX);
    for (size_t i = 0; i < m; i += 16) {
        __m512 xv = _mm512_loadu_ps(x + i);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(xv), absm);
        if (_mm512_cmpgt_epu32_mask(a, big)) {                           /* NaN or Inf in these 16 */
            for (size_t j = i; j < i + 16; j++) {
                int q = quant(c, x[j], s, i0 + j);
                if (codes) codes[j] = (uint32_t)q & mask;
                else y[j] = dequant(q, c->qmax, s);
            }
            continue;
        }
        __m512d q0 = _mm512_div_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(xv)), S);
        __m512d q1 = _mm512_div_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1))), S);
        q0 = _mm512_roundscale_pd(q0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q1 = _mm512_roundscale_pd(q1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q0 = _mm512_max_pd(_mm512_min_pd(q0, hi), lo);
        q1 = _mm512_max_pd(_mm512_min_pd(q1, hi), lo);
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(q0)), _mm512_cvtpd_epi32(q1), 1);
        if (codes) {
            _mm512_storeu_si512((void *)(codes + i), _mm512_and_si512(q, cmask));
        } else {
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), sf);
            _mm512_storeu_ps(y + i, _mm512_max_ps(_mm512_min_ps(v, fmax), fmin));
        }
    }
}
#endif

/* The block's scale: block_scale() with the amax pass vectorised when the level allows, or the
** scale of the run's given amax. */
static float block_scale_fast(const int_ctx *c, const float *x, size_t n, int qmax)
{
    if (c->amax > 0) return scale_of(c->amax, qmax);
#if INT_X86
    if (qs_simd_level() >= QS_SIMD_AVX2) {
        return scale_of(qs_finite_absmax_n(x, n), qmax);
    }
#endif
    return block_scale(x, n, qmax);
}

/* RNE fast path over x[0..m) of the block starting at element i0; returns how many were done. */
static size_t int_rne_vec(const int_ctx *c, const float *x, size_t m, float s, size_t i0, uint32_t *codes,
                          float *y, uint32_t mask)
{
    size_t v = int_vec_n(c, s, m);
#if INT_X86
    if (v && qs_simd_level() >= QS_SIMD_AVX512) int_rne_avx512(c, x, v, s, i0, codes, y, mask);
    else if (v) int_rne_avx2(c, x, v, s, i0, codes, y, mask);
#else
    (void)c; (void)x; (void)i0; (void)codes; (void)y; (void)mask;
#endif
    return v;
}

static int int_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                      uint8_t *meta, float *tensor_scale, qs_err *e)
{
    int_ctx c;
    if (setup(f, o, n, &c, e)) return -1;
    uint32_t mask = (1u << f->elem_bits) - 1;
    for (size_t b0 = 0, k = 0; b0 < n; b0 += c.block, k++) {
        size_t m = n - b0 < c.block ? n - b0 : c.block;
        float s = block_scale_fast(&c, x + b0, m, c.qmax);
        put_f32(meta + 4 * k, s);
        size_t v = int_rne_vec(&c, x + b0, m, s, b0, codes + b0, NULL, mask);
        for (size_t i = b0 + v; i < b0 + m; i++) codes[i] = (uint32_t)quant(&c, x[i], s, i) & mask;
    }
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int int_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta,
                      float tensor_scale, size_t n, float *y, qs_err *e)
{
    int_ctx c;
    if (setup(f, o, n, &c, e)) return -1;
    const int bits = f->elem_bits;
    for (size_t b0 = 0, k = 0; b0 < n; b0 += c.block, k++) {
        size_t m = n - b0 < c.block ? n - b0 : c.block;
        float s = get_f32(meta + 4 * k);
        for (size_t i = b0; i < b0 + m; i++) {
            if (codes[i] >> bits) return qs_fail(e, "format %s: code 0x%x out of range (element %zu)", f->name, codes[i], i);
            int q = (int)codes[i] - (codes[i] >> (bits - 1) ? 1 << bits : 0);   /* sign-extend */
            y[i] = dequant(q, c.qmax, s);
        }
    }
    return 0;
}

static int int_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    int_ctx c;
    if (setup(f, o, n, &c, e)) return -1;
    for (size_t b0 = 0; b0 < n; b0 += c.block) {
        size_t m = n - b0 < c.block ? n - b0 : c.block;
        float s = block_scale_fast(&c, x + b0, m, c.qmax);
        size_t v = int_rne_vec(&c, x + b0, m, s, b0, NULL, y + b0, 0);
        for (size_t i = b0 + v; i < b0 + m; i++) y[i] = dequant(quant(&c, x[i], s, i), c.qmax, s);
    }
    return 0;
}

static void int_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                          char *out, size_t cap)
{
    (void)o; (void)ts; (void)step;
    float s;
    uint32_t u;
    memcpy(&s, m, 4);
    memcpy(&u, m, 4);
    char v[32];
    num(s, v, sizeof v);
    snprintf(out, cap, "FP32 scale 0x%08x = %s (absmax / %d)", u, v, f->elem_bits == 8 ? 127 : 7);
}

/* The analysis engine's block scales: what encode of each block's largest finite |x| alone gives
** (its scale, block_scale()'s), decoded at the codes 1 and qmax (dequant()'s rule). */
static int int_block_scales(const qs_format *f, const qs_qopts *o, float tensor_scale, const float *amax, size_t n,
                            uint8_t *code, float *S, float *Q, qs_err *e)
{
    (void)o; (void)tensor_scale; (void)code; (void)e;
    const int qmax = qmax_of(f);
    for (size_t i = 0; i < n; i++) {
        float s = block_scale(amax + i, 1, qmax);
        S[i] = dequant(1, qmax, s);
        Q[i] = dequant(qmax, qmax, s);
    }
    return 0;
}

#define INTF(NAME, SUMMARY, BITS)                                                                    \
    {.name = NAME, .family = QS_FAM_INT, .elem = QS_ELEM_INT, .scale_kind = QS_SK_FP32, .meta_text = int_meta_text, .summary = SUMMARY, .elem_bits = BITS, .ebits = 0, .mbits = 0,   \
     .bias = 0, .block = 0, .meta_bytes = 4, .meta_bits = 32, .has_inf = 0, .has_nan = 1,            \
     .max_finite = FLT_MAX, .min_normal = 0, .min_subnormal = FLT_TRUE_MIN,                          \
     .default_round = QS_RND_RNE,                                                                    \
     .round_modes = RND_MODES, .has_scale_rule = 0, .encode = int_encode, .decode = int_decode,      \
     .fakeq = int_fakeq, .code_value = NULL, .ncodes = 0, .grid = QS_GRID(0, 0, 0),                  \
     .block_scales = int_block_scales, .amax_finite = 1}

const qs_format qs_formats_int[] = {
    INTF("int8", "symmetric absmax int8: codes -127..127 times an FP32 scale amax/127 per block", 8),
    INTF("int4", "symmetric absmax int4: codes -7..7 times an FP32 scale amax/7 per block", 4),
};
const size_t qs_formats_int_n = sizeof qs_formats_int / sizeof qs_formats_int[0];
