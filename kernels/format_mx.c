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
** The vector loops are format_simd.h's, shared with NVFP4; this file gives them the E8M0 scale of
** a block (mx_vscale) and the portable code for the blocks they hand back.
** tests/unit/test_format_mx.c checks them against qs_mf_encode (fakeq == decode(encode)) and
** against each other on millions of values.  encode with RNE elements is vectorised the same way
** (same blocks, same fallbacks; the value-to-code step is described in format_simd.h) and tested
** code for code and byte for byte against the scalar encode at every level.
*/
#include "fbits.h"
#include "format.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format_families.h"
#include "format_simd.h"
#include "minifloat.h"
#include "simd.h"
#include "sr.h"

#define MX_X86 QS_FORMAT_SIMD


/* Element type of an MX format.  mf == NULL is MXINT8. */
typedef struct mx_elem {
    const qs_minifloat *mf;
    int emax;          /* emax_elem of §1.3 / §1.5 */
    int mbits;         /* mantissa width (INT8: 6) */
    int emin;          /* exponent of the smallest normal binade (INT8: 0) */
    float maxv;        /* largest element magnitude */
    double uos_qmax;   /* default UOS threshold (header) */
} mx_elem;

/* A minifloat element from its layout (minifloat.h) and its default UOS threshold. */
#define MX_ELEM(T, UOS) MX_ELEM_(&qs_mf_##T, UOS, QS_MF_LAYOUT_##T)
#define MX_ELEM_(MF, UOS, ...) \
    {MF, QS_MF_EMAX(__VA_ARGS__), MX_M(__VA_ARGS__), 1 - MX_B(__VA_ARGS__), (float)QS_MF_SMALL_MAX(__VA_ARGS__), UOS}
#define MX_M(E, M, B, K) (M)
#define MX_B(E, M, B, K) (B)

static const mx_elem kE4M3 = MX_ELEM(e4m3, 464.0);
static const mx_elem kE5M2 = MX_ELEM(e5m2, 61440.0);
static const mx_elem kE3M2 = MX_ELEM(e3m2, 30.01104854345604);
static const mx_elem kE2M3 = MX_ELEM(e2m3, 7.875);
static const mx_elem kE2M1 = MX_ELEM(e2m1, 7.25);
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
    uint32_t ab = qs_absmax_bits(x + i0, len);
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

/* The element grid's constants of a run (format_simd.h). */
static void mx_ek(const mx_run *r, const qs_format *f, qs_ek *k)
{
    const mx_elem *el = r->el;
    qs_ek_init(k, el->emin, el->mbits, el->maxv, el->mf ? el->mf->bias : 0, f->elem_bits, el->mf == NULL, r->zero_pos);
}

/* What the shared vector loops (format_simd.h) need of a run. */
typedef struct mx_vctx { const mx_run *r; const qs_ek *k; const qs_format *f; } mx_vctx;

static inline int mx_vscale(const void *ctx, uint32_t ab, uint8_t *code, float *inv, float *X)
{
    const mx_run *r = ((const mx_vctx *)ctx)->r;
    if (ab >= 0x7f800000u || mx_flushes(r, ab)) return 1;   /* NaN/Inf or flushed: the portable code */
    unsigned c = mx_scale_code(r, ab);
    *code = (uint8_t)c;
    *inv = inv_scale_of(c);
    *X = scale_of(c);
    return 0;
}

static void mx_block_scalar(const mx_run *r, const qs_ek *k, const float *x, size_t i0, size_t len, float *y,
                            uint8_t *code);

static void mx_vrare_fakeq(const void *ctx, const float *x, float *y, uint8_t *code)
{
    const mx_vctx *v = ctx;
    mx_block_scalar(v->r, v->k, x, 0, v->r->block, y, code);
}

#if MX_X86
__attribute__((target("avx2")))
static void mx_blocks_avx2(const mx_vctx *v, const float *x, size_t nblk, float *y, uint8_t *codes)
{
    qs_vblk_fakeq_avx2(v->k, x, nblk, v->r->block, y, codes, mx_vscale, mx_vrare_fakeq, v);
}

__attribute__((target("avx512f")))
static void mx_blocks_avx512(const mx_vctx *v, const float *x, size_t nblk, float *y, uint8_t *codes)
{
    qs_vblk_fakeq_avx512(v->k, x, nblk, v->r->block, y, codes, mx_vscale, mx_vrare_fakeq, v);
}
#endif

/* fakeq of one block [i0, i0+len) on the portable path: RNE by the vector kernels' method in
** plain C (tested against qs_mf_encode through fakeq == decode(encode)), other modes qs_mf_round. */
static void mx_block_scalar(const mx_run *r, const qs_ek *k, const float *x, size_t i0, size_t len, float *y,
                            uint8_t *code)
{
    const mx_elem *el = r->el;
    uint32_t ab = qs_absmax_bits(x + i0, len);
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
            float t = qs_ek_rne(k, u2f(b & 0x7fffffffu) * inv) * X;
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
    qs_ek k;
    mx_ek(&r, f, &k);
#if MX_X86
    if (r.mode == QS_RND_RNE && n >= r.block) {
        int lvl = qs_simd_level();
        mx_vctx v = {&r, &k, f};
        if (lvl >= QS_SIMD_AVX512 && r.block % 16 == 0) {
            done = n / r.block * r.block;
            mx_blocks_avx512(&v, x, n / r.block, y, codes);
        } else if (lvl >= QS_SIMD_AVX2 && r.block % 8 == 0) {
            done = n / r.block * r.block;
            mx_blocks_avx2(&v, x, n / r.block, y, codes);
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
** format_simd.h's loop with the fakeq kernels' rounding and its value-to-code step (the element
** value t is the one qs_mf_encode picks: fakeq == decode(encode) is tested); the sign of x is
** dropped on zeros under zero_positive.  Blocks holding NaN/Inf or to be flushed, partial blocks
** and other rounding modes take mx_enc_block_scalar.  Tested code for code and byte for byte
** against the scalar level (tests/unit/test_format_mx.c, test_format_variants.c).
*/
static void mx_vrare_enc(const void *ctx, const float *x, size_t i0, uint32_t *codes, uint8_t *meta)
{
    const mx_vctx *v = ctx;
    mx_enc_block_scalar(v->r, v->f, x, i0, v->r->block, codes, meta);
}

#if MX_X86
__attribute__((target("avx2")))
static void mx_enc_avx2(const mx_vctx *v, const float *x, size_t nblk, uint32_t *codes, uint8_t *meta)
{
    qs_vblk_encode_avx2(v->k, x, nblk, v->r->block, codes, meta, mx_vscale, mx_vrare_enc, v);
}

__attribute__((target("avx512f")))
static void mx_enc_avx512(const mx_vctx *v, const float *x, size_t nblk, uint32_t *codes, uint8_t *meta)
{
    qs_vblk_encode_avx512(v->k, x, nblk, v->r->block, codes, meta, mx_vscale, mx_vrare_enc, v);
}
#endif

/* Whole blocks encoded by the vector kernels; returns how many values were done (0: none). */
static size_t mx_enc_vector(const mx_run *r, const qs_format *f, const float *x, size_t n, uint32_t *codes,
                            uint8_t *meta)
{
#if MX_X86
    if (r->mode != QS_RND_RNE || n < r->block) return 0;
    int lvl = qs_simd_level();
    qs_ek k;
    mx_ek(r, f, &k);
    mx_vctx v = {r, &k, f};
    if (lvl >= QS_SIMD_AVX512 && r->block % 16 == 0) {
        mx_enc_avx512(&v, x, n / r->block, codes, meta);
        return n / r->block * r->block;
    }
    if (lvl >= QS_SIMD_AVX2 && r->block % 8 == 0) {
        mx_enc_avx2(&v, x, n / r->block, codes, meta);
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

static int mx_fakeq_scales(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *code,
                           float *S, float *Q, qs_err *e);

#define MX_ROW(NAME, SUMMARY, BITS, ROW, INF, MAXV, MINN, MINS, tag, CV, ELEM, MF_, GRID)                                \
    {                                                                                                      \
        .name = NAME, .family = QS_FAM_MX, .elem = ELEM, .mf = MF_, .scale_kind = QS_SK_E8M0,             \
        .scale_value = mx_scale_value, .meta_text = mx_meta_text, .summary = SUMMARY, .elem_bits = BITS,   \
        ROW, .has_inf = INF, .has_nan = 1, .block = 32, .meta_bytes = 1, .meta_bits = 8,                    \
        .max_finite = (MAXV) * 0x1p127, .min_normal = (MINN) * 0x1p-127, .min_subnormal = (MINS) * 0x1p-127, \
        .default_round = QS_RND_RNE, .round_modes = MX_ROUND, .has_scale_rule = 1, .encode = tag##_enc,  \
        .decode = tag##_dec, .fakeq = tag##_fq, .code_value = CV, .ncodes = 1u << (BITS),          \
        .variants = MX_VARIANTS, .grid = GRID, .fakeq_scales = mx_fakeq_scales,                           \
    }
#define MX_INT8_ROW .ebits = 0, .mbits = 0, .bias = 0
/* MX with minifloat elements of layout T: the ranges are the element's times 2^-127..2^127. */
#define MX_FP(NAME, SUMMARY, T)                                                                            \
    MX_ROW(NAME, SUMMARY, QS_MF_BITS(QS_MF_LAYOUT_##T), QS_MF_ROW(QS_MF_LAYOUT_##T),                       \
           QS_MF_HAS_INF(QS_MF_LAYOUT_##T), QS_MF_SMALL_MAX(QS_MF_LAYOUT_##T), QS_MF_SMALL_MIN_NORMAL(QS_MF_LAYOUT_##T),                    \
           QS_MF_SMALL_MIN_SUB(QS_MF_LAYOUT_##T), T, qs_mf_value_##T, QS_ELEM_FLOAT, &qs_mf_##T,               \
           QS_MF_GRID(QS_MF_LAYOUT_##T))

const qs_format qs_formats_mx[] = {
    MX_FP("mxfp8_e4m3", "OCP MXFP8: 32 x FP8 E4M3 + E8M0 scale, 8.25 bits", e4m3),
    MX_FP("mxfp8_e5m2", "OCP MXFP8: 32 x FP8 E5M2 + E8M0 scale, 8.25 bits", e5m2),
    MX_FP("mxfp6_e3m2", "OCP MXFP6: 32 x FP6 E3M2 + E8M0 scale, 6.25 bits", e3m2),
    MX_FP("mxfp6_e2m3", "OCP MXFP6: 32 x FP6 E2M3 + E8M0 scale, 6.25 bits", e2m3),
    MX_FP("mxfp4", "OCP MXFP4: 32 x FP4 E2M1 + E8M0 scale, 4.25 bits", e2m1),
    MX_ROW("mxint8", "OCP MXINT8: 32 x INT8 (q/64, +-127) + E8M0 scale, 8.25 bits", 8, MX_INT8_ROW, 0,
           127.0 / 64.0, 0.0, 1.0 / 64.0, int8, cv_int8, QS_ELEM_INT, NULL, QS_GRID(0, 0, 6)),   /* q / 64 */
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

static int mx_fakeq_scales(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *code,
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
