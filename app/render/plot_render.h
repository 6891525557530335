/*
** Renderers of the plot model (analysis/plot.h).
**
** PNG (app/render/plot_png.c): qs_plot_draw() turns a laid-out figure into path, text and image calls on a
** small vector backend (qs_rbackend, pixels, origin top-left), implemented with cairo; the pixels
** are then written with libpng, with tEXt provenance chunks and a pHYs chunk for the DPI.  Another
** rasteriser only has to fill in a qs_rbackend.
**
** Terminal (app/render/plot_term.c): the same figure in character cells, braille (2x4 dots per cell),
** half blocks (1x2) or plain ASCII, series told apart by glyphs as well as colours.
*/
#ifndef QS_PLOT_RENDER_H
#define QS_PLOT_RENDER_H

#include <stdint.h>
#include <stdio.h>

#include "../../analysis/plot.h"
#include "../../kernels/qs_err.h"

/* Where a picture came from, written into the PNG as text chunks (NULL fields are left out):
**   Software "qscope VERSION", qscope:command, qscope:database, qscope:tensor-hashes,
**   qscope:formats, qscope:options */
typedef struct qs_provenance {
    const char *command, *database, *tensor_hashes, *formats, *options;
} qs_provenance;

/* ---- the vector backend ---- */
typedef struct qs_rbackend {
    void *ctx;
    void (*color)(void *ctx, double r, double g, double b, double a);
    /* width in pixels; dash lengths in pixels (ndash 0 = solid) */
    void (*line_style)(void *ctx, double width, const double *dash, int ndash);
    void (*move_to)(void *ctx, double x, double y);
    void (*line_to)(void *ctx, double x, double y);
    void (*close_path)(void *ctx);
    void (*stroke)(void *ctx);
    void (*fill)(void *ctx);          /* fills and clears the path */
    void (*clip)(void *ctx, double x, double y, double w, double h);   /* w <= 0: no clipping */
    /* text: width in pixels at font size `size`; drawing left-aligned at x with the vertical centre
    ** of the line at y; rotate = 1 turns it 90 degrees counter-clockwise (running upwards from x, y) */
    double (*text_width)(void *ctx, const char *s, double size, int bold);
    void (*text)(void *ctx, double x, double y, const char *s, double size, int bold, int rotate);
    /* an RGB image of cols x rows cells stretched over the rectangle, without smoothing */
    void (*image)(void *ctx, double x, double y, double w, double h, const uint8_t *rgb, int cols, int rows);
} qs_rbackend;

/* Resolve, lay out and draw a figure on a W x H pixel backend; scale = dpi / 100.  The layout
** used is copied to *out when out is not NULL (hit-testing, tests). */
void qs_plot_draw(qs_figure *f, const qs_rbackend *b, double W, double H, double scale, qs_layout *out);

/* ---- PNG ---- */
#define QS_PLOT_FONT_FACE "DejaVu Sans"
#define QS_PLOT_FONT_FILE "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

typedef struct qs_png_opts {
    int width, height;   /* pixels; 0 = the figure's hint, else 10 x 6 inches at the dpi */
    double dpi;          /* 0 = 100 */
} qs_png_opts;

/* Render with cairo into RGB bytes (W*H*3, row-major); the layout to *L when not NULL. */
int qs_plot_rgb(qs_figure *f, int W, int H, double dpi, uint8_t **rgb, qs_layout *L, qs_err *e);
/* Write RGB rows with libpng: pHYs for the dpi, text chunks for the provenance.  Written to a
** temporary file and renamed, so a failed write never leaves a partial PNG. */
int qs_png_write_rgb(const char *path, const uint8_t *rgb, int W, int H, double dpi, const qs_provenance *p,
                     qs_err *e);
/* Both, with the size rules of qs_png_opts. */
int qs_plot_png(qs_figure *f, const qs_png_opts *o, const qs_provenance *p, const char *path, qs_err *e);
/* Release cairo's process-wide caches once no cairo object is alive (keeps LeakSanitizer quiet).
** Registered with atexit() by the first render; call it earlier to free the memory sooner. */
void qs_plot_cairo_release(void);
/* The pinned font is installed (fonts-dejavu-core). */
int qs_plot_font_ok(qs_err *e);

/* ---- terminal ---- */
typedef enum qs_term_mode { QS_TERM_AUTO = 0, QS_TERM_BRAILLE, QS_TERM_BLOCK, QS_TERM_ASCII } qs_term_mode;

typedef struct qs_term_opts {
    int cols, rows;      /* character cells (0 = 100 x 30) */
    qs_term_mode mode;   /* AUTO: braille when the locale's codeset is UTF-8, else ASCII */
    int color;           /* emit ANSI colours (the caller checks the terminal and NO_COLOR) */
} qs_term_opts;

qs_term_mode qs_term_mode_auto(void);
int qs_term_mode_parse(const char *s, qs_term_mode *m);
int qs_plot_term(qs_figure *f, const qs_term_opts *o, FILE *out, qs_err *e);

#endif
