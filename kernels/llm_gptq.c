/*
** GPTQ weight rounding for any registry format (llm_gptq.h): the fixed grids, the inverse Hessian's
** Cholesky factor (LAPACK's dpotrf/dpotri from OpenBLAS) and the column loop with lazy batches.
*/
#include "llm_gptq.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "cast_scale.h"
#include "llm.h"

/* LAPACK (shipped in OpenBLAS): Cholesky factor and the inverse from it.  Column-major; a symmetric
** matrix is its own transpose, so uplo 'L' on our row-major arrays factors their upper triangle. */
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t len);
extern void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t len);

static int is_cast(const qs_format *f) { return f->block == 1 && f->meta_bytes == 0; }

int qs_gptq_check(const qs_apply *a, qs_err *e)
{
    const qs_format *f = a->f;
    if (qs_qopts_check(f, &a->o, e)) return -1;
    if (a->o.round == QS_RND_SR) return qs_fail(e, "%s: GPTQ rounds to the nearest value: stochastic rounding is refused", f->name);
    if (a->cscale == QS_CSCALE_COL) return qs_fail(e, "%s: GPTQ rounds input columns one at a time: scale=col is refused", f->name);
    if (is_cast(f)) return 0;
    if (a->gran == QS_GRAN_TENSOR && f->block != 0)
        return qs_fail(e, "%s: GPTQ fixes block scales along the input dimension: gran=tensor is refused", f->name);
    if (f->scale_kind == QS_SK_M2XFP)   /* its metadata refines particular elements: a code's value is not per element */
        return qs_fail(e, "%s: its metadata refines chosen elements of each group, so GPTQ's per-element fixed grid is "
                       "not defined: refused", f->name);
    if (f->elem_bits > 8 || !f->encode || !f->decode)
        return qs_fail(e, "%s: GPTQ's fixed block grid needs element codes of at most 8 bits and an encoder", f->name);
    return 0;
}

/* ---------------------------------------------------------------- fixed grids */

typedef struct wgrid {
    const qs_format *f;
    qs_qopts o;
    int cast;                 /* element cast: s/inv per row (NULL: unscaled) */
    float *s, *inv;
    size_t rows, cols, B, nb; /* block formats: B columns per block, nb blocks per row */
    unsigned nc;              /* codes per element */
    float **tab;              /* per block: [rows][Bj][nc] grid values, NULL until fixed */
    size_t *left;             /* per block: columns not rounded yet */
    uint32_t *codes;
    uint8_t *meta;
    float *x, *y;
} wgrid;

static void wgrid_free(wgrid *g)
{
    if (g->tab)
        for (size_t b = 0; b < g->nb; b++) free(g->tab[b]);
    free(g->tab); free(g->left); free(g->s); free(g->inv); free(g->codes); free(g->meta); free(g->x); free(g->y);
}

static float absmax_of(const float *x, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float v = fabsf(x[i]);
        if (isfinite(v) && v > m) m = v;
    }
    return m;
}

static int wgrid_init(wgrid *g, const qs_apply *a, int scaled, const float *W, size_t rows, size_t cols, qs_err *e)
{
    memset(g, 0, sizeof *g);
    g->f = a->f;
    g->o = a->o;
    g->rows = rows;
    g->cols = cols;
    if (qs_gptq_check(a, e)) return -1;
    if (is_cast(a->f)) {
        g->cast = 1;
        g->o.sat = 1;   /* updated values may pass the row's fixed scale: saturate, never Inf/NaN */
        int per_row = a->cscale == QS_CSCALE_ROW || (!a->cscale && scaled), one = a->cscale == QS_CSCALE_TENSOR;
        if (!(per_row || one) || !(qs_cast_scale_target(a->f) > 0)) return 0;
        if (!(g->s = malloc(rows * sizeof *g->s)) || !(g->inv = malloc(rows * sizeof *g->inv))) return qs_fail(e, "out of memory");
        float tm = one ? absmax_of(W, rows * cols) : 0;
        for (size_t r = 0; r < rows; r++) qs_cast_scale_of(a->f, one ? tm : absmax_of(W + r * cols, cols), &g->s[r], &g->inv[r]);
        return 0;
    }
    if (a->gran != QS_GRAN_BLOCK) g->o.block = 0;
    g->B = qs_format_block(a->f, &g->o);
    if (!g->B || g->B > cols) g->B = cols;
    /* one scale per tensor (int8/int4 gran=tensor) and NVFP4's tensor scale: the original matrix's amax */
    if ((a->f->has_tensor_scale || a->gran == QS_GRAN_TENSOR) && !(g->o.tensor_scale > 0)) g->o.tensor_scale = absmax_of(W, rows * cols);
    g->nb = (cols + g->B - 1) / g->B;
    g->nc = 1u << a->f->elem_bits;
    size_t mb = qs_format_nblocks(a->f, &g->o, g->B) * (size_t)(a->f->meta_bytes > 0 ? a->f->meta_bytes : 1);
    g->tab = calloc(g->nb, sizeof *g->tab);
    g->left = malloc(g->nb * sizeof *g->left);
    g->codes = malloc(g->B * sizeof *g->codes);
    g->meta = malloc(mb + 16);
    g->x = malloc(g->B * sizeof *g->x);
    g->y = malloc(g->B * sizeof *g->y);
    if (!g->tab || !g->left || !g->codes || !g->meta || !g->x || !g->y) return qs_fail(e, "out of memory");
    for (size_t b = 0; b < g->nb; b++) g->left[b] = (b + 1) * g->B <= cols ? g->B : cols - b * g->B;
    if ((double)rows * g->B * g->nc * sizeof(float) > 1.5e9)
        return qs_fail(e, "%s: GPTQ's grid table of one block column (%zu rows x %zu x %u codes) is too large", a->f->name, rows,
                       g->B, g->nc);
    return 0;
}

/* Fix block b's metadata from vals [rows][Bj] (its current values): every element's grid. */
static int wgrid_fix(wgrid *g, size_t b, const float *vals, qs_err *e)
{
    const size_t Bj = b + 1 < g->nb ? g->B : g->cols - b * g->B;
    float *t = malloc(g->rows * Bj * g->nc * sizeof *t);
    if (!t) return qs_fail(e, "out of memory for GPTQ's grid table");
    for (size_t r = 0; r < g->rows; r++) {
        float ts = 0;
        if (g->f->encode(g->f, &g->o, vals + r * Bj, Bj, g->codes, g->meta, &ts, e)) { free(t); return -1; }
        for (unsigned c = 0; c < g->nc; c++) {
            for (size_t k = 0; k < Bj; k++) g->codes[k] = c;
            if (g->f->decode(g->f, &g->o, g->codes, g->meta, ts, Bj, g->y, e)) { free(t); return -1; }
            for (size_t k = 0; k < Bj; k++) t[(r * Bj + k) * g->nc + c] = g->y[k];
        }
    }
    g->tab[b] = t;
    return 0;
}

/* Round column j (original index) of every row: w[r] -> q[r]. */
static int wgrid_round(wgrid *g, size_t j, const double *w, size_t ldw, double *q, qs_err *e)
{
    if (g->cast) {
        for (size_t r = 0; r < g->rows; r++) {
            float x = (float)w[r * ldw], y;
            if (g->s && g->s[r] != 0) x *= g->s[r];
            if (g->f->fakeq(g->f, &g->o, &x, 1, &y, e)) return -1;
            q[r] = g->s && g->s[r] != 0 ? (double)(y * g->inv[r]) : (double)y;
        }
        return 0;
    }
    const size_t b = j / g->B, k = j % g->B, Bj = b + 1 < g->nb ? g->B : g->cols - b * g->B;
    const float *t = g->tab[b];
    for (size_t r = 0; r < g->rows; r++) {
        const float *v = t + (r * Bj + k) * g->nc;
        double x = w[r * ldw], best = NAN, bd = INFINITY;
        for (unsigned c = 0; c < g->nc; c++) {
            double d = fabs((double)v[c] - x);
            if (d < bd) { bd = d; best = v[c]; }
        }
        q[r] = isfinite(best) ? best : 0;
    }
    if (--g->left[b] == 0) { free(g->tab[b]); g->tab[b] = NULL; }
    return 0;
}

/* ---------------------------------------------------------------- the inverse Hessian's factor */

/* U upper with (H + damp)^-1 = U^T U, in place (n x n, row-major). */
static int hinv_chol(double *H, int n, double damp, qs_err *e)
{
    double md = 0;
    for (int i = 0; i < n; i++) md += H[(size_t)i * n + i];
    md = damp * md / n;
    for (int i = 0; i < n; i++) H[(size_t)i * n + i] += md;
    int info = 0;
    dpotrf_("L", &n, H, &n, &info, 1);
    if (info) return qs_fail(e, "GPTQ: the dampened Hessian is not positive definite (column %d)", info);
    dpotri_("L", &n, H, &n, &info, 1);
    if (info) return qs_fail(e, "GPTQ: the Hessian's inverse failed (column %d)", info);
    for (int i = 0; i < n; i++)   /* row-major upper holds the inverse: mirror it */
        for (int j = i + 1; j < n; j++) H[(size_t)j * n + i] = H[(size_t)i * n + j];
    dpotrf_("L", &n, H, &n, &info, 1);
    if (info) return qs_fail(e, "GPTQ: the inverse Hessian is not positive definite (column %d)", info);
    for (int i = 0; i < n; i++)   /* row-major upper is U; clear the rest */
        for (int j = 0; j < i; j++) H[(size_t)i * n + j] = 0;
    return 0;
}

/* ---------------------------------------------------------------- the column loop */

typedef struct gq {
    wgrid g;
    size_t rows, cols;
    double *Wd, *U, *Qd, *Err;   /* permuted columns: Wd [rows][cols], U [cols][cols], Err [rows][block] */
    size_t *perm, *pos;           /* perm[i] original column of position i; pos its inverse */
    float *vals;
} gq;

/* Fix the metadata of the block holding original column j, from its columns' current values (none is
** rounded yet): those past the lazy batch [i1, i2) still owe the updates of columns i1 .. i-1, applied
** here to a copy. */
static int fix_block(gq *G, size_t j, size_t i1, size_t i, size_t i2, size_t bl, qs_err *e)
{
    wgrid *g = &G->g;
    const size_t b = j / g->B, j0 = b * g->B, Bj = b + 1 < g->nb ? g->B : G->cols - j0;
    for (size_t k = 0; k < Bj; k++) {
        const size_t p = G->pos[j0 + k];
        for (size_t r = 0; r < G->rows; r++) {
            double v = G->Wd[r * G->cols + p];
            if (p >= i2)
                for (size_t c = i1; c < i; c++) v -= G->Err[r * bl + (c - i1)] * G->U[c * G->cols + p];
            G->vals[r * Bj + k] = (float)v;
        }
    }
    return wgrid_fix(g, b, G->vals, e);
}

/* One lazy batch [i1, i2) of bl columns: round each, spread its error over the batch's later columns
** at once and over the columns past the batch with one product at the end. */
static int batch(gq *G, size_t i1, size_t i2, size_t bl, qs_err *e)
{
    const size_t R = G->rows, C = G->cols, n = i2 - i1;
    double *w = malloc(R * sizeof *w), *q = malloc(R * sizeof *q);
    if (!w || !q) { free(w); free(q); return qs_fail(e, "out of memory"); }
    int rc = -1;
    for (size_t i = i1; i < i2; i++) {
        const size_t j = G->perm[i];
        if (!G->g.cast && !G->g.tab[j / G->g.B] && fix_block(G, j, i1, i, i2, bl, e)) goto out;
        for (size_t r = 0; r < R; r++) w[r] = G->Wd[r * C + i];
        if (wgrid_round(&G->g, j, w, 1, q, e)) goto out;
        const double d = G->U[i * C + i];
        for (size_t r = 0; r < R; r++) {
            const double err = (w[r] - q[r]) / d;
            G->Qd[r * C + i] = q[r];
            G->Err[r * bl + (i - i1)] = err;
            double *wr = G->Wd + r * C;
            const double *u = G->U + i * C;
            for (size_t k = i + 1; k < i2; k++) wr[k] -= err * u[k];
        }
    }
    if (i2 < C)   /* W[:, i2:] -= Err · U[i1:i2, i2:] */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)(C - i2), (int)n, -1.0, G->Err, (int)bl,
                    G->U + i1 * C + i2, (int)C, 1.0, G->Wd + i2, (int)C);
    rc = 0;
out:
    free(w);
    free(q);
    return rc;
}

typedef struct { double d; size_t j; } dj;
static int by_diag(const void *a, const void *b)   /* decreasing diagonal, then column */
{
    const dj *x = a, *y = b;
    return x->d > y->d ? -1 : x->d < y->d ? 1 : (x->j > y->j) - (x->j < y->j);
}

static void gq_free(gq *G)
{
    wgrid_free(&G->g);
    free(G->Wd); free(G->U); free(G->Qd); free(G->Err); free(G->perm); free(G->pos); free(G->vals);
}

int qs_gptq_quantize(const qs_apply *a, int scaled, float *W, size_t rows, size_t cols, const double *H,
                     const qs_gptq_opts *o, qs_err *e)
{
    if (!rows || !cols) return 0;
    if (cols > 1u << 16) return qs_fail(e, "GPTQ: %zu input columns is too many", cols);
    const size_t bl = o->block > 0 ? (size_t)o->block : 128;
    gq G;
    memset(&G, 0, sizeof G);
    G.rows = rows;
    G.cols = cols;
    int rc = -1;
    double *diag = malloc(cols * sizeof *diag);
    if (wgrid_init(&G.g, a, scaled, W, rows, cols, e)) goto out;
    G.Wd = malloc(rows * cols * sizeof *G.Wd);
    G.Qd = malloc(rows * cols * sizeof *G.Qd);
    G.U = malloc(cols * cols * sizeof *G.U);
    G.Err = malloc(rows * bl * sizeof *G.Err);
    G.perm = malloc(cols * sizeof *G.perm);
    G.pos = malloc(cols * sizeof *G.pos);
    G.vals = malloc(rows * (G.g.B ? G.g.B : 1) * sizeof *G.vals);
    if (!diag || !G.Wd || !G.Qd || !G.U || !G.Err || !G.perm || !G.pos || !G.vals) { qs_fail(e, "out of memory"); goto out; }
    for (size_t j = 0; j < cols; j++) { diag[j] = H[j * cols + j]; G.perm[j] = j; }
    if (o->act_order) {
        dj *v = malloc(cols * sizeof *v);
        if (!v) { qs_fail(e, "out of memory"); goto out; }
        for (size_t j = 0; j < cols; j++) v[j] = (dj){diag[j], j};
        qsort(v, cols, sizeof *v, by_diag);
        for (size_t j = 0; j < cols; j++) G.perm[j] = v[j].j;
        free(v);
    }
    for (size_t i = 0; i < cols; i++) G.pos[G.perm[i]] = i;
    /* permuted copies; a dead input (diag 0) gets weight 0 and a unit diagonal, as the reference */
    for (size_t i = 0; i < cols; i++) {
        const size_t pi = G.perm[i];
        for (size_t k = 0; k < cols; k++) G.U[i * cols + k] = H[pi * cols + G.perm[k]];
        if (!(diag[pi] > 0)) G.U[i * cols + i] = 1;
        for (size_t r = 0; r < rows; r++) G.Wd[r * cols + i] = diag[pi] > 0 ? (double)W[r * cols + pi] : 0.0;
    }
    if (hinv_chol(G.U, (int)cols, o->damp, e)) goto out;
    for (size_t i1 = 0; i1 < cols; i1 += bl)
        if (batch(&G, i1, i1 + bl < cols ? i1 + bl : cols, bl, e)) goto out;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++) W[r * cols + G.perm[i]] = (float)G.Qd[r * cols + i];
    rc = 0;
out:
    free(diag);
    gq_free(&G);
    return rc;
}

double qs_gptq_layer_err(const float *Q, const float *W, size_t rows, size_t cols, const double *H)
{
    const size_t band = 256;   /* rows per product */
    double *d = malloc(band * cols * sizeof *d), *hd = malloc(band * cols * sizeof *hd), s = 0;
    if (!d || !hd) { free(d); free(hd); return NAN; }
    for (size_t r0 = 0; r0 < rows; r0 += band) {
        const size_t nr = rows - r0 < band ? rows - r0 : band;
        for (size_t i = 0; i < nr * cols; i++) d[i] = (double)Q[r0 * cols + i] - (double)W[r0 * cols + i];
        /* D H (H symmetric: its upper triangle), then sum of D .* (D H) */
        cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, (int)nr, (int)cols, 1.0, H, (int)cols, d, (int)cols, 0.0, hd,
                    (int)cols);
        for (size_t i = 0; i < nr * cols; i++) s += d[i] * hd[i];
    }
    free(d);
    free(hd);
    return s / 2;
}
