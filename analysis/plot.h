/*
** The plot model: figures, axes, series, legends, annotations and heatmaps, with no knowledge of
** any output.  Renderers (app/render/plot_png.c through cairo, app/render/plot_term.c in character cells) ask
** the model for a layout in their own units (pixels or cells) and draw what it says.
**
**   qs_figure  title, size hints, one x and one y axis, series, annotations, an optional heatmap
**   qs_axis    scale (linear, log2, log10, symlog), title with units, requested or automatic range
**   qs_series  line, step (histogram outline over n+1 edges), scatter (marker shapes), or reference
**              lines (horizontal / vertical, e.g. a format's representable grid)
**   qs_layout  the data area, ticks with labels that never overlap, legend, colour bar, in the
**              renderer's units, from qs_plot_layout() and a qs_measure of the renderer's text
**
** Data rules: NaN and ±Inf are never drawn (a line breaks at them); on log axes values <= 0 are
** skipped and counted (qs_figure.skipped_x / skipped_y, shown by renderers as a note); symlog
** shows zero and negatives.  Empty data gives a valid figure with a default range and "no data".
**
** Tick labels and titles use '^' for an exponent ("2^-8", "10^3", "e^d"; qs_text_exponent says
** exactly what is raised); renderers typeset it (superscript in the PNG, Unicode superscripts in a
** UTF-8 terminal, left as is in ASCII).
*/
#ifndef QS_PLOT_H
#define QS_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/format.h"
#include "metrics.h"

typedef enum qs_ax_scale { QS_AX_LINEAR = 0, QS_AX_LOG2, QS_AX_LOG10, QS_AX_SYMLOG } qs_ax_scale;

typedef enum qs_ser_kind {
    QS_SER_LINE = 0,   /* polyline through (x[i], y[i]) */
    QS_SER_STEP,       /* histogram outline: n bins, x holds n+1 edges, y holds n counts */
    QS_SER_SCATTER,    /* markers at (x[i], y[i]) */
    QS_SER_HLINE,      /* horizontal reference lines at y[i] (x unused) */
    QS_SER_VLINE,      /* vertical reference lines at x[i] (y unused) */
} qs_ser_kind;

typedef enum qs_marker {
    QS_MK_NONE = 0, QS_MK_CIRCLE, QS_MK_SQUARE, QS_MK_TRIANGLE, QS_MK_DIAMOND, QS_MK_TRIANGLE_DOWN,
    QS_MK_PLUS, QS_MK_CROSS, QS_MK_STAR, QS_MK_COUNT
} qs_marker;

typedef enum qs_dash { QS_DASH_SOLID = 0, QS_DASH_DASHED, QS_DASH_DOTTED, QS_DASH_DASHDOT, QS_DASH_LONG, QS_DASH_COUNT } qs_dash;

/* Okabe-Ito colour-blind-safe palette, in series order (blue, orange, bluish green, vermillion,
** reddish purple, sky blue, yellow, black), plus a neutral grey for reference lines. */
#define QS_PALETTE_N 8
#define QS_COLOR_GREY (-1)
void qs_palette_rgb(int idx, double rgb[3]);
/* Sequential colour map (viridis, perceptually uniform, readable in grey) at t in [0, 1]. */
void qs_colormap_rgb(double t, double rgb[3]);
/* The ASCII and Unicode glyph of a marker (terminal legends and scatter points). */
char qs_marker_ascii(qs_marker m);
const char *qs_marker_utf8(qs_marker m);

#define QS_PLOT_MAX_TICKS 40
#define QS_AXIS_MAX_CAT 8          /* names of a categorical axis (qs_axis.cat) */
#define QS_AXIS_CAT_LEN 24
#define QS_PLOT_LABEL 40

typedef struct qs_tick {
    double v;                  /* data value */
    char label[QS_PLOT_LABEL];
} qs_tick;

typedef struct qs_ticks {
    int n;
    qs_tick t[QS_PLOT_MAX_TICKS];
} qs_ticks;

typedef struct qs_axis {
    qs_ax_scale scale;
    double symlog_c;           /* symlog: linear within ±c; 0 = automatic (qs_plot_resolve: the power
                               ** of ten at or below the smallest non-zero |value|, at least
                               ** 1e-6 of the largest; 1 without data) */
    double symlog_auto;        /* resolved automatic c */
    char title[160];           /* with units, e.g. "relative error |Q(x) - x| / |x|" */
    double lo, hi;             /* requested range in data units; NaN = automatic */
    int zero_base;             /* linear auto range always includes 0 (counts) */
    int invert;                /* drawn reversed: y grows downwards (matrix rows), x leftwards */
    int integer;               /* linear: the quantity is a whole number (passes): no ticks between */
    int cells;                 /* linear: the axis counts unit cells (heatmap rows or columns, cell i
                               ** spanning [i, i+1)): ticks at the cell centres i + 0.5, labelled i,
                               ** or cat[i] for the first ncat cells (a categorical axis) */
    int ncat;
    char cat[QS_AXIS_MAX_CAT][QS_AXIS_CAT_LEN];
    /* resolved by qs_plot_resolve(): the range shown, in data units */
    double vlo, vhi;
} qs_axis;

typedef struct qs_series {
    char *name;                /* legend label; NULL = not in the legend */
    qs_ser_kind kind;
    size_t n;                  /* points (STEP: bins) */
    double *x, *y;             /* owned copies (STEP: x has n+1 edges) */
    int color;                 /* palette index, or QS_COLOR_GREY */
    qs_marker marker;
    qs_dash dash;
    double width;              /* line width at 100 dpi, px (0 = 1.6) */
    int fill;                  /* STEP: translucent fill under the outline */
    int faint;                 /* reference lines: light, drawn behind the data */
} qs_series;

typedef struct qs_annot {
    double x, y;               /* data coordinates, or fractions of the data area (frac) */
    int frac;                  /* 1: x, y in [0, 1] of the data area, origin bottom-left */
    int anchor;                /* 0 left, 1 centre, 2 right (horizontal alignment of the text) */
    int color;                 /* palette index or QS_COLOR_GREY; -2 = text colour */
    int point;                 /* labels the data point (x, y): renderers place the text next to it,
                               ** avoiding other point labels */
    char text[160];
} qs_annot;

typedef struct qs_heatmap {
    size_t rows, cols;
    double *v;                 /* rows x cols, row-major, row 0 drawn at the top; NaN = no value */
    double x0, x1, y0, y1;     /* data extent: columns span x0..x1, rows span y0 (top) .. y1 (bottom) */
    qs_axis cbar;              /* colour scale (LINEAR or LOG10) with its title */
} qs_heatmap;

typedef struct qs_figure {
    char title[256];
    int width, height;         /* size hints at 100 dpi, pixels (0 = 1000 x 600) */
    qs_axis x, y;
    qs_series *series;
    size_t nseries, cap_series;
    qs_annot *annots;
    size_t nannots, cap_annots;
    qs_heatmap *heat;
    char note[256];            /* one line under the plot (e.g. "3 values <= 0 not shown") */
    /* set by qs_plot_resolve() */
    uint64_t skipped_x, skipped_y;   /* points not shown on a log axis (<= 0) */
    int empty;                 /* nothing drawable */
} qs_figure;

/* ---- building ---- */
qs_figure *qs_fig_new(const char *title);
void qs_fig_free(qs_figure *f);
/* A deep copy (series, annotations, heatmap); NULL when out of memory. */
qs_figure *qs_fig_clone(const qs_figure *f);
void qs_axis_set(qs_axis *a, qs_ax_scale s, const char *title);
/* Add a series (data copied; x or y may be NULL where the kind does not use it).  Returns it, or
** NULL when out of memory.  Colour, marker and dash default to the series' index. */
qs_series *qs_fig_add(qs_figure *f, qs_ser_kind kind, const char *name, const double *x, const double *y, size_t n);
qs_annot *qs_fig_annotate(qs_figure *f, double x, double y, int frac, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Heatmap of rows x cols float values (copied). */
qs_heatmap *qs_fig_heatmap(qs_figure *f, const double *v, size_t rows, size_t cols);

/* ---- scales ---- */
/* Data value -> axis coordinate (log2/log10 exponent, symlog transform); NaN when not shown. */
double qs_axis_fwd(const qs_axis *a, double v);
double qs_axis_inv(const qs_axis *a, double t);
/* Whether v can be drawn on the axis (finite, and > 0 on log scales). */
int qs_axis_ok(const qs_axis *a, double v);

/* Resolve the ranges of both axes (and the colour scale) from the data: finite values only,
** positive only on log scales, a 5% margin (in axis coordinates) unless zero_base or the range is
** requested.  Counts skipped points; sets empty. */
void qs_plot_resolve(qs_figure *f);

/* ---- ticks and layout ---- */
typedef struct qs_measure {
    /* width of a label at font size `size`, in the renderer's units */
    double (*text_w)(void *ctx, const char *s, double size);
    void *ctx;
    double font;               /* tick labels, legend, axis titles */
    double title_font;         /* figure title */
    double line_h;             /* height of a text line at `font` */
    double title_h;            /* height of the title line */
    double pad;                /* the unit gap (horizontal) */
    double vpad;               /* the unit gap (vertical) */
    double tick_len;           /* space between the data area and the tick labels (tick marks) */
    double legend_sample;      /* length of the legend's line sample */
    int cells;                 /* terminal: units are character cells; the y title goes above the axis */
} qs_measure;

/* A default measure in pixels (text width = 0.6 em per character) for tests and estimates. */
void qs_measure_px(qs_measure *m, double scale);

/* Ticks for the range [lo, hi] (data units) of an axis drawn over `length` units: 1-2-5 steps
** (linear), powers of ten / two (log10 / log2; every k-th when crowded), 0 and ±10^k (symlog).
** Labels never overlap: along x, adjacent labels are at least `gap` apart (text widths from m);
** along y (horizontal == 0), at least one line height + gap; the count is reduced until they fit. */
void qs_axis_ticks(const qs_axis *a, double lo, double hi, double length, int horizontal, const qs_measure *m,
                   double gap, qs_ticks *out);
/* Format a number for a tick label, with the precision the step needs. */
void qs_tick_label(double v, double step, char *buf, size_t cap);
/* Exponent markup in any text of a figure: '^' raises only the token right after it — an optional
** sign then letters, digits and inner '.' ("2^-8", "e^d", "W^T"), a parenthesised group kept with
** its parentheses ("E^(k-1)"), or a {group} without its braces.  A '^' followed by nothing
** raisable stays a literal caret.  Finds the first exponent at or after s: returns 1 and sets
** *caret (offset of the '^'), the raised text s[*e0, *e1) and *end (offset just past the markup);
** 0 when there is none. */
int qs_text_exponent(const char *s, size_t *caret, size_t *e0, size_t *e1, size_t *end);

typedef struct qs_rect { double x, y, w, h; } qs_rect;   /* origin top-left, y down */

#define QS_PLOT_MAX_LEGEND 24

typedef struct qs_layout {
    double W, H;
    qs_rect plot;              /* the data area */
    qs_ticks xt, yt;
    double title_y;            /* baseline-centre of the title (0 = none) */
    double xtitle_y;           /* centre line of the x title */
    double ytitle_x;           /* centre of the (rotated) y title; cells: its row is ytitle_y */
    double ytitle_y;
    double note_y;
    qs_rect legend;            /* w == 0: no legend */
    int legend_below;          /* 1: under the plot, in leg_cols columns */
    int leg_cols;
    double leg_colw;           /* width of one legend column */
    int nleg;
    int leg_total;             /* series that have a legend entry; more than nleg: the note says so */
    int leg_more;              /* entries left out for lack of room (cells): drawn as "+N more" at entry nleg */
    size_t leg[QS_PLOT_MAX_LEGEND];   /* series indices in the legend */
    double leg_row;            /* height of one legend row */
    qs_rect cbar;              /* colour bar (w == 0: none) */
    qs_ticks ct;
    double cbar_title_y;
} qs_layout;

/* Lay the figure out in a W x H canvas (call qs_plot_resolve first).  Legend and colour bar go
** right of the data area (below it when that would leave the data area too narrow). */
void qs_plot_layout(const qs_figure *f, double W, double H, const qs_measure *m, qs_layout *L);
/* Top-left corner of legend entry i (a row of height leg_row: sample, then the label). */
void qs_layout_legend_pos(const qs_layout *L, int i, double *x, double *y);
/* Data -> canvas coordinates for the laid-out figure (NaN when the value cannot be shown). */
double qs_layout_px(const qs_layout *L, const qs_figure *f, double x);
double qs_layout_py(const qs_layout *L, const qs_figure *f, double y);
/* Canvas position of an annotation (data or fractional coordinates); -1 when it cannot be shown. */
int qs_layout_annot_pos(const qs_layout *L, const qs_figure *f, const qs_annot *a, double *x, double *y);
/* Colour-scale position t in [0, 1] of a heatmap value (NaN when not drawable). */
double qs_heat_t(const qs_heatmap *h, double v);

/* What a renderer adds to the line under a figure ("" or NULL: nothing). */
typedef struct qs_note_parts {
    const char *log_words;   /* after "points with x <= 0 not shown", e.g. " (log scale)" */
    const char *hidden;      /* series mostly hidden by others at this size (cells) */
    const char *unlabelled;  /* point labels with no free place (cells) */
    const char *same;        /* series drawn on the same points as another (pixels) */
} qs_note_parts;
/* The note under a figure, "; " apart: the figure's own note, points not shown on a log axis, series
** beyond the legend, then the renderer's parts (hidden, unlabelled, y points, same), cut at cap.
** *same_at (when not NULL) is where the `same` part starts, SIZE_MAX when it is not there. */
void qs_plot_note(const qs_figure *f, const qs_layout *L, const qs_note_parts *p, char *out, size_t cap,
                  size_t *same_at);

/* ======== plot kinds (analysis/plot_kinds.c): data in, figure out ======== */

/* Error histograms of several formats overlaid as step outlines, log counts.  h[i] are of one
** kind (log2 bins of |error| as in qs_analysis.rel_err / abs_err, or linear); `what` names the
** error with its unit for the x title. */
qs_figure *qs_plot_err_hist(const char *title, const char *what, size_t n, const char *const *names,
                            const qs_hist *const *h);
/* Histogram of |x| (log2 bins) or x (linear bins), with `grid` (representable magnitudes, may be
** NULL) drawn as faint vertical lines, labelled `grid_name`. */
qs_figure *qs_plot_value_hist(const char *title, const qs_hist *h, const double *grid, size_t ngrid,
                              const char *grid_name);
/* Representable non-negative values of format f under options o in a block whose absmax is
** `amax` (the tensor's, for block formats; ignored by element formats), ascending, deduplicated.
** Formats with no code table of <= 8 bits (fp32, bf16, fp16) have no grid (n = 0).  Int formats:
** k * amax / qmax. */
int qs_format_grid(const qs_format *f, const qs_qopts *o, double amax, double **grid, size_t *n, qs_err *e);

typedef struct qs_pareto_pt {
    const char *name, *family;
    double bits;               /* bits per element including metadata */
    double eff_bits;           /* effective bits (-1/2 log2 of the relative error energy) */
} qs_pareto_pt;
/* Scatter of formats (marker and colour by family, each point labelled) and the Pareto front
** (no other format has more effective bits at no more bits per element) as a line. */
qs_figure *qs_plot_pareto(const char *title, const qs_pareto_pt *p, size_t n);
/* Pareto-optimal points: writes their indices ascending in bits to idx, returns the count. */
size_t qs_pareto_front(const qs_pareto_pt *p, size_t n, size_t *idx);

/* Heatmap of a rows x cols grid of per-block values (e.g. block RMSE of a 2-D tensor, rows x
** blocks per row), downsampled to at most max_cells per side by averaging; log colour scale when
** logc (non-positive values shown as no value). */
qs_figure *qs_plot_block_heatmap(const char *title, const float *v, uint64_t rows, uint64_t cols, int logc,
                                 const char *what, const char *xtitle, const char *ytitle, size_t max_cells);
/* The same from the cells' sums and counts, accumulated by the caller as qs_plot_block_heatmap does
** (value v of grid cell (r, c) adds to cell (r * R / rows, c * C / cols) of the R x C = the sides
** capped at max_cells, in row-major order, skipping non-finite and, when logc, non-positive values),
** so a grid too large to hold is never held.  sum and cnt are overwritten. */
qs_figure *qs_plot_block_heatmap_cells(const char *title, double *sum, const double *cnt, size_t R, size_t C,
                                       uint64_t rows, uint64_t cols, int logc, const char *what, const char *xtitle,
                                       const char *ytitle);

/* Transfer curve of a format over [lo, hi] (n samples): identity, Q(x), and Q(x) - x.  Each x
** is quantized in a block together with `ref_amax` (block formats: the block scale follows
** ref_amax; 0 = 1), computed with the format's fakeq. */
qs_figure *qs_plot_transfer(const qs_format *f, const qs_qopts *o, double lo, double hi, size_t n, double ref_amax,
                            qs_err *e);

/* Generic multi-series line plot (later kinds: mismatch trajectories over steps, MSD effective
** bits vs passes, attention error vs sequence length). */
typedef struct qs_line_data {
    const char *name;
    size_t n;
    const double *x, *y;
} qs_line_data;
qs_figure *qs_plot_lines(const char *title, const char *xtitle, qs_ax_scale xs, const char *ytitle, qs_ax_scale ys,
                         const qs_line_data *s, size_t n);
qs_figure *qs_plot_trajectory(const char *title, const char *ytitle, const qs_line_data *s, size_t n);
qs_figure *qs_plot_msd(const char *title, const qs_line_data *s, size_t n);
qs_figure *qs_plot_attn(const char *title, const char *ytitle, const qs_line_data *s, size_t n);
/* A figure from a stored result's JSON text in the shared line layout of docs/plots.md (kind
** trajectory, msd or attn picks the builder; every kind gets its stored x-axis title, other kinds
** their stored y-axis title too); its title the
** stored non-empty "title", else title, else (NULL) the kind's default.  NULL with *e set when the
** text is not in that form ("stored KIND data is not in ...") or memory ran out. */
qs_figure *qs_plot_lines_json(const char *kind, const char *text, const char *title, qs_err *e);
/* What keeps a stored JSON text out of that layout, in a few words ("not JSON", "no \"series\"
** list", "\"series\" is not a list", "\"series\" is empty"); NULL when it is in it. */
const char *qs_plot_lines_json_problem(const char *text);

#endif
