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
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include "llm_recipe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Magnitudes compare as the integers of their bits (NaN above Inf above every finite value), which
** keeps the passes below in integer vector code. */
#define INF_BITS 0x7f800000u
static inline uint32_t mag(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}
static inline uint32_t thr_bits(double t) { return t >= 3.4e38 ? INF_BITS : mag((float)t); }

/* c[0..3] += underflows, non-finite outputs, non-finite inputs, clips: finite x above thr (bits), or
** with cast, finite x whose output is NaN/Inf.  Counted in 32 bits per chunk of 2^16 values. */
static void flat_counts(const float *x, const float *y, size_t n, uint32_t thr, int cast, uint64_t c[4])
{
    const uint32_t cm = cast ? 1u : 0u;
    for (size_t i0 = 0; i0 < n; i0 += (size_t)1 << 16) {
        size_t i1 = n - i0 > ((size_t)1 << 16) ? i0 + ((size_t)1 << 16) : n;
        uint32_t u = 0, nf = 0, nfi = 0, cl = 0;
        for (size_t i = i0; i < i1; i++) {
            uint32_t a = mag(x[i]), b = mag(y[i]), fin = a < INF_BITS, bad = b >= INF_BITS;
            u += (a - 1u < INF_BITS - 1u) & (b == 0);
            nf += bad;
            nfi += !fin;
            cl += fin & ((a > thr) | (cm & bad));
        }
        c[0] += u; c[1] += nf; c[2] += nfi; c[3] += cl;
    }
}

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

/* Element casts: one threshold, or one per row / column of a scaled cast (to FP32 precision). */
static int cast_counts(const qs_apply *a, const float *x, const float *y, size_t rows, size_t cols, uint64_t c[4],
                       qs_err *e)
{
    const double lim = a->f->max_finite * (1.0 + top_gap(a->f) / 2);
    float *s = NULL, *inv = NULL;
    size_t ns = 0;
    mio io = {x};
    if (a->cscale && qs_cast_scales(a, rows, cols, m_rd, &io, &s, &inv, &ns, e)) return -1;
#define THR(j) thr_bits(ns && inv[j] > 0 ? lim * inv[j] : lim)
    if (a->cscale != QS_CSCALE_ROW && a->cscale != QS_CSCALE_COL) flat_counts(x, y, rows * cols, THR(0), 1, c);
    else if (a->cscale == QS_CSCALE_ROW)
        for (size_t r = 0; r < rows; r++) flat_counts(x + r * cols, y + r * cols, cols, THR(r), 1, c);
    else {   /* one scale per column: the clips apart */
        flat_counts(x, y, rows * cols, UINT32_MAX, 0, c);
        uint32_t *T = malloc(cols * sizeof *T);
        if (!T) { free(s); free(inv); return qs_fail(e, "out of memory for operand statistics"); }
        for (size_t j = 0; j < cols; j++) T[j] = THR(j);
        uint64_t k = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t j = 0; j < cols; j++) {
                uint32_t v = mag(x[r * cols + j]);
                k += (v < INF_BITS) & ((v > T[j]) | (mag(y[r * cols + j]) >= INF_BITS));
            }
        free(T);
        c[3] += k;
    }
#undef THR
    free(s);
    free(inv);
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

/* Each block's largest magnitude, as bits (above INF_BITS: the block holds a NaN). */
static void block_amax(const bgrid *g, const float *x, size_t rows, size_t cols, uint32_t *A)
{
    memset(A, 0, g->nbr * g->nbc * sizeof *A);
    for (size_t r = 0; r < rows; r++) {
        uint32_t *Ar = A + (r / g->bh) * g->nbc;
        const float *xr = x + r * cols;
        if (g->bw == 1)
            for (size_t c = 0; c < cols; c++) { uint32_t v = mag(xr[c]); Ar[c] = v > Ar[c] ? v : Ar[c]; }
        else
            for (size_t j = 0; j < g->nbc; j++) {
                size_t c1 = (j + 1) * g->bw < cols ? (j + 1) * g->bw : cols;
                uint32_t m = Ar[j];
                for (size_t c = j * g->bw; c < c1; c++) { uint32_t v = mag(xr[c]); m = v > m ? v : m; }
                Ar[j] = m;
            }
    }
}

/* Thresholds of amax-determined block formats (MX, NVFP4, int) in place of the block maxima A:
** Q + spacing/2 where the block's maximum lies above it, else UINT32_MAX (nothing clips: also blocks
** with a NaN or Inf); *some: a block can clip.  ts: the matrix's finite absmax. */
static int amax_thresholds(const qs_apply *a, int tile2d, const bgrid *g, uint32_t *A, float ts, int *some, qs_err *e)
{
    const qs_format *f = a->f;
    size_t nb = g->nbr * g->nbc;
    qs_qopts o = a->o;
    if (f->has_tensor_scale && !(o.tensor_scale > 0)) o.tensor_scale = ts;   /* as qs_format_apply */
    float *S = malloc(nb * sizeof *S), *Q = malloc(nb * sizeof *Q), *am = malloc(nb * sizeof *am),
          *yq = malloc(nb * sizeof *yq);
    uint8_t *code = malloc(nb);
    int rc = -1;
    if (!S || !Q || !am || !yq || !code) { qs_fail(e, "out of memory for operand statistics"); goto out; }
    for (size_t b = 0; b < nb; b++) {
        uint32_t v = A[b] < INF_BITS ? A[b] : 0;
        memcpy(&am[b], &v, sizeof v);
    }
    if (f->block_scales) {
        if (tile2d) o.block = 256;
        if (f->block_scales(f, &o, o.tensor_scale, am, nb, code, S, Q, e)) goto out;
    } else {   /* MX: each block's scale from its amax alone, one block of one value each */
        o.block = 1;
        o.round = QS_RND_DEFAULT;
        if (f->fakeq_scales(f, &o, am, nb, yq, code, S, Q, e)) goto out;
    }
    const double half = ldexp(0.5, f->grid.ehi - f->grid.mb);
    *some = 0;
    for (size_t b = 0; b < nb; b++) {
        double t = (double)Q[b] + half * S[b];
        uint32_t tb = A[b] < INF_BITS && isfinite(t) ? thr_bits(t) : UINT32_MAX;
        A[b] = A[b] > tb ? tb : UINT32_MAX;
        *some |= A[b] != UINT32_MAX;
    }
    rc = 0;
out:
    free(S); free(Q); free(am); free(yq); free(code);
    return rc;
}

/* HiF4 / M2XFP (scales from every element): each run's metadata (fakeq_meta, else encode), then each
** segment's Q.  With y, the run's quantized values go there (fakeq_meta only), and with flat the run's
** flat_counts while it is in cache (their clip count stays 0: no threshold, no cast): the registry's
** quantization run by run, as qs_format_apply cuts the runs (rows, or columns for the row axis).
** Columns are gathered and written back 64 at a time (whole cache lines of each row, not one float of
** it), in steps of 8 rows. */
#define SEG_PANEL 64
static int seg_clips(const qs_apply *a, const bgrid *g, const float *x, size_t rows, size_t cols, uint64_t *clip,
                     float *y, uint64_t *flat, qs_err *e)
{
    const qs_format *f = a->f;
    int col = g->bw == 1 && g->bh > 1;
    size_t len = col ? rows : cols, nrun = col ? cols : rows, B = qs_format_block(f, &a->o);
    size_t nb = (len + B - 1) / B, seg = f->scale_seg ? (size_t)f->scale_seg : B, nseg = nb * (B / seg);
    size_t P = col ? SEG_PANEL : 1;
    float *buf = malloc(len * P * sizeof *buf), *yq = malloc(len * P * sizeof *yq), *S = malloc(nseg * sizeof *S),
          *Q = malloc(nseg * sizeof *Q);
    uint8_t *meta = malloc(nb * (size_t)f->meta_bytes);
    uint32_t *codes = f->fakeq_meta ? NULL : malloc(len * sizeof *codes);
    int rc = -1;
    if (!buf || !yq || !S || !Q || !meta || (!f->fakeq_meta && !codes)) {
        qs_fail(e, "out of memory for operand statistics");
        goto out;
    }
    const double half = ldexp(0.5, f->grid.ehi - f->grid.mb);
    uint64_t k = 0;
    for (size_t run0 = 0; run0 < nrun; run0 += P) {
        size_t np = nrun - run0 < P ? nrun - run0 : P;
        if (col)   /* buf[c * len + i] = x[i][run0 + c], 8 rows at a time */
            for (size_t i0 = 0; i0 < len; i0 += 8) {
                size_t i1 = len - i0 < 8 ? len : i0 + 8;
                for (size_t c = 0; c < np; c++)
                    for (size_t i = i0; i < i1; i++) buf[c * len + i] = x[i * cols + run0 + c];
            }
        for (size_t c = 0; c < np; c++) {
            const float *in = col ? buf + c * len : x + (run0 + c) * cols;
            float *out = yq + c * len, ts;
            if (f->fakeq_meta ? f->fakeq_meta(f, &a->o, in, len, out, meta, e)
                              : f->encode(f, &a->o, in, len, codes, meta, &ts, e)) goto out;
            f->seg_scales(f, &a->o, meta, nb, S, Q);
            uint32_t kr = 0;
            for (size_t s0 = 0, i0 = 0; i0 < len; s0++, i0 += seg) {
                double t = (double)Q[s0] + half * S[s0];
                uint32_t tb = isfinite(t) ? thr_bits(t) : UINT32_MAX;
                for (size_t i = i0; i < i0 + seg && i < len; i++) {
                    uint32_t v = mag(in[i]);
                    kr += (v < INF_BITS) & (v > tb);
                }
            }
            k += kr;
            if (flat) flat_counts(in, out, len, UINT32_MAX, 0, flat);   /* while the run is in cache */
        }
        if (y && col)
            for (size_t i0 = 0; i0 < len; i0 += 8) {
                size_t i1 = len - i0 < 8 ? len : i0 + 8;
                for (size_t i = i0; i < i1; i++)
                    for (size_t c = 0; c < np; c++) y[i * cols + run0 + c] = yq[c * len + i];
            }
        else if (y) memcpy(y + run0 * cols, yq, len * sizeof *yq);
    }
    *clip += k;
    rc = 0;
out:
    free(buf); free(yq); free(S); free(Q); free(meta); free(codes);
    return rc;
}

int qs_llm_opstat_quantize(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, qs_llm_opstat *st,
                           qs_err *e)
{
    const qs_format *f = a->f;
    if (!f->fakeq_meta || !f->seg_scales || a->gran != QS_GRAN_BLOCK || a->cscale || a->o.round == QS_RND_SR || x == y)
        return 1;   /* SR counters per run would need qs_format_apply's bookkeeping */
    if (qs_qopts_check(f, &a->o, e)) return -1;
    bgrid g = grid_of(a, 0, rows, cols);
    uint64_t c[4] = {0, 0, 0, 0};
    if (seg_clips(a, &g, x, rows, cols, &c[3], y, c, e)) return -1;   /* with the flat counts */
    st->n += rows * cols;
    st->underflow += c[0];
    st->nonfinite += c[1];
    st->clipped += c[3];
    return 0;
}

size_t qs_llm_opstat_run_block(const qs_apply *a, size_t rows, size_t cols)
{
    const qs_format *f = a->f;
    if (f->block == 1 || !(f->block_scales || f->fakeq_scales) || a->gran != QS_GRAN_BLOCK || a->cscale) return 0;
    size_t B = (size_t)qs_format_block(f, &a->o);
    bgrid g = grid_of(a, 0, rows, cols);
    if (!B || (a->axis ? g.bh != 1 || g.bw != B : g.bw != 1 || g.bh != B)) return 0;
    return B;
}

int qs_llm_opstat_runs(const qs_apply *a, const float *x, const float *y, size_t nrun, size_t n, size_t ld, float ts,
                       uint64_t c[4], qs_err *e)
{
    size_t B = (size_t)qs_format_block(a->f, &a->o);
    bgrid g = {1, B, nrun, (n + B - 1) / B}, g1 = {1, B, 1, (n + B - 1) / B};
    uint32_t *A = malloc(g.nbr * g.nbc * sizeof *A);
    if (!A) return qs_fail(e, "out of memory for operand statistics");
    for (size_t r = 0; r < nrun; r++) {   /* the flat counts and block maxima while the runs are in cache */
        flat_counts(x + r * ld, y + r * ld, n, UINT32_MAX, 0, c);
        block_amax(&g1, x + r * ld, 1, n, A + r * g.nbc);
    }
    int some = 0;
    if (amax_thresholds(a, 0, &g, A, ts, &some, e)) { free(A); return -1; }
    uint64_t k = 0;
    for (size_t r = 0; some && r < nrun; r++) {
        const uint32_t *Tr = A + r * g.nbc;
        const float *xr = x + r * ld;
        uint32_t kr = 0;
        for (size_t j = 0; j < g.nbc; j++) {
            if (Tr[j] == UINT32_MAX) continue;
            size_t c1 = (j + 1) * B < n ? (j + 1) * B : n;
            for (size_t i = j * B; i < c1; i++) kr += mag(xr[i]) > Tr[j];
        }
        k += kr;
    }
    free(A);
    c[3] += k;
    return 0;
}

/* Clips of an amax-determined block format: the block maxima, their thresholds, then (only when a
** block's maximum lies above its threshold) a pass over x. */
static int block_counts(const qs_apply *a, int tile2d, const bgrid *g, const float *x, size_t rows, size_t cols,
                        int any_nonfinite, uint64_t *clip, qs_err *e)
{
    size_t nb = g->nbr * g->nbc;
    uint32_t *A = malloc(nb * sizeof *A);
    if (!A) return qs_fail(e, "out of memory for operand statistics");
    block_amax(g, x, rows, cols, A);
    uint32_t tb = 0;   /* the matrix's finite absmax (NVFP4's tensor scale), as qs_format_absmax */
    if (!any_nonfinite) for (size_t b = 0; b < nb; b++) tb = A[b] > tb ? A[b] : tb;
    else for (size_t i = 0; i < rows * cols; i++) { uint32_t v = mag(x[i]); tb = v < INF_BITS && v > tb ? v : tb; }
    float ts;
    memcpy(&ts, &tb, sizeof ts);
    int some = 0;
    if (amax_thresholds(a, tile2d, g, A, ts, &some, e)) { free(A); return -1; }
    uint64_t k = 0;
    for (size_t r = 0; some && r < rows; r++) {
        const uint32_t *Tr = A + (r / g->bh) * g->nbc;
        const float *xr = x + r * cols;
        uint32_t kr = 0;
        if (g->bw == 1)
            for (size_t c = 0; c < cols; c++) kr += mag(xr[c]) > Tr[c];
        else
            for (size_t j = 0; j < g->nbc; j++) {
                if (Tr[j] == UINT32_MAX) continue;
                size_t c1 = (j + 1) * g->bw < cols ? (j + 1) * g->bw : cols;
                for (size_t c = j * g->bw; c < c1; c++) kr += mag(xr[c]) > Tr[j];
            }
        k += kr;
    }
    free(A);
    *clip += k;
    return 0;
}

int qs_llm_opstat_add(const qs_apply *a, int tile2d, const float *x, const float *y, size_t rows, size_t cols,
                      qs_llm_opstat *st, qs_err *e)
{
    const size_t n = rows * cols;
    const qs_format *f = a->f;
    uint64_t c[4] = {0, 0, 0, 0};
    int rc = 0;
    if (f->block == 1 && !tile2d) rc = cast_counts(a, x, y, rows, cols, c, e);
    else {
        flat_counts(x, y, n, UINT32_MAX, 0, c);
        bgrid g = grid_of(a, tile2d, rows, cols);
        if (f->block_scales || f->fakeq_scales) rc = block_counts(a, tile2d, &g, x, rows, cols, c[2] != 0, &c[3], e);
        else if (f->seg_scales && !tile2d) rc = seg_clips(a, &g, x, rows, cols, &c[3], NULL, NULL, e);
    }
    if (rc) return -1;
    st->n += n;
    st->underflow += c[0];
    st->nonfinite += c[1];
    st->clipped += c[3];
    return 0;
}
