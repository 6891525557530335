/*
** The per-value kernel with AVX-512: groups of 16 values, lane L of each vector being lane L of the
** portable kernel's accumulators (metrics_kernel_ref.c), every operation giving the bits of elem()
** there.  elem() is the definition of every per-value quantity; this file repeats each one as
** vector operations, in the same order:
**   sums of x^2, e, x e, e^2 (per block, per run, per band)   pass 1, "x^2, e^2 and x e are exact"
**   underflow / clip / non-finite counts and e^2 by source    pass 1, the masks mu, mc, mr, bad
**   block statistics (e^2 lanes, finite inputs, largest |x|)  pass 1, "block end"
**   row / column sums of the other axis (va, vn)              pass 1, "if (rows)"
**   relative error (sum, max), |e| max                        pass 2, relf, srl, mae, mrel
**   bins of value, abs_err, rel_err (log4f_raw), ulp_err      pass 2, win_store
** Changing a metric means changing elem() and its lines here (the tests compare both paths bit for
** bit: tests/unit/test_metrics.c, QS_SIMD=scalar against the default), and its definition in
** metrics.h.
*/
#include "metrics_internal.h"

#if MET_X86
/* Floor(4 log2 v) + 508 + 127 from the bits of normal floats (16 lanes): 4 x the biased exponent
** plus the quarter, which is the exponent of fl32(fl32(m^2)^2) for the significand m in [1, 2)
** (+127): the two roundings never cross an edge 2^(j/4) (all 2^23 significands checked, in
** tests/unit/test_metrics.c), and two multiplies cost less than three compares. */
__attribute__((target("avx512f"), always_inline))
static inline __m512i log4f_raw(__m512i bits)
{
    const __m512i mant23 = _mm512_set1_epi32(0x7fffff), onef = _mm512_set1_epi32(0x3f800000);
    __m512 m = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(bits, mant23, onef, 0xea));   /* (b & m) | 1 */
    __m512 m2 = _mm512_mul_ps(m, m);
    __m512i q = _mm512_srli_epi32(_mm512_castps_si512(_mm512_mul_ps(m2, m2)), 23);
    return _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 21), _mm512_set1_epi32(0x3fc)), q);
}

/* Reduce 16 double lanes (lo: 0..7, hi: 8..15) in lanesum's order. */
__attribute__((target("avx512f")))
static inline double red16(__m512d lo, __m512d hi)
{
    __m512d t = _mm512_add_pd(lo, hi);
    __m512d r1 = _mm512_add_pd(t, _mm512_permute_pd(t, 0x55));
    __m512d r2 = _mm512_add_pd(r1, _mm512_permutex_pd(r1, 0x4e));
    __m512d r3 = _mm512_add_pd(r2, _mm512_shuffle_f64x2(r2, r2, 0x4e));
    return _mm512_cvtsd_f64(r3);
}

/* A histogram's bins of 16 values relative to the window: d = raw - gbase where binned, D_SENT
** elsewhere; binned values outside the window flag the chunk.  raw is biased by bias (LOG4F's 127). */
__attribute__((target("avx512f"), always_inline))
static inline void win_store(hwin *W, size_t gi, int32_t *dst, __m512i raw, int bias, __mmask16 msk)
{
    __m512i d = _mm512_sub_epi32(raw, _mm512_set1_epi32(W->gbase + bias));
    W->om[gi] = _mm512_mask_cmpge_epu32_mask(msk, d, _mm512_set1_epi32((int)W->gwidth));
    _mm512_storeu_si512(dst, _mm512_mask_mov_epi32(_mm512_set1_epi32(D_SENT), msk, d));
}

/* The element-scale vectors of the values being processed: S, -floor(log2 S) (for the scaling by
** 1 / S), S's significand field, the saturation level bits and 127 + floor(log2 S). */
typedef struct segv {
    __m512 S, nSE;
    __m512i SM, qtop, c127;
} segv;

/* Load the scale vectors of the segment at group gi (segment sg when g >= 16) and return the end of
** the groups sharing them: the whole chunk for g = 0, up to the segment's end for g >= 16, one group
** for g = 4 or 8 (a vector's lanes span several segments; sg is then derived from the position). */
__attribute__((target("avx512f"), always_inline))
static inline size_t seg_enter(segv *v, const kscale *ks, int g4, int g8, size_t p0, size_t gi, size_t ng, size_t sg)
{
    const size_t g = ks->g, p = p0 + gi * 16;
    if (g4 || g8) {
        const __m512i gidx = g4 ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                                : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        sg = g4 ? p >> 2 : p >> 3;
        v->S = _mm512_permutexvar_ps(gidx, _mm512_loadu_ps(ks->Sf + sg));
        __m512i SEv = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->SE + sg));
        v->SM = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->SM + sg));
        v->qtop = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->Qb + sg));
        v->c127 = _mm512_add_epi32(SEv, _mm512_set1_epi32(127));
        v->nSE = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), SEv));
        return gi + 1;
    }
    size_t gend = g ? gi + ((sg + 1) * g - p) / 16 : ng;
    v->S = _mm512_set1_ps(ks->Sf[sg]);
    v->SM = _mm512_set1_epi32((int)ks->SM[sg]);
    v->qtop = _mm512_set1_epi32((int)ks->Qb[sg]);
    v->c127 = _mm512_set1_epi32(127 + ks->SE[sg]);
    v->nSE = _mm512_set1_ps((float)-ks->SE[sg]);
    return gend > ng ? ng : gend;
}

/* Groups of 16 values of a run chunk with AVX-512, run positions p0 + 16 g: lane L of the vectors is
** lane L of the portable accumulators and every operation gives elem()'s bits (max_ps(a, b) = a > b ?
** a : b as elem writes it; floor by the conversion's rounding; fused multiply-adds only where the
** product is exact; division by a power of two as a scaling), so the results are bit-identical.
** Zero or subnormal inputs and subnormal errors are binned by err_bins1 after the loop (rare);
** non-finite outputs take a rare branch.  Bins are stored relative to the windows (win_store). */
__attribute__((target("avx512f,avx512dq,avx512vl,fma"), always_inline))
static inline void groups_body(const int V, const kpar *P, const worker *w, const kscale *ks, size_t m, const float *x,
                               const float *q, size_t p0, size_t ng, kl *a, bstat *bsm, int32_t *bv, int32_t *ba,
                               int32_t *br, int32_t *bu, bstat *rs, double *va, uint32_t *vn)
{
    const int bstats = V & GV_BST, rows = V & GV_ROWS, pow2 = V & GV_POW2, noval = V & GV_NOVAL, tap = V & GV_TAP;
    const int g4 = V & GV_G4, g8 = V & GV_G8;
    const int wantbam = w->j->bk_absmax != NULL;   /* block maxima only for the per-block arrays */
    hwin *Wv = w->wv, *Wa = w->wa, *Wr = w->wr, *Wu = w->wu;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i mant23 = _mm512_set1_epi32(0x7fffff), one = _mm512_set1_epi32(1);
    const __m512i fmin = _mm512_set1_epi32(0x00800000), zero = _mm512_setzero_si512();
    const __m512 Ff = _mm512_set1_ps(P->Ff), lo64 = _mm512_set1_ps(-64.0f), hi64 = _mm512_set1_ps(64.0f);
    const __m512i elo = _mm512_set1_epi32(P->elo), ehi = _mm512_set1_epi32(P->ehi), cmb5 = _mm512_set1_epi32(P->mb + 5);
    const size_t g = ks->g, B = ks->B;
    __m512d sx2a = _mm512_loadu_pd(a->sx2), sx2b = _mm512_loadu_pd(a->sx2 + 8);
    __m512d se2a = _mm512_loadu_pd(a->se2), se2b = _mm512_loadu_pd(a->se2 + 8);
    __m512d sea = _mm512_loadu_pd(a->se), seb = _mm512_loadu_pd(a->se + 8);
    __m512d sxea = _mm512_loadu_pd(a->sxe), sxeb = _mm512_loadu_pd(a->sxe + 8);
    __m512d seua = _mm512_loadu_pd(a->seu), seub = _mm512_loadu_pd(a->seu + 8);
    __m512d seca = _mm512_loadu_pd(a->sec), secb = _mm512_loadu_pd(a->sec + 8);
    __m512d sera = _mm512_loadu_pd(a->ser), serb = _mm512_loadu_pd(a->ser + 8);
    __m512 srl = _mm512_loadu_ps(a->srelf);
    __m512 mae = _mm512_loadu_ps(a->maxae), mrel = _mm512_loadu_ps(a->maxrel);
    __m512i cnt = zero;      /* per lane: underflows + 65536 x clipped (at most 32 of each per call) */
    uint64_t nfin = 0;
    __m512d bsa = _mm512_setzero_pd(), bsb = bsa, rsa = bsa, rsb = bsa;
    __m512 bam = _mm512_setzero_ps();
    uint64_t bnf0 = 0;
    if (bstats) {
        bsa = _mm512_loadu_pd(bsm->se2);
        bsb = _mm512_loadu_pd(bsm->se2 + 8);
        bam = _mm512_set1_ps(bsm->amax);
        bnf0 = bsm->nf;
    }
    if (rows) {
        rsa = _mm512_loadu_pd(rs->se2);
        rsb = _mm512_loadu_pd(rs->se2 + 8);
    }
    /* the current scale (vectors), refreshed when the segment changes (g = 4 or 8: per group);
    ** segment and block ends are counted down (no division in the loop) */
    size_t blk_end = bstats ? (p0 / B + 1) * B : 0;
    if (bstats && blk_end > m) blk_end = m;
    uint16_t fixm[CH / 16];
    const int s1 = pow2 && ks->se0;       /* every S is 1 */
    /* segments: the scale vectors are set once per run of groups inside one segment (seg_enter); with
    ** g >= 16 the segment index steps by one, with g = 0 there is one, with g = 4 or 8 it is derived */
    segv sv;
    const size_t sg0 = g && !(g4 || g8) ? p0 / g : 0, sgstep = g && !(g4 || g8);
    /* two passes over the chunk (fewer live registers): sums, counts, block and row statistics and
    ** fl32(e) into fes[]; then the bins */
    float fes[CH];
    int anybad = 0;
    /* pass 1: sums, counts, block and row statistics, fl32(e) */
    for (size_t gi = 0, sg = sg0; gi < ng; sg += sgstep) {
        const size_t gend = seg_enter(&sv, ks, g4, g8, p0, gi, ng, sg);
        for (; gi < gend; gi++) {
            const size_t i = gi * 16, p = p0 + i;
            __m512 xs = _mm512_loadu_ps(x + i), qs = _mm512_loadu_ps(q + i);
            __m512i xa = _mm512_and_si512(_mm512_castps_si512(xs), absm), qa = _mm512_and_si512(_mm512_castps_si512(qs), absm);
            __mmask16 xf = _mm512_cmplt_epu32_mask(xa, expm), qf = _mm512_cmplt_epu32_mask(qa, expm);
            __mmask16 ok = xf & qf, bad = xf & (__mmask16)~qf;
            __m512d xda = _mm512_maskz_cvtps_pd((__mmask8)ok, _mm512_castps512_ps256(xs));
            __m512d xdb = _mm512_maskz_cvtps_pd((__mmask8)(ok >> 8), _mm512_extractf32x8_ps(xs, 1));
            __m512 fe_ = _mm512_maskz_sub_ps(ok, qs, xs);
            __m512d eva = _mm512_cvtps_pd(_mm512_castps512_ps256(fe_)), evb = _mm512_cvtps_pd(_mm512_extractf32x8_ps(fe_, 1));
            __m512d e2a = _mm512_mul_pd(eva, eva), e2b = _mm512_mul_pd(evb, evb);
            _mm512_storeu_ps(fes + i, fe_);
            if (bad) {   /* a finite input turned NaN/Inf: infinite error */
                const __m512d inf = _mm512_set1_pd(INFINITY);
                e2a = _mm512_mask_mov_pd(e2a, (__mmask8)bad, inf);
                e2b = _mm512_mask_mov_pd(e2b, (__mmask8)(bad >> 8), inf);
                anybad = 1;
                a->nnonf += (uint64_t)__builtin_popcount(bad);
            }
            /* x^2, e^2 and x e are exact in double (24- and 25-bit significands), so a fused multiply-add
            ** rounds exactly as elem's product then sum: the same bits, on the multiply pipes */
            sx2a = _mm512_fmadd_pd(xda, xda, sx2a);
            sx2b = _mm512_fmadd_pd(xdb, xdb, sx2b);
            if (!bstats && !rows) {   /* else summed by block, then by run */
                se2a = _mm512_add_pd(se2a, e2a);
                se2b = _mm512_add_pd(se2b, e2b);
            }
            sea = _mm512_add_pd(sea, eva);
            seb = _mm512_add_pd(seb, evb);
            sxea = _mm512_fmadd_pd(xda, eva, sxea);
            sxeb = _mm512_fmadd_pd(xdb, evb, sxeb);
            __mmask16 xnz = _mm512_test_epi32_mask(xa, xa);
            nfin += (uint64_t)__builtin_popcount(xf);
            __mmask16 mu = _mm512_mask_cmpeq_epi32_mask(ok & xnz, qa, zero);
            __mmask16 mc = _mm512_mask_cmplt_epu32_mask(_mm512_mask_cmpeq_epi32_mask(ok, qa, sv.qtop), qa, xa);
            __mmask16 mr = ok & (__mmask16)~(mu | mc);
            cnt = _mm512_mask_add_epi32(cnt, mu, cnt, one);
            cnt = _mm512_mask_add_epi32(cnt, mc, cnt, _mm512_set1_epi32(65536));
            /* the finite error energy by source: masked adds with the count masks (mr leaves out NaN/Inf) */
            seua = _mm512_mask_add_pd(seua, (__mmask8)mu, seua, e2a);
            seub = _mm512_mask_add_pd(seub, (__mmask8)(mu >> 8), seub, e2b);
            seca = _mm512_mask_add_pd(seca, (__mmask8)mc, seca, e2a);
            secb = _mm512_mask_add_pd(secb, (__mmask8)(mc >> 8), secb, e2b);
            sera = _mm512_mask_add_pd(sera, (__mmask8)mr, sera, e2a);
            serb = _mm512_mask_add_pd(serb, (__mmask8)(mr >> 8), serb, e2b);
            if (bstats) {
                bsa = _mm512_add_pd(bsa, e2a);
                bsb = _mm512_add_pd(bsb, e2b);
                if (wantbam) bam = _mm512_max_ps(_mm512_castsi512_ps(_mm512_maskz_mov_epi32(xf, xa)), bam);
                if (p + 16 == blk_end) {   /* block end: lanesum's order */
                    size_t bi = p / B;
                    blk_end = blk_end + B < m ? blk_end + B : m;
                    ks->bse2[bi] = red16(bsa, bsb);
                    if (rows) {
                        rsa = _mm512_add_pd(rsa, bsa);
                        rsb = _mm512_add_pd(rsb, bsb);
                    } else {
                        se2a = _mm512_add_pd(se2a, bsa);
                        se2b = _mm512_add_pd(se2b, bsb);
                    }
                    ks->bnf[bi] = bnf0 + nfin;
                    if (wantbam) ks->bam[bi] = _mm512_reduce_max_ps(bam);
                    bsa = bsb = _mm512_setzero_pd();
                    bnf0 = 0 - nfin;
                    bam = _mm512_setzero_ps();
                }
            }
            if (rows) {
                if (!bstats) {
                    rsa = _mm512_add_pd(rsa, e2a);
                    rsb = _mm512_add_pd(rsb, e2b);
                }
                _mm512_storeu_pd(va + i, _mm512_add_pd(_mm512_loadu_pd(va + i), e2a));
                _mm512_storeu_pd(va + i + 8, _mm512_add_pd(_mm512_loadu_pd(va + i + 8), e2b));
                if (xf != 0xffff) {   /* non-finite inputs per position (vn counts those) */
                    __m512i c = _mm512_loadu_si512(vn + i);
                    _mm512_storeu_si512(vn + i, _mm512_mask_add_epi32(c, (__mmask16)~xf, c, one));
                }
            }
        }
    }
    /* pass 2: the histograms' bins */
    for (size_t gi = 0, sg = sg0; gi < ng; sg += sgstep) {
        const size_t gend = seg_enter(&sv, ks, g4, g8, p0, gi, ng, sg);
        for (; gi < gend; gi++) {
            const size_t i = gi * 16;
            __m512i xa = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
            __m512 fe = _mm512_loadu_ps(fes + i);
            __m512i feb = _mm512_and_si512(_mm512_castps_si512(fe), absm);
            __m512 fae = _mm512_castsi512_ps(feb);
            __m512 relf = _mm512_div_ps(fae, _mm512_max_ps(_mm512_castsi512_ps(xa), Ff));
            srl = _mm512_add_ps(srl, relf);
            mae = _mm512_max_ps(fae, mae);
            mrel = _mm512_max_ps(relf, mrel);
            __mmask16 binned = _mm512_test_epi32_mask(feb, feb);   /* e != 0 (0 for NaN/Inf x or q) */
            /* finite, non-zero inputs: the value histogram's (without it, only binned errors need fixing) */
            __mmask16 xin = noval ? 0 : _mm512_mask_test_epi32_mask(_mm512_cmplt_epu32_mask(xa, expm), xa, xa);
            if (!noval) win_store(Wv, gi, bv + i, log4f_raw(xa), 127, xin);
            win_store(Wa, gi, ba + i, log4f_raw(feb), 127, binned);
            win_store(Wr, gi, br + i, log4f_raw(_mm512_castps_si512(relf)), 127, binned);
            __m512i Et = _mm512_sub_epi32(_mm512_srli_epi32(xa, 23), sv.c127);
            if (!pow2) Et = _mm512_mask_sub_epi32(Et, _mm512_cmplt_epu32_mask(_mm512_and_si512(xa, mant23), sv.SM), Et, one);
            Et = _mm512_min_epi32(_mm512_max_epi32(Et, elo), ehi);
            __m512 v;
            if (tap) v = _mm512_mul_ps(fe, _mm512_i32gather_ps(_mm512_sub_epi32(Et, elo), P->isp32, 4));
            else {
                /* fe / S: S = 1 exactly (casts), a power of two (scaling: the same rounding), else divided */
                __m512 q_ = s1 ? fe : pow2 ? _mm512_scalef_ps(fe, sv.nSE) : _mm512_div_ps(fe, sv.S);
                v = _mm512_scalef_ps(q_, _mm512_cvtepi32_ps(_mm512_sub_epi32(cmb5, Et)));
            }
            v = _mm512_min_ps(_mm512_max_ps(v, lo64), hi64);
            win_store(Wu, gi, bu + i, _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), 0, binned);
            /* zero or subnormal input (value and ulp bins), subnormal error (abs bin): exact, after the loop */
            fixm[gi] = _mm512_mask_cmplt_epu32_mask(xin | binned, xa, fmin) | _mm512_mask_cmplt_epu32_mask(binned, feb, fmin);
        }
    }
    if (anybad) {   /* infinite errors: the sums and maxima are +inf (the lane does not matter) */
        srl = _mm512_mask_mov_ps(srl, 1, _mm512_set1_ps(INFINITY));
        mae = _mm512_mask_mov_ps(mae, 1, _mm512_set1_ps(INFINITY));
        mrel = _mm512_mask_mov_ps(mrel, 1, _mm512_set1_ps(INFINITY));
    }
    for (size_t gi = 0; gi < ng; gi++)
        for (unsigned fix = fixm[gi]; fix; fix &= fix - 1) {
            size_t i = gi * 16 + (size_t)__builtin_ctz(fix), p = p0 + i, sg = g ? p / g : 0;
            float xl = u2f(f2u(x[i]) & 0x7fffffffu);
            int32_t rv = raw_log4f(f2u(xl)), ra, rr, ru;
            if (!noval) {
                bv[i] = rv - Wv->gbase;
                Wv->om[gi] |= (uint16_t)(((uint32_t)bv[i] >= Wv->gwidth) << (i % 16));
            }
            if (ba[i] != D_SENT) {
                float fel = q[i] - x[i];
                kpar Pl = *P;
                Pl.Sf = ks->Sf[sg];
                Pl.SE = ks->SE[sg];
                Pl.SM = ks->SM[sg];
                float den = xl > P->Ff ? xl : P->Ff;
                err_bins1(&Pl, xl, fel, fabsf(fel) / den, &ra, &rr, &ru);
                ba[i] = ra - Wa->gbase;
                br[i] = rr - Wr->gbase;
                bu[i] = ru - Wu->gbase;
                Wa->om[gi] |= (uint16_t)(((uint32_t)ba[i] >= Wa->gwidth) << (i % 16));
                Wr->om[gi] |= (uint16_t)(((uint32_t)br[i] >= Wr->gwidth) << (i % 16));
                Wu->om[gi] |= (uint16_t)(((uint32_t)bu[i] >= Wu->gwidth) << (i % 16));
            }
        }
    _mm512_storeu_pd(a->sx2, sx2a); _mm512_storeu_pd(a->sx2 + 8, sx2b);
    _mm512_storeu_pd(a->se2, se2a); _mm512_storeu_pd(a->se2 + 8, se2b);
    _mm512_storeu_pd(a->se, sea); _mm512_storeu_pd(a->se + 8, seb);
    _mm512_storeu_pd(a->sxe, sxea); _mm512_storeu_pd(a->sxe + 8, sxeb);
    _mm512_storeu_pd(a->seu, seua); _mm512_storeu_pd(a->seu + 8, seub);
    _mm512_storeu_pd(a->sec, seca); _mm512_storeu_pd(a->sec + 8, secb);
    _mm512_storeu_pd(a->ser, sera); _mm512_storeu_pd(a->ser + 8, serb);
    _mm512_storeu_ps(a->srelf, srl);
    _mm512_storeu_ps(a->maxae, mae); _mm512_storeu_ps(a->maxrel, mrel);
    uint32_t c = (uint32_t)_mm512_reduce_add_epi32(cnt);
    a->nfin += nfin;
    a->nunder += c & 0xffffu;
    a->nclip += c >> 16;
    if (bstats) {
        _mm512_storeu_pd(bsm->se2, bsa); _mm512_storeu_pd(bsm->se2 + 8, bsb);
        bsm->nf = bnf0 + nfin;
        if (wantbam) bsm->amax = _mm512_reduce_max_ps(bam);
    }
    if (rows) {
        _mm512_storeu_pd(rs->se2, rsa);
        _mm512_storeu_pd(rs->se2 + 8, rsb);
    }
}

#define GROUPS_PARAMS                                                                                      \
    const kpar *P, const worker *w, const kscale *ks, size_t m, const float *x, const float *q, size_t p0,  \
        size_t ng, kl *a, bstat *bsm, int32_t *bv, int32_t *ba, int32_t *br, int32_t *bu, bstat *rs,      \
        double *va, uint32_t *vn
#define GROUPS_ARGS P, w, ks, m, x, q, p0, ng, a, bsm, bv, ba, br, bu, rs, va, vn
typedef void groups_fn(GROUPS_PARAMS);

/* The specialisations the engine uses, named by their flags (blk GV_BST, rows GV_ROWS, pow2 GV_POW2,
** noval GV_NOVAL, tap GV_TAP, g4 GV_G4, g8 GV_G8): groups_body with the flags as constants, so each
** one keeps only its own branches.  Any other flag set runs groups_any (same bits, slower). */
#define GROUPS_SPECS(X)                                                       \
    X(groups_plain, 0)                                                        \
    X(groups_blk, GV_BST)                                                     \
    X(groups_rows, GV_ROWS)                                                   \
    X(groups_blk_rows, GV_BST | GV_ROWS)                                      \
    X(groups_pow2, GV_POW2)                                                   \
    X(groups_blk_pow2, GV_BST | GV_POW2)                                      \
    X(groups_rows_pow2, GV_ROWS | GV_POW2)                                    \
    X(groups_blk_rows_pow2, GV_BST | GV_ROWS | GV_POW2)                       \
    X(groups_noval, GV_NOVAL)                                                 \
    X(groups_blk_noval, GV_BST | GV_NOVAL)                                    \
    X(groups_rows_noval, GV_ROWS | GV_NOVAL)                                  \
    X(groups_blk_rows_noval, GV_BST | GV_ROWS | GV_NOVAL)                     \
    X(groups_pow2_noval, GV_POW2 | GV_NOVAL)                                  \
    X(groups_blk_pow2_noval, GV_BST | GV_POW2 | GV_NOVAL)                     \
    X(groups_rows_pow2_noval, GV_ROWS | GV_POW2 | GV_NOVAL)                   \
    X(groups_blk_rows_pow2_noval, GV_BST | GV_ROWS | GV_POW2 | GV_NOVAL)      \
    X(groups_pow2_tap, GV_POW2 | GV_TAP)                                      \
    X(groups_rows_pow2_tap, GV_ROWS | GV_POW2 | GV_TAP)                       \
    X(groups_pow2_noval_tap, GV_POW2 | GV_NOVAL | GV_TAP)                     \
    X(groups_rows_pow2_noval_tap, GV_ROWS | GV_POW2 | GV_NOVAL | GV_TAP)      \
    X(groups_blk_g4, GV_BST | GV_G4)                                          \
    X(groups_blk_rows_g4, GV_BST | GV_ROWS | GV_G4)                           \
    X(groups_blk_noval_g4, GV_BST | GV_NOVAL | GV_G4)                         \
    X(groups_blk_rows_noval_g4, GV_BST | GV_ROWS | GV_NOVAL | GV_G4)          \
    X(groups_blk_g8, GV_BST | GV_G8)                                          \
    X(groups_blk_rows_g8, GV_BST | GV_ROWS | GV_G8)                           \
    X(groups_blk_noval_g8, GV_BST | GV_NOVAL | GV_G8)                         \
    X(groups_blk_rows_noval_g8, GV_BST | GV_ROWS | GV_NOVAL | GV_G8)          \
    X(groups_blk_pow2_g8, GV_BST | GV_POW2 | GV_G8)                           \
    X(groups_blk_rows_pow2_g8, GV_BST | GV_ROWS | GV_POW2 | GV_G8)            \
    X(groups_blk_pow2_noval_g8, GV_BST | GV_POW2 | GV_NOVAL | GV_G8)          \
    X(groups_blk_rows_pow2_noval_g8, GV_BST | GV_ROWS | GV_POW2 | GV_NOVAL | GV_G8)

#define GROUPS_DEFINE(name, flags)                                                  \
    __attribute__((target("avx512f,avx512dq,avx512vl,fma"))) static void name(GROUPS_PARAMS) \
    {                                                                               \
        groups_body(flags, GROUPS_ARGS);                                            \
    }
GROUPS_SPECS(GROUPS_DEFINE)
#undef GROUPS_DEFINE

__attribute__((target("avx512f,avx512dq,avx512vl,fma")))
static void groups_any(int V, GROUPS_PARAMS) { groups_body(V, GROUPS_ARGS); }

#define GROUPS_ENTRY(name, flags) [flags] = name,
static groups_fn *const groups_spec[GV_ALL + 1] = {GROUPS_SPECS(GROUPS_ENTRY)};
#undef GROUPS_ENTRY

void met_groups_avx512(int V, GROUPS_PARAMS)
{
    groups_fn *fn = groups_spec[V & GV_ALL];
    if (fn) fn(GROUPS_ARGS);
    else groups_any(V, GROUPS_ARGS);
}
#endif
