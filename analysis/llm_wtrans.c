/*
** Calibration transforms of a configuration's model (llm_wtrans.h).
*/
#include "llm_wtrans.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/llm_awq.h"
#include "../kernels/llm_smooth.h"
#include "../kernels/qs_stop.h"

json_t *qs_wtrans_json(const qs_wtrans *t, const qs_calib_src *src)
{
    if (!qs_wtrans_on(t)) return NULL;
    json_t *j = json_object();
    if (t->smooth) json_object_set_new(j, "smooth", json_pack("{s:f,s:s}", "alpha", t->alpha, "sites", t->smooth_norm ? "norm" : "all"));
    if (t->wround == QS_WT_GPTQ)
        json_object_set_new(j, "gptq", json_pack("{s:f,s:b,s:i,s:s}", "damp", t->gptq.damp, "act_order", t->gptq.act_order,
                                                 "block", t->gptq.block, "h", "fp32-reference"));
    if (t->wround == QS_WT_AWQ) json_object_set_new(j, "awq", json_pack("{s:i}", "grid", t->awq_grid));
    json_object_set_new(j, "calib", json_pack("{s:s,s:i,s:i,s:i}", "text", src->hash, "ctx", src->ctx, "chunks",
                                              qs_calib_nchunks(src), "bos", src->bos));
    return j;
}

/* One site's statistics as the folds so far left them: xmax, xmean divided by s, H by s_i s_j. */
typedef struct sitestat { size_t n; float *xmax, *xmean, *s; double *H; } sitestat;

static int stat_init(sitestat *st, const qs_calib_site *cs, qs_err *e)
{
    st->n = cs->n;
    st->xmax = malloc(cs->n * sizeof *st->xmax);
    st->xmean = malloc(cs->n * sizeof *st->xmean);
    st->s = malloc(cs->n * sizeof *st->s);
    st->H = cs->H ? malloc(cs->n * cs->n * sizeof *st->H) : NULL;
    if (!st->xmax || !st->xmean || !st->s || (cs->H && !st->H)) return qs_fail(e, "out of memory");
    memcpy(st->xmax, cs->xmax, cs->n * sizeof *st->xmax);
    memcpy(st->xmean, cs->xmean, cs->n * sizeof *st->xmean);
    if (cs->H) memcpy(st->H, cs->H, cs->n * cs->n * sizeof *st->H);
    return 0;
}

static void stat_free(sitestat *st)
{
    free(st->xmax); free(st->xmean); free(st->s); free(st->H);
    memset(st, 0, sizeof *st);
}

/* Fold st->s into the model and the statistics. */
static int stat_fold(qs_llm_model *m, int l, int site, sitestat *st, qs_err *e)
{
    if (qs_llm_fold_scales(m, l, site, st->s, e)) return -1;
    for (size_t j = 0; j < st->n; j++) { st->xmax[j] /= st->s[j]; st->xmean[j] /= st->s[j]; }
    if (st->H)
        for (size_t a = 0; a < st->n; a++)
            for (size_t b = 0; b < st->n; b++) st->H[a * st->n + b] /= (double)st->s[a] * st->s[b];
    return 0;
}

static int smooth_site(qs_llm_model *m, int l, int site, const qs_wtrans *t, sitestat *st, qs_err *e)
{
    float *wm = malloc(st->n * sizeof *wm), *xm = malloc(st->n * sizeof *xm);
    if (!wm || !xm) { free(wm); free(xm); return qs_fail(e, "out of memory"); }
    memcpy(xm, st->xmax, st->n * sizeof *xm);
    qs_llm_site_wmax(&m->c, &m->L[l], site, wm);
    qs_llm_tie_stat(&m->c, site, xm, 0);
    qs_llm_tie_stat(&m->c, site, wm, 0);
    qs_smooth_scales(xm, wm, st->n, t->alpha, st->s);
    free(wm);
    free(xm);
    return stat_fold(m, l, site, st, e);
}

static int awq_site(qs_llm_model *m, int l, int site, const qs_wtrans *t, const qs_apply *w, int scaled, sitestat *st,
                    qs_err *e)
{
    float *W[3], *xm = malloc(st->n * sizeof *xm);
    size_t rows[3];
    if (!xm) return qs_fail(e, "out of memory");
    int nm = qs_llm_site_mats(&m->c, &m->L[l], site, W, rows);
    memcpy(xm, st->xmean, st->n * sizeof *xm);
    qs_llm_tie_stat(&m->c, site, xm, 1);
    double a;
    int rc = qs_awq_search(w, scaled, W, rows, nm, st->n, st->H, xm, t->awq_grid, st->s, &a, NULL, e);
    free(xm);
    return rc ? -1 : stat_fold(m, l, site, st, e);
}

/* One layer: folds, then every linear weight rounded. */
static int do_layer(qs_llm_model *m, int l, const qs_wtrans *t, const qs_apply *w, int scaled, const qs_calib *cal, qs_err *e)
{
    sitestat st[QS_SITE_LINEAR_COUNT];
    memset(st, 0, sizeof st);
    int rc = -1;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++)
        if (stat_init(&st[s], qs_calib_at(cal, l, s), e)) goto out;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT && t->smooth; s++)
        if ((!t->smooth_norm || s == QS_SITE_ATTN_IN || s == QS_SITE_FFN_IN) && smooth_site(m, l, s, t, &st[s], e)) goto out;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT && w && t->wround == QS_WT_AWQ; s++)
        if (awq_site(m, l, s, t, w, scaled, &st[s], e)) goto out;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT && w; s++) {
        float *W[3];
        size_t rows[3];
        int nm = qs_llm_site_mats(&m->c, &m->L[l], s, W, rows);
        for (int k = 0; k < nm; k++) {
            int bad = t->wround == QS_WT_GPTQ ? qs_gptq_quantize(w, scaled, W[k], rows[k], st[s].n, st[s].H, &t->gptq, e)
                                              : qs_llm_quant_matrix(w, scaled, W[k], rows[k], st[s].n, e);
            if (bad) goto out;
        }
    }
    rc = 0;
out:
    for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++) stat_free(&st[s]);
    if (rc && !strstr(e->msg, "layer")) {
        char m2[sizeof e->msg];
        snprintf(m2, sizeof m2, "%s", e->msg);
        qs_fail(e, "layer %d: %s", l, m2);
    }
    return rc;
}

int qs_wtrans_build(qs_llm_model *dst, const qs_llm_model *src, const qs_wtrans *t, const qs_apply *w, int scaled,
                    const qs_calib_src *cs, qs_calib *cache, qs_err *e)
{
    if (t->wround != QS_WT_PLAIN && !w) return qs_fail(e, "GPTQ and AWQ round weights: give a weight format");
    if (src->c.n_expert)   /* the folds and Hessians are of the dense FFN's matrices; experts have their own */
        return qs_fail(e, "smooth=, :gptq and :awq: mixture-of-experts layers are not supported (dense FFNs only)");
    if (t->wround == QS_WT_GPTQ && qs_gptq_check(w, e)) return -1;
    if (qs_llm_clone(dst, src, e)) return -1;
    const int need_h = t->wround != QS_WT_PLAIN, per = need_h ? qs_calib_layers_per_pass(&src->c, cs) : src->c.n_layer;
    for (int l = 0; l < src->c.n_layer; l++) {
        if (qs_stop_requested()) { qs_fail(e, "interrupted"); goto fail; }
        int have = cache->site && (!need_h || (l >= cache->l0 && l < cache->l1));
        if (!have) {
            int l1 = need_h ? (l + per < src->c.n_layer ? l + per : src->c.n_layer) : l;
            if (qs_calib_capture(cache, src, cs, need_h ? l : 0, l1, e)) goto fail;
        }
        if (do_layer(dst, l, t, w, scaled, cache, e)) goto fail;
    }
    if (w && qs_llm_quant_matrix(w, scaled, dst->output, (size_t)src->c.vocab, (size_t)src->c.dim, e)) goto fail;
    return 0;
fail:
    qs_llm_free(dst);
    return -1;
}
