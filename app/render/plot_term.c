/*
** Terminal plots: the plot model drawn in character cells (see plot_render.h).
**
** The layout is the model's (qs_plot_layout in cell units).  Inside the data area each cell holds
** 2x4 braille dots, 1x2 half blocks or one ASCII character.  Series are told apart by glyphs, not
** colour alone: scatter points are the series' marker glyph (the PNG's shapes: ● ■ ▲ ◆ ▼ ✚ ✖ ★,
** ASCII o # ^ % v + x @), and when several lines share the plot each carries its glyph every few
** columns; the legend shows the same glyphs.  Reference lines (a format's grid) are a separate
** dotted layer that data always covers.  Heatmaps use a shade ramp (and colour when enabled).
*/
#include "plot_render.h"
#include "../../store/text_escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TT_NONE (-100)   /* default terminal colour (QS_COLOR_GREY is -1) */

typedef struct tcell {
    char g[8];          /* UTF-8 glyph; "" = derived from the dot layers or blank */
    short fg;           /* colour: palette index, QS_COLOR_GREY, TT_NONE, or 1000 + an xterm-256 index */
    unsigned char bold;
    unsigned char data, ref;   /* dot bits (braille: 8, block: 2, ascii: 1) */
    short owner;        /* palette colour of the last data dot */
    char dglyph;        /* ASCII mode: glyph of the last data dot */
    short sidx;         /* 1 + index of the series whose glyph g is (0: none) */
} tcell;

typedef struct tcanvas {
    int W, H;
    tcell *c;
    qs_term_mode mode;
    int utf8;
    int dx, dy;         /* dots per cell */
    int px, py, pw, ph; /* data area in cells */
    int *tried;         /* per series: how many of its glyphs were meant for the data area */
} tcanvas;

static tcell *tc_at(tcanvas *t, int x, int y)
{
    if (x < 0 || y < 0 || x >= t->W || y >= t->H) return NULL;
    return &t->c[(size_t)y * (size_t)t->W + (size_t)x];
}

/* copy one UTF-8 character from s into g, return its length */
static int utf8_one(const char *s, char g[8])
{
    unsigned char c = (unsigned char)s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    for (int i = 0; i < n; i++) {
        if (!s[i]) { n = i; break; }
        g[i] = s[i];
    }
    g[n] = 0;
    return n > 0 ? n : 1;
}

/* typeset exponent markup (qs_text_exponent): "2^-8" -> "2⁻⁸", "e^d" -> "eᵈ" in UTF-8; an exponent
** with a character that has no Unicode superscript, and every exponent in ASCII, stays "^x" */
static const char *sup_of(char ch)
{
    static const char *const dig[10] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
    static const char *const low[26] = {"ᵃ", "ᵇ", "ᶜ", "ᵈ", "ᵉ", "ᶠ", "ᵍ", "ʰ", "ⁱ", "ʲ", "ᵏ", "ˡ", "ᵐ",
                                        "ⁿ", "ᵒ", "ᵖ", NULL, "ʳ", "ˢ", "ᵗ", "ᵘ", "ᵛ", "ʷ", "ˣ", "ʸ", "ᶻ"};
    static const char *const up[26] = {"ᴬ", "ᴮ", NULL, "ᴰ", "ᴱ", NULL, "ᴳ", "ᴴ", "ᴵ", "ᴶ", "ᴷ", "ᴸ", "ᴹ",
                                       "ᴺ", "ᴼ", "ᴾ", NULL, "ᴿ", NULL, "ᵀ", "ᵁ", "ⱽ", "ᵂ", NULL, NULL, NULL};
    if (ch >= '0' && ch <= '9') return dig[ch - '0'];
    if (ch >= 'a' && ch <= 'z') return low[ch - 'a'];
    if (ch >= 'A' && ch <= 'Z') return up[ch - 'A'];
    switch (ch) {
    case '-': return "⁻";
    case '+': return "⁺";
    case '(': return "⁽";
    case ')': return "⁾";
    case '=': return "⁼";
    default: return NULL;
    }
}

/* names in titles and legends are escaped as the CLI does, then the markup is typeset */
static void tt_label(const tcanvas *t, const char *s, char *out, size_t cap)
{
    char esc[512];
    qs_escape_buf(s, strlen(s), 0, esc, sizeof esc);
    s = esc;
    size_t k = 0;
#define PUT(p, L) do { if (k + (L) < cap) { memcpy(out + k, (p), (L)); k += (L); } } while (0)
    for (;;) {
        size_t c, e0, e1, end;
        int has = qs_text_exponent(s, &c, &e0, &e1, &end);
        PUT(s, has ? c : strlen(s));
        if (!has) break;
        int ok = t->utf8;
        for (size_t i = e0; i < e1 && ok; i++) ok = sup_of(s[i]) != NULL;
        if (ok)
            for (size_t i = e0; i < e1; i++) { const char *r = sup_of(s[i]); PUT(r, strlen(r)); }
        else PUT(s + c, end - c);   /* as written */
        s += end;
    }
#undef PUT
    out[k] = 0;
}

static int u8len(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80) n++;
    return n;
}

static double tt_measure(void *ctx, const char *s, double size)
{
    (void)size;
    char buf[256];
    tt_label((const tcanvas *)ctx, s, buf, sizeof buf);
    return u8len(buf);
}

static void tt_put(tcanvas *t, int x, int y, const char *s, int fg, int bold, int typeset)
{
    char buf[512];
    if (typeset) tt_label(t, s, buf, sizeof buf);
    else snprintf(buf, sizeof buf, "%s", s);
    for (const char *p = buf; *p;) {
        char g[8];
        int n = utf8_one(p, g);
        if (!t->utf8 && (unsigned char)g[0] >= 0x80) snprintf(g, sizeof g, "?");
        p += n;
        tcell *c = tc_at(t, x++, y);
        if (!c) continue;
        memcpy(c->g, g, sizeof c->g);
        c->fg = (short)fg;
        c->bold = (unsigned char)bold;
    }
}

static void tt_put_aligned(tcanvas *t, double x, int y, const char *s, int fg, int bold, int align)
{
    char buf[512];
    tt_label(t, s, buf, sizeof buf);
    int w = u8len(buf);
    int x0 = align == 1 ? (int)floor(x - w / 2.0 + 0.5) : align == 2 ? (int)lround(x) - w : (int)lround(x);
    if (x0 < 0) x0 = 0;
    if (x0 + w > t->W) x0 = t->W - w > 0 ? t->W - w : 0;
    tt_put(t, x0, y, buf, fg, bold, 0);
}

/* ---- dots ---- */
static const unsigned char braille_bit[4][2] = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};

static void tt_dot(tcanvas *t, long X, long Y, int layer, int color, char glyph)
{
    if (X < 0 || Y < 0 || X >= (long)t->pw * t->dx || Y >= (long)t->ph * t->dy) return;
    tcell *c = tc_at(t, t->px + (int)(X / t->dx), t->py + (int)(Y / t->dy));
    if (!c) return;
    unsigned char bit;
    if (t->mode == QS_TERM_BRAILLE) bit = braille_bit[Y % 4][X % 2];
    else if (t->mode == QS_TERM_BLOCK) bit = (Y % 2) ? 2 : 1;
    else bit = 1;
    if (layer) { c->data |= bit; c->owner = (short)color; c->dglyph = glyph; }
    else c->ref |= bit;
}

static void tt_line(tcanvas *t, double x0, double y0, double x1, double y1, int layer, int color, char glyph, int dotted)
{
    /* keep far-away ends bounded */
    double lim = 4.0 * (t->pw * t->dx + t->ph * t->dy);
    x0 = fmax(-lim, fmin(lim, x0)); x1 = fmax(-lim, fmin(lim, x1));
    y0 = fmax(-lim, fmin(lim, y0)); y1 = fmax(-lim, fmin(lim, y1));
    long X0 = lround(x0), Y0 = lround(y0), X1 = lround(x1), Y1 = lround(y1);
    long dx = labs(X1 - X0), dy = -labs(Y1 - Y0), sx = X0 < X1 ? 1 : -1, sy = Y0 < Y1 ? 1 : -1, err = dx + dy;
    for (long i = 0;; i++) {
        if (!dotted || i % 2 == 0) tt_dot(t, X0, Y0, layer, color, glyph);
        if (X0 == X1 && Y0 == Y1) break;
        long e2 = 2 * err;
        if (e2 >= dy) { err += dy; X0 += sx; }
        if (e2 <= dx) { err += dx; Y0 += sy; }
    }
}

/* data -> dot coordinates */
static double dot_x(const tcanvas *t, const qs_layout *L, const qs_figure *f, double v)
{
    double x = qs_layout_px(L, f, v);
    return isfinite(x) ? (x - L->plot.x) / L->plot.w * (t->pw * t->dx) - 0.5 : NAN;
}
static double dot_y(const tcanvas *t, const qs_layout *L, const qs_figure *f, double v)
{
    double y = qs_layout_py(L, f, v);
    return isfinite(y) ? (y - L->plot.y) / L->plot.h * (t->ph * t->dy) - 0.5 : NAN;
}

/* the marker that identifies a series in the terminal: its own, else the first shape no other
** series uses, in order of the marker-less series */
static qs_marker tt_mark(const qs_figure *f, const qs_series *s)
{
    if (s->marker != QS_MK_NONE) return s->marker;
    int used[QS_MK_COUNT] = {0}, k = 0;
    for (size_t i = 0; i < f->nseries; i++) used[f->series[i].marker] = 1;
    for (size_t i = 0; i < f->nseries && &f->series[i] != s; i++) {
        const qs_series *o = &f->series[i];
        if (o->marker == QS_MK_NONE && o->kind != QS_SER_HLINE && o->kind != QS_SER_VLINE) k++;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int m = 1, j = 0; m < QS_MK_COUNT; m++) {
            if (pass == 0 && used[m]) continue;
            if (j++ == k) return (qs_marker)m;
        }
    return (qs_marker)(1 + k % (QS_MK_COUNT - 1));
}

/* the glyph of a series: its marker's, or — with more data series than marker shapes, which would
** repeat — a letter per series (A..Z, a..z), so that every series stays distinguishable without colour;
** a line not in the legend (a band's bounds) is plain dots */
static void tt_gly(const qs_figure *f, const qs_series *s, int utf8, char out[8])
{
    int n = 0, k = -1;
    if (!s->name && s->kind == QS_SER_LINE) { snprintf(out, 8, "."); return; }   /* not in the legend: a plain dot */
    for (size_t i = 0; i < f->nseries; i++) {
        const qs_series *o = &f->series[i];
        if (o->kind == QS_SER_HLINE || o->kind == QS_SER_VLINE || (!o->name && o->kind == QS_SER_LINE)) continue;
        if (o == s) k = n;
        n++;
    }
    if (n > QS_MK_COUNT - 1 && k >= 0 && k < 52) { snprintf(out, 8, "%c", k < 26 ? 'A' + k : 'a' + (k - 26)); return; }
    qs_marker mk = tt_mark(f, s);
    if (utf8) snprintf(out, 8, "%s", qs_marker_utf8(mk));
    else snprintf(out, 8, "%c", qs_marker_ascii(mk));
}

static void tt_glyph_at(tcanvas *t, const qs_figure *f, int cx, int cy, const qs_series *s, int force)
{
    if (cx < t->px || cy < t->py || cx >= t->px + t->pw || cy >= t->py + t->ph) return;
    if (t->tried) t->tried[s - f->series]++;
    tcell *c = tc_at(t, cx, cy);
    if (!c || (c->g[0] && !force)) return;
    tt_gly(f, s, t->utf8, c->g);
    c->fg = (short)s->color;
    c->sidx = (short)(1 + (s - f->series));
}


/* draw one series; `lastrow` (pw entries) receives, per column, a cell row the series touched */
static void tt_series(tcanvas *t, const qs_layout *L, const qs_figure *f, const qs_series *s, int *lastrow)
{
    int color = s->color;
    char ga[8];
    tt_gly(f, s, 0, ga);
    char g = ga[0];
    double W = t->pw * t->dx, H = t->ph * t->dy;
    for (int i = 0; i < t->pw; i++) lastrow[i] = -1;
#define TOUCH(X, Y) do { \
        long cx_ = lround(X) / t->dx, cy_ = lround(Y) / t->dy; \
        if (cx_ >= 0 && cx_ < t->pw && cy_ >= 0 && cy_ < t->ph) lastrow[cx_] = (int)cy_; } while (0)
    switch (s->kind) {
    case QS_SER_VLINE:
        for (size_t i = 0; i < s->n; i++) {
            double x = dot_x(t, L, f, s->x[i]);
            if (isfinite(x) && x > -1 && x < W) tt_line(t, x, 0, x, H - 1, 0, QS_COLOR_GREY, ':', 1);
        }
        return;
    case QS_SER_HLINE:
        for (size_t i = 0; i < s->n; i++) {
            double y = dot_y(t, L, f, s->y[i]);
            if (isfinite(y) && y > -1 && y < H) tt_line(t, 0, y, W - 1, y, 0, QS_COLOR_GREY, '-', 1);
        }
        return;
    case QS_SER_STEP: {
        double base = (f->y.scale == QS_AX_LINEAR || f->y.scale == QS_AX_SYMLOG) ? dot_y(t, L, f, 0) : H - 1;
        if (!isfinite(base) || base > H - 1) base = H - 1;
        if (base < 0) base = 0;
        double px = NAN, py = NAN;
        for (size_t k = 0; k < s->n; k++) {
            double x0 = dot_x(t, L, f, s->x[k]), x1 = dot_x(t, L, f, s->x[k + 1]);
            if (!isfinite(x0) || !isfinite(x1) || !isfinite(s->y[k])) {
                if (isfinite(px)) tt_line(t, px, py, px, base, 1, color, g, 0);
                px = py = NAN;
                continue;
            }
            double y = dot_y(t, L, f, s->y[k]);
            if (!isfinite(y) || y > base) y = base;
            if (!isfinite(px)) tt_line(t, x0, base, x0, y, 1, color, g, 0);
            else tt_line(t, px, py, x0, y, 1, color, g, 0);
            tt_line(t, x0, y, x1, y, 1, color, g, 0);
            if (y < base - 0.5) for (double xx = x0; xx <= x1; xx += 1) TOUCH(xx, y);
            px = x1;
            py = y;
        }
        if (isfinite(px)) tt_line(t, px, py, px, base, 1, color, g, 0);
        return;
    }
    case QS_SER_LINE: {
        double px = NAN, py = NAN;
        for (size_t k = 0; k < s->n; k++) {
            double x = dot_x(t, L, f, s->x[k]), y = dot_y(t, L, f, s->y[k]);
            if (!isfinite(x) || !isfinite(y)) { px = py = NAN; continue; }
            if (isfinite(px)) {
                tt_line(t, px, py, x, y, 1, color, g, 0);
                double n = fmax(fabs(x - px), 1);
                for (double u = 0; u <= n; u += 1) TOUCH(px + (x - px) * u / n, py + (y - py) * u / n);
            } else {
                tt_dot(t, lround(x), lround(y), 1, color, g);
                TOUCH(x, y);
            }
            px = x;
            py = y;
        }
        return;
    }
    case QS_SER_SCATTER:
        for (size_t k = 0; k < s->n; k++) {
            double x = dot_x(t, L, f, s->x[k]), y = dot_y(t, L, f, s->y[k]);
            if (!isfinite(x) || !isfinite(y)) continue;
            tt_glyph_at(t, f, t->px + (int)(lround(x) / t->dx), t->py + (int)(lround(y) / t->dy), s, 1);
        }
        return;
    }
#undef TOUCH
}

/* ---- colours ---- */
static int ansi256(int idx)
{
    if (idx == QS_COLOR_GREY) return 245;
    double c[3];
    qs_palette_rgb(idx, c);
    if (idx % QS_PALETTE_N == 7) return 252;   /* black on a dark terminal: light grey */
    int r = (int)lround(c[0] * 5), g = (int)lround(c[1] * 5), b = (int)lround(c[2] * 5);
    return 16 + 36 * r + 6 * g + b;
}
static int ansi256_rgb(const double c[3])
{
    int r = (int)lround(c[0] * 5), g = (int)lround(c[1] * 5), b = (int)lround(c[2] * 5);
    return 16 + 36 * r + 6 * g + b;
}

qs_term_mode qs_term_mode_auto(void)
{
    const char *vars[3] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        return (strcasestr(v, "utf-8") || strcasestr(v, "utf8")) ? QS_TERM_BRAILLE : QS_TERM_ASCII;
    }
    return QS_TERM_ASCII;
}

int qs_term_mode_parse(const char *s, qs_term_mode *m)
{
    if (!strcmp(s, "auto")) *m = QS_TERM_AUTO;
    else if (!strcmp(s, "braille")) *m = QS_TERM_BRAILLE;
    else if (!strcmp(s, "block")) *m = QS_TERM_BLOCK;
    else if (!strcmp(s, "ascii")) *m = QS_TERM_ASCII;
    else return -1;
    return 0;
}

/* A heatmap cell at colour-scale position tv in [0, 1]: a coloured block, else a shade ramp. */
static void heat_cell(tcell *c, double tv, int color, int utf8)
{
    static const char *const ramp8[4] = {"░", "▒", "▓", "█"};
    static const char ramp_a[] = ".:-=+*#%@";
    if (color) {
        double rgb[3];
        qs_colormap_rgb(tv, rgb);
        snprintf(c->g, sizeof c->g, "%s", utf8 ? "█" : "#");
        c->fg = (short)(1000 + ansi256_rgb(rgb));
    } else if (utf8) {
        int k = (int)(tv * 4);
        snprintf(c->g, sizeof c->g, "%s", ramp8[k > 3 ? 3 : k]);
    } else {
        int k = (int)(tv * 9);
        snprintf(c->g, sizeof c->g, "%c", ramp_a[k > 8 ? 8 : k]);
    }
}

/* The heatmap, the mean of the cells each character covers, and its colour bar with ticks. */
static void tt_heatmap(tcanvas *t, const qs_layout *L, qs_figure *f, int color)
{
    qs_heatmap *h = f->heat;
    for (int cy = 0; cy < t->ph; cy++)
        for (int cx = 0; cx < t->pw; cx++) {
            double vx = qs_axis_inv(&f->x, qs_axis_fwd(&f->x, f->x.vlo) + (cx + 0.5) / t->pw *
                                               (qs_axis_fwd(&f->x, f->x.vhi) - qs_axis_fwd(&f->x, f->x.vlo)));
            double u = (cy + 0.5) / t->ph;
            if (!f->y.invert) u = 1 - u;
            double vy = qs_axis_inv(&f->y, qs_axis_fwd(&f->y, f->y.vlo) + u * (qs_axis_fwd(&f->y, f->y.vhi) -
                                                                               qs_axis_fwd(&f->y, f->y.vlo)));
            double fc = (vx - h->x0) / (h->x1 - h->x0) * (double)h->cols, fr = (vy - h->y0) / (h->y1 - h->y0) * (double)h->rows;
            if (!(fc >= 0 && fr >= 0 && fc < (double)h->cols && fr < (double)h->rows)) continue;
            /* the mean of every heatmap cell this character covers (not one sample of them:
            ** a bad row of blocks between two samples would not show) */
            double span_c = (double)h->cols / t->pw * (f->x.vhi - f->x.vlo) / (h->x1 - h->x0);
            double span_r = (double)h->rows / t->ph * (f->y.vhi - f->y.vlo) / (h->y1 - h->y0);
            /* the cells that the character's interval [f - span/2, f + span/2) meets; when a cell
            ** is larger than a character (span < 1) that is the one cell under its centre */
            size_t c0 = (size_t)floor(fmax(0, fc - span_c / 2)), r0 = (size_t)floor(fmax(0, fr - span_r / 2));
            size_t c1 = (size_t)fmax((double)c0 + 1, ceil(fc + span_c / 2)), r1 = (size_t)fmax((double)r0 + 1, ceil(fr + span_r / 2));
            if (c1 > h->cols) c1 = h->cols;
            if (r1 > h->rows) r1 = h->rows;
            double v = 0, nv = 0;
            for (size_t rr = r0; rr < r1; rr++)
                for (size_t cc = c0; cc < c1; cc++) {
                    double hv = h->v[rr * h->cols + cc];
                    if (isfinite(hv)) { v += hv; nv++; }
                }
            v = nv > 0 ? v / nv : NAN;
            double tv = qs_heat_t(h, v);
            tcell *c = tc_at(t, t->px + cx, t->py + cy);
            if (!isfinite(tv)) continue;
            heat_cell(c, tv, color, t->utf8);
        }
    /* colour bar: a column of the ramp, high at the top */
    int bx = (int)lround(L->cbar.x);
    for (int cy = 0; cy < t->ph; cy++) {
        double tv = 1 - (cy + 0.5) / t->ph;
        for (int k = 0; k < 2; k++) {
            tcell *c = tc_at(t, bx + k, t->py + cy);
            if (!c) continue;
            heat_cell(c, tv, color, t->utf8);
        }
    }
    qs_axis *ca = &h->cbar;
    double a0 = qs_axis_fwd(ca, ca->vlo), a1 = qs_axis_fwd(ca, ca->vhi);
    int lastr = -2;
    for (int i = L->ct.n - 1; i >= 0; i--) {
        int r = t->py + (int)floor((1 - (qs_axis_fwd(ca, L->ct.t[i].v) - a0) / (a1 - a0)) * (t->ph - 1) + 0.5);
        if (r == lastr) continue;
        tt_put(t, bx + 3, r, L->ct.t[i].label, TT_NONE, 0, 1);
        lastr = r;
    }
    if (ca->title[0]) tt_put_aligned(t, t->W, (int)floor(L->cbar_title_y), ca->title, TT_NONE, 0, 2);
}

/* The series, reference lines first (their own layer), then data with their glyphs; returns how
** many carry glyphs (lines and steps) for the legend. */
static int tt_all_series(tcanvas *t, const qs_layout *L, qs_figure *f, int *lastrow)
{
    int ndata = 0;   /* lines and histograms: several of them carry their glyphs */
    for (size_t i = 0; i < f->nseries; i++)
        if (f->series[i].kind == QS_SER_LINE || f->series[i].kind == QS_SER_STEP) ndata++;
    int K = t->pw / 6 > 8 ? t->pw / 6 : 8, di = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < f->nseries; i++) {
            const qs_series *s = &f->series[i];
            int ref = s->kind == QS_SER_HLINE || s->kind == QS_SER_VLINE;
            if ((pass == 0) != ref) continue;
            tt_series(t, L, f, s, lastrow);
            if (ref || s->kind == QS_SER_SCATTER) continue;
            if (!s->name) { di++; continue; }   /* no legend entry (a band's bounds): no glyph it would not explain */
            /* several lines: the series' glyph every K columns (phase by series), and at the
            ** points of a line with markers and few points */
            if (s->kind == QS_SER_LINE && s->marker != QS_MK_NONE && s->n * 3 <= (size_t)t->pw) {
                for (size_t k = 0; k < s->n; k++) {
                    double x = dot_x(t, L, f, s->x[k]), y = dot_y(t, L, f, s->y[k]);
                    if (isfinite(x) && isfinite(y))
                        tt_glyph_at(t, f, t->px + (int)(lround(x) / t->dx), t->py + (int)(lround(y) / t->dy), s, 0);
                }
            } else if (ndata > 1 && t->mode != QS_TERM_ASCII) {
                int phase = 2 + di * K / (ndata > 0 ? ndata : 1);
                for (int cx = phase % K; cx < t->pw; cx += K) {
                    int c2 = cx;
                    while (c2 < t->pw && c2 < cx + K / 2 && lastrow[c2] < 0) c2++;
                    if (c2 < t->pw && lastrow[c2] >= 0) tt_glyph_at(t, f, t->px + c2, t->py + lastrow[c2], s, 0);
                }
            }
            di++;
        }

    return ndata;
}

/* A series most of whose glyphs could not be drawn (others cover its points at this size) is
** named in the note, so that no series disappears without a word: their glyphs into hidden;
** returns how many. */
static int tt_hidden_series(tcanvas *t, qs_figure *f, char *hidden, size_t cap)
{
    int nhidden = 0;
    size_t ns = f->nseries;
    int *vis = calloc(ns ? ns : 1, sizeof *vis);
    if (!vis) return 0;
    for (size_t i = 0; i < (size_t)t->W * (size_t)t->H; i++)
        if (t->c[i].sidx > 0 && (size_t)t->c[i].sidx <= ns) vis[t->c[i].sidx - 1]++;
    char first[160] = "";
    size_t hl = 0;
    for (size_t i = 0; i < ns; i++) {
        const qs_series *s = &f->series[i];
        if (s->kind == QS_SER_HLINE || s->kind == QS_SER_VLINE || 2 * vis[i] >= t->tried[i]) continue;
        char gs[8];
        tt_gly(f, s, t->utf8, gs);
        if (!nhidden++) snprintf(first, sizeof first, "%s %s", gs, s->name);
        if (hl + 12 < cap) hl += (size_t)snprintf(hidden + hl, cap - hl, "%s%s", hl ? ", " : "", gs);
    }
    if (nhidden == 1) snprintf(hidden, cap, "%s", first);
    free(vis);
    return nhidden;
}

/* The axes with their ticks and labels (x labels never overlap). */
static void tt_axes(tcanvas *t, const qs_layout *L, qs_figure *f)
{
    const char *V = t->utf8 ? "│" : "|", *Hh = t->utf8 ? "─" : "-", *corner = t->utf8 ? "└" : "+";
    const char *ytk = t->utf8 ? "┤" : "+", *xtk = t->utf8 ? "┬" : "+";
    for (int y = t->py; y < t->py + t->ph; y++) tt_put(t, t->px - 1, y, V, TT_NONE, 0, 0);
    for (int x = t->px; x < t->px + t->pw; x++) tt_put(t, x, t->py + t->ph, Hh, TT_NONE, 0, 0);
    tt_put(t, t->px - 1, t->py + t->ph, corner, TT_NONE, 0, 0);
    int lastr = -2;
    for (int i = L->yt.n - 1; i >= 0; i--) {
        double y = qs_layout_py(L, f, L->yt.t[i].v);
        if (!isfinite(y)) continue;
        int r = (int)floor(y);
        if (r >= t->py + t->ph) r = t->py + t->ph - 1;
        if (r < t->py || r == lastr) continue;
        tt_put(t, t->px - 1, r, ytk, TT_NONE, 0, 0);
        tt_put_aligned(t, t->px - 1, r, L->yt.t[i].label, TT_NONE, 0, 2);
        lastr = r;
    }
    int lastend = -1;
    for (int i = 0; i < L->xt.n; i++) {
        double x = qs_layout_px(L, f, L->xt.t[i].v);
        if (!isfinite(x)) continue;
        int cx = (int)floor(x);
        if (cx >= t->px + t->pw) cx = t->px + t->pw - 1;
        char lab[256];
        tt_label(t, L->xt.t[i].label, lab, sizeof lab);
        int w = u8len(lab), x0 = cx - w / 2;
        if (x0 + w > t->W) x0 = t->W - w;
        if (x0 <= lastend) continue;   /* never overlap a label */
        tt_put(t, cx, t->py + t->ph, xtk, TT_NONE, 0, 0);
        tt_put(t, x0, t->py + t->ph + 1, lab, TT_NONE, 0, 0);
        lastend = x0 + w;
    }

}

/* Titles, then the legend: a sample with the series' glyph, then its name. */
static void tt_titles_legend(tcanvas *t, const qs_layout *L, qs_figure *f, int ndata)
{
    const char *Hh = t->utf8 ? "─" : "-";
    if (f->title[0]) tt_put_aligned(t, t->px + t->pw / 2.0, (int)floor(L->title_y), f->title, TT_NONE, 1, 1);
    if (f->x.title[0]) tt_put_aligned(t, t->px + t->pw / 2.0, (int)floor(L->xtitle_y), f->x.title, TT_NONE, 0, 1);
    if (f->y.title[0]) tt_put(t, 0, (int)floor(L->ytitle_y), f->y.title, TT_NONE, 0, 1);

    /* legend: sample with the series' glyph, then the name */
    for (int i = 0; i < L->nleg; i++) {
        const qs_series *s = &f->series[L->leg[i]];
        double lx, ly;
        qs_layout_legend_pos(L, i, &lx, &ly);
        int x = (int)lround(lx), y = (int)floor(ly);
        char gs[8];
        tt_gly(f, s, t->utf8, gs);
        const char *gl = gs, *ga = gs;
        const char *line = (s->kind == QS_SER_VLINE || s->kind == QS_SER_HLINE) ? (t->utf8 ? "┆" : ":")
                           : s->kind == QS_SER_SCATTER ? " " : Hh;
        tt_put(t, x, y, line, s->color, 0, 0);
        tt_put(t, x + 2, y, line, s->color, 0, 0);
        if (s->kind == QS_SER_VLINE || s->kind == QS_SER_HLINE) tt_put(t, x + 1, y, line, s->color, 0, 0);
        else if (ndata > 1 || s->kind == QS_SER_SCATTER || s->marker != QS_MK_NONE) tt_put(t, x + 1, y, gl ? gl : ga, s->color, 0, 0);
        else tt_put(t, x + 1, y, line, s->color, 0, 0);
        tt_put(t, x + 4, y, s->name, TT_NONE, 0, 0);
    }
    if (L->leg_more > 0) {
        char more[32];
        double lx, ly;
        snprintf(more, sizeof more, "+%d more", L->leg_more);
        qs_layout_legend_pos(L, L->nleg, &lx, &ly);
        tt_put(t, (int)lround(lx) + 4, (int)floor(ly), more, TT_NONE, 0, 1);
    }

}

/* The annotations; point labels without a free place are left out and named in unlabelled.
** Returns how many were left out. */
static int tt_annotations(tcanvas *t, const qs_layout *L, qs_figure *f, char *unlabelled, size_t cap)
{
    size_t nul = 0;
    int ndropped = 0;
    for (size_t i = 0; i < f->nannots; i++) {
        const qs_annot *a = &f->annots[i];
        double x, y;
        if (qs_layout_annot_pos(L, f, a, &x, &y)) continue;
        int cx = (int)floor(x) + (a->point ? 1 : 0), cy = (int)floor(y);
        if (cy >= t->py + t->ph) cy = t->py + t->ph - 1;
        if (a->point) {
            /* a point label goes right of its point, else left, above or below, wherever it covers
            ** no other text, marker or line of the data; without such a place it is left out (the
            ** PNG has it) */
            char lab[256];
            tt_label(t, a->text, lab, sizeof lab);
            int w = u8len(lab), px0 = (int)floor(x), py0 = cy, found = 0;
            const int cand[8][2] = {{1, 0}, {-w - 1, 0}, {1, -1}, {1, 1}, {-w, -1}, {-w, 1}, {2, 0}, {-w - 2, 0}};
            for (int k = 0; k < 8 && !found; k++) {
                int x0 = px0 + cand[k][0], y0 = py0 + cand[k][1], clash = 0;
                if (y0 < t->py || y0 >= t->py + t->ph || x0 < t->px || x0 + w > t->px + t->pw) continue;
                if (k >= 6) {   /* one cell off: only across a line, never across another marker */
                    tcell *g = tc_at(t, px0 + (k == 6 ? 1 : -1), y0);
                    if (g && g->g[0]) continue;
                }
                for (int q = -1; q <= w && !clash; q++) {
                    tcell *c = tc_at(t, x0 + q, y0);
                    clash = c && (q >= 0 && q < w ? c->g[0] || c->data : c->g[0] && c->fg == TT_NONE);
                }
                if (!clash) { cx = x0; cy = y0; found = 1; }
            }
            if (!found) {
                ndropped++;
                if (nul + w + 8 < cap)
                    nul += (size_t)snprintf(unlabelled + nul, cap - nul, "%s%s", nul ? ", " : "", lab);
                else if (nul + 5 < cap && strcmp(unlabelled + nul - 3, "...")) nul += (size_t)snprintf(unlabelled + nul, cap - nul, ", ...");
                continue;
            }
        }
        if (cx < 0) cx = 0;
        tt_put(t, cx, cy, a->text, a->color == -2 ? TT_NONE : a->color, 0, 1);
    }

    return ndropped;
}

/* The note (cut with "..." when too long) and "no data". */
static void tt_note(tcanvas *t, const qs_layout *L, qs_figure *f, const char *hidden, const char *unlabelled)
{
    char note[400];
    qs_plot_note(f, L, &(qs_note_parts){.hidden = hidden, .unlabelled = unlabelled}, note, sizeof note, NULL);
    if (note[0] && L->note_y > 0) {
        if (u8len(note) > t->W && t->W > 4) {   /* a cut note ends in "..." rather than mid-word, silently */
            int k = 0, keep = t->W - 3;
            char *p = note;
            for (; *p && k < keep; p++) if ((*(unsigned char *)p & 0xC0) != 0x80 && ++k > keep) break;
            while ((*(unsigned char *)p & 0xC0) == 0x80) p++;
            snprintf(p, sizeof note - (size_t)(p - note), "...");
        }
        tt_put(t, 0, (int)floor(L->note_y), note, QS_COLOR_GREY, 0, 0);
    }
    if (f->empty) tt_put_aligned(t, t->px + t->pw / 2.0, t->py + t->ph / 2, "no data", TT_NONE, 0, 1);

}

/* Write the canvas, one line per row, trailing blanks trimmed, SGR colours when asked. */
static void tt_emit(tcanvas *t, FILE *out, int color)
{
    static const char *const ascii_ramp = " .:'";
    for (int y = 0; y < t->H; y++) {
        int cur = TT_NONE, curb = 0, last = t->W - 1;
        while (last >= 0) {
            tcell *c = tc_at(t, last, y);
            if (c->g[0] && strcmp(c->g, " ")) break;
            if (!c->g[0] && (c->data || c->ref)) break;
            last--;
        }
        for (int x = 0; x <= last; x++) {
            tcell *c = tc_at(t, x, y);
            char g[8];
            int fg = c->fg, bold = c->bold;
            if (c->g[0]) snprintf(g, sizeof g, "%s", c->g);
            else if (c->data || c->ref) {
                unsigned char bits = c->data ? c->data : c->ref;
                fg = c->data ? c->owner : QS_COLOR_GREY;
                if (t->mode == QS_TERM_BRAILLE) {
                    unsigned cp = 0x2800u + bits;
                    g[0] = (char)(0xE0 | (cp >> 12));
                    g[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    g[2] = (char)(0x80 | (cp & 0x3F));
                    g[3] = 0;
                } else if (t->mode == QS_TERM_BLOCK) {
                    if (!c->data) snprintf(g, sizeof g, "%s", "┆");
                    else snprintf(g, sizeof g, "%s", bits == 1 ? "▀" : bits == 2 ? "▄" : "█");
                } else {
                    if (c->data) snprintf(g, sizeof g, "%c", c->dglyph ? c->dglyph : '*');
                    else snprintf(g, sizeof g, "%c", ascii_ramp[2]);
                }
            } else snprintf(g, sizeof g, " ");
            if (color && (fg != cur || bold != curb)) {
                fputs("\033[0m", out);
                if (bold) fputs("\033[1m", out);
                if (fg >= 1000) fprintf(out, "\033[38;5;%dm", fg - 1000);
                else if (fg != TT_NONE) fprintf(out, "\033[38;5;%dm", ansi256(fg));
                cur = fg;
                curb = bold;
            }
            fputs(g, out);
        }
        if (color && (cur != TT_NONE || curb)) fputs("\033[0m", out);
        fputc('\n', out);
    }
}

/* On a coarse log axis (a tick step over less than 1.5 rows) a tick's row can hold values a whole
** row away from it (0.15 on the 10^-2 row): widen the range so that every tick sits at a row's
** centre, each row spanning one tick step, the data inside.  Ranges the figure asks for are kept. */
static void tt_snap_log_rows(const tcanvas *t, const qs_layout *L, qs_figure *f)
{
    qs_axis *a = &f->y;
    if ((a->scale != QS_AX_LOG10 && a->scale != QS_AX_LOG2) || f->heat || L->yt.n < 2 || t->ph < 2) return;
    if (isfinite(qs_axis_fwd(a, a->lo)) || isfinite(qs_axis_fwd(a, a->hi))) return;
    double t0 = qs_axis_fwd(a, L->yt.t[0].v), step = qs_axis_fwd(a, L->yt.t[1].v) - t0;
    for (int i = 2; i < L->yt.n; i++)   /* evenly spaced powers only */
        if (fabs(qs_axis_fwd(a, L->yt.t[i].v) - qs_axis_fwd(a, L->yt.t[i - 1].v) - step) > 1e-6 * fabs(step)) return;
    double lo = qs_axis_fwd(a, a->vlo), hi = qs_axis_fwd(a, a->vhi);
    if (!isfinite(t0) || !(step > 0) || !(hi > lo) || t->ph * step >= 1.5 * (hi - lo)) return;   /* 1.5 rows a step: fine */
    double lo2 = t0 - (ceil((t0 - lo) / step - 0.5 - 1e-9) + 0.5) * step;   /* the lowest row centre on a tick */
    if (lo2 + t->ph * step < hi - 1e-9) return;   /* the data would not fit */
    a->vlo = qs_axis_inv(a, lo2);
    a->vhi = qs_axis_inv(a, lo2 + t->ph * step);
}

/* Render f into out; with out NULL only count the point labels and series left without room
** (*dropped).  note_row: keep a line for the note even when the figure has none (for their names). */
static int tt_render(qs_figure *f, const qs_term_opts *o, FILE *out, qs_err *e, int note_row, int *dropped)
{
    tcanvas t;
    memset(&t, 0, sizeof t);
    t.W = o && o->cols > 0 ? o->cols : 100;
    t.H = o && o->rows > 0 ? o->rows : 30;
    if (t.W < 30 || t.H < 10) return qs_fail(e, "terminal plot needs at least 30x10 cells (got %dx%d)", t.W, t.H);
    if (t.W > 1000 || t.H > 500) return qs_fail(e, "terminal plot too large (%dx%d cells)", t.W, t.H);
    t.mode = o && o->mode != QS_TERM_AUTO ? o->mode : qs_term_mode_auto();
    t.utf8 = t.mode != QS_TERM_ASCII;
    t.dx = t.mode == QS_TERM_BRAILLE ? 2 : 1;
    t.dy = t.mode == QS_TERM_BRAILLE ? 4 : t.mode == QS_TERM_BLOCK ? 2 : 1;
    int color = o && o->color;
    t.c = calloc((size_t)t.W * (size_t)t.H, sizeof *t.c);
    int *lastrow = NULL;
    if (!t.c) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < (size_t)t.W * (size_t)t.H; i++) t.c[i].fg = TT_NONE;

    qs_plot_resolve(f);
    qs_measure m;
    memset(&m, 0, sizeof m);
    m.text_w = tt_measure;
    m.ctx = &t;
    m.font = m.title_font = m.line_h = m.title_h = 1;
    m.pad = 1;
    m.vpad = 0;
    m.tick_len = 1;
    m.legend_sample = 3;
    m.cells = 1;
    qs_layout L;
    int blank_note = note_row && !f->note[0];
    if (blank_note) snprintf(f->note, sizeof f->note, " ");
    qs_plot_layout(f, t.W, t.H, &m, &L);
    if (blank_note) f->note[0] = 0;
    /* snap the data area to whole cells and re-lay the axes on it */
    t.px = (int)ceil(L.plot.x - 1e-9);
    t.py = (int)ceil(L.plot.y - 1e-9);
    t.pw = (int)floor(L.plot.x + L.plot.w + 1e-9) - t.px;
    t.ph = (int)floor(L.plot.y + L.plot.h + 1e-9) - t.py;
    if (t.pw < 4 || t.ph < 2) { free(t.c); return qs_fail(e, "terminal too small for this plot"); }
    L.plot = (qs_rect){t.px, t.py, t.pw, t.ph};
    double vlo = f->y.vlo, vhi = f->y.vhi;
    tt_snap_log_rows(&t, &L, f);
    lastrow = malloc((size_t)t.pw * sizeof *lastrow);
    int *glyph_tried = t.tried = calloc(f->nseries ? f->nseries : 1, sizeof *glyph_tried);
    if (!lastrow || !glyph_tried) { free(lastrow); free(glyph_tried); free(t.c); return qs_fail(e, "out of memory"); }

    if (f->heat && f->heat->rows && f->heat->cols) tt_heatmap(&t, &L, f, color);
    int ndata = tt_all_series(&t, &L, f, lastrow);
    char hidden[200] = "", unlabelled[160] = "";   /* series hidden under others, point labels without room */
    int nhidden = tt_hidden_series(&t, f, hidden, sizeof hidden);
    tt_axes(&t, &L, f);
    tt_titles_legend(&t, &L, f, ndata);
    int nunlabelled = tt_annotations(&t, &L, f, unlabelled, sizeof unlabelled);
    if (dropped) *dropped += nhidden + nunlabelled;
    tt_note(&t, &L, f, hidden, unlabelled);
    if (out) tt_emit(&t, out, color);
    f->y.vlo = vlo;   /* the figure keeps its own range (the PNG export) */
    f->y.vhi = vhi;
    free(lastrow);
    free(glyph_tried);
    free(t.c);
    if (out && ferror(out)) return qs_fail(e, "write error on the terminal output");
    return 0;
}

int qs_plot_term(qs_figure *f, const qs_term_opts *o, FILE *out, qs_err *e)
{
    /* a point label without room and a series hidden under others are named in the note: make
    ** sure there is a line for it */
    int dropped = 0, labels = f->nseries > 1;
    for (size_t i = 0; i < f->nannots; i++) labels |= f->annots[i].point;
    if (labels && !f->note[0] && tt_render(f, o, NULL, e, 0, &dropped)) return -1;
    return tt_render(f, o, out, e, dropped > 0, NULL);
}
