/*
** The fused training-operand kernel of the hif4 family (llm_fakeq_fast.h): HiFloat4's fake
** quantization (format_hifloat.c, Algorithm 1 of §2.5 with exact arithmetic) and the operand
** statistics of llm_opstat.c (seg_clips with its flat counts) in one pass over each unit, straight
** from the row-major matrix along either axis.  AVX-512 only (below it the generic path runs).
**
** Axis 1 (units along a row): 16 lanes are 4 micro-groups of one unit; two in-lane max shuffles give
** each lane its group's maximum V16, as in format_hifloat.c's AVX-512 kernel, and one vector of a
** unit's 16 V16 gives its flags as hif4_meta's bit masks.  The E6M2 scales of 16 units are computed
** together, as 16 lanes.
** Axis 0 (units down a column): 16 lanes are 16 adjacent columns and a unit is 64 rows of them,
** the group maxima elementwise over 4 rows; the unit's rows over the task's 64 columns are read once
** (whole lines) into a 16 KiB buffer (the matrix's row stride would make them collide in L1) while
** the next unit's rows are prefetched, then quantized from it and written row by row.  So each lane
** holds a whole unit and every lane has its own scale, flags and multipliers.
**
** The same values as format_hifloat.c: SF = BF16_RNE(Vmax * 73/512) (exact product in double),
** clamped to [2^-48, 49152], E6M2 = RNE to 3 bits (±Inf: 0xFE); REC from the §2.2 LUT; the flags
** V16 * REC >= 2, >= 4 and q = TA or RNE of min(|x| * REC * 2^(2-d), 7), both decided on the exact
** product (float product ph and its FMA residual pl, where format_hifloat.c uses double); y =
** q * E6M2 * 2^(d-2) (exact) with x's sign when x < 0; a unit holding a NaN gives NaN.
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

/* Per-lane constants of 16 units (float: all exact): REC * 2^(2-d) and E6M2 * 2^(d-2) for d = 0, 1, 2,
** the clip thresholds 7.5 * E6M2 * 2^(d-2), and REC. */
typedef struct lanes {
    __m512 r[3], s[3], thr[3], rec;
} lanes;

INL TGT __m512d lo_pd(__m512i v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(v))); }
INL TGT __m512d hi_pd(__m512i v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castsi512_pd(v), 1)));
}
INL TGT __m512 join_ps(__m256 lo, __m256 hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
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

/* The lanes' constants from 16 maxima (Vmax bits, one unit per lane).  REC (8 significant bits) and
** the E6M2 values (3) times powers of two in [2^-52, 2^50] are floats exactly. */
INL TGT void lanes_of(__m512i vmax, lanes *L)
{
    __mmask16 big = _mm512_cmpge_epu32_mask(vmax, _mm512_set1_epi32((int)INF_BITS));
    __m512i v = _mm512_mask_mov_epi32(vmax, big, _mm512_setzero_si512());
    __m512d rec[2], val[2];
    scale8(lo_pd(v), (__mmask8)big, &rec[0], &val[0]);
    scale8(hi_pd(v), (__mmask8)(big >> 8), &rec[1], &val[1]);
    L->rec = join_ps(_mm512_cvtpd_ps(rec[0]), _mm512_cvtpd_ps(rec[1]));
    __m512 va = join_ps(_mm512_cvtpd_ps(val[0]), _mm512_cvtpd_ps(val[1]));
    L->r[0] = _mm512_mul_ps(L->rec, _mm512_set1_ps(4.0f));
    L->r[1] = _mm512_mul_ps(L->rec, _mm512_set1_ps(2.0f));
    L->r[2] = L->rec;
    L->s[0] = _mm512_mul_ps(va, _mm512_set1_ps(0.25f));
    L->s[1] = _mm512_mul_ps(va, _mm512_set1_ps(0.5f));
    L->s[2] = va;
    for (int d = 0; d < 3; d++) L->thr[d] = _mm512_mul_ps(L->s[d], _mm512_set1_ps(7.5f));
}

/* Counts: per lane (underflow, non-finite input, clip; 32 bits, flushed into tot[] at least once per row
** or unit) and non-finite outputs (NaN units, counted per unit). */
typedef struct cnt4 {
    __m512i uf, nfi, clip;
    uint64_t tot[4];
} cnt4;

INL TGT uint64_t lanes_sum(__m512i v)
{
    __m512i w = _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)),
                                 _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1)));
    return (uint64_t)_mm512_reduce_add_epi64(w);
}

INL TGT void flush(cnt4 *c)
{
    c->tot[0] += lanes_sum(c->uf);
    c->tot[2] += lanes_sum(c->nfi);
    c->tot[3] += lanes_sum(c->clip);
    c->uf = c->nfi = c->clip = _mm512_setzero_si512();
}

/* 16 elements with their lanes' multipliers r, s and thresholds: y, and the counts of the lanes in
** live (not NaN units) and all (real elements).  t = |x| * r is ph + pl exactly (the FMA's residual;
** no underflow matters: t < 1/4 gives q = 0 either way), so t's position against the half step
** k + 1/2 is ph's, or at ph = k + 1/2 the sign of pl: TA and RNE of the exact product, as the double
** arithmetic of format_hifloat.c. */
INL TGT __m512 elem16(__m512 xv, __m512 r, __m512 s, __m512 thr, int rne, int counting, __mmask16 live,
                      __mmask16 all, cnt4 *c)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    const __m512 half = _mm512_set1_ps(0.5f), zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __m512i a = _mm512_and_si512(_mm512_castps_si512(xv), absm);
    __m512 af = _mm512_castsi512_ps(a);
    __m512 ph = _mm512_mul_ps(af, r), pl = _mm512_fmsub_ps(af, r, ph);
    __m512 fl = _mm512_roundscale_ps(ph, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 fr = _mm512_sub_ps(ph, fl);   /* exact */
    __mmask16 tie = _mm512_cmp_ps_mask(fr, half, _CMP_EQ_OQ);
    __m512 q;
    if (rne) {
        q = _mm512_roundscale_ps(ph, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q = _mm512_mask_add_ps(q, tie & _mm512_cmp_ps_mask(pl, zero, _CMP_GT_OQ), fl, one);
        q = _mm512_mask_mov_ps(q, tie & _mm512_cmp_ps_mask(pl, zero, _CMP_LT_OQ), fl);
    } else {
        __mmask16 up = _mm512_cmp_ps_mask(fr, half, _CMP_GT_OQ) | (tie & _mm512_cmp_ps_mask(pl, zero, _CMP_GE_OQ));
        q = _mm512_mask_add_ps(fl, up, fl, one);
    }
    q = _mm512_min_ps(q, _mm512_set1_ps(7.0f));   /* Inf: fl = Inf, no NaN reaches min's first operand */
    __mmask16 nz = _mm512_test_epi32_mask(a, a);   /* x < 0 takes the sign; -0.0 does not */
    __m512i y = _mm512_castps_si512(_mm512_mul_ps(q, s));   /* exact */
    y = _mm512_mask_or_epi32(y, nz, y, _mm512_andnot_si512(absm, _mm512_castps_si512(xv)));
    if (counting) {   /* lanes += 1 (subtract -1) */
        const __m512i inf = _mm512_set1_epi32((int)INF_BITS), m1 = _mm512_set1_epi32(-1);
        __mmask16 nfin = _mm512_mask_cmpge_epu32_mask(all, a, inf);
        c->nfi = _mm512_mask_sub_epi32(c->nfi, nfin, c->nfi, m1);
        c->uf = _mm512_mask_sub_epi32(c->uf, _mm512_mask_cmp_ps_mask(live & nz, q, zero, _CMP_EQ_OQ), c->uf, m1);
        __mmask16 cl = _mm512_mask_cmpgt_epu32_mask(live & ~nfin, a, _mm512_castps_si512(thr));
        c->clip = _mm512_mask_sub_epi32(c->clip, cl, c->clip, m1);
    }
    if (live == 0xFFFF) return _mm512_castsi512_ps(y);
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(y, (__mmask16)~live, _mm512_set1_epi32((int)QNAN_BITS)));
}

/* Per lane: d = E1_8 + E1_16 from the pair's E1_8 mask f8 and the group's V16 * REC >= 2, >= 4: the
** multipliers and threshold of each lane. */
INL TGT void pick(const lanes *L, __mmask16 f8, __mmask16 a2, __mmask16 a4, __m512 *r, __m512 *s, __m512 *thr)
{
    __mmask16 e16 = (__mmask16)((a2 & ~f8) | (a4 & f8)), d1 = f8 ^ e16, d2 = f8 & e16;
    *r = _mm512_mask_mov_ps(_mm512_mask_mov_ps(L->r[0], d1, L->r[1]), d2, L->r[2]);
    *s = _mm512_mask_mov_ps(_mm512_mask_mov_ps(L->s[0], d1, L->s[1]), d2, L->s[2]);
    *thr = _mm512_mask_mov_ps(_mm512_mask_mov_ps(L->thr[0], d1, L->thr[1]), d2, L->thr[2]);
}

/* V16 * REC >= 2 and >= 4, exactly (product ph + pl; Inf compares true), per lane. */
INL TGT void flags(__m512i g, __m512 rec, __mmask16 *a2, __mmask16 *a4)
{
    __m512 v = _mm512_castsi512_ps(g), ph = _mm512_mul_ps(v, rec), pl = _mm512_fmsub_ps(v, rec, ph);
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f);
    __mmask16 nn = _mm512_cmp_ps_mask(pl, _mm512_setzero_ps(), _CMP_GE_OQ);
    *a2 = _mm512_cmp_ps_mask(ph, two, _CMP_GT_OQ) | (_mm512_cmp_ps_mask(ph, two, _CMP_EQ_OQ) & nn);
    *a4 = _mm512_cmp_ps_mask(ph, four, _CMP_GT_OQ) | (_mm512_cmp_ps_mask(ph, four, _CMP_EQ_OQ) & nn);
}

#define PF_AHEAD 512   /* floats read ahead along rows (2 KiB: the streamer stops at 4 KiB pages) */

/* ---- axis 1: nu <= 16 whole units at v (the last of them with n real elements) ------------------ */

INL TGT void units_h(const float *v, float *y, int nu, size_t n_last, const float *lim, int rne, int counting, cnt4 *c)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    /* lane k of G[u]: unit u's V16 of group k (lanes 0, 4, 8, 12 of each vector after the shuffles) */
    const __m512i pick01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i G[16];
    uint32_t vm[16] = {0};
    for (int u = 0; u < nu; u++) {
        __m512i g[4];
        for (int i = 0; i < 4; i++) {
            const float *p = v + u * UNIT + 16 * i;
            if (p + PF_AHEAD < lim) _mm_prefetch((const char *)(p + PF_AHEAD), _MM_HINT_T0);
            __m512i a = _mm512_and_si512(_mm512_loadu_si512(p), absm);
            a = _mm512_max_epu32(a, _mm512_shuffle_epi32(a, (_MM_PERM_ENUM)0xB1));   /* pairs */
            g[i] = _mm512_max_epu32(a, _mm512_shuffle_epi32(a, (_MM_PERM_ENUM)0x4E));   /* V16 in all 4 */
        }
        G[u] = _mm512_shuffle_i64x2(_mm512_permutex2var_epi32(g[0], pick01, g[1]),
                                    _mm512_permutex2var_epi32(g[2], pick01, g[3]), 0x44);
        vm[u] = _mm512_reduce_max_epu32(G[u]);
    }
    lanes L;
    lanes_of(_mm512_loadu_si512(vm), &L);
    float rec[16], r[3][16], s[3][16], thr[3][16];
    _mm512_storeu_ps(rec, L.rec);
    for (int d = 0; d < 3; d++) {
        _mm512_storeu_ps(r[d], L.r[d]);
        _mm512_storeu_ps(s[d], L.s[d]);
        _mm512_storeu_ps(thr[d], L.thr[d]);
    }
    for (int u = 0; u < nu; u++) {
        size_t n = u == nu - 1 ? n_last : UNIT;
        __mmask16 live = vm[u] > INF_BITS ? 0 : 0xFFFF;
        if (counting && !live) c->tot[1] += n;   /* a NaN unit: every real output */
        /* the unit's metadata as format_hifloat.c's hif4_meta: bit k of a mask = group k */
        __mmask16 a2, a4;
        flags(G[u], _mm512_set1_ps(rec[u]), &a2, &a4);
        unsigned pair = (a4 | a4 >> 1) & 0x5555u, f8 = pair | pair << 1;
        __m512 rg, sg, tg;   /* lane k: group k's multipliers and threshold */
        {
            lanes U;
            for (int d = 0; d < 3; d++) {
                U.r[d] = _mm512_set1_ps(r[d][u]);
                U.s[d] = _mm512_set1_ps(s[d][u]);
                U.thr[d] = _mm512_set1_ps(thr[d][u]);
            }
            pick(&U, (__mmask16)f8, a2, a4, &rg, &sg, &tg);
        }
        for (int i = 0; i < 4; i++) {   /* lane j of vector i is group 4i + j/4 */
            const __m512i idx = _mm512_add_epi32(_mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                                                     12, 13, 14, 15), 2),
                                                 _mm512_set1_epi32(4 * i));
            size_t k = 16 * (size_t)i;
            __mmask16 all = n >= k + 16 ? 0xFFFF : n > k ? (__mmask16)((1u << (n - k)) - 1) : 0;
            _mm512_storeu_ps(y + u * UNIT + k,
                             elem16(_mm512_loadu_ps(v + u * UNIT + k), _mm512_permutexvar_ps(idx, rg),
                                    _mm512_permutexvar_ps(idx, sg), _mm512_permutexvar_ps(idx, tg), rne, counting,
                                    live, all, c));
        }
    }
}

INL TGT void rows_h(const qs_fq_task *t, int rne, int counting, cnt4 *c)
{
    const size_t C = t->cols, full = C / UNIT, tail = C % UNIT;
    float pad[UNIT] __attribute__((aligned(64))), out[UNIT] __attribute__((aligned(64)));
    const float *lim = t->x + t->r1 * C;   /* prefetches stay in the task's rows */
    for (size_t r = t->r0; r < t->r1; r++) {
        const float *x = t->x + r * C;
        float *y = t->y + r * C;
        for (size_t u = 0; u < full; u += 16) {
            int nu = full - u < 16 ? (int)(full - u) : 16;
            units_h(x + u * UNIT, y + u * UNIT, nu, UNIT, lim, rne, counting, c);
        }
        if (tail) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, x + full * UNIT, tail * sizeof *pad);
            units_h(pad, out, 1, tail, NULL, rne, counting, c);
            memcpy(y + full * UNIT, out, tail * sizeof *out);
        }
        if (counting) flush(c);
    }
}

/* ---- axis 0: units of nr <= 64 rows down 16 columns (lanes in lm) -------------------------------- */

/* Pass 2 of a unit over ns strips: each strip's metadata per lane from its group maxima g[s] and Vmax
** vm[s], then the rows from the buffer, each row's strips together (one pass over the rows of y). */
INL TGT void pass2_v(__m512i (*g)[16], const __m512i *vm, __m512i (*buf)[UNIT], float *y, size_t ld, size_t nr,
                     const __mmask16 *lm, int ns, int rne, int counting, cnt4 *c)
{
    size_t ng = (nr + 3) / 4;
    lanes L[4];
    __mmask16 live[4];
    for (int s = 0; s < ns; s++) {
        lanes_of(vm[s], &L[s]);
        live[s] = lm[s] & _mm512_cmple_epu32_mask(vm[s], _mm512_set1_epi32((int)INF_BITS));
        if (counting) c->tot[1] += (uint64_t)__builtin_popcount(lm[s] & ~live[s]) * nr;   /* NaN units */
    }
    for (size_t j = 0; 2 * j < ng; j++) {
        __mmask16 a2[4][2], a4[4][2], f8[4];
        for (int s = 0; s < ns; s++) {
            a4[s][1] = 0;
            for (size_t h = 0; h < 2 && 2 * j + h < ng; h++) flags(g[s][2 * j + h], L[s].rec, &a2[s][h], &a4[s][h]);
            f8[s] = a4[s][0] | a4[s][1];   /* E1_8 of this pair of groups, per lane */
        }
        for (size_t h = 0; h < 2 && 2 * j + h < ng; h++) {
            __m512 rr[4], ss[4], th[4];
            for (int s = 0; s < ns; s++) pick(&L[s], f8[s], a2[s][h], a4[s][h], &rr[s], &ss[s], &th[s]);
            size_t i0 = 8 * j + 4 * h, i1 = i0 + 4 < nr ? i0 + 4 : nr;
            for (size_t i = i0; i < i1; i++)
                for (int s = 0; s < ns; s++)
                    _mm512_mask_storeu_ps(y + i * ld + 16 * s, lm[s],
                                          elem16(_mm512_castsi512_ps(buf[s][i]), rr[s], ss[s], th[s], rne, counting,
                                                 live[s], lm[s], c));
        }
    }
}

/* One unit of rows over up to 64 columns (4 strips; lm[s] = 0: no strip): pass 1 reads each row's
** columns at once (whole adjacent lines) into the buffer and takes the group maxima, prefetching the
** next unit's rows (nn of them); pass 2 likewise row by row. */
INL TGT void unit_v(const float *x, float *y, size_t ld, size_t nr, size_t nn, const __mmask16 lm[4], int ns, int rne,
                    int counting, cnt4 *c, __m512i (*buf)[UNIT])
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i g[4][16], vm[4];
    size_t ng = (nr + 3) / 4;
    for (int s = 0; s < 4; s++) vm[s] = _mm512_setzero_si512();
    for (size_t k = 0; k < ng; k++) {
        size_t i1 = 4 * k + 4 < nr ? 4 * k + 4 : nr;
        __m512i m[4];
        for (int s = 0; s < 4; s++) m[s] = _mm512_setzero_si512();
        for (size_t i = 4 * k; i < i1; i++) {
            for (int s = 0; s < 4; s++) {
                __m512i xv = _mm512_maskz_loadu_epi32(lm[s], x + i * ld + 16 * s);
                buf[s][i] = xv;
                m[s] = _mm512_max_epu32(m[s], _mm512_and_si512(xv, absm));
            }
            if (i < nn)
                for (int s = 0; s < ns; s++) _mm_prefetch((const char *)(x + (UNIT + i) * ld + 16 * s), _MM_HINT_T0);
        }
        for (int s = 0; s < 4; s++) {
            g[s][k] = m[s];
            vm[s] = _mm512_max_epu32(vm[s], m[s]);
        }
    }
    pass2_v(g, vm, buf, y, ld, nr, lm, ns, rne, counting, c);
}

INL TGT void cols_v(const qs_fq_task *t, int rne, int counting, cnt4 *c)
{
    __m512i buf[4][UNIT];
    const size_t C = t->cols;
    for (size_t c0 = t->c0; c0 < t->c1; c0 += 64) {
        __mmask16 lm[4];
        int ns = 0;
        for (int s = 0; s < 4; s++) {
            size_t cs = c0 + 16 * (size_t)s, w = t->c1 > cs ? t->c1 - cs : 0;
            lm[s] = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
            ns += w > 0;
        }
        for (size_t u0 = 0; u0 < t->rows; u0 += UNIT) {
            size_t nr = t->rows - u0 < UNIT ? t->rows - u0 : UNIT, rest = t->rows - u0 - nr;
            size_t nn = rest < UNIT ? rest : UNIT;   /* the next unit's rows, fetched meanwhile */
            unit_v(t->x + u0 * C + c0, t->y + u0 * C + c0, C, nr, nn, lm, ns, rne, counting, c, buf);
            if (counting) flush(c);
        }
    }
}

/* The four specializations, apart (so that profiles tell the axes apart). */
#define NOINL static __attribute__((noinline)) TGT
/* (The counters in a local of their own: no store to y may alias them, so they stay in registers.) */
NOINL void rows_counted(const qs_fq_task *t, int rne, cnt4 *c) { cnt4 k = *c; rows_h(t, rne, 1, &k); *c = k; }
NOINL void rows_plain(const qs_fq_task *t, int rne, cnt4 *c) { rows_h(t, rne, 0, c); }
NOINL void cols_counted(const qs_fq_task *t, int rne, cnt4 *c) { cnt4 k = *c; cols_v(t, rne, 1, &k); *c = k; }
NOINL void cols_plain(const qs_fq_task *t, int rne, cnt4 *c) { cols_v(t, rne, 0, c); }

static TGT void run(const qs_fq_task *t, int rne, uint64_t tot[4])
{
    cnt4 c = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), {0, 0, 0, 0}};
    if (t->axis) (t->cnt ? rows_counted : rows_plain)(t, rne, &c);
    else (t->cnt ? cols_counted : cols_plain)(t, rne, &c);
    for (int i = 0; i < 4; i++) tot[i] = c.tot[i];
}
#endif

int qs_fq_hif4(const qs_fq_task *t, qs_err *e)
{
    if (!qs_fq_hif4_ok(t->a, t->axis, t->rht, t->cnt != NULL))
        return qs_fail(e, "internal: the hif4 fused kernel does not take this operand");
#if FQ_X86
    uint64_t c[4];
    run(t, t->a->o.round == QS_RND_RNE, c);
    if (t->cnt)
        for (int i = 0; i < 4; i++) t->cnt[i] += c[i];
    return 0;
#else
    return qs_fail(e, "internal: the hif4 fused kernel needs x86-64");
#endif
}
