/*
** Plot kinds: builders that turn plain data (histograms, arrays of points, per-block arrays, a
** format) into qs_figure models.  No database access here: `qscope plot` reads the data and calls
** these, and tests call them directly.
*/
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- histograms ---------------- */

/* Bin edges of a qs_hist in data units, and the x scale they need. */
static double *hist_edges(const qs_hist *h, qs_ax_scale *xs)
{
    if (!h || h->nbins <= 0) return NULL;
    double *e = malloc(((size_t)h->nbins + 1) * sizeof *e);
    if (!e) return NULL;
    for (int i = 0; i <= h->nbins; i++) {
        double t = h->lo + (h->hi - h->lo) * i / h->nbins;
        if (h->kind == 0) e[i] = exp2(t);
        else if (h->kind == 2) e[i] = i - 0.5;
        else e[i] = t;
    }
    if (xs) *xs = h->kind == 0 ? QS_AX_LOG2 : QS_AX_LINEAR;
    return e;
}

static double *hist_counts(const qs_hist *h, uint64_t *total)
{
    double *c = malloc(((size_t)h->nbins + 1) * sizeof *c);
    if (!c) return NULL;
    uint64_t t = h->zero + h->under + h->over + h->nonfinite;
    for (int i = 0; i < h->nbins; i++) {
        c[i] = (double)h->counts[i];
        t += h->counts[i];
    }
    if (total) *total = t;
    return c;
}

qs_figure *qs_plot_err_hist(const char *title, const char *what, size_t n, const char *const *names,
                            const qs_hist *const *h)
{
    qs_figure *f = qs_fig_new(title ? title : "quantization error");
    if (!f) return NULL;
    qs_ax_scale xs = QS_AX_LOG2;
    uint64_t outside = 0;
    for (size_t i = 0; i < n; i++) {
        if (!h[i] || h[i]->nbins <= 0 || !h[i]->counts) continue;
        uint64_t total = 0;
        double *e = hist_edges(h[i], &xs), *c = hist_counts(h[i], &total);
        if (!e || !c) { free(e); free(c); qs_fig_free(f); return NULL; }
        char label[200];
        int k = snprintf(label, sizeof label, "%s", names[i]);
        if (h[i]->zero && total && (double)h[i]->zero >= 1e-3 * (double)total && k > 0 && (size_t)k < sizeof label)
            k += snprintf(label + k, sizeof label - (size_t)k, " (%.3g%% exact)", 100.0 * (double)h[i]->zero / (double)total);
        if (h[i]->nonfinite && k > 0 && (size_t)k < sizeof label)
            snprintf(label + k, sizeof label - (size_t)k, " (%llu NaN/Inf)", (unsigned long long)h[i]->nonfinite);
        qs_series *s = qs_fig_add(f, QS_SER_STEP, label, e, c, (size_t)h[i]->nbins);
        free(e);
        free(c);
        if (!s) { qs_fig_free(f); return NULL; }
        s->width = 1.8;
        outside += h[i]->under + h[i]->over;
    }
    qs_axis_set(&f->x, xs, what ? what : "relative error |Q(x) - x| / |x|");
    qs_axis_set(&f->y, QS_AX_LOG10, "count (elements per bin)");
    if (outside) snprintf(f->note, sizeof f->note, "%llu errors outside the bins (all formats)", (unsigned long long)outside);
    return f;
}

qs_figure *qs_plot_value_hist(const char *title, const qs_hist *h, const double *grid, size_t ngrid,
                              const char *grid_name)
{
    qs_figure *f = qs_fig_new(title ? title : "values");
    if (!f) return NULL;
    qs_ax_scale xs = QS_AX_LOG2;
    if (grid && ngrid) {
        qs_series *g = qs_fig_add(f, QS_SER_VLINE, grid_name ? grid_name : "representable values", grid, NULL, ngrid);
        if (!g) { qs_fig_free(f); return NULL; }
        g->color = QS_COLOR_GREY;
    }
    uint64_t total = 0;
    if (h && h->nbins > 0 && h->counts) {
        double *e = hist_edges(h, &xs), *c = hist_counts(h, &total);
        if (!e || !c) { free(e); free(c); qs_fig_free(f); return NULL; }
        qs_series *s = qs_fig_add(f, QS_SER_STEP, "tensor values", e, c, (size_t)h->nbins);
        free(e);
        free(c);
        if (!s) { qs_fig_free(f); return NULL; }
        s->fill = 1;
        s->color = 0;
        s->dash = QS_DASH_SOLID;
        if (h->zero && total)
            qs_fig_annotate(f, 0.02, 0.95, 1, "zeros: %llu (%.3g%%)", (unsigned long long)h->zero,
                            100.0 * (double)h->zero / (double)total);
        if (h->under + h->over + h->nonfinite)
            snprintf(f->note, sizeof f->note, "outside the bins: %llu below, %llu above, %llu non-finite",
                     (unsigned long long)h->under, (unsigned long long)h->over, (unsigned long long)h->nonfinite);
    }
    qs_axis_set(&f->x, xs, xs == QS_AX_LOG2 ? "|x| (magnitude)" : "x");
    qs_axis_set(&f->y, QS_AX_LOG10, "count (elements per bin)");
    return f;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sort and drop duplicates */
static size_t uniq(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

int qs_format_grid(const qs_format *f, const qs_qopts *o, double amax, double **grid, size_t *n, qs_err *e)
{
    *grid = NULL;
    *n = 0;
    int plain = f->meta_bytes == 0 && f->block == 1;
    if (plain) {
        if (!f->code_value || f->ncodes == 0) return 0;   /* fp32 / bf16 / fp16: too dense to draw */
        double *g = malloc(f->ncodes * sizeof *g);
        if (!g) return qs_fail(e, "out of memory");
        size_t k = 0;
        for (unsigned c = 0; c < f->ncodes; c++) {
            double v = f->code_value(c);
            if (isfinite(v) && v >= 0) g[k++] = v;
        }
        *n = uniq(g, k);
        *grid = g;
        return 0;
    }
    /* block and per-tensor formats: the values a block whose absmax is `amax` can hold, found by
    ** quantizing {amax, c} for c sweeping (0, amax] linearly and geometrically */
    if (!(amax > 0) || !isfinite(amax)) amax = 1;
    if (f->elem_bits > 8) return 0;
    const size_t NL = 8192, NG = 64 * 40;
    size_t cap = NL + NG + 2;
    double *g = malloc(cap * sizeof *g);
    if (!g) return qs_fail(e, "out of memory");
    size_t k = 0;
    qs_qopts oo = *o;
    for (size_t i = 0; i <= NL + NG; i++) {
        double c = i <= NL ? amax * (double)i / NL : amax * exp2(-(double)(i - NL) / 64.0);
        float x[2] = {(float)amax, (float)c}, y[2];
        if (f->fakeq(f, &oo, x, 2, y, e)) { free(g); return -1; }
        double v = fabs((double)y[1]);
        if (isfinite(v)) g[k++] = v;
        if (i == 0 && isfinite(y[0])) g[k++] = fabs((double)y[0]);
    }
    k = uniq(g, k);
    if (k > 4096) { free(g); return 0; }
    *grid = g;
    *n = k;
    return 0;
}

/* ---------------- Pareto ---------------- */

size_t qs_pareto_front(const qs_pareto_pt *p, size_t n, size_t *idx)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(p[i].bits) || !isfinite(p[i].eff_bits)) continue;
        int dominated = 0;
        for (size_t j = 0; j < n && !dominated; j++) {
            if (j == i || !isfinite(p[j].bits) || !isfinite(p[j].eff_bits)) continue;
            if (p[j].bits <= p[i].bits && p[j].eff_bits >= p[i].eff_bits &&
                (p[j].bits < p[i].bits || p[j].eff_bits > p[i].eff_bits || j < i))
                dominated = 1;
        }
        if (!dominated) idx[k++] = i;
    }
    /* ascending in bits (insertion sort: a handful of points) */
    for (size_t a = 1; a < k; a++)
        for (size_t b = a; b > 0 && p[idx[b]].bits < p[idx[b - 1]].bits; b--) {
            size_t t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t;
        }
    return k;
}

qs_figure *qs_plot_pareto(const char *title, const qs_pareto_pt *p, size_t n)
{
    qs_figure *f = qs_fig_new(title ? title : "effective bits vs storage");
    if (!f) return NULL;
    qs_axis_set(&f->x, QS_AX_LINEAR, "bits per element (incl. scales)");
    qs_axis_set(&f->y, QS_AX_LINEAR, "effective bits (-1/2 log2 error energy)");
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    double *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
    if (!idx || !x || !y) { free(idx); free(x); free(y); qs_fig_free(f); return NULL; }
    /* Pareto front first so points are drawn over it */
    size_t k = qs_pareto_front(p, n, idx);
    for (size_t i = 0; i < k; i++) { x[i] = p[idx[i]].bits; y[i] = p[idx[i]].eff_bits; }
    if (k >= 1) {
        qs_series *s = qs_fig_add(f, QS_SER_LINE, "Pareto front", x, y, k);
        if (!s) goto oom;
        s->color = 7;
        s->dash = QS_DASH_DASHED;
        s->marker = QS_MK_NONE;
        s->width = 1.2;
    }
    /* one scatter series per family, in order of first appearance */
    char exact[200] = "", broken[200] = "";
    int fam_i = 0;
    for (size_t i = 0; i < n; i++) {
        const char *fam = p[i].family ? p[i].family : "";
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(p[j].family ? p[j].family : "", fam) == 0;
        if (seen) continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++) {
            if (strcmp(p[j].family ? p[j].family : "", fam)) continue;
            if (!isfinite(p[j].eff_bits) || !isfinite(p[j].bits)) {
                char *dst = p[j].eff_bits == INFINITY ? exact : broken;
                size_t L = strlen(dst);
                if (L + strlen(p[j].name) + 3 < sizeof exact)
                    snprintf(dst + L, sizeof exact - L, "%s%s", L ? ", " : "", p[j].name);
                continue;
            }
            x[m] = p[j].bits;
            y[m] = p[j].eff_bits;
            m++;
        }
        if (!m) continue;
        qs_series *s = qs_fig_add(f, QS_SER_SCATTER, fam[0] ? fam : "formats", x, y, m);
        if (!s) goto oom;
        s->color = fam_i % 6;   /* the six darkest Okabe-Ito colours: no yellow on white */
        s->marker = (qs_marker)(1 + fam_i % (QS_MK_COUNT - 1));
        fam_i++;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(p[i].eff_bits) || !isfinite(p[i].bits)) continue;
        qs_annot *a = qs_fig_annotate(f, p[i].bits, p[i].eff_bits, 0, "%s", p[i].name);
        if (!a) goto oom;
        a->point = 1;
    }
    if (exact[0] || broken[0])
        snprintf(f->note, sizeof f->note, "not shown: %s%s%s%s%s", exact[0] ? "exact on this data: " : "", exact,
                 exact[0] && broken[0] ? "; " : "", broken[0] ? "NaN/Inf outputs: " : "", broken);
    free(idx); free(x); free(y);
    return f;
oom:
    free(idx); free(x); free(y);
    qs_fig_free(f);
    return NULL;
}

/* ---------------- block heatmap ---------------- */

qs_figure *qs_plot_block_heatmap(const char *title, const float *v, uint64_t rows, uint64_t cols, int logc,
                                 const char *what, const char *xtitle, const char *ytitle, size_t max_cells)
{
    qs_figure *f = qs_fig_new(title ? title : "per-block error");
    if (!f) return NULL;
    if (max_cells < 1) max_cells = 256;
    size_t R = rows > max_cells ? max_cells : (size_t)rows, C = cols > max_cells ? max_cells : (size_t)cols;
    if (rows == 0 || cols == 0) R = C = 0;
    size_t RC = R * C;
    double *h = malloc((RC > 0 ? RC : 1) * sizeof *h);
    double *cnt = calloc(RC > 0 ? RC : 1, sizeof *cnt);
    if (!h || !cnt) { free(h); free(cnt); qs_fig_free(f); return NULL; }
    for (size_t i = 0; i < R * C; i++) h[i] = 0;
    for (uint64_t r = 0; r < rows && R; r++) {
        size_t rr = (size_t)(r * R / rows);
        for (uint64_t c = 0; c < cols; c++) {
            double x = v[r * cols + c];
            if (!isfinite(x) || (logc && !(x > 0))) continue;
            size_t cc = (size_t)(c * C / cols);
            h[rr * C + cc] += x;
            cnt[rr * C + cc] += 1;
        }
    }
    qs_fig_free(f);
    f = qs_plot_block_heatmap_cells(title, h, cnt, R, C, rows, cols, logc, what, xtitle, ytitle);
    free(cnt);
    free(h);
    return f;
}

qs_figure *qs_plot_block_heatmap_cells(const char *title, double *h, const double *cnt, size_t R, size_t C,
                                       uint64_t rows, uint64_t cols, int logc, const char *what, const char *xtitle,
                                       const char *ytitle)
{
    qs_figure *f = qs_fig_new(title ? title : "per-block error");
    if (!f) return NULL;
    for (size_t i = 0; i < R * C; i++) h[i] = cnt[i] > 0 ? h[i] / cnt[i] : NAN;
    qs_heatmap *hm = qs_fig_heatmap(f, h, R, C);
    if (!hm) { qs_fig_free(f); return NULL; }
    hm->x0 = 0;
    hm->x1 = (double)cols;
    hm->y0 = 0;
    hm->y1 = (double)rows;
    qs_axis_set(&hm->cbar, logc ? QS_AX_LOG10 : QS_AX_LINEAR, what ? what : "block RMSE");
    qs_axis_set(&f->x, QS_AX_LINEAR, xtitle ? xtitle : "block");
    qs_axis_set(&f->y, QS_AX_LINEAR, ytitle ? ytitle : "row");
    f->y.invert = 1;
    if (R < rows || C < cols)
        snprintf(f->note, sizeof f->note, "%llu x %llu blocks: each cell shows the mean of the blocks it covers",
                 (unsigned long long)rows, (unsigned long long)cols);   /* whatever the renderer's cell count */
    return f;
}

/* ---------------- transfer curve ---------------- */

qs_figure *qs_plot_transfer(const qs_format *fmt, const qs_qopts *o, double lo, double hi, size_t n, double ref_amax,
                            qs_err *e)
{
    if (n < 2) n = 2;
    if (!(hi > lo)) { qs_fail(e, "empty range for the transfer curve"); return NULL; }
    if (!(ref_amax > 0)) ref_amax = 1;
    int plain = fmt->meta_bytes == 0 && fmt->block == 1;
    char title[256];
    if (plain) snprintf(title, sizeof title, "transfer curve of %s", fmt->name);
    else snprintf(title, sizeof title, "transfer curve of %s (in a block with absmax %g)", fmt->name, ref_amax);
    qs_figure *f = qs_fig_new(title);
    double *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q), *d = malloc(n * sizeof *d);
    if (!f || !x || !q || !d) { free(x); free(q); free(d); qs_fig_free(f); qs_fail(e, "out of memory"); return NULL; }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(float)(lo + (hi - lo) * (double)i / (double)(n - 1));
        float in[2] = {(float)x[i], (float)ref_amax}, out[2];
        if (fmt->fakeq(fmt, o, in, plain ? 1 : 2, out, e)) { free(x); free(q); free(d); qs_fig_free(f); return NULL; }
        q[i] = out[0];
        d[i] = q[i] - x[i];
        if (!isfinite(q[i])) bad++;
    }
    double ends[2] = {x[0], x[n - 1]};
    qs_series *s = qs_fig_add(f, QS_SER_LINE, "identity x", ends, ends, 2);
    if (s) { s->color = QS_COLOR_GREY; s->dash = QS_DASH_DASHED; s->marker = QS_MK_NONE; s->width = 1; }
    qs_series *sq = qs_fig_add(f, QS_SER_LINE, "Q(x)", x, q, n);
    if (sq) { sq->color = 0; sq->dash = QS_DASH_SOLID; sq->marker = QS_MK_NONE; sq->width = 1.8; }
    qs_series *se = qs_fig_add(f, QS_SER_LINE, "error Q(x) - x", x, d, n);
    if (se) { se->color = 3; se->dash = QS_DASH_SOLID; se->marker = QS_MK_NONE; se->width = 1.2; }
    free(x); free(q); free(d);
    if (!s || !sq || !se) { qs_fig_free(f); qs_fail(e, "out of memory"); return NULL; }
    qs_axis_set(&f->x, QS_AX_LINEAR, "x (input)");
    qs_axis_set(&f->y, QS_AX_LINEAR, "Q(x) and Q(x) - x (same units as x)");
    if (bad) snprintf(f->note, sizeof f->note, "%zu of %zu samples become NaN or Inf (not drawn)", bad, n);
    return f;
}

/* ---------------- generic lines ---------------- */

qs_figure *qs_plot_lines(const char *title, const char *xtitle, qs_ax_scale xs, const char *ytitle, qs_ax_scale ys,
                         const qs_line_data *s, size_t n)
{
    qs_figure *f = qs_fig_new(title);
    if (!f) return NULL;
    qs_axis_set(&f->x, xs, xtitle);
    qs_axis_set(&f->y, ys, ytitle);
    int whole = 0;   /* every finite x a whole number (variants, layers, steps): no ticks between */
    for (size_t i = 0; i < n; i++) {
        qs_series *se = qs_fig_add(f, QS_SER_LINE, s[i].name, s[i].x, s[i].y, s[i].n);
        if (!se) { qs_fig_free(f); return NULL; }
        if (s[i].n > 40) se->marker = QS_MK_NONE;   /* dense: the dash pattern tells series apart */
        for (size_t k = 0; k < s[i].n && whole >= 0; k++)
            if (isfinite(s[i].x[k])) whole = s[i].x[k] == floor(s[i].x[k]) && fabs(s[i].x[k]) < 1e15 ? 1 : -1;
    }
    if (whole > 0 && xs == QS_AX_LINEAR) f->x.integer = 1;
    return f;
}

qs_figure *qs_plot_trajectory(const char *title, const char *ytitle, const qs_line_data *s, size_t n)
{
    qs_figure *f = qs_plot_lines(title ? title : "training-inference mismatch over steps", "training step", QS_AX_LINEAR,
                                 ytitle ? ytitle : "mismatch", QS_AX_SYMLOG, s, n);
    if (f) f->x.integer = 1;   /* steps are whole numbers */
    return f;
}

qs_figure *qs_plot_msd(const char *title, const qs_line_data *s, size_t n)
{
    qs_figure *f = qs_plot_lines(title ? title : "multi-pass effective bits", "passes", QS_AX_LINEAR,
                                 "effective bits", QS_AX_LINEAR, s, n);
    if (f) f->x.integer = 1;
    return f;
}

qs_figure *qs_plot_attn(const char *title, const char *ytitle, const qs_line_data *s, size_t n)
{
    return qs_plot_lines(title ? title : "attention error vs sequence length", "sequence length (tokens)", QS_AX_LOG2,
                         ytitle ? ytitle : "relative error of the attention output", QS_AX_LOG10, s, n);
}
