/*
** PNG plots: the figure drawer (plot model -> qs_rbackend calls), the cairo backend, and the
** libpng writer with provenance text chunks and pHYs (see plot_render.h).
**
** Conventions: white background, the data area framed, light grid at the major ticks, series in
** the Okabe-Ito palette with distinct dash patterns and marker shapes, legend and colour bar right
** of the data area (below it when narrow), text in DejaVu Sans at >= 12 px at 100 dpi.
*/
#include "plot_render.h"
#include "../../store/io_err.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cairo.h>
#include <png.h>

#include "../../kernels/qs_version.h"

/* ======================= the figure drawer ======================= */

typedef struct pd {
    const qs_rbackend *b;
    double s;                    /* scale: dpi / 100 */
} pd;

static void pd_rgb(const pd *d, int idx, double a)
{
    double c[3];
    qs_palette_rgb(idx, c);
    d->b->color(d->b->ctx, c[0], c[1], c[2], a);
}

/* text with exponent markup (qs_text_exponent): each exponent raised and smaller, the rest plain.
** Draws when draw is set, from (x, y) along the text direction; returns the width. */
#define SUP_SCALE 0.72
static double pd_runs(const pd *d, double x, double y, const char *s, double size, int bold, int rotate, int draw)
{
    double w = 0;
    char buf[256];
    for (;;) {
        size_t c, e0, e1, end;
        int has = qs_text_exponent(s, &c, &e0, &e1, &end);
        size_t n = has ? c : strlen(s);
        for (int part = 0; part < 2; part++) {
            const char *t = part ? s + e0 : s;
            size_t L = part ? e1 - e0 : n;
            if (part && !has) break;
            if (L >= sizeof buf) L = sizeof buf - 1;
            memcpy(buf, t, L);
            buf[L] = 0;
            if (!L) continue;
            double sz = part ? size * SUP_SCALE : size, lift = part ? size * 0.38 : 0;
            if (draw) {
                if (rotate) d->b->text(d->b->ctx, x - lift, y - w, buf, sz, bold, 1);
                else d->b->text(d->b->ctx, x + w, y - lift, buf, sz, bold, 0);
            }
            w += d->b->text_width(d->b->ctx, buf, sz, bold);
        }
        if (!has) return w;
        s += end;
    }
}

static double pd_text_w(const pd *d, const char *s, double size, int bold) { return pd_runs(d, 0, 0, s, size, bold, 0, 0); }

static void pd_text(const pd *d, double x, double y, const char *s, double size, int bold, int halign, int rotate)
{
    double w = pd_text_w(d, s, size, bold);
    double off = halign == 1 ? w / 2 : halign == 2 ? w : 0;
    if (rotate) y += off; else x -= off;
    pd_runs(d, x, y, s, size, bold, rotate, 1);
}

static double measure_cb(void *ctx, const char *s, double size) { return pd_text_w((const pd *)ctx, s, size, 0); }

static void pd_dash(const pd *d, qs_dash dash, double width)
{
    double v[4];
    int n = 0;
    double s = d->s * (width > 1.2 ? width / 1.6 : 0.8);
    switch (dash) {
    case QS_DASH_DASHED: v[0] = 7 * s; v[1] = 4 * s; n = 2; break;
    case QS_DASH_DOTTED: v[0] = 1.6 * s; v[1] = 3 * s; n = 2; break;
    case QS_DASH_DASHDOT: v[0] = 8 * s; v[1] = 3 * s; v[2] = 1.8 * s; v[3] = 3 * s; n = 4; break;
    case QS_DASH_LONG: v[0] = 14 * s; v[1] = 4 * s; n = 2; break;
    default: n = 0;
    }
    d->b->line_style(d->b->ctx, width * d->s, v, n);
}

static void pd_poly(const pd *d, double x, double y, double r, int n, double rot)
{
    for (int i = 0; i < n; i++) {
        double a = rot + 2 * M_PI * i / n;
        double px = x + r * sin(a), py = y - r * cos(a);
        if (i == 0) d->b->move_to(d->b->ctx, px, py); else d->b->line_to(d->b->ctx, px, py);
    }
    d->b->close_path(d->b->ctx);
}

static void pd_marker(const pd *d, qs_marker m, double x, double y, int color)
{
    const qs_rbackend *b = d->b;
    double r = 4.6 * d->s;
    if (m == QS_MK_NONE) return;
    if (m == QS_MK_PLUS || m == QS_MK_CROSS) {
        double a = m == QS_MK_CROSS ? M_PI / 4 : 0;
        b->line_style(b->ctx, 2.2 * d->s, NULL, 0);
        pd_rgb(d, color, 1);
        for (int k = 0; k < 2; k++) {
            double t = a + k * M_PI / 2;
            b->move_to(b->ctx, x - r * 1.1 * cos(t), y - r * 1.1 * sin(t));
            b->line_to(b->ctx, x + r * 1.1 * cos(t), y + r * 1.1 * sin(t));
        }
        b->stroke(b->ctx);
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        switch (m) {
        case QS_MK_CIRCLE: pd_poly(d, x, y, r, 24, 0); break;
        case QS_MK_SQUARE: pd_poly(d, x, y, r * 1.2, 4, M_PI / 4); break;
        case QS_MK_TRIANGLE: pd_poly(d, x, y + r * 0.2, r * 1.3, 3, 0); break;
        case QS_MK_TRIANGLE_DOWN: pd_poly(d, x, y - r * 0.2, r * 1.3, 3, M_PI); break;
        case QS_MK_DIAMOND: pd_poly(d, x, y, r * 1.3, 4, 0); break;
        case QS_MK_STAR: {
            for (int i = 0; i < 10; i++) {
                double a = M_PI * i / 5, rr = (i % 2) ? r * 0.62 : r * 1.45;
                double px = x + rr * sin(a), py = y - rr * cos(a);
                if (i == 0) b->move_to(b->ctx, px, py); else b->line_to(b->ctx, px, py);
            }
            b->close_path(b->ctx);
            break;
        }
        default: pd_poly(d, x, y, r, 24, 0);
        }
        if (pass == 0) { pd_rgb(d, color, 1); b->fill(b->ctx); }
        else { b->color(b->ctx, 1, 1, 1, 1); b->line_style(b->ctx, 0.9 * d->s, NULL, 0); b->stroke(b->ctx); }
    }
}

/* a legend sample: the series' line style and marker, or a patch for filled histograms */
static void pd_sample(const pd *d, const qs_series *s, double x, double y, double len)
{
    const qs_rbackend *b = d->b;
    if (s->kind == QS_SER_STEP && s->fill) {
        pd_rgb(d, s->color, 0.3);
        b->move_to(b->ctx, x, y - 5 * d->s); b->line_to(b->ctx, x + len, y - 5 * d->s);
        b->line_to(b->ctx, x + len, y + 5 * d->s); b->line_to(b->ctx, x, y + 5 * d->s);
        b->close_path(b->ctx);
        b->fill(b->ctx);
    }
    if (s->kind != QS_SER_SCATTER) {
        pd_rgb(d, s->color, s->faint ? 0.6 : 1);
        pd_dash(d, s->dash, s->faint ? 1.2 : s->width);
        b->move_to(b->ctx, x, y);
        b->line_to(b->ctx, x + len, y);
        b->stroke(b->ctx);
    }
    if (s->kind == QS_SER_SCATTER || (s->kind == QS_SER_LINE && s->marker != QS_MK_NONE))
        pd_marker(d, s->marker, x + len / 2, y, s->color);
}

static void pd_series(const pd *d, const qs_figure *f, const qs_layout *L, const qs_series *s)
{
    const qs_rbackend *b = d->b;
    double top = L->plot.y, bot = L->plot.y + L->plot.h, left = L->plot.x, right = L->plot.x + L->plot.w;
    switch (s->kind) {
    case QS_SER_VLINE:
    case QS_SER_HLINE:
        pd_rgb(d, s->color, s->faint ? (s->n > 60 ? 0.4 : 0.6) : 1);
        pd_dash(d, s->dash, s->width > 0 ? s->width : 0.8);
        for (size_t i = 0; i < s->n; i++) {
            if (s->kind == QS_SER_VLINE) {
                double x = qs_layout_px(L, f, s->x[i]);
                if (!isfinite(x) || x < left - 1 || x > right + 1) continue;
                b->move_to(b->ctx, x, top); b->line_to(b->ctx, x, bot);
            } else {
                double y = qs_layout_py(L, f, s->y[i]);
                if (!isfinite(y) || y < top - 1 || y > bot + 1) continue;
                b->move_to(b->ctx, left, y); b->line_to(b->ctx, right, y);
            }
        }
        b->stroke(b->ctx);
        return;
    case QS_SER_STEP: {
        double base = f->y.scale == QS_AX_LINEAR || f->y.scale == QS_AX_SYMLOG ? qs_layout_py(L, f, 0) : bot;
        if (!isfinite(base) || base > bot) base = bot;
        if (base < top) base = top;
        for (int pass = s->fill ? 0 : 1; pass < 2; pass++) {
            if (pass == 0) pd_rgb(d, s->color, 0.28);
            else { pd_rgb(d, s->color, 1); pd_dash(d, s->dash, s->width); }
            int open = 0;
            double lastx = 0;
            for (size_t k = 0; k <= s->n; k++) {
                int ok = k < s->n;
                double x0 = 0, x1 = 0, y = base;
                if (ok) {
                    x0 = qs_layout_px(L, f, s->x[k]);
                    x1 = qs_layout_px(L, f, s->x[k + 1]);
                    ok = isfinite(x0) && isfinite(x1) && isfinite(s->y[k]);
                }
                if (!ok) {   /* end of a run of drawable bins */
                    if (open) {
                        b->line_to(b->ctx, lastx, base);
                        if (pass == 0) { b->close_path(b->ctx); b->fill(b->ctx); } else b->stroke(b->ctx);
                    }
                    open = 0;
                    continue;
                }
                y = qs_layout_py(L, f, s->y[k]);
                if (!isfinite(y)) y = base;
                if (y > bot + 2) y = bot + 2;
                if (y < top - 2) y = top - 2;
                if (!open) { b->move_to(b->ctx, x0, base); open = 1; }
                b->line_to(b->ctx, x0, y);
                b->line_to(b->ctx, x1, y);
                lastx = x1;
            }
        }
        return;
    }
    case QS_SER_LINE: {
        pd_rgb(d, s->color, 1);
        pd_dash(d, s->dash, s->width);
        int open = 0;
        for (size_t k = 0; k < s->n; k++) {
            double x = qs_layout_px(L, f, s->x[k]), y = qs_layout_py(L, f, s->y[k]);
            if (!isfinite(x) || !isfinite(y)) { open = 0; continue; }
            /* keep far-away points from overflowing the rasteriser */
            if (y < top - 4 * L->H) y = top - 4 * L->H;
            if (y > bot + 4 * L->H) y = bot + 4 * L->H;
            if (!open) { b->move_to(b->ctx, x, y); open = 1; }
            else b->line_to(b->ctx, x, y);
        }
        b->stroke(b->ctx);
        if (s->marker != QS_MK_NONE && s->n <= 200)
            for (size_t k = 0; k < s->n; k++) {
                double x = qs_layout_px(L, f, s->x[k]), y = qs_layout_py(L, f, s->y[k]);
                if (isfinite(x) && isfinite(y)) pd_marker(d, s->marker, x, y, s->color);
            }
        return;
    }
    case QS_SER_SCATTER:
        for (size_t k = 0; k < s->n; k++) {
            double x = qs_layout_px(L, f, s->x[k]), y = qs_layout_py(L, f, s->y[k]);
            if (isfinite(x) && isfinite(y)) pd_marker(d, s->marker == QS_MK_NONE ? QS_MK_CIRCLE : s->marker, x, y, s->color);
        }
        return;
    }
}

typedef struct { double x, y, w, h; } box;
static int box_hit(box a, box b) { return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h; }

static void pd_frame_rect(const pd *d, double x, double y, double w, double h)
{
    d->b->move_to(d->b->ctx, x, y); d->b->line_to(d->b->ctx, x + w, y);
    d->b->line_to(d->b->ctx, x + w, y + h); d->b->line_to(d->b->ctx, x, y + h);
    d->b->close_path(d->b->ctx);
}

/* Lines and markers drawn on the same pixels as an earlier series (within tol px at every point) hide
** it without a word: they are named in the note, "A = B = C" per group (the later ones are on top). */
static int same_pixels(const qs_figure *f, const qs_layout *L, const qs_series *a, const qs_series *b, double tol)
{
    if (a->n != b->n || !a->n) return 0;
    int any = 0;
    for (size_t k = 0; k < a->n; k++) {
        double ax = qs_layout_px(L, f, a->x[k]), ay = qs_layout_py(L, f, a->y[k]);
        double bx = qs_layout_px(L, f, b->x[k]), by = qs_layout_py(L, f, b->y[k]);
        int fa = isfinite(ax) && isfinite(ay), fb = isfinite(bx) && isfinite(by);
        if (fa != fb) return 0;
        if (!fa) continue;
        if (fabs(ax - bx) > tol || fabs(ay - by) > tol) return 0;
        any = 1;
    }
    return any;
}

static const char *sname(const qs_series *s) { return s->name && s->name[0] ? s->name : "a series without a label"; }

static void coinciding_series(const qs_figure *f, const qs_layout *L, double tol, char *out, size_t cap)
{
    size_t ns = f->nseries, ol = 0;
    out[0] = 0;
    int *root = malloc((ns ? ns : 1) * sizeof *root);
    if (!root) return;
    for (size_t j = 0; j < ns; j++) {
        const qs_series *b = &f->series[j];
        root[j] = -1;
        /* lines not in the legend (a band's bounds) may lie on anything: nothing to name */
        if ((b->kind != QS_SER_LINE && b->kind != QS_SER_SCATTER) || !b->name) continue;
        for (size_t i = 0; i < j && root[j] < 0; i++)
            if (f->series[i].kind == b->kind && f->series[i].name && same_pixels(f, L, &f->series[i], b, tol)) root[j] = root[i] >= 0 ? root[i] : (int)i;
    }
    for (size_t r = 0; r < ns; r++) {
        int first = 1;
        for (size_t j = r + 1; j < ns; j++) {
            if (root[j] != (int)r || ol + 8 >= cap) continue;
            if (first) ol += (size_t)snprintf(out + ol, cap - ol, "%s%s", ol ? "; " : "", sname(&f->series[r]));
            first = 0;
            if (ol < cap) ol += (size_t)snprintf(out + ol, cap - ol, " = %s", sname(&f->series[j]));
        }
    }
    if (ol >= cap) ol = cap - 1;
    free(root);
}

#define PD_INK 0.13    /* text, frame and ticks */
#define PD_MUTE 0.35   /* the note and "no data" */

/* The heatmap as an image in the data area (grey where a cell has no value). */
static void pd_heatmap(pd *d, const qs_layout *L, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    qs_heatmap *h = f->heat;
    uint8_t *rgb = malloc(h->rows * h->cols * 3);
    if (rgb) {
        for (size_t i = 0; i < h->rows * h->cols; i++) {
            double t = qs_heat_t(h, h->v[i]), c[3] = {0.86, 0.86, 0.86};
            if (isfinite(t)) qs_colormap_rgb(t, c);
            for (int k = 0; k < 3; k++) rgb[3 * i + (size_t)k] = (uint8_t)lround(c[k] * 255);
        }
        double x0 = qs_layout_px(L, f, h->x0), x1 = qs_layout_px(L, f, h->x1);
        double y0 = qs_layout_py(L, f, h->y0), y1 = qs_layout_py(L, f, h->y1);
        b->clip(b->ctx, L->plot.x, L->plot.y, L->plot.w, L->plot.h);
        b->image(b->ctx, fmin(x0, x1), fmin(y0, y1), fabs(x1 - x0), fabs(y1 - y0), rgb, (int)h->cols, (int)h->rows);
        b->clip(b->ctx, 0, 0, 0, 0);
        free(rgb);
    }
}

/* The grid at the major ticks. */
static void pd_grid(pd *d, const qs_layout *L, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    double s = d->s;
    b->color(b->ctx, 0.90, 0.90, 0.90, 1);
    b->line_style(b->ctx, 1 * s, NULL, 0);
    for (int i = 0; i < L->xt.n; i++) {
        double x = qs_layout_px(L, f, L->xt.t[i].v);
        if (!isfinite(x)) continue;
        b->move_to(b->ctx, x, L->plot.y); b->line_to(b->ctx, x, L->plot.y + L->plot.h);
    }
    for (int i = 0; i < L->yt.n; i++) {
        double y = qs_layout_py(L, f, L->yt.t[i].v);
        if (!isfinite(y)) continue;
        b->move_to(b->ctx, L->plot.x, y); b->line_to(b->ctx, L->plot.x + L->plot.w, y);
    }
    b->stroke(b->ctx);
}

/* The series, clipped to the data area: faint reference lines behind, then data in order. */
static void pd_all_series(pd *d, const qs_layout *L, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    b->clip(b->ctx, L->plot.x, L->plot.y, L->plot.w, L->plot.h);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < f->nseries; i++) {
            const qs_series *se = &f->series[i];
            int ref = se->kind == QS_SER_HLINE || se->kind == QS_SER_VLINE;
            if ((pass == 0) == (ref && se->faint)) pd_series(d, f, L, se);
        }
    b->clip(b->ctx, 0, 0, 0, 0);

}

/* The frame of the data area, its ticks and their labels. */
static void pd_frame_ticks(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    double s = d->s;
    const double fs = m->font;
    const double ink = PD_INK;
    b->color(b->ctx, ink, ink, ink, 1);
    b->line_style(b->ctx, 1 * s, NULL, 0);
    pd_frame_rect(d, L->plot.x, L->plot.y, L->plot.w, L->plot.h);
    b->stroke(b->ctx);
    double yb = L->plot.y + L->plot.h;
    for (int i = 0; i < L->xt.n; i++) {
        double x = qs_layout_px(L, f, L->xt.t[i].v);
        if (!isfinite(x)) continue;
        b->move_to(b->ctx, x, yb); b->line_to(b->ctx, x, yb + 5 * s);
    }
    for (int i = 0; i < L->yt.n; i++) {
        double y = qs_layout_py(L, f, L->yt.t[i].v);
        if (!isfinite(y)) continue;
        b->move_to(b->ctx, L->plot.x, y); b->line_to(b->ctx, L->plot.x - 5 * s, y);
    }
    b->stroke(b->ctx);
    for (int i = 0; i < L->xt.n; i++) {
        double x = qs_layout_px(L, f, L->xt.t[i].v);
        if (isfinite(x)) pd_text(d, x, yb + m->tick_len + m->line_h / 2 + 1 * s, L->xt.t[i].label, fs, 0, 1, 0);
    }
    for (int i = 0; i < L->yt.n; i++) {
        double y = qs_layout_py(L, f, L->yt.t[i].v);
        if (isfinite(y)) pd_text(d, L->plot.x - m->tick_len - 3 * s, y, L->yt.t[i].label, fs, 0, 2, 0);
    }

}

/* The titles; a long one shrinks (down to the tick-label size). */
static void pd_titles(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f, double W)
{
    double s = d->s;
    const double fs = m->font;
    if (f->title[0]) {
        /* a long title shrinks (down to the tick-label size) and is centred on the canvas if it
        ** does not fit over the data area */
        double tf = m->title_font, tw = pd_text_w(d, f->title, tf, 1);
        while (tw > W - 2 * m->pad && tf > m->font) { tf -= 0.5 * s; tw = pd_text_w(d, f->title, tf, 1); }
        double cx = L->plot.x + L->plot.w / 2;
        if (cx - tw / 2 < m->pad || cx + tw / 2 > W - m->pad) cx = W / 2;
        pd_text(d, cx, L->title_y, f->title, tf, 1, 1, 0);
    }
    if (f->x.title[0]) pd_text(d, L->plot.x + L->plot.w / 2, L->xtitle_y, f->x.title, fs, 0, 1, 0);
    if (f->y.title[0]) pd_text(d, L->ytitle_x, L->plot.y + L->plot.h / 2, f->y.title, fs, 0, 1, 1);

}

/* The heatmap's colour bar with its ticks, labels and title. */
static void pd_colorbar(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f, double W)
{
    const qs_rbackend *b = d->b;
    double s = d->s;
    const double fs = m->font;
    const double ink = PD_INK;
    uint8_t ramp[256 * 3];
    for (int i = 0; i < 256; i++) {
        double c[3];
        qs_colormap_rgb((255 - i) / 255.0, c);
        for (int k = 0; k < 3; k++) ramp[3 * i + k] = (uint8_t)lround(c[k] * 255);
    }
    b->image(b->ctx, L->cbar.x, L->cbar.y, L->cbar.w, L->cbar.h, ramp, 1, 256);
    b->color(b->ctx, ink, ink, ink, 1);
    b->line_style(b->ctx, 1 * s, NULL, 0);
    pd_frame_rect(d, L->cbar.x, L->cbar.y, L->cbar.w, L->cbar.h);
    qs_axis *ca = &f->heat->cbar;
    double a0 = qs_axis_fwd(ca, ca->vlo), a1 = qs_axis_fwd(ca, ca->vhi);
    for (int i = 0; i < L->ct.n; i++) {
        double y = L->cbar.y + L->cbar.h - (qs_axis_fwd(ca, L->ct.t[i].v) - a0) / (a1 - a0) * L->cbar.h;
        b->move_to(b->ctx, L->cbar.x + L->cbar.w, y); b->line_to(b->ctx, L->cbar.x + L->cbar.w + 4 * s, y);
    }
    b->stroke(b->ctx);
    for (int i = 0; i < L->ct.n; i++) {
        double y = L->cbar.y + L->cbar.h - (qs_axis_fwd(ca, L->ct.t[i].v) - a0) / (a1 - a0) * L->cbar.h;
        pd_text(d, L->cbar.x + L->cbar.w + m->tick_len + 1 * s, y, L->ct.t[i].label, fs, 0, 0, 0);
    }
    if (ca->title[0]) pd_text(d, W - m->pad, L->cbar_title_y, ca->title, fs, 0, 2, 0);
}

/* The legend: a box (when beside the data), a sample and the name of each series. */
static void pd_legend(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    double s = d->s;
    const double fs = m->font;
    const double ink = PD_INK;
    if (!L->legend_below) {
        b->color(b->ctx, 1, 1, 1, 1);
        pd_frame_rect(d, L->legend.x, L->legend.y, L->legend.w, L->legend.h);
        b->fill(b->ctx);
        b->color(b->ctx, 0.75, 0.75, 0.75, 1);
        b->line_style(b->ctx, 1 * s, NULL, 0);
        pd_frame_rect(d, L->legend.x, L->legend.y, L->legend.w, L->legend.h);
        b->stroke(b->ctx);
    }
    for (int i = 0; i < L->nleg; i++) {
        const qs_series *se = &f->series[L->leg[i]];
        double x, y;
        qs_layout_legend_pos(L, i, &x, &y);
        double cy = y + L->leg_row / 2;
        pd_sample(d, se, x, cy, m->legend_sample);
        b->color(b->ctx, ink, ink, ink, 1);
        pd_text(d, x + m->legend_sample + m->pad * 0.6, cy, se->name, fs, 0, 0, 0);
    }
}

/* The annotations; point labels avoid each other and the markers. */
static void pd_annotations(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f)
{
    const qs_rbackend *b = d->b;
    double s = d->s;
    const double fs = m->font;
    const double ink = PD_INK;
    box placed[256];
    int np = 0;
    for (size_t i = 0; i < f->nannots; i++) {
        const qs_annot *a = &f->annots[i];
        if (!a->point) continue;
        double x = qs_layout_px(L, f, a->x), y = qs_layout_py(L, f, a->y);
        if (isfinite(x) && isfinite(y) && np < 256) placed[np++] = (box){x - 5 * s, y - 5 * s, 10 * s, 10 * s};
    }
    for (size_t i = 0; i < f->nannots; i++) {
        const qs_annot *a = &f->annots[i];
        double x, y;
        if (qs_layout_annot_pos(L, f, a, &x, &y)) continue;
        double tw = pd_text_w(d, a->text, fs * 0.95, 0), th = m->line_h;
        double tx = x, ty = y;
        int al = a->anchor;
        if (a->point) {
            static const double cand[8][2] = {{1, -1}, {1, 1}, {-1, -1}, {-1, 1}, {0, -1.6}, {0, 1.6}, {1.6, 0}, {-1.6, 0}};
            int best = 0;
            for (int c = 0; c < 8; c++) {
                double cx = x + cand[c][0] * 7 * s, cy = y + cand[c][1] * 0.75 * th;
                double bx = cand[c][0] > 0 ? cx : cand[c][0] < 0 ? cx - tw : cx - tw / 2;
                box bb = {bx, cy - th / 2, tw, th};
                int hit = bb.x < L->plot.x || bb.x + bb.w > L->plot.x + L->plot.w || bb.y < L->plot.y ||
                          bb.y + bb.h > L->plot.y + L->plot.h;
                for (int k = 0; k < np && !hit; k++) hit = box_hit(bb, placed[k]);
                if (!hit) { best = c; break; }
                if (c == 7) best = 0;
            }
            tx = x + cand[best][0] * 7 * s;
            ty = y + cand[best][1] * 0.75 * th;
            al = cand[best][0] > 0 ? 0 : cand[best][0] < 0 ? 2 : 1;
            double bx = al == 0 ? tx : al == 2 ? tx - tw : tx - tw / 2;
            if (np < 256) placed[np++] = (box){bx, ty - th / 2, tw, th};
        }
        if (a->point) {   /* a light halo keeps the label readable over lines */
            double bx = al == 0 ? tx : al == 2 ? tx - tw : tx - tw / 2;
            b->color(b->ctx, 1, 1, 1, 0.8);
            pd_frame_rect(d, bx - 1.5 * s, ty - th / 2 + 1 * s, tw + 3 * s, th - 2 * s);
            b->fill(b->ctx);
        }
        if (a->color == -2) b->color(b->ctx, ink, ink, ink, 1);
        else pd_rgb(d, a->color, 1);
        pd_text(d, tx, ty, a->text, fs * 0.95, 0, al, 0);
    }

}

/* The note (cut at a name's end when too wide, counting the series left unnamed) and "no data". */
static void pd_note(pd *d, const qs_layout *L, const qs_measure *m, qs_figure *f, double W, const char *same)
{
    const qs_rbackend *b = d->b;
    const double fs = m->font, mute = PD_MUTE;
    char note[400];
    size_t n0;
    qs_plot_note(f, L, &(qs_note_parts){.log_words = " (log scale)", .same = same}, note, sizeof note, &n0);
    if (n0 != SIZE_MAX) {
        /* too wide for the figure: cut at a name's end and count the series left unnamed */
        int more = 0;
        while (pd_text_w(d, note, fs * 0.95, 0) > W - 2 * m->pad) {
            char *cut = NULL, *mark = more ? strstr(note + n0, " (+") : NULL;
            for (char *q = note + n0; (q = strstr(q, " = ")) != NULL; q++) cut = q;
            if (!cut) break;
            if (mark) *mark = 0;
            more++;
            for (const char *q = cut + 3; (q = strstr(q, "; ")) != NULL; q++) more++;   /* a group cut whole */
            snprintf(cut, sizeof note - (size_t)(cut - note), " (+%d more)", more);
        }
    }
    if (note[0] && L->note_y > 0) {
        b->color(b->ctx, mute, mute, mute, 1);
        pd_text(d, m->pad, L->note_y, note, fs * 0.95, 0, 0, 0);
    }
    if (f->empty) {
        b->color(b->ctx, mute, mute, mute, 1);
        pd_text(d, L->plot.x + L->plot.w / 2, L->plot.y + L->plot.h / 2, "no data", m->title_font, 0, 1, 0);
    }
}

void qs_plot_draw(qs_figure *f, const qs_rbackend *b, double W, double H, double scale, qs_layout *out)
{
    pd d = {b, scale > 0 ? scale : 1};
    double s = d.s;
    qs_plot_resolve(f);
    qs_measure m;
    qs_measure_px(&m, s);
    m.text_w = measure_cb;
    m.ctx = &d;
    qs_layout L;
    qs_plot_layout(f, W, H, &m, &L);
    char same[300];
    double tol = 1.5 * s;   /* about a line's width: closer lines read as one */
    coinciding_series(f, &L, tol, same, sizeof same);
    if (same[0] && !(L.note_y > 0)) {   /* make a line for the note */
        snprintf(f->note, sizeof f->note, " ");
        qs_plot_layout(f, W, H, &m, &L);
        f->note[0] = 0;
        coinciding_series(f, &L, tol, same, sizeof same);
    }
    if (out) *out = L;

    /* background */
    b->clip(b->ctx, 0, 0, 0, 0);
    b->color(b->ctx, 1, 1, 1, 1);
    pd_frame_rect(&d, 0, 0, W, H);
    b->fill(b->ctx);
    if (f->heat && f->heat->rows && f->heat->cols) pd_heatmap(&d, &L, f);
    if (!f->heat) pd_grid(&d, &L, f);
    pd_all_series(&d, &L, f);
    pd_frame_ticks(&d, &L, &m, f);
    pd_titles(&d, &L, &m, f, W);
    if (f->heat && L.cbar.w > 0) pd_colorbar(&d, &L, &m, f, W);
    if (L.nleg && L.legend.w > 0) pd_legend(&d, &L, &m, f);
    pd_annotations(&d, &L, &m, f);
    pd_note(&d, &L, &m, f, W, same);
}

/* ======================= the cairo backend ======================= */

typedef struct cb {
    cairo_t *cr;
    cairo_font_options_t *fo;
} cb;

static void cb_color(void *c, double r, double g, double b, double a) { cairo_set_source_rgba(((cb *)c)->cr, r, g, b, a); }
static void cb_line_style(void *c, double w, const double *dash, int n)
{
    cairo_t *cr = ((cb *)c)->cr;
    cairo_set_line_width(cr, w);
    cairo_set_dash(cr, dash, n, 0);
    cairo_set_line_cap(cr, n ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
}
static void cb_move(void *c, double x, double y) { cairo_move_to(((cb *)c)->cr, x, y); }
static void cb_line(void *c, double x, double y) { cairo_line_to(((cb *)c)->cr, x, y); }
static void cb_close(void *c) { cairo_close_path(((cb *)c)->cr); }
static void cb_stroke(void *c) { cairo_stroke(((cb *)c)->cr); }
static void cb_fill(void *c) { cairo_fill(((cb *)c)->cr); }
static void cb_clip(void *c, double x, double y, double w, double h)
{
    cairo_t *cr = ((cb *)c)->cr;
    cairo_reset_clip(cr);
    if (w > 0 && h > 0) {
        cairo_new_path(cr);
        cairo_rectangle(cr, x, y, w, h);
        cairo_clip(cr);
    }
}
static void cb_font(cb *c, double size, int bold)
{
    cairo_select_font_face(c->cr, QS_PLOT_FONT_FACE, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c->cr, size);
}
static double cb_text_width(void *c, const char *s, double size, int bold)
{
    cb_font(c, size, bold);
    cairo_text_extents_t te;
    cairo_text_extents(((cb *)c)->cr, s, &te);
    return te.x_advance;
}
static void cb_text(void *c, double x, double y, const char *s, double size, int bold, int rotate)
{
    cairo_t *cr = ((cb *)c)->cr;
    cb_font(c, size, bold);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    double base = (fe.ascent - fe.descent) / 2;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (rotate) cairo_rotate(cr, -M_PI / 2);
    cairo_move_to(cr, 0, base);
    cairo_show_text(cr, s);
    cairo_new_path(cr);
    cairo_restore(cr);
}
static void cb_image(void *c, double x, double y, double w, double h, const uint8_t *rgb, int cols, int rows)
{
    cairo_t *cr = ((cb *)c)->cr;
    if (cols <= 0 || rows <= 0 || w <= 0 || h <= 0) return;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) { cairo_surface_destroy(img); return; }
    cairo_surface_flush(img);
    unsigned char *p = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < rows; r++) {
        uint32_t *row = (uint32_t *)(void *)(p + (size_t)r * (size_t)stride);
        for (int k = 0; k < cols; k++) {
            const uint8_t *q = rgb + 3 * ((size_t)r * (size_t)cols + (size_t)k);
            row[k] = 0xFF000000u | (uint32_t)q[0] << 16 | (uint32_t)q[1] << 8 | q[2];
        }
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_new_path(cr);
    cairo_rectangle(cr, x, y, w, h);
    cairo_clip(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, w / cols, h / rows);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
}

/* cairo keeps font caches (and fontconfig patterns) for the life of the process; LeakSanitizer
** reports them.  qs_plot_cairo_release() drops them once no cairo object is alive. */
static int qs_plot_cairo_reset_pending;
void qs_plot_cairo_release(void)
{
    if (!qs_plot_cairo_reset_pending) return;
    cairo_debug_reset_static_data();
    /* then fontconfig's own caches, as cairo's test suite does (FcFini); looked up at run time
    ** because fontconfig is cairo's dependency, not one qscope links directly */
    void (*fc_fini)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "FcFini");
    if (fc_fini) fc_fini();
    qs_plot_cairo_reset_pending = 0;
}

int qs_plot_font_ok(qs_err *e)
{
    if (access(QS_PLOT_FONT_FILE, R_OK) != 0)
        return qs_fail(e, "font %s not found (install fonts-dejavu-core); PNG plots use the pinned face \"%s\"",
                       QS_PLOT_FONT_FILE, QS_PLOT_FONT_FACE);
    return 0;
}

int qs_plot_rgb(qs_figure *f, int W, int H, double dpi, uint8_t **out, qs_layout *L, qs_err *e)
{
    *out = NULL;
    if (W < 64 || H < 48 || W > 20000 || H > 20000) return qs_fail(e, "plot size %dx%d out of range (64x48 .. 20000x20000)", W, H);
    if (qs_plot_font_ok(e)) return -1;
    if (!(dpi > 0)) dpi = 100;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
    if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surf);
        return qs_fail(e, "cairo: cannot create a %dx%d surface", W, H);
    }
    cb c = {cairo_create(surf), cairo_font_options_create()};
    cairo_font_options_set_antialias(c.fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(c.fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_hint_metrics(c.fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(c.cr, c.fo);
    cairo_set_antialias(c.cr, CAIRO_ANTIALIAS_DEFAULT);
    qs_rbackend b = {&c, cb_color, cb_line_style, cb_move, cb_line, cb_close, cb_stroke, cb_fill, cb_clip,
                     cb_text_width, cb_text, cb_image};
    qs_plot_draw(f, &b, W, H, dpi / 100.0, L);
    cairo_status_t st = cairo_status(c.cr);
    cairo_font_options_destroy(c.fo);
    cairo_destroy(c.cr);
    cairo_surface_flush(surf);
    if (!qs_plot_cairo_reset_pending) {
        static int registered;
        if (!registered) registered = atexit(qs_plot_cairo_release) == 0;
    }
    qs_plot_cairo_reset_pending = 1;
    if (st != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surf);
        return qs_fail(e, "cairo: %s", cairo_status_to_string(st));
    }
    uint8_t *rgb = malloc((size_t)W * (size_t)H * 3);
    if (!rgb) { cairo_surface_destroy(surf); return qs_fail(e, "out of memory"); }
    const unsigned char *p = cairo_image_surface_get_data(surf);
    int stride = cairo_image_surface_get_stride(surf);
    for (int y = 0; y < H; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(p + (size_t)y * (size_t)stride);
        uint8_t *o = rgb + (size_t)y * (size_t)W * 3;
        for (int x = 0; x < W; x++) {
            uint32_t v = row[x];   /* opaque (white background): premultiplied == straight */
            o[3 * x] = (uint8_t)(v >> 16);
            o[3 * x + 1] = (uint8_t)(v >> 8);
            o[3 * x + 2] = (uint8_t)v;
        }
    }
    cairo_surface_destroy(surf);
    *out = rgb;
    return 0;
}

/* ======================= libpng writer ======================= */

typedef struct { qs_err *e; } png_errctx;
static void png_err_fn(png_structp png, png_const_charp msg)
{
    png_errctx *c = png_get_error_ptr(png);
    qs_fail(c->e, "libpng: %s", msg);
    png_longjmp(png, 1);
}
static void png_warn_fn(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static int is_ascii(const char *s)
{
    for (; *s; s++) if ((unsigned char)*s >= 0x80 || (*s < 0x20 && *s != '\n' && *s != '\t')) return 0;
    return 1;
}

int qs_png_write_rgb(const char *path, const uint8_t *rgb, int W, int H, double dpi, const qs_provenance *p, qs_err *e)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp) return qs_fail(e, "%s: path too long", path);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return qs_write_fail(e, path, errno);
    png_errctx ec = {e};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ec, png_err_fn, png_warn_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = malloc((size_t)H * sizeof *rows);
    char software[64];
    snprintf(software, sizeof software, "qscope %s", QS_VERSION);
    if (!png || !info || !rows) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        fclose(fp);
        unlink(tmp);
        return qs_fail(e, "out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        int er = errno, werr = ferror(fp);   /* libpng's "Write Error" hides the OS reason */
        png_destroy_write_struct(&png, &info);
        free(rows);
        fclose(fp);
        unlink(tmp);
        if (werr) return qs_write_fail(e, path, er);
        qs_err_prefix(e, path);
        return -1;
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (!(dpi > 0)) dpi = 100;
    png_uint_32 ppm = (png_uint_32)lround(dpi / 0.0254);
    png_set_pHYs(png, info, ppm, ppm, PNG_RESOLUTION_METER);
    const char *keys[6] = {"Software", "qscope:command", "qscope:database", "qscope:tensor-hashes", "qscope:formats",
                           "qscope:options"};
    const char *vals[6] = {software, p ? p->command : NULL, p ? p->database : NULL, p ? p->tensor_hashes : NULL,
                           p ? p->formats : NULL, p ? p->options : NULL};
    png_text txt[6];
    int nt = 0;
    memset(txt, 0, sizeof txt);
    for (int i = 0; i < 6; i++) {
        if (!vals[i]) continue;
        /* tEXt is Latin-1: plain ASCII goes there, anything else into an iTXt (UTF-8) chunk */
        txt[nt].compression = is_ascii(vals[i]) ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
        txt[nt].key = (png_charp)keys[i];
        txt[nt].text = (png_charp)vals[i];
        txt[nt].text_length = strlen(vals[i]);
        nt++;
    }
    png_set_text(png, info, txt, nt);
    png_set_compression_level(png, 6);
    for (int y = 0; y < H; y++) rows[y] = (png_bytep)(rgb + (size_t)y * (size_t)W * 3);
    png_set_rows(png, info, rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    if (fflush(fp) != 0 || ferror(fp)) {
        int er = errno;
        fclose(fp);
        unlink(tmp);
        return qs_write_fail(e, path, er);
    }
    if (fclose(fp) != 0) { int er = errno; unlink(tmp); return qs_write_fail(e, path, er); }
    if (rename(tmp, path) != 0) { int er = errno; unlink(tmp); return qs_write_fail(e, path, er); }
    return 0;
}

int qs_plot_png(qs_figure *f, const qs_png_opts *o, const qs_provenance *p, const char *path, qs_err *e)
{
    double dpi = o && o->dpi > 0 ? o->dpi : 100;
    int W = o && o->width > 0 ? o->width : (f->width > 0 ? (int)lround(f->width * dpi / 100) : (int)lround(10 * dpi));
    int H = o && o->height > 0 ? o->height : (f->height > 0 ? (int)lround(f->height * dpi / 100) : (int)lround(6 * dpi));
    uint8_t *rgb = NULL;
    if (qs_plot_rgb(f, W, H, dpi, &rgb, NULL, e)) return -1;
    int rc = qs_png_write_rgb(path, rgb, W, H, dpi, p, e);
    free(rgb);
    return rc;
}
