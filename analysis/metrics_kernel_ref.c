/*
** The per-value kernel, portable reference, and the loop over a run's chunks that also drives the
** AVX-512 kernel (metrics_kernel_avx512.c, bit-identical) and the histogram counters.
**
** Where each metric is defined (metrics.h states the definitions):
**   per value      elem() below: e = fl32(q - x), e^2, x^2, x e, the relative error (float32), |e|,
**                  underflow / clip / non-finite, e^2 by source, block and row statistics, the raw
**                  bins of the value, abs_err, rel_err and ulp_err histograms (err_bins1,
**                  raw_log4f in metrics_internal.h); the AVX-512 kernel repeats each line;
**   per run        met_kern_run below (lanes, the chunk's float32 relative-error sums);
**   per band       metrics_band.c, met_do_band's "band partial" (lanesum: the lanes' fixed order);
**   whole tensor   metrics_part.c: met_fold_band (bands in band order); metrics.c: finish_metrics (mse, SQNR,
**                  effective bits, cosine, fractions, shares, bits per element).
** A change to one metric: its line in elem(), its lines in the AVX-512 kernel, and its test in
** tests/unit/test_metrics.c (test_definitions pins each definition; the scalar and AVX-512 paths are
** compared bit for bit).
*/
#include "metrics_internal.h"

/* One value: every quantity, branch-free, into lane L (the AVX-512 loop runs exactly these
** operations: its results are identical). */
static inline __attribute__((always_inline)) void elem(const kpar *P, float xv, float qv, int L, kl *a, bstat *bs,
                                                       int32_t *bv, int32_t *ba, int32_t *br, int32_t *bu, bstat *rs,
                                                       double *va, uint32_t *vn)
{
    uint32_t xa = f2u(xv) & 0x7fffffffu, qa = f2u(qv) & 0x7fffffffu;
    int xf = xa < 0x7f800000u, qf = qa < 0x7f800000u;
    int ok = xf & qf, bad = xf & (qf ^ 1);
    double xd = ok ? (double)xv : 0.0;
    float fe = ok ? qv - xv : 0.0f, fae = fabsf(fe);   /* e = fl32(q - x), exact unless |q| and |x| differ 2x */
    double ev = fe;
    double e2 = ev * ev;
    double e2b = bad ? INFINITY : e2;
    float ax = u2f(xf ? xa : 0);
    float den = ax > P->Ff ? ax : P->Ff;
    float relf = fae / den;
    a->sx2[L] += xd * xd;
    if (!bs && !rs) a->se2[L] += e2b;   /* else summed by block, then by run (block_flush, kern_run) */
    a->se[L] += ev;
    a->sxe[L] += xd * ev;
    a->srelf[L] += bad ? INFINITY : relf;
    float aeb = bad ? INFINITY : fae, relb = bad ? INFINITY : relf;
    a->maxae[L] = aeb > a->maxae[L] ? aeb : a->maxae[L];
    a->maxrel[L] = relb > a->maxrel[L] ? relb : a->maxrel[L];
    a->nfin += (uint64_t)xf;
    a->nnonf += (uint64_t)bad;
    int und = ok & (xa != 0) & (qa == 0), clp = ok & (qa == P->qtop) & (qa < xa);
    a->nunder += (uint64_t)und;
    a->nclip += (uint64_t)clp;
    /* the finite error energy by source (e2 = 0 where q or x is NaN/Inf; + 0.0 leaves a lane's bits
    ** as the AVX-512 path's masked add does) */
    a->seu[L] += und ? e2 : 0.0;
    a->sec[L] += clp ? e2 : 0.0;
    a->ser[L] += (ok & !und & !clp) ? e2 : 0.0;
    if (bs) {
        bs->se2[L] += e2b;
        bs->nf += (uint64_t)xf;
        bs->amax = ax > bs->amax ? ax : bs->amax;
    }
    if (rs) {   /* the run's total and the element-wise sums of the other axis (e2b = 0 for NaN/Inf x);
                ** vn counts the non-finite inputs (do_band turns them into finite counts) */
        if (!bs) rs->se2[L] += e2b;
        va[0] += e2b;
        vn[0] += (uint32_t)(xf ^ 1);
    }
    if (!P->novalue) *bv = xf && xa ? raw_log4f(xa) : RAW_SENT;
    if (ok && fae != 0) err_bins1(P, ax, fe, relf, ba, br, bu);
    else *ba = *br = *bu = RAW_SENT;
}

static void set_scale(kpar *P, const kscale *ks, size_t sg)
{
    P->Sf = ks->Sf[sg];
    P->SE = ks->SE[sg];
    P->SM = ks->SM[sg];
    P->qtop = ks->Qb[sg];
}

static void block_flush(bstat *b, const kscale *ks, size_t bi, double *up)
{
    ks->bse2[bi] = lanesum(b->se2);
    for (int L = 0; L < LANES; L++) up[L] += b->se2[L];   /* into the run's (or the band's) lanes */
    ks->bnf[bi] = b->nf;
    ks->bam[bi] = b->amax;
    memset(b, 0, sizeof *b);
}

/* One run x[0..m), q[0..m): metrics, histograms, block statistics (ks) and, with rs, the run's
** total squared error and finite inputs and, per position, the squared errors (va) and non-finite
** inputs (vn) of the other axis. */
void met_kern_run(worker *w, const float *x, const float *q, size_t m, const kscale *ks, bstat *rs, double *va,
                  uint32_t *vn)
{
    const job *j = w->j;
    const prof *pf = j->pf;
    kpar P;
    P.Ff = pf->Ff;
    P.elo = pf->elo;
    P.ehi = pf->ehi;
    P.isp32 = pf->isp32;
    P.tapered = pf->tapered;
    P.mb = pf->mb;
    P.novalue = j->novalue;
    size_t g = ks->g, B = ks->B;
    int se0 = ks->se0, pow2 = ks->pow2;
    bstat blk;
    memset(&blk, 0, sizeof blk);
    int avx = MET_X86 && w->simd >= QS_SIMD_AVX512;
    int vec = avx && (g == 0 || g % 16 == 0 || g == 4 || g == 8) && (B == 0 || B % 16 == 0 || B >= m) &&
              (!pf->tapered || (pow2 && se0));
    int V = (B ? GV_BST : 0) | (rs ? GV_ROWS : 0) | (pow2 ? GV_POW2 : 0) | (P.novalue ? GV_NOVAL : 0) |
            (pf->tapered ? GV_TAP : 0) | (g == 4 ? GV_G4 : g == 8 ? GV_G8 : 0);
    size_t cur = (size_t)-1;
    kl *a = &w->acc;
    uint64_t nf0 = a->nfin;
    hwin *win[4] = {w->wv, w->wa, w->wr, w->wu};
    int32_t *bins[4] = {w->bv, w->ba, w->br, w->bu};
    hacc *hh[4] = {&w->hv, &w->ha, &w->hr, &w->hu};
    for (size_t o = 0; o < m; o += CH) {
        size_t k = m - o < CH ? m - o : CH, i = 0;
        if (avx) {
            size_t g0 = vec ? k / 16 : 0;
            for (int h = 0; h < 4; h++) met_hwin_arm(win[h], g0, (k + 15) / 16);
        }
#if MET_X86
        if (vec && k >= 16) {
            size_t ng = k / 16;
            met_groups_avx512(V, &P, w, ks, m, x + o, q + o, o, ng, a, &blk, w->bv, w->ba, w->br, w->bu, rs,
                              rs ? va + o : NULL, rs ? vn + o : NULL);
            i = ng * 16;
        }
#else
        (void)vec;
        (void)V;
#endif
        size_t i0 = i;
        for (; i < k; i++) {
            size_t p = o + i, sg = g ? p / g : 0;
            if (sg != cur) {
                set_scale(&P, ks, sg);
                cur = sg;
            }
            elem(&P, x[p], q[p], (int)(p & (LANES - 1)), a, B ? &blk : NULL, w->bv + i, w->ba + i, w->br + i, w->bu + i,
                 rs, rs ? va + p : NULL, rs ? vn + p : NULL);
            if (B && ((p + 1) % B == 0 || p + 1 == m)) block_flush(&blk, ks, p / B, rs ? rs->se2 : a->se2);
        }
        cur = (size_t)-1;
        for (int L = 0; L < LANES; L++) {   /* the chunk's float32 relative-error sums */
            a->srel[L] += (double)a->srelf[L];
            a->srelf[L] = 0;
        }
        if (avx) {
#if MET_X86
            /* the portable values' raw bins, relative to the windows like the kernel's */
            for (int h = P.novalue ? 1 : 0; h < 4; h++)
                for (size_t t = i0; t < k; t++) {
                    int32_t r = bins[h][t];
                    if (r == RAW_SENT) bins[h][t] = D_SENT;
                    else {
                        bins[h][t] = r - win[h]->gbase;
                        if ((uint32_t)bins[h][t] >= win[h]->gwidth) win[h]->om[t / 16] |= (uint16_t)(1u << (t % 16));
                    }
                }
            for (int h = P.novalue ? 1 : 0; h < 4; h++) met_hs_count(win[h], hh[h], bins[h], k, h == 3);
#endif
            continue;
        }
        for (size_t t = 0; t < k; t++) {
            if (!P.novalue && w->bv[t] != RAW_SENT) h_raw(&w->hv, w->bv[t], 1);
            if (w->ba[t] != RAW_SENT) {
                h_raw(&w->ha, w->ba[t], 1);
                h_raw(&w->hr, w->br[t], 1);
                h_raw(&w->hu, w->bu[t], 1);
            }
        }
    }
    if (rs) {
        rs->nf = a->nfin - nf0;
        for (int L = 0; L < LANES; L++) a->se2[L] += rs->se2[L];   /* the run's lanes into the band's */
    }
}
