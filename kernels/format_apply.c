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

/* Quantize one run held in memory; index0 keeps stochastic rounding independent of chunking. */
static int run_fakeq(const qs_apply *a, const qs_qopts *o, uint64_t index0, float *x, size_t n, float *y, qs_err *e)
{
    qs_qopts oo = *o;
    oo.index0 = o->index0 + index0;
    return a->f->fakeq(a->f, &oo, x, n, y, e);
}

int qs_format_apply(const qs_apply *a, uint64_t rows, uint64_t cols, qs_fa_read rd, void *rctx,
                    qs_fa_write wr, void *wctx, qs_err *e)
{
    qs_qopts o = a->o;
    uint64_t n = rows * cols;
    if (qs_qopts_check(a->f, &o, e)) return -1;
    if (strcmp(a->f->family, "nvfp4") == 0 && !(o.tensor_scale > 0)) {
        float amax;
        if (qs_format_absmax(rd, rctx, n, &amax, e)) return -1;
        o.tensor_scale = amax > 0 ? amax : 0;
    }
    int whole = a->gran == QS_GRAN_TENSOR, col = a->gran == QS_GRAN_COL || (a->gran == QS_GRAN_BLOCK && a->axis == 0);
    if (a->gran == QS_GRAN_ROW || a->gran == QS_GRAN_COL || whole) {
        if (a->f->block != 0) return qs_fail(e, "format %s has fixed blocks: granularity '%s' needs int8 or int4",
                                             a->f->name, qs_gran_name(a->gran));
        o.block = 0;
    }
    if (whole) { cols = n; rows = n ? 1 : 0; }
    size_t blk = qs_format_block(a->f, &o);
    int rc = -1;
    float *x = NULL, *y = NULL, *cx = NULL, *cy = NULL;
    if (!col) {
        /* Rows are runs; long rows are cut at block boundaries (a whole row when blk == 0). */
        size_t piece = blk ? (BAND_ELEMS / blk) * blk : (size_t)cols;
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
                    if (run_fakeq(a, &o, s + i * cols, x + i * cols, (size_t)cols, y + i * cols, e)) goto out;
                if (wr(wctx, s, k, y, e)) goto out;
            }
        } else {
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t c = 0; c < cols; c += piece) {
                    size_t k = cols - c > piece ? piece : (size_t)(cols - c);
                    uint64_t s = r * cols + c;
                    if (rd(rctx, s, k, x, e) || run_fakeq(a, &o, s, x, k, y, e) || wr(wctx, s, k, y, e)) goto out;
                }
        }
    } else {
        /* Columns are runs: bands of `blk` rows (all rows for one scale per column). */
        size_t band = blk ? blk : (size_t)rows;
        if (band > rows) band = (size_t)rows;
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
                if (run_fakeq(a, &o, c * rows + r, cx, nr, cy, e)) goto out;
                for (size_t i = 0; i < nr; i++) y[i * cols + c] = cy[i];
            }
            if (wr(wctx, s, nr * (size_t)cols, y, e)) goto out;
        }
    }
    rc = 0;
out:
    free(x); free(y); free(cx); free(cy);
    return rc;
}
