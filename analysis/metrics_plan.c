/*
** The analysis engine's plan (metrics_internal.h): the format's profile (element grid for the ulp
** error and where the element scales come from, both from the format's row) and the cut of a rows x cols tensor into runs, blocks,
** scale segments and bands.  Band boundaries depend only on the shape and the format, never on the
** thread count: that is what makes the results bit-identical for any number of threads.
**
** Band layouts (mirroring format_apply):
**   rows    each row is a run; bands of whole rows (about BAND elements);
**   pieces  rows longer than a band: bands are pieces of one row cut at block boundaries;
**   cols    axis 0 with blocks: columns are runs, bands of whole block-rows (a multiple of the block);
**   mem     int8/int4 with one scale per tensor or per column (granularity tensor/col, or axis 0
**           without a block size): the run is the whole tensor or a whole column, so, as in
**           format_apply, the tensor is held in memory (fake-quantized first), then analysed in
**           row bands (tensor) or block-row bands (columns).
*/
#include "metrics_internal.h"

/* ---- the format's profile ---------------------------------------------------------------- */

static void grid_minifloat(prof *p, int elo, int ehi, int mbits)
{
    p->mb = mbits;
    p->elo = elo;
    p->ehi = ehi;
    for (int E = elo; E <= ehi; E++) p->sp[E - elo] = ldexp(1.0, E - mbits);
}

/* Grid from a code table (HiF8): spacing in binade E = next value after the smallest value >= 2^E,
** minus that value (the previous step where there is no next value). */
static int grid_table(prof *p)
{
    const qs_format *f = p->f;
    float v[256];
    int n = 0;
    for (unsigned c = 0; c < f->ncodes && c < 256; c++) {
        float x = f->code_value(c);
        if (x > 0 && x <= FLT_MAX) v[n++] = x;
    }
    /* sort, unique */
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && v[k - 1] > v[k]; k--) { float t = v[k]; v[k] = v[k - 1]; v[k - 1] = t; }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    if (m < 2) return -1;
    p->tapered = 1;
    p->elo = ilog2d(v[0]);
    p->ehi = ilog2d(v[m - 1]);
    if (p->ehi - p->elo >= 300) return -1;
    for (int E = p->elo; E <= p->ehi; E++) {
        double lo = ldexp(1.0, E);
        int i = 0;
        while (i < m && v[i] < lo) i++;
        double s = i + 1 < m ? (double)v[i + 1] - v[i] : (double)v[m - 1] - v[m - 2];
        if (E == p->elo) s = v[0];   /* below the smallest value: the step from 0 */
        p->sp[E - p->elo] = s;
    }
    return 0;
}

static int prof_init1(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e)
{
    const qs_format *f = a->f;
    memset(p, 0, sizeof *p);
    p->f = f;
    p->o = *o;
    if (f->scale_kind == QS_SK_NONE) {   /* an element cast: its own grid, scale 1 */
        p->fam = FAM_CAST;
        p->cast_top = (float)f->max_finite;
        if (f->ebits > 0)
            grid_minifloat(p, ilog2d(f->min_normal), ilog2d(f->max_finite), f->mbits);
        else if (f->code_value) {
            if (grid_table(p)) return qs_fail(e, "format %s: cannot derive its grid", f->name);
        } else
            return qs_fail(e, "format %s: unknown element grid", f->name);
        return 0;
    }
    /* a block format: the element grid in units of S and where S comes from, as its row says */
    const qs_grid *g = &f->grid;
    if (g->ehi < g->elo || g->ehi - g->elo >= 300) return qs_fail(e, "format %s: no element grid", f->name);
    grid_minifloat(p, g->elo, g->ehi, g->mb);
    p->byte_scale = f->scale_value != NULL;
    if (f->seg_scales) {
        size_t blk = qs_format_block(f, o);
        if (f->scale_seg <= 0 || !blk || blk % (size_t)f->scale_seg)
            return qs_fail(e, "format %s: scale segments of %d do not divide its block", f->name, f->scale_seg);
        p->fam = FAM_CODED;
        p->seg = (size_t)f->scale_seg;
        return 0;
    }
    if (f->block_scales || f->fakeq_scales) {
        p->fam = FAM_PROXY;
        p->finite_rep = f->amax_finite;
        return 0;
    }
    return qs_fail(e, "format %s: its row gives the analysis no block scales", f->name);
}

/* The profile, with the grid's inverse spacings. */
int met_prof_init(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e)
{
    if (prof_init1(p, a, o, e)) return -1;
    for (int E = p->elo; E <= p->ehi; E++) {
        p->isp[E - p->elo] = 1.0 / p->sp[E - p->elo];
        p->isp32[E - p->elo] = (float)(32.0 * p->isp[E - p->elo]);
    }
    return 0;
}

/* ---- plan --------------------------------------------------------------------------------- */

void met_band_geom(const plan *p, uint64_t b, uint64_t *r0, size_t *nr, uint64_t *c0, size_t *nc)
{
    if (p->npr) {
        uint64_t r = b / p->npr, k = b % p->npr;
        *r0 = r;
        *nr = 1;
        *c0 = k * p->piece;
        *nc = (size_t)(p->cols - *c0 < p->piece ? p->cols - *c0 : p->piece);
        return;
    }
    *r0 = b * p->band_rows;
    *nr = (size_t)(p->rows - *r0 < p->band_rows ? p->rows - *r0 : p->band_rows);
    *c0 = 0;
    *nc = (size_t)p->cols;
}

int met_plan_init(plan *p, const prof *pf, const qs_apply *a, uint64_t rows, uint64_t cols, qs_err *e)
{
    memset(p, 0, sizeof *p);
    p->rows = rows;
    p->cols = cols;
    p->n = rows * cols;
    qs_block_geom g;   /* where the blocks lie: the geometry format_apply uses */
    qs_block_geom_of(a, rows, cols, &g);
    size_t blk = g.blk;
    p->blk = blk;
    if (g.whole) p->mode = PM_MEM_T;
    else if (g.col && blk == 0) p->mode = PM_MEM_C;
    else if (g.col) p->mode = PM_COLS;
    else {
        size_t piece = blk ? (BAND / blk) * blk : (size_t)cols;
        if (piece == 0) piece = blk;
        if (piece >= cols) p->mode = PM_ROWS;
        else {
            p->mode = PM_PIECES;
            p->piece = piece;
            p->npr = (cols + piece - 1) / piece;
        }
    }
    p->twod = rows > 1;
    if (p->n == 0) { p->nbands = 0; return 0; }
    switch (p->mode) {
    case PM_ROWS:
    case PM_MEM_T:
        if (p->mode == PM_MEM_T && cols > BAND) {
            /* in memory: any cut works (the one block is summarised at the end) */
            p->piece = BAND;
            p->npr = (cols + BAND - 1) / BAND;
            p->nbands = rows * p->npr;
            p->max_nr = 1;
            p->max_nc = BAND;
            break;
        }
        p->band_rows = (size_t)(BAND / cols);
        if (p->band_rows == 0) p->band_rows = 1;
        if (p->band_rows > rows) p->band_rows = (size_t)rows;
        p->nbands = (rows + p->band_rows - 1) / p->band_rows;
        p->max_nr = p->band_rows;
        p->max_nc = (size_t)cols;
        break;
    case PM_PIECES:
        p->nbands = rows * p->npr;
        p->max_nr = 1;
        p->max_nc = p->piece;
        break;
    case PM_COLS:
    case PM_MEM_C: {
        size_t unit = p->mode == PM_COLS ? blk : 1;
        size_t k = (size_t)(BAND / ((uint64_t)unit * cols));
        if (k == 0) k = 1;
        if (cols > SIZE_MAX / sizeof(double) / unit) return qs_fail(e, "tensor too large");
        p->band_rows = k * unit;
        if (p->band_rows > rows) p->band_rows = (size_t)rows;
        p->nbands = (rows + p->band_rows - 1) / p->band_rows;
        p->max_nr = p->band_rows;
        p->max_nc = (size_t)cols;
        p->colruns = 1;
        break;
    }
    }
    p->max_len = p->max_nr * p->max_nc;
    /* blocks */
    int blocky = pf->fam != FAM_CAST;
    p->nblocks = blocky ? g.nblocks : 0;
    p->blockstats = blocky && p->mode != PM_MEM_T && p->mode != PM_MEM_C;
    if (p->blockstats && p->colruns) p->nbc = g.per;
    else if (p->blockstats) p->nbr = g.per;
    size_t rl = p->colruns ? p->max_nr : p->max_nc, nruns = p->colruns ? p->max_nc : p->max_nr;
    size_t bpr = p->blockstats && p->blk ? (rl + p->blk - 1) / p->blk : 1;
    p->max_blocks = nruns * bpr;
    size_t spr = pf->seg ? bpr * (p->blk / pf->seg) : bpr;
    p->max_segs = nruns * spr;
    p->colacc = p->twod || p->mode == PM_MEM_C;
    return 0;
}

/* Row runs: the tensor's index of band b's first block (nblocks past the last band). */
static uint64_t row_block(const plan *p, uint64_t b)
{
    if (b >= p->nbands) return p->nblocks;
    uint64_t r0, c0;
    size_t nr, nc;
    met_band_geom(p, b, &r0, &nr, &c0, &nc);
    return r0 * p->nbr + (p->blk ? c0 / p->blk : 0);
}

/* Where band b's blocks start among those of bands b0.. stored band by band, run by run: for row
** runs that is the tensor's block order (shifted); a band of column runs holds cols x band_rows / blk
** blocks (every band but the last is full). */
uint64_t met_band_block0(const plan *p, uint64_t b0, uint64_t b)
{
    if (p->colruns) return (b - b0) * p->cols * (p->band_rows / p->blk);
    return row_block(p, b) - row_block(p, b0);
}

/* The blocks of bands [b0, b1) with per-block statistics in the band pass. */
uint64_t met_band_nblocks(const plan *p, uint64_t b0, uint64_t b1)
{
    if (!p->blockstats || b1 <= b0) return 0;
    if (!p->colruns) return row_block(p, b1) - row_block(p, b0);
    uint64_t r0, c0;
    size_t nr, nc;
    met_band_geom(p, b1 - 1, &r0, &nr, &c0, &nc);
    return met_band_block0(p, b0, b1 - 1) + p->cols * ((nr + p->blk - 1) / p->blk);
}
