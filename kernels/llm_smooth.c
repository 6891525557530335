/*
** Per-channel scales folded into a Llama model (llm_smooth.h).
*/
#include "llm_smooth.h"

#include <math.h>
#include <stdlib.h>

size_t qs_llm_site_width(const qs_llm_cfg *c, int site)
{
    return site == QS_SITE_ATTN_OUT ? qs_llm_q_dim(c) : site == QS_SITE_FFN_DOWN_IN ? (size_t)c->ffn : (size_t)c->dim;
}

int qs_llm_site_mats(const qs_llm_cfg *c, qs_llm_layer *L, int site, float **W, size_t *rows)
{
    const size_t kv = (size_t)c->n_kv_head * c->head_dim;
    switch (site) {
    case QS_SITE_ATTN_IN:
        W[0] = L->wq; rows[0] = qs_llm_q_dim(c); W[1] = L->wk; rows[1] = kv; W[2] = L->wv; rows[2] = kv;
        return 3;
    case QS_SITE_ATTN_OUT: W[0] = L->wo; rows[0] = (size_t)c->dim; return 1;
    case QS_SITE_FFN_IN: W[0] = L->w_gate; rows[0] = (size_t)c->ffn; W[1] = L->w_up; rows[1] = (size_t)c->ffn; return 2;
    default: W[0] = L->w_down; rows[0] = (size_t)c->dim; return 1;
    }
}

static void scale_cols(float *W, size_t rows, size_t cols, const float *s)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) W[r * cols + j] *= s[j];
}

static void div_rows(float *W, size_t rows, size_t cols, const float *s)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) W[r * cols + j] /= s[r];
}

int qs_llm_fold_scales(qs_llm_model *m, int l, int site, const float *s, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    qs_llm_layer *L = &m->L[l];
    const size_t n = qs_llm_site_width(c, site), hd = (size_t)c->head_dim, grp = (size_t)(c->n_head / c->n_kv_head);
    for (size_t j = 0; j < n; j++)
        if (!(s[j] > 0) || !isfinite(s[j])) return qs_fail(e, "layer %d %s: scale %zu is %g", l, qs_llm_site_name(site), j, s[j]);
    float *W[3];
    size_t rows[3];
    int nm = qs_llm_site_mats(c, L, site, W, rows);
    if (site == QS_SITE_ATTN_IN || site == QS_SITE_FFN_IN) {
        float *g = site == QS_SITE_ATTN_IN ? L->attn_norm : L->ffn_norm;
        for (size_t j = 0; j < n; j++) g[j] /= s[j];
    } else if (site == QS_SITE_ATTN_OUT) {
        const size_t kvd = (size_t)c->n_kv_head * hd;
        float *sv = malloc(kvd * sizeof *sv);
        if (!sv) return qs_fail(e, "out of memory");
        for (size_t j = 0; j < n; j++) {   /* channel j = h * hd + d reads V row (h / grp) * hd + d */
            size_t v = (j / hd / grp) * hd + j % hd;
            if (j / hd % grp == 0) sv[v] = s[j];
            else if (sv[v] != s[j]) { free(sv); return qs_fail(e, "layer %d attn_out: scales differ within a KV group", l); }
        }
        div_rows(L->wv, kvd, (size_t)c->dim, sv);
        if (L->bv)
            for (size_t v = 0; v < kvd; v++) L->bv[v] /= sv[v];
        free(sv);
    } else {
        div_rows(L->w_up, (size_t)c->ffn, (size_t)c->dim, s);
    }
    for (int k = 0; k < nm; k++) scale_cols(W[k], rows[k], n, s);
    return 0;
}

void qs_llm_tie_stat(const qs_llm_cfg *c, int site, float *x, int mean)
{
    const size_t hd = (size_t)c->head_dim, grp = (size_t)(c->n_head / c->n_kv_head);
    if (site != QS_SITE_ATTN_OUT || grp == 1) return;
    for (size_t g = 0; g < (size_t)c->n_kv_head; g++)
        for (size_t d = 0; d < hd; d++) {
            double acc = 0;
            for (size_t h = g * grp; h < (g + 1) * grp; h++) {
                float v = x[h * hd + d];
                acc = mean ? acc + v : fmax(acc, v);
            }
            if (mean) acc /= (double)grp;
            for (size_t h = g * grp; h < (g + 1) * grp; h++) x[h * hd + d] = (float)acc;
        }
}

void qs_llm_site_wmax(const qs_llm_cfg *c, qs_llm_layer *L, int site, float *wmax)
{
    float *W[3];
    size_t rows[3], n = qs_llm_site_width(c, site);
    int nm = qs_llm_site_mats(c, L, site, W, rows);
    for (size_t j = 0; j < n; j++) wmax[j] = 0;
    for (int k = 0; k < nm; k++)
        for (size_t r = 0; r < rows[k]; r++)
            for (size_t j = 0; j < n; j++) wmax[j] = fmaxf(wmax[j], fabsf(W[k][r * n + j]));
}

void qs_smooth_scales(const float *xmax, const float *wmax, size_t n, double alpha, float *s)
{
    for (size_t j = 0; j < n; j++) {
        if (!(xmax[j] > 0) || !(wmax[j] > 0)) { s[j] = 1; continue; }
        double v = pow(fmax(xmax[j], 1e-5), alpha) / pow(fmax(wmax[j], 1e-5), 1 - alpha);
        s[j] = (float)fmax(v, 1e-5);
    }
}
