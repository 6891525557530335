/*
** Figures from a stored tensor in one streaming pass (see plot_fly.h).
*/
#include "plot_fly.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_store.h"
#include "../kernels/format.h"

static void hist_init(qs_hist *h, int kind, double lo, double hi, int nbins)
{
    memset(h, 0, sizeof *h);
    h->kind = kind;
    h->lo = lo;
    h->hi = hi;
    h->nbins = nbins;
    h->counts = calloc((size_t)nbins, sizeof *h->counts);
}

static void hist_add_log2(qs_hist *h, double v)
{
    if (!isfinite(v)) { h->nonfinite++; return; }
    v = fabs(v);
    if (v == 0) { h->zero++; return; }
    double t = log2(v);
    if (t < h->lo) { h->under++; return; }
    if (t >= h->hi) { h->over++; return; }
    int b = (int)((t - h->lo) / (h->hi - h->lo) * h->nbins);
    if (b >= h->nbins) b = h->nbins - 1;
    if (b < 0) b = 0;
    h->counts[b]++;
}


/* Tile-row F->trow is complete: its block RMSEs into the cells, then the next one starts empty. */
static void tiles_flush(qs_fly *F)
{
    size_t rr = (size_t)(F->trow * F->R / F->trows);
    for (uint64_t c = 0; c < F->tcols; c++) {
        double x = F->t_n[c] ? (float)sqrt(F->t_e2[c] / F->t_n[c]) : NAN;   /* the float of a stored block RMSE */
        if (!isfinite(x) || !(x > 0)) continue;
        size_t cc = (size_t)(c * F->C / F->tcols);
        F->cell_sum[rr * F->C + cc] += x;
        F->cell_cnt[rr * F->C + cc] += 1;
    }
    memset(F->t_e2, 0, F->tcols * sizeof *F->t_e2);
    memset(F->t_n, 0, F->tcols * sizeof *F->t_n);
    F->trow++;
}

static int fly_write(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e)
{
    qs_fly *F = ctx;
    if (n > F->xcap) {
        float *nb = realloc(F->xbuf, n * sizeof *nb);
        if (!nb) return qs_fail(e, "out of memory");
        F->xbuf = nb;
        F->xcap = n;
    }
    if (qs_treader_read_f32(F->r, start, n, F->xbuf, e)) return -1;
    for (size_t i = 0; i < n; i++) {
        double x = F->xbuf[i], q = y ? y[i] : x;
        if (F->want_vals) hist_add_log2(&F->val, x);
        if (F->want_q) hist_add_log2(&F->qval, q);
        if (!isfinite(x)) continue;
        F->n_finite++;
        double err = q - x;
        if (F->want_err) {
            if (!isfinite(q)) { F->rel.nonfinite++; F->abs.nonfinite++; }
            else {
                hist_add_log2(&F->abs, err);
                hist_add_log2(&F->rel, fabs(err) / fmax(fabs(x), F->floor_abs));
            }
            F->sum_x2 += x * x;
            F->sum_e2 += isfinite(err) ? err * err : INFINITY;
        }
        if (F->want_tiles) {
            uint64_t idx = start + i, r = idx / F->cols, c = idx % F->cols;
            uint64_t tr = F->axis ? r : r / F->tb;
            while (F->trow < tr) tiles_flush(F);
            uint64_t t = F->axis ? c / F->tb : c;
            F->t_e2[t] += isfinite(err) ? err * err : INFINITY;
            F->t_n[t]++;
        }
    }
    return 0;
}

void qs_fly_free(qs_fly *F)
{
    free(F->rel.counts); free(F->abs.counts); free(F->val.counts); free(F->qval.counts);
    free(F->t_e2); free(F->t_n); free(F->xbuf); free(F->cell_sum); free(F->cell_cnt);
}


int qs_plot_tensor_open(qs_db *db, const char *name, qs_plot_tensor *T, qs_err *e)
{
    memset(T, 0, sizeof *T);
    T->db = db;
    if (qs_tensor_get(db, name, &T->t, e)) return -1;
    T->have_t = 1;
    if (!(T->r = qs_treader_open(db, &T->t, e))) return -1;
    qs_tensor_matrix_view(T->t.shape, T->t.ndim, &T->rows, &T->cols);
    qs_tensor_stats s;
    int found = 0;
    if (qs_stats_load(db, T->t.id, &s, &found, e) == 0 && found && isfinite(s.absmax)) {
        T->absmax = s.absmax;
    } else {
        float am = 0;
        if (qs_format_absmax(qs_treader_read_cb, T->r, T->t.numel, &am, e)) return -1;
        T->absmax = am;
    }
    return 0;
}

void qs_plot_tensor_close(qs_plot_tensor *T)
{
    qs_treader_close(T->r);
    if (T->have_t) qs_tensor_rec_free(&T->t);
}

/* One pass over the tensor under format a (a == NULL: values only, no quantization). */
int qs_fly_run(qs_plot_tensor *T, const qs_apply *a, qs_fly *F, qs_err *e)
{
    F->r = T->r;
    F->rows = T->rows;
    F->cols = T->cols;
    F->absmax = T->absmax;
    F->floor_abs = QS_REL_FLOOR_DEFAULT * (T->absmax > 0 ? T->absmax : 1);
    double top = T->absmax > 0 ? ceil(log2(T->absmax)) + 1 : 1;
    if (F->want_err) {
        hist_init(&F->rel, 0, -40, 4, 44 * BINS_PER_BINADE);
        hist_init(&F->abs, 0, top - 48, top, 48 * BINS_PER_BINADE);
    }
    if (F->want_vals) hist_init(&F->val, 0, top - 48, top, 48 * BINS_PER_BINADE);
    if (F->want_q) hist_init(&F->qval, 0, top - 48, top, 48 * BINS_PER_BINADE);
    if ((F->want_err && (!F->rel.counts || !F->abs.counts)) || (F->want_vals && !F->val.counts) ||
        (F->want_q && !F->qval.counts))
        return qs_fail(e, "out of memory");
    if (F->want_tiles) {
        F->axis = a ? a->axis : 1;
        size_t B = a ? qs_format_block(a->f, &a->o) : 0;
        if (a && a->gran != QS_GRAN_BLOCK) B = 0;
        F->tb = B >= 2 ? B : 32;
        F->trows = F->axis ? T->rows : (T->rows + F->tb - 1) / F->tb;
        F->tcols = F->axis ? (T->cols + F->tb - 1) / F->tb : T->cols;
        F->R = F->trows > HEAT_CELLS ? HEAT_CELLS : (size_t)F->trows;
        F->C = F->tcols > HEAT_CELLS ? HEAT_CELLS : (size_t)F->tcols;
        if (!F->trows || !F->tcols) F->R = F->C = 0;
        F->t_e2 = calloc(F->tcols ? F->tcols : 1, sizeof *F->t_e2);
        F->t_n = calloc(F->tcols ? F->tcols : 1, sizeof *F->t_n);
        size_t ncell = F->R * F->C;
        F->cell_sum = calloc(ncell ? ncell : 1, sizeof *F->cell_sum);
        F->cell_cnt = calloc(ncell ? ncell : 1, sizeof *F->cell_cnt);
        if (!F->t_e2 || !F->t_n || !F->cell_sum || !F->cell_cnt) return qs_fail(e, "out of memory");
    }
    if (!a) {
        /* values only: read in chunks */
        float *buf = malloc((1u << 16) * sizeof *buf);
        if (!buf) return qs_fail(e, "out of memory");
        for (uint64_t s = 0; s < T->t.numel; s += 1u << 16) {
            size_t k = T->t.numel - s > (1u << 16) ? (1u << 16) : (size_t)(T->t.numel - s);
            if (qs_treader_read_f32(T->r, s, k, buf, e) || fly_write(F, s, k, NULL, e)) { free(buf); return -1; }
        }
        free(buf);
        return 0;
    }
    if (qs_format_apply(a, T->rows, T->cols, qs_treader_read_cb, T->r, fly_write, F, e)) return -1;
    if (F->want_tiles) while (F->trow < F->trows) tiles_flush(F);
    return 0;
}

/* The value histogram: |x| and, under a format, |Q(x)| from one pass, with the format's grid for a
** block whose absmax is amax (<= 0: the tensor's), each labelled (see plot_fly.h). */
qs_figure *qs_value_hist_fig(qs_plot_tensor *T, const qs_apply *a, const char *label, double amax, qs_err *e)
{
    qs_fly F = {0};
    F.want_vals = 1;
    F.want_q = a != NULL;
    qs_figure *fig = NULL;
    double *grid = NULL, *edges = NULL, *c = NULL;
    size_t ng = 0;
    if (qs_fly_run(T, a, &F, e)) goto out;
    /* block formats: the grid of one block, whose absmax is --amax or the tensor's */
    double gam = amax > 0 ? amax : T->absmax;
    if (a && qs_format_grid(a->f, &a->o, gam, &grid, &ng, e)) goto out;
    char gname[160], title[320];
    int plain = a && a->f->meta_bytes == 0 && a->f->block == 1;
    if (a && plain) snprintf(gname, sizeof gname, "%.*s values", QS_CLIP(label, 95));
    else if (a) snprintf(gname, sizeof gname, "%.*s values (block absmax %.3g)", QS_CLIP(label, 95), gam);
    snprintf(title, sizeof title, "values of %.*s%s%.*s", QS_CLIP(T->t.name, 150), a ? " on the grid of " : "",
             QS_CLIP(a ? label : "", 95));
    if (!(fig = qs_plot_value_hist(title, &F.val, grid, ng, a ? gname : NULL))) { qs_fail(e, "out of memory"); goto out; }
    if (a) {
        edges = malloc(((size_t)F.qval.nbins + 1) * sizeof *edges);
        c = malloc((size_t)F.qval.nbins * sizeof *c);
        if (!edges || !c) { qs_fig_free(fig); fig = NULL; qs_fail(e, "out of memory"); goto out; }
        for (int k = 0; k <= F.qval.nbins; k++) edges[k] = exp2(F.qval.lo + (F.qval.hi - F.qval.lo) * k / F.qval.nbins);
        for (int k = 0; k < F.qval.nbins; k++) c[k] = (double)F.qval.counts[k];
        char qn[160];
        snprintf(qn, sizeof qn, "Q(x) under %.95s", label);
        qs_series *s = qs_fig_add(fig, QS_SER_STEP, qn, edges, c, (size_t)F.qval.nbins);
        if (s) { s->color = 3; s->dash = QS_DASH_SOLID; s->width = 1.4; }
        if (F.qval.zero > F.val.zero)
            qs_fig_annotate(fig, 0.02, 0.88, 1, "Q(x) = 0: %llu (underflow %llu)", (unsigned long long)F.qval.zero,
                            (unsigned long long)(F.qval.zero - F.val.zero));
        if (!grid) qs_fig_annotate(fig, 0.02, 0.81, 1, "grid of %.*s too dense to draw", QS_CLIP(label, 95));
    }
out:
    free(edges);
    free(c);
    free(grid);
    qs_fly_free(&F);
    return fig;
}

qs_figure *qs_value_hist_figure(qs_db *db, const char *tensor, const qs_apply *a, const char *label, double amax, qs_err *e)
{
    qs_plot_tensor T;
    qs_figure *fig = NULL;
    if (!qs_plot_tensor_open(db, tensor, &T, e)) fig = qs_value_hist_fig(&T, a, label, amax, e);
    qs_plot_tensor_close(&T);
    return fig;
}

