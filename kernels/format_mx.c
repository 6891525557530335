/*
** OCP Microscaling (MX v1.0) formats of the registry: mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2,
** mxfp6_e2m3, mxfp4 and mxint8, after spec/formats-mx.md (cited as §n below).
**
** A block of `block` consecutive values (default 32, §1.1; o->block overrides with any size >= 1; a
** final partial block is its own block) shares one E8M0 scale X = 2^u (§1.2).  Element i is
** P_i = round(x_i * 2^-u) on the element grid, saturating (MX always saturates finite values,
** §1.6), and decodes to P_i * X.
**
** Layout.  Codes: one element code per value, unpacked (FP: the §1.3 bit pattern, sign at bit
** ebits+mbits; MXINT8: the two's-complement byte, 0..255).  Metadata: one byte per block, the E8M0
** scale code (meta_bytes 1, meta_bits 8).  No tensor scale: encode stores 1.0 and decode ignores it.
**
** Scale rules (o->scale_rule), u clamped to [-127, 127] (§1.6; torchao's 128 is never reached):
**   floor  (default, OCP §1.6-1.7) u = floor(log2 amax) - emax_elem, the exponent taken from the
**          float32 bits, never from log2f (§1.7 step 2, vector T28);
**   ceil   (torchao) u = ceil(log2 amax) - emax_elem;
**   even   (torchao) amax's significand rounded to the element's mantissa width by adding
**          1 << (22 - mbits) to its bits (a carry bumps the exponent), then floor (§2.4);
**   rceil  (cuBLAS/TE/torchao) E8M0 = fl32(amax * fl32(1/max_elem)) rounded up to a power of two
**          (an FP32-subnormal product rounds up only when > 2^-127), §2.4, §2.6;
**   uos    (MXAttention §5.1) u = ceil(log2(amax / Qmax)), evaluated exactly (the smallest u with
**          amax <= Qmax * 2^u), Qmax = o->uos_qmax or the element's default below.
** Element rounding: RNE (default), TA, TZ (nearest, ties toward zero: ggml's CPU rule, §2.5), RTZ
** and SR (u = qs_sr_uniform(seed, index0 + i)), through qs_mf_round/qs_mf_encode with sat = 1 (§1.6,
** §1.7 step 5).
**
** Library variants (qs_qopts; §2.8; all off by default, docs/formats.md "Library variants"):
**   floor_log2f   floor's exponent is floorf(log2f(amax)) from libm (ggml CPU, microxcaling's PyTorch
**                 path) instead of the bits: 0x1.fffffep+2 gets 0x80 with glibc (T28); the result is
**                 still clamped to [-127, 127] (ggml would convert an out-of-range float: UB);
**   zero_positive every zero result is +0, codes without the sign bit (ggml, microxcaling C++, TE);
**   flush_subnormal_blocks  microxcaling's mx_flush_fp32_subnorms: a block whose amax is an FP32
**                 subnormal (floor(log2 amax) < -126, by the same arithmetic as floor_log2f says)
**                 quantizes to zeros, each keeping its input's sign (x * 0, the PyTorch path; add
**                 zero_positive for the C++ path's +0); the scale is the rule's for that amax (T23);
**   nan_block_te  TE's float_to_e8m0 (§2.6): a block holding ±Inf and no NaN gets scale 0xFE
**                 instead of 0xFF and is quantized at that scale, saturating: ±Inf -> ±max element
**                 (which decodes to ±Inf in float32 for the FP elements, max * 2^127 overflowing;
**                 to ±127/64 * 2^127 for MXINT8), finite values x * 2^-127 (0 unless huge); a NaN
**                 still gives 0xFF;
**   zero_block_scale  the all-zero block's scale code + 1 (microxcaling INT8 0x01, MXAttention 0x7F).
**
** Choices where the spec leaves room or sources disagree:
**   - [Choice] NaN or ±Inf anywhere in a block -> scale 0xFF, every element code 0, and the whole
**     block decodes to NaN (torchao/microxcaling, §1.6; TE uses 0xFE for Inf: nan_block_te; ggml
**     ignores NaN and is UB on Inf -- not offered).
**   - [Choice] All-zero block (±0 only): scale 0x00 (torchao, TE, ggml, gfloat; §1.6, T5) for floor,
**     ceil, even and rceil -- also for MXINT8, where microxcaling gives 0x01 -- but 0x7F under uos,
**     the MXAttention reference convention of vector T41.  The codes are ±0 either way, and
**     decode accepts any scale for such a block.  zero_block_scale picks another code.
**   - FP32-subnormal inputs are quantized normally (no flush; microxcaling's
**     mx_flush_fp32_subnorms is off by default: flush_subnormal_blocks), vector T23.
**   - [Choice] ceil of an FP32-subnormal amax is the exact ceil(log2 amax); torchao's bit formula
**     differs only there, and only for MXINT8 (emax 0) would it survive the clamp -- torchao has
**     no MXINT8.  floor agrees with the bit formula everywhere after the clamp.
**   - [Choice] MXINT8 (§1.5): value q/64, q = round(x/X * 64) clamped to ±127 (microxcaling: -128
**     is never produced; decode accepts 0x80 as -2.0).  Integers have no -0: a negative value
**     that rounds to 0 gives code 0 and +0.  For `even` its "mantissa width" is 6 (the step 2^-6
**     of the top binade [1, 2)), so even bumps when amax's significand rounds to 2.
**   - [Choice] UOS defaults (§5.1 says 7.25 for E2M1 and gives the break-even of its model for the
**     others; we re-derived each as the crossover r* of the squared error of uniform magnitudes
**     on [0, r] under scales X and 2X): E2M1 7.25, E2M3 7.875, E3M2 30 + 2^-6.5 (= 30.01105; the
**     §5.1 "30.01"), E4M3 464, E5M2 61440 (the model's roots are 464 + 8e-7 and 61440 + 7e-9,
**     which select the same float32 values), INT8 2.0: the clipping range (127/64, 2) is too
**     short to pay for a grid twice as coarse, so MXINT8's default UOS equals floor.
**   - [Choice] Registry value range describes the decoded value set: max_finite = element max *
**     2^127, min_normal / min_subnormal = the element's * 2^-127.  code_value is the element's
**     value at scale 1 (code 0x7F), for `explain --table`.
**
** Speed.  fakeq with RNE elements has a portable path and AVX2 and AVX-512 paths (chosen by
** qs_simd_level(); QS_SIMD=scalar forces the portable path) for every element type and scale rule,
** for blocks whose size is a multiple of 8 (AVX2) / 16 (AVX-512); other blocks run the portable
** path, and other rounding modes qs_mf_round.  All three RNE paths round with
** t = (a + M) - M where M = 2^(max(e(a), emin) + 23 - mbits): the float32 addition performs RNE on
** the element's quantum at a's binade (subnormal targets included), then min(t, max) saturates.
** tests/unit/test_format_mx.c checks them against qs_mf_encode (fakeq == decode(encode)) and
** against each other on millions of values.  encode with RNE elements is vectorised the same way
** (same blocks, same fallbacks; the value-to-code step is described at mx_ek below) and tested code
** for code and byte for byte against the scalar encode at every level.
*/
#include "fbits.h"
#include "format.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format_families.h"
#include "minifloat.h"
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MX_X86 1
#else
#define MX_X86 0
#endif


/* Element type of an MX format.  mf == NULL is MXINT8. */
typedef struct mx_elem {
    const qs_minifloat *mf;
    int emax;          /* emax_elem of §1.3 / §1.5 */
    int mbits;         /* mantissa width (INT8: 6) */
    int emin;          /* exponent of the smallest normal binade (INT8: 0) */
    float maxv;        /* largest element magnitude */
    double uos_qmax;   /* default UOS threshold (header) */
} mx_elem;

static const mx_elem kE4M3 = {&qs_mf_e4m3, 8, 3, -6, 448.0f, 464.0};
static const mx_elem kE5M2 = {&qs_mf_e5m2, 15, 2, -14, 57344.0f, 61440.0};
static const mx_elem kE3M2 = {&qs_mf_e3m2, 4, 2, -2, 28.0f, 30.01104854345604};
static const mx_elem kE2M3 = {&qs_mf_e2m3, 2, 3, 0, 7.5f, 7.875};
static const mx_elem kE2M1 = {&qs_mf_e2m1, 2, 1, 0, 6.0f, 7.25};
static const mx_elem kINT8 = {NULL, 0, 6, 0, 127.0f / 64.0f, 2.0};

/* ---- options ---------------------------------------------------------------------------------- */

typedef struct mx_run {
    const mx_elem *el;
    qs_round mode;
    qs_scale_rule rule;
    double qmax;
    size_t block;
    uint64_t seed, index0;
    int floor_log2f, zero_pos, flush_sub, inf_te;   /* library variants (header) */
    unsigned zero_code;                              /* scale code of an all-zero block */
} mx_run;

static int mx_setup(const qs_format *f, const mx_elem *el, const qs_qopts *o, mx_run *r, qs_err *e)
{
    static const qs_qopts defaults;
    if (!o) o = &defaults;
    r->el = el;
    r->mode = o->round == QS_RND_DEFAULT ? QS_RND_RNE : o->round;
    if (r->mode != QS_RND_RNE && r->mode != QS_RND_TA && r->mode != QS_RND_RTZ && r->mode != QS_RND_SR &&
        r->mode != QS_RND_TZ)
        return qs_fail(e, "format %s does not support rounding '%s' (supported: rne,ta,sr,rtz,tz)", f->name,
                       qs_round_name(o->round));
    if ((unsigned)o->scale_rule >= QS_SCALE_COUNT) return qs_fail(e, "format %s: unknown scale rule", f->name);
    r->rule = o->scale_rule;
    if (!(o->uos_qmax >= 0) || isinf(o->uos_qmax))
        return qs_fail(e, "format %s: uos threshold must be a positive number", f->name);
    r->qmax = o->uos_qmax > 0 ? o->uos_qmax : el->uos_qmax;
    if (o->block < 0) return qs_fail(e, "block size must be positive");
    r->block = o->block > 0 ? (size_t)o->block : (size_t)f->block;
    r->seed = o->seed;
    r->index0 = o->index0;
    if (o->floor_log2f && o->scale_rule != QS_SCALE_FLOOR)
        return qs_fail(e, "format %s: --floor-log2f is the arithmetic of --scale-rule floor", f->name);
    if (o->zero_block_scale < 0 || o->zero_block_scale > 255)
        return qs_fail(e, "format %s: the all-zero block scale must be an E8M0 code 0x00..0xFE", f->name);
    if (o->nan_block_te < 0 || o->nan_block_te > 1) return qs_fail(e, "format %s: unknown non-finite block rule", f->name);
    r->floor_log2f = o->floor_log2f != 0;
    r->zero_pos = o->zero_positive != 0;
    r->flush_sub = o->flush_subnormal_blocks != 0;
    r->inf_te = o->nan_block_te;
    r->zero_code = o->zero_block_scale ? (unsigned)o->zero_block_scale - 1 : r->rule == QS_SCALE_UOS ? 0x7Fu : 0x00u;
    return 0;
}

/* ---- scale ------------------------------------------------------------------------------------ */

/* floor(log2 a) of a positive finite float32 given by its bits (subnormals exact). */
static inline int ilog2_bits(uint32_t a)
{
    if (a >= 0x00800000u) return (int)(a >> 23) - 127;
    return 31 - __builtin_clz(a) - 149;
}

static inline int is_pow2_bits(uint32_t a)
{
    return a >= 0x00800000u ? (a & 0x7fffffu) == 0 : (a & (a - 1)) == 0;
}

/* Smallest integer u with amax <= qmax * 2^u, exactly (amax and qmax * 2^u are exact doubles). */
static int uos_exp(double amax, double qmax)
{
    double g = ceil(log2(amax / qmax));
    int u = g < -1100 ? -1100 : g > 1100 ? 1100 : (int)g;
    for (int k = 0; k < 4 && amax > ldexp(qmax, u); k++) u++;
    for (int k = 0; k < 4 && amax <= ldexp(qmax, u - 1); k++) u--;
    return u;
}

/* floor(log2 a) of a positive float32 by the run's arithmetic: the bits, or libm's log2f. */
static inline int mx_ilog2(const mx_run *r, uint32_t a)
{
    return r->floor_log2f ? (int)floorf(log2f(u2f(a))) : ilog2_bits(a);
}

/* flush_subnormal_blocks: does a block with this amax become zeros? */
static inline int mx_flushes(const mx_run *r, uint32_t ab)
{
    return r->flush_sub && ab != 0 && ab < 0x00800000u && mx_ilog2(r, ab) < -126;
}

/* E8M0 code of a block whose largest magnitude has the bits ab (sign cleared; >= 0x7f800000 when
** the block holds Inf or NaN).  0xFF means a NaN block: every element decodes to NaN. */
static unsigned mx_scale_code(const mx_run *r, uint32_t ab)
{
    const mx_elem *el = r->el;
    if (ab >= 0x7f800000u) return ab == 0x7f800000u && r->inf_te ? 0xFEu : 0xFFu;
    if (ab == 0) return r->zero_code;
    int u;
    switch (r->rule) {
    case QS_SCALE_RCEIL: {
        uint32_t d = f2u(u2f(ab) * (1.0f / el->maxv));
        unsigned c;
        if (d < 0x00800000u) c = d > 0x00400000u ? 1u : 0u;     /* subnormal: up only past 2^-127 */
        else c = (d >> 23) + ((d & 0x7fffffu) != 0);
        return c > 254 ? 254u : c;
    }
    case QS_SCALE_EVEN: {
        uint32_t b = (ab + (1u << (22 - el->mbits))) & 0x7f800000u;
        u = (int)(b >> 23) - 127 - el->emax;
        break;
    }
    case QS_SCALE_CEIL: u = ilog2_bits(ab) + !is_pow2_bits(ab) - el->emax; break;
    case QS_SCALE_UOS: u = uos_exp((double)u2f(ab), r->qmax); break;
    default: u = mx_ilog2(r, ab) - el->emax; break;
    }
    if (u < -127) u = -127;
    if (u > 127) u = 127;
    return (unsigned)(u + 127);
}

/* X = 2^(c-127) and its exact reciprocal, for c in 0..254 (2^-127 is a float32 subnormal). */
static inline float scale_of(unsigned c) { return u2f(c == 0 ? 0x00400000u : c << 23); }
static inline float inv_scale_of(unsigned c) { return u2f(c == 254 ? 0x00400000u : (254u - c) << 23); }

/* Largest |x| of a run as float32 bits with the sign cleared (>= 0x7f800000: Inf or NaN present). */
static inline uint32_t absmax_bits(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m;
}

/* ---- elements --------------------------------------------------------------------------------- */

/* MXINT8: q = round(y * 64) by mode, clamped to ±127 (sign-magnitude, §1.5). */
static inline int int8_q(float y, qs_round mode, double u)
{
    float a = fabsf(y) * 64.0f;                             /* exact: a power of two */
    int q;
    if (!(a < 127.0f)) q = 127;
    else {
        float fl = floorf(a), fr = a - fl;                  /* exact: a < 2^7 */
        q = (int)fl;
        switch (mode) {
        case QS_RND_RTZ: break;
        case QS_RND_TA: q += fr >= 0.5f; break;
        case QS_RND_TZ: q += fr > 0.5f; break;
        case QS_RND_SR: q += u < (double)fr; break;
        default: q += fr > 0.5f || (fr == 0.5f && (q & 1)); break;
        }
        if (q > 127) q = 127;
    }
    return y < 0 ? -q : q;
}

static inline float int8_val(int q) { return (float)q * 0.015625f; }

static inline double sr_u(const mx_run *r, size_t i)
{
    return r->mode == QS_RND_SR ? qs_sr_uniform(r->seed, r->index0 + i) : 0.0;
}

/* ---- encode / decode / scalar fakeq ----------------------------------------------------------- */

/* Encode one block [i0, i0+len) on the portable path: qs_mf_encode / int8_q per element. */
static void mx_enc_block_scalar(const mx_run *r, const qs_format *f, const float *x, size_t i0, size_t len,
                                uint32_t *codes, uint8_t *meta)
{
    const mx_elem *el = r->el;
    uint32_t ab = absmax_bits(x + i0, len);
    unsigned c = mx_scale_code(r, ab);
    *meta = (uint8_t)c;
    if (c == 0xFF) {
        memset(codes + i0, 0, len * sizeof *codes);
        return;
    }
    float inv = inv_scale_of(c);
    int flush = mx_flushes(r, ab);
    uint32_t negz = el->mf ? 1u << f->elem_bits >> 1 : 0;   /* the -0 code */
    for (size_t i = i0; i < i0 + len; i++) {
        float y = flush ? copysignf(0.0f, x[i]) : x[i] * inv;
        codes[i] = el->mf ? qs_mf_encode(el->mf, y, r->mode, sr_u(r, i), 1)
                          : (uint32_t)(uint8_t)(int8_t)int8_q(y, r->mode, sr_u(r, i));
        if (r->zero_pos && negz && codes[i] == negz) codes[i] = 0;
    }
}

static size_t mx_enc_vector(const mx_run *r, const qs_format *f, const float *x, size_t n, uint32_t *codes,
                            uint8_t *meta);

static int mx_encode(const mx_elem *el, const qs_format *f, const qs_qopts *o, const float *x, size_t n,
                     uint32_t *codes, uint8_t *meta, float *tensor_scale, qs_err *e)
{
    mx_run r;
    if (mx_setup(f, el, o, &r, e)) return -1;
    size_t done = mx_enc_vector(&r, f, x, n, codes, meta);   /* whole blocks, RNE, when the level allows */
    for (size_t b = done / r.block, i0 = done; i0 < n; b++, i0 += r.block)
        mx_enc_block_scalar(&r, f, x, i0, n - i0 < r.block ? n - i0 : r.block, codes, meta + b);
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int mx_decode(const mx_elem *el, const qs_format *f, const qs_qopts *o, const uint32_t *codes,
                     const uint8_t *meta, float tensor_scale, size_t n, float *y, qs_err *e)
{
    mx_run r;
    if (mx_setup(f, el, o, &r, e)) return -1;
    for (size_t b = 0, i0 = 0; i0 < n; b++, i0 += r.block) {
        size_t len = n - i0 < r.block ? n - i0 : r.block;
        unsigned c = meta[b];
        for (size_t i = i0; i < i0 + len; i++)
            if (codes[i] >> f->elem_bits)
                return qs_fail(e, "format %s: code 0x%x of element %zu has more than %d bits", f->name,
                               (unsigned)codes[i], i, f->elem_bits);
        if (c == 0xFF) {
            for (size_t i = i0; i < i0 + len; i++) y[i] = NAN;
            continue;
        }
        float X = scale_of(c);
        for (size_t i = i0; i < i0 + len; i++)
            y[i] = (el->mf ? qs_mf_decode(el->mf, codes[i]) : int8_val((int8_t)(uint8_t)codes[i])) * X;
    }
    return 0;
}

/* ---- vectorised fakeq (RNE elements) ---------------------------------------------------------- */

/* Per-format constants of the (a + M) - M rounding (header). */
typedef struct mx_vk {
    uint32_t lowexp;   /* float32 exponent bits of 2^emin */
    uint32_t shift;    /* (23 - mbits) << 23 */
    float cap;         /* inputs are clamped to 2*max first (keeps M finite); the result min(t, max) */
    float maxv;
    int int8;          /* MXINT8: turn -0 into +0 */
} mx_vk;

static void mx_vk_init(const mx_elem *el, mx_vk *k)
{
    k->lowexp = (uint32_t)(el->emin + 127) << 23;
    k->shift = (uint32_t)(23 - el->mbits) << 23;
    k->cap = 2.0f * el->maxv;
    k->maxv = el->maxv;
    k->int8 = el->mf == NULL;
}

/* RNE_sat of a >= 0 (finite) on the element grid: one lane of the vector kernels, in plain C. */
static inline float mx_rne(const mx_vk *k, float a)
{
    float v = fminf(a, k->cap);
    uint32_t ex = f2u(v) & 0x7f800000u;
    float M = u2f((ex > k->lowexp ? ex : k->lowexp) + k->shift);
    return fminf((v + M) - M, k->maxv);
}

static void mx_block_scalar(const mx_run *r, const mx_vk *k, const float *x, size_t i0, size_t len, float *y,
                            uint8_t *code);

#if MX_X86
/* Blocks with NaN/Inf or to be flushed are handed to mx_block_scalar (these kernels run RNE only,
** so its SR index is never used); every other variant is in mx_scale_code or a pass in mx_fakeq. */
__attribute__((target("avx2")))
static void mx_blocks_avx2(const mx_run *r, const mx_vk *k, const float *x, size_t nblk, float *y, uint8_t *codes)
{
    const size_t B = r->block;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m256i lowexp = _mm256_set1_epi32((int)k->lowexp), shift = _mm256_set1_epi32((int)k->shift);
    const __m256 cap = _mm256_set1_ps(k->cap), maxv = _mm256_set1_ps(k->maxv);
    const __m256 zero = _mm256_setzero_ps();
    for (size_t b = 0; b < nblk; b++, x += B, y += B) {
        __m256i m = _mm256_setzero_si256();
        for (size_t j = 0; j < B; j += 8)
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + j)), absm));
        __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
        uint32_t ab = (uint32_t)_mm_cvtsi128_si32(h);
        if (ab >= 0x7f800000u || mx_flushes(r, ab)) {     /* rare blocks: the portable code */
            mx_block_scalar(r, k, x, 0, B, y, codes ? codes + b : NULL);
            continue;
        }
        unsigned c = mx_scale_code(r, ab);
        if (codes) codes[b] = (uint8_t)c;
        const __m256 X = _mm256_set1_ps(scale_of(c)), inv = _mm256_set1_ps(inv_scale_of(c));
        for (size_t j = 0; j < B; j += 8) {
            __m256i xb = _mm256_loadu_si256((const __m256i *)(x + j));
            __m256i a = _mm256_and_si256(xb, absm);
            __m256i s = _mm256_xor_si256(xb, a);
            __m256 v = _mm256_min_ps(_mm256_mul_ps(_mm256_castsi256_ps(a), inv), cap);
            __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(v), expm), lowexp);
            __m256 M = _mm256_castsi256_ps(_mm256_add_epi32(e, shift));
            __m256 t = _mm256_min_ps(_mm256_sub_ps(_mm256_add_ps(v, M), M), maxv);
            t = _mm256_mul_ps(t, X);
            t = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(t), s));
            if (k->int8) t = _mm256_add_ps(t, zero);          /* -0 + 0 = +0; exact otherwise */
            _mm256_storeu_ps(y + j, t);
        }
    }
}

__attribute__((target("avx512f")))
static void mx_blocks_avx512(const mx_run *r, const mx_vk *k, const float *x, size_t nblk, float *y, uint8_t *codes)
{
    const size_t B = r->block;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i lowexp = _mm512_set1_epi32((int)k->lowexp), shift = _mm512_set1_epi32((int)k->shift);
    const __m512 cap = _mm512_set1_ps(k->cap), maxv = _mm512_set1_ps(k->maxv);
    const __m512 zero = _mm512_setzero_ps();
    for (size_t b = 0; b < nblk; b++, x += B, y += B) {
        __m512i m = _mm512_setzero_si512();
        for (size_t j = 0; j < B; j += 16)
            m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512((const void *)(x + j)), absm));
        uint32_t ab = (uint32_t)_mm512_reduce_max_epu32(m);
        if (ab >= 0x7f800000u || mx_flushes(r, ab)) {     /* rare blocks: the portable code */
            mx_block_scalar(r, k, x, 0, B, y, codes ? codes + b : NULL);
            continue;
        }
        unsigned c = mx_scale_code(r, ab);
        if (codes) codes[b] = (uint8_t)c;
        const __m512 X = _mm512_set1_ps(scale_of(c)), inv = _mm512_set1_ps(inv_scale_of(c));
        for (size_t j = 0; j < B; j += 16) {
            __m512i xb = _mm512_loadu_si512((const void *)(x + j));
            __m512i a = _mm512_and_si512(xb, absm);
            __m512i s = _mm512_xor_si512(xb, a);
            __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), inv), cap);
            __m512i e = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v), expm), lowexp);
            __m512 M = _mm512_castsi512_ps(_mm512_add_epi32(e, shift));
            __m512 t = _mm512_min_ps(_mm512_sub_ps(_mm512_add_ps(v, M), M), maxv);
            t = _mm512_mul_ps(t, X);
            t = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), s));
            if (k->int8) t = _mm512_add_ps(t, zero);
            _mm512_storeu_ps(y + j, t);
        }
    }
}
#endif

/* fakeq of one block [i0, i0+len) on the portable path: RNE by the vector kernels' method in
** plain C (tested against qs_mf_encode through fakeq == decode(encode)), other modes qs_mf_round. */
static void mx_block_scalar(const mx_run *r, const mx_vk *k, const float *x, size_t i0, size_t len, float *y,
                            uint8_t *code)
{
    const mx_elem *el = r->el;
    uint32_t ab = absmax_bits(x + i0, len);
    unsigned c = mx_scale_code(r, ab);
    if (code) *code = (uint8_t)c;
    if (c == 0xFF) {
        for (size_t i = i0; i < i0 + len; i++) y[i] = NAN;
        return;
    }
    if (mx_flushes(r, ab)) {
        for (size_t i = i0; i < i0 + len; i++) y[i] = k->int8 ? 0.0f : copysignf(0.0f, x[i]);
        return;
    }
    float X = scale_of(c), inv = inv_scale_of(c);
    if (r->mode == QS_RND_RNE) {
        for (size_t i = i0; i < i0 + len; i++) {
            uint32_t b = f2u(x[i]);
            float t = mx_rne(k, u2f(b & 0x7fffffffu) * inv) * X;
            t = u2f(f2u(t) | (b & 0x80000000u));
            y[i] = k->int8 ? t + 0.0f : t;
        }
        return;
    }
    for (size_t i = i0; i < i0 + len; i++) {
        float v = x[i] * inv;
        v = el->mf ? qs_mf_round(el->mf, v, r->mode, sr_u(r, i), 1) : int8_val(int8_q(v, r->mode, sr_u(r, i)));
        y[i] = v * X;
    }
}

/* fakeq, and each block's scale code when codes is not NULL (the analysis engine's). */
static int mx_fakeq_codes(const mx_elem *el, const qs_format *f, const qs_qopts *o, const float *x, size_t n,
                          float *y, uint8_t *codes, qs_err *e)
{
    mx_run r;
    if (mx_setup(f, el, o, &r, e)) return -1;
    size_t done = 0;
    mx_vk k;
    mx_vk_init(el, &k);
#if MX_X86
    if (r.mode == QS_RND_RNE && n >= r.block) {
        int lvl = qs_simd_level();
        if (lvl >= QS_SIMD_AVX512 && r.block % 16 == 0) {
            done = n / r.block * r.block;
            mx_blocks_avx512(&r, &k, x, n / r.block, y, codes);
        } else if (lvl >= QS_SIMD_AVX2 && r.block % 8 == 0) {
            done = n / r.block * r.block;
            mx_blocks_avx2(&r, &k, x, n / r.block, y, codes);
        }
    }
#endif
    for (size_t i0 = done; i0 < n; i0 += r.block)
        mx_block_scalar(&r, &k, x, i0, n - i0 < r.block ? n - i0 : r.block, y, codes ? codes + i0 / r.block : NULL);
    if (r.zero_pos)                                       /* -0 -> +0, whatever the path */
        for (size_t i = 0; i < n; i++)
            if (f2u(y[i]) == 0x80000000u) y[i] = 0.0f;
    return 0;
}

static int mx_fakeq(const mx_elem *el, const qs_format *f, const qs_qopts *o, const float *x, size_t n,
                    float *y, qs_err *e)
{
    return mx_fakeq_codes(el, f, o, x, n, y, NULL, e);
}

/* ---- vectorised encode (RNE elements) --------------------------------------------------------
**
** The fakeq kernels' rounding t = min((v + M) - M, max) gives the element value (the same value
** qs_mf_encode picks: fakeq == decode(encode) is tested), which is then turned into its code: a
** target-subnormal magnitude is bits(t + C) - bits(C) with C = 2^(emin - mbits + 23) (t is a
** multiple of C's ulp), a normal one its float32 bits shifted down by 23 - mbits with the exponent
** re-biased; the sign of x goes on top (x * inv keeps it), or is dropped on zeros under
** zero_positive.  MXINT8: q = t * 64 exactly, code (uint8)(±q).  Blocks holding NaN/Inf or to be
** flushed, partial blocks and other rounding modes take mx_enc_block_scalar.  Tested code for code
** and byte for byte against the scalar level (tests/unit/test_format_mx.c, test_format_variants.c).
*/
typedef struct mx_ek {
    mx_vk v;
    uint32_t minnorm, cbits, rebias;
    int shiftm, signsh;   /* signsh: right shift taking bit 31 to the code's sign bit */
    float c;
    int zp;
} mx_ek;

static void mx_ek_init(const mx_run *r, const qs_format *f, mx_ek *k)
{
    const mx_elem *el = r->el;
    mx_vk_init(el, &k->v);
    int M = el->mbits;
    k->shiftm = 23 - M;
    k->minnorm = (uint32_t)(el->emin + 127) << 23;
    k->c = u2f((uint32_t)(el->emin - M + 23 + 127) << 23);
    k->cbits = f2u(k->c);
    k->rebias = el->mf ? (uint32_t)(127 - el->mf->bias) << M : 0;
    k->signsh = 31 - (f->elem_bits - 1);
    k->zp = r->zero_pos;
}

#if MX_X86
__attribute__((target("avx2")))
static void mx_enc_avx2(const mx_run *r, const mx_ek *k, const qs_format *f, const float *x, size_t nblk,
                        uint32_t *codes, uint8_t *meta)
{
    const size_t B = r->block;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m256i lowexp = _mm256_set1_epi32((int)k->v.lowexp), shift = _mm256_set1_epi32((int)k->v.shift);
    const __m256 cap = _mm256_set1_ps(k->v.cap), maxv = _mm256_set1_ps(k->v.maxv);
    const __m256i minnorm = _mm256_set1_epi32((int)k->minnorm), cbits = _mm256_set1_epi32((int)k->cbits);
    const __m256i rebias = _mm256_set1_epi32((int)k->rebias), zero = _mm256_setzero_si256();
    const __m256i byte = _mm256_set1_epi32(0xff);
    const __m256 c = _mm256_set1_ps(k->c), s64 = _mm256_set1_ps(64.0f);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    const int int8 = k->v.int8, zp = k->zp;
    for (size_t b = 0; b < nblk; b++) {
        const float *xb0 = x + b * B;
        uint32_t *cb = codes + b * B;
        __m256i m = _mm256_setzero_si256();
        for (size_t j = 0; j < B; j += 8)
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(xb0 + j)), absm));
        __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
        uint32_t ab = (uint32_t)_mm_cvtsi128_si32(h);
        if (ab >= 0x7f800000u || mx_flushes(r, ab)) {      /* rare blocks: the portable code */
            mx_enc_block_scalar(r, f, x, b * B, B, codes, meta + b);
            continue;
        }
        unsigned sc = mx_scale_code(r, ab);
        meta[b] = (uint8_t)sc;
        const __m256 inv = _mm256_set1_ps(inv_scale_of(sc));
        for (size_t j = 0; j < B; j += 8) {
            __m256i xb = _mm256_loadu_si256((const __m256i *)(xb0 + j));
            __m256i a = _mm256_and_si256(xb, absm);
            __m256i s = _mm256_andnot_si256(absm, xb);
            __m256 v = _mm256_min_ps(_mm256_mul_ps(_mm256_castsi256_ps(a), inv), cap);
            __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(v), expm), lowexp);
            __m256 M = _mm256_castsi256_ps(_mm256_add_epi32(e, shift));
            __m256 t = _mm256_min_ps(_mm256_sub_ps(_mm256_add_ps(v, M), M), maxv);
            __m256i ti = _mm256_castps_si256(t), code;
            if (int8) {
                __m256i q = _mm256_cvttps_epi32(_mm256_mul_ps(t, s64));
                __m256i neg = _mm256_srai_epi32(s, 31);                       /* all ones when x < 0 */
                code = _mm256_and_si256(_mm256_sub_epi32(_mm256_xor_si256(q, neg), neg), byte);
            } else {
                __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(t, c)), cbits);
                __m256i nor = _mm256_sub_epi32(_mm256_srl_epi32(ti, sh), rebias);
                code = _mm256_blendv_epi8(nor, sub, _mm256_cmpgt_epi32(minnorm, ti));
                __m256i sg = _mm256_srl_epi32(s, ssh);
                if (zp) sg = _mm256_andnot_si256(_mm256_cmpeq_epi32(code, zero), sg);
                code = _mm256_or_si256(code, sg);
            }
            _mm256_storeu_si256((__m256i *)(cb + j), code);
        }
    }
}

__attribute__((target("avx512f")))
static void mx_enc_avx512(const mx_run *r, const mx_ek *k, const qs_format *f, const float *x, size_t nblk,
                          uint32_t *codes, uint8_t *meta)
{
    const size_t B = r->block;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i lowexp = _mm512_set1_epi32((int)k->v.lowexp), shift = _mm512_set1_epi32((int)k->v.shift);
    const __m512 cap = _mm512_set1_ps(k->v.cap), maxv = _mm512_set1_ps(k->v.maxv);
    const __m512i minnorm = _mm512_set1_epi32((int)k->minnorm), cbits = _mm512_set1_epi32((int)k->cbits);
    const __m512i rebias = _mm512_set1_epi32((int)k->rebias), zero = _mm512_setzero_si512();
    const __m512i byte = _mm512_set1_epi32(0xff);
    const __m512 c = _mm512_set1_ps(k->c), s64 = _mm512_set1_ps(64.0f);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    const int int8 = k->v.int8, zp = k->zp;
    for (size_t b = 0; b < nblk; b++) {
        const float *xb0 = x + b * B;
        uint32_t *cb = codes + b * B;
        __m512i m = _mm512_setzero_si512();
        for (size_t j = 0; j < B; j += 16)
            m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512((const void *)(xb0 + j)), absm));
        uint32_t ab = (uint32_t)_mm512_reduce_max_epu32(m);
        if (ab >= 0x7f800000u || mx_flushes(r, ab)) {      /* rare blocks: the portable code */
            mx_enc_block_scalar(r, f, x, b * B, B, codes, meta + b);
            continue;
        }
        unsigned sc = mx_scale_code(r, ab);
        meta[b] = (uint8_t)sc;
        const __m512 inv = _mm512_set1_ps(inv_scale_of(sc));
        for (size_t j = 0; j < B; j += 16) {
            __m512i xb = _mm512_loadu_si512((const void *)(xb0 + j));
            __m512i a = _mm512_and_si512(xb, absm);
            __m512i s = _mm512_andnot_si512(absm, xb);
            __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), inv), cap);
            __m512i e = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v), expm), lowexp);
            __m512 M = _mm512_castsi512_ps(_mm512_add_epi32(e, shift));
            __m512 t = _mm512_min_ps(_mm512_sub_ps(_mm512_add_ps(v, M), M), maxv);
            __m512i ti = _mm512_castps_si512(t), code;
            if (int8) {
                __m512i q = _mm512_cvttps_epi32(_mm512_mul_ps(t, s64));
                __m512i neg = _mm512_srai_epi32(s, 31);
                code = _mm512_and_si512(_mm512_sub_epi32(_mm512_xor_si512(q, neg), neg), byte);
            } else {
                __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(t, c)), cbits);
                code = _mm512_sub_epi32(_mm512_srl_epi32(ti, sh), rebias);
                code = _mm512_mask_mov_epi32(code, _mm512_cmplt_epu32_mask(ti, minnorm), sub);
                __m512i sg = _mm512_srl_epi32(s, ssh);
                if (zp) sg = _mm512_mask_mov_epi32(sg, _mm512_cmpeq_epi32_mask(code, zero), zero);
                code = _mm512_or_si512(code, sg);
            }
            _mm512_storeu_si512((void *)(cb + j), code);
        }
    }
}
#endif

/* Whole blocks encoded by the vector kernels; returns how many values were done (0: none). */
static size_t mx_enc_vector(const mx_run *r, const qs_format *f, const float *x, size_t n, uint32_t *codes,
                            uint8_t *meta)
{
#if MX_X86
    if (r->mode != QS_RND_RNE || n < r->block) return 0;
    int lvl = qs_simd_level();
    mx_ek k;
    if (lvl >= QS_SIMD_AVX512 && r->block % 16 == 0) {
        mx_ek_init(r, f, &k);
        mx_enc_avx512(r, &k, f, x, n / r->block, codes, meta);
        return n / r->block * r->block;
    }
    if (lvl >= QS_SIMD_AVX2 && r->block % 8 == 0) {
        mx_ek_init(r, f, &k);
        mx_enc_avx2(r, &k, f, x, n / r->block, codes, meta);
        return n / r->block * r->block;
    }
#endif
    (void)r; (void)f; (void)x; (void)n; (void)codes; (void)meta;
    return 0;
}

/* ---- registry --------------------------------------------------------------------------------- */

#define MX_FUNCS(tag, EL)                                                                                  \
    static int tag##_enc(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *c,    \
                         uint8_t *m, float *ts, qs_err *e) { return mx_encode(&EL, f, o, x, n, c, m, ts, e); } \
    static int tag##_dec(const qs_format *f, const qs_qopts *o, const uint32_t *c, const uint8_t *m,      \
                         float ts, size_t n, float *y, qs_err *e) { return mx_decode(&EL, f, o, c, m, ts, n, y, e); } \
    static int tag##_fq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y,        \
                        qs_err *e) { return mx_fakeq(&EL, f, o, x, n, y, e); }

MX_FUNCS(e4m3, kE4M3)
MX_FUNCS(e5m2, kE5M2)
MX_FUNCS(e3m2, kE3M2)
MX_FUNCS(e2m3, kE2M3)
MX_FUNCS(e2m1, kE2M1)
MX_FUNCS(int8, kINT8)

static float cv_e4m3(unsigned c) { return qs_mf_decode(&qs_mf_e4m3, c); }
static float cv_e5m2(unsigned c) { return qs_mf_decode(&qs_mf_e5m2, c); }
static float cv_e3m2(unsigned c) { return qs_mf_decode(&qs_mf_e3m2, c); }
static float cv_e2m3(unsigned c) { return qs_mf_decode(&qs_mf_e2m3, c); }
static float cv_e2m1(unsigned c) { return qs_mf_decode(&qs_mf_e2m1, c); }
static float cv_int8(unsigned c) { return int8_val((int8_t)(uint8_t)c); }

#define RM(r) (1u << (r))
#define MX_ROUND RM(QS_RND_RNE) | RM(QS_RND_TA) | RM(QS_RND_RTZ) | RM(QS_RND_SR) | RM(QS_RND_TZ)
#define MX_VARIANTS (QS_VAR_FLOOR_LOG2F | QS_VAR_ZERO_POSITIVE | QS_VAR_FLUSH_SUBNORMAL | QS_VAR_NONFINITE_TE | \
                     QS_VAR_ZERO_BLOCK_SCALE)

static double mx_scale_value(unsigned c) { return qs_e8m0_decode((uint8_t)c); }

static void mx_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                         char *out, size_t cap)
{
    (void)f; (void)ts; (void)step;
    char b8[9], v[32];
    for (int i = 0; i < 8; i++) b8[i] = (m[0] >> (7 - i)) & 1 ? '1' : '0';
    b8[8] = 0;
    num(qs_e8m0_decode(m[0]), v, sizeof v);
    if (m[0] == 0xFF) snprintf(out, cap, "E8M0 scale 0xff %s = NaN (block holds NaN/Inf)", b8);
    else snprintf(out, cap, "E8M0 scale 0x%02x [%s] = 2^%d = %s  (rule %s)", m[0], b8, (int)m[0] - 127, v,
                  qs_scale_rule_name(o->scale_rule));
}

#define MX_ENTRY(NAME, SUMMARY, BITS, EB, MB, BIAS, INF, MAXV, MINN, MINS, tag, ELEM, MF_)                \
    {                                                                                                      \
        .name = NAME, .family = QS_FAM_MX, .elem = ELEM, .mf = MF_, .scale_kind = QS_SK_E8M0,             \
        .scale_value = mx_scale_value, .meta_text = mx_meta_text, .summary = SUMMARY, .elem_bits = BITS, .ebits = EB, .mbits = MB,    \
        .bias = BIAS, .block = 32, .meta_bytes = 1, .meta_bits = 8, .has_inf = INF, .has_nan = 1,        \
        .max_finite = (MAXV) * 0x1p127, .min_normal = (MINN) * 0x1p-127, .min_subnormal = (MINS) * 0x1p-127, \
        .default_round = QS_RND_RNE, .round_modes = MX_ROUND, .has_scale_rule = 1, .encode = tag##_enc,  \
        .decode = tag##_dec, .fakeq = tag##_fq, .code_value = cv_##tag, .ncodes = 1u << (BITS),          \
        .variants = MX_VARIANTS,                                                                           \
    }

const qs_format qs_formats_mx[] = {
    MX_ENTRY("mxfp8_e4m3", "OCP MXFP8: 32 x FP8 E4M3 + E8M0 scale, 8.25 bits", 8, 4, 3, 7, 0, 448.0, 0x1p-6,
             0x1p-9, e4m3, QS_ELEM_FLOAT, &qs_mf_e4m3),
    MX_ENTRY("mxfp8_e5m2", "OCP MXFP8: 32 x FP8 E5M2 + E8M0 scale, 8.25 bits", 8, 5, 2, 15, 1, 57344.0,
             0x1p-14, 0x1p-16, e5m2, QS_ELEM_FLOAT, &qs_mf_e5m2),
    MX_ENTRY("mxfp6_e3m2", "OCP MXFP6: 32 x FP6 E3M2 + E8M0 scale, 6.25 bits", 6, 3, 2, 3, 0, 28.0, 0.25,
             0.0625, e3m2, QS_ELEM_FLOAT, &qs_mf_e3m2),
    MX_ENTRY("mxfp6_e2m3", "OCP MXFP6: 32 x FP6 E2M3 + E8M0 scale, 6.25 bits", 6, 2, 3, 1, 0, 7.5, 1.0,
             0.125, e2m3, QS_ELEM_FLOAT, &qs_mf_e2m3),
    MX_ENTRY("mxfp4", "OCP MXFP4: 32 x FP4 E2M1 + E8M0 scale, 4.25 bits", 4, 2, 1, 1, 0, 6.0, 1.0, 0.5, e2m1, QS_ELEM_FLOAT, &qs_mf_e2m1),
    MX_ENTRY("mxint8", "OCP MXINT8: 32 x INT8 (q/64, +-127) + E8M0 scale, 8.25 bits", 8, 0, 0, 0, 0,
             127.0 / 64.0, 0.0, 1.0 / 64.0, int8, QS_ELEM_INT, NULL),
};
const size_t qs_formats_mx_n = sizeof qs_formats_mx / sizeof qs_formats_mx[0];

/* ---- block scales from block maxima (for the analysis engine) -------------------------------- */

static const mx_elem *const mx_elems[] = {&kE4M3, &kE5M2, &kE3M2, &kE2M3, &kE2M1, &kINT8};

#if MX_X86
/* The loop below, 16 blocks at a time (same bits: X is a power of two, Q one float product). */
__attribute__((target("avx512f")))
static size_t mx_block_scales_avx512(const mx_elem *el, const uint8_t *code, size_t nb, float *S, float *Q)
{
    const __m512i c255 = _mm512_set1_epi32(255), zero = _mm512_setzero_si512();
    const __m512 maxv = _mm512_set1_ps(el->maxv), nan = _mm512_set1_ps(NAN);
    size_t i = 0;
    for (; i + 16 <= nb; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(code + i)));
        __m512i xb = _mm512_mask_mov_epi32(_mm512_slli_epi32(c, 23), _mm512_cmpeq_epi32_mask(c, zero),
                                           _mm512_set1_epi32(0x00400000));
        __m512 X = _mm512_castsi512_ps(xb);
        __mmask16 isnan = _mm512_cmpeq_epi32_mask(c, c255);
        _mm512_storeu_ps(S + i, _mm512_mask_mov_ps(X, isnan, nan));
        _mm512_storeu_ps(Q + i, _mm512_mask_mov_ps(_mm512_mul_ps(maxv, X), isnan, nan));
    }
    return i;
}
#endif

int qs_mx_fakeq_scales(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *code,
                       float *S, float *Q, qs_err *e)
{
    size_t k = (size_t)(f - qs_formats_mx);
    if (f < qs_formats_mx || k >= qs_formats_mx_n) return qs_fail(e, "format %s is not an MX format", f->name);
    const mx_elem *el = mx_elems[k];
    if (mx_fakeq_codes(el, f, o, x, n, y, code, e)) return -1;
    size_t B = o && o->block > 0 ? (size_t)o->block : (size_t)f->block, nb = (n + B - 1) / B, i = 0;
#if MX_X86
    if (qs_simd_level() >= QS_SIMD_AVX512) i = mx_block_scales_avx512(el, code, nb, S, Q);
#endif
    for (; i < nb; i++) {
        if (code[i] == 0xFF) {
            S[i] = Q[i] = NAN;
            continue;
        }
        float X = scale_of(code[i]);
        S[i] = 1.0f * X;
        Q[i] = el->maxv * X;
    }
    return 0;
}
