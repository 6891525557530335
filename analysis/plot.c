/*
** The plot model (see plot.h): figure building, scales, range resolution, ticks and layout.
*/
#include "plot.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- palette, colour map, markers ---------------- */

static const unsigned char okabe_ito[QS_PALETTE_N][3] = {
    {0x00, 0x72, 0xB2},   /* blue */
    {0xE6, 0x9F, 0x00},   /* orange */
    {0x00, 0x9E, 0x73},   /* bluish green */
    {0xD5, 0x5E, 0x00},   /* vermillion */
    {0xCC, 0x79, 0xA7},   /* reddish purple */
    {0x56, 0xB4, 0xE9},   /* sky blue */
    {0xF0, 0xE4, 0x42},   /* yellow */
    {0x00, 0x00, 0x00},   /* black */
};

void qs_palette_rgb(int idx, double rgb[3])
{
    if (idx < 0) { rgb[0] = rgb[1] = rgb[2] = 0.62; return; }
    const unsigned char *c = okabe_ito[idx % QS_PALETTE_N];
    for (int k = 0; k < 3; k++) rgb[k] = c[k] / 255.0;
}

/* viridis at 10 stops (matplotlib's, as used by R's viridis(10)) */
static const unsigned char viridis[10][3] = {
    {0x44, 0x01, 0x54}, {0x48, 0x28, 0x78}, {0x3E, 0x4A, 0x89}, {0x31, 0x68, 0x8E}, {0x26, 0x82, 0x8E},
    {0x1F, 0x9E, 0x89}, {0x35, 0xB7, 0x79}, {0x6D, 0xCD, 0x59}, {0xB4, 0xDE, 0x2C}, {0xFD, 0xE7, 0x25},
};

void qs_colormap_rgb(double t, double rgb[3])
{
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double p = t * 9;
    int i = (int)p;
    if (i >= 9) i = 8;
    double u = p - i;
    for (int k = 0; k < 3; k++) rgb[k] = ((1 - u) * viridis[i][k] + u * viridis[i + 1][k]) / 255.0;
}

char qs_marker_ascii(qs_marker m)
{
    static const char g[QS_MK_COUNT] = {'*', 'o', '#', '^', '%', 'v', '+', 'x', '@'};
    return (unsigned)m < QS_MK_COUNT ? g[m] : '*';
}

const char *qs_marker_utf8(qs_marker m)
{
    static const char *const g[QS_MK_COUNT] = {"•", "●", "■", "▲", "◆", "▼", "✚", "✖", "★"};
    return (unsigned)m < QS_MK_COUNT ? g[m] : "•";
}

/* ---------------- building ---------------- */

/* Drop a UTF-8 character cut at the end of a fixed-size copy (renderers refuse invalid text). */
static void utf8_trim(char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (n - (i - 1) < need) s[i - 1] = 0;
}

qs_figure *qs_fig_new(const char *title)
{
    qs_figure *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    if (title) snprintf(f->title, sizeof f->title, "%s", title);
    utf8_trim(f->title);
    f->x.lo = f->x.hi = f->y.lo = f->y.hi = NAN;
    return f;
}

void qs_fig_free(qs_figure *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nseries; i++) {
        free(f->series[i].name);
        free(f->series[i].x);
        free(f->series[i].y);
    }
    free(f->series);
    free(f->annots);
    if (f->heat) free(f->heat->v);
    free(f->heat);
    free(f);
}

static double *dup_d(const double *v, size_t n)
{
    if (!v) return NULL;
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d && n) memcpy(d, v, n * sizeof *d);
    return d;
}

qs_figure *qs_fig_clone(const qs_figure *src)
{
    qs_figure *f = malloc(sizeof *f);
    if (!f) return NULL;
    *f = *src;
    f->series = NULL;
    f->annots = NULL;
    f->heat = NULL;
    f->nseries = f->cap_series = f->nannots = f->cap_annots = 0;
    int ok = 1;
    if (src->nseries && (f->series = calloc(src->nseries, sizeof *f->series))) {
        f->cap_series = src->nseries;
        for (size_t i = 0; i < src->nseries; i++) {
            const qs_series *a = &src->series[i];
            qs_series *b = &f->series[f->nseries++];
            *b = *a;
            size_t nx = a->kind == QS_SER_STEP ? a->n + 1 : a->n;
            b->name = a->name ? strdup(a->name) : NULL;
            b->x = dup_d(a->x, nx);
            b->y = dup_d(a->y, a->n);
            if ((a->name && !b->name) || (a->x && !b->x) || (a->y && !b->y)) ok = 0;
        }
    } else if (src->nseries) ok = 0;
    if (src->nannots && (f->annots = malloc(src->nannots * sizeof *f->annots))) {
        memcpy(f->annots, src->annots, src->nannots * sizeof *f->annots);
        f->nannots = f->cap_annots = src->nannots;
    } else if (src->nannots) ok = 0;
    if (src->heat && (f->heat = malloc(sizeof *f->heat))) {
        *f->heat = *src->heat;
        if (!(f->heat->v = dup_d(src->heat->v, src->heat->rows * src->heat->cols))) ok = 0;
    } else if (src->heat) ok = 0;
    if (!ok) { qs_fig_free(f); return NULL; }
    return f;
}

void qs_axis_set(qs_axis *a, qs_ax_scale s, const char *title)
{
    a->scale = s;
    if (title) snprintf(a->title, sizeof a->title, "%s", title);
    utf8_trim(a->title);
}


qs_series *qs_fig_add(qs_figure *f, qs_ser_kind kind, const char *name, const double *x, const double *y, size_t n)
{
    if (f->nseries == f->cap_series) {
        size_t nc = f->cap_series ? 2 * f->cap_series : 8;
        qs_series *ns = realloc(f->series, nc * sizeof *ns);
        if (!ns) return NULL;
        f->series = ns;
        f->cap_series = nc;
    }
    /* series of one figure share colour/marker/dash cycles, counting only data series */
    int k = 0;
    for (size_t i = 0; i < f->nseries; i++)
        if (f->series[i].kind != QS_SER_HLINE && f->series[i].kind != QS_SER_VLINE) k++;
    qs_series *s = &f->series[f->nseries];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->n = n;
    s->name = name ? strdup(name) : NULL;
    size_t nx = kind == QS_SER_STEP ? n + 1 : n;
    s->x = (kind == QS_SER_HLINE) ? NULL : dup_d(x, nx);
    s->y = (kind == QS_SER_VLINE) ? NULL : dup_d(y, n);
    if ((name && !s->name) || (kind != QS_SER_HLINE && x && !s->x) || (kind != QS_SER_VLINE && y && !s->y)) {
        free(s->name); free(s->x); free(s->y);
        return NULL;
    }
    if ((kind != QS_SER_HLINE && !s->x) || (kind != QS_SER_VLINE && !s->y)) {
        /* missing coordinates: an empty series */
        free(s->x); free(s->y);
        s->x = s->y = NULL;
        s->n = 0;
    }
    if (kind == QS_SER_HLINE || kind == QS_SER_VLINE) {
        s->color = QS_COLOR_GREY;
        s->faint = 1;
        s->dash = QS_DASH_SOLID;
        s->width = 0.8;
    } else {
        /* past the eighth series the colours repeat with the next marker and dash: (colour, marker)
        ** stays unique for 64 series */
        s->color = k % QS_PALETTE_N;
        s->marker = (qs_marker)(1 + (k + k / QS_PALETTE_N) % (QS_MK_COUNT - 1));
        s->dash = (qs_dash)((k + k / QS_PALETTE_N) % QS_DASH_COUNT);
        s->width = 1.6;
    }
    f->nseries++;
    return s;
}

qs_annot *qs_fig_annotate(qs_figure *f, double x, double y, int frac, const char *fmt, ...)
{
    if (f->nannots == f->cap_annots) {
        size_t nc = f->cap_annots ? 2 * f->cap_annots : 8;
        qs_annot *na = realloc(f->annots, nc * sizeof *na);
        if (!na) return NULL;
        f->annots = na;
        f->cap_annots = nc;
    }
    qs_annot *a = &f->annots[f->nannots++];
    memset(a, 0, sizeof *a);
    a->x = x;
    a->y = y;
    a->frac = frac;
    a->color = -2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof a->text, fmt, ap);
    va_end(ap);
    utf8_trim(a->text);
    return a;
}

qs_heatmap *qs_fig_heatmap(qs_figure *f, const double *v, size_t rows, size_t cols)
{
    qs_heatmap *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->rows = rows;
    h->cols = cols;
    h->v = dup_d(v, rows * cols);
    if (!h->v) { free(h); return NULL; }
    h->x0 = 0; h->x1 = (double)cols;
    h->y0 = 0; h->y1 = (double)rows;
    h->cbar.lo = h->cbar.hi = NAN;
    if (f->heat) { free(f->heat->v); free(f->heat); }
    f->heat = h;
    return h;
}

/* ---------------- scales ---------------- */

static double symc(const qs_axis *a) { return a->symlog_c > 0 ? a->symlog_c : a->symlog_auto > 0 ? a->symlog_auto : 1.0; }

/* automatic symlog constant from the values a series contributes to an axis */
static void symlog_scan(double v, double *minnz, double *maxabs)
{
    if (!isfinite(v) || v == 0) return;
    v = fabs(v);
    if (v < *minnz) *minnz = v;
    if (v > *maxabs) *maxabs = v;
}

static void symlog_resolve(qs_figure *f, int is_x)
{
    qs_axis *a = is_x ? &f->x : &f->y;
    a->symlog_auto = 0;
    if (a->scale != QS_AX_SYMLOG || a->symlog_c > 0) return;
    double minnz = INFINITY, maxabs = 0;
    for (size_t i = 0; i < f->nseries; i++) {
        const qs_series *s = &f->series[i];
        const double *v = is_x ? s->x : s->y;
        size_t n = (s->kind == QS_SER_STEP && is_x) ? s->n + 1 : s->n;
        if (!v || s->kind == QS_SER_HLINE || s->kind == QS_SER_VLINE) continue;
        for (size_t k = 0; k < n; k++) symlog_scan(v[k], &minnz, &maxabs);
    }
    if (!(maxabs > 0)) { a->symlog_auto = 1; return; }
    double c = fmax(minnz, maxabs * 1e-6);
    a->symlog_auto = pow(10, floor(log10(c)));
}

int qs_axis_ok(const qs_axis *a, double v)
{
    if (!isfinite(v)) return 0;
    if ((a->scale == QS_AX_LOG2 || a->scale == QS_AX_LOG10) && !(v > 0)) return 0;
    return 1;
}

double qs_axis_fwd(const qs_axis *a, double v)
{
    if (!qs_axis_ok(a, v)) return NAN;
    switch (a->scale) {
    case QS_AX_LOG2: return log2(v);
    case QS_AX_LOG10: return log10(v);
    case QS_AX_SYMLOG: { double c = symc(a); return v < 0 ? -log10(1 - v / c) : log10(1 + v / c); }
    default: return v;
    }
}

double qs_axis_inv(const qs_axis *a, double t)
{
    switch (a->scale) {
    case QS_AX_LOG2: return exp2(t);
    case QS_AX_LOG10: return pow(10, t);
    case QS_AX_SYMLOG: { double c = symc(a); return t < 0 ? -c * (pow(10, -t) - 1) : c * (pow(10, t) - 1); }
    default: return t;
    }
}

/* ---------------- range resolution ---------------- */

typedef struct { double lo, hi; int any; } trange;

static void tr_add(trange *r, double t)
{
    if (!isfinite(t)) return;
    if (!r->any) { r->lo = r->hi = t; r->any = 1; return; }
    if (t < r->lo) r->lo = t;
    if (t > r->hi) r->hi = t;
}

static void finish_axis(qs_axis *a, trange r, int margin)
{
    int islog = a->scale == QS_AX_LOG2 || a->scale == QS_AX_LOG10;
    double rlo = qs_axis_fwd(a, a->lo), rhi = qs_axis_fwd(a, a->hi);
    if (!r.any) {
        if (islog) { r.lo = 0; r.hi = a->scale == QS_AX_LOG2 ? 4 : 1; }
        else { r.lo = 0; r.hi = 1; }
        r.any = 1;
        margin = 0;
    }
    if (r.hi == r.lo) {
        if (islog) { r.lo -= 0.5; r.hi += 0.5; }
        else if (a->scale == QS_AX_SYMLOG) { r.lo -= 0.5; r.hi += 0.5; }
        else { double d = fabs(r.lo) > 0 ? fabs(r.lo) * 0.1 : 1; r.lo -= d; r.hi += d; }
        margin = 0;
    }
    if (margin) {
        double m = 0.05 * (r.hi - r.lo);
        int keep0 = a->scale == QS_AX_LINEAR && a->zero_base && r.lo >= 0;
        if (!keep0) r.lo -= m;
        r.hi += m;
    }
    if (isfinite(rlo)) r.lo = rlo;
    if (isfinite(rhi)) r.hi = rhi;
    if (!(r.hi > r.lo)) r.hi = r.lo + 1;
    a->vlo = qs_axis_inv(a, r.lo);
    a->vhi = qs_axis_inv(a, r.hi);
}

void qs_plot_resolve(qs_figure *f)
{
    trange rx = {0}, ry = {0};
    int margin_x = 1, margin_y = 1;
    symlog_resolve(f, 1);
    symlog_resolve(f, 0);
    f->skipped_x = f->skipped_y = 0;
    int drawable = 0;
    for (size_t i = 0; i < f->nseries; i++) {
        const qs_series *s = &f->series[i];
        if (s->kind == QS_SER_HLINE || s->kind == QS_SER_VLINE) continue;
        if (s->kind == QS_SER_STEP) {
            int nz = 0;
            for (size_t k = 0; k < s->n; k++) if (isfinite(s->y[k]) && s->y[k] != 0) nz = 1;
            for (size_t k = 0; k < s->n; k++) {
                if (!isfinite(s->y[k])) continue;
                if (nz && s->y[k] == 0) continue;
                double a = qs_axis_fwd(&f->x, s->x[k]), b = qs_axis_fwd(&f->x, s->x[k + 1]);
                tr_add(&rx, a); tr_add(&rx, b);
                if (qs_axis_ok(&f->y, s->y[k])) { tr_add(&ry, qs_axis_fwd(&f->y, s->y[k])); drawable = 1; }
            }
            if (f->y.scale == QS_AX_LINEAR || f->y.scale == QS_AX_SYMLOG) tr_add(&ry, 0);
            continue;
        }
        for (size_t k = 0; k < s->n; k++) {
            int okx = qs_axis_ok(&f->x, s->x[k]), oky = qs_axis_ok(&f->y, s->y[k]);
            if (isfinite(s->x[k]) && !okx) f->skipped_x++;
            else if (isfinite(s->y[k]) && !oky) f->skipped_y++;
            if (okx && oky) {
                tr_add(&rx, qs_axis_fwd(&f->x, s->x[k]));
                tr_add(&ry, qs_axis_fwd(&f->y, s->y[k]));
                drawable = 1;
            }
        }
    }
    if (f->heat) {
        qs_heatmap *h = f->heat;
        tr_add(&rx, qs_axis_fwd(&f->x, h->x0)); tr_add(&rx, qs_axis_fwd(&f->x, h->x1));
        tr_add(&ry, qs_axis_fwd(&f->y, h->y0)); tr_add(&ry, qs_axis_fwd(&f->y, h->y1));
        margin_x = margin_y = 0;
        trange rc = {0};
        for (size_t k = 0; k < h->rows * h->cols; k++)
            if (qs_axis_ok(&h->cbar, h->v[k])) { tr_add(&rc, qs_axis_fwd(&h->cbar, h->v[k])); drawable = 1; }
        finish_axis(&h->cbar, rc, 0);
    }
    if (f->y.zero_base && f->y.scale == QS_AX_LINEAR && ry.any && ry.lo > 0) tr_add(&ry, 0);
    f->empty = !drawable;
    finish_axis(&f->x, rx, margin_x);
    finish_axis(&f->y, ry, margin_y);
}

/* ---------------- ticks ---------------- */

static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw)));
    double n = raw / mag;
    double s = n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10;
    return s * mag;
}

void qs_tick_label(double v, double step, char *buf, size_t cap)
{
    if (v == 0 || (step > 0 && fabs(v) < step * 1e-9)) { snprintf(buf, cap, "0"); return; }
    double av = fabs(v);
    if (!(step > 0)) step = av;
    if (av < 1e6 && step >= 1e-4 && av >= 1e-4) {
        int dec = (int)ceil(-log10(step) - 1e-9);
        if (dec < 0) dec = 0;
        /* a step like 2.5 needs one more digit than its power of ten suggests */
        double scaled = step * pow(10, dec);
        if (fabs(scaled - floor(scaled + 0.5)) > 1e-6) dec++;
        snprintf(buf, cap, "%.*f", dec, v);
        return;
    }
    int e = (int)floor(log10(av) + 1e-12);
    double m = v / pow(10, e);
    if (fabs(m) >= 10 - 1e-9) { m /= 10; e++; }
    int dig = (int)floor(log10(av) + 1e-12) - (int)floor(log10(step) + 1e-12);
    if (dig < 0) dig = 0;
    if (dig > 6) dig = 6;
    char mb[32];
    snprintf(mb, sizeof mb, "%.*f", dig, m);
    /* trim trailing zeros of the mantissa */
    if (strchr(mb, '.')) {
        size_t L = strlen(mb);
        while (L > 0 && mb[L - 1] == '0') mb[--L] = 0;
        if (L > 0 && mb[L - 1] == '.') mb[--L] = 0;
    }
    snprintf(buf, cap, "%se%d", mb, e);
}

int qs_text_exponent(const char *s, size_t *caret, size_t *e0, size_t *e1, size_t *end)
{
    for (const char *c = strchr(s, '^'); c; c = strchr(c + 1, '^')) {
        const char *p = c + 1, *q;
        if (*p == '{' || *p == '(') {
            char close = *p == '{' ? '}' : ')';
            int depth = 0;
            for (q = p; *q; q++) {
                if (*q == *p) depth++;
                else if (*q == close && --depth == 0) break;
            }
            if (!*q || q == p + 1) continue;   /* unbalanced or empty: literal */
            *caret = (size_t)(c - s);
            *e0 = (size_t)(p - s) + (close == '}');
            *e1 = (size_t)(q - s) + (close == ')');
            *end = (size_t)(q - s) + 1;
            return 1;
        }
        q = p;
        if (*q == '-' || *q == '+') q++;
        const char *t = q;
        while (isalnum((unsigned char)*t) || (*t == '.' && isalnum((unsigned char)t[1]) && t > q)) t++;
        if (t == q) continue;
        *caret = (size_t)(c - s);
        *e0 = (size_t)(p - s);
        *e1 = *end = (size_t)(t - s);
        return 1;
    }
    return 0;
}

static void pow_label(int base, int e, int neg, char *buf, size_t cap)
{
    const char *s = neg ? "-" : "";
    if (base == 10 && e >= 0 && e <= 3) snprintf(buf, cap, "%s%d", s, e == 0 ? 1 : e == 1 ? 10 : e == 2 ? 100 : 1000);
    else snprintf(buf, cap, "%s%d^%d", s, base, e);
}

/* do the labels of ticks fit along an axis of `length`? */
static int ticks_fit(const qs_axis *a, const qs_ticks *t, double tlo, double thi, double length, int horizontal,
                     const qs_measure *m, double gap)
{
    if (t->n < 2) return 1;
    double prev_p = 0, prev_w = 0;
    for (int i = 0; i < t->n; i++) {
        double p = (qs_axis_fwd(a, t->t[i].v) - tlo) / (thi - tlo) * length;
        double w = horizontal ? m->text_w(m->ctx, t->t[i].label, m->font) : m->line_h;
        if (i > 0 && p - prev_p < (w + prev_w) / 2 + gap) return 0;
        prev_p = p;
        prev_w = w;
    }
    return 1;
}

static void linear_ticks(double lo, double hi, int k, qs_ticks *out)
{
    out->n = 0;
    double step = nice_step((hi - lo) / k);
    if (!(step > 0) || !isfinite(step)) return;
    double first = ceil(lo / step - 1e-9);
    for (double i = first; out->n < QS_PLOT_MAX_TICKS; i++) {
        double v = i * step;
        if (v > hi + step * 1e-9) break;
        if (fabs(v) < step * 1e-9) v = 0;
        out->t[out->n].v = v;
        qs_tick_label(v, step, out->t[out->n].label, QS_PLOT_LABEL);
        out->n++;
    }
}

/* powers of `base` at exponents that are multiples of s within [elo, ehi] */
static void pow_ticks(int base, int elo, int ehi, int s, qs_ticks *out)
{
    out->n = 0;
    int first = elo;
    while (((first % s) + s) % s) first++;
    for (int e = first; e <= ehi && out->n < QS_PLOT_MAX_TICKS; e += s) {
        out->t[out->n].v = base == 2 ? ldexp(1, e) : pow(10, e);
        pow_label(base, e, 0, out->t[out->n].label, QS_PLOT_LABEL);
        out->n++;
    }
}

/* symlog ticks: 0 and ±10^e for every s-th exponent counted down from the largest magnitude, without
** the `drop` smallest magnitudes (which crowd zero first) */
static void symlog_ticks(const qs_axis *a, double lo, double hi, int s, int drop, qs_ticks *out)
{
    out->n = 0;
    double c = symc(a);
    int e0 = (int)ceil(log10(c) - 1e-9);
    double amax = fmax(fabs(lo), fabs(hi));
    int e1 = (int)floor(log10(amax) + 1e-9);
    int es[64], ne = 0;
    for (int e = e1; e >= e0 && ne < 64; e -= s) es[ne++] = e;   /* descending */
    ne -= drop;
    if (ne < 0) ne = 0;
    qs_tick tmp[QS_PLOT_MAX_TICKS];
    int n = 0;
    for (int i = 0; i < ne && n < QS_PLOT_MAX_TICKS - 1; i++) {   /* negatives, large to small */
        double v = -pow(10, es[i]);
        if (v < lo || v > hi) continue;
        tmp[n].v = v;
        pow_label(10, es[i], 1, tmp[n].label, QS_PLOT_LABEL);
        n++;
    }
    if (lo <= 0 && hi >= 0 && n < QS_PLOT_MAX_TICKS) { tmp[n].v = 0; snprintf(tmp[n].label, QS_PLOT_LABEL, "0"); n++; }
    for (int i = ne - 1; i >= 0 && n < QS_PLOT_MAX_TICKS; i--) {
        double v = pow(10, es[i]);
        if (v < lo || v > hi) continue;
        tmp[n].v = v;
        pow_label(10, es[i], 0, tmp[n].label, QS_PLOT_LABEL);
        n++;
    }
    memcpy(out->t, tmp, (size_t)n * sizeof tmp[0]);
    out->n = n;
}

/* log10 ticks at m * 10^e for the mantissas in ms[] (a range of at most two powers of ten would
** otherwise leave most of the data unlabelled) */
static void mant_ticks(double lo, double hi, const int *ms, int nm, qs_ticks *out)
{
    out->n = 0;
    for (int e = (int)floor(log10(lo)) - 1; e <= (int)ceil(log10(hi)) && out->n < QS_PLOT_MAX_TICKS; e++)
        for (int i = 0; i < nm && out->n < QS_PLOT_MAX_TICKS; i++) {
            double p = pow(10, e), v = ms[i] * p;
            if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9)) continue;
            out->t[out->n].v = v;
            qs_tick_label(v, p, out->t[out->n].label, QS_PLOT_LABEL);
            out->n++;
        }
    /* one style per axis: 0.002, 0.003, 0.005 or, when any label needs an exponent, 2e-5 ... 3e-3 */
    if (out->n && (out->t[0].v < 1e-4 || out->t[out->n - 1].v >= 1e6))
        for (int i = 0; i < out->n; i++) {
            int e = (int)floor(log10(out->t[i].v) + 1e-9);
            snprintf(out->t[i].label, QS_PLOT_LABEL, "%.0fe%d", out->t[i].v / pow(10, e), e);
        }
}

/* Ticks of a cell axis (qs_axis.cells): the centres of the cells in [lo, hi], every step-th one,
** labelled by the cell's index or its name cut to `cut` bytes. */
static void cell_ticks_at(const qs_axis *a, double lo, double hi, long step, int cut, qs_ticks *out)
{
    out->n = 0;
    long c0 = (long)ceil(lo - 0.5 - 1e-9), c1 = (long)floor(hi - 0.5 + 1e-9);
    long first = (long)ceil((double)c0 / (double)step) * step;   /* the first multiple of step in range */
    for (long i = first; i <= c1 && out->n < QS_PLOT_MAX_TICKS; i += step) {
        qs_tick *t = &out->t[out->n++];
        t->v = (double)i + 0.5;
        if (i >= 0 && i < a->ncat) snprintf(t->label, QS_PLOT_LABEL, "%.*s", cut, a->cat[i]);
        else snprintf(t->label, QS_PLOT_LABEL, "%ld", i);
    }
}

/* A cell axis: every cell named in full when the names fit, else names cut to a few characters
** (categories must all stay readable), else every 2nd, 5th, 10th ... cell. */
static void cell_ticks(const qs_axis *a, double lo, double hi, double length, int horizontal, const qs_measure *m,
                       double gap, qs_ticks *out)
{
    double tlo = qs_axis_fwd(a, lo), thi = qs_axis_fwd(a, hi);
    static const int cuts[] = {QS_PLOT_LABEL, 8, 6, 4, 3};
    for (size_t k = 0; k < (a->ncat ? sizeof cuts / sizeof *cuts : 1); k++) {
        cell_ticks_at(a, lo, hi, 1, cuts[k], out);
        if (out->n && (hi - lo) < QS_PLOT_MAX_TICKS && ticks_fit(a, out, tlo, thi, length, horizontal, m, gap)) return;
    }
    static const int mant[] = {2, 5, 10};   /* steps 2, 5, 10, 20, 50, 100 ... */
    for (long p = 1; p < 1000000000L; p *= 10)
        for (int k = 0; k < 3; k++) {
            long step = mant[k] * p;
            cell_ticks_at(a, lo, hi, step, QS_PLOT_LABEL, out);
            if ((hi - lo) / (double)step < QS_PLOT_MAX_TICKS && ticks_fit(a, out, tlo, thi, length, horizontal, m, gap)) return;
        }
    if (out->n > 1) { out->t[0] = out->t[out->n / 2]; out->n = 1; }
}

void qs_axis_ticks(const qs_axis *a, double lo, double hi, double length, int horizontal, const qs_measure *m,
                   double gap, qs_ticks *out)
{
    out->n = 0;
    if (a->cells && a->scale == QS_AX_LINEAR && hi > lo && length > 0) {
        cell_ticks(a, lo, hi, length, horizontal, m, gap, out);
        return;
    }
    double tlo = qs_axis_fwd(a, lo), thi = qs_axis_fwd(a, hi);
    if (!isfinite(tlo) || !isfinite(thi) || !(thi > tlo) || !(length > 0)) return;
    qs_ticks cand;
    if (a->scale == QS_AX_LOG10 && floor(thi + 1e-9) - ceil(tlo - 1e-9) <= 1) {
        /* at most two powers in range: 1-2-3-5 (1-2-5, 1-3) times powers, so labels span the data */
        static const int m1235[] = {1, 2, 3, 5}, m125[] = {1, 2, 5}, m13[] = {1, 3};
        const int *sets[] = {m1235, m125, m13};
        const int nms[] = {4, 3, 2};
        for (int k = 0; k < 3; k++) {
            mant_ticks(lo, hi, sets[k], nms[k], &cand);
            if (cand.n >= 3 && ticks_fit(a, &cand, tlo, thi, length, horizontal, m, gap)) { *out = cand; return; }
        }
    }
    if (a->scale == QS_AX_LOG2 || a->scale == QS_AX_LOG10) {
        int base = a->scale == QS_AX_LOG2 ? 2 : 10;
        int elo = (int)ceil(tlo - 1e-9), ehi = (int)floor(thi + 1e-9);
        if (ehi - elo >= 1) {
            static const int st2[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 64, 100, 128, 200};
            static const int st10[] = {1, 2, 3, 4, 5, 10, 20, 25, 50, 100};
            const int *st = base == 2 ? st2 : st10;
            size_t nst = base == 2 ? sizeof st2 / sizeof *st2 : sizeof st10 / sizeof *st10;
            for (size_t k = 0; k < nst; k++) {
                pow_ticks(base, elo, ehi, st[k], &cand);
                if ((ehi - elo) / st[k] + 1 > QS_PLOT_MAX_TICKS) continue;
                if (ticks_fit(a, &cand, tlo, thi, length, horizontal, m, gap)) { *out = cand; return; }
            }
            /* nothing fits: the two ends of the decade range */
            pow_ticks(base, elo, ehi, ehi - elo > 0 ? ehi - elo : 1, &cand);
            if (cand.n > 2) cand.n = 2;
            if (ticks_fit(a, &cand, tlo, thi, length, horizontal, m, gap)) { *out = cand; return; }
            cand.n = 1;
            *out = cand;
            return;
        }
        /* less than one power in range: linear ticks in value space */
    } else if (a->scale == QS_AX_SYMLOG) {
        static const int st[] = {1, 2, 3, 5, 10, 20};
        symlog_ticks(a, lo, hi, 1, 0, &cand);
        int wide = cand.n >= 3;   /* else too narrow for powers: linear ticks below */
        for (size_t k = 0; k < sizeof st / sizeof *st && wide; k++)
            for (int drop = 0; drop < 64; drop++) {
                symlog_ticks(a, lo, hi, st[k], drop, &cand);
                if (cand.n <= 1) break;
                if (ticks_fit(a, &cand, tlo, thi, length, horizontal, m, gap)) { *out = cand; return; }
            }
        if (wide) symlog_ticks(a, lo, hi, 1, 0, &cand);
        if (cand.n >= 3) {
            /* keep zero only */
            for (int i = 0; i < cand.n; i++)
                if (cand.t[i].v == 0) { out->t[0] = cand.t[i]; out->n = 1; return; }
            out->n = 0;
            return;
        }
    }
    int kmax = (int)(length / (horizontal ? 2.0 * m->font : m->line_h)) + 1;
    if (kmax > 15) kmax = 15;
    if (kmax < 1) kmax = 1;
    double prev_step = -1;
    for (int k = kmax; k >= 1; k--) {
        double step = nice_step((hi - lo) / k);
        if (step == prev_step) continue;
        prev_step = step;
        if (a->integer && step < 1) continue;   /* "2.5 passes" would be a label for nothing */
        linear_ticks(lo, hi, k, &cand);
        if (cand.n == 0) continue;
        if (ticks_fit(a, &cand, tlo, thi, length, horizontal, m, gap)) { *out = cand; return; }
    }
    /* even one step is too crowded: a single tick in the middle of the candidates */
    if (cand.n > 0) { out->t[0] = cand.t[cand.n / 2]; out->n = 1; }
}

/* ---------------- layout ---------------- */

static double px_text_w(void *ctx, const char *s, double size)
{
    (void)ctx;
    double n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80) n++;
    return 0.6 * size * n;
}

void qs_measure_px(qs_measure *m, double s)
{
    memset(m, 0, sizeof *m);
    m->text_w = px_text_w;
    m->font = 12 * s;
    m->title_font = 16 * s;
    m->line_h = 15 * s;
    m->title_h = 20 * s;
    m->pad = 10 * s;
    m->vpad = 6 * s;
    m->tick_len = 6 * s;
    m->legend_sample = 34 * s;
}

static int is_data_series(const qs_series *s) { return s->kind != QS_SER_HLINE && s->kind != QS_SER_VLINE; }

void qs_plot_layout(const qs_figure *f, double W, double H, const qs_measure *m, qs_layout *L)
{
    memset(L, 0, sizeof *L);
    L->W = W;
    L->H = H;
    double pad = m->pad, vpad = m->vpad;
    /* legend entries */
    double maxlab = 0;
    for (size_t i = 0; i < f->nseries; i++) {
        if (!f->series[i].name || !f->series[i].name[0]) continue;
        if (!is_data_series(&f->series[i]) && f->series[i].n == 0) continue;
        L->leg_total++;   /* the renderers say when the legend holds fewer */
        if (L->nleg == QS_PLOT_MAX_LEGEND) continue;
        L->leg[L->nleg++] = i;
        double w = m->text_w(m->ctx, f->series[i].name, m->font);
        if (w > maxlab) maxlab = w;
    }
    L->leg_row = m->cells ? 1 : m->line_h * 1.35;
    double entry_w = m->legend_sample + pad * 0.6 + maxlab;
    double lw = L->nleg ? entry_w + 2 * pad * (m->cells ? 0.5 : 1) : 0;
    /* colour bar */
    double cbw = 0, cb_bar = m->cells ? 2 : m->line_h * 1.2;
    int below = 0;
    if (L->nleg) below = lw > (m->cells ? 0.38 : 0.3) * W;
    double top = vpad, bottom = H - vpad;
    if (f->title[0]) {
        L->title_y = top + m->title_h / 2;
        top += m->title_h + vpad;
    }
    int top_line = (m->cells && f->y.title[0]) || f->heat;
    if (top_line) {
        L->ytitle_y = top + m->line_h / 2;
        L->cbar_title_y = L->ytitle_y;
        top += m->line_h + vpad * 0.5;
    } else {
        top += m->cells ? 0 : m->line_h / 2;
    }
    if (f->note[0] || f->skipped_x || f->skipped_y || L->leg_total > L->nleg) {
        L->note_y = bottom - m->line_h / 2;
        bottom -= m->line_h + vpad * 0.5;
    }
    if (below) {
        double avail = W - 2 * pad;
        L->leg_colw = entry_w + pad * 1.5;
        L->leg_cols = (int)(avail / L->leg_colw);
        if (L->leg_cols < 1) L->leg_cols = 1;
        if (L->leg_cols > L->nleg) L->leg_cols = L->nleg;
        int rows = (L->nleg + L->leg_cols - 1) / L->leg_cols;
        /* in character cells the legend takes at most half the height: the data stays readable and
        ** no label is written across it; the rest is counted in a "+N more" entry */
        int maxr = (int)((bottom - top) / 2 / L->leg_row);
        if (m->cells && rows > maxr) {
            if (maxr < 1) maxr = 1;
            int keep = maxr * L->leg_cols - 1;
            L->leg_more = L->nleg - keep;
            L->nleg = keep;
            rows = maxr;
        }
        double lh = rows * L->leg_row;
        L->legend = (qs_rect){pad, bottom - lh, L->leg_cols * L->leg_colw, lh};
        bottom -= lh + vpad;
        L->legend_below = 1;
    }
    if (f->x.title[0]) {
        L->xtitle_y = bottom - m->line_h / 2;
        bottom -= m->line_h + vpad * 0.5;
    }
    bottom -= m->line_h + m->tick_len;
    if (bottom - top < 2) bottom = top + 2;
    L->plot.y = top;
    L->plot.h = bottom - top;
    /* y ticks over the known height */
    double ygap = m->cells ? 0 : vpad * 0.5;
    qs_axis_ticks(&f->y, f->y.vlo, f->y.vhi, L->plot.h, 0, m, ygap, &L->yt);
    double ylw = 0;
    for (int i = 0; i < L->yt.n; i++) {
        double w = m->text_w(m->ctx, L->yt.t[i].label, m->font);
        if (w > ylw) ylw = w;
    }
    double left = pad * (m->cells ? 0 : 1);
    if (f->y.title[0] && !m->cells) {
        L->ytitle_x = left + m->line_h / 2;
        left += m->line_h + pad * 0.6;
    }
    left += ylw + m->tick_len + (m->cells ? 0 : pad * 0.3);
    double right = W - pad * (m->cells ? 0 : 1);
    if (f->heat) {
        qs_axis_ticks(&f->heat->cbar, f->heat->cbar.vlo, f->heat->cbar.vhi, L->plot.h, 0, m, ygap, &L->ct);
        double cw = 0;
        for (int i = 0; i < L->ct.n; i++) {
            double w = m->text_w(m->ctx, L->ct.t[i].label, m->font);
            if (w > cw) cw = w;
        }
        cbw = pad + cb_bar + m->tick_len + cw;
        right -= cbw;
    }
    if (L->nleg && !below) right -= lw + pad;
    /* room for half of the last x label: a default margin, widened when the label needs it */
    double reserve = m->cells ? 2 : pad * 1.5, xgap = m->cells ? 1 : pad;
    right -= reserve;
    if (right - left < 4) right = left + 4;
    L->plot.x = left;
    L->plot.w = right - left;
    qs_axis_ticks(&f->x, f->x.vlo, f->x.vhi, L->plot.w, 1, m, xgap, &L->xt);
    if (L->xt.n > 0) {
        const qs_tick *t = &L->xt.t[L->xt.n - 1];
        double a0 = qs_axis_fwd(&f->x, f->x.vlo), a1 = qs_axis_fwd(&f->x, f->x.vhi);
        double u = (qs_axis_fwd(&f->x, t->v) - a0) / (a1 - a0);
        if (f->x.invert) u = 1 - u;
        double over = L->plot.x + u * L->plot.w + m->text_w(m->ctx, t->label, m->font) / 2 - (right + reserve);
        if (over > 0 && L->plot.w - over > 4) {
            L->plot.w -= over;
            qs_axis_ticks(&f->x, f->x.vlo, f->x.vhi, L->plot.w, 1, m, xgap, &L->xt);
        }
    }
    if (f->heat) {
        double bx = L->plot.x + L->plot.w + pad;
        L->cbar = (qs_rect){bx, L->plot.y, cb_bar, L->plot.h};
    }
    if (L->nleg && !below) {
        double lx = L->plot.x + L->plot.w + pad * (m->cells ? 2 : 1.5) + cbw;
        int fit = (int)(L->plot.h / L->leg_row);
        if (m->cells && L->nleg > fit && fit >= 1) { L->leg_more = L->nleg - (fit - 1); L->nleg = fit - 1; }
        L->legend = (qs_rect){lx, L->plot.y, lw, (L->nleg + (L->leg_more > 0)) * L->leg_row + (m->cells ? 0 : pad * 0.6)};
        L->leg_cols = 1;
        L->leg_colw = lw;
    }
}

void qs_layout_legend_pos(const qs_layout *L, int i, double *x, double *y)
{
    int cols = L->leg_cols > 0 ? L->leg_cols : 1;
    int r = L->legend_below ? i / cols : i, c = L->legend_below ? i % cols : 0;
    double inset = L->legend_below ? 0 : (L->leg_row > 1.5 ? L->leg_row * 0.25 : 0);
    *x = L->legend.x + c * L->leg_colw + (L->legend_below ? 0 : (L->leg_row > 1.5 ? L->leg_row * 0.45 : 0));
    *y = L->legend.y + inset + r * L->leg_row;
}

double qs_layout_px(const qs_layout *L, const qs_figure *f, double x)
{
    double t = qs_axis_fwd(&f->x, x), a = qs_axis_fwd(&f->x, f->x.vlo), b = qs_axis_fwd(&f->x, f->x.vhi);
    if (!isfinite(t)) return NAN;
    double u = (t - a) / (b - a);
    return L->plot.x + (f->x.invert ? 1 - u : u) * L->plot.w;
}

double qs_layout_py(const qs_layout *L, const qs_figure *f, double y)
{
    double t = qs_axis_fwd(&f->y, y), a = qs_axis_fwd(&f->y, f->y.vlo), b = qs_axis_fwd(&f->y, f->y.vhi);
    if (!isfinite(t)) return NAN;
    double u = (t - a) / (b - a);
    return L->plot.y + L->plot.h - (f->y.invert ? 1 - u : u) * L->plot.h;
}

int qs_layout_annot_pos(const qs_layout *L, const qs_figure *f, const qs_annot *a, double *x, double *y)
{
    if (a->frac) { *x = L->plot.x + a->x * L->plot.w; *y = L->plot.y + (1 - a->y) * L->plot.h; }
    else { *x = qs_layout_px(L, f, a->x); *y = qs_layout_py(L, f, a->y); }
    return isfinite(*x) && isfinite(*y) ? 0 : -1;
}

double qs_heat_t(const qs_heatmap *h, double v)
{
    double t = qs_axis_fwd(&h->cbar, v);
    if (!isfinite(t)) return NAN;
    double a = qs_axis_fwd(&h->cbar, h->cbar.vlo), b = qs_axis_fwd(&h->cbar, h->cbar.vhi);
    if (!(b > a)) return 0.5;
    double u = (t - a) / (b - a);
    return u < 0 ? 0 : u > 1 ? 1 : u;
}

/* Appends one part, "; " after an earlier one; nl may exceed cap after a cut (then nothing more). */
static size_t note_add(char *out, size_t cap, size_t nl, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t note_add(char *out, size_t cap, size_t nl, const char *fmt, ...)
{
    if (nl >= cap) return nl;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + nl, cap - nl, fmt, ap);
    va_end(ap);
    return nl + (k > 0 ? (size_t)k : 0);
}

void qs_plot_note(const qs_figure *f, const qs_layout *L, const qs_note_parts *p, char *out, size_t cap,
                  size_t *same_at)
{
    const char *lw = p->log_words ? p->log_words : "";
    size_t nl = 0;
    if (same_at) *same_at = SIZE_MAX;
    if (!cap) return;
    out[0] = 0;
    if (f->note[0]) nl = note_add(out, cap, nl, "%s", f->note);
    if (f->skipped_x)
        nl = note_add(out, cap, nl, "%s%llu points with x <= 0 not shown%s", nl ? "; " : "", (unsigned long long)f->skipped_x, lw);
    if (L->leg_total > L->nleg)
        nl = note_add(out, cap, nl, "%slegend: the first %d of %d series", nl ? "; " : "", L->nleg, L->leg_total);
    if (p->hidden && p->hidden[0])
        nl = note_add(out, cap, nl, "%s%s mostly hidden by other series (same cells at this size)", nl ? "; " : "", p->hidden);
    if (p->unlabelled && p->unlabelled[0])
        nl = note_add(out, cap, nl, "%sno room for the labels of %s", nl ? "; " : "", p->unlabelled);
    if (f->skipped_y)
        nl = note_add(out, cap, nl, "%s%llu points with y <= 0 not shown%s", nl ? "; " : "", (unsigned long long)f->skipped_y, lw);
    if (p->same && p->same[0] && nl < cap) {
        if (same_at) *same_at = nl;
        note_add(out, cap, nl, "%son top of each other (same points): %s", nl ? "; " : "", p->same);
    }
}
