/*
** Applying a format to a whole tensor (see format_apply.h).
*/
#include "format_apply.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BAND_ELEMS ((size_t)1 << 20)

static const char *const kGran[] = {"block", "tensor", "row", "col"};
const char *qs_gran_name(qs_gran g) { return (unsigned)g < 4 ? kGran[g] : "?"; }
int qs_gran_parse(const char *s, qs_gran *g)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, kGran[i]) == 0) { *g = (qs_gran)i; return 0; }
    return -1;
}

void qs_block_geom_of(const qs_apply *a, uint64_t rows, uint64_t cols, qs_block_geom *g)
{
    memset(g, 0, sizeof *g);
    qs_qopts o = a->o;
    g->whole = a->gran == QS_GRAN_TENSOR;
    g->col = a->gran == QS_GRAN_COL || (a->gran == QS_GRAN_BLOCK && a->axis == 0);
    if (a->gran != QS_GRAN_BLOCK) o.block = 0;
    g->blk = qs_format_block(a->f, &o);
    g->rows = rows;
    g->cols = cols;
    if (g->whole) {
        g->blk = 0;
        g->runlen = rows * cols;
        g->nruns = g->per = g->nblocks = 1;
        return;
    }
    g->runlen = g->col ? rows : cols;
    g->nruns = g->col ? cols : rows;
    g->per = g->blk ? (g->runlen + g->blk - 1) / g->blk : 1;
    g->nblocks = g->per * g->nruns;
}

size_t qs_block_geom_elems(const qs_block_geom *g, uint64_t b, uint64_t *idx, size_t cap, uint64_t *index0)
{
    size_t n = 0;
    if (g->whole) {
        for (uint64_t i = 0; i < g->rows * g->cols && n < cap; i++) idx[n++] = i;
        *index0 = 0;
        return n;
    }
    uint64_t run = b / g->per, k = b % g->per;
    uint64_t p0 = g->blk ? k * g->blk : 0, p1 = g->blk ? p0 + g->blk : g->runlen;
    if (p1 > g->runlen) p1 = g->runlen;
    for (uint64_t p = p0; p < p1 && n < cap; p++) idx[n++] = g->col ? p * g->cols + run : run * g->cols + p;
    *index0 = g->col ? run * g->rows + p0 : run * g->cols + p0;
    return n;
}

uint64_t qs_block_geom_block_of(const qs_block_geom *g, uint64_t i)
{
    if (g->whole) return 0;
    uint64_t r = i / g->cols, c = i % g->cols;
    uint64_t run = g->col ? c : r, p = g->col ? r : c;
    return run * g->per + (g->blk ? p / g->blk : 0);
}

int qs_format_absmax(qs_fa_read rd, void *rctx, uint64_t n, float *amax, qs_err *e)
{
    float *buf = malloc(BAND_ELEMS * sizeof(float));
    if (!buf) return qs_fail(e, "out of memory");
    float m = 0;
    for (uint64_t s = 0; s < n;) {
        size_t k = n - s > BAND_ELEMS ? BAND_ELEMS : (size_t)(n - s);
        if (rd(rctx, s, k, buf, e)) { free(buf); return -1; }
        for (size_t i = 0; i < k; i++) {
            float v = fabsf(buf[i]);
            if (v > m && v != INFINITY) m = v;   /* NaN compares false; Inf is left to its block */
        }
        s += k;
    }
    free(buf);
    *amax = m;
    return 0;
}

int qs_cast_scales(const qs_apply *a, uint64_t rows, uint64_t cols, qs_fa_read rd, void *rctx, float **s, float **inv,
                   size_t *ns, qs_err *e)
{
    *s = *inv = NULL;
    if (!(qs_cast_scale_target(a->f) > 0))
        return qs_fail(e, "format %s takes no scale= (only element casts with a scale target, docs/formats.md)", a->f->name);
    if (a->cscale == QS_CSCALE_COL && rows <= 1) return qs_fail(e, "scale=col needs a 2-D tensor");
    uint64_t n = rows * cols;
    size_t k = a->cscale == QS_CSCALE_ROW ? (size_t)rows : a->cscale == QS_CSCALE_COL ? (size_t)cols : 1;
    float *am = calloc(k + 16, sizeof(float)), *buf = malloc(BAND_ELEMS * sizeof(float));
    *s = calloc(k + 16, sizeof(float));
    *inv = calloc(k + 16, sizeof(float));
    if (!am || !buf || !*s || !*inv) { free(am); free(buf); free(*s); free(*inv); *s = *inv = NULL; return qs_fail(e, "out of memory"); }
    for (uint64_t st = 0; st < n;) {
        size_t m = n - st > BAND_ELEMS ? BAND_ELEMS : (size_t)(n - st);
        if (rd(rctx, st, m, buf, e)) { free(am); free(buf); free(*s); free(*inv); *s = *inv = NULL; return -1; }
        uint64_t r = st / cols, c = st % cols;
        for (size_t i = 0; i < m; i++) {
            size_t slot = a->cscale == QS_CSCALE_ROW ? (size_t)r : a->cscale == QS_CSCALE_COL ? (size_t)c : 0;
            float v = fabsf(buf[i]);
            if (v > am[slot] && v != INFINITY) am[slot] = v;   /* NaN compares false */
            if (++c == cols) { c = 0; r++; }
        }
        st += m;
    }
    for (size_t i = 0; i < k; i++) qs_cast_scale_of(a->f, am[i], *s + i, *inv + i);
    free(am);
    free(buf);
    *ns = k;
    return 0;
}

/* The scales of a run starting at (r, c), a row (colrun 0) or a column: (s, inv, stride). */
static void run_scales(const qs_apply *a, const float *s, const float *inv, uint64_t r, uint64_t c, int colrun,
                       const float **rs, const float **ri, size_t *stride)
{
    size_t k = a->cscale == QS_CSCALE_ROW ? (size_t)r : a->cscale == QS_CSCALE_COL ? (size_t)c : 0;
    *rs = s + k;
    *ri = inv + k;
    *stride = (a->cscale == QS_CSCALE_ROW && colrun) || (a->cscale == QS_CSCALE_COL && !colrun);
}

/* Quantize one run held in memory; index0 keeps stochastic rounding independent of chunking.  A scaled
** cast needs the run's place (r, c) and direction. */
static int run_fakeq(const qs_apply *a, const qs_qopts *o, uint64_t index0, float *x, size_t n, float *y, qs_err *e,
                     const float *s, const float *inv, uint64_t r, uint64_t c, int colrun)
{
    qs_qopts oo = *o;
    oo.index0 = o->index0 + index0;
    if (s) {
        const float *rs, *ri;
        size_t stride;
        run_scales(a, s, inv, r, c, colrun, &rs, &ri, &stride);
        return qs_cast_scaled_apply(a->f, &oo, x, n, rs, ri, stride, y, e);
    }
    return a->f->fakeq(a->f, &oo, x, n, y, e);
}

/* The amax of one run of n values from start, read through buf[0..cap) (qs_format_absmax's rule). */
static int run_amax(qs_fa_read rd, void *rctx, uint64_t start, uint64_t n, float *buf, size_t cap, float *amax, qs_err *e)
{
    float m = 0;
    for (uint64_t s = 0; s < n;) {
        size_t k = n - s > cap ? cap : (size_t)(n - s);
        if (rd(rctx, start + s, k, buf, e)) return -1;
        for (size_t i = 0; i < k; i++) {
            float v = fabsf(buf[i]);
            if (v > m && v != INFINITY) m = v;
        }
        s += k;
    }
    *amax = m;
    return 0;
}

/* Each column's amax (qs_format_absmax's rule) in one pass over the rows. */
static int col_amax(qs_fa_read rd, void *rctx, uint64_t rows, uint64_t cols, float **out, qs_err *e)
{
    float *m = calloc(cols ? cols : 1, sizeof *m), *buf = malloc(BAND_ELEMS * sizeof *buf);
    if (!m || !buf) { free(m); free(buf); return qs_fail(e, "out of memory"); }
    uint64_t n = rows * cols;
    for (uint64_t s = 0; s < n;) {
        size_t k = n - s > BAND_ELEMS ? BAND_ELEMS : (size_t)(n - s);
        if (rd(rctx, s, k, buf, e)) { free(m); free(buf); return -1; }
        uint64_t c = s % cols;
        for (size_t i = 0; i < k; i++) {
            float v = fabsf(buf[i]);
            if (v > m[c] && v != INFINITY) m[c] = v;
            if (++c == cols) c = 0;
        }
        s += k;
    }
    free(buf);
    *out = m;
    return 0;
}

int qs_format_apply(const qs_apply *a, uint64_t rows, uint64_t cols, qs_fa_read rd, void *rctx,
                    qs_fa_write wr, void *wctx, qs_err *e)
{
    qs_qopts o = a->o;
    uint64_t n = rows * cols;
    if (qs_qopts_check(a->f, &o, e)) return -1;
    if (a->f->has_tensor_scale && !(o.tensor_scale > 0)) {
        float amax;
        if (qs_format_absmax(rd, rctx, n, &amax, e)) return -1;
        o.tensor_scale = amax > 0 ? amax : 0;
    }
    if (a->gran != QS_GRAN_BLOCK) {
        if (a->f->block != 0) return qs_fail(e, "format %s has fixed blocks: granularity '%s' needs int8 or int4",
                                             a->f->name, qs_gran_name(a->gran));
        o.block = 0;
    }
    qs_block_geom g;
    qs_block_geom_of(a, rows, cols, &g);
    int col = g.col;
    if (g.whole) { cols = n; rows = n ? 1 : 0; }
    size_t blk = g.blk;
    int rc = -1;
    float *x = NULL, *y = NULL, *cx = NULL, *cy = NULL, *cs = NULL, *ci = NULL, *camax = NULL;
    size_t ncs;
    if (a->cscale && qs_cast_scales(a, rows, cols, rd, rctx, &cs, &ci, &ncs, e)) return -1;
    if (!col) {
        /* Rows are runs; long rows are cut at block boundaries, or, one scale per row (blk == 0),
        ** into pieces quantized under the row's amax found by a first pass over the row. */
        size_t piece = blk ? (BAND_ELEMS / blk) * blk : (size_t)(cols > BAND_ELEMS ? BAND_ELEMS : cols);
        if (piece == 0) piece = blk;
        if (piece > cols) piece = (size_t)cols;
        size_t band_rows = piece == cols && cols ? (size_t)(BAND_ELEMS / cols) : 1;
        if (band_rows == 0) band_rows = 1;
        if (band_rows > rows) band_rows = (size_t)rows;
        size_t cap = band_rows * piece;
        x = malloc((cap ? cap : 1) * sizeof(float));
        y = malloc((cap ? cap : 1) * sizeof(float));
        if (!x || !y) { qs_fail(e, "out of memory (%zu values)", cap); goto out; }
        if (piece == cols) {
            for (uint64_t r = 0; r < rows; r += band_rows) {
                size_t nr = rows - r > band_rows ? band_rows : (size_t)(rows - r);
                uint64_t s = r * cols;
                size_t k = nr * (size_t)cols;
                if (rd(rctx, s, k, x, e)) goto out;
                for (size_t i = 0; i < nr; i++)
                    if (run_fakeq(a, &o, s + i * cols, x + i * cols, (size_t)cols, y + i * cols, e, cs, ci, r + i, 0, 0)) goto out;
                if (wr(wctx, s, k, y, e)) goto out;
            }
        } else {
            for (uint64_t r = 0; r < rows; r++) {
                qs_qopts ro = o;
                if (!blk && run_amax(rd, rctx, r * cols, cols, x, piece, &ro.tensor_scale, e)) goto out;
                for (uint64_t c = 0; c < cols; c += piece) {
                    size_t k = cols - c > piece ? piece : (size_t)(cols - c);
                    uint64_t s = r * cols + c;
                    if (rd(rctx, s, k, x, e) || run_fakeq(a, &ro, s, x, k, y, e, cs, ci, r, c, 0) || wr(wctx, s, k, y, e)) goto out;
                }
            }
        }
    } else {
        /* Columns are runs: bands of `blk` rows; for one scale per column, bands of about BAND_ELEMS
        ** values under each column's amax, found by a first pass. */
        size_t band = blk ? blk : (size_t)(cols && BAND_ELEMS / cols ? BAND_ELEMS / cols : 1);
        if (band > rows) band = (size_t)rows;
        if (!blk && band < rows && col_amax(rd, rctx, rows, cols, &camax, e)) goto out;
        if (band && cols > SIZE_MAX / sizeof(float) / band) { qs_fail(e, "tensor too large"); goto out; }
        size_t cells = band * (size_t)cols;
        x = malloc((cells ? cells : 1) * sizeof(float));
        y = malloc((cells ? cells : 1) * sizeof(float));
        cx = malloc((band ? band : 1) * sizeof(float));
        cy = malloc((band ? band : 1) * sizeof(float));
        if (!x || !y || !cx || !cy) { qs_fail(e, "out of memory"); goto out; }
        for (uint64_t r = 0; r < rows; r += band) {
            size_t nr = rows - r > band ? band : (size_t)(rows - r);
            uint64_t s = r * cols;
            if (rd(rctx, s, nr * (size_t)cols, x, e)) goto out;
            for (uint64_t c = 0; c < cols; c++) {
                for (size_t i = 0; i < nr; i++) cx[i] = x[i * cols + c];
                /* SR counter: column-major position keeps draws distinct and chunk-independent */
                qs_qopts co = o;
                if (camax) co.tensor_scale = camax[c];
                if (run_fakeq(a, &co, c * rows + r, cx, nr, cy, e, cs, ci, r, c, 1)) goto out;
                for (size_t i = 0; i < nr; i++) y[i * cols + c] = cy[i];
            }
            if (wr(wctx, s, nr * (size_t)cols, y, e)) goto out;
        }
    }
    rc = 0;
out:
    free(x); free(y); free(cx); free(cy); free(cs); free(ci); free(camax);
    return rc;
}
