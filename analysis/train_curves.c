/*
** Loss curves of training runs, grouped over seeds, and their figures (see train_curves.h).
*/
#include "train_curves.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

double qs_t95(int df)
{
    static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                               2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060,
                               2.056, 2.052, 2.048, 2.045, 2.042};
    return df < 1 ? NAN : df <= 30 ? t[df] : 1.96;
}

/* The options JSON without the seed and the checkpoint directory (each seed of a sweep writes its
** own), canonical; a text that is not JSON stays as it is. */
static char *options_key(const char *opts)
{
    json_t *j = json_loads(opts ? opts : "", 0, NULL);
    if (!json_is_object(j)) { json_decref(j); return strdup(opts ? opts : ""); }
    json_object_del(j, "seed");
    json_object_del(j, "out");
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

int qs_train_same_config(const qs_train_run_item *a, const qs_train_run_item *b)
{
    if (strcmp(a->recipe, b->recipe) || strcmp(a->model, b->model)) return 0;
    char *x = options_key(a->options), *y = options_key(b->options);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

void qs_loss_curves_free(qs_loss_curve *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) { free(c[i].x); free(c[i].mean); free(c[i].lo); free(c[i].hi); }
    free(c);
}

/* Mean and band of v[0..k) by the group's band kind. */
static void summarise(const double *v, int k, qs_band band, double *mean, double *lo, double *hi)
{
    double s = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < k; i++) { s += v[i]; mn = fmin(mn, v[i]); mx = fmax(mx, v[i]); }
    *mean = k ? s / k : NAN;
    *lo = *hi = NAN;
    if (k < 2 || band == QS_BAND_NONE) return;
    if (band == QS_BAND_MINMAX || k < 3) { *lo = mn; *hi = mx; return; }
    double ss = 0;
    for (int i = 0; i < k; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    double h = qs_t95(k - 1) * sqrt(ss / (k - 1)) / sqrt((double)k);
    *lo = *mean - h;
    *hi = *mean + h;
}

static int cmp_int(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }

typedef struct run_pts { int *step; double *v; size_t n; double last; } run_pts;

/* The measured points of one run: (0, val0) and the steps' val_loss, or the steps' train_loss. */
static int run_points(qs_db *db, const qs_train_run_item *r, int val, run_pts *p, qs_err *e)
{
    qs_train_step_row *s;
    size_t n;
    memset(p, 0, sizeof *p);
    p->last = NAN;
    if (qs_train_run_steps(db, r->id, &s, &n, e)) return -1;
    p->step = malloc((n + 1) * sizeof *p->step);
    p->v = malloc((n + 1) * sizeof *p->v);
    if (!p->step || !p->v) { free(s); free(p->step); free(p->v); return qs_fail(e, "out of memory"); }
    if (val && isfinite(r->val0)) { p->step[p->n] = 0; p->v[p->n++] = r->val0; }
    for (size_t i = 0; i < n; i++) {
        double y = val ? s[i].val_loss : s[i].train_loss;
        if (isfinite(y)) { p->step[p->n] = s[i].step; p->v[p->n++] = y; }
    }
    free(s);
    /* val0 is no final value: a run without a measured step has none */
    p->last = val && isfinite(r->val_final) ? r->val_final : p->n && p->step[p->n - 1] > 0 ? p->v[p->n - 1] : NAN;
    return 0;
}

/* One curve from the runs idx[0..k). */
static int build(qs_db *db, const qs_train_run_item *runs, const size_t *idx, int k, int val, qs_loss_curve *c, qs_err *e)
{
    const qs_train_run_item *r0 = &runs[idx[0]];
    memset(c, 0, sizeof *c);
    snprintf(c->recipe, sizeof c->recipe, "%s", r0->recipe);
    c->model = r0->model;
    c->nruns = k;
    c->band = k >= 3 ? QS_BAND_T95 : k == 2 ? QS_BAND_MINMAX : QS_BAND_NONE;
    if (k == 1) snprintf(c->label, sizeof c->label, "%s", r0->name);
    else snprintf(c->label, sizeof c->label, "%.60s (%d seeds, %s)", r0->recipe, k, k >= 3 ? "95% t-interval" : "min..max");
    run_pts *p = calloc((size_t)k, sizeof *p);
    double *tmp = malloc((size_t)k * sizeof *tmp);
    int *all = NULL, rc = -1;
    size_t tot = 0;
    if (!p || !tmp) { qs_fail(e, "out of memory"); goto out; }
    for (int i = 0; i < k; i++) {
        if (run_points(db, &runs[idx[i]], val, &p[i], e)) goto out;
        tot += p[i].n;
    }
    if (!(all = malloc((tot + 1) * sizeof *all))) { qs_fail(e, "out of memory"); goto out; }
    size_t m = 0;
    for (int i = 0; i < k; i++) { memcpy(all + m, p[i].step, p[i].n * sizeof *all); m += p[i].n; }
    qsort(all, m, sizeof *all, cmp_int);
    size_t u = 0;
    for (size_t i = 0; i < m; i++) if (!u || all[u - 1] != all[i]) all[u++] = all[i];
    c->x = malloc((u + 1) * sizeof(double));
    c->mean = malloc((u + 1) * sizeof(double));
    c->lo = malloc((u + 1) * sizeof(double));
    c->hi = malloc((u + 1) * sizeof(double));
    if (!c->x || !c->mean || !c->lo || !c->hi) { qs_fail(e, "out of memory"); goto out; }
    size_t *at = calloc((size_t)k, sizeof *at);
    if (!at) { qs_fail(e, "out of memory"); goto out; }
    for (size_t j = 0; j < u; j++) {   /* every run's points are in step order: walk them together */
        int kk = 0;
        for (int i = 0; i < k; i++) {
            while (at[i] < p[i].n && p[i].step[at[i]] < all[j]) at[i]++;
            if (at[i] < p[i].n && p[i].step[at[i]] == all[j]) tmp[kk++] = p[i].v[at[i]];
        }
        c->x[j] = all[j];
        summarise(tmp, kk, c->band, &c->mean[j], &c->lo[j], &c->hi[j]);
    }
    free(at);
    c->n = u;
    int kk = 0;
    for (int i = 0; i < k; i++) if (isfinite(p[i].last)) tmp[kk++] = p[i].last;
    summarise(tmp, kk, c->band, &c->final, &c->final_lo, &c->final_hi);
    rc = 0;
out:
    for (int i = 0; p && i < k; i++) { free(p[i].step); free(p[i].v); }
    free(p);
    free(tmp);
    free(all);
    return rc;
}

int qs_loss_curves(qs_db *db, const qs_train_run_item *runs, size_t n, int val, qs_loss_curve **out, size_t *nout,
                   qs_err *e)
{
    *out = NULL;
    *nout = 0;
    qs_loss_curve *c = calloc(n ? n : 1, sizeof *c);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    char *used = calloc(n ? n : 1, 1);
    size_t nc = 0;
    int rc = 0;
    if (!c || !idx || !used) { rc = qs_fail(e, "out of memory"); goto out; }
    for (size_t i = 0; i < n && !rc; i++) {
        if (used[i]) continue;
        int k = 0;
        for (size_t j = i; j < n; j++)
            if (!used[j] && (j == i || qs_train_same_config(&runs[i], &runs[j]))) { idx[k++] = j; used[j] = 1; }
        if (build(db, runs, idx, k, val, &c[nc], e)) rc = -1;
        nc++;   /* a failed build's arrays are freed with the rest */
    }
out:
    free(idx);
    free(used);
    if (rc) { qs_loss_curves_free(c, nc); return -1; }
    *out = c;
    *nout = nc;
    return 0;
}

/* ---- figures ---- */

static int add_curve(qs_figure *f, const char *name, const double *x, const double *y, size_t n, int color, qs_dash dash,
                     double width)
{
    qs_series *s = qs_fig_add(f, QS_SER_LINE, name, x, y, n);
    if (!s) return -1;
    s->color = color;
    s->marker = n <= 12 && name ? (qs_marker)(1 + color % (QS_MK_COUNT - 1)) : QS_MK_NONE;
    s->dash = dash;
    if (width > 0) s->width = width;
    return 0;
}

qs_figure *qs_plot_loss(const char *title, const qs_loss_curve *c, size_t n, int val, int logy)
{
    qs_figure *f = qs_fig_new(title ? title : val ? "validation loss of training runs" : "training loss of training runs");
    if (!f) return NULL;
    qs_axis_set(&f->x, QS_AX_LINEAR, "step");
    f->x.integer = 1;
    qs_axis_set(&f->y, logy ? QS_AX_LOG10 : QS_AX_LINEAR, val ? "validation loss (nats/token)" : "training loss (nats/token)");
    int bands = 0;
    for (size_t i = 0; i < n; i++) {
        int col = (int)(i % QS_PALETTE_N);
        if (c[i].band != QS_BAND_NONE) {   /* first: the mean is drawn over its band */
            bands |= c[i].band == QS_BAND_T95 ? 2 : 1;
            if (add_curve(f, NULL, c[i].x, c[i].lo, c[i].n, col, QS_DASH_DOTTED, 0.8) ||
                add_curve(f, NULL, c[i].x, c[i].hi, c[i].n, col, QS_DASH_DOTTED, 0.8)) goto oom;
        }
        if (add_curve(f, c[i].label, c[i].x, c[i].mean, c[i].n, col, (qs_dash)(i / QS_PALETTE_N % QS_DASH_COUNT), 0)) goto oom;
    }
    if (bands)
        snprintf(f->note, sizeof f->note, "lines: mean over seeds; dotted: its band (%s)",
                 bands == 3 ? "min..max with 2 seeds, 95% t-interval with 3 or more" : bands == 2 ? "95% t-interval" : "min..max");
    return f;
oom:
    qs_fig_free(f);
    return NULL;
}

qs_figure *qs_plot_loss_gap(const char *title, const qs_loss_curve *c, size_t n, const qs_loss_curve *base)
{
    char t[256];
    snprintf(t, sizeof t, "relative gap to %.200s", base->label);
    qs_figure *f = qs_fig_new(title ? title : t);
    if (!f) return NULL;
    qs_axis_set(&f->x, QS_AX_LINEAR, "step");
    f->x.integer = 1;
    qs_axis_set(&f->y, QS_AX_LINEAR, "(loss - baseline) / baseline (%)");
    double *y = malloc((base->n + 1) * sizeof *y), *x = malloc((base->n + 1) * sizeof *x);
    if (!x || !y) goto oom;
    for (size_t i = 0; i < n; i++) {
        if (&c[i] == base || (c[i].n == base->n && !strcmp(c[i].label, base->label))) continue;
        size_t m = 0, b = 0;
        for (size_t j = 0; j < c[i].n; j++) {   /* the steps both curves measured */
            while (b < base->n && base->x[b] < c[i].x[j]) b++;
            if (b < base->n && base->x[b] == c[i].x[j] && base->mean[b] != 0) {
                x[m] = c[i].x[j];
                y[m++] = 100 * (c[i].mean[j] - base->mean[b]) / base->mean[b];
            }
        }
        if (add_curve(f, c[i].label, x, y, m, (int)(i % QS_PALETTE_N), (qs_dash)(i / QS_PALETTE_N % QS_DASH_COUNT), 0))
            goto oom;
    }
    double zero = 0;
    qs_series *z = qs_fig_add(f, QS_SER_HLINE, NULL, NULL, &zero, 1);
    if (!z) goto oom;
    z->color = QS_COLOR_GREY;
    z->faint = 1;
    free(x);
    free(y);
    return f;
oom:
    free(x);
    free(y);
    qs_fig_free(f);
    return NULL;
}
