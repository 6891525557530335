/*
** Mismatch diagnostics, AIS-R and corrections per step (see ais.h and docs/rl.md).
*/
#include "ais.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define X(name) #name,
const char *const qs_ais_field_names[QS_AIS_NFIELDS] = {QS_AIS_FIELDS(X)};
#undef X

static const char *const kMethods[QS_CORR_COUNT] = {"none", "tis", "seq_tis", "mis", "seq_mis", "geo", "ais"};

const char *qs_ais_method_name(qs_ais_method m) { return (unsigned)m < QS_CORR_COUNT ? kMethods[m] : "?"; }

int qs_ais_method_parse(const char *s, qs_ais_method *m)
{
    for (int i = 0; i < QS_CORR_COUNT; i++)
        if (!strcmp(s, kMethods[i])) { *m = (qs_ais_method)i; return 0; }
    /* aliases */
    static const struct { const char *a; qs_ais_method m; } al[] = {
        {"token_tis", QS_CORR_TIS}, {"icepop", QS_CORR_MIS}, {"token_mis", QS_CORR_MIS}, {"geo_rs", QS_CORR_GEO},
        {"geo-mean", QS_CORR_GEO}, {"ais_r", QS_CORR_AIS}, {"ais-r", QS_CORR_AIS}, {"seq-tis", QS_CORR_SEQ_TIS},
        {"seq-mis", QS_CORR_SEQ_MIS}};
    for (size_t i = 0; i < sizeof al / sizeof al[0]; i++)
        if (!strcmp(s, al[i].a)) { *m = al[i].m; return 0; }
    return -1;
}

int qs_ais_field_find(const char *name)
{
    for (int i = 0; i < QS_AIS_NFIELDS; i++)
        if (!strcmp(name, qs_ais_field_names[i])) return i;
    return -1;
}

void qs_ais_opts_default(qs_ais_opts *o)
{
    memset(o, 0, sizeof *o);
    o->C = 2;
    o->clamp = 20;
    o->tau_s = 0.05;
    o->kappa = 0.5;
    o->beta = 0.9;
    o->lambda_min = 0;
    o->lambda_max = 1;
    o->lambda_fixed = -1;
    o->mis_lo = 0.5;
    o->mis_hi = 2;
    o->seq_lo = 0.5;
    o->seq_hi = 2;
    o->geo_lo = 0.999;
    o->geo_hi = 1.001;
    o->grpo_eps = 1e-6;
}

char *qs_ais_opts_json(const qs_ais_opts *o)
{
    json_t *j = json_object();
    json_object_set_new(j, "C", json_real(o->C));
    json_object_set_new(j, "clamp", json_real(o->clamp));
    json_object_set_new(j, "tau_s", json_real(o->tau_s));
    json_object_set_new(j, "kappa", json_real(o->kappa));
    json_object_set_new(j, "beta", json_real(o->beta));
    json_object_set_new(j, "lambda_min", json_real(o->lambda_min));
    json_object_set_new(j, "lambda_max", json_real(o->lambda_max));
    json_object_set_new(j, "lambda0", json_string(o->lambda0_zero ? "zero" : "raw"));
    json_object_set_new(j, "lambda_fixed", o->lambda_fixed >= 0 ? json_real(o->lambda_fixed) : json_null());
    json_object_set_new(j, "amplification", json_string(o->vamp_grad ? "gradient" : "sequence_ess"));
    json_object_set_new(j, "ais_is", json_string(o->ais_seq ? "sequence" : "token"));
    json_object_set_new(j, "w_veto", json_real(o->w_veto));
    json_object_set_new(j, "mis_band", json_pack("[f,f]", o->mis_lo, o->mis_hi));
    json_object_set_new(j, "seq_band", json_pack("[f,f]", o->seq_lo, o->seq_hi));
    json_object_set_new(j, "geo_band", json_pack("[f,f]", o->geo_lo, o->geo_hi));
    json_object_set_new(j, "grpo_eps", json_real(o->grpo_eps));
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

static double clampd(double x, double c) { return x > c ? c : x < -c ? -c : x; }

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's default ("linear") quantile of sorted values */
static double quantile(const double *s, size_t n, double q)
{
    if (!n) return NAN;
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    if (lo + 1 >= n) return s[n - 1];
    double f = pos - (double)lo;
    return s[lo] + (s[lo + 1] - s[lo]) * f;
}

typedef struct seqinfo {
    size_t t0, t1;         /* token range [t0, t1) */
    size_t T;              /* valid tokens */
    double D;              /* Σ δ (clamped per token) */
    double Draw;           /* Σ δ unclamped: the ESS is shift-invariant and needs no safety bound */
    double rho;            /* exp(clamp(D)) */
    double geo;            /* exp(D / T) */
    double slr, slt;       /* Σ lp_rollout, Σ lp_train over valid tokens */
    double reward;         /* NaN when absent */
    int64_t grp;
    double A;              /* advantage (computed) */
} seqinfo;

static int cmp_grp(const void *a, const void *b)
{
    const seqinfo *x = *(const seqinfo *const *)a, *y = *(const seqinfo *const *)b;
    if (x->grp != y->grp) return x->grp < y->grp ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Split a batch into sequences (valid-token sums).  *out malloc'd, *nseq all sequences. */
static int split_seqs(const qs_ais_opts *o, const qs_ais_batch *b, seqinfo **out, size_t *nseq, qs_err *e)
{
    size_t cap = 64, n = 0;
    seqinfo *s = malloc(cap * sizeof *s);
    if (!s) return qs_fail(e, "out of memory");
    for (size_t t = 0; t < b->n;) {
        size_t u = t;
        while (u < b->n && b->seq[u] == b->seq[t]) u++;
        if (n == cap) {
            seqinfo *ns = realloc(s, 2 * cap * sizeof *s);
            if (!ns) { free(s); return qs_fail(e, "out of memory"); }
            s = ns;
            cap *= 2;
        }
        seqinfo q = {t, u, 0, 0, 0, 0, 0, 0, 0, NAN, -1, NAN};
        for (size_t k = t; k < u; k++) {
            if (b->reward && isnan(q.reward) && !isnan(b->reward[k])) q.reward = b->reward[k];
            if (b->grp && q.grp < 0 && b->grp[k] >= 0) q.grp = b->grp[k];
            if (b->mask && !b->mask[k]) continue;
            q.T++;
            q.D += clampd(b->lp_t[k] - b->lp_r[k], o->clamp);
            q.Draw += b->lp_t[k] - b->lp_r[k];
            q.slr += b->lp_r[k];
            q.slt += b->lp_t[k];
        }
        q.rho = exp(clampd(q.D, o->clamp));
        q.geo = q.T ? exp(q.D / (double)q.T) : NAN;
        s[n++] = q;
        t = u;
    }
    /* GRPO advantages from rewards and groups: (r - mean_g) / (std_g + eps), std with n - 1 (torch),
    ** a group of one gets mean 0, std 1 (verl); sequences without a group form one group */
    seqinfo **ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix) { free(s); return qs_fail(e, "out of memory"); }
    for (size_t i = 0; i < n; i++) ix[i] = &s[i];
    qsort(ix, n, sizeof *ix, cmp_grp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && ix[j]->grp == ix[i]->grp) j++;
        double sum = 0, ss = 0;
        size_t m = 0;
        for (size_t k = i; k < j; k++) if (!isnan(ix[k]->reward)) { sum += ix[k]->reward; m++; }
        double mean = m ? sum / (double)m : NAN;
        for (size_t k = i; k < j; k++) if (!isnan(ix[k]->reward)) ss += (ix[k]->reward - mean) * (ix[k]->reward - mean);
        double sd = m > 1 ? sqrt(ss / (double)(m - 1)) : 1;
        if (m == 1) mean = 0;
        for (size_t k = i; k < j; k++) ix[k]->A = (ix[k]->reward - mean) / (sd + o->grpo_eps);
        i = j;
    }
    free(ix);
    *out = s;
    *nseq = n;
    return 0;
}

static inline int valid(const qs_ais_batch *b, size_t k) { return !b->mask || b->mask[k]; }

/* weight of token k (in sequence q) under method m; *trunc = 1 when a cap acted */
static double method_w(const qs_ais_opts *o, qs_ais_method m, const qs_ais_batch *b, size_t k, const seqinfo *q,
                       double lambda, int *trunc)
{
    double w = exp(clampd(b->lp_t[k] - b->lp_r[k], o->clamp));
    *trunc = 0;
    switch (m) {
    case QS_CORR_NONE: return 1;
    case QS_CORR_TIS: if (w > o->C) { *trunc = 1; return o->C; } return w;
    case QS_CORR_SEQ_TIS: if (q->rho > o->C) { *trunc = 1; return o->C; } return q->rho;
    case QS_CORR_MIS: return w >= o->mis_lo && w <= o->mis_hi ? w : 0;
    case QS_CORR_SEQ_MIS: return q->rho >= o->seq_lo && q->rho <= o->seq_hi ? q->rho : 0;
    case QS_CORR_GEO: return q->geo >= o->geo_lo && q->geo <= o->geo_hi ? 1 : 0;
    case QS_CORR_AIS: {
        if (o->w_veto > 0 && w < o->w_veto) return 0;
        double x = o->ais_seq ? q->rho : w;
        if (x > o->C) { *trunc = 1; x = o->C; }
        return (1 - lambda) + lambda * x;
    }
    default: return NAN;
    }
}

int qs_ais_token_weights(const qs_ais_opts *o, qs_ais_method m, const qs_ais_batch *b, double lambda, double *w, qs_err *e)
{
    seqinfo *s;
    size_t ns;
    if (split_seqs(o, b, &s, &ns, e)) return -1;
    for (size_t i = 0; i < ns; i++)
        for (size_t k = s[i].t0; k < s[i].t1; k++) {
            int tr;
            w[k] = valid(b, k) ? method_w(o, m, b, k, &s[i], lambda, &tr) : 0;
        }
    free(s);
    return 0;
}

/* The token-level diagnostics of one step (N valid tokens; ws: room for N weights, left sorted). */
static void token_stats(const qs_ais_opts *o, const qs_ais_batch *b, size_t N, double *ws, double *v)
{
    double C = o->C, rmaxd = -INFINITY, sabs = 0, mabs = 0, k1 = 0, k2 = 0, k3 = 0, sw = 0, sw2 = 0, wmin = INFINITY,
           wmax = -INFINITY, ngt = 0, nlt = 0, swc = 0, swc2 = 0;
    double spr = 0, spt = 0, spr2 = 0, spt2 = 0, sprt = 0, pdmax = 0, pdsum = 0, sent = 0, nent = 0;
    size_t j = 0;
    for (size_t k = 0; k < b->n; k++) {
        if (!valid(b, k)) continue;
        double raw = b->lp_t[k] - b->lp_r[k], d = clampd(raw, o->clamp), w = exp(d);
        ws[j++] = w;
        if (raw > rmaxd) rmaxd = raw;
        sabs += fabs(d);
        if (fabs(raw) > mabs) mabs = fabs(raw);
        k1 += -d;
        k2 += 0.5 * d * d;
        k3 += w - 1 - d;
        sw += w;
        sw2 += w * w;
        if (w < wmin) wmin = w;
        if (w > wmax) wmax = w;
        ngt += w > C;
        nlt += w < 1 / C;
        double wc = w > C ? C : w < 1 / C ? 1 / C : w;
        swc += wc;
        swc2 += wc * wc;
        double pr = exp(b->lp_r[k]), pt = exp(b->lp_t[k]);
        spr += pr; spt += pt; spr2 += pr * pr; spt2 += pt * pt; sprt += pr * pt;
        double pd = fabs(pt - pr);
        pdsum += pd;
        if (pd > pdmax) pdmax = pd;
        if (b->entropy && !isnan(b->entropy[k])) { sent += b->entropy[k]; nent++; }
    }
    double n = (double)N;
    v[QS_AIS_F_mean_abs_dlogp] = sabs / n;
    v[QS_AIS_F_max_abs_dlogp] = mabs;
    v[QS_AIS_F_kl_k1] = k1 / n;
    v[QS_AIS_F_kl_k2] = k2 / n;
    v[QS_AIS_F_kl_k3] = k3 / n;
    v[QS_AIS_F_m2] = 2 * k2 / n;
    v[QS_AIS_F_chi2_tok] = sw2 / n - 1;
    /* ESS in log space: exp(2 LSE(δ) - LSE(2δ)) / N, shifted by the max.  ESS and CV are invariant
    ** under a common factor, so they use the unclamped δ: the ±clamp would make every weight beyond
    ** it equal and report a uniform batch.  CV from a second, centred pass. */
    double l1 = 0, l2 = 0;
    for (size_t k = 0; k < b->n; k++) {
        if (!valid(b, k)) continue;
        double d = b->lp_t[k] - b->lp_r[k] - rmaxd;
        l1 += exp(d);
        l2 += exp(2 * d);
    }
    v[QS_AIS_F_ess_tok] = l1 * l1 / (l2 * n);
    double csr = 0;
    for (size_t k = 0; k < b->n; k++) {
        if (!valid(b, k)) continue;
        double u = exp(b->lp_t[k] - b->lp_r[k] - rmaxd) - l1 / n;
        csr += u * u;
    }
    double cv_raw = sqrt(csr / n) / (l1 / n);
    double wm = sw / n;
    /* population variance from a second, centred pass (exact for tiny spreads) */
    double cs = 0;
    for (size_t k = 0; k < N; k++) cs += (ws[k] - wm) * (ws[k] - wm);
    double var = cs / n;
    v[QS_AIS_F_w_mean] = wm;
    v[QS_AIS_F_w_std] = sqrt(var);
    v[QS_AIS_F_cv_w] = cv_raw;
    v[QS_AIS_F_w_min] = wmin;
    v[QS_AIS_F_w_max] = wmax;
    double mc = swc / n;
    v[QS_AIS_F_ess_tok_clamped] = 1 / ((swc2 / n) / (mc * mc));
    v[QS_AIS_F_frac_w_gt_c] = ngt / n;
    v[QS_AIS_F_frac_w_lt_inv_c] = nlt / n;
    qsort(ws, N, sizeof *ws, cmp_d);
    static const double qs[7] = {0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99};
    for (int q = 0; q < 7; q++) v[QS_AIS_F_w_p01 + q] = quantile(ws, N, qs[q]);
    double cov = sprt / n - (spr / n) * (spt / n), vr = spr2 / n - (spr / n) * (spr / n), vt = spt2 / n - (spt / n) * (spt / n);
    v[QS_AIS_F_prob_pearson] = vr > 0 && vt > 0 ? cov / sqrt(vr * vt) : NAN;
    v[QS_AIS_F_probs_diff_max] = pdmax;
    v[QS_AIS_F_probs_diff_mean] = pdsum / n;
    v[QS_AIS_F_entropy_mean] = nent ? sent / nent : NAN;

}

/* The sequence-level diagnostics of one step (M sequences with tokens). */
static void seq_stats(const qs_ais_opts *o, const qs_ais_batch *b, const seqinfo *s, size_t ns, size_t M, double *v)
{
    double C = o->C, sadv = 0, nadv = 0;
    double rmax = -INFINITY, sr2 = 0, sgt = 0, slt = 0, rppl = 0, tppl = 0, rlp = 0, tlp = 0, lpd = 0, lpda = 0,
           lpdmax = -INFINITY, lpdmin = INFINITY, pratio = 0, srew = 0, nrew = 0;
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].T) continue;
        if (s[i].Draw > rmax) rmax = s[i].Draw;
        sr2 += s[i].rho * s[i].rho;
        sgt += s[i].rho > C;
        slt += s[i].rho < 1 / C;
        double T = (double)s[i].T, mr = s[i].slr / T, mt = s[i].slt / T;
        rppl += exp(-mr);
        tppl += exp(-mt);
        rlp += -mr;
        tlp += -mt;
        double dd = mr - mt;
        lpd += dd;
        lpda += fabs(dd);
        if (dd > lpdmax) lpdmax = dd;
        if (dd < lpdmin) lpdmin = dd;
        pratio += exp(dd);
        if (!isnan(s[i].reward)) { srew += s[i].reward; nrew++; }
        for (size_t k = s[i].t0; k < s[i].t1; k++) {
            if (!valid(b, k)) continue;
            double a = b->adv && !isnan(b->adv[k]) ? b->adv[k] : s[i].A;
            if (!isnan(a)) { sadv += a; nadv++; }
        }
    }
    double m = (double)M;
    v[QS_AIS_F_chi2_seq] = sr2 / m - 1;
    {
        double a1 = 0, a2 = 0;
        for (size_t i = 0; i < ns; i++) {
            if (!s[i].T) continue;
            double d = s[i].Draw - rmax;   /* unclamped: a clamp at ±20 reads ESS 1 once all Δ pass it */
            a1 += exp(d);
            a2 += exp(2 * d);
        }
        v[QS_AIS_F_ess_seq] = a1 * a1 / (a2 * m);
    }
    {
        double a = 0, mn = INFINITY, mx = -INFINITY, g = 0, gmn = INFINITY, gmx = -INFINITY;
        for (size_t i = 0; i < ns; i++) {
            if (!s[i].T) continue;
            a += s[i].rho;
            mn = fmin(mn, s[i].rho);
            mx = fmax(mx, s[i].rho);
            g += s[i].geo;
            gmn = fmin(gmn, s[i].geo);
            gmx = fmax(gmx, s[i].geo);
        }
        double mean = a / m, css = 0;
        for (size_t i = 0; i < ns; i++) if (s[i].T) css += (s[i].rho - mean) * (s[i].rho - mean);
        v[QS_AIS_F_rho_mean] = mean;
        v[QS_AIS_F_rho_std] = sqrt(css / m);
        v[QS_AIS_F_rho_min] = mn;
        v[QS_AIS_F_rho_max] = mx;
        v[QS_AIS_F_rho_geo_mean] = g / m;
        v[QS_AIS_F_rho_geo_min] = gmn;
        v[QS_AIS_F_rho_geo_max] = gmx;
    }
    v[QS_AIS_F_frac_seq_gt_c] = sgt / m;
    v[QS_AIS_F_frac_seq_lt_inv_c] = slt / m;
    v[QS_AIS_F_rollout_ppl] = rppl / m;
    v[QS_AIS_F_training_ppl] = tppl / m;
    v[QS_AIS_F_rollout_log_ppl] = rlp / m;
    v[QS_AIS_F_training_log_ppl] = tlp / m;
    v[QS_AIS_F_log_ppl_diff] = lpd / m;
    v[QS_AIS_F_log_ppl_abs_diff] = lpda / m;
    v[QS_AIS_F_log_ppl_diff_max] = lpdmax;
    v[QS_AIS_F_log_ppl_diff_min] = lpdmin;
    v[QS_AIS_F_ppl_ratio] = pratio / m;
    v[QS_AIS_F_reward_mean] = nrew ? srew / nrew : NAN;
    v[QS_AIS_F_adv_mean] = nadv ? sadv / nadv : NAN;

}

/* AIS-R's R, D, S, Vamp and raw lambda (project reconstruction). */
static int ais_r(const qs_ais_opts *o, const qs_ais_batch *b, const seqinfo *s, size_t ns, double *v, qs_err *e)
{
    double C = o->C;
    double R = v[QS_AIS_F_ess_tok], D = v[QS_AIS_F_mean_abs_dlogp], S = 1 - exp(-D / o->tau_s), Vamp;
    if (o->vamp_grad) {
        double s1w = 0, s2w = 0, s11 = 0, s21 = 0, na = 0;
        for (size_t i = 0; i < ns; i++)
            for (size_t k = s[i].t0; k < s[i].t1; k++) {
                if (!valid(b, k)) continue;
                double a = b->adv && !isnan(b->adv[k]) ? b->adv[k] : s[i].A;
                if (isnan(a)) continue;
                double w = exp(clampd(b->lp_t[k] - b->lp_r[k], o->clamp));
                if (w > C) w = C;
                s1w += fabs(w * a); s2w += w * a * w * a; s11 += fabs(a); s21 += a * a; na++;
            }
        if (!na) return qs_fail(e, "step %lld: gradient-level amplification needs advantages (adv) or rewards", (long long)b->step);
        double Ew = s2w > 0 ? s1w * s1w / (na * s2w) : 1, E1 = s21 > 0 ? s11 * s11 / (na * s21) : 1;
        Vamp = 1 - Ew / E1;
        Vamp = Vamp < 0 ? 0 : Vamp > 1 ? 1 : Vamp;
    } else {
        Vamp = 1 - v[QS_AIS_F_ess_seq];
        if (Vamp < 0) Vamp = 0;   /* rounding: ESS can exceed 1 by an ulp */
    }
    v[QS_AIS_F_ais_R] = R;
    v[QS_AIS_F_ais_D] = D;
    v[QS_AIS_F_ais_S] = S;
    v[QS_AIS_F_ais_vamp] = Vamp;
    v[QS_AIS_F_ais_lambda_raw] = S * R * (1 - o->kappa * Vamp);

    return 0;
}

/* Weight summaries of the lambda-independent methods (two passes: centred variance). */
static void method_summaries(const qs_ais_opts *o, const qs_ais_batch *b, const seqinfo *s, size_t ns, size_t N, double *ws,
                             double *v)
{
    double n = (double)N;
    for (int mth = 0; mth < QS_CORR_COUNT; mth++) {
        if (mth == QS_CORR_AIS) continue;
        double a = 0, a2 = 0, mn = INFINITY, mx = -INFINITY, z = 0, tr = 0;
        size_t jj = 0;
        for (size_t i = 0; i < ns; i++)
            for (size_t k = s[i].t0; k < s[i].t1; k++) {
                if (!valid(b, k)) continue;
                int t;
                double w = method_w(o, (qs_ais_method)mth, b, k, &s[i], 0, &t);
                ws[jj++] = w;
                a += w; a2 += w * w; z += w == 0; tr += t;
                if (w < mn) mn = w;
                if (w > mx) mx = w;
            }
        double *f = &v[QS_AIS_W0 + QS_AIS_WN * mth];
        double mean = a / n, css = 0;
        for (size_t q = 0; q < N; q++) css += (ws[q] - mean) * (ws[q] - mean);
        f[0] = mean; f[1] = sqrt(css / n); f[2] = mn; f[3] = mx; f[4] = z / n; f[5] = tr / n;
        f[6] = a2 > 0 ? a * a / (n * a2) : NAN;
    }
}

/* The AIS-R weights' sums, for lambda applied later (qs_ais_apply_lambda). */
static void ais_sums(const qs_ais_opts *o, const qs_ais_batch *b, const seqinfo *s, size_t ns, qs_ais_row *row)
{
    double C = o->C;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < ns; i++)
            for (size_t k = s[i].t0; k < s[i].t1; k++) {
                if (!valid(b, k)) continue;
                double w = exp(clampd(b->lp_t[k] - b->lp_r[k], o->clamp));
                if (o->w_veto > 0 && w < o->w_veto) { if (!pass) row->n_veto++; continue; }
                double x = o->ais_seq ? s[i].rho : w;
                if (x > C) { x = C; if (!pass) row->a_trunc++; }
                if (pass) { double xm = row->a_s1 / row->a_n; row->a_css += (x - xm) * (x - xm); continue; }
                row->a_n++; row->a_s1 += x; row->a_s2 += x * x;
                if (x < row->a_min) row->a_min = x;
                if (x > row->a_max) row->a_max = x;
            }
}

int qs_ais_step(const qs_ais_opts *o, const qs_ais_batch *b, qs_ais_row *row, qs_err *e)
{
    double *v = row->v;
    for (int i = 0; i < QS_AIS_NFIELDS; i++) v[i] = NAN;
    row->a_n = row->a_s1 = row->a_s2 = row->a_css = row->a_trunc = row->n_veto = 0;
    row->a_min = INFINITY;
    row->a_max = -INFINITY;
    v[QS_AIS_F_step] = (double)b->step;
    seqinfo *s;
    size_t ns;
    if (split_seqs(o, b, &s, &ns, e)) return -1;
    size_t N = 0, masked = 0;
    for (size_t k = 0; k < b->n; k++) { if (valid(b, k)) N++; else masked++; }
    v[QS_AIS_F_n_tok] = (double)N;
    v[QS_AIS_F_n_masked] = (double)masked;
    size_t M = 0;
    for (size_t i = 0; i < ns; i++) M += s[i].T > 0;
    v[QS_AIS_F_n_seq] = (double)M;
    if (!N) { free(s); return 0; }
    double *ws = malloc(N * sizeof *ws);
    if (!ws) { free(s); return qs_fail(e, "out of memory"); }
    token_stats(o, b, N, ws, v);
    seq_stats(o, b, s, ns, M, v);
    int rc = ais_r(o, b, s, ns, v, e);
    if (!rc) {
        method_summaries(o, b, s, ns, N, ws, v);
        ais_sums(o, b, s, ns, row);
    }
    free(ws);
    free(s);
    return rc;
}

double qs_ais_lambda_next(const qs_ais_opts *o, double prev, double raw, int first)
{
    if (o->lambda_fixed >= 0) return o->lambda_fixed;
    double lam = first ? (o->lambda0_zero ? 0 : raw) : o->beta * prev + (1 - o->beta) * raw;
    return lam < o->lambda_min ? o->lambda_min : lam > o->lambda_max ? o->lambda_max : lam;
}

void qs_ais_apply_lambda(qs_ais_row *row, double lam)
{
    double *v = row->v;
    v[QS_AIS_F_ais_lambda] = lam;
    /* ŵ = (1 − λ) + λ x on non-vetoed tokens, 0 on vetoed ones */
    double N = v[QS_AIS_F_n_tok], an = row->a_n;
    if (!(N > 0)) return;
    double s1 = (1 - lam) * an + lam * row->a_s1;
    double s2 = (1 - lam) * (1 - lam) * an + 2 * lam * (1 - lam) * row->a_s1 + lam * lam * row->a_s2;
    double *f = &v[QS_AIS_W0 + QS_AIS_WN * QS_CORR_AIS];
    double mean = s1 / N;
    /* centred: λ² Σ(x − x̄)² + an (ŵ(x̄) − mean)² over kept tokens, plus the vetoed zeros */
    double xbar = an > 0 ? row->a_s1 / an : 0, wbar = (1 - lam) + lam * xbar;
    double css = lam * lam * row->a_css + an * (wbar - mean) * (wbar - mean) + row->n_veto * mean * mean;
    f[0] = mean;
    f[1] = sqrt(css / N);
    f[2] = row->n_veto > 0 ? 0 : (1 - lam) + lam * row->a_min;
    f[3] = an > 0 ? (1 - lam) + lam * row->a_max : 0;
    f[4] = row->n_veto / N;
    f[5] = lam > 0 ? row->a_trunc / N : 0;
    f[6] = s2 > 0 ? s1 * s1 / (N * s2) : NAN;
}

void qs_ais_finish(const qs_ais_opts *o, qs_ais_row *rows, size_t n)
{
    double lam = 0;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        double raw = rows[i].v[QS_AIS_F_ais_lambda_raw];
        if (isnan(raw)) continue;                     /* a step without valid tokens */
        lam = qs_ais_lambda_next(o, lam, raw, first);
        first = 0;
        qs_ais_apply_lambda(&rows[i], lam);
    }
}
