/*
** The plot renderers (app/render/plot_png.c, plot_term.c): the PNG writer read back with libpng (size, pHYs,
** text chunks), pixel checks, golden images with a tolerance, the terminal renderer, and what both
** do with many series, exponents, long titles, point labels and notes.
**
** Goldens: tests/fixtures/plots/NAME.png; regenerate with
**   make build/tests/test_plot_render && (cd tests && QS_PLOT_REGEN=1 ../build/tests/test_plot_render)
** and look at them before committing.
*/
#include "test_util.h"

#include <math.h>
#include <png.h>

#include "../../analysis/plot.h"
#include "../../app/render/plot_render.h"

/* ---------------- PNG ---------------- */

typedef struct img {
    int w, h;
    double dpi;
    uint8_t *rgb;
    int ntext;
    char keys[16][80];
    char vals[16][512];
} img;

static int read_png(const char *path, img *im)
{
    memset(im, 0, sizeof *im);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) { png_destroy_read_struct(&png, &info, NULL); fclose(fp); return -1; }
    png_init_io(png, fp);
    png_read_png(png, info, PNG_TRANSFORM_STRIP_16 | PNG_TRANSFORM_STRIP_ALPHA | PNG_TRANSFORM_PACKING, NULL);
    im->w = (int)png_get_image_width(png, info);
    im->h = (int)png_get_image_height(png, info);
    png_uint_32 rx, ry;
    int unit;
    if (png_get_pHYs(png, info, &rx, &ry, &unit) && unit == PNG_RESOLUTION_METER) im->dpi = rx * 0.0254;
    png_textp txt;
    int nt = 0;
    png_get_text(png, info, &txt, &nt);
    for (int i = 0; i < nt && i < 16; i++) {
        snprintf(im->keys[i], sizeof im->keys[i], "%s", txt[i].key);
        snprintf(im->vals[i], sizeof im->vals[i], "%s", txt[i].text);
    }
    im->ntext = nt;
    assert_int_equal(png_get_color_type(png, info), PNG_COLOR_TYPE_RGB);
    png_bytepp rows = png_get_rows(png, info);
    im->rgb = malloc((size_t)im->w * (size_t)im->h * 3);
    for (int y = 0; y < im->h; y++) memcpy(im->rgb + (size_t)y * (size_t)im->w * 3, rows[y], (size_t)im->w * 3);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(fp);
    return 0;
}

static const char *img_text(const img *im, const char *key)
{
    for (int i = 0; i < im->ntext; i++) if (!strcmp(im->keys[i], key)) return im->vals[i];
    return NULL;
}

static qs_figure *sample_lines(void)
{
    qs_figure *f = qs_fig_new("sine and ramp");
    double x[200], y1[200], y2[200];
    for (int i = 0; i < 200; i++) {
        x[i] = i / 20.0;
        y1[i] = sin(x[i]);
        y2[i] = x[i] / 10 - 0.5;
    }
    qs_fig_add(f, QS_SER_LINE, "sin(x)", x, y1, 200)->marker = QS_MK_NONE;
    qs_fig_add(f, QS_SER_LINE, "ramp", x, y2, 200)->marker = QS_MK_NONE;
    qs_axis_set(&f->x, QS_AX_LINEAR, "x (rad)");
    qs_axis_set(&f->y, QS_AX_LINEAR, "value");
    return f;
}

static void test_png_readback(void **st)
{
    (void)st;
    qs_figure *f = sample_lines();
    qs_provenance p = {"qscope plot x -o 'a b.png'", "data/q.db", "t=0123456789abcdef0123456789abcdef", "mxfp4,nvfp4",
                       "{\"formats\":[]}"};
    qs_png_opts o = {640, 400, 150};
    qs_err e = {{0}};
    const char *path = "test_plot_readback.png";
    assert_int_equal(qs_plot_png(f, &o, &p, path, &e), 0);
    img im;
    assert_int_equal(read_png(path, &im), 0);
    assert_int_equal(im.w, 640);
    assert_int_equal(im.h, 400);
    assert_true(fabs(im.dpi - 150) < 0.05);
    char sw[64];
    snprintf(sw, sizeof sw, "qscope %s", QS_VERSION);
    assert_string_equal(img_text(&im, "Software"), sw);
    assert_string_equal(img_text(&im, "qscope:command"), p.command);
    assert_string_equal(img_text(&im, "qscope:database"), p.database);
    assert_string_equal(img_text(&im, "qscope:tensor-hashes"), p.tensor_hashes);
    assert_string_equal(img_text(&im, "qscope:formats"), p.formats);
    assert_string_equal(img_text(&im, "qscope:options"), p.options);
    free(im.rgb);
    /* non-Latin-1 text goes into iTXt and still reads back; missing fields are left out */
    qs_provenance p2 = {"qscope plot --title 'λ → ∞'", NULL, NULL, NULL, NULL};
    o.dpi = 0;
    assert_int_equal(qs_plot_png(f, &o, &p2, path, &e), 0);
    assert_int_equal(read_png(path, &im), 0);
    assert_true(fabs(im.dpi - 100) < 0.05);
    assert_string_equal(img_text(&im, "qscope:command"), p2.command);
    assert_null(img_text(&im, "qscope:database"));
    assert_int_equal(im.ntext, 2);
    free(im.rgb);
    remove(path);
    /* an unwritable path fails cleanly */
    assert_int_equal(qs_plot_png(f, &o, &p, "/nonexistent-dir/x.png", &e), -1);
    assert_non_null(strstr(e.msg, "/nonexistent-dir/x.png"));
    qs_fig_free(f);
}

static int near_rgb(const uint8_t *px, const double c[3], int tol)
{
    for (int k = 0; k < 3; k++)
        if (abs((int)px[k] - (int)lround(c[k] * 255)) > tol) return 0;
    return 1;
}

static void test_png_pixels(void **st)
{
    (void)st;
    /* one thick line in palette colour 0 across the data: its pixels are inside the data area
    ** (or in the legend sample), everything far from text is background */
    qs_figure *f = qs_fig_new("pixels");
    const double x[] = {0, 1, 2, 3}, y[] = {0, 3, 1, 2};
    qs_series *s = qs_fig_add(f, QS_SER_LINE, "data", x, y, 4);
    s->width = 4;
    s->marker = QS_MK_NONE;
    s->color = 0;
    int W = 600, H = 400;
    uint8_t *rgb;
    qs_layout L;
    qs_err e = {{0}};
    assert_int_equal(qs_plot_rgb(f, W, H, 100, &rgb, &L, &e), 0);
    double blue[3];
    qs_palette_rgb(0, blue);
    int inside = 0, outside = 0;
    for (int py = 0; py < H; py++)
        for (int px = 0; px < W; px++) {
            const uint8_t *p = rgb + ((size_t)py * (size_t)W + (size_t)px) * 3;
            if (!near_rgb(p, blue, 40)) continue;
            int in_plot = px >= L.plot.x && px <= L.plot.x + L.plot.w && py >= L.plot.y && py <= L.plot.y + L.plot.h;
            int in_leg = px >= L.legend.x && px <= L.legend.x + L.legend.w && py >= L.legend.y && py <= L.legend.y + L.legend.h;
            if (in_plot) inside++;
            else if (!in_leg) outside++;
        }
    assert_true(inside > 500);
    assert_int_equal(outside, 0);
    /* the data pass through the points: pixel at (1, 3) is the line colour */
    int cx = (int)lround(qs_layout_px(&L, f, 1)), cy = (int)lround(qs_layout_py(&L, f, 3));
    assert_true(near_rgb(rgb + ((size_t)cy * (size_t)W + (size_t)cx) * 3, blue, 40));
    /* background: the corners, and a spot inside the data area away from the line */
    const double white[3] = {1, 1, 1};
    assert_true(near_rgb(rgb, white, 0));
    assert_true(near_rgb(rgb + ((size_t)(H - 1) * (size_t)W + (size_t)(W - 1)) * 3, white, 0));
    int bx = (int)lround(qs_layout_px(&L, f, 0.3)), by = (int)lround(qs_layout_py(&L, f, 2.5));
    const uint8_t *bp = rgb + ((size_t)by * (size_t)W + (size_t)bx) * 3;
    assert_true(bp[0] >= 225 && bp[1] >= 225 && bp[2] >= 225);   /* white or light grid */
    /* the legend is outside the data area */
    assert_true(L.legend.x >= L.plot.x + L.plot.w);
    free(rgb);
    qs_fig_free(f);
}

/* golden images: mean absolute difference and the share of clearly different pixels */
static void golden(const char *name, qs_figure *f, int W, int H)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/plots/%s.png", name);
    qs_err e = {{0}};
    const char *regen = getenv("QS_PLOT_REGEN");
    if (regen && *regen && strcmp(regen, "0")) {
        qs_png_opts o = {W, H, 100};
        qs_provenance p = {"tests/unit/test_plot.c golden", NULL, NULL, NULL, NULL};
        assert_int_equal(qs_plot_png(f, &o, &p, path, &e), 0);
        fprintf(stderr, "# wrote %s\n", path);
        return;
    }
    uint8_t *rgb;
    assert_int_equal(qs_plot_rgb(f, W, H, 100, &rgb, NULL, &e), 0);
    img im;
    if (read_png(path, &im)) fail_msg("missing golden %s (QS_PLOT_REGEN=1 writes it)", path);
    assert_int_equal(im.w, W);
    assert_int_equal(im.h, H);
    double sum = 0;
    size_t bad = 0, n = (size_t)W * (size_t)H;
    for (size_t i = 0; i < n; i++) {
        int dmax = 0;
        for (int k = 0; k < 3; k++) {
            int d = abs((int)rgb[3 * i + (size_t)k] - (int)im.rgb[3 * i + (size_t)k]);
            sum += d;
            if (d > dmax) dmax = d;
        }
        if (dmax > 64) bad++;
    }
    double mad = sum / (3.0 * (double)n), frac = (double)bad / (double)n;
    if (mad > 1.5 || frac > 0.01)
        fail_msg("%s differs from its golden: mean |diff| %.3f, %.3f%% pixels off by > 64", name, mad, 100 * frac);
    free(rgb);
    free(im.rgb);
}

static void test_golden_images(void **st)
{
    (void)st;
    qs_figure *f = sample_lines();
    golden("lines", f, 480, 300);
    qs_fig_free(f);
    uint64_t c1[12], c2[12];
    for (int i = 0; i < 12; i++) { c1[i] = (uint64_t)(1000 * exp(-(i - 5) * (i - 5) / 6.0)); c2[i] = (uint64_t)(300 * exp(-(i - 7) * (i - 7) / 4.0)); }
    qs_hist h1 = {0, 12, -12, 0, c1, 0, 0, 0, 0}, h2 = {0, 12, -12, 0, c2, 0, 0, 0, 0};
    const qs_hist *hp[2] = {&h1, &h2};
    const char *names[2] = {"mxfp4", "nvfp4"};
    f = qs_plot_err_hist("error histogram", NULL, 2, names, hp);
    golden("err_hist", f, 480, 300);
    qs_fig_free(f);
    float v[8 * 16];
    for (int i = 0; i < 128; i++) v[i] = (float)exp2((i % 16) / 4.0 + (i / 16) / 8.0);
    f = qs_plot_block_heatmap("heatmap", v, 8, 16, 1, "block RMSE", "block", "row", 64);
    golden("heatmap", f, 480, 300);
    qs_fig_free(f);
}

/* ---------------- terminal ---------------- */

static char *term(qs_figure *f, qs_term_mode mode, int color, int cols, int rows)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    qs_term_opts o = {cols, rows, mode, color};
    qs_err e = {{0}};
    assert_int_equal(qs_plot_term(f, &o, m, &e), 0);
    fclose(m);
    return buf;
}

static void test_terminal(void **st)
{
    (void)st;
    qs_figure *f = sample_lines();
    char *b = term(f, QS_TERM_BRAILLE, 0, 80, 24);
    int lines = 0, maxw = 0, braille = 0, w = 0;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++) {
        if (*p == '\n') { lines++; if (w > maxw) maxw = w; w = 0; continue; }
        if ((*p & 0xC0) != 0x80) w++;
        if (p[0] == 0xE2 && (p[1] == 0xA0 || p[1] == 0xA1 || p[1] == 0xA2 || p[1] == 0xA3)) braille++;
    }
    assert_true(lines <= 24);
    assert_true(maxw <= 80);
    assert_true(braille > 40);
    assert_non_null(strstr(b, "sin(x)"));
    assert_non_null(strstr(b, "●─ sin(x)"));     /* distinct glyphs in the legend */
    assert_non_null(strstr(b, "■─ ramp"));
    assert_non_null(strstr(b, "x (rad)"));
    assert_null(strchr(b, '\033'));
    free(b);
    b = term(f, QS_TERM_ASCII, 0, 80, 24);
    for (const unsigned char *p = (const unsigned char *)b; *p; p++) assert_true(*p == '\n' || (*p >= 32 && *p < 127));
    assert_non_null(strstr(b, "-o- sin(x)"));
    assert_non_null(strstr(b, "-#- ramp"));
    free(b);
    b = term(f, QS_TERM_BLOCK, 1, 80, 24);
    assert_non_null(strchr(b, '\033'));
    free(b);
    qs_fig_free(f);
    /* log axis with exponent labels typeset as superscripts */
    f = qs_fig_new("log");
    const double x[] = {1, 10, 100, 1e4, 1e6}, y[] = {1, 2, 3, 4, 5};
    qs_fig_add(f, QS_SER_LINE, "s", x, y, 5);
    f->x.scale = QS_AX_LOG10;
    b = term(f, QS_TERM_BRAILLE, 0, 80, 20);
    assert_non_null(strstr(b, "10⁴"));
    free(b);
    qs_err e = {{0}};
    qs_term_opts o = {10, 5, QS_TERM_ASCII, 0};
    assert_int_equal(qs_plot_term(f, &o, stdout, &e), -1);   /* too small: an error, not garbage */
    qs_fig_free(f);
}

/* ---------------- both renderers ---------------- */

/* more series than colours or marker shapes stay distinguishable: in the PNG no two series
** share colour and marker; in the terminal (no colour) each has its own legend glyph */
static void test_many_series_distinct(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("twelve");
    for (int k = 0; k < 12; k++) {
        double x[3] = {1, 2, 3}, y[3] = {k + 1.0, k + 1.5, k + 2.0};
        char nm[16];
        snprintf(nm, sizeof nm, "series%02d", k);
        qs_fig_add(f, QS_SER_LINE, nm, x, y, 3);
    }
    for (size_t i = 0; i < f->nseries; i++)
        for (size_t j = i + 1; j < f->nseries; j++)
            if (f->series[i].color == f->series[j].color && f->series[i].marker == f->series[j].marker)
                fail_msg("series %zu and %zu share colour and marker", i, j);
    char *b = term(f, QS_TERM_BRAILLE, 0, 100, 40);
    char seen[12][8];
    int n = 0;
    for (int k = 0; k < 12; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, " series%02d", k);
        const char *p = strstr(b, nm);
        assert_non_null(p);
        /* the legend sample "─G─" precedes the name: the glyph is the UTF-8 character before "─ " */
        const char *q = p - strlen("─");
        const char *g = q - 1;
        while (g > b && (*(const unsigned char *)g & 0xC0) == 0x80) g--;
        snprintf(seen[n], sizeof seen[n], "%.*s", (int)(q - g), g);
        for (int i = 0; i < n; i++)
            if (!strcmp(seen[i], seen[n])) fail_msg("series %d and %d share the legend glyph %s", i, n, seen[n]);
        n++;
    }
    free(b);
    /* a deep copy draws the same (the workbench keeps its value histogram and draws copies) */
    qs_figure *c = qs_fig_clone(f);
    assert_non_null(c);
    assert_int_equal(c->nseries, f->nseries);
    assert_true(c->series[3].x != f->series[3].x && c->series[3].y[2] == f->series[3].y[2]);
    assert_string_equal(c->series[11].name, "series11");
    b = term(f, QS_TERM_ASCII, 0, 100, 40);
    char *b2 = term(c, QS_TERM_ASCII, 0, 100, 40);
    assert_string_equal(b, b2);
    free(b);
    free(b2);
    qs_fig_free(c);
    qs_fig_free(f);
    /* more series than legend entries: the note says how many are listed */
    f = qs_fig_new("thirty");
    for (int k = 0; k < 30; k++) {
        double x[2] = {1, 2}, y[2] = {k, k + 1.0};
        char nm[16];
        snprintf(nm, sizeof nm, "s%02d", k);
        qs_fig_add(f, QS_SER_LINE, nm, x, y, 2);
    }
    b = term(f, QS_TERM_ASCII, 0, 120, 40);
    assert_non_null(strstr(b, "legend: the first 24 of 30 series"));
    free(b);
    qs_fig_free(f);
}


/* a backend that records the text it is asked to draw */
typedef struct { char s[16][64]; double size[16]; int n; } rec_text;
static void rt_color(void *c, double r, double g, double b, double a) { (void)c; (void)r; (void)g; (void)b; (void)a; }
static void rt_style(void *c, double w, const double *d, int n) { (void)c; (void)w; (void)d; (void)n; }
static void rt_xy(void *c, double x, double y) { (void)c; (void)x; (void)y; }
static void rt_void(void *c) { (void)c; }
static void rt_clip(void *c, double x, double y, double w, double h) { (void)c; (void)x; (void)y; (void)w; (void)h; }
static double rt_w(void *c, const char *s, double size, int bold) { (void)c; (void)bold; return 0.6 * size * (double)strlen(s); }
static void rt_text(void *c, double x, double y, const char *s, double size, int bold, int rotate)
{
    (void)x; (void)y; (void)bold; (void)rotate;
    rec_text *r = c;
    if (r->n < 16 && size != 12) { snprintf(r->s[r->n], 64, "%s", s); r->size[r->n] = size; r->n++; }   /* not tick labels */
}
static void rt_image(void *c, double x, double y, double w, double h, const uint8_t *rgb, int cols, int rows)
{ (void)c; (void)x; (void)y; (void)w; (void)h; (void)rgb; (void)cols; (void)rows; }

static void test_exponent_markup(void **st)
{
    (void)st;
    size_t c, e0, e1, end;
    const char *s = "mean(e^d - 1 - d)";
    assert_int_equal(qs_text_exponent(s, &c, &e0, &e1, &end), 1);
    assert_int_equal(c, 6);
    assert_int_equal(e1 - e0, 1);          /* only "d" is raised, not the rest of the title */
    assert_int_equal(s[e0], 'd');
    assert_int_equal(end, 8);
    assert_int_equal(qs_text_exponent("2^-8 and 10^4", &c, &e0, &e1, &end), 1);
    assert_int_equal(e1 - e0, 2);
    assert_int_equal(qs_text_exponent("M/(2L E^(k-1))", &c, &e0, &e1, &end), 1);
    assert_int_equal(e1 - e0, 5);          /* "(k-1)" */
    assert_int_equal(qs_text_exponent("x - x^ here", &c, &e0, &e1, &end), 0);   /* a lone caret is literal */
    assert_int_equal(qs_text_exponent("2^24.", &c, &e0, &e1, &end), 1);
    assert_int_equal(e1 - e0, 2);          /* the full stop stays down */

    /* the PNG renderer raises only the exponent: the title is drawn as "KL k3 = mean(e", small "d",
    ** then " - 1 - d)" at the title size again */
    qs_figure *f = qs_fig_new("KL k3 = mean(e^d - 1 - d)");
    const double x[] = {0, 1}, y[] = {0, 1};
    qs_fig_add(f, QS_SER_LINE, NULL, x, y, 2);
    rec_text r;
    memset(&r, 0, sizeof r);
    qs_rbackend b = {.ctx = &r, .color = rt_color, .line_style = rt_style, .move_to = rt_xy, .line_to = rt_xy,
                     .close_path = rt_void, .stroke = rt_void, .fill = rt_void, .clip = rt_clip,
                     .text_width = rt_w, .text = rt_text, .image = rt_image};
    qs_plot_draw(f, &b, 800, 500, 1, NULL);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.s[0], "KL k3 = mean(e");
    assert_string_equal(r.s[1], "d");
    assert_true(r.size[1] < r.size[0]);
    assert_string_equal(r.s[2], " - 1 - d)");
    assert_true(r.size[2] == r.size[0]);
    /* the terminal: "eᵈ - 1 - d", nothing else raised; ASCII keeps the caret */
    char *t = term(f, QS_TERM_BRAILLE, 0, 80, 20);
    assert_non_null(strstr(t, "KL k3 = mean(eᵈ - 1 - d)"));
    free(t);
    t = term(f, QS_TERM_ASCII, 0, 80, 20);
    assert_non_null(strstr(t, "KL k3 = mean(e^d - 1 - d)"));
    free(t);
    qs_fig_free(f);
}

/* PNG: series drawn on the same pixels as an earlier one are named in the note (e.g. four
** attention kernels on one line, the INT8 max-error curve on an RMS curve); a series 2 px apart is not */
static char note_rec[2048];
static void rt_text_all(void *c, double x, double y, const char *s, double size, int bold, int rotate)
{
    (void)c; (void)x; (void)y; (void)size; (void)bold; (void)rotate;
    size_t l = strlen(note_rec);
    snprintf(note_rec + l, sizeof note_rec - l, "%s\n", s);
}

static void test_png_notes_coinciding_series(void **st)
{
    (void)st;
    qs_figure *f = qs_fig_new("coinciding");
    const double x[] = {1, 2, 3}, a[] = {8, 16, 24}, b[] = {8, 16, 24.0001}, c[] = {7, 15, 23}, d[] = {8, 16.4, 24};
    qs_fig_add(f, QS_SER_LINE, "A", x, a, 3);
    qs_fig_add(f, QS_SER_LINE, "C", x, c, 3);
    qs_fig_add(f, QS_SER_LINE, "B", x, b, 3);
    qs_fig_add(f, QS_SER_LINE, "D", x, d, 3);   /* 0.4 of 17 units over ~400 px: ~9 px off at x = 2 */
    memset(note_rec, 0, sizeof note_rec);
    qs_rbackend bk = {.ctx = NULL, .color = rt_color, .line_style = rt_style, .move_to = rt_xy, .line_to = rt_xy,
                      .close_path = rt_void, .stroke = rt_void, .fill = rt_void, .clip = rt_clip,
                      .text_width = rt_w, .text = rt_text_all, .image = rt_image};
    qs_layout L;
    qs_plot_draw(f, &bk, 800, 500, 1, &L);
    assert_true(L.note_y > 0);
    assert_non_null(strstr(note_rec, "on top of each other (same points): A = B\n"));
    assert_null(strstr(note_rec, "= D"));
    assert_null(strstr(note_rec, "= C"));
    qs_fig_free(f);
    /* no coincidence, no note */
    f = qs_fig_new("apart");
    qs_fig_add(f, QS_SER_LINE, "A", x, a, 3);
    qs_fig_add(f, QS_SER_LINE, "C", x, c, 3);
    memset(note_rec, 0, sizeof note_rec);
    qs_plot_draw(f, &bk, 800, 500, 1, &L);
    assert_null(strstr(note_rec, "on top of each other"));
    qs_fig_free(f);
}

/* Titles and notes longer than their fixed-size fields never end inside a UTF-8 character
** (cairo refuses such text and the whole plot would fail). */
static void test_long_multibyte_titles(void **st)
{
    (void)st;
    char t[601];
    for (int i = 0; i < 300; i++) memcpy(t + 2 * i, "\xc3\xa9", 2);   /* 300 x U+00E9 */
    t[600] = 0;
    qs_figure *f = qs_fig_new(t);
    assert_non_null(f);
    qs_axis_set(&f->x, QS_AX_LINEAR, t + 1);   /* odd offset: starts inside a character pair */
    qs_annot *a = qs_fig_annotate(f, 0.5, 0.5, 1, "%s", t);
    assert_non_null(a);
    const char *s[3] = {f->title, f->x.title + 0, a->text};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(s[k]), i = 0;
        assert_true(n > 100);
        if (k == 1) i = 1;                      /* the lone continuation byte we passed in */
        for (; i < n; i += 2) {
            assert_true(i + 1 < n);             /* no lead byte without its continuation */
            assert_int_equal((unsigned char)s[k][i], 0xc3);
            assert_int_equal((unsigned char)s[k][i + 1], 0xa9);
        }
    }
    qs_fig_free(f);
}

/* a point label in the terminal never covers the data: every line dot of the Pareto front drawn
** without the labels is still there with them (the demo's gaussian formats at the Formats view's size) */
static int braille_cells(const char *b)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        if (p[0] == 0xE2 && p[1] >= 0xA0 && p[1] <= 0xA3 && !(p[1] == 0xA0 && p[2] == 0x80)) n++;
    return n;
}

static void test_term_point_labels_off_lines(void **st)
{
    (void)st;
    const qs_pareto_pt p[] = {{"bf16", "float", 16, 9.231}, {"fp8_e4m3", "float", 8, 5.236}, {"fp8_e5m2", "float", 8, 4.242},
                              {"hif8", "hifloat", 8, 5.235}, {"mxfp8_e4m3", "mx", 8.25, 5.091}, {"mxfp6_e2m3", "mx", 6.25, 5.140},
                              {"mxfp4", "mx", 4.25, 3.122}, {"nvfp4", "nvfp4", 4.5, 3.395}, {"hif4", "hifloat", 4.5, 3.592},
                              {"m2xfp4", "m2xfp", 4.5, 3.420}, {"int8:row", "int", 8, 6.486}, {"int4:b32", "int", 5, 3.366}};
    int size[40][2] = {{120, 26}, {80, 12}};
    for (int k = 2; k < 40; k++) { size[k][0] = 60 + 8 * (k % 8); size[k][1] = 12 + 3 * (k / 8); }
    for (int k = 0; k < 40; k++) {
        qs_figure *f = qs_plot_pareto("pareto", p, 12);
        assert_non_null(f);
        snprintf(f->note, sizeof f->note, "note");   /* the same layout with and without labels */
        char *with = term(f, QS_TERM_BRAILLE, 0, size[k][0], size[k][1]);
        size_t na = f->nannots;
        f->nannots = 0;
        char *without = term(f, QS_TERM_BRAILLE, 0, size[k][0], size[k][1]);
        f->nannots = na;
        assert_int_equal(braille_cells(with), braille_cells(without));
        free(with);
        f->note[0] = 0;
        with = term(f, QS_TERM_BRAILLE, 0, size[k][0], size[k][1]);
        if (k < 2) assert_non_null(strstr(with, "bf16"));   /* labels still placed where there is room */
        if (k == 0)   /* a label without room is named in the note, never dropped silently */
            for (int i = 0; i < 12; i++) assert_non_null(strstr(with, p[i].name));
        int w = 0;   /* a long note is cut with "...", within the width */
        for (const unsigned char *c = (const unsigned char *)with; *c; c++) {
            if (*c == '\n') { assert_true(w <= size[k][0]); w = 0; }
            else if ((*c & 0xC0) != 0x80) w++;
        }
        free(with);
        free(without);
        qs_fig_free(f);
    }
}

/* a series whose points all fall in the cells of another (two RL runs with nearly the same
** values) is named in the note instead of disappearing under the other's glyphs */
static void test_term_hidden_series_named(void **st)
{
    (void)st;
    const double x[] = {0, 10, 20, 30, 40, 50, 59}, y[] = {0.02, 0.035, 0.05, 0.06, 0.065, 0.068, 0.07};
    double y2[7], y3[7];
    for (int i = 0; i < 7; i++) { y2[i] = y[i] * 1.001; y3[i] = 0; }
    qs_figure *f = qs_fig_new("runs");
    qs_fig_add(f, QS_SER_LINE, "exact", x, y3, 7);
    qs_fig_add(f, QS_SER_LINE, "ais_r", x, y, 7);
    qs_fig_add(f, QS_SER_LINE, "none", x, y2, 7);
    char *b = term(f, QS_TERM_BRAILLE, 0, 100, 30);
    assert_non_null(strstr(b, "▲ none mostly hidden by other series"));
    assert_null(strstr(b, "ais_r mostly"));
    free(b);
    for (int i = 0; i < 7; i++) f->series[2].y[i] = y[i] * 0.5;   /* apart: no note */
    b = term(f, QS_TERM_BRAILLE, 0, 100, 30);
    assert_null(strstr(b, "hidden by other series"));
    free(b);
    qs_fig_free(f);
}

/* a block heatmap with more rows than the terminal has: each character cell is the mean of the
** blocks it covers, so one bad row of blocks is never skipped by sampling (sampling 1024 block
** rows into 22 lines would read one of every 47) */
static void test_term_heatmap_covers_every_row(void **st)
{
    (void)st;
    enum { R = 1024, C = 32 };
    float *v = malloc(R * C * sizeof *v);
    assert_non_null(v);
    for (int bad = 0; bad < 40; bad += 3) {
        for (int i = 0; i < R * C; i++) v[i] = 1;
        for (int c = 0; c < C; c++) v[(size_t)(500 + bad) * C + c] = 1e6f;   /* one row of bad blocks */
        qs_figure *f = qs_plot_block_heatmap("h", v, R, C, 1, "block RMSE", "block", "row", 400);
        assert_non_null(f);
        char *b = term(f, QS_TERM_BRAILLE, 0, 80, 24);
        int dark = 0;   /* data cells darker than the background (not the colour bar): the bad row */
        for (char *line = strtok(b, "\n"); line; line = strtok(NULL, "\n")) {
            char *p = strstr(line, "┤");
            if (!p) p = strstr(line, "│");
            if (!p) continue;
            p += strlen("│");
            char *end = strchr(p, ' ');
            if (end) *end = 0;
            for (const char *q = p; (q = strstr(q, "▒")) != NULL; q++) dark++;
            for (const char *q = p; (q = strstr(q, "▓")) != NULL; q++) dark++;
            for (const char *q = p; (q = strstr(q, "█")) != NULL; q++) dark++;
        }
        assert_true(dark >= C / 2);
        free(b);
        qs_fig_free(f);
    }
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_readback),
        cmocka_unit_test(test_png_pixels),
        cmocka_unit_test(test_golden_images),
        cmocka_unit_test(test_terminal),
        cmocka_unit_test(test_exponent_markup),
        cmocka_unit_test(test_many_series_distinct),
        cmocka_unit_test(test_long_multibyte_titles),
        cmocka_unit_test(test_term_point_labels_off_lines),
        cmocka_unit_test(test_term_hidden_series_named),
        cmocka_unit_test(test_term_heatmap_covers_every_row),
        cmocka_unit_test(test_png_notes_coinciding_series),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    qs_plot_cairo_release();
    return rc;
}
