/*
** Calibration capture (llm_calib.h).
*/
#include "llm_calib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "../kernels/qs_stop.h"
#include "../kernels/llm_smooth.h"

int qs_calib_nchunks(const qs_calib_src *src)
{
    if (src->ctx < 2) return 0;
    size_t k = src->nids / (size_t)src->ctx;
    return (int)(src->chunks > 0 && (size_t)src->chunks < k ? (size_t)src->chunks : k);
}

static size_t layer_bytes(const qs_llm_cfg *c)
{
    size_t b = 0;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++) {
        size_t n = qs_llm_site_width(c, s);
        b += n * n * sizeof(double);
    }
    return b;
}

int qs_calib_layers_per_pass(const qs_llm_cfg *c, const qs_calib_src *src)
{
    size_t budget = src->budget ? src->budget : QS_CALIB_BUDGET, per = layer_bytes(c);
    size_t k = per ? budget / per : (size_t)c->n_layer;
    return k < 1 ? 1 : k > (size_t)c->n_layer ? c->n_layer : (int)k;
}

void qs_calib_free(qs_calib *c)
{
    if (c->site)
        for (size_t i = 0; i < (size_t)c->n_layer * QS_SITE_LINEAR_COUNT; i++) {
            free(c->site[i].xmax);
            free(c->site[i].xmean);
            free(c->site[i].H);
        }
    free(c->site);
    memset(c, 0, sizeof *c);
}

typedef struct tapctx {
    qs_calib *c;
    double **xabs;            /* per site: sums of |x| per channel */
    float *F;                 /* one chunk's X^T X */
    int fail;
} tapctx;

static void tap(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    tapctx *t = ctx;
    if ((int)site >= QS_SITE_LINEAR_COUNT || layer < 0 || layer >= t->c->n_layer) return;
    qs_calib_site *cs = qs_calib_at(t->c, layer, site);
    double *xa = t->xabs[(size_t)layer * QS_SITE_LINEAR_COUNT + site];
    if ((size_t)cols != cs->n) { t->fail = 1; return; }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float v = fabsf(x[(size_t)r * cols + j]);
            xa[j] += v;
            if (v > cs->xmax[j]) cs->xmax[j] = v;
        }
    if (!cs->H) return;
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, cols, rows, 1.0f, x, cols, 0.0f, t->F, cols);
    for (int i = 0; i < cols; i++)
        for (int j = i; j < cols; j++) cs->H[(size_t)i * cols + j] += t->F[(size_t)i * cols + j];
}

static int calib_alloc(qs_calib *c, const qs_llm_cfg *cfg, int l0, int l1, double ***xabs, qs_err *e)
{
    const size_t ns = (size_t)cfg->n_layer * QS_SITE_LINEAR_COUNT;
    c->n_layer = cfg->n_layer;
    c->l0 = l0;
    c->l1 = l1;
    if (!(c->site = calloc(ns, sizeof *c->site)) || !(*xabs = calloc(ns, sizeof **xabs))) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < ns; i++) {
        qs_calib_site *s = &c->site[i];
        const int l = (int)(i / QS_SITE_LINEAR_COUNT);
        s->n = qs_llm_site_width(cfg, (int)(i % QS_SITE_LINEAR_COUNT));
        s->xmax = calloc(s->n, sizeof *s->xmax);
        s->xmean = calloc(s->n, sizeof *s->xmean);
        (*xabs)[i] = calloc(s->n, sizeof ***xabs);
        if (l >= l0 && l < l1) s->H = calloc(s->n * s->n, sizeof *s->H);
        if (!s->xmax || !s->xmean || !(*xabs)[i] || (l >= l0 && l < l1 && !s->H))
            return qs_fail(e, "out of memory for the calibration statistics (layer %d)", l);
    }
    return 0;
}

/* Means, H = 2/N sum x x^T mirrored from its upper triangle. */
static void calib_finish(qs_calib *c, double **xabs)
{
    const double N = c->rows ? (double)c->rows : 1;
    for (size_t i = 0; i < (size_t)c->n_layer * QS_SITE_LINEAR_COUNT; i++) {
        qs_calib_site *s = &c->site[i];
        for (size_t j = 0; j < s->n; j++) s->xmean[j] = (float)(xabs[i][j] / N);
        if (!s->H) continue;
        for (size_t a = 0; a < s->n; a++)
            for (size_t b = a; b < s->n; b++) {
                double v = s->H[a * s->n + b] * 2 / N;
                s->H[a * s->n + b] = s->H[b * s->n + a] = v;
            }
    }
}

int qs_calib_capture(qs_calib *c, const qs_llm_model *m, const qs_calib_src *src, int l0, int l1, qs_err *e)
{
    qs_calib_free(c);
    const int K = qs_calib_nchunks(src), T = src->ctx;
    if (K < 1) return qs_fail(e, "calibration text: %zu tokens is shorter than one chunk of %d", src->nids, T);
    double **xabs = NULL;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    float *hid = malloc((size_t)T * (size_t)m->c.dim * sizeof *hid);
    size_t wmax = qs_llm_site_width(&m->c, QS_SITE_FFN_DOWN_IN), wq = qs_llm_site_width(&m->c, QS_SITE_ATTN_OUT);
    if (wq > wmax) wmax = wq;
    if ((size_t)m->c.dim > wmax) wmax = (size_t)m->c.dim;
    float *F = l1 > l0 ? malloc(wmax * wmax * sizeof *F) : NULL;
    qs_llm_state *st = qs_llm_state_new(&m->c, 1, T, T, e);
    int rc = -1;
    if (!tok || !hid || (l1 > l0 && !F)) { qs_fail(e, "out of memory"); goto out; }
    if (!st || calib_alloc(c, &m->c, l0, l1, &xabs, e)) goto out;
    tapctx t = {c, xabs, F, 0};
    for (int k = 0; k < K; k++) {
        if (qs_stop_requested()) { qs_fail(e, "interrupted"); goto out; }
        memcpy(tok, src->ids + (size_t)k * T, (size_t)T * sizeof *tok);
        if (src->bos >= 0) tok[0] = src->bos;
        if (qs_llm_forward(m, NULL, st, tok, 1, T, 0, hid, tap, &t, e)) goto out;
        if (t.fail) { qs_fail(e, "calibration: a tapped site has an unexpected width"); goto out; }
        c->rows += (uint64_t)T;
    }
    calib_finish(c, xabs);
    rc = 0;
out:
    if (xabs)
        for (size_t i = 0; i < (size_t)m->c.n_layer * QS_SITE_LINEAR_COUNT; i++) free(xabs[i]);
    free(xabs);
    free(tok);
    free(hid);
    free(F);
    qs_llm_state_free(st);
    if (rc) qs_calib_free(c);
    return rc;
}
