/*
** What quantizing one training operand did, as counts (llm_recipe.h, qs_llm_opstat_add): values,
** underflows, clips and non-finite outputs.
**
** The clipping rule.  Every quantized value has a saturation level Q, the magnitude its largest element
** code decodes to at its scale: an element cast's max_finite (times the cast's 1/s under scale=), a
** block's (or NVFP4 16x16 tile's, HiF4/M2XFP segment's) Q as the format's row gives it from the block
** maxima (block_scales, MX's fakeq_scales) or from the metadata (seg_scales).  A finite x is clipped
** when |x| > Q + g/2, g the element grid's spacing just below Q at that scale: x lies beyond the
** half-way point to the next value the grid would have above Q, so no rounding explains its error.
** (So the absmax of a scaled FP8 cast, which fl32 rounding may put a hair above Q, is not clipped, while
** the MX floor rule's 7..8 x 2^k FP4 values are.)  A finite x that an element cast turns into NaN/Inf
** (overflow without saturation) is clipped too.  Blocks holding a NaN/Inf input, and HiF4/M2XFP under
** 16x16 tiles, count no clips.
*/
#include "llm_recipe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The element grid's spacing just below its largest finite value, over that value (casts). */
static double top_gap(const qs_format *f)
{
    if (f->code_value && f->ncodes) {
        double v1 = 0, v2 = 0;
        for (unsigned c = 0; c < f->ncodes; c++) {
            double v = fabs((double)f->code_value(c));
            if (!isfinite(v)) continue;
            if (v > v1) { v2 = v1; v1 = v; }
            else if (v > v2 && v < v1) v2 = v;
        }
        return v1 > 0 ? (v1 - v2) / v1 : 0;
    }
    if (f->mf && f->max_finite > 0)
        return ldexp(1.0, ilogb(f->max_finite) - f->mbits) / f->max_finite;
    return 0;
}

typedef struct mio { const float *x; } mio;
static int m_rd(void *c, uint64_t st, size_t n, float *out, qs_err *e)
{
    (void)e;
    memcpy(out, ((mio *)c)->x + st, n * sizeof(float));
    return 0;
}

/* Element casts: one threshold, or one per row / column of a scaled cast. */
static int cast_clips(const qs_apply *a, const float *x, const float *y, size_t rows, size_t cols, uint64_t *clip,
                      qs_err *e)
{
    const double lim = a->f->max_finite * (1.0 + top_gap(a->f) / 2);
    float *s = NULL, *inv = NULL;
    size_t ns = 0;
    mio io = {x};
    if (a->cscale && qs_cast_scales(a, rows, cols, m_rd, &io, &s, &inv, &ns, e)) return -1;
    uint64_t k = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * cols + c, j = ns <= 1 ? 0 : ns == rows ? r : c;
            double t = ns && inv[j] > 0 ? lim * inv[j] : lim;
            float v = fabsf(x[i]);
            k += v < INFINITY && (v > t || !isfinite(y[i]));
        }
    free(s);
    free(inv);
    *clip += k;
    return 0;
}

/* Blocks as a grid of bh x bw rectangles of the matrix (a row's blocks, a column's, 16x16 tiles, the
** whole tensor); block (i, j) at i * nbc + j. */
typedef struct bgrid { size_t bh, bw, nbr, nbc; } bgrid;

static bgrid grid_of(const qs_apply *a, int tile2d, size_t rows, size_t cols)
{
    bgrid g;
    if (tile2d) g.bh = g.bw = 16;
    else {
        qs_block_geom q;
        qs_block_geom_of(a, rows, cols, &q);
        size_t blk = q.blk ? q.blk : (size_t)q.runlen;
        if (q.whole) { g.bh = rows; g.bw = cols; }
        else if (q.col) { g.bh = blk; g.bw = 1; }
        else { g.bh = 1; g.bw = blk; }
    }
    if (!g.bh) g.bh = 1;
    if (!g.bw) g.bw = 1;
    g.nbr = (rows + g.bh - 1) / g.bh;
    g.nbc = (cols + g.bw - 1) / g.bw;
    return g;
}

/* Each block's largest finite |x|, NaN for a block holding a NaN or Inf. */
static void block_amax(const bgrid *g, const float *x, size_t rows, size_t cols, int any_nonfinite, float *A)
{
    memset(A, 0, g->nbr * g->nbc * sizeof *A);
    for (size_t r = 0; r < rows; r++) {
        float *Ar = A + (r / g->bh) * g->nbc;
        const float *xr = x + r * cols;
        if (g->bw == 1)
            for (size_t c = 0; c < cols; c++) Ar[c] = fmaxf(Ar[c], fabsf(xr[c]));
        else
            for (size_t j = 0; j < g->nbc; j++) {
                size_t c1 = (j + 1) * g->bw < cols ? (j + 1) * g->bw : cols;
                float m = Ar[j];
                for (size_t c = j * g->bw; c < c1; c++) m = fmaxf(m, fabsf(xr[c]));
                Ar[j] = m;
            }
    }
    if (any_nonfinite)
        for (size_t i = 0; i < rows * cols; i++)
            if (!isfinite(x[i])) A[(i / cols / g->bh) * g->nbc + (i % cols) / g->bw] = NAN;
}

/* Thresholds of amax-determined block formats (MX, NVFP4, int): T[b] = Q + spacing/2 (+Inf: nothing
** clips), in place of the block maxima A; *some: a block's maximum is above its threshold. */
static int amax_thresholds(const qs_apply *a, int tile2d, const bgrid *g, float *A, int *some, qs_err *e)
{
    const qs_format *f = a->f;
    size_t nb = g->nbr * g->nbc;
    qs_qopts o = a->o;
    float ts = o.tensor_scale;
    if (f->has_tensor_scale && !(ts > 0)) {   /* as qs_format_apply: the finite absmax */
        ts = 0;
        for (size_t b = 0; b < nb; b++) if (A[b] > ts) ts = A[b];
        o.tensor_scale = ts;
    }
    float *S = malloc(nb * sizeof *S), *Q = malloc(nb * sizeof *Q), *tmp = malloc(nb * sizeof *tmp);
    uint8_t *code = malloc(nb);
    int rc = -1;
    if (!S || !Q || !tmp || !code) { qs_fail(e, "out of memory for operand statistics"); goto out; }
    for (size_t b = 0; b < nb; b++) tmp[b] = isfinite(A[b]) ? A[b] : 0;
    if (f->block_scales) {
        if (tile2d) o.block = 256;
        if (f->block_scales(f, &o, ts, tmp, nb, code, S, Q, e)) goto out;
    } else {   /* MX: each block's scale from its amax alone, one block of one value each */
        o.block = 1;
        o.round = QS_RND_DEFAULT;
        float *yq = malloc(nb * sizeof *yq);
        if (!yq) { qs_fail(e, "out of memory for operand statistics"); goto out; }
        int r = f->fakeq_scales(f, &o, tmp, nb, yq, code, S, Q, e);
        free(yq);
        if (r) goto out;
    }
    const double half = ldexp(0.5, f->grid.ehi - f->grid.mb);
    *some = 0;
    for (size_t b = 0; b < nb; b++) {
        A[b] = isfinite(A[b]) && isfinite(Q[b]) && A[b] > Q[b] + half * S[b] ? (float)(Q[b] + half * S[b]) : INFINITY;
        *some |= A[b] < INFINITY;
    }
    rc = 0;
out:
    free(S); free(Q); free(tmp); free(code);
    return rc;
}

/* HiF4 / M2XFP (scales from every element): each run's metadata, then each segment's Q. */
static int seg_clips(const qs_apply *a, const bgrid *g, const float *x, size_t rows, size_t cols, uint64_t *clip,
                     qs_err *e)
{
    const qs_format *f = a->f;
    int col = g->bw == 1 && g->bh > 1;
    size_t len = col ? rows : cols, nrun = col ? cols : rows, B = qs_format_block(f, &a->o);
    size_t nb = (len + B - 1) / B, seg = f->scale_seg ? (size_t)f->scale_seg : B, nseg = nb * (B / seg);
    float *buf = malloc(len * sizeof *buf), *yq = malloc(len * sizeof *yq), *S = malloc(nseg * sizeof *S),
          *Q = malloc(nseg * sizeof *Q);
    uint8_t *meta = malloc(nb * (size_t)f->meta_bytes);
    uint32_t *codes = f->fakeq_meta ? NULL : malloc(len * sizeof *codes);
    int rc = -1;
    if (!buf || !yq || !S || !Q || !meta || (!f->fakeq_meta && !codes)) { qs_fail(e, "out of memory for operand statistics"); goto out; }
    const double half = ldexp(0.5, f->grid.ehi - f->grid.mb);
    for (size_t run = 0; run < nrun; run++) {
        for (size_t i = 0; i < len; i++) buf[i] = col ? x[i * cols + run] : x[run * cols + i];
        float ts;
        if (f->fakeq_meta ? f->fakeq_meta(f, &a->o, buf, len, yq, meta, e)
                          : f->encode(f, &a->o, buf, len, codes, meta, &ts, e)) goto out;
        f->seg_scales(f, &a->o, meta, nb, S, Q);
        for (size_t i = 0; i < len; i++) {
            float v = fabsf(buf[i]);
            size_t s = i / seg;
            *clip += v < INFINITY && isfinite(Q[s]) && v > Q[s] + half * S[s];
        }
    }
    rc = 0;
out:
    free(buf); free(yq); free(S); free(Q); free(meta); free(codes);
    return rc;
}

int qs_llm_opstat_add(const qs_apply *a, int tile2d, const float *x, const float *y, size_t rows, size_t cols,
                      qs_llm_opstat *st, qs_err *e)
{
    const size_t n = rows * cols;
    uint64_t under = 0, nonf = 0, nonf_in = 0;
    for (size_t i = 0; i < n; i++) {   /* branch-free: vectorizes */
        float v = fabsf(x[i]), w = fabsf(y[i]);
        under += v != 0 && v < INFINITY && w == 0;
        nonf += !(w < INFINITY);
        nonf_in += !(v < INFINITY);
    }
    st->n += n;
    st->underflow += under;
    st->nonfinite += nonf;
    const qs_format *f = a->f;
    if (f->block == 1 && !tile2d) return cast_clips(a, x, y, rows, cols, &st->clipped, e);
    bgrid g = grid_of(a, tile2d, rows, cols);
    if (!f->block_scales && !f->fakeq_scales) return tile2d || !f->seg_scales ? 0 : seg_clips(a, &g, x, rows, cols, &st->clipped, e);
    float *T = malloc(g.nbr * g.nbc * sizeof *T);
    if (!T) return qs_fail(e, "out of memory for operand statistics");
    block_amax(&g, x, rows, cols, nonf_in != 0, T);
    int some = 0;
    if (amax_thresholds(a, tile2d, &g, T, &some, e)) { free(T); return -1; }
    uint64_t k = 0;
    for (size_t r = 0; some && r < rows; r++) {
        const float *Tr = T + (r / g.bh) * g.nbc, *xr = x + r * cols;
        for (size_t c = 0; c < cols; c++) k += fabsf(xr[c]) > Tr[c / g.bw];
    }
    free(T);
    st->clipped += k;
    return 0;
}
