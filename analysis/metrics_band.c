/*
** One band of the analysis (metrics_internal.h): read it, fake-quantize each run exactly as
** kernels/format_apply.c does, find the block scales, run the kernel over each run and leave the
** band's partial sums (bpart) for the driver to merge in band order.
**
** Block scales without a full encode ("proxy"): for int8/int4, MX and NVFP4 the block scale is a
** function of the block's largest magnitude alone (int: largest finite |x|; MX/NVFP4: largest
** magnitude bits, NaN and Inf included, which make a NaN block).  MX and NVFP4 get the code, the
** element scale S and the saturation level Qtop from their scale rule (qs_mx_fakeq_scales, along
** with the fake-quantization; qs_nvfp4_block_scales); int8/int4 encode one representative per block
** at block size 1 and decode the element codes "1.0" and "largest".  The tests check the codes
** against a full encode for every scale rule and variant.  HiF4 and M2XFP scales depend on every
** element: HiF4 takes q and the metadata from qs_hif4_fakeq_meta_run, M2XFP runs encode + decode
** (both bit-identical to fakeq, as tested in tests/unit/test_format_*.c).
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

/* Proxy: scale code / decoded scale / saturation level of nb blocks from their representatives
** (MX: already given by qs_mx_fakeq_scales with the band's fake-quantization). */
#if MET_X86
/* proxy_scales' loop for MX blocks, 16 at a time. */
__attribute__((target("avx512f,avx512dq")))
static size_t mx_segs_avx512(worker *w, size_t nb, int *se0)
{
    const __m512i c255 = _mm512_set1_epi32(255), c127 = _mm512_set1_epi32(127), zero = _mm512_setzero_si512();
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000), ones = _mm512_set1_epi32(-1);
    __mmask16 nz = 0;
    size_t i = 0;
    for (; i + 16 <= nb; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w->bcode + i)));
        __mmask16 nan = _mm512_cmpeq_epi32_mask(c, c255);
        __m512 S = _mm512_loadu_ps(w->pS + i);
        _mm512_storeu_pd(w->bscale + i, _mm512_cvtps_pd(_mm512_castps512_ps256(S)));
        _mm512_storeu_pd(w->bscale + i + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(S, 1)));
        _mm512_storeu_ps(w->kSf + i, _mm512_mask_mov_ps(S, nan, _mm512_set1_ps(1.0f)));
        __m512i se = _mm512_maskz_mov_epi32((__mmask16)~nan, _mm512_sub_epi32(c, c127));
        _mm512_storeu_si512(w->kSE + i, se);
        _mm512_storeu_si512(w->kSM + i, zero);
        __m512i qb = _mm512_and_si512(_mm512_loadu_si512(w->pQ + i), absm);
        __mmask16 ok = _mm512_cmplt_epu32_mask(qb, inf) & _mm512_test_epi32_mask(qb, qb);
        _mm512_storeu_si512(w->kQb + i, _mm512_mask_mov_epi32(ones, ok, qb));
        nz |= _mm512_test_epi32_mask(se, se);
    }
    if (nz) *se0 = 0;
    return i;
}
#endif

int met_proxy_scales(worker *w, size_t nb, qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.block = 1;
    o.index0 = 0;
    int mx = pf->mx, nv = f->scale_kind == QS_SK_UE4M3;
    if (mx || nv) {   /* the scale rule directly (same codes and scales as encode + decode, tested) */
        if (nv) {   /* encode's tensor scale, when none is given: the largest finite |x| */
            float ts = o.tensor_scale != 0 ? o.tensor_scale : qs_finite_absmax_n(w->reps, nb);
            if (qs_nvfp4_block_scales(f, &o, ts, w->reps, nb, w->bcode, w->pS, w->pQ, e)) return -1;
        }
        if (mx) {   /* S = 2^(code - 127): its exponent is the code's (NaN block: S = 1, nothing clips) */
            int se0 = w->se0;
            size_t i = 0;
#if MET_X86
            if (w->simd >= QS_SIMD_AVX512) i = mx_segs_avx512(w, nb, &se0);
#endif
            for (; i < nb; i++) {
                unsigned c = w->bcode[i];
                int nan = c == 0xFF;
                w->bscale[i] = w->pS[i];
                w->kSf[i] = nan ? 1.0f : w->pS[i];
                w->kSE[i] = nan ? 0 : c == 0 ? -127 : (int32_t)c - 127;
                w->kSM[i] = 0;
                w->kQb[i] = san_Q(w->pQ[i]);
                se0 &= w->kSE[i] == 0;
            }
            w->se0 = se0;
            return 0;
        }
        for (size_t i = 0; i < nb; i++) {
            w->bscale[i] = w->pS[i];
            seg_put(w, i, san_S(w->pS[i]), san_Q(w->pQ[i]));
        }
        return 0;
    }
    float ts = 0;
    if (f->encode(f, &o, w->reps, nb, w->pcodes, w->pmeta, &ts, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_one;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pS, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_top;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pQ, e)) return -1;
    for (size_t i = 0; i < nb; i++) {
        w->bscale[i] = w->pS[i];
        seg_put(w, i, san_S(w->pS[i]), san_Q(w->pQ[i]));
        if (pf->byte_scale) w->bcode[i] = w->pmeta[i * (size_t)f->meta_bytes];
    }
    return 0;
}

/* HiF4 / M2XFP: encode + decode one run, and the per-segment scales from the metadata. */
static int coded_run(worker *w, const float *x, size_t len, uint64_t index0, float *q, size_t seg0, size_t blk0,
                     qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.index0 += index0;
    if (pf->fam == FAM_HIF4) {   /* fakeq (= decode(encode), tested) with the metadata as encode's */
        qs_hif4_fakeq_meta_run(w->simd, x, len, q, w->meta, o.round == QS_RND_RNE);
    } else {
        float ts = 0;
        if (f->encode(f, &o, x, len, w->codes, w->meta, &ts, e)) return -1;
        if (f->decode(f, &o, w->codes, w->meta, ts, len, q, e)) return -1;
    }
    size_t B = w->j->p->blk, nb = (len + B - 1) / B;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *m = w->meta + b * (size_t)f->meta_bytes;
        size_t ns = (B / pf->seg);
        w->bcode[blk0 + b] = m[0];
        if (pf->fam == FAM_HIF4) {
            qs_hif4_meta hm;
            qs_hif4_meta_load(m, &hm);
            double val = qs_hif4_e6m2_value(hm.e6m2);
            w->bscale[blk0 + b] = hm.e6m2 == 0xFF ? NAN : val;
            /* the unit's three element scales (micro-group flags 0, 1, 2), then each segment's */
            size_t t = seg0 + b * ns;
            for (int d = 0; d < 3; d++) {
                float s = (float)(val * (double)(1 << d) * 0.25);
                seg_put(w, t + (size_t)d, san_S(hm.e6m2 == 0xFF ? NAN : 4.0 * (double)s), san_Q(7.0f * s));
            }
            float sf[3] = {w->kSf[t], w->kSf[t + 1], w->kSf[t + 2]};
            int32_t se[3] = {w->kSE[t], w->kSE[t + 1], w->kSE[t + 2]};
            uint32_t sm[3] = {w->kSM[t], w->kSM[t + 1], w->kSM[t + 2]}, qb[3] = {w->kQb[t], w->kQb[t + 1], w->kQb[t + 2]};
            for (size_t k = 0; k < ns; k++) {
                size_t i = k * pf->seg;
                int d = ((hm.e1_8 >> (i / 8)) & 1) + ((hm.e1_16 >> (i / 4)) & 1);
                w->kSf[t + k] = sf[d];
                w->kSE[t + k] = se[d];
                w->kSM[t + k] = sm[d];
                w->kQb[t + k] = qb[d];
            }
        } else {
            float X = m[0] == 0 ? u2f(0x00400000u) : u2f((uint32_t)m[0] << 23);
            w->bscale[blk0 + b] = m[0] == 0xFF ? NAN : (double)X;
            for (size_t k = 0; k < ns; k++) {
                unsigned fld = (m[1] >> (2 * k)) & 3u;
                float cs = pf->m2x_es ? X * (1.0f + 0.25f * (float)fld) : X;
                seg_put(w, seg0 + b * ns + k, san_S(m[0] == 0xFF ? NAN : (double)cs), san_Q(6.0f * cs));
            }
        }
    }
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
            if (pf->fam == FAM_HIF4 || pf->fam == FAM_M2X) {
                if (coded_run(w, xk, rlen, index0, qk, k * spr, k * bpr, e)) return -1;
            } else {
                qs_qopts o = pf->o;
                o.index0 += index0;
                if (pf->mx) {   /* the fake-quantizer hands out each block's scale */
                    if (qs_mx_fakeq_scales(f, &o, xk, rlen, qk, w->bcode + k * bpr, w->pS + k * bpr, w->pQ + k * bpr, e))
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
        if (pf->fam == FAM_PROXY && met_proxy_scales(w, nruns * bpr, e)) return -1;
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
