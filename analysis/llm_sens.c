/*
** Per-layer sensitivity and the greedy mixed-precision plan (see llm_sens.h).
*/
#include "llm_sens.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kSens[QS_SENS_NSITE] = {"attn_in", "attn_out", "ffn_in", "ffn_down_in", "kv", "w"};

const char *qs_sens_site_name(int site) { return site >= 0 && site < QS_SENS_NSITE ? kSens[site] : "?"; }

int qs_sens_site_parse(const char *name)
{
    for (int i = 0; i < QS_SENS_NSITE; i++)
        if (!strcmp(name, kSens[i])) return i;
    return -1;
}

double qs_sens_site_elems(const qs_llm_cfg *c, int site)
{
    double d = c->dim, kv = (double)c->n_kv_head * c->head_dim, f = c->ffn, qd = (double)qs_llm_q_dim(c);
    switch (site) {
    case QS_SITE_FFN_DOWN_IN: return c->n_expert ? f * c->n_expert_used + c->ffn_shexp : f;   /* experts: those a token uses */
    case QS_SITE_ATTN_OUT: return qd;
    case QS_SENS_KV: return 2 * kv;
    case QS_SENS_W: return 2 * qd * d + 2 * kv * d + (c->n_expert ? 3 * f * d * c->n_expert + 3.0 * c->ffn_shexp * d : 3 * f * d);
    default: return d;   /* attn_in, attn_out, ffn_in */
    }
}

void qs_sens_table_free(qs_sens_table *t)
{
    free(t->kl); free(t->kl_se); free(t->dppl); free(t->top1);
    memset(t, 0, sizeof *t);
}

/* The per-layer format table of a variant: fmt at the (layer, site) pairs with sel != 0. */
static void fill_layer_fmt(const qs_apply **lf, int nlayer, const qs_sens_table *t, const uint8_t *sel, const qs_apply *fmt,
                           const uint8_t *hi_sel, const qs_apply *hi)
{
    memset(lf, 0, (size_t)nlayer * QS_LLM_NLSITE * sizeof *lf);
    for (int l = 0; l < nlayer; l++)
        for (int j = 0; j < t->nsite; j++) {
            int s = t->site[j];
            if (s == QS_SENS_W) continue;
            size_t k = (size_t)l * t->nsite + j;
            if (hi_sel && hi_sel[k]) lf[(size_t)l * QS_LLM_NLSITE + s] = hi;
            else if (sel[k]) lf[(size_t)l * QS_LLM_NLSITE + s] = fmt;
        }
}

void qs_sens_variants_free(qs_sens_variants *sv)
{
    for (int l = 0; sv->views && l < sv->nlayer; l++) if (sv->views[l].L) qs_llm_view_free(&sv->views[l]);
    free(sv->views); free(sv->var); free(sv->lf);
    memset(sv, 0, sizeof *sv);
}

int qs_sens_variants_make(const qs_llm_model *ref, const qs_apply *fmt, int scaled, const int *sites, int nsite,
                          qs_sens_variants *sv, qs_err *e)
{
    memset(sv, 0, sizeof *sv);
    const int L = ref->c.n_layer, nv = L * nsite;
    if (nsite < 1 || nsite > QS_SENS_NSITE) return qs_fail(e, "sensitivity: %d sites", nsite);
    sv->nlayer = L;
    sv->nsite = nsite;
    memcpy(sv->site, sites, (size_t)nsite * sizeof *sites);
    sv->nvar = nv;
    sv->var = calloc((size_t)nv, sizeof *sv->var);
    sv->lf = calloc((size_t)nv * L * QS_LLM_NLSITE, sizeof *sv->lf);
    sv->views = calloc((size_t)L, sizeof *sv->views);
    uint8_t *sel = calloc((size_t)nv, 1), *one = calloc((size_t)L, 1);
    qs_sens_table t;   /* only its sites, for fill_layer_fmt */
    memset(&t, 0, sizeof t);
    t.nlayer = L;
    t.nsite = nsite;
    memcpy(t.site, sites, (size_t)nsite * sizeof *sites);
    int rc = -1;
    if (!sv->var || !sv->lf || !sv->views || !sel || !one) { qs_fail(e, "out of memory"); goto done; }
    for (int l = 0; l < L; l++)
        for (int j = 0; j < nsite; j++) {
            int v = l * nsite + j;
            qs_eval_variant *x = &sv->var[v];
            x->m = ref;
            x->nx.scaled = scaled;
            x->from_layer = l;
            if (!fmt) continue;   /* FP32: the reference itself */
            if (sites[j] == QS_SENS_W) {
                if (!sv->views[l].L) {   /* that layer's matrices only, rounded once */
                    memset(one, 0, (size_t)L);
                    one[l] = 1;
                    if (qs_llm_view_quantize_layers(&sv->views[l], ref, one, fmt, scaled, e)) goto done;
                }
                x->m = &sv->views[l];
                continue;
            }
            sel[v] = 1;
            fill_layer_fmt(sv->lf + (size_t)v * L * QS_LLM_NLSITE, L, &t, sel, fmt, NULL, NULL);
            sel[v] = 0;
            x->nx.layer_fmt = sv->lf + (size_t)v * L * QS_LLM_NLSITE;
        }
    rc = 0;
done:
    free(sel); free(one);
    if (rc) qs_sens_variants_free(sv);
    return rc;
}

int qs_sens_table_make(const qs_sens_variants *sv, const qs_eval_out *out, qs_sens_table *t, qs_err *e)
{
    memset(t, 0, sizeof *t);
    const int nv = sv->nvar;
    t->nlayer = sv->nlayer;
    t->nsite = sv->nsite;
    memcpy(t->site, sv->site, sizeof t->site);
    t->kl = calloc((size_t)nv, sizeof(double));
    t->kl_se = calloc((size_t)nv, sizeof(double));
    t->dppl = calloc((size_t)nv, sizeof(double));
    t->top1 = calloc((size_t)nv, sizeof(double));
    if (!t->kl || !t->kl_se || !t->dppl || !t->top1) { qs_sens_table_free(t); return qs_fail(e, "out of memory"); }
    if (out->nvar != nv + 1) { qs_sens_table_free(t); return qs_fail(e, "sensitivity: %d variants evaluated, %d planned", out->nvar - 1, nv); }
    t->n = out->n;
    for (int v = 0; v < nv; v++) {
        qs_eval_summary s;
        if (v == 0) {
            if (qs_eval_summarize(&out->var[0], NULL, out->n, &s, e)) goto fail;
            t->ref_ppl = s.ppl;
            t->ref_ppl_se = s.ppl_se;
        }
        if (qs_eval_summarize(&out->var[0], &out->var[v + 1], out->n, &s, e)) goto fail;
        t->kl[v] = s.kl_mean;
        t->kl_se[v] = s.kl_se;
        t->dppl[v] = s.dppl_rel;
        t->top1[v] = s.top1;
    }
    return 0;
fail:
    qs_sens_table_free(t);
    return -1;
}

int qs_sens_run(const qs_llm_model *ref, const qs_apply *fmt, int scaled, const int *sites, int nsite, const int32_t *text,
                size_t ntext, const qs_eval_setup *su, qs_eval_progress prog, void *pctx, qs_sens_table *t, qs_err *e)
{
    memset(t, 0, sizeof *t);
    qs_sens_variants sv;
    if (qs_sens_variants_make(ref, fmt, scaled, sites, nsite, &sv, e)) return -1;
    qs_eval_out out;
    int rc = -1;
    if (!qs_llm_eval_run(ref, sv.var, NULL, sv.nvar, text, ntext, su, prog, pctx, &out, e)) {
        rc = qs_sens_table_make(&sv, &out, t, e);
        qs_eval_out_free(&out);
    }
    qs_sens_variants_free(&sv);
    return rc;
}

/* ---------------------------------------------------------------- plan */

static int step_cmp(const void *a, const void *b)
{
    const qs_sens_step *x = a, *y = b;
    double rx = x->kl > 0 ? x->kl_per_bit : -1, ry = y->kl > 0 ? y->kl_per_bit : -1;
    if (rx != ry) return rx > ry ? -1 : 1;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

void qs_sens_plan_order(const qs_sens_table *t, const qs_llm_cfg *c, double bits_fmt, double bits_hi, qs_sens_step *order,
                        double *pred0, double *bits0)
{
    const int nv = t->nlayer * t->nsite;
    double pred = 0, elems = 0;
    for (int v = 0; v < nv; v++) {
        qs_sens_step *s = &order[v];
        s->layer = v / t->nsite;
        s->j = v % t->nsite;
        s->kl = t->kl[v];
        s->extra_bits = qs_sens_site_elems(c, t->site[s->j]) * (bits_hi - bits_fmt);
        s->kl_per_bit = s->extra_bits > 0 ? s->kl / s->extra_bits : 0;
        if (isfinite(s->kl)) pred += s->kl;
        elems += qs_sens_site_elems(c, t->site[s->j]);
    }
    qsort(order, (size_t)nv, sizeof *order, step_cmp);
    *pred0 = pred;
    *bits0 = bits_fmt;
    double bits = elems * bits_fmt;
    for (int k = 0; k < nv; k++) {
        if (isfinite(order[k].kl)) pred -= order[k].kl;
        bits += order[k].extra_bits;
        order[k].predicted_kl = pred > 0 ? pred : 0;
        order[k].bits_avg = elems > 0 ? bits / elems : 0;
    }
}

int qs_sens_plan_choose(const qs_sens_step *order, int nsteps, double pred0, double bits0, double kl_target, double bits_budget)
{
    if (kl_target >= 0) {
        if (pred0 <= kl_target) return 0;
        for (int k = 0; k < nsteps; k++)
            if (order[k].predicted_kl <= kl_target) return k + 1;
        return nsteps;
    }
    (void)bits0;
    int k = 0;
    while (k < nsteps && order[k].bits_avg <= bits_budget) k++;
    return k;
}

int qs_sens_plan_refine(const qs_sens_step *order, int nsteps, int k, double pred_k, double measured, double kl_target,
                        int prev_add, int kmax)
{
    if (kmax > nsteps) kmax = nsteps;
    if (k >= kmax) return k;
    double ratio = pred_k > 0 ? measured / pred_k : INFINITY;
    double goal = isfinite(ratio) && ratio > 0 ? kl_target / ratio : 0;   /* predicted KL the plan must reach */
    int next = k + 1;
    while (next < nsteps && !(order[next - 1].predicted_kl <= goal)) next++;
    int least = k + (prev_add > 0 ? 2 * prev_add : 1);
    if (next < least) next = least;
    return next < kmax ? next : kmax;
}

qs_sens_bits qs_sens_plan_bits(const qs_sens_table *t, const qs_llm_cfg *c, const uint8_t *promoted, double bits_fmt, double bits_hi)
{
    double ew = 0, bw = 0, ea = 0, ba = 0;
    for (int l = 0; l < t->nlayer; l++)
        for (int j = 0; j < t->nsite; j++) {
            double n = qs_sens_site_elems(c, t->site[j]), b = promoted[l * t->nsite + j] ? bits_hi : bits_fmt;
            if (t->site[j] == QS_SENS_W) { ew += n; bw += n * b; }
            else { ea += n; ba += n * b; }
        }
    qs_sens_bits r = {ew > 0 ? bw / ew : NAN, ea > 0 ? ba / ea : NAN, ew + ea > 0 ? (bw + ba) / (ew + ea) : NAN};
    return r;
}

int qs_sens_verify(const qs_llm_model *ref, const qs_apply *fmt, const qs_apply *hi, int scaled, const qs_sens_table *t,
                   const uint8_t *promoted, const int32_t *text, size_t ntext, const qs_eval_setup *su, qs_eval_summary *s,
                   qs_err *e)
{
    const int L = t->nlayer, nv = L * t->nsite;
    const qs_apply **lf = calloc((size_t)L * QS_LLM_NLSITE, sizeof *lf);
    uint8_t *all = malloc((size_t)nv), *wl = calloc((size_t)L, 1), *wh = calloc((size_t)L, 1);
    qs_llm_model v1, v2;
    memset(&v1, 0, sizeof v1);
    memset(&v2, 0, sizeof v2);
    qs_eval_out out;
    memset(&out, 0, sizeof out);
    int rc = -1;
    if (!lf || !all || !wl || !wh) { qs_fail(e, "out of memory"); goto done; }
    memset(all, 1, (size_t)nv);
    fill_layer_fmt(lf, L, t, all, fmt, promoted, hi);
    int anyw = 0, anyh = 0;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < t->nsite; j++)
            if (t->site[j] == QS_SENS_W) {
                if (promoted[l * t->nsite + j]) wh[l] = 1, anyh = 1;
                else wl[l] = 1, anyw = 1;
            }
    const qs_llm_model *m = ref;
    if (anyw || anyh) {   /* weights at the format, the promoted layers' at hi */
        if (qs_llm_view_quantize_layers(&v1, ref, wl, fmt, scaled, e)) goto done;
        if (qs_llm_view_quantize_layers(&v2, &v1, wh, hi, scaled, e)) goto done;
        m = &v2;
    }
    qs_eval_variant var;
    memset(&var, 0, sizeof var);
    var.m = m;
    var.nx.scaled = scaled;
    var.nx.layer_fmt = lf;
    if (qs_llm_eval_run(ref, &var, NULL, 1, text, ntext, su, NULL, NULL, &out, e)) goto done;
    if (qs_eval_summarize(&out.var[0], &out.var[1], out.n, s, e)) goto done;
    rc = 0;
done:
    qs_eval_out_free(&out);
    if (v2.L) qs_llm_view_free(&v2);
    if (v1.L) qs_llm_view_free(&v1);
    free(lf); free(all); free(wl); free(wh);
    return rc;
}
