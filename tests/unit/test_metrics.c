/*
** Tests of the analysis engine (analysis/metrics*.c), the definitions: hand-computed values, an
** independent double-precision reference on random tensors (full encode for the block scales,
** brute-force grid neighbours for the ulps), non-finite input, invariants.  The engine's mechanics
** (threads, layouts, reads, cancellation, scaled casts) are in test_metrics_engine.c.
*/
#include "test_util.h"

#include "metrics_test_util.h"

/* ---- hand-computed ---------------------------------------------------------------------------- */

static void test_fp4_by_hand(void **st)
{
    (void)st;
    const float x[10] = {0.125f, 0.375f, 0.625f, 1.125f, 2.75f, 5.0f, 7.0f, -10.0f, 0.0f, -0.1875f};
    qs_apply a = mk_apply("fp4_e2m1");
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 1, 10, x, 1, 0, &an, &e), 0);
    const qs_metrics *m = &an.m;
    assert_int_equal(m->n, 10);
    assert_int_equal(m->n_finite, 10);
    /* q = 0 .5 .5 1 3 4 6 -6 0 -0 */
    double se2 = 0.015625 * 4 + 0.0625 + 1 + 1 + 16 + 0.03515625, sx2 = 183.41015625;
    assert_true(m->sum_e2 == se2);
    assert_true(m->sum_x2 == sx2);
    assert_true(m->mse == se2 / 10);
    assert_close(m->rmse, sqrt(se2 / 10), 1e-15);
    assert_close(m->sqnr_db, 10 * log10(sx2 / se2), 1e-14);
    assert_close(m->eff_bits_energy, -0.5 * log2(se2 / sx2), 1e-14);
    assert_close(m->eff_bits_sqnr, (10 * log10(sx2 / se2) - 1.76) / 6.02, 1e-14);
    assert_true(m->max_abs_err == 4.0);
    assert_true(m->max_rel_err == 1.0);                 /* 0.125 -> 0 and -0.1875 -> -0 */
    /* relative errors in float32 (metrics.h); each lane holds one of them */
    double rel = 1 + (double)(0.125f / 0.375f) + (double)(0.125f / 0.625f) + (double)(0.125f / 1.125f) +
                 (double)(0.25f / 2.75f) + (double)(1.0f / 5.0f) + (double)(1.0f / 7.0f) + (double)(4.0f / 10.0f) + 0 + 1;
    assert_close(m->mean_rel_err, rel / 10, 1e-15);
    assert_true(m->mean_err == 0.21875);
    assert_close(m->cosine, 131.875 / sqrt(sx2 * 98.5), 1e-14);
    assert_true(m->underflow_frac == 0.2);              /* 0.125, -0.1875 (0 itself is no underflow) */
    assert_true(m->clip_frac == 0.2);                   /* 7 -> 6, -10 -> -6; 5 -> 4 is rounding */
    assert_true(m->nonfinite_frac == 0);
    /* error energy by source: underflows 0.125^2 + 0.1875^2, clips 1 + 16, the rest rounding */
    assert_true(m->sum_e2_under == 0.05078125);
    assert_true(m->sum_e2_clip == 17);
    assert_true(m->sum_e2_round == 0.015625 * 3 + 0.0625 + 1);
    assert_true(m->err_clip == 17 / se2 && m->err_under == 0.05078125 / se2 && m->err_round == 1.109375 / se2);
    assert_true(m->bits_per_elem == 4);
    assert_true(m->rel_floor == QS_REL_FLOOR_DEFAULT);
    /* ulps (spacing 0.5 below 2, 1 in [2,4), 2 from 4): -1/4 x3, +1/4 x2, -1/2 x2, 3/8, 2 (over), zero */
    const qs_hist *u = &an.ulp_err;
    assert_int_equal(u->kind, 1);
    assert_int_equal(u->nbins, 64);
    assert_int_equal(u->counts[24], 3);
    assert_int_equal(u->counts[40], 2);
    assert_int_equal(u->counts[16], 2);
    assert_int_equal(u->counts[44], 1);
    assert_int_equal(u->over, 1);
    assert_int_equal(u->zero, 1);
    assert_int_equal(hist_total(u), 10);
    /* values: log2 0.125 = -3 -> bin 4*(-3+160); 7 -> log2 7 = 2.807 -> 4*2 + 3 */
    assert_int_equal(an.value.counts[4 * (-3 + 160)], 1);
    assert_int_equal(an.value.counts[4 * (2 + 160) + 3], 1);
    assert_int_equal(an.value.zero, 1);
    assert_int_equal(hist_total(&an.value), 10);
    assert_int_equal(an.abs_err.zero, 1);
    assert_int_equal(an.abs_err.counts[4 * (2 + 160)], 1);   /* |e| = 4 */
    assert_int_equal(an.abs_err.counts[4 * (0 + 160)], 2);   /* |e| = 1 */
    /* element casts have no blocks */
    assert_int_equal(an.nblocks, 0);
    assert_int_equal(an.block_err.nbins, 0);
    assert_int_equal(an.scale_code.nbins, 0);
    assert_null(an.row_rmse);
    qs_analysis_free(&an);
}

/* mxfp4, one block of 8 by hand: amax 12 -> X = 2^(3-2) = 2 (code 128); elements x/2 on E2M1. */
static void test_mxfp4_by_hand(void **st)
{
    (void)st;
    const float x[8] = {12.0f, 13.0f, -11.5f, 0.25f, 0.5f, 3.0f, -5.0f, 0.0f};
    qs_apply a = mk_apply("mxfp4");
    a.o.block = 8;
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 1, 8, x, 1, 1, &an, &e), 0);
    /* amax 13 -> floor(log2 13) = 3 -> X = 2: x/X = 6 6.5 -5.75 .125 .25 1.5 -2.5 0
    ** -> 6 6 -6 0 0(.25 tie -> 0) 1.5 -2 0 -> q = 12 12 -12 0 0 3 -4 0 */
    double se2 = 0 + 1 + 0.25 + 0.0625 + 0.25 + 0 + 1 + 0;   /* 2.5625 */
    assert_true(an.m.sum_e2 == se2);
    assert_true(an.m.clip_frac == 1.0 / 8);     /* 13 -> 12; -11.5 -> -12 is not (|q| > |x|), 12 is exact */
    assert_true(an.m.underflow_frac == 2.0 / 8);
    assert_int_equal(an.nblocks, 1);
    assert_int_equal(an.block_scale_code[0], 128);
    assert_true(an.block_absmax[0] == 13.0f);
    assert_true(an.block_ratio[0] == 6.5f);
    assert_true(an.block_rmse[0] == (float)sqrt(se2 / 8));
    assert_int_equal(an.scale_code.counts[128], 1);
    assert_int_equal(hist_total(&an.scale_code), 1);
    assert_int_equal(hist_total(&an.block_err), 1);
    assert_true(an.m.bits_per_elem == 4 + 8.0 / 8);
    /* ulps at X = 2 (E2M1 spacing 0.5 for |x|/X < 2, 1 in [2,4), 2 from 4, times X):
    ** 12 exact; 13 -> 12: -1/4; -11.5 -> -12: -1/8; 0.25 -> 0: -1/4; 0.5 -> 0 (tie to even): -1/2;
    ** 3 exact; -5 -> -4 (2.5 ties to 2): +1/2; 0 exact */
    const qs_hist *u = &an.ulp_err;
    assert_int_equal(u->zero, 3);
    assert_int_equal(u->counts[24], 2);
    assert_int_equal(u->counts[28], 1);
    assert_int_equal(u->counts[16], 1);
    assert_int_equal(u->counts[48], 1);
    assert_int_equal(hist_total(u), 8);
    qs_analysis_free(&an);
}

/* ---- the independent reference ------------------------------------------------------------------ */

typedef struct rhist {
    uint64_t c[1160];
    uint64_t zero, under, over, nonfinite;
} rhist;

typedef struct ref {
    double sx2, se2, se, sxq, sq2, srel, maxae, maxrel;
    double seu, sec, ser;    /* finite e^2 of underflows, clips, the rest */
    uint64_t nfin, nunder, nclip, nnonf;
    rhist hv, ha, hr, hu, hb, hs;
    uint64_t nblocks;
    float *bam, *bratio, *brmse;
    uint8_t *bcode;
    double *row_se2, *col_se2;
    uint64_t *row_nf, *col_nf;
} ref;

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Non-negative finite element values, sorted, unique. */
static int elem_grid(const qs_format *f, float *g)
{
    int n = 0;
    if (f->family == QS_FAM_INT) {
        int q = (1 << (f->elem_bits - 1)) - 1;
        for (int i = 0; i <= q; i++) g[n++] = (float)i;
        return n;
    }
    if (!strcmp(f->name, "hif4")) {
        for (int i = 0; i < 8; i++) g[n++] = (float)i * 0.25f;
        return n;
    }
    for (unsigned c = 0; c < f->ncodes; c++) {
        float v = f->code_value(c);
        if (v >= 0 && v <= FLT_MAX) g[n++] = v;
    }
    qsort(g, (size_t)n, sizeof *g, cmp_f);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || g[i] != g[m - 1]) g[m++] = g[i];
    return m;
}

/* Distance between the two grid values around t (the last step at and above the largest). */
static double grid_step(const float *g, int n, double t)
{
    if (t >= g[n - 1]) return (double)g[n - 1] - g[n - 2];
    int lo = 0;
    while (lo + 1 < n && g[lo + 1] <= t) lo++;
    return (double)g[lo + 1] - g[lo];
}

static int code_is_top(const qs_format *f, uint32_t c)
{
    if (f->family == QS_FAM_INT) {
        int q = (1 << (f->elem_bits - 1)) - 1;
        uint32_t mask = (1u << f->elem_bits) - 1;
        return c == (uint32_t)q || c == ((uint32_t)-q & mask);
    }
    if (!strcmp(f->name, "mxint8")) return c == 127 || c == 0x81;
    if (!strcmp(f->name, "hif4") || f->family == QS_FAM_NVFP4) return (c & 7) == 7;
    /* MX FP elements: the magnitude code of the largest value */
    uint32_t sign = 1u << (f->elem_bits - 1), top = 0;
    float tv = 0;
    for (unsigned k = 0; k < f->ncodes; k++) {
        float v = f->code_value(k);
        if (v > tv && v <= FLT_MAX) { tv = v; top = k; }
    }
    return (c & (sign - 1)) == top;
}

/* Reference analysis: format_apply for q, a full encode per run for the block scales. */
static void ref_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, const float *x, ref *R)
{
    const qs_format *f = a->f;
    uint64_t n = rows * cols;
    memset(R, 0, sizeof *R);
    float *y = malloc(n * sizeof(float));
    src s = {x, n, UINT64_MAX, 0};
    outbuf ob = {y};
    qs_err e = {{0}};
    assert_int_equal(qs_format_apply(a, rows, cols, rd_mem, &s, wr_mem, &ob, &e), 0);
    float amax = 0;
    for (uint64_t i = 0; i < n; i++)
        if (fabsf(x[i]) <= FLT_MAX && fabsf(x[i]) > amax) amax = fabsf(x[i]);
    double F = 1e-6 * (double)amax;
    float Ff = (float)F > 0 ? (float)F : 0x1p-149f;   /* the floor in float32 (metrics.h) */
    int cast = f->block == 1;
    float g[256];
    int ng = cast && !f->code_value ? 0 : elem_grid(f, g);
    /* runs */
    int colr = a->gran == QS_GRAN_COL || (a->gran == QS_GRAN_BLOCK && a->axis == 0);
    int whole = a->gran == QS_GRAN_TENSOR;
    uint64_t nruns = whole ? 1 : colr ? cols : rows, L = whole ? n : colr ? rows : cols;
    qs_qopts o = a->o;
    if (a->gran != QS_GRAN_BLOCK) o.block = 0;
    if (f->family == QS_FAM_NVFP4 && !(o.tensor_scale > 0)) o.tensor_scale = amax;
    size_t B = qs_format_block(f, &o);
    if (B == 0) B = L;
    uint64_t bpr = cast ? 0 : (L + B - 1) / B;
    R->nblocks = nruns * bpr;
    R->bam = calloc(R->nblocks + 1, sizeof(float));
    R->bratio = calloc(R->nblocks + 1, sizeof(float));
    R->brmse = calloc(R->nblocks + 1, sizeof(float));
    R->bcode = calloc(R->nblocks + 1, 1);
    R->row_se2 = calloc(rows, sizeof(double));
    R->col_se2 = calloc(cols, sizeof(double));
    R->row_nf = calloc(rows, sizeof(uint64_t));
    R->col_nf = calloc(cols, sizeof(uint64_t));
    float *xr = malloc(L * sizeof(float)), *yr = malloc(L * sizeof(float)), *S = malloc(L * sizeof(float));
    uint32_t *codes = malloc(L * sizeof(uint32_t)), *ones = malloc(L * sizeof(uint32_t));
    uint8_t *meta = malloc((L / B + 2) * 8);
    for (uint64_t r = 0; r < nruns; r++) {
        uint64_t *idx = malloc(L * sizeof(uint64_t));
        for (uint64_t i = 0; i < L; i++) {
            idx[i] = whole ? i : colr ? i * cols + r : r * cols + i;
            xr[i] = x[idx[i]];
            yr[i] = y[idx[i]];
        }
        float ts = 0;
        if (!cast) {
            qs_qopts oo = o;
            oo.index0 = whole ? 0 : colr ? r * rows : r * cols;   /* SR draws as format_apply's */
            assert_int_equal(f->encode(f, &oo, xr, L, codes, meta, &ts, &e), 0);
            uint32_t one = 0;
            for (unsigned k = 0; f->code_value && k < f->ncodes; k++)
                if (f->code_value(k) == 1.0f) { one = k; break; }
            if (f->family == QS_FAM_INT) one = 1;
            if (!strcmp(f->name, "hif4")) one = 4;
            for (uint64_t i = 0; i < L; i++) ones[i] = one;
            assert_int_equal(f->decode(f, &oo, ones, meta, ts, L, S, &e), 0);
        }
        for (uint64_t k = 0; k < (cast ? 1 : bpr); k++) {
            uint64_t i0 = cast ? 0 : k * B, i1 = cast ? L : (i0 + B < L ? i0 + B : L);
            double bl[16] = {0};   /* block sum: 16 lanes by position in the run, as documented */
            uint64_t bnf = 0;
            float bam = 0;
            for (uint64_t i = i0; i < i1; i++) {
                float xf = xr[i], qf = yr[i];
                uint64_t gi = idx[i], row = gi / cols, col = gi % cols;
                if (!(fabsf(xf) <= FLT_MAX)) { R->hv.nonfinite++; continue; }
                double xd = xf, ax = fabs(xd);
                if (xf == 0) R->hv.zero++;
                else href_log4(R->hv.c, 1160, -160, &R->hv.under, &R->hv.over, ax);
                R->nfin++;
                bnf++;
                R->row_nf[row]++;
                R->col_nf[col]++;
                if (fabsf(xf) > bam) bam = fabsf(xf);
                int top = cast ? fabsf(qf) == (float)f->max_finite : code_is_top(f, codes[i]);
                /* an overflow to NaN/Inf is not a clip (metrics.h: nonfinite_frac only) */
                int clip = top && fabsf(qf) < fabsf(xf) && qf != 0 && fabsf(qf) <= FLT_MAX;
                R->nclip += clip;
                if (!(fabsf(qf) <= FLT_MAX)) {
                    R->nnonf++;
                    R->se2 = INFINITY;
                    bl[i & 15] = INFINITY;
                    R->row_se2[row] = INFINITY;
                    R->col_se2[col] = INFINITY;
                    R->srel = R->maxae = R->maxrel = INFINITY;
                    R->ha.nonfinite++;
                    R->hr.nonfinite++;
                    R->hu.nonfinite++;
                    continue;
                }
                int und = xf != 0 && qf == 0;
                R->nunder += und;
                double ev = (float)(qf - xf), ae = fabs(ev);   /* e = fl32(q - x) (metrics.h) */
                *(und ? &R->seu : clip ? &R->sec : &R->ser) += ev * ev;
                R->sx2 += xd * xd;
                R->se2 += ev * ev;
                R->se += ev;
                R->sxq += xd * (xd + ev);   /* q as the error defines it: x + fl32(q - x) (exact unless clipped) */
                R->sq2 += (xd + ev) * (xd + ev);
                bl[i & 15] += ev * ev;
                R->row_se2[row] += ev * ev;
                R->col_se2[col] += ev * ev;
                if (ae == 0) { R->ha.zero++; R->hr.zero++; R->hu.zero++; continue; }
                /* relative error, its maximum and the maximum |e| in float32 (metrics.h) */
                float fe = (float)ev, axf = fabsf(xf);
                float rel = fabsf(fe) / (axf > Ff ? axf : Ff);
                R->srel += rel;
                if (fabsf(fe) > R->maxae) R->maxae = fabsf(fe);
                if (rel > R->maxrel) R->maxrel = rel;
                /* abs and rel bins are of the float32-rounded values (metrics.h) */
                href_log4f(R->ha.c, 1160, -160, &R->ha.under, &R->ha.over, ae);
                href_log4f(R->hr.c, 384, -80, &R->hr.under, &R->hr.over, rel);
                double Sd = cast ? 1.0 : (double)S[i];
                double sp;   /* the element grid's spacing at |x| / S */
                if (cast && !f->code_value) {   /* bf16, fp16: 2^(exponent - mbits), clamped */
                    int ex;
                    frexp(fmin(fmax(ax, f->min_normal), f->max_finite), &ex);
                    sp = ldexp(1.0, ex - 1 - f->mbits);
                } else
                    sp = grid_step(g, ng, Sd == 1.0 ? ax : ax / Sd);
                /* 32 x the ulp error: fl32(fl32(fl32(e) / S) * 32 / spacing), the spacing a power of two
                ** (S = 0, an underflowed NVFP4 block: +-inf ulps) */
                float v = fe / (float)Sd;
                float t32 = (float)((double)v * (32.0 / sp));
                double bi = floor(t32) + 32;
                if (bi < 0) R->hu.under++;
                else if (bi >= 64) R->hu.over++;
                else R->hu.c[(int)bi]++;
            }
            if (cast) continue;
            double t8[8];
            for (int l = 0; l < 8; l++) t8[l] = bl[l] + bl[l + 8];
            double bse2 = ((t8[0] + t8[1]) + (t8[2] + t8[3])) + ((t8[4] + t8[5]) + (t8[6] + t8[7]));
            double rmse = bnf ? sqrt(bse2 / (double)bnf) : NAN;
            if (rmse == 0) R->hb.zero++;
            else if (!(rmse <= DBL_MAX)) R->hb.nonfinite++;
            else href_log4(R->hb.c, 1160, -160, &R->hb.under, &R->hb.over, rmse);
            uint64_t bid = r * bpr + k;
            R->bam[bid] = bam;
            R->brmse[bid] = (float)rmse;
            /* the block's decoded scale: S of its first element (HiF4: the unit's E6M2 value) */
            double sc = S[i0];
            uint8_t code0 = meta[k * (size_t)f->meta_bytes];
            if (!strcmp(f->name, "hif4")) sc = code0 == 0xFF ? NAN : qs_hif4_e6m2_value(code0);
            R->bratio[bid] = sc > 0 && sc <= DBL_MAX ? (float)((double)bam / sc) : NAN;
            R->bcode[bid] = code0;
            if (f->meta_bytes == 1 || !strcmp(f->name, "hif4")) R->hs.c[code0]++;
        }
        free(idx);
    }
    free(xr); free(yr); free(S); free(codes); free(ones); free(meta); free(y);
}

static void ref_free(ref *R)
{
    free(R->bam); free(R->bratio); free(R->brmse); free(R->bcode);
    free(R->row_se2); free(R->col_se2); free(R->row_nf); free(R->col_nf);
}

static const char *cur_case = "";

static void cmp_hist(const char *what, const qs_hist *h, const rhist *r)
{
    int bad = 0;
    for (int i = 0; i < h->nbins; i++)
        if (h->counts[i] != r->c[i]) {
            if (bad++ < 5)
                print_error("%s bin %d: %llu vs ref %llu\n", what, i, (unsigned long long)h->counts[i],
                            (unsigned long long)r->c[i]);
        }
    if (h->zero != r->zero || h->under != r->under || h->over != r->over || h->nonfinite != r->nonfinite) {
        print_error("%s counters: %llu %llu %llu %llu vs ref %llu %llu %llu %llu\n", what,
                    (unsigned long long)h->zero, (unsigned long long)h->under, (unsigned long long)h->over,
                    (unsigned long long)h->nonfinite, (unsigned long long)r->zero, (unsigned long long)r->under,
                    (unsigned long long)r->over, (unsigned long long)r->nonfinite);
        bad++;
    }
    if (bad) fail_msg("%s: %s differs from the reference", cur_case, what);
}

static void check_against_ref(const qs_apply *a, uint64_t rows, uint64_t cols, const float *x, int threads)
{
    ref R;
    static char cs[160];
    snprintf(cs, sizeof cs, "%s axis %d gran %d rule %d/%d%d%d round %d sat %d", a->f->name, a->axis, (int)a->gran,
             (int)a->o.scale_rule, a->o.floor_log2f, a->o.nan_block_te, a->o.zero_block_scale, (int)a->o.round,
             a->o.sat);
    cur_case = cs;
    ref_analyze(a, rows, cols, x, &R);
    qs_analysis an;
    qs_err e = {{0}};
    if (run(a, rows, cols, x, threads, 1, &an, &e)) fail_msg("%s: %s", a->f->name, e.msg);
    const qs_metrics *m = &an.m;
    double nf = (double)R.nfin;
    assert_int_equal(m->n, rows * cols);
    assert_int_equal(m->n_finite, R.nfin);
    assert_close(m->sum_x2, R.sx2, 1e-12);
    assert_close(m->sum_e2, R.se2, 1e-12);
    assert_close(m->mse, R.se2 / nf, 1e-12);
    assert_close(m->sqnr_db, 10 * log10(R.sx2 / R.se2), 1e-11);
    assert_close(m->mean_err, R.nnonf ? NAN : R.se / nf, 1e-9);
    assert_close(m->cosine, R.nnonf ? NAN : R.sxq / sqrt(R.sx2 * R.sq2), 1e-12);
    assert_close(m->mean_rel_err, R.srel / nf, 1e-5);   /* float32 sums within chunks of 1024 */
    assert_true(m->max_abs_err == R.maxae);
    assert_true(m->max_rel_err == R.maxrel);
    assert_true(m->underflow_frac == (double)R.nunder / nf);
    if (m->clip_frac != (double)R.nclip / nf)
        fail_msg("%s axis %d rule %d/%d%d%d: clip %.0f vs ref %llu", a->f->name, a->axis, (int)a->o.scale_rule,
                 a->o.floor_log2f, a->o.nan_block_te, a->o.zero_block_scale, m->clip_frac * nf,
                 (unsigned long long)R.nclip);
    assert_true(m->nonfinite_frac == (double)R.nnonf / nf);
    /* error energy by source: sums in another order, shares of the finite total */
    assert_close(m->sum_e2_under, R.seu, 1e-12);
    assert_close(m->sum_e2_clip, R.sec, 1e-12);
    assert_close(m->sum_e2_round, R.ser, 1e-12);
    double fin = R.seu + R.sec + R.ser;
    assert_close(m->err_under, fin > 0 ? R.seu / fin : NAN, 1e-12);
    assert_close(m->err_clip, fin > 0 ? R.sec / fin : NAN, 1e-12);
    assert_close(m->err_round, fin > 0 ? R.ser / fin : NAN, 1e-12);
    if (!R.nnonf) assert_close(fin, R.se2, 1e-12);   /* the three sources partition the error energy */
    cmp_hist("value", &an.value, &R.hv);
    cmp_hist("abs_err", &an.abs_err, &R.ha);
    cmp_hist("rel_err", &an.rel_err, &R.hr);
    cmp_hist("ulp_err", &an.ulp_err, &R.hu);
    assert_int_equal(hist_total(&an.value), rows * cols);
    assert_int_equal(hist_total(&an.abs_err), R.nfin);
    assert_int_equal(hist_total(&an.rel_err), R.nfin);
    assert_int_equal(hist_total(&an.ulp_err), R.nfin);
    assert_int_equal(an.nblocks, R.nblocks);
    if (R.nblocks) {
        cmp_hist("block_err", &an.block_err, &R.hb);
        assert_int_equal(hist_total(&an.block_err), R.nblocks);
        if (an.scale_code.nbins) {
            cmp_hist("scale_code", &an.scale_code, &R.hs);
            assert_memory_equal(an.block_scale_code, R.bcode, R.nblocks);
        }
        assert_memory_equal(an.block_absmax, R.bam, R.nblocks * sizeof(float));
        assert_memory_equal(an.block_rmse, R.brmse, R.nblocks * sizeof(float));
        assert_memory_equal(an.block_ratio, R.bratio, R.nblocks * sizeof(float));
    }
    if (rows > 1) {
        for (uint64_t r = 0; r < rows; r++)
            assert_close(an.row_rmse[r], R.row_nf[r] ? (float)sqrt(R.row_se2[r] / R.row_nf[r]) : NAN, 1e-6);
        for (uint64_t c = 0; c < cols; c++)
            assert_close(an.col_rmse[c], R.col_nf[c] ? (float)sqrt(R.col_se2[c] / R.col_nf[c]) : NAN, 1e-6);
    }
    qs_analysis_free(&an);
    ref_free(&R);
}

static void test_reference_random(void **st)
{
    (void)st;
    const char *names[] = {"fp8_e4m3", "hif8", "mxfp4", "nvfp4", "mxfp8_e4m3", "mxint8", "hif4", "fp6_e2m3"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        qs_apply a = mk_apply(names[k]);
        float *x = make_tensor(48, 320, 100 + k);
        check_against_ref(&a, 48, 320, x, 2);
        free(x);
    }
    /* int8 with one scale per row, per column, per tensor, and blocks of 64 */
    qs_gran gr[] = {QS_GRAN_ROW, QS_GRAN_COL, QS_GRAN_TENSOR};
    for (int k = 0; k < 3; k++) {
        qs_apply a = mk_apply("int8");
        a.gran = gr[k];
        float *x = make_tensor(40, 200, 7 + (uint64_t)k);
        check_against_ref(&a, 40, 200, x, 2);
        free(x);
    }
    qs_apply a = mk_apply("int4");
    a.o.block = 64;
    float *x = make_tensor(33, 250, 9);
    check_against_ref(&a, 33, 250, x, 2);
    free(x);
}

static void test_reference_layouts_and_rules(void **st)
{
    (void)st;
    /* axis 0 (columns are runs), partial last blocks, 1-D rows longer than a band */
    const char *ax0[] = {"mxfp4", "nvfp4", "hif4", "int8"};
    for (int k = 0; k < 4; k++) {
        qs_apply a = mk_apply(ax0[k]);
        a.axis = 0;
        if (!strcmp(ax0[k], "int8")) a.o.block = 32;
        float *x = make_tensor(150, 70, 40 + (uint64_t)k);
        check_against_ref(&a, 150, 70, x, 3);
        free(x);
    }
    /* every MX scale rule and library variant: the proxy scale codes against a full encode */
    struct { qs_scale_rule r; int log2f, te, zb; } v[] = {
        {QS_SCALE_FLOOR, 0, 0, 0}, {QS_SCALE_CEIL, 0, 0, 0}, {QS_SCALE_EVEN, 0, 0, 0},
        {QS_SCALE_RCEIL, 0, 0, 0}, {QS_SCALE_UOS, 0, 0, 0}, {QS_SCALE_FLOOR, 1, 0, 0},
        {QS_SCALE_FLOOR, 0, 1, 0}, {QS_SCALE_FLOOR, 0, 0, QS_ZERO_BLOCK_SCALE(0x7f)},
    };
    const char *mx[] = {"mxfp4", "mxint8", "mxfp8_e5m2", "mxfp6_e3m2"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int k = 0; k < 4; k++) {
            qs_apply a = mk_apply(mx[k]);
            a.o.scale_rule = v[i].r;
            a.o.floor_log2f = v[i].log2f;
            a.o.nan_block_te = v[i].te;
            a.o.zero_block_scale = v[i].zb;
            float *x = make_tensor(16, 96, 70 + i * 4 + (uint64_t)k);
            for (int z = 0; z < 32; z++) x[2 * 96 + z] = 0;          /* an all-zero block */
            x[5 * 96 + 3] = INFINITY;                                   /* an Inf block (te: 0xFE) */
            x[7 * 96 + 40] = 0x1.fffffep+2f;                            /* log2f rounds up (T28) */
            check_against_ref(&a, 16, 96, x, 2);
            free(x);
        }
    /* NVFP4 torchao order; int4 per row; rounding modes */
    qs_apply a = mk_apply("nvfp4");
    a.o.nvfp4 = QS_NVFP4_TORCHAO;
    float *x = make_tensor(20, 160, 5);
    check_against_ref(&a, 20, 160, x, 2);
    a = mk_apply("int4");
    a.gran = QS_GRAN_ROW;
    check_against_ref(&a, 20, 160, x, 2);
    a = mk_apply("mxfp4");
    a.o.round = QS_RND_SR;
    a.o.seed = 42;
    check_against_ref(&a, 20, 160, x, 2);
    a = mk_apply("hif8");
    a.o.round = QS_RND_HR;
    check_against_ref(&a, 20, 160, x, 2);
    free(x);
}

/* NaN and Inf inputs, overflow to NaN / Inf, saturation. */
static void test_nonfinite(void **st)
{
    (void)st;
    float *x = make_tensor(8, 64, 3);
    x[3] = NAN;
    x[70] = INFINITY;
    x[100] = -INFINITY;
    x[200] = 1000.0f;       /* fp8_e4m3: NaN (clipped and non-finite); --sat: 448 */
    x[201] = -470.0f;
    x[300] = 70000.0f;      /* fp16 / e5m2: Inf */
    const char *names[] = {"fp8_e4m3", "fp8_e5m2", "hif8", "mxfp4", "nvfp4", "int8", "hif4"};
    for (int sat = 0; sat < 2; sat++)
        for (int k = 0; k < 7; k++) {
            qs_apply a = mk_apply(names[k]);
            a.o.sat = sat && a.f->block == 1;
            if (!strcmp(names[k], "int8")) a.gran = QS_GRAN_ROW;
            check_against_ref(&a, 8, 64, x, 2);
            qs_analysis an;
            qs_err e = {{0}};
            assert_int_equal(run(&a, 8, 64, x, 2, 0, &an, &e), 0);
            assert_int_equal(an.m.n_finite, 8 * 64 - 3);
            assert_int_equal(an.value.nonfinite, 3);
            if (!strcmp(names[k], "fp8_e4m3")) {
                /* 1000, -470, 70000: clipped to 448 under --sat, else NaN (non-finite, not clipped) */
                assert_true(an.m.clip_frac == (sat ? 3.0 : 0.0) / an.m.n_finite);
                /* the shares cover the finite error energy whether or not some values became NaN */
                assert_true(isfinite(an.m.sum_e2_round) && isfinite(an.m.sum_e2_clip));
                if (sat) assert_true(an.m.err_clip > 0.99);   /* 70000 -> 448 */
                else assert_true(an.m.err_clip == 0 && an.m.err_round > 0.5);
                assert_close(an.m.err_under + an.m.err_clip + an.m.err_round, 1, 1e-14);
                if (sat) {
                    assert_true(an.m.nonfinite_frac == 0);
                    assert_true(isfinite(an.m.mse) && isfinite(an.m.cosine));
                } else {
                    assert_true(an.m.nonfinite_frac == 3.0 / an.m.n_finite);
                    assert_true(an.m.mse == INFINITY && an.m.sqnr_db == -INFINITY);
                    assert_true(an.m.eff_bits_sqnr == -INFINITY && an.m.max_abs_err == INFINITY);
                    assert_true(isnan(an.m.mean_err) && isnan(an.m.cosine));
                    assert_int_equal(an.abs_err.nonfinite, 3);
                    char *js = qs_metrics_json(&an.m);
                    assert_non_null(strstr(js, "\"mse\":\"inf\""));
                    assert_non_null(strstr(js, "\"sqnr_db\":\"-inf\""));
                    assert_non_null(strstr(js, "\"cosine\":null"));
                    free(js);
                }
            }
            if (!strcmp(names[k], "mxfp4")) assert_true(an.m.nonfinite_frac > 0);   /* NaN/Inf blocks */
            qs_analysis_free(&an);
        }
    free(x);
    /* all non-finite: metrics NaN, fractions 0 */
    float bad[4] = {NAN, INFINITY, -INFINITY, NAN};
    qs_apply a = mk_apply("bf16");
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 1, 4, bad, 1, 0, &an, &e), 0);
    assert_int_equal(an.m.n_finite, 0);
    assert_true(isnan(an.m.mse) && isnan(an.m.sqnr_db) && an.m.clip_frac == 0);
    assert_int_equal(an.value.nonfinite, 4);
    assert_int_equal(hist_total(&an.abs_err), 0);
    qs_analysis_free(&an);
}

/* Error energy by source on Gaussian data: the 4-bit formats flush about a tenth of the values to
** zero, but those are the smallest and carry a few per cent of sum e^2; rounding carries the rest.
** The portable path gives the same bits as the AVX-512 one. */
static void test_error_energy(void **st)
{
    (void)st;
    uint64_t R = 256, C = 1024;
    float *x = malloc(R * C * sizeof(float));
    rng_state = 77;
    for (uint64_t i = 0; i < R * C; i++) x[i] = (float)(gauss() * 0.02);
    const char *names[] = {"mxfp4", "nvfp4", "hif4", "m2xfp4", "int4", "fp8_e4m3", "bf16"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        qs_apply a = mk_apply(names[k]);
        if (!strcmp(names[k], "int4")) a.o.block = 32;
        qs_analysis an, sc;
        qs_err e = {{0}};
        assert_int_equal(run(&a, R, C, x, 2, 0, &an, &e), 0);
        const qs_metrics *m = &an.m;
        double fin = (m->sum_e2_under + m->sum_e2_clip) + m->sum_e2_round;
        assert_close(fin, m->sum_e2, 1e-12);   /* no NaN/Inf: the sources partition sum e^2 */
        assert_close(m->err_under + m->err_clip + m->err_round, 1, 1e-14);
        if (a.f->elem_bits == 4) {
            /* by count underflow is the largest source, by energy rounding is */
            assert_true(m->underflow_frac > m->clip_frac && m->err_round > 0.8);
            assert_true(m->err_round > m->err_under && m->err_round > m->err_clip);
        }
        if (!strcmp(names[k], "nvfp4") && !(m->err_round > 0.9 && m->err_under < 0.05))
            fail_msg("%s: rounding %.4f underflow %.4f clip %.4f (underflow_frac %.4f)", names[k], m->err_round,
                     m->err_under, m->err_clip, m->underflow_frac);
        if (!strcmp(names[k], "bf16")) assert_true(m->err_round == 1 && m->err_under == 0 && m->err_clip == 0);
        qs_simd_force(QS_SIMD_SCALAR);
        int rc = run(&a, R, C, x, 2, 0, &sc, &e);
        qs_simd_force(-1);
        assert_int_equal(rc, 0);
        assert_memory_equal(&an.m, &sc.m, sizeof an.m);
        char *j1 = qs_metrics_json(&an.m);
        json_t *j = json_loads(j1, 0, NULL), *ee = json_object_get(j, "err_energy");
        assert_true(json_real_value(json_object_get(ee, "rounding")) == m->err_round);
        assert_true(json_real_value(json_object_get(ee, "underflow")) == m->err_under);
        assert_true(json_real_value(json_object_get(ee, "clip")) == m->err_clip);
        json_decref(j);
        free(j1);
        qs_analysis_free(&an);
        qs_analysis_free(&sc);
    }
    free(x);
    /* no error energy (fp32): the shares are undefined (JSON null) */
    float y[4] = {1, -2, 0.5f, 0};
    qs_apply a = mk_apply("fp32");
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 1, 4, y, 1, 0, &an, &e), 0);
    assert_true(isnan(an.m.err_round) && isnan(an.m.err_under) && isnan(an.m.err_clip));
    char *js = qs_metrics_json(&an.m);
    assert_non_null(strstr(js, "\"err_energy\":null"));
    free(js);
    qs_analysis_free(&an);
}

/* The edge definitions of docs/analysis.md, one case each. */
static void test_definitions(void **st)
{
    (void)st;
    qs_err e = {{0}};
    /* HiF8: --sat saturates finite overflow at +-32768 (clipped); without it, +-Inf (non-finite, not
    ** clipped, out of sum_x2).  A NaN input stays NaN and an Inf input saturates, but neither is a
    ** finite input: both are only counted (value histogram) */
    const float h[5] = {1e6f, -50000.0f, 1.0f, NAN, INFINITY};
    for (int sat = 0; sat < 2; sat++) {
        qs_apply a = mk_apply("hif8");
        a.o.sat = sat;
        qs_analysis an;
        assert_int_equal(run(&a, 1, 5, h, 1, 0, &an, &e), 0);
        assert_int_equal(an.m.n_finite, 3);
        assert_int_equal(an.value.nonfinite, 2);
        assert_true(an.m.clip_frac == (sat ? 2.0 / 3 : 0));
        assert_true(an.m.nonfinite_frac == (sat ? 0 : 2.0 / 3));
        assert_true(an.m.sum_x2 == (sat ? 1e12 + 2.5e9 + 1 : 1));   /* finite x with finite q only */
        if (sat) {
            assert_true(an.m.sum_e2_clip == (1e6 - 32768) * (1e6 - 32768) + (50000.0 - 32768) * (50000.0 - 32768));
            assert_true(an.m.err_clip == 1 && an.m.err_round == 0);   /* 1.0 is exact */
        } else {
            assert_true(an.m.sum_e2 == INFINITY && isnan(an.m.err_round));   /* no finite error energy */
        }
        qs_analysis_free(&an);
    }
    /* int8 per row, tiny blocks: amax / 127 below 2^-150 gives the scale 2^-149 (row 0: exact); just
    ** above it fl32(amax / 127) is subnormal and may round down (190 / 127 -> 1 x 2^-149): row 1
    ** clips 190 x 2^-149 to 127 x 2^-149, counted as a clip */
    const float u = 0x1p-149f;
    const float t[8] = {7 * u, -3 * u, 0, u, 190 * u, 5 * u, -u, 0};
    qs_apply a = mk_apply("int8");
    a.gran = QS_GRAN_ROW;
    qs_analysis an;
    assert_int_equal(run(&a, 2, 4, t, 1, 1, &an, &e), 0);
    assert_true(an.m.clip_frac == 1.0 / 8 && an.m.underflow_frac == 0);
    assert_true(an.m.sum_e2 == 63 * 0x1p-149 * 63 * 0x1p-149 && an.m.sum_e2_clip == an.m.sum_e2);
    assert_true(an.block_ratio[0] == 7.0f && an.block_ratio[1] == 190.0f);   /* absmax / 2^-149 */
    assert_true(an.block_rmse[0] == 0);
    qs_analysis_free(&an);
    /* NVFP4: a block whose UE4M3 scale underflows to 0 (its absmax far below the tensor's) decodes
    ** to zeros: its values are underflows, nothing clips, the ulp errors are +-inf (under / over),
    ** the ratio NaN */
    float v[32];
    for (int i = 0; i < 16; i++) {
        v[i] = 1e4f * (float)(i + 1) / 16;
        v[16 + i] = 1e-6f * (float)(i + 1) * (i & 1 ? -1.0f : 1.0f);
    }
    a = mk_apply("nvfp4");
    assert_int_equal(run(&a, 1, 32, v, 1, 1, &an, &e), 0);
    assert_int_equal(an.nblocks, 2);
    assert_int_equal(an.block_scale_code[1], 0);
    assert_true(isnan(an.block_ratio[1]) && !isnan(an.block_ratio[0]));
    assert_true(an.m.underflow_frac == 0.5 && an.m.clip_frac == 0);
    assert_int_equal(an.ulp_err.under + an.ulp_err.over, 16);
    assert_true(an.m.sum_e2_under > 0 && an.m.sum_e2_clip == 0);
    qs_analysis_free(&an);
}

/* fp32 is the identity: no error, SQNR and effective bits +inf. */
static void test_identity(void **st)
{
    (void)st;
    float *x = make_tensor(64, 100, 11);
    qs_apply a = mk_apply("fp32");
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 64, 100, x, 2, 1, &an, &e), 0);
    assert_true(an.m.mse == 0 && an.m.sum_e2 == 0 && an.m.max_abs_err == 0 && an.m.max_rel_err == 0);
    assert_true(an.m.sqnr_db == INFINITY && an.m.eff_bits_energy == INFINITY && an.m.eff_bits_sqnr == INFINITY);
    assert_true(an.m.cosine == 1.0 || fabs(an.m.cosine - 1.0) < 1e-15);
    assert_true(an.m.underflow_frac == 0 && an.m.clip_frac == 0 && an.m.mean_err == 0);
    assert_int_equal(an.abs_err.zero, 64 * 100);
    assert_int_equal(an.ulp_err.zero, 64 * 100);
    for (int r = 0; r < 64; r++) assert_true(an.row_rmse[r] == 0);
    char *js = qs_metrics_json(&an.m);
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    assert_non_null(o);
    /* non-finite: null, with the reason beside it (store/json_out.h) */
    assert_true(json_is_null(json_object_get(o, "sqnr_db")));
    assert_true(json_is_null(json_object_get(o, "eff_bits_sqnr")));
    json_t *nf = json_object_get(o, "nonfinite_values");
    assert_string_equal(json_string_value(json_object_get(nf, "sqnr_db")), "inf");
    assert_string_equal(json_string_value(json_object_get(nf, "eff_bits_sqnr")), "inf");
    assert_int_equal(json_integer_value(json_object_get(o, "n")), 6400);
    assert_true(json_real_value(json_object_get(o, "mse")) == 0);
    json_decref(o);
    free(js);
    qs_analysis_free(&an);
    free(x);
}

/* SQNR, MSE and the two effective-bit definitions agree with each other. */
static void test_invariants(void **st)
{
    (void)st;
    float *x = make_tensor(96, 256, 12);
    const char *names[] = {"bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "mxfp4", "mxfp8_e4m3", "nvfp4", "hif8", "hif4",
                           "int8", "int4", "m2xfp4", "mxfp6_e2m3"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        qs_apply a = mk_apply(names[k]);
        if (a.f->family == QS_FAM_INT) a.gran = QS_GRAN_ROW;
        a.o.sat = a.f->block == 1;   /* no overflow to NaN/Inf here (see test_nonfinite) */
        qs_analysis an;
        qs_err e = {{0}};
        if (run(&a, 96, 256, x, 2, 1, &an, &e)) fail_msg("%s: %s", names[k], e.msg);
        const qs_metrics *m = &an.m;
        assert_true(m->sqnr_db == 10 * log10(m->sum_x2 / m->sum_e2));
        assert_true(m->mse == m->sum_e2 / (double)m->n_finite);
        assert_true(m->rmse == sqrt(m->mse));
        assert_true(m->eff_bits_sqnr == (m->sqnr_db - 1.76) / 6.02);
        assert_close(m->eff_bits_energy, m->sqnr_db / (20 * log10(2.0)), 1e-12);
        assert_close(m->sqnr_db, 10 * log10(m->sum_x2 / ((double)m->n_finite * m->mse)), 1e-14);
        if (!(m->cosine > 0.5 && m->cosine <= 1.0)) fail_msg("%s: cosine %.17g", names[k], m->cosine);
        assert_true(m->bits_per_elem == qs_format_bits_per_elem(a.f, &a.o) || a.f->family == QS_FAM_INT ||
                    a.f->family == QS_FAM_NVFP4);
        assert_int_equal(hist_total(&an.value), 96 * 256);
        assert_int_equal(hist_total(&an.abs_err), m->n_finite);
        assert_int_equal(hist_total(&an.rel_err), m->n_finite);
        assert_int_equal(hist_total(&an.ulp_err), m->n_finite);
        if (an.nblocks) assert_int_equal(hist_total(&an.block_err), an.nblocks);
        if (an.scale_code.nbins) assert_int_equal(hist_total(&an.scale_code), an.nblocks);
        /* round to nearest: never more than half an ulp (HR and the HiF4/M2XFP scale search aside) */
        if (a.f->block == 1 && strcmp(names[k], "hif8")) {
            for (int i = 0; i < 16; i++) assert_int_equal(an.ulp_err.counts[i], 0);
            for (int i = 49; i < 64; i++) assert_int_equal(an.ulp_err.counts[i], 0);
        }
        /* JSON of the histograms: edges n+1, counts n; null for what a format does not have */
        char *js = qs_hists_json(&an);
        json_error_t je;
        json_t *o = json_loads(js, 0, &je);
        assert_non_null(o);
        json_t *hv = json_object_get(o, "value");
        assert_string_equal(json_string_value(json_object_get(hv, "scale")), "log2");
        assert_int_equal(json_array_size(json_object_get(hv, "edges")), an.value.nbins + 1);
        assert_int_equal(json_array_size(json_object_get(hv, "counts")), an.value.nbins);
        assert_true(json_real_value(json_array_get(json_object_get(hv, "edges"), 0)) == -160);
        json_t *hs = json_object_get(o, "scale_code");
        if (an.scale_code.nbins) assert_string_equal(json_string_value(json_object_get(hs, "scale")), "code");
        else assert_true(json_is_null(hs));
        assert_string_equal(json_string_value(json_object_get(json_object_get(o, "ulp_err"), "scale")), "linear");
        json_decref(o);
        free(js);
        qs_analysis_free(&an);
    }
    free(x);
}


/* 1-D (one row): no row/column arrays; a given absmax gives the same result without the pre-pass. */
static void test_1d_and_absmax(void **st)
{
    (void)st;
    uint64_t n = 5000;
    float *x = make_tensor(1, n, 31);
    float am = 0;
    for (uint64_t i = 0; i < n; i++) am = fabsf(x[i]) > am ? fabsf(x[i]) : am;
    const char *names[] = {"mxfp4", "nvfp4", "bf16"};
    for (int k = 0; k < 3; k++) {
        qs_apply a = mk_apply(names[k]);
        check_against_ref(&a, 1, n, x, 2);
        qs_analysis p, q;
        qs_err e = {{0}};
        src s = {x, n, UINT64_MAX, 0};
        qs_analyze_opts o;
        memset(&o, 0, sizeof o);
        o.threads = 2;
        o.blocks = 1;
        assert_int_equal(qs_analyze(&a, 1, n, rd_mem, &s, 1, &o, &p, &e), 0);
        int reads_pre = s.reads;
        s.reads = 0;
        o.absmax_known = 1;
        o.absmax = am;
        assert_int_equal(qs_analyze(&a, 1, n, rd_mem, &s, 0, &o, &q, &e), 0);
        assert_true(s.reads < reads_pre);          /* one read of each element instead of two */
        assert_null(p.row_rmse);
        assert_null(p.col_rmse);
        same_analysis(&p, &q);
        qs_analysis_free(&p);
        qs_analysis_free(&q);
    }
    free(x);
    /* an empty tensor */
    qs_apply a = mk_apply("mxfp4");
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 0, 16, NULL, 2, 1, &an, &e), 0);
    assert_int_equal(an.m.n, 0);
    assert_true(isnan(an.m.mse));
    qs_analysis_free(&an);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp4_by_hand),
        cmocka_unit_test(test_mxfp4_by_hand),
        cmocka_unit_test(test_reference_random),
        cmocka_unit_test(test_reference_layouts_and_rules),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_error_energy),
        cmocka_unit_test(test_definitions),
        cmocka_unit_test(test_invariants),
        cmocka_unit_test(test_1d_and_absmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
