/*
** NVIDIA NVFP4 in the registry: blocks of 16 E2M1 elements, one UE4M3 scale per block and one FP32
** per-tensor scale, after spec/formats-mx.md §3.1 (Transformer Engine) and §2.4 (torchao), vectors
** T32-T35.
**
** Layout.  Codes: one E2M1 code per value (bit 3 sign), unpacked.  Metadata: one byte per block, the
** E4M3 code of the block scale (sign bit 0; decode reads it as unsigned UE4M3, ignoring bit 7, as
** the hardware does).  Block size 16 by default; o->block overrides (any size >= 1; a final partial
** block is its own block).
**
** The per-tensor number.  [Choice] `tensor_scale` carries the *global amax* everywhere: in
** qs_qopts (calibrated amax, > 0; 0 = the largest finite |x| of this call), as encode's output,
** and as decode's input.  Both libraries derive their per-tensor scale from that amax, and TE's
** dequantization uses the amax itself -- final_scale = fl32(fl32(s * amax) * fl32(1/2688)) --
** which S_dec = 1/S_enc cannot reproduce bit for bit, so storing the amax is the only choice that
** lets decode repeat both libraries' arithmetic exactly.  It must be finite and >= 0.
**
** Arithmetic (every step a correctly rounded float32 operation, in this order):
**   te (default, §3.1 kernel):
**     S_enc = fminf(2688 / amax, FLT_MAX), 1 if amax == 0 or S_enc == 0;  S_dec = 1 / S_enc;
**     s = E4M3_rne_satfinite(bamax * (S_enc * fl32(1/6)))      (no lower clamp: T35);
**     inv = fminf(1 / (s * S_dec), FLT_MAX);  code = E2M1(x * inv);
**     decode: E2M1 value * fl32(fl32(s * amax) * fl32(1/2688)).
**   torchao (o->nvfp4 == QS_NVFP4_TORCHAO, §2.4 two-level):
**     pts = amax / 2688;  s = E4M3_rne(clamp(fl32(bamax / 6) / pts, 2^-6, 448));
**     recip = fl32(1 / pts) / s;  code = E2M1(clamp(x * recip, ±6));  decode: value * fl32(pts * s).
**     [Note] This is the reciprocal form of the torchao commit the spec read (T34); older torchao
**     divides x by fl32(pts * s), which differs on near-ties (T32's -1.25).
** Elements round by o->round: RNE (default), TA, RTZ or SR (qs_sr_uniform(seed, index0 + i)),
** always saturating to ±6.
**
** Choices where the sources are silent:
**   - [Choice] The global amax computed here ignores NaN and ±Inf, so one bad value does not change
**     every other block's scale.  A block holding NaN or ±Inf gets scale code 0x7F (the E4M3 NaN),
**     element codes 0, and decodes to NaN throughout (as MX blocks do; TE has no rule for it).
**   - [Choice] torchao with pts == 0 (amax 0, or amax < 2688 * 2^-150) would compute 0/0 = NaN
**     scales; we store s = 2^-6 (code 0x08, the lower clamp), elements ±0 and decode to ±0.  Its
**     reciprocal recip is also clamped to FLT_MAX, as TE does, so zeros stay zero where torchao's
**     infinite recip (amax < ~2688 * 2^-122) would turn them into NaN and every other value into
**     ±6; we compute x * FLT_MAX instead.
**   - TE's final_scale overflows to Inf when amax > FLT_MAX / 448, as in TE (then 0 * Inf = NaN).
**   - [Choice] Registry value range is in units of the per-tensor scale amax/2688: max 6*448 = 2688,
**     smallest normal 1 * 2^-6, smallest subnormal 0.5 * 2^-9.
**
** Speed.  fakeq with SR elements scales whole runs of blocks and rounds them with qs_mf_round_n's
** vectorised SR (nv_sr_fakeq; the bits of qs_mf_round with the same draws: tested at every level).
** fakeq with RNE elements has a portable path and AVX2 and AVX-512 paths (block a multiple
** of 8 / 16), chosen by qs_simd_level() (QS_SIMD=scalar forces the portable path): the amax passes
** run vectorised, the per-block scale arithmetic is the scalar code below, and E2M1 rounding is
** t = (a + M) - M with M = 2^(max(e(a), 0) + 22), then min(t, 6) -- bit-identical to qs_mf_round
** (tested through fakeq == decode(encode), which uses qs_mf_encode, and path against path).
** encode with RNE elements is vectorised the same way; both vector loops are format_simd.h's,
** shared with MX, given this file's block scale (nv_vscale_fq / nv_vscale_enc).  Tested code for
** code and byte for byte against the scalar encode at every level.
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

#define NV_X86 QS_FORMAT_SIMD


typedef struct nv_run {
    qs_round mode;
    size_t block;
    int torchao;
    uint64_t seed, index0;
    float amax;                 /* global amax (the stored tensor scale) */
    float senc6, sdec;          /* te */
    float pts, rpts;            /* torchao */
    qs_ek k;                    /* E2M1 grid (format_simd.h) */
} nv_run;

/* Per-block numbers: scale code, its value, element multiplier, dequantization multiplier. */
typedef struct nv_blk {
    uint8_t code;
    float s, inv, dq;
} nv_blk;

static int nv_opts(const qs_format *f, const qs_qopts *o, nv_run *r, qs_err *e)
{
    static const qs_qopts defaults;
    if (!o) o = &defaults;
    r->mode = o->round == QS_RND_DEFAULT ? QS_RND_RNE : o->round;
    if (r->mode != QS_RND_RNE && r->mode != QS_RND_TA && r->mode != QS_RND_RTZ && r->mode != QS_RND_SR)
        return qs_fail(e, "format %s does not support rounding '%s' (supported: rne,ta,sr,rtz)", f->name,
                       qs_round_name(o->round));
    if (o->block < 0) return qs_fail(e, "block size must be positive");
    r->block = o->block > 0 ? (size_t)o->block : (size_t)f->block;
    r->torchao = o->nvfp4 == QS_NVFP4_TORCHAO;
    r->seed = o->seed;
    r->index0 = o->index0;
    qs_ek_of_mf(&r->k, &qs_mf_e2m1, 0);
    return 0;
}

/* Per-tensor constants from the global amax. */
static int nv_tensor(const qs_format *f, nv_run *r, float amax, qs_err *e)
{
    if (!(amax >= 0) || isinf(amax))
        return qs_fail(e, "format %s: the tensor scale (global amax) must be finite and >= 0", f->name);
    r->amax = amax;
    float senc = fminf(2688.0f / amax, FLT_MAX);
    if (amax == 0 || senc == 0) senc = 1.0f;
    r->senc6 = senc * (1.0f / 6.0f);
    r->sdec = 1.0f / senc;
    r->pts = amax / 2688.0f;
    r->rpts = 1.0f / r->pts;
    return 0;
}

/* E4M3 value of v >= 0 rounded to nearest even, saturating at 448 (the E2M1 trick of the header with
** the E4M3 constants: emin -6, 3 mantissa bits). */
static inline float e4m3_value(float v)
{
    float a = fminf(v, 1024.0f);
    uint32_t ex = f2u(a) & 0x7f800000u;
    if (ex < (121u << 23)) ex = 121u << 23;
    float M = u2f(ex + (20u << 23));
    return fminf((a + M) - M, 448.0f);
}

/* Scale arithmetic of one finite block with largest magnitude bamax (header).  Encode (enc = 1)
** rounds the scale with qs_mf_encode, fakeq with e4m3_value: two independent paths that the tests
** hold to agreement through fakeq == decode(encode). */
static nv_blk nv_block(const nv_run *r, float bamax, int enc)
{
    nv_blk b;
    float t;
    if (!r->torchao) t = bamax * r->senc6;
    else if (r->pts == 0) t = 0x1p-6f;
    else {
        t = (bamax / 6.0f) / r->pts;
        t = t < 0x1p-6f ? 0x1p-6f : t > 448.0f ? 448.0f : t;
    }
    if (enc) {
        b.code = (uint8_t)qs_mf_encode(&qs_mf_e4m3, t, QS_RND_RNE, 0, 1);
        b.s = qs_mf_decode(&qs_mf_e4m3, b.code);
    } else {
        b.code = 0;
        b.s = e4m3_value(t);
    }
    if (!r->torchao) {
        b.inv = fminf(1.0f / (b.s * r->sdec), FLT_MAX);
        b.dq = (b.s * r->amax) * (1.0f / 2688.0f);
    } else {
        b.inv = r->pts == 0 ? 0.0f : fminf(r->rpts / b.s, FLT_MAX);
        b.dq = r->pts * b.s;
    }
    return b;
}

static inline double sr_u(const nv_run *r, size_t i)
{
    return r->mode == QS_RND_SR ? qs_sr_uniform(r->seed, r->index0 + i) : 0.0;
}

/* Encode one block [i0, i0+len) on the portable path: qs_mf_encode per element. */
static void nv_enc_block_scalar(const nv_run *r, const float *x, size_t i0, size_t len, uint32_t *codes,
                                uint8_t *meta)
{
    uint32_t ab = qs_absmax_bits(x + i0, len);
    if (ab >= 0x7f800000u) {
        *meta = 0x7F;
        memset(codes + i0, 0, len * sizeof *codes);
        return;
    }
    nv_blk k = nv_block(r, u2f(ab), 1);
    *meta = k.code;
    for (size_t i = i0; i < i0 + len; i++)
        codes[i] = qs_mf_encode(&qs_mf_e2m1, x[i] * k.inv, r->mode, sr_u(r, i), 1);
}

static size_t nv_enc_vector(const nv_run *r, const float *x, size_t n, uint32_t *codes, uint8_t *meta, int lvl);

static int nv_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                     uint8_t *meta, float *tensor_scale, qs_err *e)
{
    nv_run r;
    if (nv_opts(f, o, &r, e)) return -1;
    int lvl = NV_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
    float amax = o && o->tensor_scale != 0 ? o->tensor_scale : qs_finite_absmax_n(x, n);
    if (nv_tensor(f, &r, amax, e)) return -1;
    size_t done = nv_enc_vector(&r, x, n, codes, meta, lvl);  /* whole blocks, RNE, when the level allows */
    for (size_t b = done / r.block, i0 = done; i0 < n; b++, i0 += r.block)
        nv_enc_block_scalar(&r, x, i0, n - i0 < r.block ? n - i0 : r.block, codes, meta + b);
    if (tensor_scale) *tensor_scale = r.amax;
    return 0;
}

static int nv_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta,
                     float tensor_scale, size_t n, float *y, qs_err *e)
{
    nv_run r;
    if (nv_opts(f, o, &r, e) || nv_tensor(f, &r, tensor_scale, e)) return -1;
    for (size_t b = 0, i0 = 0; i0 < n; b++, i0 += r.block) {
        size_t len = n - i0 < r.block ? n - i0 : r.block;
        for (size_t i = i0; i < i0 + len; i++)
            if (codes[i] > 15)
                return qs_fail(e, "format %s: code 0x%x of element %zu has more than 4 bits", f->name,
                               (unsigned)codes[i], i);
        unsigned c = meta[b] & 0x7Fu;                         /* UE4M3: the sign bit is ignored */
        if (c == 0x7F) {
            for (size_t i = i0; i < i0 + len; i++) y[i] = NAN;
            continue;
        }
        float s = qs_mf_decode(&qs_mf_e4m3, c);
        float dq = r.torchao ? r.pts * s : (s * r.amax) * (1.0f / 2688.0f);
        for (size_t i = i0; i < i0 + len; i++) y[i] = qs_mf_decode(&qs_mf_e2m1, codes[i]) * dq;
    }
    return 0;
}

/* fakeq of one block on the portable path (RNE as the vector kernels, other modes qs_mf_round). */
static void nv_block_scalar(const nv_run *r, const float *x, size_t i0, size_t len, float *y)
{
    uint32_t ab = qs_absmax_bits(x + i0, len);
    if (ab >= 0x7f800000u) {
        for (size_t i = i0; i < i0 + len; i++) y[i] = NAN;
        return;
    }
    nv_blk k = nv_block(r, u2f(ab), 0);
    if (r->mode == QS_RND_RNE) {
        for (size_t i = i0; i < i0 + len; i++) {
            uint32_t b = f2u(x[i]);
            float t = qs_ek_rne(&r->k, u2f(b & 0x7fffffffu) * k.inv) * k.dq;
            y[i] = u2f(f2u(t) | (b & 0x80000000u));
        }
        return;
    }
    for (size_t i = i0; i < i0 + len; i++)
        y[i] = qs_mf_round(&qs_mf_e2m1, x[i] * k.inv, r->mode, sr_u(r, i), 1) * k.dq;
}

/* The shared vector loops' callbacks (format_simd.h): a block holding NaN/Inf decodes to NaN. */
static inline int nv_vscale_fq(const void *ctx, uint32_t ab, uint8_t *code, float *inv, float *X)
{
    if (ab >= 0x7f800000u) return 1;
    nv_blk k = nv_block(ctx, u2f(ab), 0);
    *code = 0;
    *inv = k.inv;
    *X = k.dq;
    return 0;
}

static void nv_vrare_fq(const void *ctx, const float *x, float *y, uint8_t *code)
{
    (void)x; (void)code;
    for (size_t j = 0; j < ((const nv_run *)ctx)->block; j++) y[j] = NAN;
}

#if NV_X86
__attribute__((target("avx2")))
static void nv_blocks_avx2(const nv_run *r, const float *x, size_t nblk, float *y)
{
    qs_vblk_fakeq_avx2(&r->k, x, nblk, r->block, y, NULL, nv_vscale_fq, nv_vrare_fq, r);
}

__attribute__((target("avx512f")))
static void nv_blocks_avx512(const nv_run *r, const float *x, size_t nblk, float *y)
{
    qs_vblk_fakeq_avx512(&r->k, x, nblk, r->block, y, NULL, nv_vscale_fq, nv_vrare_fq, r);
}
#endif

/* SR fakeq of whole and partial blocks, 64 blocks at a time: y = x * inv per block, then one
** qs_mf_round_n over the run (its vectorised SR: the bits of qs_mf_round with the same draws,
** element i drawing index0 + i as in nv_block_scalar), then y *= dq; NaN/Inf blocks -> NaN.
** x and y may be the same array (each block's maximum is taken before it is overwritten). */
static void nv_sr_fakeq(const nv_run *r, const float *x, size_t n, float *y)
{
    float dq[64];
    for (size_t c0 = 0; c0 < n;) {
        size_t nb = 0, i0 = c0;
        for (size_t len; nb < 64 && i0 < n; nb++, i0 += len) {
            len = n - i0 < r->block ? n - i0 : r->block;
            uint32_t ab = qs_absmax_bits(x + i0, len);
            if (ab >= 0x7f800000u) {
                dq[nb] = NAN;
                memset(y + i0, 0, len * sizeof *y);
                continue;
            }
            nv_blk k = nv_block(r, u2f(ab), 0);
            dq[nb] = k.dq;
            for (size_t i = i0; i < i0 + len; i++) y[i] = x[i] * k.inv;
        }
        qs_mf_round_n(&qs_mf_e2m1, y + c0, i0 - c0, y + c0, QS_RND_SR, 1, r->seed, r->index0 + c0);
        for (size_t b = 0, j0 = c0; b < nb; b++, j0 += r->block) {
            size_t len = n - j0 < r->block ? n - j0 : r->block;
            if (isnan(dq[b]))
                for (size_t i = j0; i < j0 + len; i++) y[i] = NAN;
            else
                for (size_t i = j0; i < j0 + len; i++) y[i] *= dq[b];
        }
        c0 = i0;
    }
}

static int nv_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    nv_run r;
    if (nv_opts(f, o, &r, e)) return -1;
    int lvl = NV_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
    float amax = o && o->tensor_scale != 0 ? o->tensor_scale : qs_finite_absmax_n(x, n);
    if (nv_tensor(f, &r, amax, e)) return -1;
    if (r.mode == QS_RND_SR) {
        nv_sr_fakeq(&r, x, n, y);
        return 0;
    }
    size_t done = 0;
#if NV_X86
    if (r.mode == QS_RND_RNE && n >= r.block) {
        if (lvl >= QS_SIMD_AVX512 && r.block % 16 == 0) {
            done = n / r.block * r.block;
            nv_blocks_avx512(&r, x, n / r.block, y);
        } else if (lvl >= QS_SIMD_AVX2 && r.block % 8 == 0) {
            done = n / r.block * r.block;
            nv_blocks_avx2(&r, x, n / r.block, y);
        }
    }
#endif
    for (size_t i0 = done; i0 < n; i0 += r.block)
        nv_block_scalar(&r, x, i0, n - i0 < r.block ? n - i0 : r.block, y);
    return 0;
}

/* ---- vectorised encode (RNE elements) ----
** Per block: the fakeq scale arithmetic (e4m3_value, equal to decode(qs_mf_encode) of the scale:
** tested through fakeq == decode(encode)) with the E4M3 code read off the value; per element the
** E2M1 rounding of the fakeq kernels, then the value-to-code step: t < 1 (subnormal) is
** bits(t + 2^22) - bits(2^22), otherwise (bits(t) >> 22) - 252; x's sign on bit 3 (qs_mf_encode
** keeps the sign of x * inv, which is x's: inv >= 0).  Blocks with NaN/Inf, partial blocks and other
** modes take nv_enc_block_scalar.  Tested code for code against the scalar level
** (tests/unit/test_format_nvfp4.c). */

/* E4M3 code of a value on the E4M3 grid in [0, 448]. */
static inline uint8_t e4m3_code(float s)
{
    uint32_t b = f2u(s);
    if (b < (121u << 23)) return (uint8_t)(f2u(s + 0x1p14f) - f2u(0x1p14f));   /* subnormal: m * 2^-9 */
    return (uint8_t)((b >> 20) - (120u << 3));
}

static inline nv_blk nv_block_vec(const nv_run *r, float bamax)
{
    nv_blk k = nv_block(r, bamax, 0);
    k.code = e4m3_code(k.s);
    return k;
}

static inline int nv_vscale_enc(const void *ctx, uint32_t ab, uint8_t *code, float *inv, float *X)
{
    if (ab >= 0x7f800000u) return 1;
    nv_blk k = nv_block_vec(ctx, u2f(ab));
    *code = k.code;
    *inv = k.inv;
    *X = k.dq;
    return 0;
}

static void nv_vrare_enc(const void *ctx, const float *x, size_t i0, uint32_t *codes, uint8_t *meta)
{
    nv_enc_block_scalar(ctx, x, i0, ((const nv_run *)ctx)->block, codes, meta);
}

#if NV_X86
__attribute__((target("avx2")))
static void nv_enc_avx2(const nv_run *r, const float *x, size_t nblk, uint32_t *codes, uint8_t *meta)
{
    qs_vblk_encode_avx2(&r->k, x, nblk, r->block, codes, meta, nv_vscale_enc, nv_vrare_enc, r);
}

__attribute__((target("avx512f")))
static void nv_enc_avx512(const nv_run *r, const float *x, size_t nblk, uint32_t *codes, uint8_t *meta)
{
    qs_vblk_encode_avx512(&r->k, x, nblk, r->block, codes, meta, nv_vscale_enc, nv_vrare_enc, r);
}
#endif

static size_t nv_enc_vector(const nv_run *r, const float *x, size_t n, uint32_t *codes, uint8_t *meta, int lvl)
{
#if NV_X86
    if (r->mode != QS_RND_RNE || n < r->block) return 0;
    if (lvl >= QS_SIMD_AVX512 && r->block % 16 == 0) {
        nv_enc_avx512(r, x, n / r->block, codes, meta);
        return n / r->block * r->block;
    }
    if (lvl >= QS_SIMD_AVX2 && r->block % 8 == 0) {
        nv_enc_avx2(r, x, n / r->block, codes, meta);
        return n / r->block * r->block;
    }
#endif
    (void)r; (void)x; (void)n; (void)codes; (void)meta; (void)lvl;
    return 0;
}

static double nv_scale_value(unsigned c) { return qs_mf_decode(&qs_mf_e4m3, c); }

static void nv_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                         char *out, size_t cap)
{
    (void)f; (void)o;
    static const qs_format ue4m3 = {.elem_bits = 8, .ebits = 4, .mbits = 3, .elem = QS_ELEM_FLOAT};
    qs_code_field s[QS_MAX_FIELDS];
    qs_format_code_fields(&ue4m3, m[0], s);
    char v[32], w[32], st[32];
    num(qs_mf_decode(&qs_mf_e4m3, m[0]), v, sizeof v);
    num(ts, w, sizeof w);
    num(step, st, sizeof st);
    snprintf(out, cap, "UE4M3 block scale 0x%02x [%s %s %s] = %s; tensor amax %s; element step %s", m[0], s[0].bits,
             s[1].bits, s[2].bits, v, w, st);
}

#define RM(r) (1u << (r))

static int nv_block_scales(const qs_format *f, const qs_qopts *o, float tensor_scale, const float *amax, size_t n,
                           uint8_t *code, float *S, float *Q, qs_err *e);

const qs_format qs_formats_nvfp4[] = {
    {
        .name = "nvfp4",
        .family = QS_FAM_NVFP4,
        .elem = QS_ELEM_FLOAT,
        .mf = &qs_mf_e2m1,
        .scale_kind = QS_SK_UE4M3,
        .has_tensor_scale = 1,
        .fopts = QS_FOPT_NVFP4_ORDER,
        .scale_value = nv_scale_value,
        .meta_text = nv_meta_text,
        .summary = "NVIDIA NVFP4: 16 x FP4 E2M1 + UE4M3 block scale + FP32 tensor scale, 4.5 bits",
        .elem_bits = 4,
        QS_MF_ROW(QS_MF_LAYOUT_e2m1),
        .block = 16,
        .meta_bytes = 1,
        .meta_bits = 8,
        .has_inf = 0,
        .has_nan = 1,
        .max_finite = 2688.0,            /* units of the per-tensor scale amax/2688 (header) */
        .min_normal = 0x1p-6,
        .min_subnormal = 0x1p-10,
        .default_round = QS_RND_RNE,
        .round_modes = RM(QS_RND_RNE) | RM(QS_RND_TA) | RM(QS_RND_RTZ) | RM(QS_RND_SR),
        .encode = nv_encode,
        .decode = nv_decode,
        .fakeq = nv_fakeq,
        .code_value = qs_mf_value_e2m1,
        .ncodes = 16,
        .grid = QS_MF_GRID(QS_MF_LAYOUT_e2m1),
        .block_scales = nv_block_scales,
    },
};
const size_t qs_formats_nvfp4_n = sizeof qs_formats_nvfp4 / sizeof qs_formats_nvfp4[0];

/* ---- block scales from block maxima (for the analysis engine) -------------------------------- */

/* The UE4M3 code of an E4M3 value s >= 0 (every such value has one code). */
static unsigned e4m3_code_of(float s)
{
    uint32_t b = f2u(s);
    if (b >= (121u << 23)) return (((b >> 23) - 120u) << 3) | ((b >> 20) & 7u);   /* normal: 2^-6 and up */
    return (unsigned)(s * 512.0f);                                                 /* k * 2^-9, exact */
}

static int nv_block_scales(const qs_format *f, const qs_qopts *o, float tensor_scale, const float *amax, size_t n,
                           uint8_t *code, float *S, float *Q, qs_err *e)
{
    nv_run r;
    if (nv_opts(f, o, &r, e) || nv_tensor(f, &r, tensor_scale, e)) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t ab = f2u(amax[i]) & 0x7fffffffu;
        if (ab >= 0x7f800000u) {   /* a NaN block */
            code[i] = 0x7F;
            S[i] = Q[i] = NAN;
            continue;
        }
        /* nv_block's scale arithmetic (its fakeq path, held equal to encode's by the tests) */
        float bamax = u2f(ab), t;
        if (!r.torchao) t = bamax * r.senc6;
        else if (r.pts == 0) t = 0x1p-6f;
        else {
            t = (bamax / 6.0f) / r.pts;
            t = t < 0x1p-6f ? 0x1p-6f : t > 448.0f ? 448.0f : t;
        }
        float s = e4m3_value(t);
        float dq = r.torchao ? r.pts * s : (s * r.amax) * (1.0f / 2688.0f);
        code[i] = (uint8_t)e4m3_code_of(s);
        S[i] = 1.0f * dq;                      /* decode of the element 1.0 */
        Q[i] = 6.0f * dq;                      /* decode of the largest element */
    }
    return 0;
}
