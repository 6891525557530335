/*
** The vector block loops shared by the formats with one scale per block and minifloat (or MXINT8)
** elements, MX (format_mx.c) and NVFP4 (format_nvfp4.c): per block the largest magnitude, the
** family's scale (a callback), then per element RNE_sat rounding onto the element grid and either
** the fake-quantized value or the element code.  The family keeps its scale arithmetic and its
** portable code for the blocks the vector loop hands back (NaN/Inf, flushed).
**
** Element rounding (the fakeq kernels' method): v = min(|x| * inv, 2 max) (keeps M finite),
** M = 2^(max(e(v), emin) + 23 - mbits) as float bits, t = min((v + M) - M, max): the float32 add
** rounds to the element's quantum by RNE, subnormals included.  Code of t: a target-subnormal t is
** bits(t + C) - bits(C) with C = 2^(emin - mbits + 23), a normal one its bits shifted down by
** 23 - mbits with the exponent re-biased; x's sign on top (dropped on zero codes under zp).
** MXINT8: q = t * 64, code (uint8)(±q), and fakeq turns -0 into +0.
**
** The loops are static inline with the callbacks as constant arguments, so each family's
** target("avx2") / target("avx512f") wrapper compiles them into one specialised loop.
*/
#ifndef QS_FORMAT_SIMD_H
#define QS_FORMAT_SIMD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fbits.h"
#include "minifloat.h"

/* An element grid's constants (qs_ek_init). */
typedef struct qs_ek {
    uint32_t lowexp;   /* float32 exponent bits of 2^emin */
    uint32_t shift;    /* (23 - mbits) << 23 */
    float cap, maxv;   /* 2 * max and max */
    int int8;          /* MXINT8 elements */
    uint32_t minnorm, cbits, rebias;
    int shiftm, signsh;   /* 23 - mbits; right shift taking bit 31 to the code's sign bit */
    float c;
    int zp;            /* zero codes are positive */
} qs_ek;

/* emin: exponent of the smallest normal binade; bias: the element's (0 for MXINT8). */
static inline void qs_ek_init(qs_ek *k, int emin, int mbits, float maxv, int bias, int elem_bits, int int8, int zp)
{
    k->lowexp = (uint32_t)(emin + 127) << 23;
    k->shift = (uint32_t)(23 - mbits) << 23;
    k->cap = 2.0f * maxv;
    k->maxv = maxv;
    k->int8 = int8;
    k->shiftm = 23 - mbits;
    k->minnorm = (uint32_t)(emin + 127) << 23;
    k->c = u2f((uint32_t)(emin - mbits + 23 + 127) << 23);
    k->cbits = f2u(k->c);
    k->rebias = int8 ? 0 : (uint32_t)(127 - bias) << mbits;
    k->signsh = 31 - (elem_bits - 1);
    k->zp = zp;
}

/* Largest |x| of a run as float32 bits with the sign cleared (>= 0x7f800000: Inf or NaN present). */
static inline uint32_t qs_absmax_bits(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m;
}

/* The constants of a minifloat element. */
static inline void qs_ek_of_mf(qs_ek *k, const qs_minifloat *mf, int zp)
{
    qs_ek_init(k, 1 - mf->bias, mf->mbits, (float)qs_mf_max(mf), mf->bias, 1 + mf->ebits + mf->mbits, 0, zp);
}

/* RNE_sat of a >= 0 (finite) on the element grid: one lane of the vector loops, in plain C. */
static inline float qs_ek_rne(const qs_ek *k, float a)
{
    float v = fminf(a, k->cap);
    uint32_t ex = f2u(v) & 0x7f800000u;
    float M = u2f((ex > k->lowexp ? ex : k->lowexp) + k->shift);
    return fminf((v + M) - M, k->maxv);
}

/* The family's part of one block of largest magnitude bits ab (sign cleared): 0 with the scale code,
** the multipliers inv (x -> element units) and X (element -> value); 1 when the portable code does
** the block. */
typedef int (*qs_vblk_scale)(const void *ctx, uint32_t ab, uint8_t *code, float *inv, float *X);
/* Portable fakeq of one block (x, y at the block; code NULL or the block's scale code slot). */
typedef void (*qs_vblk_fakeq_rare)(const void *ctx, const float *x, float *y, uint8_t *code);
/* Portable encode of block [i0, i0 + B) of x into codes, its metadata at meta. */
typedef void (*qs_vblk_enc_rare)(const void *ctx, const float *x, size_t i0, uint32_t *codes, uint8_t *meta);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define QS_FORMAT_SIMD 1

#define QS_AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))
#define QS_AVX512_INLINE static inline __attribute__((always_inline, target("avx512f")))

QS_AVX2_INLINE uint32_t qs_vblk_absmax_avx2(const float *x, size_t B)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    for (size_t j = 0; j < B; j += 8)
        m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + j)), absm));
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}

QS_AVX512_INLINE uint32_t qs_vblk_absmax_avx512(const float *x, size_t B)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i m = _mm512_setzero_si512();
    for (size_t j = 0; j < B; j += 16)
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512((const void *)(x + j)), absm));
    return (uint32_t)_mm512_reduce_max_epu32(m);
}

/* nblk whole blocks of B (a multiple of 8) values: y = fakeq(x); codes[b] = block b's scale code
** when codes is not NULL. */
QS_AVX2_INLINE void qs_vblk_fakeq_avx2(const qs_ek *k, const float *x, size_t nblk, size_t B, float *y, uint8_t *codes,
                                       qs_vblk_scale scale, qs_vblk_fakeq_rare rare, const void *ctx)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m256i lowexp = _mm256_set1_epi32((int)k->lowexp), shift = _mm256_set1_epi32((int)k->shift);
    const __m256 cap = _mm256_set1_ps(k->cap), maxv = _mm256_set1_ps(k->maxv);
    const __m256 zero = _mm256_setzero_ps();
    for (size_t b = 0; b < nblk; b++, x += B, y += B) {
        uint8_t c;
        float fi, fx;
        if (scale(ctx, qs_vblk_absmax_avx2(x, B), &c, &fi, &fx)) {   /* rare blocks: the portable code */
            rare(ctx, x, y, codes ? codes + b : NULL);
            continue;
        }
        if (codes) codes[b] = c;
        const __m256 X = _mm256_set1_ps(fx), inv = _mm256_set1_ps(fi);
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

QS_AVX512_INLINE void qs_vblk_fakeq_avx512(const qs_ek *k, const float *x, size_t nblk, size_t B, float *y,
                                           uint8_t *codes, qs_vblk_scale scale, qs_vblk_fakeq_rare rare,
                                           const void *ctx)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i lowexp = _mm512_set1_epi32((int)k->lowexp), shift = _mm512_set1_epi32((int)k->shift);
    const __m512 cap = _mm512_set1_ps(k->cap), maxv = _mm512_set1_ps(k->maxv);
    const __m512 zero = _mm512_setzero_ps();
    for (size_t b = 0; b < nblk; b++, x += B, y += B) {
        uint8_t c;
        float fi, fx;
        if (scale(ctx, qs_vblk_absmax_avx512(x, B), &c, &fi, &fx)) {
            rare(ctx, x, y, codes ? codes + b : NULL);
            continue;
        }
        if (codes) codes[b] = c;
        const __m512 X = _mm512_set1_ps(fx), inv = _mm512_set1_ps(fi);
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

/* nblk whole blocks of B (a multiple of 8) values: element codes and one metadata byte per block
** (the scale code). */
QS_AVX2_INLINE void qs_vblk_encode_avx2(const qs_ek *k, const float *x, size_t nblk, size_t B, uint32_t *codes,
                                        uint8_t *meta, qs_vblk_scale scale, qs_vblk_enc_rare rare, const void *ctx)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m256i lowexp = _mm256_set1_epi32((int)k->lowexp), shift = _mm256_set1_epi32((int)k->shift);
    const __m256 cap = _mm256_set1_ps(k->cap), maxv = _mm256_set1_ps(k->maxv);
    const __m256i minnorm = _mm256_set1_epi32((int)k->minnorm), cbits = _mm256_set1_epi32((int)k->cbits);
    const __m256i rebias = _mm256_set1_epi32((int)k->rebias), zero = _mm256_setzero_si256();
    const __m256i byte = _mm256_set1_epi32(0xff);
    const __m256 c = _mm256_set1_ps(k->c), s64 = _mm256_set1_ps(64.0f);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    const int int8 = k->int8, zp = k->zp;
    for (size_t b = 0; b < nblk; b++) {
        const float *xb0 = x + b * B;
        uint32_t *cb = codes + b * B;
        float fi, fx;
        if (scale(ctx, qs_vblk_absmax_avx2(xb0, B), meta + b, &fi, &fx)) {   /* rare blocks: the portable code */
            rare(ctx, x, b * B, codes, meta + b);
            continue;
        }
        const __m256 inv = _mm256_set1_ps(fi);
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

QS_AVX512_INLINE void qs_vblk_encode_avx512(const qs_ek *k, const float *x, size_t nblk, size_t B, uint32_t *codes,
                                            uint8_t *meta, qs_vblk_scale scale, qs_vblk_enc_rare rare,
                                            const void *ctx)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i lowexp = _mm512_set1_epi32((int)k->lowexp), shift = _mm512_set1_epi32((int)k->shift);
    const __m512 cap = _mm512_set1_ps(k->cap), maxv = _mm512_set1_ps(k->maxv);
    const __m512i minnorm = _mm512_set1_epi32((int)k->minnorm), cbits = _mm512_set1_epi32((int)k->cbits);
    const __m512i rebias = _mm512_set1_epi32((int)k->rebias), zero = _mm512_setzero_si512();
    const __m512i byte = _mm512_set1_epi32(0xff);
    const __m512 c = _mm512_set1_ps(k->c), s64 = _mm512_set1_ps(64.0f);
    const __m128i sh = _mm_cvtsi32_si128(k->shiftm), ssh = _mm_cvtsi32_si128(k->signsh);
    const int int8 = k->int8, zp = k->zp;
    for (size_t b = 0; b < nblk; b++) {
        const float *xb0 = x + b * B;
        uint32_t *cb = codes + b * B;
        float fi, fx;
        if (scale(ctx, qs_vblk_absmax_avx512(xb0, B), meta + b, &fi, &fx)) {
            rare(ctx, x, b * B, codes, meta + b);
            continue;
        }
        const __m512 inv = _mm512_set1_ps(fi);
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
#else
#define QS_FORMAT_SIMD 0
#endif

#endif
