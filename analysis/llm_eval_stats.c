/*
** The `llm eval` statistics table and its consumers' helpers (llm_eval_stats.h).
*/
#include "llm_eval_stats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../store/json_out.h"

#define OFF(f) offsetof(qs_eval_summary, f)
/* a number of configurations, shown nowhere */
#define CFG(k, f) {.key = k, .off = OFF(f)}
#define KLQ(k, q) {.key = "kl_" k, .off = OFF(kl_q) + (q) * sizeof(double)}
#define DPQ(k, q) {.key = "dp_" k, .off = OFF(dp_q) + (q) * sizeof(double)}
#define KL7(c, h) {c, h, 7, QS_EVF_KL7, NULL, 0, 0, 0}

const qs_evstat qs_evstats[QS_EVS_N] = {
    [QS_EVS_PPL] = {.key = "ppl", .off = OFF(ppl), .flags = QS_EVS_REF, .label = "PPL", .se = QS_EVS_PPL_SE,
                    .view = {{1, "PPL", 0, QS_EVF_SIG, "%s±%s", 0, 4, 0}, {1, "PPL", 9, QS_EVF_PRINTF, "%.4g", 0, 0, 0},
                             {1, "PPL", 0, QS_EVF_PRINTF, "%.4g ± %.2g", 0, 0, 0}}},
    [QS_EVS_PPL_SE] = {.key = "ppl_se", .off = OFF(ppl_se), .flags = QS_EVS_REF},
    [QS_EVS_NLL_MEAN] = {.key = "nll_mean", .off = OFF(nll_mean), .flags = QS_EVS_REF},
    [QS_EVS_NLL_SE] = {.key = "nll_se", .off = OFF(nll_se), .flags = QS_EVS_REF},

    [QS_EVS_KL_MEAN] = {.key = "kl_mean", .off = OFF(kl_mean), .label = "KL mean", .se = QS_EVS_KL_SE, .sort = 1,
                        .view = {{3, "KL mean", 0, QS_EVF_SIG, "%s±%s", 0, 5, 0}, KL7(3, "KL mean"),
                                 {3, "KL mean", 0, QS_EVF_PRINTF, "%.4g", 0, 0, 0}}},
    [QS_EVS_KL_SE] = CFG("kl_se", kl_se),
    [QS_EVS_KL_MIN] = KLQ("min", 0),
    [QS_EVS_KL_P0_1] = KLQ("p0_1", 1),
    [QS_EVS_KL_P1] = KLQ("p1", 2),
    [QS_EVS_KL_P5] = KLQ("p5", 3),
    [QS_EVS_KL_P10] = KLQ("p10", 4),
    [QS_EVS_KL_MEDIAN] = {.key = "kl_median", .off = OFF(kl_q) + 5 * sizeof(double), .label = "KL median",
                          .view = {{4, "median", 0, QS_EVF_SIG, "%s", 0, 5, 0}, {4, "median", 7, QS_EVF_KL7, NULL, 1, 0, 0},
                                   {4, "KL median", 0, QS_EVF_PRINTF, "%.4g", 0, 0, 0}}},
    [QS_EVS_KL_P90] = {.key = "kl_p90", .off = OFF(kl_q) + 6 * sizeof(double), .label = "KL p90",
                       .view = {{5, "p90", 0, QS_EVF_SIG, "%s", 0, 5, 0}}},
    [QS_EVS_KL_P95] = KLQ("p95", 7),
    [QS_EVS_KL_P99] = {.key = "kl_p99", .off = OFF(kl_q) + 8 * sizeof(double), .label = "KL p99",
                       .view = {{6, "p99", 0, QS_EVF_SIG, "%s", 0, 5, 0}, KL7(5, "KL p99"),
                                {5, "KL p99", 0, QS_EVF_PRINTF, "%.4g", 0, 0, 0}}},
    [QS_EVS_KL_P99_9] = KLQ("p99_9", 9),
    [QS_EVS_KL_MAX] = {.key = "kl_max", .off = OFF(kl_q) + 10 * sizeof(double), .label = "KL max",
                       .view = {{7, "max", 0, QS_EVF_SIG, "%s", 0, 4, 0}, KL7(6, "KL max"),
                                {6, "KL max", 0, QS_EVF_PRINTF, "%.4g", 0, 0, 0}}},

    [QS_EVS_TOP1] = {.key = "top1_agree", .off = OFF(top1), .label = "same top", .se = QS_EVS_TOP1_SE, .scale = 100,
                     .view = {{8, "same top", 0, QS_EVF_SIG, "%s%%±%s", 0, 3, 0}, {7, "top1%", 5, QS_EVF_PRINTF, "%.1f", 0, 0, 0},
                              {7, "same top %", 0, QS_EVF_PRINTF, "%.2f", 0, 0, 0}}},
    [QS_EVS_TOP1_SE] = CFG("top1_agree_se", top1_se),
    [QS_EVS_DP_RMS] = {.key = "dp_rms", .off = OFF(dp_rms), .label = "RMS dp", .se = QS_EVS_DP_RMS_SE,
                       .view = {{9, "RMS dp", 0, QS_EVF_SIG, "%s±%s", 0, 4, 0}, {8, "RMSdp", 6, QS_EVF_PRINTF, "%.4f", 0, 0, 0},
                                {8, "RMS Δp", 0, QS_EVF_PRINTF, "%.4g", 0, 0, 0}}},
    [QS_EVS_DP_RMS_SE] = CFG("dp_rms_se", dp_rms_se),
    [QS_EVS_DP_MEAN] = CFG("dp_mean", dp_mean),
    [QS_EVS_DP_MEAN_SE] = CFG("dp_mean_se", dp_mean_se),
    [QS_EVS_DP_MIN] = DPQ("min", 0),
    [QS_EVS_DP_P0_1] = DPQ("p0_1", 1),
    [QS_EVS_DP_P1] = DPQ("p1", 2),
    [QS_EVS_DP_P5] = DPQ("p5", 3),
    [QS_EVS_DP_P10] = DPQ("p10", 4),
    [QS_EVS_DP_MEDIAN] = DPQ("median", 5),
    [QS_EVS_DP_P90] = DPQ("p90", 6),
    [QS_EVS_DP_P95] = DPQ("p95", 7),
    [QS_EVS_DP_P99] = DPQ("p99", 8),
    [QS_EVS_DP_P99_9] = DPQ("p99_9", 9),
    [QS_EVS_DP_MAX] = DPQ("max", 10),

    [QS_EVS_LNRATIO] = CFG("ln_ppl_ratio", lnratio_mean),
    [QS_EVS_LNRATIO_SE] = CFG("ln_ppl_ratio_se", lnratio_se),
    [QS_EVS_PPL_RATIO] = CFG("ppl_ratio", ppl_ratio),
    [QS_EVS_PPL_RATIO_SE] = CFG("ppl_ratio_se", ppl_ratio_se),
    [QS_EVS_DPPL] = {.key = "dppl_rel", .off = OFF(dppl_rel), .label = "dPPL", .lo = QS_EVS_DPPL_LO, .hi = QS_EVS_DPPL_HI,
                     .scale = 100, .sort = 2,
                     .view = {{2, "dPPL [95% CI]", 0, QS_EVF_SIG, "%s%% [%s, %s]", 0, 2, 1},
                              {2, "dPPL%(95%)", 11, QS_EVF_INTERVAL, NULL, 0, 0, 0},
                              {2, "ΔPPL % [95% CI]", 0, QS_EVF_PRINTF, "%+.2f [%+.2f, %+.2f]", 0, 0, 0}}},
    [QS_EVS_DPPL_LO] = {.key = "dppl_rel_ci95", .elem = 1, .off = OFF(dppl_lo)},
    [QS_EVS_DPPL_HI] = {.key = "dppl_rel_ci95", .elem = 2, .off = OFF(dppl_hi)},
    [QS_EVS_PPL_DIFF] = CFG("ppl_diff", ppl_diff),
    [QS_EVS_PPL_DIFF_SE] = CFG("ppl_diff_se", ppl_diff_se),
    [QS_EVS_COR] = {.key = "cor_ln_ppl", .off = OFF(cor_lnppl), .label = "cor",
                    .view = {{10, "cor", 0, QS_EVF_SIG, "%s", 0, 4, 0}}},
};

double qs_evstat_value(const qs_eval_summary *s, int id)
{
    double v;
    memcpy(&v, (const char *)s + qs_evstats[id].off, sizeof v);
    return v;
}

static void put(json_t *j, const qs_eval_summary *s, int i)
{
    const qs_evstat *r = &qs_evstats[i];
    if (r->elem == 1)   /* an interval: [lo, hi] of this row and the next, null when not finite */
        json_object_set_new(j, r->key, json_pack("[o,o]", qs_json_num(qs_evstat_value(s, i)), qs_json_num(qs_evstat_value(s, i + 1))));
    else if (!r->elem)
        qs_json_set_num(j, r->key, qs_evstat_value(s, i));
}

void qs_evstats_put(json_t *j, const qs_eval_summary *s, int ref)
{
    for (int i = 1; i < QS_EVS_N; i++)
        if (!(qs_evstats[i].flags & QS_EVS_REF) == !ref) put(j, s, i);
}

void qs_evstats_put_ids(json_t *j, const qs_eval_summary *s, const int *ids, int n)
{
    for (int k = 0; k < n; k++)
        if (ids[k] > 0 && ids[k] < QS_EVS_N) put(j, s, ids[k]);
}

int qs_evstats_failed(json_t *d, long long *rows)
{
    json_t *sc = json_object_get(d, "scored");
    if (rows) *rows = (long long)json_integer_value(json_object_get(json_object_get(d, "nonfinite"), "logit_rows"));
    return json_is_integer(sc) && json_integer_value(sc) == 0;
}

int qs_evstats_mark_failed(json_t *d)
{
    const int failed = qs_evstats_failed(d, NULL);
    if (failed)
        for (int i = 1; i < QS_EVS_N; i++)
            if (json_object_get(d, qs_evstats[i].key)) json_object_set_new(d, qs_evstats[i].key, json_null());
    json_object_set_new(d, "failed", json_boolean(failed));
    return failed;
}

void qs_evstats_get(json_t *d, double v[QS_EVS_N])
{
    v[0] = NAN;
    const int failed = qs_evstats_failed(d, NULL);
    for (int i = 1; i < QS_EVS_N; i++) {
        if (failed) { v[i] = NAN; continue; }
        const qs_evstat *r = &qs_evstats[i];
        json_t *x = json_object_get(d, r->key);
        if (r->elem) x = json_array_get(x, (size_t)r->elem - 1);
        v[i] = json_is_number(x) ? json_number_value(x) : NAN;
    }
}

int qs_evstat_column(int view, int col)
{
    for (int i = 1; i < QS_EVS_N; i++)
        if (qs_evstats[i].view[view].col == col) return i;
    return 0;
}

int qs_evstat_sort_key(int k)
{
    for (int i = 1; i < QS_EVS_N; i++)
        if (k > 0 && qs_evstats[i].sort == k) return i;
    return 0;
}

void qs_evnum(double v, int dec, int plus, char *buf, size_t cap)
{
    const char *sg = plus ? "+" : "";
    if (!isfinite(v)) snprintf(buf, cap, "-");
    else if (v == 0) snprintf(buf, cap, "0");
    else if (fabs(v) >= 1e5) snprintf(buf, cap, plus ? "%+.3e" : "%.3e", v);
    else if (fabs(v) >= pow(10, 1 - dec)) snprintf(buf, cap, plus ? "%+.*f" : "%.*f", dec, v);
    else snprintf(buf, cap, "%s%.1e", v > 0 ? sg : "", v);
}

/* fmt's %s filled with the numbers x[0 .. n) (at most 3) */
static void sig(char *buf, size_t cap, const char *fmt, const double *x, int n, int dec, int plus)
{
    char a[3][40] = {"", "", ""};
    for (int i = 0; i < n && i < 3; i++) qs_evnum(x[i], dec, plus, a[i], sizeof a[i]);
    snprintf(buf, cap, fmt, a[0], a[1], a[2]);
}

void qs_evstat_cell(int view, int id, const double *v, int ascii, char *buf, size_t cap)
{
    const qs_evstat *r = &qs_evstats[id];
    const qs_evcol *c = &r->view[view];
    const double sc = r->scale ? r->scale : 1, x = v[id];
    /* the second and third printf arguments: the standard error, or the interval */
    const double a1 = r->se ? v[r->se] : r->lo ? v[r->lo] : 0, a2 = r->hi ? v[r->hi] : 0;
    if (view != QS_EVV_CLI && (!isfinite(x) || (r->lo && !(isfinite(a1) && isfinite(a2))))) {
        snprintf(buf, cap, "-");
        return;
    }
    switch (c->kind) {
    case QS_EVF_SIG: {
        const double xs[3] = {sc * x, sc * a1, sc * a2};
        sig(buf, cap, c->fmt, xs, r->lo ? 3 : r->se ? 2 : 1, c->dec, c->plus);
        break;
    }
    case QS_EVF_KL7:
        if (x != 0 && fabs(x) < 1e-3) snprintf(buf, cap, "%.1e", x);
        else snprintf(buf, cap, "%.3g", x);
        break;
    case QS_EVF_INTERVAL: {
        const char *p = ascii ? "+-" : "±";
        const double d = sc * x, hw = 0.5 * sc * (a2 - a1);
        snprintf(buf, cap, "%+.*f%s%.*f", fabs(d) < 10 ? 2 : 1, d, p, fabs(hw) < 10 ? 2 : 1, hw);
        if (strlen(buf) > (size_t)c->width) snprintf(buf, cap, "%+.0f%s%.0f", d, p, hw);
        break;
    }
    default:
        if (r->lo) snprintf(buf, cap, c->fmt, sc * x, sc * a1, sc * a2);
        else snprintf(buf, cap, c->fmt, sc * x, sc * a1);
    }
}
