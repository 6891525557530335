/*
** The fused training-operand kernel of the hif4 family (llm_fakeq_fast.h): HiFloat4's fake
** quantization (format_hifloat.c, Algorithm 1 of §2.5 with exact arithmetic) and the operand
** statistics of llm_opstat.c (seg_clips with its flat counts) in one pass over each unit, straight
** from the row-major matrix along either axis.  AVX-512 only (below it the generic path runs).
**
** Axis 1 (units along a row): 16 lanes are 4 micro-groups of one unit; two in-lane max shuffles give
** each lane its group's maximum V16, as in format_hifloat.c's AVX-512 kernel.  The E6M2 scales of
** 16 units are computed together, as 16 lanes.
** Axis 0 (units down a column): 16 lanes are 16 adjacent columns and a unit is 64 rows of them,
** the group maxima elementwise over 4 rows; a unit's rows are read once into a 4 KiB buffer (the
** matrix's row stride would make them collide in L1), then quantized from it.  So each lane holds
** a whole unit and every lane has its own scale, flags and multipliers.
**
** The same arithmetic as the scalar unit: SF = BF16_RNE(Vmax * 73/512) (exact product in double),
** clamped to [2^-48, 49152], E6M2 = RNE to 3 bits (±Inf: 0xFE); REC from the §2.2 LUT; the flags by
** exact double compares of V16 * REC against 2 and 4; q = TA or RNE of min(|x| * REC * 2^(2-d), 7)
** in double; y = q * E6M2 * 2^(d-2) with x's sign when x < 0; a unit holding a NaN gives NaN.
** The counts of qs_llm_opstat_add / seg_clips: underflow (finite nonzero x, y = ±0), non-finite y,
** non-finite x, clips (finite |x| > Q + S/8 = 7.5 * E6M2 * 2^(d-2), none in a NaN unit).  A final
** partial unit is padded with zeros (axis 0: missing rows are zeros in the maxima), which count for
** nothing.
*/
#include "llm_fakeq_fast.h"

#include <string.h>

#include "hifloat.h"
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FQ_X86 1
#include <immintrin.h>
#else
#define FQ_X86 0
#endif

#define UNIT QS_HIF4_UNIT
#define INF_BITS 0x7f800000u
#define QNAN_BITS 0x7fc00000u

int qs_fq_hif4_ok(const qs_apply *a, int axis, int rht, int counting)
{
    (void)axis; (void)counting;
    if (!FQ_X86 || rht || !a->f || strcmp(a->f->name, "hif4")) return 0;
    if (a->o.block != 0 && a->o.block != UNIT) return 0;
    if (a->o.round != QS_RND_DEFAULT && a->o.round != QS_RND_TA && a->o.round != QS_RND_RNE) return 0;
    return qs_simd_level() >= QS_SIMD_AVX512;
}

#if FQ_X86
#define TGT __attribute__((target("avx512f,popcnt")))
#define INL static inline __attribute__((always_inline))

/* Per-lane constants of 16 units: REC * 2^(2-d) and E6M2 * 2^(d-2) for d = 0, 1, 2 (in double,
** lanes 0-7 and 8-15 apart) and the clip thresholds 7.5 * E6M2 * 2^(d-2) as float bits. */
typedef struct lanes {
    __m512d r[3][2], s[3][2];
    __m512i thr[3];
    __m512d rec[2];
} lanes;

INL TGT __m512d lo_pd(__m512i v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(v))); }
INL TGT __m512d hi_pd(__m512i v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castsi512_pd(v), 1)));
}
INL TGT __m512i join_ps(__m256 lo, __m256 hi)
{
    return _mm512_castpd_si512(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

/* E6M2 of 8 lanes from Vmax (float bits widened to 64-bit lanes as doubles): format_hifloat.c's
** hif4_scale, lane by lane.  Returns REC and the E6M2 value; Vmax >= Inf (NaN too) gives 0xFE. */
INL TGT void scale8(__m512d v, __mmask8 inf, __m512d *rec, __m512d *val)
{
    const __m512i one = _mm512_set1_epi64(1);
    __m512i u = _mm512_castpd_si512(_mm512_mul_pd(v, _mm512_set1_pd(73.0 / 512.0)));   /* exact */
    u = _mm512_add_epi64(u, _mm512_add_epi64(_mm512_set1_epi64((1ll << 44) - 1),
                                             _mm512_and_si512(_mm512_srli_epi64(u, 45), one)));
    __m512d sf = _mm512_castsi512_pd(_mm512_and_si512(u, _mm512_set1_epi64(~((1ll << 45) - 1))));   /* BF16 RNE */
    sf = _mm512_min_pd(_mm512_max_pd(sf, _mm512_set1_pd(0x1p-48)), _mm512_set1_pd(49152.0));
    u = _mm512_castpd_si512(sf);   /* to 3 significant bits, ties to even */
    u = _mm512_add_epi64(u, _mm512_add_epi64(_mm512_set1_epi64((1ll << 49) - 1),
                                             _mm512_and_si512(_mm512_srli_epi64(u, 50), one)));
    __m512i eb = _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(u, 52), _mm512_set1_epi64(0x7ff)),
                                  _mm512_set1_epi64(1023));            /* E = Eb - 48 */
    __m512i m = _mm512_and_si512(_mm512_srli_epi64(u, 50), _mm512_set1_epi64(3));
    eb = _mm512_mask_mov_epi64(eb, inf, _mm512_set1_epi64(15));          /* 0xFE: E = 15, m = 2 */
    m = _mm512_mask_mov_epi64(m, inf, _mm512_set1_epi64(2));
    /* value 2^E * (1 + m/4); REC = LUT[m] * 2^-E (§2.2, qs_hif4_e6m2_rec) */
    *val = _mm512_castsi512_pd(_mm512_or_si512(_mm512_slli_epi64(_mm512_add_epi64(eb, _mm512_set1_epi64(1023)), 52),
                                               _mm512_slli_epi64(m, 50)));
    const __m512d lut = _mm512_setr_pd(1.0, 0.80078125, 0.66796875, 0.5703125, 1.0, 1.0, 1.0, 1.0);
    __m512d p2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_sub_epi64(_mm512_set1_epi64(1023), eb), 52));
    *rec = _mm512_mul_pd(_mm512_permutexvar_pd(m, lut), p2);
}

/* The lanes' constants from 16 maxima (Vmax bits, one unit per lane). */
INL TGT void lanes_of(__m512i vmax, lanes *L)
{
    const __m512i inf = _mm512_set1_epi32((int)INF_BITS);
    __mmask16 big = _mm512_cmpge_epu32_mask(vmax, inf);
    __m512d rec[2], val[2];
    scale8(lo_pd(_mm512_mask_mov_epi32(vmax, big, _mm512_setzero_si512())), (__mmask8)big, &rec[0], &val[0]);
    scale8(hi_pd(_mm512_mask_mov_epi32(vmax, big, _mm512_setzero_si512())), (__mmask8)(big >> 8), &rec[1], &val[1]);
    for (int h = 0; h < 2; h++) {
        L->rec[h] = rec[h];
        L->r[0][h] = _mm512_mul_pd(rec[h], _mm512_set1_pd(4.0));
        L->r[1][h] = _mm512_mul_pd(rec[h], _mm512_set1_pd(2.0));
        L->r[2][h] = rec[h];
        L->s[0][h] = _mm512_mul_pd(val[h], _mm512_set1_pd(0.25));
        L->s[1][h] = _mm512_mul_pd(val[h], _mm512_set1_pd(0.5));
        L->s[2][h] = val[h];
    }
    for (int d = 0; d < 3; d++) {
        const __m512d k = _mm512_set1_pd(7.5);
        L->thr[d] = join_ps(_mm512_cvtpd_ps(_mm512_mul_pd(L->s[d][0], k)), _mm512_cvtpd_ps(_mm512_mul_pd(L->s[d][1], k)));
    }
}

/* Counts of one vector of 16 lanes. */
typedef struct cnt4 { uint64_t uf, nf, nfi, clip; } cnt4;

/* 16 elements with their lanes' multipliers r, s (halves) and thresholds: y, and the counts of the
** lanes in live (not NaN units) and all (real elements). */
INL TGT __m512i elem16(__m512i xv, const __m512d r[2], const __m512d s[2], __m512i thr, int rne, int counting,
                       __mmask16 live, __mmask16 all, cnt4 *c)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    const __m512d seven = _mm512_set1_pd(7.0), add = _mm512_set1_pd(rne ? 0x1p52 : 0.5);
    __m512i a = _mm512_and_si512(xv, absm);
    __m512d t0 = _mm512_min_pd(_mm512_mul_pd(lo_pd(a), r[0]), seven);
    __m512d t1 = _mm512_min_pd(_mm512_mul_pd(hi_pd(a), r[1]), seven);
    t0 = _mm512_add_pd(t0, add);
    t1 = _mm512_add_pd(t1, add);
    if (rne) {
        t0 = _mm512_sub_pd(t0, add);
        t1 = _mm512_sub_pd(t1, add);
    }
    __m256i q0 = _mm512_cvttpd_epi32(t0), q1 = _mm512_cvttpd_epi32(t1);
    __m256 y0 = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(q0), s[0]));   /* exact */
    __m256 y1 = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(q1), s[1]));
    __mmask16 nz = _mm512_test_epi32_mask(a, a);   /* x < 0 takes the sign; -0.0 does not */
    __m512i y = _mm512_mask_or_epi32(join_ps(y0, y1), nz, join_ps(y0, y1), _mm512_andnot_si512(absm, xv));
    if (counting) {
        const __m512i inf = _mm512_set1_epi32((int)INF_BITS);
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        c->uf += (unsigned)__builtin_popcount(live & nz & _mm512_testn_epi32_mask(q, q));
        c->nfi += (unsigned)__builtin_popcount(all & ~fin);
        c->clip += (unsigned)__builtin_popcount(live & fin & _mm512_cmpgt_epu32_mask(a, thr));
        c->nf += (unsigned)__builtin_popcount(all & ~live);
    }
    return _mm512_mask_mov_epi32(y, (__mmask16)~live, _mm512_set1_epi32((int)QNAN_BITS));
}

/* Per lane: d = E1_8 + E1_16 from the group's maxima g (V16) and its pair's E1_8 mask f8: the
** multipliers and thresholds of each lane (masks: d1 = d is 1, d2 = d is 2). */
INL TGT void pick(const lanes *L, __mmask16 f8, __mmask16 a2, __mmask16 a4, __m512d r[2], __m512d s[2], __m512i *thr)
{
    __mmask16 e16 = (__mmask16)((a2 & ~f8) | (a4 & f8)), d1 = f8 ^ e16, d2 = f8 & e16;
    for (int h = 0; h < 2; h++) {
        __mmask8 m1 = (__mmask8)(d1 >> (8 * h)), m2 = (__mmask8)(d2 >> (8 * h));
        r[h] = _mm512_mask_mov_pd(_mm512_mask_mov_pd(L->r[0][h], m1, L->r[1][h]), m2, L->r[2][h]);
        s[h] = _mm512_mask_mov_pd(_mm512_mask_mov_pd(L->s[0][h], m1, L->s[1][h]), m2, L->s[2][h]);
    }
    *thr = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(L->thr[0], d1, L->thr[1]), d2, L->thr[2]);
}

/* V16 * REC >= 2 and >= 4, per lane (masks). */
INL TGT void flags(__m512i g, const __m512d rec[2], __mmask16 *a2, __mmask16 *a4)
{
    __m512d p0 = _mm512_mul_pd(lo_pd(g), rec[0]), p1 = _mm512_mul_pd(hi_pd(g), rec[1]);
    const __m512d two = _mm512_set1_pd(2.0), four = _mm512_set1_pd(4.0);
    *a2 = (__mmask16)(_mm512_cmp_pd_mask(p0, two, _CMP_GE_OQ) | _mm512_cmp_pd_mask(p1, two, _CMP_GE_OQ) << 8);
    *a4 = (__mmask16)(_mm512_cmp_pd_mask(p0, four, _CMP_GE_OQ) | _mm512_cmp_pd_mask(p1, four, _CMP_GE_OQ) << 8);
}

/* ---- axis 1: nu <= 16 whole units at v (the last of them with n real elements) ------------------ */

INL TGT void units_h(const float *v, float *y, int nu, size_t n_last, int rne, int counting, cnt4 *c)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i g[16][4];
    uint32_t vm[16] = {0};
    for (int u = 0; u < nu; u++) {
        __m512i m = _mm512_setzero_si512();
        for (int i = 0; i < 4; i++) {
            __m512i a = _mm512_and_si512(_mm512_loadu_si512(v + u * UNIT + 16 * i), absm);
            a = _mm512_max_epu32(a, _mm512_shuffle_epi32(a, (_MM_PERM_ENUM)0xB1));   /* pairs */
            a = _mm512_max_epu32(a, _mm512_shuffle_epi32(a, (_MM_PERM_ENUM)0x4E));   /* V16 in all 4 */
            g[u][i] = a;
            m = _mm512_max_epu32(m, a);
        }
        vm[u] = _mm512_reduce_max_epu32(m);
    }
    lanes L;
    lanes_of(_mm512_loadu_si512(vm), &L);
    double rec[16], r[3][16], s[3][16];
    uint32_t thr[3][16];
    _mm512_storeu_pd(rec, L.rec[0]);
    _mm512_storeu_pd(rec + 8, L.rec[1]);
    for (int d = 0; d < 3; d++) {
        _mm512_storeu_pd(r[d], L.r[d][0]);
        _mm512_storeu_pd(r[d] + 8, L.r[d][1]);
        _mm512_storeu_pd(s[d], L.s[d][0]);
        _mm512_storeu_pd(s[d] + 8, L.s[d][1]);
        _mm512_storeu_si512(thr[d], L.thr[d]);
    }
    for (int u = 0; u < nu; u++) {
        size_t n = u == nu - 1 ? n_last : UNIT;
        int nan = vm[u] > INF_BITS;
        lanes U;   /* this unit's constants in every lane */
        U.rec[0] = U.rec[1] = _mm512_set1_pd(rec[u]);
        for (int d = 0; d < 3; d++) {
            U.r[d][0] = U.r[d][1] = _mm512_set1_pd(r[d][u]);
            U.s[d][0] = U.s[d][1] = _mm512_set1_pd(s[d][u]);
            U.thr[d] = _mm512_set1_epi32((int)thr[d][u]);
        }
        for (int i = 0; i < 4; i++) {
            __mmask16 a2, a4;
            flags(g[u][i], U.rec, &a2, &a4);
            /* E1_8: a pair of groups is 8 lanes */
            __mmask16 f8 = (__mmask16)(((a4 & 0xFF) ? 0xFF : 0) | ((a4 & 0xFF00) ? 0xFF00 : 0));
            __m512d rr[2], ss[2];
            __m512i th;
            pick(&U, f8, a2, a4, rr, ss, &th);
            size_t k = 16 * (size_t)i;
            __mmask16 all = n >= k + 16 ? 0xFFFF : n > k ? (__mmask16)((1u << (n - k)) - 1) : 0;
            __m512i out = elem16(_mm512_loadu_si512(v + u * UNIT + k), rr, ss, th, rne, counting,
                                 nan ? 0 : 0xFFFF, all, c);
            _mm512_storeu_si512(y + u * UNIT + k, out);
        }
    }
}

INL TGT void rows_h(const qs_fq_task *t, int rne, int counting, cnt4 *c)
{
    const size_t C = t->cols, full = C / UNIT, tail = C % UNIT;
    float pad[UNIT] __attribute__((aligned(64))), out[UNIT] __attribute__((aligned(64)));
    for (size_t r = t->r0; r < t->r1; r++) {
        const float *x = t->x + r * C;
        float *y = t->y + r * C;
        for (size_t u = 0; u < full; u += 16) {
            int nu = full - u < 16 ? (int)(full - u) : 16;
            units_h(x + u * UNIT, y + u * UNIT, nu, UNIT, rne, counting, c);
        }
        if (tail) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, x + full * UNIT, tail * sizeof *pad);
            units_h(pad, out, 1, tail, rne, counting, c);
            memcpy(y + full * UNIT, out, tail * sizeof *out);
        }
    }
}

/* ---- axis 0: one unit of nr <= 64 rows down 16 columns (lanes in lm) ------------------------------ */

INL TGT void unit_v(const float *x, float *y, size_t ld, size_t nr, __mmask16 lm, int rne, int counting, cnt4 *c,
                    __m512i *buf)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i g[16], vm = _mm512_setzero_si512();
    size_t ng = (nr + 3) / 4;
    for (size_t k = 0; k < 16; k++) g[k] = _mm512_setzero_si512();
    for (size_t i = 0; i < nr; i++) {   /* the unit's rows, once: maxima and the buffer */
        __m512i xv = _mm512_maskz_loadu_epi32(lm, x + i * ld);
        buf[i] = xv;
        g[i / 4] = _mm512_max_epu32(g[i / 4], _mm512_and_si512(xv, absm));
    }
    for (size_t k = 0; k < ng; k++) vm = _mm512_max_epu32(vm, g[k]);
    lanes L;
    lanes_of(vm, &L);
    __mmask16 live = lm & _mm512_cmple_epu32_mask(vm, _mm512_set1_epi32((int)INF_BITS));
    for (size_t j = 0; 2 * j < ng; j++) {
        __mmask16 a2[2], a4[2] = {0, 0};
        for (size_t h = 0; h < 2 && 2 * j + h < ng; h++) flags(g[2 * j + h], L.rec, &a2[h], &a4[h]);
        __mmask16 f8 = a4[0] | a4[1];   /* E1_8 of this pair of groups, per lane */
        for (size_t h = 0; h < 2 && 2 * j + h < ng; h++) {
            __m512d rr[2], ss[2];
            __m512i th;
            pick(&L, f8, a2[h], a4[h], rr, ss, &th);
            size_t i0 = 8 * j + 4 * h, i1 = i0 + 4 < nr ? i0 + 4 : nr;
            for (size_t i = i0; i < i1; i++)
                _mm512_mask_storeu_epi32(y + i * ld, lm, elem16(buf[i], rr, ss, th, rne, counting, live, lm, c));
        }
    }
}

INL TGT void cols_v(const qs_fq_task *t, int rne, int counting, cnt4 *c)
{
    __m512i buf[UNIT];
    const size_t C = t->cols;
    for (size_t u0 = 0; u0 < t->rows; u0 += UNIT) {
        size_t nr = t->rows - u0 < UNIT ? t->rows - u0 : UNIT;
        for (size_t c0 = t->c0; c0 < t->c1; c0 += 16) {
            __mmask16 lm = t->c1 - c0 >= 16 ? 0xFFFF : (__mmask16)((1u << (t->c1 - c0)) - 1);
            unit_v(t->x + u0 * C + c0, t->y + u0 * C + c0, C, nr, lm, rne, counting, c, buf);
        }
    }
}

static TGT void run(const qs_fq_task *t, int rne, cnt4 *c)
{
    if (t->axis) {
        if (t->cnt) rows_h(t, rne, 1, c);
        else rows_h(t, rne, 0, c);
    } else {
        if (t->cnt) cols_v(t, rne, 1, c);
        else cols_v(t, rne, 0, c);
    }
}
#endif

int qs_fq_hif4(const qs_fq_task *t, qs_err *e)
{
    if (!qs_fq_hif4_ok(t->a, t->axis, t->rht, t->cnt != NULL))
        return qs_fail(e, "internal: the hif4 fused kernel does not take this operand");
#if FQ_X86
    cnt4 c = {0, 0, 0, 0};
    run(t, t->a->o.round == QS_RND_RNE, &c);
    if (t->cnt) {
        t->cnt[0] += c.uf;
        t->cnt[1] += c.nf;
        t->cnt[2] += c.nfi;
        t->cnt[3] += c.clip;
    }
    return 0;
#else
    return qs_fail(e, "internal: the hif4 fused kernel needs x86-64");
#endif
}
