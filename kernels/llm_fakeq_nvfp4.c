/*
** The fused training-operand kernel of the nvfp4 family (llm_fakeq_fast.h), and NVFP4's 16x16 weight
** tiles (llm_fakeq_nvfp4.h): format_nvfp4.c's TE arithmetic straight from the row-major matrix, on
** AVX-512 with DQ (64-bit multiplies for the draws; below it the generic path runs: _ok says 0).
**
**   axis 1: a row at a time, 16 blocks of 16 at once: the blocks' maxima (a shuffle tree), the 16
**     scales in one vector, then each block rounded with its broadcast multipliers;
**   axis 0: 16 adjacent columns are the lanes and a block is 16 row vectors: the RHT of
**     qs_llm_rht16 along the columns is a butterfly across the 16 vectors (the same sign multiply,
**     butterfly order and 1/4, so the same bits), the block maxima an elementwise max, and every lane
**     has its own scale;
**   tiles: one scale per 16x16 tile (RNE), tiles of a band of 16 rows on one task.
** Per block (format_nvfp4.c's header, each step the same float32 operation): s = E4M3(bamax * S_enc/6)
** by the (a + M) - M trick, inv = min(1 / (s * S_dec), FLT_MAX), dq = (s * amax) * fl(1/2688); RNE
** elements as format_simd.h's loop, SR elements as minifloat.c's sr_one (E2M1, saturating) with
** SplitMix64 draws counted per element (axis 1: index0 + r*cols + c, axis 0: index0 + c*rows + r).
** A block holding NaN/Inf gives NaN.  The counts follow llm_opstat.c: the flat ones per element, clips
** above fl(Q + S) = thr_bits(Q + S/2 * 2) (E2M1's top spacing is 1 step, the sum exact in double, so
** the float32 add gives the same bits; near FLT_MAX the double rule itself); blocks that cannot have
** non-finite values or clips count only their underflows.  The task's rows or columns are walked a
** band of 16 rows at a time across the task's width (whole cache lines; llm_fakeq_par.c gives this
** kernel axis-0 tasks up to 1024 columns wide).
** Tested bit for bit and count for count against the generic path (tests/unit/test_fakeq_fast_nvfp4.c).
*/
#include "llm_fakeq_fast.h"
#include "llm_fakeq_nvfp4.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "simd.h"
#include "sr.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NVF_X86 1
#else
#define NVF_X86 0
#endif

#define INF_BITS 0x7f800000u
#define GAMMA 0x9e3779b97f4a7c15ULL   /* sr.c's Weyl step */
#ifndef PF_AHEAD
#define PF_AHEAD 1024   /* floats: how far ahead along a row the axis-1 walk prefetches */
#endif

/* Which operands the kernel takes: TE NVFP4, blocks of 16, RNE or SR, no RHT along rows. */
static int takes(const qs_apply *a, int axis, int rht)
{
    if (!a->f || a->f->family != QS_FAM_NVFP4 || a->gran != QS_GRAN_BLOCK || a->cscale) return 0;
    if (qs_format_block(a->f, &a->o) != 16 || a->o.nvfp4 != QS_NVFP4_TE) return 0;
    qs_round m = a->o.round;
    if (m != QS_RND_DEFAULT && m != QS_RND_RNE && m != QS_RND_SR) return 0;
    if (axis == 1 && rht) return 0;
#if NVF_X86
    return qs_simd_level() >= QS_SIMD_AVX512 && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

int qs_fq_nvfp4_ok(const qs_apply *a, int axis, int rht, int counting)
{
    (void)counting;
    return takes(a, axis, rht);
}

int qs_fq_nvfp4_tiles_ok(const qs_apply *a)
{
    return takes(a, 1, 0) && a->o.round != QS_RND_SR;
}

/* The operand's constants (nv_tensor's) and this share's counts. */
typedef struct nvk {
    float amax, senc6, sdec;
    int sr, counting;
    uint64_t smix, index0;
    size_t n;         /* values in the matrix (prefetches stay inside it) */
#if NVF_X86
    __m512i acc[4];   /* the counts per lane (32 bits: a share has far fewer than 2^36 values) */
#endif
} nvk;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int nvk_init(nvk *k, const qs_apply *a, int counting, qs_err *e)
{
    float amax = a->o.tensor_scale;   /* resolved by the caller; 0: the matrix's finite absmax is 0 */
    if (!(amax >= 0) || isinf(amax)) return qs_fail(e, "format %s: the tensor scale (global amax) must be finite and >= 0", a->f->name);
    memset(k, 0, sizeof *k);
    k->amax = amax;
    float senc = fminf(2688.0f / amax, FLT_MAX);
    if (amax == 0 || senc == 0) senc = 1.0f;
    k->senc6 = senc * (1.0f / 6.0f);
    k->sdec = 1.0f / senc;
    k->sr = a->o.round == QS_RND_SR;
    k->counting = counting;
    k->smix = mix64(a->o.seed ^ 0x5851f42d4c957f2dULL);
    k->index0 = a->o.index0;
    return 0;
}

/* llm_opstat.c's threshold of one finite block from its dq, the double rule (rare lanes). */
static uint32_t thr_of(float dq)
{
    float Q = 6.0f * dq, S = 1.0f * dq;
    double t = (double)Q + 1.0 * S;
    if (!isfinite(t)) return UINT32_MAX;
    if (t >= 3.4e38) return INF_BITS;
    float f = (float)t;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x7fffffffu;
}

#if NVF_X86
#define TGT __attribute__((target("avx512f,avx512dq")))
#define AVX512 static inline __attribute__((always_inline)) TGT

/* Scales of 16 blocks (maxima bits A, sign clear): element multiplier and dequantization multiplier. */
AVX512 void scale16(const nvk *k, __m512i A, __m512 *inv, __m512 *dq)
{
    __m512 t = _mm512_mul_ps(_mm512_castsi512_ps(A), _mm512_set1_ps(k->senc6));
    __m512 a = _mm512_min_ps(t, _mm512_set1_ps(1024.0f));                    /* e4m3_value */
    __m512i ex = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)INF_BITS));
    ex = _mm512_max_epu32(ex, _mm512_set1_epi32(121 << 23));
    __m512 M = _mm512_castsi512_ps(_mm512_add_epi32(ex, _mm512_set1_epi32(20 << 23)));
    __m512 s = _mm512_min_ps(_mm512_sub_ps(_mm512_add_ps(a, M), M), _mm512_set1_ps(448.0f));
    __m512 d = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(s, _mm512_set1_ps(k->sdec)));
    *inv = _mm512_min_ps(d, _mm512_set1_ps(FLT_MAX));
    *dq = _mm512_mul_ps(_mm512_mul_ps(s, _mm512_set1_ps(k->amax)), _mm512_set1_ps(1.0f / 2688.0f));
}

/* Clip thresholds (bits) of 16 blocks; UINT32_MAX where nothing clips (fin: the finite blocks). */
AVX512 __m512i thr16(__m512 dq, __mmask16 fin)
{
    __m512 tf = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(6.0f), dq), dq);
    __m512i tb = _mm512_and_si512(_mm512_castps_si512(tf), _mm512_set1_epi32(0x7fffffff));
    __mmask16 rare = fin & ~_mm512_cmplt_epu32_mask(tb, _mm512_set1_epi32(0x7f600000));   /* >= 1.75 * 2^127, Inf, NaN */
    tb = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), fin, tb);
    if (rare) {
        uint32_t T[16];
        float D[16];
        _mm512_storeu_si512((void *)T, tb);
        _mm512_storeu_ps(D, dq);
        for (int l = 0; l < 16; l++)
            if (rare >> l & 1) T[l] = thr_of(D[l]);
        tb = _mm512_loadu_si512((const void *)T);
    }
    return tb;
}

/* RNE elements (format_simd.h's loop with E2M1's constants). */
AVX512 __m512 rne16(__m512i xb, __m512 inv, __m512 dq)
{
    __m512i a = _mm512_and_si512(xb, _mm512_set1_epi32(0x7fffffff));
    __m512i s = _mm512_xor_si512(xb, a);
    __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), inv), _mm512_set1_ps(12.0f));
    __m512i e = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)INF_BITS)),
                                 _mm512_set1_epi32(127 << 23));
    __m512 M = _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_set1_epi32(22 << 23)));
    __m512 t = _mm512_min_ps(_mm512_sub_ps(_mm512_add_ps(v, M), M), _mm512_set1_ps(6.0f));
    t = _mm512_mul_ps(t, dq);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), s));
}

/* The SplitMix64 outputs of 8 counters' Weyl values w (sr.c; the draw's 53 bits are z >> 11). */
AVX512 __m512i draw8(__m512i z)
{
    const __m512i m1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ULL);
    const __m512i m2 = _mm512_set1_epi64((long long)0x94d049bb133111ebULL);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), m1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), m2);
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Round up where U < T (minifloat.c's sr_up4): 8 lanes of rem and shift widened from 32 bits. */
AVX512 __mmask8 up8(__m256i rem32, __m256i sh32, __m512i U)
{
    const __m512i c53 = _mm512_set1_epi64(53), one = _mm512_set1_epi64(1);
    __m512i rem = _mm512_cvtepu32_epi64(rem32), sh = _mm512_cvtepu32_epi64(sh32);
    __m512i t1 = _mm512_sllv_epi64(rem, _mm512_sub_epi64(c53, sh));
    __m512i t2 = _mm512_add_epi64(_mm512_srlv_epi64(_mm512_sub_epi64(rem, one), _mm512_sub_epi64(sh, c53)), one);
    __m512i T = _mm512_mask_mov_epi64(t1, _mm512_cmpgt_epu64_mask(sh, c53), t2);
    return _mm512_cmplt_epu64_mask(U, T);
}

/* SR elements: v = x * inv rounded onto E2M1 (saturating) as sr_one, with the draws zlo (lanes 0-7)
** and zhi (8-15); then times dq.  The integer form, for every lane. */
AVX512 __m512 sr16_exact(__m512 x, __m512 inv, __m512 dq, __m512i zlo, __m512i zhi)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), minf = _mm512_set1_epi32(0x00800000);
    const __m512i eminb = _mm512_set1_epi32(127), one = _mm512_set1_epi32(1);
    const __m512i ovf = _mm512_set1_epi32(0x40c00000), inf = _mm512_set1_epi32((int)INF_BITS);
    __m512i b = _mm512_castps_si512(_mm512_mul_ps(x, inv));
    __m512i a = _mm512_and_si512(b, absm), s = _mm512_xor_si512(b, a);
    __mmask16 isub = _mm512_cmplt_epu32_mask(a, minf);
    __m512i E = _mm512_mask_mov_epi32(_mm512_srli_epi32(a, 23), isub, one);
    __m512i sig = _mm512_mask_mov_epi32(_mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0x7fffff)), minf), isub, a);
    __m512i EP = _mm512_max_epu32(E, eminb);
    __m512i shift = _mm512_add_epi32(_mm512_set1_epi32(22), _mm512_sub_epi32(EP, E));
    __m512i fl = _mm512_srlv_epi32(sig, shift);                          /* count >= 32 -> 0 */
    __m512i rem = _mm512_sub_epi32(sig, _mm512_sllv_epi32(fl, shift));
    /* U < rem << (53 - shift) is (U >> (53 - shift)) < rem, for shift <= 32 the draw's top 32 bits
    ** shifted down by 32 - shift (shift >= 22 here); the 64-bit comparison only for lanes beyond
    ** (|v| < 2^-10, zeros aside) */
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512i top = _mm512_permutex2var_epi32(zlo, odd, zhi);
    __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_srlv_epi32(top, _mm512_sub_epi32(_mm512_set1_epi32(32), shift)), rem);
    __mmask16 far = _mm512_cmpgt_epu32_mask(shift, _mm512_set1_epi32(32)) & _mm512_test_epi32_mask(a, a);
    if (far) {
        __mmask16 u64 = (__mmask16)(up8(_mm512_castsi512_si256(rem), _mm512_castsi512_si256(shift), _mm512_srli_epi64(zlo, 11)) |
                                    (unsigned)up8(_mm512_extracti64x4_epi64(rem, 1), _mm512_extracti64x4_epi64(shift, 1),
                                                  _mm512_srli_epi64(zhi, 11)) << 8);
        up = (__mmask16)((up & ~far) | (u64 & far));
    }
    __m512i mc = _mm512_add_epi32(_mm512_slli_epi32(_mm512_sub_epi32(EP, eminb), 1), fl);
    mc = _mm512_mask_add_epi32(mc, up, mc, one);
    const __m512 c = _mm512_set1_ps(0x1p22f);                              /* E2M1 subnormals: mc * 0.5 */
    __m512i sv = _mm512_castps_si512(_mm512_sub_ps(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(c), mc)), c));
    __m512i nv = _mm512_add_epi32(_mm512_slli_epi32(mc, 22), _mm512_set1_epi32(126 << 23));
    __m512i r = _mm512_mask_mov_epi32(nv, _mm512_cmplt_epu32_mask(mc, _mm512_set1_epi32(2)), sv);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(mc, _mm512_set1_epi32(7)), ovf);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512()), _mm512_setzero_si512());
    r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(a, inf), ovf);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(a, inf), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_mul_ps(_mm512_castsi512_ps(_mm512_xor_si512(r, s)), dq);
}

/* sr16_exact in float arithmetic, for blocks whose lanes are all 0 or 2^-10 <= |v| (NaN aside, which
** the callers overwrite; else sr16_exact): with d the E2M1 spacing at min(|v|, 6) (0.5 below 2, then 1,
** 2), t = |v| / d, fl = floor(t) and f = t - fl, all exact, sr_one's (top >> (32 - shift)) < rem is
** top < f * 2^32 (an integer below 2^32 there), and the result (fl + up) * d with the sign. */
AVX512 __m512 sr16(__m512 x, __m512 inv, __m512 dq, __m512i wlo, __m512i whi)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32((int)INF_BITS);
    __m512i b = _mm512_castps_si512(_mm512_mul_ps(x, inv));
    __m512i a = _mm512_and_si512(b, absm), s = _mm512_xor_si512(b, a);
    __m512i zlo = draw8(wlo), zhi = draw8(whi);
    __mmask16 small = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x3a800000 - 1));
    if (small | _mm512_cmpgt_epu32_mask(a, inf)) return sr16_exact(x, inv, dq, zlo, zhi);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512i top = _mm512_permutex2var_epi32(zlo, odd, zhi);
    __m512 v = _mm512_min_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(6.0f));
    __m512i e = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v), inf), _mm512_set1_epi32(127 << 23));
    __m512 rd = _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32(255 << 23), e));   /* 1 / d */
    __m512 d = _mm512_castsi512_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(1 << 23)));
    __m512 t = _mm512_mul_ps(v, rd);
    __m512 fl = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 F = _mm512_mul_ps(_mm512_sub_ps(t, fl), _mm512_set1_ps(0x1p32f));
    __mmask16 up = _mm512_cmplt_epu32_mask(top, _mm512_cvttps_epu32(F));
    __m512 q = _mm512_mask_add_ps(fl, up, fl, _mm512_set1_ps(1.0f));
    __m512i r = _mm512_or_si512(_mm512_castps_si512(_mm512_mul_ps(q, d)), s);
    return _mm512_mul_ps(_mm512_castsi512_ps(r), dq);
}

/* Weyl values of 8 counters: first, first + step, ... */
AVX512 __m512i weyl8(uint64_t w0, uint64_t step)
{
    return _mm512_add_epi64(_mm512_set1_epi64((long long)w0),
                            _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64((long long)step)));
}

/* The flat counts of 16 lanes (m valid): input magnitudes xa, outputs y; clips above tb. */
AVX512 void count16(nvk *k, __m512i xa, __m512 y, __m512i tb, __mmask16 m)
{
    const __m512i inf = _mm512_set1_epi32((int)INF_BITS), one = _mm512_set1_epi32(1);
    __m512i ya = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(0x7fffffff));
    __mmask16 nz = _mm512_mask_cmplt_epu32_mask(m, _mm512_sub_epi32(xa, one), _mm512_sub_epi32(inf, one));
    __mmask16 u = _mm512_mask_cmpeq_epi32_mask(nz, ya, _mm512_setzero_si512());
    k->acc[0] = _mm512_mask_add_epi32(k->acc[0], u, k->acc[0], one);
    k->acc[1] = _mm512_mask_add_epi32(k->acc[1], _mm512_mask_cmpge_epu32_mask(m, ya, inf), k->acc[1], one);
    k->acc[2] = _mm512_mask_add_epi32(k->acc[2], _mm512_mask_cmpge_epu32_mask(m, xa, inf), k->acc[2], one);
    k->acc[3] = _mm512_mask_add_epi32(k->acc[3], _mm512_mask_cmpgt_epu32_mask(m, xa, tb), k->acc[3], one);
}

/* Blocks (lanes) whose elements need count16: NaN/Inf blocks, a dq large enough for t * dq to
** overflow, a maximum above the clip threshold.  Elsewhere every input and output is finite and
** nothing clips, so only the underflows count (count_u16). */
AVX512 __mmask16 rare16(__m512i A, __m512 dq, __m512i tb, __mmask16 fin)
{
    __mmask16 big = _mm512_cmp_ps_mask(dq, _mm512_set1_ps(0x1p124f), _CMP_NLT_UQ);
    return (__mmask16)(~fin | big | _mm512_cmpgt_epu32_mask(A, tb));
}

/* count16 of lanes in finite blocks without clips: nonzero inputs that became ±0. */
AVX512 void count_u16(nvk *k, __m512i xb, __m512 y, __mmask16 m)
{
    __mmask16 nz = _mm512_mask_test_epi32_mask(m, xb, _mm512_set1_epi32(0x7fffffff));
    __mmask16 u = _mm512_mask_cmp_ps_mask(nz, y, _mm512_setzero_ps(), _CMP_EQ_OQ);
    k->acc[0] = _mm512_mask_add_epi32(k->acc[0], u, k->acc[0], _mm512_set1_epi32(1));
}

/* cnt[0..3] += the lanes' counts. */
TGT static void counts_out(const nvk *k, uint64_t *cnt)
{
    for (int i = 0; i < 4; i++) {
        uint32_t l[16];
        _mm512_storeu_si512((void *)l, k->acc[i]);
        for (int j = 0; j < 16; j++) cnt[i] += l[j];
    }
}

AVX512 __mmask16 lanes(size_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* Axis 1: row r, up to 16 blocks from column c0 (chunk of 256 values). */
/* The maxima of 16 vectors' lanes (unsigned), block b in lane b: a tree of lane shuffles and maxima
** (45 operations for 16 reductions). */
AVX512 __m512i max16(const __m512i *a)
{
    __m512i p[8], q[4], t[2];
    for (int j = 0; j < 8; j++)   /* blocks 2j, 2j+1: 8 partials each */
        p[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(a[2 * j], a[2 * j + 1], 0x44),
                                _mm512_shuffle_i32x4(a[2 * j], a[2 * j + 1], 0xEE));
    for (int i = 0; i < 4; i++)   /* blocks 4i..4i+3, one per 128-bit lane: 4 partials */
        q[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(p[2 * i], p[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(p[2 * i], p[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)   /* lane k: blocks 8i+k, 8i+4+k, 2 partials each */
        t[i] = _mm512_max_epu32(_mm512_unpacklo_epi64(q[2 * i], q[2 * i + 1]),
                                _mm512_unpackhi_epi64(q[2 * i], q[2 * i + 1]));
    __m512 f0 = _mm512_castsi512_ps(t[0]), f1 = _mm512_castsi512_ps(t[1]);
    __m512i m = _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(f0, f1, 0x88)),
                                 _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, 0xDD)));   /* lane 4k+p: block k+4p */
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), m);
}

TGT static void row_chunk(nvk *k, const float *xr, float *yr, size_t C, size_t r, size_t c0)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    size_t nb = (C - c0 + 15) / 16 < 16 ? (C - c0 + 15) / 16 : 16;
    if (r * C + c0 + PF_AHEAD + 256 <= k->n)   /* the lines PF_AHEAD floats on (rows follow rows) */
        for (size_t b = 0; b < 16; b++) _mm_prefetch((const char *)(xr + c0 + 16 * b + PF_AHEAD), _MM_HINT_T0);
    __m512i a[16];
    for (size_t b = 0; b < 16; b++)
        a[b] = b < nb ? _mm512_and_si512(_mm512_maskz_loadu_epi32(lanes(C - c0 - 16 * b), xr + c0 + 16 * b), absm)
                      : _mm512_setzero_si512();
    __m512i A = max16(a);
    __mmask16 fin = _mm512_cmplt_epu32_mask(A, _mm512_set1_epi32((int)INF_BITS));
    __m512 inv, dq;
    scale16(k, A, &inv, &dq);
    float iv[16], dv[16];
    uint32_t tv[16];
    _mm512_storeu_ps(iv, inv);
    _mm512_storeu_ps(dv, dq);
    __mmask16 rare = 0;
    if (k->counting) {
        __m512i tb = thr16(dq, fin);
        _mm512_storeu_si512((void *)tv, tb);
        rare = rare16(A, dq, tb, fin);
    }
    __m512i wlo = _mm512_setzero_si512(), whi = wlo, g16 = _mm512_set1_epi64((long long)(16 * GAMMA));
    if (k->sr) {   /* element (r, c): counter index0 + r * C + c */
        uint64_t w = k->smix + (k->index0 + r * C + c0 + 1) * GAMMA;
        wlo = weyl8(w, GAMMA);
        whi = weyl8(w + 8 * GAMMA, GAMMA);
    }
    for (size_t b = 0; b < nb; b++) {
        size_t c = c0 + 16 * b;
        __mmask16 m = lanes(C - c);
        __m512i xb = _mm512_maskz_loadu_epi32(m, xr + c);
        __m512 y;
        if (!(fin >> b & 1)) y = _mm512_set1_ps(NAN);
        else if (k->sr) y = sr16(_mm512_castsi512_ps(xb), _mm512_set1_ps(iv[b]), _mm512_set1_ps(dv[b]), wlo, whi);
        else y = rne16(xb, _mm512_set1_ps(iv[b]), _mm512_set1_ps(dv[b]));
        _mm512_mask_storeu_ps(yr + c, m, y);
        if (k->counting && (rare >> b & 1)) count16(k, _mm512_and_si512(xb, absm), y, _mm512_set1_epi32((int)tv[b]), m);
        else if (k->counting) count_u16(k, xb, y, m);
        wlo = _mm512_add_epi64(wlo, g16);
        whi = _mm512_add_epi64(whi, g16);
    }
}

/* One butterfly stage (pairs j, j + h with j & h == 0: each pair's operations as rht16_rows'). */
AVX512 void stage(__m512 *v, int h)
{
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        if (!(j & h)) {
            __m512 p = v[j], q = v[j + h];
            v[j] = _mm512_add_ps(p, q);
            v[j + h] = _mm512_sub_ps(p, q);
        }
}

/* qs_llm_rht16 down 16 row vectors: signs, the four stages, 1/4 (rht16_rows' operations per element). */
AVX512 void rht16v(__m512 *v, const float sg[16])
{
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) v[i] = _mm512_mul_ps(v[i], _mm512_set1_ps(sg[i]));
    stage(v, 1);
    stage(v, 2);
    stage(v, 4);
    stage(v, 8);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) v[i] = _mm512_mul_ps(v[i], _mm512_set1_ps(0.25f));
}

/* Axis 0: columns [c, c + nl) (m: their lanes), rows [r0, r0 + h) (h <= 16, one block); inlined with h
** and sr constant for whole blocks, so that the 16 row vectors stay in registers. */
AVX512 void col_body(nvk *k, const float *x, float *y, size_t R, size_t C, size_t c, __mmask16 m, size_t r0,
                     size_t h, const float *sg, int sr)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512 v[16];
    __m512i A = _mm512_setzero_si512();
    if (r0 + 32 <= R)   /* the next band's lines of these columns */
        for (size_t i = 0; i < 16; i++) _mm_prefetch((const char *)(x + (r0 + 16 + i) * C + c), _MM_HINT_T0);
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++)   /* rows past h: zeros (never stored; keeps the compiler sure) */
        v[i] = i < h ? _mm512_maskz_loadu_ps(m, x + (r0 + i) * C + c) : _mm512_setzero_ps();
    if (sg && h == 16) rht16v(v, sg);
#pragma GCC unroll 16
    for (size_t i = 0; i < h; i++) A = _mm512_max_epu32(A, _mm512_and_si512(_mm512_castps_si512(v[i]), absm));
    __mmask16 fin = _mm512_cmplt_epu32_mask(A, _mm512_set1_epi32((int)INF_BITS));
    __m512 inv, dq;
    scale16(k, A, &inv, &dq);
    __m512i tb = k->counting ? thr16(dq, fin) : _mm512_setzero_si512();
    int full = k->counting && (rare16(A, dq, tb, fin) & m);
    __m512i wlo = _mm512_setzero_si512(), whi = wlo, g = _mm512_set1_epi64((long long)GAMMA);
    if (sr) {   /* lane l: counter index0 + (c + l) * R + r0 */
        uint64_t w = k->smix + (k->index0 + c * R + r0 + 1) * GAMMA;
        wlo = weyl8(w, R * GAMMA);
        whi = weyl8(w + 8 * R * GAMMA, R * GAMMA);
    }
    const __m512 nan = _mm512_set1_ps(NAN);
#pragma GCC unroll 16
    for (size_t i = 0; i < h; i++) {
        __m512 o = sr ? sr16(v[i], inv, dq, wlo, whi) : rne16(_mm512_castps_si512(v[i]), inv, dq);
        o = _mm512_mask_mov_ps(nan, fin, o);
        _mm512_mask_storeu_ps(y + (r0 + i) * C + c, m, o);
        if (full) count16(k, _mm512_and_si512(_mm512_castps_si512(v[i]), absm), o, tb, m);
        else if (k->counting) count_u16(k, _mm512_castps_si512(v[i]), o, m);
        wlo = _mm512_add_epi64(wlo, g);
        whi = _mm512_add_epi64(whi, g);
    }
}

TGT static void col_block(nvk *k, const float *x, float *y, size_t R, size_t C, size_t c, size_t nl, size_t r0,
                          size_t h, const float *sg)
{
    __mmask16 m = lanes(nl);
    if (h < 16) col_body(k, x, y, R, C, c, m, r0, h, sg, k->sr);
    else if (k->sr) col_body(k, x, y, R, C, c, m, r0, 16, sg, 1);
    else col_body(k, x, y, R, C, c, m, r0, 16, sg, 0);
}

/* The largest finite |v| of 16 rows from r0 (h of them) of columns [c, c + nl) after the RHT down them. */
AVX512 __m512i rht_absmax_block(__m512i A, const float *x, size_t C, size_t c, __mmask16 m, size_t r0, size_t h,
                                const float *sg)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32((int)INF_BITS);
    __m512 v[16];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++) v[i] = i < h ? _mm512_maskz_loadu_ps(m, x + (r0 + i) * C + c) : _mm512_setzero_ps();
    if (h == 16) rht16v(v, sg);
#pragma GCC unroll 16
    for (size_t i = 0; i < h; i++) {
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v[i]), absm);
        A = _mm512_mask_max_epu32(A, _mm512_cmplt_epu32_mask(a, inf), A, a);
    }
    return A;
}

TGT static uint32_t rht_absmax(const float *x, size_t R, size_t C, size_t c0, size_t c1, const float *sg)
{
    __m512i A = _mm512_setzero_si512();
    for (size_t r0 = 0; r0 < R; r0 += 16)   /* a band of rows at a time: whole cache lines of each row */
        for (size_t c = c0; c < c1; c += 16)
            if (R - r0 >= 16) A = rht_absmax_block(A, x, C, c, lanes(c1 - c), r0, 16, sg);
            else A = rht_absmax_block(A, x, C, c, lanes(c1 - c), r0, R - r0, sg);
    return _mm512_reduce_max_epu32(A);
}

/* Both maxima in one read: the finite |v| of columns [c0, c1) as they are (*P) and after the RHT down
** them (*H), as rht_absmax_block (a final partial band is not transformed, as qs_llm_rht16). */
TGT static void absmax2(const float *x, size_t R, size_t C, size_t b0, size_t b1, const float *sg, uint32_t *P,
                        uint32_t *H)
{
    const size_t c0 = 0, c1 = C;   /* rows [b0, b1) of every column: b0 a multiple of 16, b1 too or R */
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32((int)INF_BITS);
    __m512i AP = _mm512_setzero_si512(), AH = AP;
    for (size_t r0 = b0; r0 + 16 <= b1; r0 += 16)
        for (size_t c = c0; c < c1; c += 16) {
            __mmask16 m = lanes(c1 - c);
            __m512 v[16];
            if (r0 + 32 <= b1)   /* the next band's lines of these columns */
                for (size_t i = 0; i < 16; i++) _mm_prefetch((const char *)(x + (r0 + 16 + i) * C + c), _MM_HINT_T0);
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++) {
                v[i] = _mm512_maskz_loadu_ps(m, x + (r0 + i) * C + c);
                __m512i a = _mm512_and_si512(_mm512_castps_si512(v[i]), absm);
                AP = _mm512_mask_max_epu32(AP, _mm512_cmplt_epu32_mask(a, inf), AP, a);
            }
            rht16v(v, sg);
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++) {
                __m512i a = _mm512_and_si512(_mm512_castps_si512(v[i]), absm);
                AH = _mm512_mask_max_epu32(AH, _mm512_cmplt_epu32_mask(a, inf), AH, a);
            }
        }
    for (size_t r = b0 + (b1 - b0) / 16 * 16; r < b1; r++)   /* the matrix's final partial band (b1 = R) */
        for (size_t c = c0; c < c1; c += 16) {
            __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(lanes(c1 - c), x + r * C + c), absm);
            AP = _mm512_mask_max_epu32(AP, _mm512_cmplt_epu32_mask(a, inf), AP, a);
            AH = _mm512_mask_max_epu32(AH, _mm512_cmplt_epu32_mask(a, inf), AH, a);
        }
    *P = _mm512_reduce_max_epu32(AP);
    *H = _mm512_reduce_max_epu32(AH);
}

/* One 16x16 tile (h x w values from (r0, c0)): one scale, RNE. */
TGT static void tile(nvk *k, const float *x, float *y, size_t C, size_t r0, size_t c0, size_t h, size_t w)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __mmask16 m = lanes(w);
    __m512i A = _mm512_setzero_si512();
    for (size_t i = 0; i < h; i++)
        A = _mm512_max_epu32(A, _mm512_and_si512(_mm512_maskz_loadu_epi32(m, x + (r0 + i) * C + c0), absm));
    A = _mm512_set1_epi32((int)_mm512_reduce_max_epu32(A));
    __mmask16 fin = _mm512_cmplt_epu32_mask(A, _mm512_set1_epi32((int)INF_BITS));
    __m512 inv, dq;
    scale16(k, A, &inv, &dq);
    __m512i tb = k->counting ? thr16(dq, fin) : _mm512_setzero_si512();
    int full = k->counting && rare16(A, dq, tb, fin);
    for (size_t i = 0; i < h; i++) {
        __m512i xb = _mm512_maskz_loadu_epi32(m, x + (r0 + i) * C + c0);
        __m512 o = fin ? rne16(xb, inv, dq) : _mm512_set1_ps(NAN);
        _mm512_mask_storeu_ps(y + (r0 + i) * C + c0, m, o);
        if (full) count16(k, _mm512_and_si512(xb, absm), o, tb, m);
        else if (k->counting) count_u16(k, xb, o, m);
    }
}
#endif

int qs_fq_nvfp4(const qs_fq_task *t, qs_err *e)
{
#if NVF_X86
    nvk k;
    if (nvk_init(&k, t->a, t->cnt != NULL, e)) return -1;
    k.n = t->rows * t->cols;
    if (t->axis) {
        for (size_t r = t->r0; r < t->r1; r++)
            for (size_t c0 = 0; c0 < t->cols; c0 += 256)
                row_chunk(&k, t->x + r * t->cols, t->y + r * t->cols, t->cols, r, c0);
    } else {
        float sg[16];
        for (int i = 0; i < 16; i++) sg[i] = qs_sr_uniform(t->rht_seed, (uint64_t)i) < 0.5 ? -1.0f : 1.0f;
        for (size_t r0 = t->r0; r0 < t->r1; r0 += 16)   /* a band of rows at a time (whole cache lines) */
            for (size_t c = t->c0; c < t->c1; c += 16)
                col_block(&k, t->x, t->y, t->rows, t->cols, c, t->c1 - c < 16 ? t->c1 - c : 16, r0,
                          t->rows - r0 < 16 ? t->rows - r0 : 16, t->rht ? sg : NULL);
    }
    if (t->cnt) counts_out(&k, t->cnt);
    return 0;
#else
    (void)t;
    return qs_fail(e, "internal: the nvfp4 fused kernel needs AVX-512");
#endif
}

int qs_fq_nvfp4_tiles(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, size_t r0, size_t r1,
                      uint64_t *cnt, qs_err *e)
{
#if NVF_X86
    nvk k;
    if (nvk_init(&k, a, cnt != NULL, e)) return -1;
    for (size_t r = r0; r < r1 && r < rows; r += 16)
        for (size_t c = 0; c < cols; c += 16)
            tile(&k, x, y, cols, r, c, rows - r < 16 ? rows - r : 16, cols - c < 16 ? cols - c : 16);
    if (cnt) counts_out(&k, cnt);
    return 0;
#else
    (void)x; (void)y; (void)rows; (void)cols; (void)r0; (void)r1; (void)cnt;
    return qs_fail(e, "internal: the nvfp4 tile kernel needs AVX-512 (format %s)", a->f->name);
#endif
}

float qs_fq_nvfp4_rht_absmax(const float *x, size_t rows, size_t cols, size_t c0, size_t c1, uint64_t seed)
{
    uint32_t m = 0;
#if NVF_X86
    float sg[16];
    for (int i = 0; i < 16; i++) sg[i] = qs_sr_uniform(seed, (uint64_t)i) < 0.5 ? -1.0f : 1.0f;
    m = rht_absmax(x, rows, cols, c0, c1, sg);
#else
    (void)x; (void)rows; (void)cols; (void)c0; (void)c1; (void)seed;
#endif
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

int qs_fq_nvfp4_absmax2(const float *x, size_t rows, size_t cols, size_t r0, size_t r1, uint64_t seed, float *plain,
                        float *rht)
{
#if NVF_X86
    if (qs_simd_level() < QS_SIMD_AVX512 || !__builtin_cpu_supports("avx512dq")) return 1;
    float sg[16];
    for (int i = 0; i < 16; i++) sg[i] = qs_sr_uniform(seed, (uint64_t)i) < 0.5 ? -1.0f : 1.0f;
    uint32_t p, h;
    absmax2(x, rows, cols, r0, r1, sg, &p, &h);
    memcpy(plain, &p, sizeof p);
    memcpy(rht, &h, sizeof h);
    return 0;
#else
    (void)x; (void)rows; (void)cols; (void)r0; (void)r1; (void)seed; (void)plain; (void)rht;
    return 1;
#endif
}

/* qs_finite_absmax_n in pieces on the pool (the maximum does not depend on the order). */
#define AM_PIECE ((size_t)1 << 16)
typedef struct { const float *x; size_t n; float *m; } am_job;

static void am_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    am_job *j = ctx;
    size_t i0 = t * AM_PIECE, len = j->n - i0 < AM_PIECE ? j->n - i0 : AM_PIECE;
    j->m[t] = qs_finite_absmax_n(j->x + i0, len);
}

float qs_fq_absmax_par(const float *x, size_t n, int threads)
{
    size_t np = (n + AM_PIECE - 1) / AM_PIECE;
    int w = qs_pool_width(threads, np);
    float *m = w > 1 ? malloc(np * sizeof *m) : NULL;
    if (!m) return qs_finite_absmax_n(x, n);
    am_job j = {x, n, m};
    qs_pool_for(w, np, am_task, &j);
    float r = 0;
    for (size_t t = 0; t < np; t++) r = m[t] > r ? m[t] : r;
    free(m);
    return r;
}
