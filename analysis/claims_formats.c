/*
** Claims about number formats: HiFloat8's value set and rounding, HiFloat4's MSE against NVFP4
** and MXFP4, MXAttention's UOS threshold and PNQ row sums.
**
** Every measurement runs the registry's own codecs (kernels/format.h) on data of datasets/gen with
** fixed seeds; nothing here re-implements a format.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "../datasets/gen.h"
#include "../kernels/format.h"

#define APPEND(buf, ...) snprintf((buf) + strlen(buf), sizeof(buf) - strlen(buf), __VA_ARGS__)

static const qs_format *need(const char *name, qs_err *e)
{
    const qs_format *f = qs_format_find(name);
    if (!f) qs_fail(e, "format %s is not in the registry", name);
    return f;
}

static int fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    qs_qopts c = o ? *o : (qs_qopts){0};
    if (qs_qopts_check(f, &c, e)) return -1;
    return f->fakeq(f, &c, x, n, y, e);
}

static float *gen(qs_gen_kind k, uint64_t seed, size_t n, double scale)
{
    float *x = malloc(n * sizeof *x);
    if (x) qs_gen_matrix(k, seed, n, 0, scale, x);
    return x;
}

/* ---- HiF8 ------------------------------------------------------------------------------------ */

/* Binades a format's finite non-zero values occupy: floor(log2 max) - floor(log2 min) + 1. */
static int binades(const qs_format *f)
{
    return (int)floor(log2(f->max_finite)) - (int)floor(log2(f->min_subnormal)) + 1;
}

static int hif8_binades(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    const char *names[] = {"hif8", "fp16", "fp8_e4m3", "fp8_e5m2"};
    const int paper[] = {38, 40, 18, 32};
    int got[4], ok = 1;
    for (int i = 0; i < 4; i++) {
        const qs_format *f = need(names[i], e);
        if (!f) return -1;
        got[i] = binades(f);
        ok &= got[i] == paper[i];
    }
    /* HiF8: also count from the code table that no binade in between is empty */
    const qs_format *h = qs_format_find("hif8");
    int seen[64] = {0}, lo = 99, hi = -99, gaps = 0;
    for (unsigned c = 0; c < h->ncodes; c++) {
        float v = h->code_value(c);
        if (!(v > 0) || isinf(v)) continue;
        int b = (int)floor(log2(v));
        if (b + 32 >= 0 && b + 32 < 64) seen[b + 32] = 1;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    for (int b = lo; b <= hi; b++) gaps += !seen[b + 32];
    ok &= gaps == 0 && hi - lo + 1 == got[0];
    o->value = got[0];
    snprintf(o->measured, sizeof o->measured, "%d (FP16 %d, E4M3 %d, E5M2 %d)", got[0], got[1], got[2], got[3]);
    snprintf(o->detail, sizeof o->detail,
             "Binades = floor(log2 max) - floor(log2 min positive) + 1 from the registry; HiF8's code table "
             "has positive values in every binade 2^%d .. 2^%d (%d empty).", lo, hi, gaps);
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

/* Mantissa bits per binade: log2 of the number of positive values in it. */
static int hif8_precision(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    const qs_format *h = need("hif8", e);
    if (!h) return -1;
    int count[64] = {0};
    for (unsigned c = 0; c < h->ncodes; c++) {
        float v = h->code_value(c);
        if (isinf(v)) v = copysignf(1.5f * 32768.0f, v);   /* the Inf codes take the slots of +-1.5 * 2^15 */
        if (!(v > 0)) continue;
        int b = (int)floor(log2(v)) + 32;
        if (b >= 0 && b < 64) count[b]++;
    }
    int bits[5] = {0}, odd = 0;   /* binades with 0, 1, 2, 3 mantissa bits; other counts */
    for (int b = 0; b < 64; b++) {
        if (!count[b]) continue;
        int m = count[b] == 1 ? 0 : count[b] == 2 ? 1 : count[b] == 4 ? 2 : count[b] == 8 ? 3 : -1;
        if (m < 0) odd++;
        else bits[m]++;
    }
    int ok = bits[3] == 7 && bits[2] == 8 && bits[1] == 16 && bits[0] == 7 && odd == 0;
    o->value = bits[3];
    snprintf(o->measured, sizeof o->measured, "%d / %d / %d (+%d with 0 bits)", bits[3], bits[2], bits[1], bits[0]);
    snprintf(o->detail, sizeof o->detail,
             "Positive HiF8 codes counted per binade: 8 values = 3 mantissa bits, 4 = 2, 2 = 1, 1 = 0 (the "
             "denormal binades); +Inf counted in 2^15's binade, whose 1.5 * 2^15 slot it takes; %d binades with "
             "another count.", odd);
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

static int hif8_valueset(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    const qs_format *h = need("hif8", e);
    if (!h) return -1;
    int nonzero = 0, nan = 0, inf = 0, zero = 0;
    double mx = 0, mn = INFINITY;
    for (unsigned c = 0; c < h->ncodes; c++) {
        float v = h->code_value(c);
        if (isnan(v)) nan++;
        else if (isinf(v)) inf++;
        else if (v == 0) zero++;
        else {
            nonzero++;
            mx = fmax(mx, fabs(v));
            mn = fmin(mn, fabs(v));
        }
    }
    int ok = nonzero == 252 && nan == 1 && inf == 2 && zero == 1 && mx == 32768 && mn == ldexp(1, -22);
    o->value = nonzero;
    snprintf(o->measured, sizeof o->measured, "%d finite non-zero, max %g, min 2^%d, %d NaN, %d Inf, %d zero", nonzero,
             mx, (int)log2(mn), nan, inf, zero);
    snprintf(o->detail, sizeof o->detail, "All 256 codes decoded by the registry's HiF8 decoder.");
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

/* At the midpoint between every two adjacent positive HiF8 values: TA rounds away from zero, RNE to
** the code with an even last bit. */
static int hif8_ties(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    const qs_format *h = need("hif8", e);
    if (!h) return -1;
    float vals[256];
    unsigned codes[256];
    int n = 0;
    for (unsigned c = 0; c < h->ncodes; c++) {
        float v = h->code_value(c);
        if (v > 0 && !isinf(v)) { vals[n] = v; codes[n] = c; n++; }
    }
    /* sort by value (the code order is not monotone across the dot-coded fields) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && vals[j - 1] > vals[j]; j--) {
            float t = vals[j]; vals[j] = vals[j - 1]; vals[j - 1] = t;
            unsigned u = codes[j]; codes[j] = codes[j - 1]; codes[j - 1] = u;
        }
    int ties = 0, ta_away = 0, rne_even = 0, differ = 0;
    for (int i = 0; i + 1 < n; i++) {
        double mid = 0.5 * ((double)vals[i] + (double)vals[i + 1]);
        float x = (float)mid;
        if ((double)x != mid) continue;   /* not representable in FP32: no exact tie */
        float y[2];
        qs_qopts ta = {0}, rne = {0};
        ta.round = QS_RND_TA;
        rne.round = QS_RND_RNE;
        if (fakeq(h, &ta, &x, 1, &y[0], e) || fakeq(h, &rne, &x, 1, &y[1], e)) return -1;
        ties++;
        ta_away += y[0] == vals[i + 1];
        unsigned rc = y[1] == vals[i + 1] ? codes[i + 1] : y[1] == vals[i] ? codes[i] : 1;
        rne_even += (rc & 1u) == 0;
        differ += y[0] != y[1];
    }
    int ok = ties == n - 1 && ta_away == ties && rne_even == ties;
    o->value = ties ? (double)ta_away / ties : NAN;
    snprintf(o->measured, sizeof o->measured, "TA away on %d/%d ties, RNE even on %d/%d (%d differ)", ta_away, ties,
             rne_even, ties, differ);
    snprintf(o->detail, sizeof o->detail,
             "Every midpoint between adjacent positive HiF8 values (exact in FP32), rounded by the registry with "
             "TA and with RNE.");
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

/* ---- HiF4 : NVFP4 : MXFP4 MSE ---------------------------------------------------------------- */

static int hif4_mse(int quick, qs_claim_out *o, qs_err *e)
{
    const int NX = 18;
    const size_t side = quick ? 256 : 1024, n = side * side;
    const char *names[3] = {"hif4", "nvfp4", "mxfp4"};
    const qs_format *f[3];
    for (int k = 0; k < 3; k++)
        if (!(f[k] = need(names[k], e))) return -1;
    float *y = malloc(n * sizeof *y);
    double ratio[2][18], sum[2] = {0, 0}, lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
    double xs[18];
    if (!y) return qs_fail(e, "out of memory");
    for (int xi = 0; xi < NX; xi++) {
        float *x = gen(QS_GEN_GAUSSIAN, 1000 + (uint64_t)xi, n, 0.01 * ldexp(1, xi));
        if (!x) { free(y); return qs_fail(e, "out of memory"); }
        double mse[3];
        for (int k = 0; k < 3; k++) {
            if (fakeq(f[k], NULL, x, n, y, e)) { free(x); free(y); return -1; }
            double s = 0;
            for (size_t i = 0; i < n; i++) {
                double d = (double)y[i] - (double)x[i];
                s += d * d;
            }
            mse[k] = s / (double)n;
        }
        free(x);
        xs[xi] = xi;
        for (int k = 0; k < 2; k++) {
            ratio[k][xi] = mse[k + 1] / mse[0];
            sum[k] += ratio[k][xi];
            lo[k] = fmin(lo[k], ratio[k][xi]);
            hi[k] = fmax(hi[k], ratio[k][xi]);
        }
    }
    free(y);
    double nv = sum[0] / NX, mx = sum[1] / NX;
    int ok = fabs(nv / 1.32 - 1) <= 0.03 && fabs(mx / 1.89 - 1) <= 0.03;
    o->value = nv;
    snprintf(o->measured, sizeof o->measured, "1 : %.2f : %.2f", nv, mx);
    snprintf(o->detail, sizeof o->detail,
             "18 Gaussian %zux%zu matrices, sigma = 0.01*2^x (x = 0..17), seeds 1000+x; MSE of each format over "
             "its MSE under HiF4, averaged over x (NVFP4 %.3f..%.3f, MXFP4 %.3f..%.3f). NVFP4 with its per-tensor "
             "FP32 scale (amax mapped to 6*448 = 2688, the paper's +PTS), all RNE except HiF4's TA.",
             side, side, lo[0], hi[0], lo[1], hi[1]);
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    if (!ok) APPEND(o->detail, " Outside 3 %%: the paper's NVFP4/MXFP4 baselines may round or scale differently.");
    qs_line_data s[2] = {{"NVFP4 / HiF4", NX, xs, ratio[0]}, {"MXFP4 / HiF4", NX, xs, ratio[1]}};
    o->fig = qs_plot_lines("MSE relative to HiF4 on Gaussian matrices", "x (sigma = 0.01 * 2^x)", QS_AX_LINEAR,
                           "MSE ratio", QS_AX_LINEAR, s, 2);
    return 0;
}

/* ---- UOS: the clipping threshold 7.25 -------------------------------------------------------- */

/* Blocks of 32 quantized to MXFP4 twice: with the FLOOR scale X (values above 6X clip) and with
** 2X.  For blocks whose r = amax / 2^(floor(log2 amax) - 2) lies in (6, 8) the difference of their
** squared errors (in units of X^2), averaged in bins of r, crosses zero at the threshold UOS should
** use; the crossing is interpolated between bin centres. */
#define UOS_BINS 32
static int uos_crossover_one(qs_gen_kind kind, uint64_t seed, size_t nblocks, double *cross, double *mean_out,
                             qs_err *e)
{
    const qs_format *f = need("mxfp4", e);
    if (!f) return -1;
    size_t n = nblocks * 32;
    float *x = gen(kind, seed, n, 1.0), *ya = malloc(n * sizeof(float)), *yb = malloc(n * sizeof(float));
    if (!x || !ya || !yb) { free(x); free(ya); free(yb); return qs_fail(e, "out of memory"); }
    qs_qopts a = {0}, b = {0};
    a.scale_rule = b.scale_rule = QS_SCALE_UOS;
    a.uos_qmax = 8.0;   /* never bump: FLOOR's X */
    b.uos_qmax = 6.0;   /* bump every r > 6: 2X */
    if (fakeq(f, &a, x, n, ya, e) || fakeq(f, &b, x, n, yb, e)) { free(x); free(ya); free(yb); return -1; }
    double sum[UOS_BINS] = {0};
    size_t cnt[UOS_BINS] = {0};
    for (size_t blk = 0; blk < nblocks; blk++) {
        const float *xb = x + blk * 32;
        double amax = 0;
        for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(xb[i]));
        if (!(amax > 0)) continue;
        double X = ldexp(1, (int)floor(log2(amax)) - 2), r = amax / X;
        if (!(r > 6 && r < 8)) continue;
        double ea = 0, eb = 0;
        for (int i = 0; i < 32; i++) {
            double da = ya[blk * 32 + i] - (double)xb[i], db = yb[blk * 32 + i] - (double)xb[i];
            ea += da * da;
            eb += db * db;
        }
        int k = (int)((r - 6) / 2 * UOS_BINS);
        k = k < 0 ? 0 : k >= UOS_BINS ? UOS_BINS - 1 : k;
        sum[k] += (ea - eb) / (X * X);
        cnt[k]++;
    }
    free(x); free(ya); free(yb);
    *cross = NAN;
    for (int k = 0; k < UOS_BINS; k++) mean_out[k] = cnt[k] ? sum[k] / (double)cnt[k] : NAN;
    for (int k = 0; k + 1 < UOS_BINS; k++) {
        double m0 = mean_out[k], m1 = mean_out[k + 1];
        if (m0 <= 0 && m1 > 0) {
            double c0 = 6 + 2 * (k + 0.5) / UOS_BINS, c1 = 6 + 2 * (k + 1.5) / UOS_BINS;
            *cross = c0 + (c1 - c0) * (0 - m0) / (m1 - m0);
            break;
        }
    }
    return 0;
}

static int uos_crossover(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t nb = quick ? (size_t)1 << 15 : (size_t)1 << 18;
    const qs_gen_kind kinds[3] = {QS_GEN_GAUSSIAN, QS_GEN_LAPLACE, QS_GEN_UNIFORM};
    const char *names[3] = {"Gaussian", "Laplace", "uniform"};
    double c[3], mean[3][UOS_BINS], rc[UOS_BINS];
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        if (uos_crossover_one(kinds[k], 2000 + (uint64_t)k, nb, &c[k], mean[k], e)) return -1;
        ok &= fabs(c[k] - 7.25) <= 0.2;
    }
    for (int i = 0; i < UOS_BINS; i++) rc[i] = 6 + 2 * (i + 0.5) / UOS_BINS;
    o->value = c[0];
    snprintf(o->measured, sizeof o->measured, "%.2f / %.2f / %.2f", c[0], c[1], c[2]);
    snprintf(o->detail, sizeof o->detail,
             "%zu blocks of 32 per distribution (%s, %s, %s; seeds 2000..2002), MXFP4 RNE: squared error with "
             "the FLOOR scale X (clipping above 6X) minus with 2X, in units of X^2, averaged in %d bins of "
             "r = amax/X in (6, 8); the threshold is where it changes sign. The project's uniform-magnitude "
             "model gives exactly 7.25 (docs/claims.md); the paper's own derivation was not available.",
             nb, names[0], names[1], names[2], UOS_BINS);
    if (!ok) APPEND(o->detail, " At least one distribution is more than 0.2 from 7.25.");
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    qs_line_data s[3] = {{names[0], UOS_BINS, rc, mean[0]}, {names[1], UOS_BINS, rc, mean[1]},
                         {names[2], UOS_BINS, rc, mean[2]}};
    o->fig = qs_plot_lines("UOS: clip at X or double the scale? (MXFP4 blocks of 32)", "r = block amax / X",
                           QS_AX_LINEAR, "mean SSE(X) - SSE(2X), units of X^2", QS_AX_LINEAR, s, 3);
    if (o->fig) {
        double vx[2] = {7.25, 7.25};
        qs_series *v = qs_fig_add(o->fig, QS_SER_VLINE, "7.25", vx, NULL, 1);
        if (v) v->faint = 1;
    }
    return 0;
}

/* ---- PNQ: row sums ------------------------------------------------------------------------- */

/* Attention probabilities of R rows of L keys (scores N(0, 2^2)): normalize-then-quantize
** Q(P~ / l) versus PNQ, Q(P~) divided by its own row sum.  UOS MXFP4 in blocks of 32 keys. */
static int pnq_rowsum(int quick, qs_claim_out *o, qs_err *e)
{
    const qs_format *f = need("mxfp4", e);
    if (!f) return -1;
    const size_t R = quick ? 64 : 512, L = 1024;
    float *s = gen(QS_GEN_GAUSSIAN, 3000, R * L, 2.0), *p = malloc(L * sizeof(float)), *q = malloc(L * sizeof(float));
    if (!s || !p || !q) { free(s); free(p); free(q); return qs_fail(e, "out of memory"); }
    qs_qopts u = {0};
    u.scale_rule = QS_SCALE_UOS;
    double ntq_max = 0, ntq_mean = 0, pnq_max = 0;
    for (size_t r = 0; r < R; r++) {
        const float *sr = s + r * L;
        float m = sr[0];
        for (size_t i = 1; i < L; i++) m = sr[i] > m ? sr[i] : m;
        double l = 0;
        for (size_t i = 0; i < L; i++) { p[i] = expf(sr[i] - m); l += p[i]; }
        /* PNQ: quantize the un-normalized P~, divide by the sum of what PV consumes */
        if (fakeq(f, &u, p, L, q, e)) goto fail;
        double lq = 0;
        for (size_t i = 0; i < L; i++) lq += q[i];
        float inv = (float)(1.0 / lq);
        double sp = 0;
        for (size_t i = 0; i < L; i++) sp += (double)(q[i] * inv);
        pnq_max = fmax(pnq_max, fabs(sp - 1));
        /* normalize first, then quantize */
        for (size_t i = 0; i < L; i++) p[i] = (float)(p[i] / l);
        if (fakeq(f, &u, p, L, q, e)) goto fail;
        double sn = 0;
        for (size_t i = 0; i < L; i++) sn += q[i];
        ntq_max = fmax(ntq_max, fabs(sn - 1));
        ntq_mean += fabs(sn - 1) / (double)R;
    }
    free(s); free(p); free(q);
    int ok = pnq_max <= 1e-5 && ntq_mean > 100 * pnq_max;
    o->value = pnq_max;
    snprintf(o->measured, sizeof o->measured, "PNQ max |sum-1| %.1e; normalize-then-quantize mean %.1e, max %.1e",
             pnq_max, ntq_mean, ntq_max);
    snprintf(o->detail, sizeof o->detail,
             "%zu rows of %zu keys, scores N(0, 2^2) (seed 3000), P~ = exp(S - rowmax); UOS MXFP4 (Qmax 7.25) in "
             "blocks of 32 keys. PNQ's weights are Q(P~) / rowsum(Q(P~)) (FP32 reciprocal): their sum is 1 up to "
             "FP32 rounding by construction.", R, L);
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
fail:
    free(s); free(p); free(q);
    return -1;
}

const qs_claim qs_claims_formats[] = {
    {"hif8.binades", "HiFloat8 (arXiv 2409.16626)", "HiF8 spans 38 binades (FP16 40, E4M3 18, E5M2 32)", "38",
     "exact", 1, hif8_binades},
    {"hif8.precision", "HiFloat8 (arXiv 2409.16626)",
     "7 exponents with 3 mantissa bits, 8 with 2, 16 with 1 (plus 7 denormal binades)", "7 / 8 / 16", "exact", 1,
     hif8_precision},
    {"hif8.values", "HiFloat8 (arXiv 2409.16626)", "252 finite non-zero values, max 2^15, min 2^-22, one NaN, ±Inf",
     "252", "exact", 1, hif8_valueset},
    {"hif8.ta-ties", "HiFloat8 (arXiv 2409.16626)", "TA rounds ties away from zero (RNE: to even)",
     "all ties away", "exact", 1, hif8_ties},
    {"hif4.mse", "HiFloat4 (arXiv 2602.11287)", "Gaussian MSE HiF4 : NVFP4(+PTS) : MXFP4", "1 : 1.32 : 1.89",
     "±3 %", 0, hif4_mse},
    {"uos.threshold", "MXAttention (arXiv 2607.24377)",
     "Qmax = 7.25 is the clip-or-double break-even of MXFP4 block scales", "7.25", "±0.2 per distribution", 0,
     uos_crossover},
    {"pnq.rowsum", "MXAttention (arXiv 2607.24377)",
     "PNQ's row sums are exact by construction (normalize-then-quantize's are not)", "exact", "|sum-1| <= 1e-5", 1,
     pnq_rowsum},
};
const size_t qs_claims_formats_n = sizeof qs_claims_formats / sizeof qs_claims_formats[0];
