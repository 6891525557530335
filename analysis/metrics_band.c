/*
** One band of the analysis (metrics_internal.h): read it, fake-quantize each run exactly as
** kernels/format_apply.c does, find the block scales, run the kernel over each run and leave the
** band's partial sums (bpart) for the driver to merge in band order.
**
** Every format-specific answer comes from the format's row (kernels/format.h), called per run or per
** band of blocks, never per element.  Block scales without a full encode ("proxy"): when the block
** scale is a function of the block's largest magnitude alone (int8/int4: largest finite |x|; MX,
** NVFP4: largest magnitude bits, NaN and Inf included, which make a NaN block), the row's fakeq_scales
** hands out each block's code, element scale S and saturation level Q along with the
** fake-quantization (MX), or block_scales gives them from the block maxima (NVFP4, int).  The tests
** check them against a full encode for every scale rule and variant.  Formats whose scales depend on
** every element (HiF4, M2XFP) give their metadata (fakeq_meta, else encode + decode, both
** bit-identical to fakeq as tested in tests/unit/test_format_*.c) and the scales of each segment of
** values sharing one S from it (seg_scales).
*/
#include "metrics_internal.h"
#include "../kernels/simd.h"

/* Segment i of the band: scale S (sanitised) and saturation level bits. */
static inline void seg_put(worker *w, size_t i, double S, uint32_t Qb)
{
    if (S >= 0x1p-126 && S <= FLT_MAX) {   /* a normal float: its own bits */
        float Sf = (float)S;
        uint32_t b = f2u(Sf);
        w->kSf[i] = Sf;
        w->kSE[i] = (int32_t)(b >> 23) - 127;
        w->kSM[i] = b & 0x7fffffu;
        w->kQb[i] = Qb;
        w->pow2 &= w->kSM[i] == 0;
        w->se0 &= w->kSE[i] == 0;
        return;
    }
    scale_parts(S, &w->kSf[i], &w->kSE[i], &w->kSM[i]);
    w->kQb[i] = Qb;
    w->pow2 &= w->kSM[i] == 0 && S > 0;
    w->se0 &= w->kSE[i] == 0;
}

/* Largest magnitude bits of x[0..n) (NaN/Inf included) or largest finite |x|, as a float: an
** integer max, exact in any order, so the AVX-512 path gives the same bits. */
static float block_rep_c(const float *x, size_t n, int finite)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        if (finite && a >= 0x7f800000u) a = 0;
        m = a > m ? a : m;
    }
    return u2f(m);
}
#if MET_X86
__attribute__((target("avx512f")))
static float block_rep_avx512(const float *x, size_t n, int finite)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    __m512i m = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
        if (finite) a = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a, expm), a);
        m = _mm512_max_epu32(m, a);
    }
    uint32_t r = _mm512_reduce_max_epu32(m);
    float t = block_rep_c(x + i, n - i, finite);
    uint32_t tb = f2u(t);
    return u2f(tb > r ? tb : r);
}
#endif
float met_block_rep(const worker *w, const float *x, size_t n, int finite)
{
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) return block_rep_avx512(x, n, finite);
#endif
    (void)w;
    return block_rep_c(x, n, finite);
}

/* The representatives of a run's blocks of bl values (the last one may be shorter). */
#if MET_X86
__attribute__((target("avx512f")))
static size_t block_reps_avx512(const float *x, size_t n, size_t bl, int finite, float *out)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    size_t b = 0;
    if (bl % 16) return 0;
    for (; (b + 1) * bl <= n; b++) {
        const float *xb = x + b * bl;
        __m512i m = _mm512_setzero_si512();
        for (size_t i = 0; i < bl; i += 16) {
            __m512i a = _mm512_and_si512(_mm512_loadu_si512(xb + i), absm);
            if (finite) a = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a, expm), a);
            m = _mm512_max_epu32(m, a);
        }
        out[b] = u2f(_mm512_reduce_max_epu32(m));
    }
    return b;
}
#endif
static void block_reps(const worker *w, const float *x, size_t n, size_t bl, int finite, float *out)
{
    size_t b = 0;
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) b = block_reps_avx512(x, n, bl, finite, out);
#endif
    for (; b * bl < n; b++) out[b] = met_block_rep(w, x + b * bl, n - b * bl < bl ? n - b * bl : bl, finite);
}

/* Segments i0 .. i0 + n - 1 of the band: seg_put of each (san_S(S), san_Q(Q)), and the block scales
** bscale (NULL: none) = S as a double. */
#if MET_X86
/* The same, 16 at a time, for groups whose S are all positive normal floats (their own bits) or ones
** san_S makes 1 (NaN, Inf, negative non-zero); a group holding a zero or subnormal S is left to seg_put.
** Returns how many were done. */
__attribute__((target("avx512f,avx512dq")))
static size_t scales_put_avx512(worker *w, size_t i0, const float *S, const float *Q, size_t n, double *bscale)
{
    const __m512i lo = _mm512_set1_epi32(0x00800000), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i negz = _mm512_set1_epi32((int)0x80000000u), absm = _mm512_set1_epi32(0x7fffffff);
    const __m512i c127 = _mm512_set1_epi32(127), mant = _mm512_set1_epi32(0x7fffff), ones = _mm512_set1_epi32(-1);
    __mmask16 nzm = 0, nze = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_loadu_si512(S + i);
        __mmask16 other = _mm512_cmplt_epu32_mask(b, lo) | _mm512_cmpeq_epi32_mask(b, negz);
        if (other) break;
        __mmask16 nrm = _mm512_cmpge_epu32_mask(b, lo) & _mm512_cmplt_epu32_mask(b, inf);
        __m512 Sv = _mm512_castsi512_ps(b);
        if (bscale) {
            _mm512_storeu_pd(bscale + i, _mm512_cvtps_pd(_mm512_castps512_ps256(Sv)));
            _mm512_storeu_pd(bscale + i + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(Sv, 1)));
        }
        _mm512_storeu_ps(w->kSf + i0 + i, _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), nrm, Sv));
        __m512i se = _mm512_maskz_mov_epi32(nrm, _mm512_sub_epi32(_mm512_srli_epi32(b, 23), c127));
        __m512i sm = _mm512_maskz_mov_epi32(nrm, _mm512_and_si512(b, mant));
        _mm512_storeu_si512(w->kSE + i0 + i, se);
        _mm512_storeu_si512(w->kSM + i0 + i, sm);
        __m512i qb = _mm512_and_si512(_mm512_loadu_si512(Q + i), absm);
        __mmask16 ok = _mm512_cmplt_epu32_mask(qb, inf) & _mm512_test_epi32_mask(qb, qb);
        _mm512_storeu_si512(w->kQb + i0 + i, _mm512_mask_mov_epi32(ones, ok, qb));
        nzm |= _mm512_test_epi32_mask(sm, sm);
        nze |= _mm512_test_epi32_mask(se, se);
    }
    if (nzm) w->pow2 = 0;
    if (nze) w->se0 = 0;
    return i;
}
#endif
static void scales_put(worker *w, size_t i0, const float *S, const float *Q, size_t n, double *bscale)
{
    size_t i = 0;
    while (i < n) {
#if MET_X86
        if (w->simd >= QS_SIMD_AVX512) i += scales_put_avx512(w, i0 + i, S + i, Q + i, n - i, bscale ? bscale + i : NULL);
#endif
        size_t end = i + 16 < n ? i + 16 : n;   /* one group (or the tail) by seg_put */
        for (; i < end; i++) {
            if (bscale) bscale[i] = S[i];
            seg_put(w, i0 + i, san_S(S[i]), san_Q(Q[i]));
        }
    }
}

/* Proxy: code, S and Q of nb blocks from their representatives w->reps, by the row's block_scales (the
** scale rule directly: the same codes and scales as encode + decode, tested). */
static int block_scales(worker *w, size_t nb, qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.block = 1;
    o.index0 = 0;
    if (!f->block_scales) return qs_fail(e, "format %s: its row gives no block scales from block maxima", f->name);
    /* encode's tensor scale, when none is given: the largest finite |x| */
    float ts = f->has_tensor_scale && o.tensor_scale == 0 ? qs_finite_absmax_n(w->reps, nb) : o.tensor_scale;
    return f->block_scales(f, &o, ts, w->reps, nb, w->bcode, w->pS, w->pQ, e);
}

/* The same, then the segments (one per block) of the band from them. */
int met_block_scales(worker *w, size_t nb, qs_err *e)
{
    if (block_scales(w, nb, e)) return -1;
    scales_put(w, 0, w->pS, w->pQ, nb, w->bscale);
    return 0;
}

/* Coded formats: the fake-quantization of one run with its metadata, and the per-segment scales from it. */
static int coded_run(worker *w, const float *x, size_t len, uint64_t index0, float *q, size_t seg0, size_t blk0,
                     qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.index0 += index0;
    if (f->fakeq_meta) {   /* fakeq (= decode(encode), tested) with the metadata as encode's */
        if (f->fakeq_meta(f, &o, x, len, q, w->meta, e)) return -1;
    } else {
        float ts = 0;
        if (f->encode(f, &o, x, len, w->codes, w->meta, &ts, e)) return -1;
        if (f->decode(f, &o, w->codes, w->meta, ts, len, q, e)) return -1;
    }
    size_t B = w->j->p->blk, nb = (len + B - 1) / B;
    f->seg_scales(f, &o, w->meta, nb, w->sS, w->sQ);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *m = w->meta + b * (size_t)f->meta_bytes;
        w->bcode[blk0 + b] = m[0];
        w->bscale[blk0 + b] = pf->byte_scale ? f->scale_value(m[0]) : NAN;
    }
    scales_put(w, seg0, w->sS, w->sQ, nb * (B / pf->seg), NULL);
    return 0;
}

static void transpose(const float *restrict a, size_t nr, size_t nc, float *restrict t)
{
    for (size_t i = 0; i < nr; i++)
        for (size_t c = 0; c < nc; c++) t[c * nr + i] = a[i * nc + c];
}

/* Run k of a band with blocks: one kernel call, then the statistics of each block. */
/* A block's slot in the block_err counts: zero, non-finite (no finite input, NaN/Inf), or its bin. */
static inline uint32_t rmse_slot(double rmse)
{
    if (rmse == 0) return HV_N + S_ZERO;
    if (!(rmse <= DBL_MAX)) return HV_N + S_NONF;
    int i = log4bin(rmse) - 4 * HV_LO;
    return (uint32_t)(i < 0 ? HV_N + S_UNDER : i >= HV_N ? HV_N + S_OVER : i);
}

#if MET_X86
/* sqrt(se2 / nf) of n blocks (NaN without finite input: 0 / 0), into se2, and their slots, 8 at a
** time: IEEE division and square root, the portable loop's bits; log4bin from the bits. */
__attribute__((target("avx512f,avx512dq")))
static size_t block_rmse_avx512(double *se2, const uint64_t *nf, size_t n, uint32_t *slot)
{
    const __m512i mant = _mm512_set1_epi64(0xfffffffffffffll), t1 = _mm512_set1_epi64((long long)T1);
    const __m512i t2 = _mm512_set1_epi64((long long)T2), t3 = _mm512_set1_epi64((long long)T3);
    const __m512i one = _mm512_set1_epi64(1), off = _mm512_set1_epi64(-4 * 1023 - 4 * HV_LO);
    const __m512i nb = _mm512_set1_epi64(HV_N), e7ff = _mm512_set1_epi64(0x7ff);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i c = _mm512_loadu_si512(nf + i);
        __m512d r = _mm512_sqrt_pd(_mm512_div_pd(_mm512_loadu_pd(se2 + i), _mm512_cvtepu64_pd(c)));
        __mmask8 none = _mm512_cmpeq_epi64_mask(c, _mm512_setzero_si512());
        r = _mm512_mask_mov_pd(r, none, _mm512_set1_pd(NAN));
        _mm512_storeu_pd(se2 + i, r);
        __m512i b = _mm512_castpd_si512(r), m = _mm512_and_si512(b, mant);
        __m512i ex = _mm512_and_si512(_mm512_srli_epi64(b, 52), e7ff);
        __m512i k = _mm512_add_epi64(_mm512_slli_epi64(ex, 2), off);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t1), k, one);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t2), k, one);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t3), k, one);
        k = _mm512_mask_mov_epi64(k, _mm512_cmplt_epi64_mask(k, _mm512_setzero_si512()), _mm512_set1_epi64(HV_N + S_UNDER));
        k = _mm512_mask_mov_epi64(k, _mm512_cmpge_epi64_mask(k, nb), _mm512_set1_epi64(HV_N + S_OVER));
        /* zero (a normal double's log4bin is exact; 0 and subnormals cannot be an RMSE of floats
        ** except 0 itself) and non-finite */
        k = _mm512_mask_mov_epi64(k, _mm512_cmpeq_epi64_mask(b, _mm512_setzero_si512()), _mm512_set1_epi64(HV_N + S_ZERO));
        k = _mm512_mask_mov_epi64(k, _mm512_cmpeq_epi64_mask(ex, e7ff), _mm512_set1_epi64(HV_N + S_NONF));
        _mm256_storeu_si256((__m256i *)(slot + i), _mm512_cvtepi64_epi32(k));
    }
    return i;
}
#endif

#if MET_X86
__attribute__((target("avx512f")))
static size_t rsub_u32_avx512(uint32_t *d, uint32_t a, size_t n)   /* d[i] = a - d[i] */
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(d + i, _mm512_sub_epi32(_mm512_set1_epi32((int)a), _mm512_loadu_si512(d + i)));
    return i;
}
#endif

/* Count n slots (u32 or u8) into 4 interleaved tables of nb counters: neighbouring blocks often
** share a slot, and one table would chain every increment on the previous store. */
static void count4(uint32_t *c, size_t nb, const uint32_t *s32, const uint8_t *s8, size_t n)
{
    size_t i = 0;
#define SL(t) (s32 ? s32[t] : s8[t])
    for (; i + 4 <= n; i += 4) {
        c[SL(i)]++;
        c[nb + SL(i + 1)]++;
        c[2 * nb + SL(i + 2)]++;
        c[3 * nb + SL(i + 3)]++;
    }
    for (; i < n; i++) c[SL(i)]++;
#undef SL
}

/* Fold the 4 tables into the histogram's counts (once per band: the tables cannot overflow). */
static void fold4(uint64_t *h, uint32_t *c, size_t nb)
{
    for (size_t i = 0; i < nb; i++) {
        h[i] += (uint64_t)c[i] + c[nb + i] + c[2 * nb + i] + c[3 * nb + i];
        c[i] = c[nb + i] = c[2 * nb + i] = c[3 * nb + i] = 0;
    }
}

static void band_blocks(worker *w, uint64_t b, size_t k, const float *xk, const float *qk, size_t rlen, size_t bpr,
                        size_t spr, bstat *rs, double *va, uint32_t *vn)
{
    job *j = w->j;
    const plan *p = j->p;
    const prof *pf = j->pf;
    size_t blk = p->blk, bl = blk ? blk : rlen;
    kscale ks;
    ks.B = bl;
    ks.bse2 = w->bse2;
    ks.bnf = w->bnf;
    ks.bam = w->bam;
    size_t s0 = pf->fam == FAM_PROXY ? k * bpr : k * spr;
    ks.g = pf->fam == FAM_PROXY ? bl : pf->seg;
    ks.Sf = w->kSf + s0;
    ks.SE = w->kSE + s0;
    ks.SM = w->kSM + s0;
    ks.Qb = w->kQb + s0;
    ks.pow2 = w->pow2;
    ks.se0 = w->se0;
    met_kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
    uint64_t gb = j->bk_absmax ? met_band_block0(p, j->b0, b) + k * bpr : 0;   /* in the job's block arrays */
    /* each block's RMSE (in place of its squared-error sum) and its block_err slot */
    size_t i = 0;
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) i = block_rmse_avx512(w->bse2, w->bnf, bpr, w->bslot);
#endif
    for (; i < bpr; i++) {
        double rmse = w->bnf[i] ? sqrt(w->bse2[i] / (double)w->bnf[i]) : NAN;
        w->bse2[i] = rmse;
        w->bslot[i] = rmse_slot(rmse);
    }
    const uint8_t *bcode = w->bcode + k * bpr;
    count4(w->hb4, (size_t)w->hb.n + NSLOT, w->bslot, NULL, bpr);
    if (pf->byte_scale) count4(w->hs4, 256, NULL, bcode, bpr);
    if (j->bk_absmax)
        for (i = 0; i < bpr; i++) {
            double bsc = w->bscale[k * bpr + i];
            float bam = w->bam[i];
            uint64_t g2 = gb + i;
            j->bk_absmax[g2] = bam;
            j->bk_rmse[g2] = (float)w->bse2[i];
            j->bk_ratio[g2] = bsc > 0 && bsc <= DBL_MAX ? (float)((double)bam / bsc) : NAN;
            if (j->bk_code) j->bk_code[g2] = bcode[i];
        }
}

/* Scaled casts: the index of run k's first scale (a band starts at row r0, column c0) and the stride
** of the scales along the run (1 when the scale changes along it: per row on column runs, per column
** on row runs). */
static size_t cs_index(const job *j, uint64_t r0, uint64_t c0, size_t k)
{
    const plan *p = j->p;
    uint64_t r = p->colruns ? r0 : r0 + k, c = p->colruns ? c0 + k : c0;
    return j->cscale == QS_CSCALE_ROW ? (size_t)r : j->cscale == QS_CSCALE_COL ? (size_t)c : 0;
}
static size_t cs_stride(const job *j, int colruns)
{
    return (j->cscale == QS_CSCALE_ROW && colruns) || (j->cscale == QS_CSCALE_COL && !colruns);
}

int met_do_band(worker *w, uint64_t b, bpart *sl, qs_err *e)
{
    job *j = w->j;
    const plan *p = j->p;
    const prof *pf = j->pf;
    const qs_format *f = pf->f;
    uint64_t r0, c0;
    size_t nr, nc;
    met_band_geom(p, b, &r0, &nr, &c0, &nc);
    uint64_t start = r0 * p->cols + c0;
    size_t len = nr * nc;
    w->pow2 = w->se0 = 1;   /* seg_put clears them */
    int mem = p->mode == PM_MEM_T || p->mode == PM_MEM_C;
    const float *x;
    {
        if (j->serial) pthread_mutex_lock(&j->read_mu);
        int rc = j->rd(j->rctx, start, len, w->x, e);
        if (j->serial) pthread_mutex_unlock(&j->read_mu);
        if (rc) {
            if (!e->msg[0]) qs_fail(e, "read failed at element %llu", (unsigned long long)start);
            return -1;
        }
        x = w->x;
    }
    /* runs */
    size_t nruns = p->colruns ? nc : nr, rlen = p->colruns ? nr : nc;
    const float *xr = x;
    float *qr = w->q;
    if (p->colruns) {
        transpose(x, nr, nc, w->xt);
        xr = w->xt;
    }
    /* blocks of each run */
    size_t blk = p->blk, bpr = 1, spr = 1;
    if (p->blockstats) {
        bpr = blk ? (rlen + blk - 1) / blk : 1;
        spr = pf->seg ? bpr * (blk / pf->seg) : bpr;
    }
    if (mem) {
        /* a piece of the tensor's (or a column's) one run, under the run's amax and at its place in it */
        for (size_t k = 0; k < nruns; k++) {
            qs_qopts o = pf->o;
            o.index0 += p->colruns ? (c0 + k) * p->rows + r0 : (r0 + k) * p->cols + c0;
            o.tensor_scale = p->mode == PM_MEM_C ? j->colam[c0 + k] : j->memam;
            if (f->fakeq(f, &o, xr + k * rlen, rlen, qr + k * rlen, e)) return -1;
        }
    } else {
        for (size_t k = 0; k < nruns; k++) {
            uint64_t index0 = p->colruns ? (c0 + k) * p->rows + r0 : (r0 + k) * p->cols + c0;
            const float *xk = xr + k * rlen;
            float *qk = qr + k * rlen;
            if (pf->fam == FAM_CODED) {
                if (coded_run(w, xk, rlen, index0, qk, k * spr, k * bpr, e)) return -1;
            } else {
                qs_qopts o = pf->o;
                o.index0 += index0;
                if (pf->fam == FAM_PROXY && f->fakeq_scales) {   /* the fake-quantizer hands out each block's scale */
                    if (f->fakeq_scales(f, &o, xk, rlen, qk, w->bcode + k * bpr, w->pS + k * bpr, w->pQ + k * bpr, e))
                        return -1;
                } else if (j->cscale) {   /* format_apply's scaled cast: the same (s, inv) by position */
                    size_t k0 = cs_index(j, r0, c0, k), st = cs_stride(j, p->colruns);
                    if (qs_cast_scaled_apply(f, &o, xk, rlen, j->cs + k0, j->ci + k0, st, qk, e)) return -1;
                } else {
                    if (f->fakeq(f, &o, xk, rlen, qk, e)) return -1;
                    if (pf->fam == FAM_PROXY) block_reps(w, xk, rlen, blk ? blk : rlen, pf->finite_rep, w->reps + k * bpr);
                }
            }
        }
        if (pf->fam == FAM_PROXY) {
            if (!f->fakeq_scales && block_scales(w, nruns * bpr, e)) return -1;
            scales_put(w, 0, w->pS, w->pQ, nruns * bpr, w->bscale);
        }
    }
    /* kernels.  Rows and columns (2-D): each run's total in lanes by position (rs), and the
    ** element-wise sums of the other axis (va/vn), both in the band partial. */
    int acc2 = p->colacc;
    if (acc2) {
        memset(sl->row_se2, 0, nr * sizeof *sl->row_se2);
        memset(sl->row_nf, 0, nr * sizeof *sl->row_nf);
        memset(sl->col_se2, 0, nc * sizeof *sl->col_se2);
        memset(sl->col_nf, 0, nc * sizeof *sl->col_nf);
    }
    double *ra = p->colruns ? sl->col_se2 : sl->row_se2, *va = p->colruns ? sl->row_se2 : sl->col_se2;
    uint32_t *rn = p->colruns ? sl->col_nf : sl->row_nf, *vn = p->colruns ? sl->row_nf : sl->col_nf;
    bstat rsb, *rs = acc2 ? &rsb : NULL;
    for (size_t k = 0; k < nruns; k++) {
        const float *xk = xr + k * rlen, *qk = qr + k * rlen;
        if (rs) memset(rs, 0, sizeof *rs);
        if (j->cscale) {   /* scaled casts: the ulp scale S = inv, per run or per element */
            size_t k0 = cs_index(j, r0, c0, k);
            kscale ks = {cs_stride(j, p->colruns), j->cSf + k0, j->cSE + k0, j->cSM + k0, j->cQb + k0, j->cpow2, j->cse0, 0,
                         NULL, NULL, NULL};
            met_kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
        } else if (mem || !p->blockstats) {   /* one scale for the run: in-memory modes, element casts */
            double S = 1.0;
            float Q = pf->cast_top;
            if (mem) {
                S = p->mode == PM_MEM_C ? j->colS[c0 + k] : j->memS;
                Q = p->mode == PM_MEM_C ? j->colQ[c0 + k] : j->memQ;
            }
            double Ss = san_S(S);
            float Sf;
            int32_t SE;
            uint32_t SM, Qb = san_Q(Q);
            scale_parts(Ss, &Sf, &SE, &SM);
            kscale ks = {0, &Sf, &SE, &SM, &Qb, SM == 0 && Ss > 0, SE == 0, 0, NULL, NULL, NULL};
            met_kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
        } else
            band_blocks(w, b, k, xk, qk, rlen, bpr, spr, rs, va, vn);
        if (rs) {
            ra[k] = lanesum(rs->se2);
            rn[k] = (uint32_t)rs->nf;
        }
    }
    if (p->blockstats) {
        fold4(w->hb.c, w->hb4, (size_t)w->hb.n + NSLOT);
        if (pf->byte_scale) fold4(w->hs.c, w->hs4, 256);
    }
    if (acc2) {   /* the kernels counted non-finite inputs per position of the other axis */
        size_t i = 0;
#if MET_X86
        if (w->simd >= QS_SIMD_AVX512) i = rsub_u32_avx512(vn, (uint32_t)nruns, rlen);
#endif
        for (; i < rlen; i++) vn[i] = (uint32_t)nruns - vn[i];
    }

    /* band partial */
    const kl *A = &w->acc;
    sl->sx2 = lanesum(A->sx2);
    sl->se2 = lanesum(A->se2);
    sl->se = lanesum(A->se);
    sl->sxe = lanesum(A->sxe);
    sl->srel = lanesum(A->srel);
    sl->seu = lanesum(A->seu);
    sl->sec = lanesum(A->sec);
    sl->ser = lanesum(A->ser);
    sl->maxae = lanemaxf(A->maxae);
    sl->maxrel = lanemaxf(A->maxrel);
    sl->nfin = A->nfin;
    sl->nunder = A->nunder;
    sl->nclip = A->nclip;
    sl->nnonf = A->nnonf;
    sl->nelem = len;
    sl->r0 = r0;
    sl->c0 = c0;
    sl->nr = nr;
    sl->nc = nc;
    memset(&w->acc, 0, sizeof w->acc);
    return 0;
}
