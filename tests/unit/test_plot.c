/*
** The plot model (analysis/plot.c, plot_kinds.c): ticks, ranges, log scales with zeros and negatives,
** label overlap, the layout, the plot kinds, and the axes of stored results.  The renderers are
** tested in test_plot_render.c.
*/
#include "test_util.h"

#include <math.h>
#include <png.h>

#include "../../analysis/llm_sens_store.h"
#include "../../analysis/plot.h"
#include "../../analysis/rl_xaxis.h"
#include "../../app/render/plot_render.h"

/* ---------------- helpers ---------------- */

static qs_measure px_measure(void)
{
    qs_measure m;
    qs_measure_px(&m, 1);
    return m;
}

static int is_125(double step)
{
    double mag = pow(10, floor(log10(step) + 1e-9));
    double n = step / mag;
    return fabs(n - 1) < 1e-9 || fabs(n - 2) < 1e-9 || fabs(n - 5) < 1e-9 || fabs(n - 10) < 1e-9;
}

/* labels of adjacent ticks do not overlap along an axis of `len` */
static void assert_no_overlap(const qs_axis *a, const qs_ticks *t, double len, int horizontal, const qs_measure *m,
                              double gap)
{
    double lo = qs_axis_fwd(a, a->vlo), hi = qs_axis_fwd(a, a->vhi);
    for (int i = 1; i < t->n; i++) {
        double p0 = (qs_axis_fwd(a, t->t[i - 1].v) - lo) / (hi - lo) * len;
        double p1 = (qs_axis_fwd(a, t->t[i].v) - lo) / (hi - lo) * len;
        double w0 = horizontal ? m->text_w(m->ctx, t->t[i - 1].label, m->font) : m->line_h;
        double w1 = horizontal ? m->text_w(m->ctx, t->t[i].label, m->font) : m->line_h;
        assert_true(p1 - p0 >= (w0 + w1) / 2 + gap - 1e-9);
    }
}

static qs_axis axis_range(qs_ax_scale s, double lo, double hi)
{
    qs_axis a;
    memset(&a, 0, sizeof a);
    a.scale = s;
    a.vlo = lo;
    a.vhi = hi;
    return a;
}

/* ---------------- ticks, ranges, layout, kinds ---------------- */

static void test_linear_ticks_125(void **st)
{
    (void)st;
    qs_measure m = px_measure();
    const double ranges[][2] = {{0, 1}, {-3.7, 12.2}, {0.0013, 0.0071}, {-1e6, 3e6}, {100, 101}, {-0.5, 0.5}, {7, 7.0001}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        qs_axis a = axis_range(QS_AX_LINEAR, ranges[r][0], ranges[r][1]);
        qs_ticks t;
        qs_axis_ticks(&a, a.vlo, a.vhi, 800, 1, &m, 10, &t);
        assert_true(t.n >= 2);
        double step = t.t[1].v - t.t[0].v;
        assert_true(is_125(step));
        for (int i = 0; i < t.n; i++) {
            assert_true(t.t[i].v >= a.vlo - 1e-9 * fabs(step) && t.t[i].v <= a.vhi + 1e-9 * fabs(step));
            if (i) assert_true(fabs((t.t[i].v - t.t[i - 1].v) - step) <= 1e-6 * step);
            /* the label reads back as the value (to the step's precision) */
            double back = strtod(t.t[i].label, NULL);
            assert_true(fabs(back - t.t[i].v) <= step * 1e-3);
        }
        assert_no_overlap(&a, &t, 800, 1, &m, 10);
    }
    /* zero is labelled "0", never "-0" or "1e-17" */
    qs_axis a = axis_range(QS_AX_LINEAR, -0.3, 0.3);
    qs_ticks t;
    qs_axis_ticks(&a, a.vlo, a.vhi, 600, 1, &m, 10, &t);
    int zero = 0;
    for (int i = 0; i < t.n; i++) if (t.t[i].v == 0) { zero = 1; assert_string_equal(t.t[i].label, "0"); }
    assert_true(zero);
}

static void test_fewer_ticks_when_crowded(void **st)
{
    (void)st;
    qs_measure m = px_measure();
    qs_axis a = axis_range(QS_AX_LINEAR, 123456.0, 987654.0);
    int prev = 1000;
    for (double len = 1200; len >= 60; len /= 2) {
        qs_ticks t;
        qs_axis_ticks(&a, a.vlo, a.vhi, len, 1, &m, 10, &t);
        assert_true(t.n >= 1);
        assert_true(t.n <= prev);
        prev = t.n;
        assert_no_overlap(&a, &t, len, 1, &m, 10);
    }
    assert_true(prev <= 2);
    /* vertical: one line height apart */
    qs_axis b = axis_range(QS_AX_LINEAR, 0, 100);
    qs_ticks t;
    qs_axis_ticks(&b, 0, 100, 60, 0, &m, 2, &t);
    assert_true(t.n >= 2 && t.n <= 4);
    assert_no_overlap(&b, &t, 60, 0, &m, 2);
}

static void test_log_ticks(void **st)
{
    (void)st;
    qs_measure m = px_measure();
    qs_axis a = axis_range(QS_AX_LOG10, 1, 1e6);
    qs_ticks t;
    qs_axis_ticks(&a, 1, 1e6, 800, 0, &m, 2, &t);
    assert_int_equal(t.n, 7);
    assert_string_equal(t.t[0].label, "1");
    assert_string_equal(t.t[3].label, "1000");
    assert_string_equal(t.t[4].label, "10^4");
    for (int i = 0; i < t.n; i++) assert_true(fabs(log10(t.t[i].v) - i) < 1e-12);
    /* crowded: every k-th power, still powers of ten */
    qs_axis b = axis_range(QS_AX_LOG10, 1e-30, 1e30);
    qs_axis_ticks(&b, b.vlo, b.vhi, 300, 1, &m, 10, &t);
    assert_true(t.n >= 2 && t.n < 61);
    for (int i = 0; i < t.n; i++) assert_true(fabs(log10(t.t[i].v) - round(log10(t.t[i].v))) < 1e-9);
    assert_no_overlap(&b, &t, 300, 1, &m, 10);
    /* log2: powers of two, "2^k" labels */
    qs_axis c = axis_range(QS_AX_LOG2, ldexp(1, -20), 16);
    qs_axis_ticks(&c, c.vlo, c.vhi, 900, 1, &m, 10, &t);
    assert_true(t.n >= 5);
    for (int i = 0; i < t.n; i++) {
        int e;
        assert_true(frexp(t.t[i].v, &e) == 0.5);
        char want[32];
        snprintf(want, sizeof want, "2^%d", e - 1);
        assert_string_equal(t.t[i].label, want);
    }
    assert_no_overlap(&c, &t, 900, 1, &m, 10);
    /* less than a decade: linear ticks placed on the log axis */
    qs_axis d = axis_range(QS_AX_LOG10, 2, 7);
    qs_axis_ticks(&d, 2, 7, 500, 1, &m, 10, &t);
    assert_true(t.n >= 2);
    for (int i = 0; i < t.n; i++) assert_true(t.t[i].v >= 2 && t.t[i].v <= 7);
}

static void test_symlog(void **st)
{
    (void)st;
    qs_axis a = axis_range(QS_AX_SYMLOG, -1000, 1000);
    a.symlog_c = 1;
    /* the transform is odd, monotone and finite through zero */
    assert_true(qs_axis_fwd(&a, 0) == 0);
    assert_true(qs_axis_fwd(&a, -5) == -qs_axis_fwd(&a, 5));
    double prev = -INFINITY;
    for (double v = -1e4; v <= 1e4; v += 37.5) {
        double t = qs_axis_fwd(&a, v);
        assert_true(isfinite(t) && t > prev);
        prev = t;
        assert_true(fabs(qs_axis_inv(&a, t) - v) <= 1e-9 * fmax(1, fabs(v)));
    }
    qs_measure m = px_measure();
    qs_ticks t;
    qs_axis_ticks(&a, -1000, 1000, 800, 1, &m, 10, &t);
    int zero = 0, neg = 0, pos = 0;
    for (int i = 0; i < t.n; i++) {
        zero += t.t[i].v == 0;
        neg += t.t[i].v < 0;
        pos += t.t[i].v > 0;
    }
    assert_int_equal(zero, 1);
    assert_true(neg >= 1 && pos >= 1 && neg == pos);
    assert_no_overlap(&a, &t, 800, 1, &m, 10);
}


static void test_log_axis_skips_zeros_and_negatives(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("t");
    const double x[] = {-1, 0, 1, 10, 100, NAN, INFINITY}, y[] = {1, 2, 3, 4, 5, 6, 7};
    qs_fig_add(f, QS_SER_LINE, "s", x, y, 7);
    f->x.scale = QS_AX_LOG10;
    qs_plot_resolve(f);
    assert_int_equal(f->skipped_x, 2);          /* -1 and 0: finite but not positive */
    assert_false(f->empty);
    assert_true(f->x.vlo > 0 && f->x.vlo < 1 && f->x.vhi > 100 && f->x.vhi < 200);
    assert_true(f->y.vlo < 3 && f->y.vhi > 5 && f->y.vhi < 6);   /* y of the shown points only */
    qs_layout L;
    qs_measure m = px_measure();
    qs_plot_layout(f, 800, 500, &m, &L);
    assert_true(isnan(qs_layout_px(&L, f, 0)));
    assert_true(isnan(qs_layout_px(&L, f, -1)));
    assert_true(qs_layout_px(&L, f, 1) < qs_layout_px(&L, f, 10));
    assert_true(qs_layout_py(&L, f, 3) > qs_layout_py(&L, f, 5));   /* y grows upwards */
    /* symlog keeps them */
    f->x.scale = QS_AX_SYMLOG;
    qs_plot_resolve(f);
    assert_int_equal(f->skipped_x, 0);
    assert_true(f->x.vlo < -1 && f->x.vhi > 100);
    qs_fig_free(f);
}

static void test_ranges_and_margins(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new(NULL);
    const double x[] = {0, 10}, y[] = {2, 4};
    qs_fig_add(f, QS_SER_LINE, NULL, x, y, 2);
    qs_plot_resolve(f);
    assert_true(fabs(f->x.vlo - -0.5) < 1e-12 && fabs(f->x.vhi - 10.5) < 1e-12);   /* 5% margins */
    f->y.zero_base = 1;
    qs_plot_resolve(f);
    assert_true(f->y.vlo == 0);
    /* requested ranges win */
    f->x.lo = 2;
    f->x.hi = 3;
    qs_plot_resolve(f);
    assert_true(f->x.vlo == 2 && f->x.vhi == 3);
    qs_fig_free(f);
    /* a histogram's x range follows its non-empty bins; zero counts are the baseline on log y */
    f = qs_fig_new(NULL);
    const double e[] = {0, 1, 2, 3, 4, 5}, c[] = {0, 0, 7, 70, 0};
    qs_fig_add(f, QS_SER_STEP, "h", e, c, 5);
    f->y.scale = QS_AX_LOG10;
    qs_plot_resolve(f);
    assert_true(f->x.vlo > 1.5 && f->x.vlo < 2 && f->x.vhi > 4 && f->x.vhi < 4.5);
    assert_true(f->y.vlo > 1 && f->y.vlo < 7 && f->y.vhi > 70);
    assert_int_equal(f->skipped_y, 0);
    qs_fig_free(f);
    /* a constant series still gets a non-empty range */
    f = qs_fig_new(NULL);
    const double k[] = {5, 5, 5};
    qs_fig_add(f, QS_SER_LINE, NULL, k, k, 3);
    qs_plot_resolve(f);
    assert_true(f->x.vhi > f->x.vlo && f->x.vlo < 5 && f->x.vhi > 5);
    qs_fig_free(f);
}

static void test_empty_and_nonfinite(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("empty");
    f->x.scale = QS_AX_LOG2;
    f->y.scale = QS_AX_LOG10;
    qs_plot_resolve(f);
    assert_true(f->empty);
    assert_true(isfinite(f->x.vlo) && f->x.vhi > f->x.vlo && f->x.vlo > 0);
    qs_measure m = px_measure();
    qs_layout L;
    qs_plot_layout(f, 640, 400, &m, &L);
    assert_true(L.plot.w > 100 && L.plot.h > 100);
    assert_true(L.xt.n >= 1 && L.yt.n >= 1);
    qs_fig_free(f);
    /* only NaN / Inf / non-positive data on log axes: empty, nothing crashes */
    f = qs_fig_new("nan");
    const double x[] = {NAN, INFINITY, -INFINITY, 0}, y[] = {NAN, 1, 2, -3};
    qs_fig_add(f, QS_SER_SCATTER, "s", x, y, 4);
    f->x.scale = QS_AX_LOG10;
    qs_plot_resolve(f);
    assert_true(f->empty);
    uint8_t *rgb = NULL;
    qs_err e = {{0}};
    assert_int_equal(qs_plot_rgb(f, 320, 200, 100, &rgb, NULL, &e), 0);
    free(rgb);
    qs_fig_free(f);
}

static void test_layout_legend_outside(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("legend");
    const double x[] = {0, 1, 2}, y[] = {1, 3, 2};
    qs_fig_add(f, QS_SER_LINE, "first series", x, y, 3);
    qs_fig_add(f, QS_SER_SCATTER, "second", x, y, 3);
    qs_fig_add(f, QS_SER_VLINE, NULL, x, NULL, 3);   /* unnamed: not in the legend */
    qs_plot_resolve(f);
    qs_measure m = px_measure();
    qs_layout L;
    qs_plot_layout(f, 1000, 600, &m, &L);
    assert_int_equal(L.nleg, 2);
    assert_false(L.legend_below);
    assert_true(L.legend.x >= L.plot.x + L.plot.w);     /* right of the data area */
    assert_true(L.legend.x + L.legend.w <= 1000);
    /* narrow canvas: the legend moves below the data area */
    qs_plot_layout(f, 300, 400, &m, &L);
    assert_true(L.legend_below);
    assert_true(L.legend.y >= L.plot.y + L.plot.h);
    assert_true(L.legend.y + L.legend.h <= 400);
    qs_fig_free(f);
}


static void test_pareto_front(void **st)
{
    (void)st;
    const qs_pareto_pt p[] = {{"a", "x", 4, 3}, {"b", "x", 4.5, 5}, {"c", "y", 8, 4}, {"d", "y", 8, 7},
                              {"e", "z", 16, 11}, {"f", "z", 16, INFINITY}, {"g", "z", 4.25, 3}};
    size_t idx[7];
    size_t k = qs_pareto_front(p, 7, idx);
    assert_int_equal(k, 4);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 1);
    assert_int_equal(idx[2], 3);
    assert_int_equal(idx[3], 4);
    qs_figure *f = qs_plot_pareto("p", p, 7);
    assert_non_null(f);
    assert_true(strstr(f->note, "exact") && strstr(f->note, "f"));
    size_t scatter = 0;
    for (size_t i = 0; i < f->nseries; i++) scatter += f->series[i].kind == QS_SER_SCATTER;
    assert_int_equal(scatter, 3);   /* one per family */
    /* families get distinct markers and colours */
    for (size_t i = 0; i < f->nseries; i++)
        for (size_t j = i + 1; j < f->nseries; j++)
            if (f->series[i].kind == QS_SER_SCATTER && f->series[j].kind == QS_SER_SCATTER) {
                assert_true(f->series[i].marker != f->series[j].marker);
                assert_true(f->series[i].color != f->series[j].color);
            }
    qs_fig_free(f);
}

static int has(const double *g, size_t n, double v)
{
    for (size_t i = 0; i < n; i++) if (g[i] == v) return 1;
    return 0;
}

static void test_format_grid(void **st)
{
    (void)st;
    qs_qopts o;
    memset(&o, 0, sizeof o);
    qs_err e = {{0}};
    double *g;
    size_t n;
    assert_int_equal(qs_format_grid(qs_format_find("fp4_e2m1"), &o, 0, &g, &n, &e), 0);
    const double want[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    assert_int_equal(n, 8);
    for (int i = 0; i < 8; i++) assert_true(g[i] == want[i]);
    free(g);
    assert_int_equal(qs_format_grid(qs_format_find("fp8_e4m3"), &o, 0, &g, &n, &e), 0);
    assert_int_equal(n, 127);   /* 0 and 126 positive finite values (E4M3FN) */
    assert_true(g[n - 1] == 448 && g[1] == 0x1p-9);
    free(g);
    /* MXFP4 in a block with absmax 1: scale 2^(0-2) -> 0.125 steps */
    assert_int_equal(qs_format_grid(qs_format_find("mxfp4"), &o, 1.0, &g, &n, &e), 0);
    const double mx[] = {0, 0.125, 0.25, 0.375, 0.5, 0.75, 1};
    for (int i = 0; i < 7; i++) assert_true(has(g, n, mx[i]));
    assert_true(g[n - 1] <= 1.5);
    free(g);
    /* int8 per tensor: k * amax / 127 */
    assert_int_equal(qs_format_grid(qs_format_find("int8"), &o, 127.0, &g, &n, &e), 0);
    assert_int_equal(n, 128);
    assert_true(g[1] == 1 && g[127] == 127);
    free(g);
    /* bf16: no drawable grid */
    assert_int_equal(qs_format_grid(qs_format_find("bf16"), &o, 1.0, &g, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(g);
}

static void test_transfer_and_hist_kinds(void **st)
{
    (void)st;
    qs_qopts o;
    memset(&o, 0, sizeof o);
    qs_err e = {{0}};
    qs_figure *f = qs_plot_transfer(qs_format_find("fp4_e2m1"), &o, -8, 8, 161, 0, &e);
    assert_non_null(f);
    const qs_series *q = NULL, *d = NULL;
    for (size_t i = 0; i < f->nseries; i++) {
        if (f->series[i].name && !strcmp(f->series[i].name, "Q(x)")) q = &f->series[i];
        if (f->series[i].name && !strncmp(f->series[i].name, "error", 5)) d = &f->series[i];
    }
    assert_non_null(q);
    assert_non_null(d);
    for (size_t i = 0; i < q->n; i++) {
        double x = q->x[i];
        if (fabs(x - 2.6) < 1e-6) assert_true(q->y[i] == 3);
        if (x >= 7) assert_true(q->y[i] == 6);       /* saturates */
        if (x <= -7) assert_true(q->y[i] == -6);
        assert_true(fabs(d->y[i] - (q->y[i] - x)) < 1e-12);
    }
    qs_fig_free(f);
    /* error histograms: step outlines over log2 bins, exact fraction in the label */
    uint64_t c1[4] = {1, 10, 100, 0}, c2[4] = {0, 5, 50, 500};
    qs_hist h1 = {0, 4, -8, -4, c1, 1000, 0, 0, 0}, h2 = {0, 4, -8, -4, c2, 0, 3, 0, 2};
    const qs_hist *hp[2] = {&h1, &h2};
    const char *names[2] = {"A", "B"};
    f = qs_plot_err_hist("e", NULL, 2, names, hp);
    assert_int_equal(f->nseries, 2);
    assert_int_equal(f->series[0].kind, QS_SER_STEP);
    assert_true(f->x.scale == QS_AX_LOG2 && f->y.scale == QS_AX_LOG10);
    assert_true(f->series[0].x[0] == 0x1p-8 && f->series[0].x[4] == 0x1p-4);
    assert_non_null(strstr(f->series[0].name, "exact"));
    assert_non_null(strstr(f->series[1].name, "2 NaN/Inf"));
    assert_true(f->series[0].dash != f->series[1].dash && f->series[0].color != f->series[1].color);
    assert_non_null(strstr(f->note, "3 errors outside"));
    qs_fig_free(f);
    /* block heatmap: downsampled by averaging, log colour scale skips non-positive blocks */
    float v[4 * 6];
    for (int i = 0; i < 24; i++) v[i] = (float)(i + 1);
    v[0] = 0;
    f = qs_plot_block_heatmap("h", v, 4, 6, 1, NULL, NULL, NULL, 3);
    assert_int_equal(f->heat->rows, 3);
    assert_int_equal(f->heat->cols, 3);
    assert_true(fabs(f->heat->v[0] - (2 + 7 + 8) / 3.0) < 1e-12);   /* mean of the positive values of the first cell (v=0 skipped) */
    qs_plot_resolve(f);
    assert_true(f->heat->cbar.vlo > 0);
    assert_true(f->y.invert);
    qs_fig_free(f);
}

/* ---------------- axes of stored results ---------------- */

/* on a log axis of less than two decades the labelled ticks span the data (no data more
** than 30 % of the axis beyond the outermost label), as they also do over many decades */
static void test_log_ticks_cover_data(void **st)
{
    (void)st;
    qs_measure m = px_measure();
    const double ranges[][2] = {{1.5e-4, 4e-3}, {3e-4, 2.8e-3}, {0.004, 0.3}, {0.12, 0.31}, {2e-6, 9e-2}, {1, 1e6}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++)
        for (int horizontal = 0; horizontal < 2; horizontal++) {
            qs_figure *f = qs_fig_new("t");
            const double x[] = {ranges[r][0], ranges[r][1]};
            qs_fig_add(f, QS_SER_LINE, "s", x, x, 2);
            f->x.scale = f->y.scale = QS_AX_LOG10;
            qs_plot_resolve(f);
            qs_ticks t;
            qs_axis_ticks(&f->y, f->y.vlo, f->y.vhi, horizontal ? 600 : 300, horizontal, &m, horizontal ? 10 : 3, &t);
            assert_true(t.n >= 2);
            double d0 = log10(ranges[r][0]), d1 = log10(ranges[r][1]), span = d1 - d0;
            double lo = log10(t.t[0].v), hi = log10(t.t[t.n - 1].v);
            if (!(lo - d0 <= 0.3 * span && d1 - hi <= 0.3 * span))
                fail_msg("range %g..%g: labels %s..%s leave data unlabelled", ranges[r][0], ranges[r][1], t.t[0].label,
                         t.t[t.n - 1].label);
            for (int i = 1; i < t.n; i++) assert_true(log10(t.t[i].v) - log10(t.t[i - 1].v) <= 0.4 * span + 1e-9);
            qs_fig_free(f);
        }
}

/* a stored reward curve is drawn on a linear axis (not symlog, as a mismatch is); a
** stored "yscale" is honoured */
static void test_stored_yscale(void **st)
{
    (void)st;
    qs_err e = {{0}};
    const char *rew = "{\"ylabel\": \"mean reward\", \"series\": [{\"name\": \"bf16\", \"x\": [0, 1, 2], \"y\": [0.004, 0.05, 0.3]}]}";
    qs_figure *f = qs_plot_lines_json("trajectory", rew, NULL, &e);
    assert_non_null(f);
    assert_int_equal(f->y.scale, QS_AX_LINEAR);
    qs_fig_free(f);
    const char *mis = "{\"ylabel\": \"mean |dlogp|\", \"series\": [{\"name\": \"a\", \"x\": [0, 1], \"y\": [0.001, 0.3]}]}";
    assert_non_null(f = qs_plot_lines_json("trajectory", mis, NULL, &e));
    assert_int_equal(f->y.scale, QS_AX_SYMLOG);
    qs_fig_free(f);
    /* training steps are whole numbers */
    const char *tr6 = "{\"ylabel\": \"mean |dlogp|\", \"series\": [{\"name\": \"a\", \"x\": [0, 1, 2, 3, 4, 5], \"y\": [0.01, 0.02, 0.02, 0.03, 0.04, 0.05]}]}";
    assert_non_null(f = qs_plot_lines_json("trajectory", tr6, NULL, &e));
    assert_true(f->x.integer);
    qs_fig_free(f);
    /* passes are whole numbers: no tick between them */
    const char *ms = "{\"ylabel\": \"effective bits\", \"series\": [{\"name\": \"int8\", \"x\": [1, 2, 3, 4], \"y\": [8, 16, 24, 31]}]}";
    assert_non_null(f = qs_plot_lines_json("msd", ms, NULL, &e));
    qs_plot_resolve(f);
    qs_measure m = px_measure();
    qs_ticks t;
    qs_axis_ticks(&f->x, f->x.vlo, f->x.vhi, 800, 1, &m, 10, &t);
    assert_true(t.n >= 3);
    for (int i = 0; i < t.n; i++) assert_true(t.t[i].v == floor(t.t[i].v));
    qs_fig_free(f);
    const char *lg = "{\"ylabel\": \"x\", \"yscale\": \"log10\", \"series\": [{\"name\": \"a\", \"x\": [0, 1], \"y\": [0.001, 0.3]}]}";
    assert_non_null(f = qs_plot_lines_json("msd", lg, NULL, &e));
    assert_int_equal(f->y.scale, QS_AX_LOG10);
    qs_fig_free(f);
}

/* a line plot whose x are all whole numbers (ResQ variants 0..4, layers, steps) has no ticks
** between them ("variant 0.5" is a label for nothing); fractional x keep their ticks */
static void test_whole_x_integer_ticks(void **st)
{
    (void)st;
    const double x[] = {0, 1, 2, 3, 4}, y[] = {0.17, 0.126, 0.126, 0.126, 0.126}, xf[] = {0, 0.5, 1, 1.5, 2};
    for (int k = 0; k < 2; k++) {
        qs_line_data d = {"mxfp4", 5, k ? xf : x, y};
        qs_figure *f = qs_plot_lines("resq", "variant", QS_AX_LINEAR, "error", QS_AX_LINEAR, &d, 1);
        assert_non_null(f);
        qs_plot_resolve(f);
        qs_layout L;
        qs_measure m = px_measure();
        qs_plot_layout(f, 1000, 600, &m, &L);
        int frac = 0;
        for (int i = 0; i < L.xt.n; i++) frac += L.xt.t[i].v != floor(L.xt.t[i].v);
        if (k == 0) { assert_int_equal(frac, 0); assert_true(L.xt.n >= 5); }
        else assert_true(frac > 0);
        qs_fig_free(f);
    }
}

/* issue 28: the sensitivity heatmap labelled its sites as numbers ("0 1 2 ..." and a key in the x
** title), put its layer ticks on cell edges (a "30" under layers 0..29), and its footnote gave a KL
** target next to a measured KL above it without saying so */
static void test_sensitivity_heatmap_axes(void **st)
{
    (void)st;
    static const char *const sites[] = {"attn_in", "attn_out", "ffn_in", "ffn_down_in", "kv", "w"};
    enum { L = 30, S = 6 };
    double kl[L * S], dppl[L * S];
    unsigned char bf[L * S] = {0};
    qs_sensrun r;
    memset(&r, 0, sizeof r);
    snprintf(r.model, sizeof r.model, "m");
    snprintf(r.text, sizeof r.text, "t");
    snprintf(r.format, sizeof r.format, "mxfp4");
    r.ctx = 64, r.layers = L, r.nsites = S;
    for (int s = 0; s < S; s++) snprintf(r.sites[s], sizeof r.sites[s], "%s", sites[s]);
    for (int i = 0; i < L * S; i++) kl[i] = 1e-3 * (1 + i % 7), dppl[i] = 0;
    r.kl = kl, r.dppl = dppl, r.bf16 = bf;
    bf[3] = 1;
    r.have_plan = 1, r.npromoted = 1;
    snprintf(r.target, sizeof r.target, "mean KL <= 0.0001");
    r.plan_kl_target = 1e-4, r.plan_bits_budget = NAN;
    r.plan_pred_kl = 5e-5, r.plan_kl = 1.8e-4, r.plan_kl_se = 6e-5;
    qs_figure *f = qs_plot_sensitivity(&r);
    assert_non_null(f);
    qs_plot_resolve(f);
    qs_measure m = px_measure();
    qs_layout Lo;
    qs_plot_layout(f, 1000, 600, &m, &Lo);
    /* x: one tick per site, at the cell centre, named */
    assert_int_equal(Lo.xt.n, S);
    for (int i = 0; i < S; i++) {
        assert_true(fabs(Lo.xt.t[i].v - (i + 0.5)) < 1e-9);
        assert_string_equal(Lo.xt.t[i].label, sites[i]);
    }
    assert_null(strstr(f->x.title, "0 attn_in"));
    /* y: layer numbers at cell centres, every label a layer that exists */
    assert_true(Lo.yt.n >= 3);
    for (int i = 0; i < Lo.yt.n; i++) {
        double c = Lo.yt.t[i].v - 0.5;
        assert_true(fabs(c - floor(c)) < 1e-9);
        char want[16];
        snprintf(want, sizeof want, "%.0f", c);
        assert_string_equal(Lo.yt.t[i].label, want);
        assert_true(c >= 0 && c <= L - 1);
    }
    /* the footnote: the target, the measured KL with its SE as `llm sensitivity` prints them, and
    ** that the measured KL is above the target */
    assert_non_null(strstr(f->note, "mean KL <= 0.0001"));
    assert_non_null(strstr(f->note, "mean KL <= 0.0001 (missed: measured KL 0.00018±6.0e-05)"));
    qs_fig_free(f);
    r.plan_kl = 9e-5;
    f = qs_plot_sensitivity(&r);
    assert_non_null(f);
    assert_non_null(strstr(f->note, "mean KL <= 0.0001 (met: measured KL 9.0e-05±6.0e-05)"));
    qs_fig_free(f);
}

/* issue 28: the RL plot drew `llm score` runs (x = prompt index, no training) and GRPO runs (x =
** training step) on one "step" axis */
static void test_rl_runs_axis_kinds(void **st)
{
    (void)st;
    assert_int_equal(qs_rl_run_xkind("{\"generator\":\"qscope llm score\",\"tool_version\":\"0\"}"), QS_RL_X_PROMPT);
    assert_int_equal(qs_rl_run_xkind("{}"), QS_RL_X_STEP);
    assert_int_equal(qs_rl_run_xkind(NULL), QS_RL_X_STEP);
    assert_int_equal(qs_rl_run_xkind("{\"generator\":\"an importer\"}"), QS_RL_X_STEP);
    assert_int_equal(qs_rl_run_xkind("not json"), QS_RL_X_STEP);
    const double x[] = {0, 1, 2}, y[] = {0.1, 0.2, 0.3};
    qs_line_data d[3] = {{"grpo-a", 3, x, y}, {"llm:score", 3, x, y}, {"grpo-b", 3, x, y}};
    qs_rl_xkind k[3] = {QS_RL_X_STEP, QS_RL_X_PROMPT, QS_RL_X_STEP};
    qs_figure *f = qs_plot_rl_runs("t", "k3", QS_AX_LOG10, d, k, 3, QS_RL_X_STEP);
    assert_non_null(f);
    assert_int_equal(f->nseries, 2);
    assert_string_equal(f->series[0].name, "grpo-a");
    assert_string_equal(f->series[1].name, "grpo-b");
    assert_string_equal(f->x.title, "training step");
    assert_string_equal(f->note, "1 llm score run not drawn: their x is the prompt, not a training step");
    qs_fig_free(f);
    f = qs_plot_rl_runs("t", "k3", QS_AX_LOG10, d, k, 3, QS_RL_X_PROMPT);
    assert_non_null(f);
    assert_int_equal(f->nseries, 1);
    assert_string_equal(f->series[0].name, "llm:score");
    assert_string_equal(f->x.title, "prompt (llm score: no training)");
    assert_non_null(strstr(f->note, "2 training runs not drawn"));
    qs_fig_free(f);
}

/* the stored x-axis title is the one every reader shows (report, `plot attn`, workbench): the attn
** figure said "tokens" in the report and "keys" in the workbench */
static void test_lines_json_stored_xlabel(void **st)
{
    (void)st;
    const char *kinds[] = {"attn", "msd", "trajectory", "resq"};
    for (int k = 0; k < 4; k++) {
        qs_err e = {{0}};
        qs_figure *f = qs_plot_lines_json(kinds[k], "{\"xlabel\": \"sequence length (keys)\", \"ylabel\": \"err\","
                                          " \"series\": [{\"name\": \"a\", \"x\": [256, 512], \"y\": [0.1, 0.2]}]}", NULL, &e);
        assert_non_null(f);
        assert_string_equal(f->x.title, "sequence length (keys)");
        qs_fig_free(f);
    }
}

/* The note under a figure: its parts in one order, "; " apart, cut at the buffer's end; same_at marks
** where the coinciding series start (the PNG renderer shortens that part to fit). */
static void test_note_parts(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("n");
    snprintf(f->note, sizeof f->note, "%s", "own note");
    f->skipped_x = 3;
    f->skipped_y = 1;
    qs_layout L;
    memset(&L, 0, sizeof L);
    L.nleg = 2;
    L.leg_total = 5;
    char out[400];
    size_t at;
    qs_plot_note(f, &L, &(qs_note_parts){.log_words = " (log scale)", .same = "a = b"}, out, sizeof out, &at);
    assert_string_equal(out, "own note; 3 points with x <= 0 not shown (log scale); legend: the first 2 of 5 series; "
                             "1 points with y <= 0 not shown (log scale); on top of each other (same points): a = b");
    assert_string_equal(out + at, "; on top of each other (same points): a = b");
    qs_plot_note(f, &L, &(qs_note_parts){.hidden = "s1", .unlabelled = "p, q"}, out, sizeof out, &at);
    assert_string_equal(out, "own note; 3 points with x <= 0 not shown; legend: the first 2 of 5 series; s1 mostly hidden by "
                             "other series (same cells at this size); no room for the labels of p, q; 1 points with y <= 0 "
                             "not shown");
    assert_true(at == SIZE_MAX);
    char small[20];
    qs_plot_note(f, &L, &(qs_note_parts){.same = "a = b"}, small, sizeof small, &at);
    assert_string_equal(small, "own note; 3 points ");   /* cut, and nothing after the cut */
    assert_true(at == SIZE_MAX);
    f->note[0] = 0;
    f->skipped_x = f->skipped_y = 0;
    L.leg_total = 2;
    qs_plot_note(f, &L, &(qs_note_parts){0}, out, sizeof out, NULL);
    assert_string_equal(out, "");
    qs_fig_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_ticks_125),
        cmocka_unit_test(test_sensitivity_heatmap_axes),
        cmocka_unit_test(test_rl_runs_axis_kinds),
        cmocka_unit_test(test_fewer_ticks_when_crowded),
        cmocka_unit_test(test_log_ticks),
        cmocka_unit_test(test_symlog),
        cmocka_unit_test(test_log_axis_skips_zeros_and_negatives),
        cmocka_unit_test(test_ranges_and_margins),
        cmocka_unit_test(test_empty_and_nonfinite),
        cmocka_unit_test(test_layout_legend_outside),
        cmocka_unit_test(test_pareto_front),
        cmocka_unit_test(test_format_grid),
        cmocka_unit_test(test_transfer_and_hist_kinds),
        cmocka_unit_test(test_log_ticks_cover_data),
        cmocka_unit_test(test_stored_yscale),
        cmocka_unit_test(test_whole_x_integer_ticks),
        cmocka_unit_test(test_lines_json_stored_xlabel),
        cmocka_unit_test(test_note_parts),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    qs_plot_cairo_release();
    return rc;
}
