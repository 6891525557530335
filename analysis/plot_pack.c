/*
** Figures as bytes (see plot_pack.h).
*/
#include "plot_pack.h"

#include <stdlib.h>
#include <string.h>

static int put(uint8_t **b, size_t *n, size_t *cap, const void *p, size_t k)
{
    if (*n + k > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *n + k) c *= 2;
        uint8_t *nb = realloc(*b, c);
        if (!nb) return -1;
        *b = nb;
        *cap = c;
    }
    if (k) memcpy(*b + *n, p, k);
    *n += k;
    return 0;
}

static int take(const uint8_t *b, size_t len, size_t *at, void *p, size_t k)
{
    if (k > len - *at) return -1;
    memcpy(p, b + *at, k);
    *at += k;
    return 0;
}

/* a malloc'd copy of k bytes at b[*at..] (NULL, 0 when k is 0 and absent) */
static int take_dup(const uint8_t *b, size_t len, size_t *at, void **p, size_t k)
{
    if (k > len - *at) return -1;
    if (!(*p = malloc(k ? k : 1))) return -1;
    memcpy(*p, b + *at, k);
    *at += k;
    return 0;
}

int qs_fig_pack(const qs_figure *f, uint8_t **b, size_t *n, size_t *cap)
{
    uint8_t have = f != NULL;
    if (put(b, n, cap, &have, 1)) return -1;
    if (!f) return 0;
    if (put(b, n, cap, f, sizeof *f)) return -1;
    for (size_t i = 0; i < f->nseries; i++) {
        const qs_series *s = &f->series[i];
        uint64_t nl = s->name ? strlen(s->name) + 1 : 0, nx = s->x ? (s->kind == QS_SER_STEP ? s->n + 1 : s->n) : 0,
                 ny = s->y ? s->n : 0;
        uint8_t hx = s->x != NULL, hy = s->y != NULL;
        if (put(b, n, cap, s, sizeof *s) || put(b, n, cap, &nl, 8) || put(b, n, cap, s->name, nl) ||
            put(b, n, cap, &hx, 1) || put(b, n, cap, s->x, nx * sizeof(double)) || put(b, n, cap, &hy, 1) ||
            put(b, n, cap, s->y, ny * sizeof(double)))
            return -1;
    }
    if (f->nannots && put(b, n, cap, f->annots, f->nannots * sizeof *f->annots)) return -1;
    if (f->heat && (put(b, n, cap, f->heat, sizeof *f->heat) ||
                    put(b, n, cap, f->heat->v, f->heat->rows * f->heat->cols * sizeof(double))))
        return -1;
    return 0;
}

int qs_fig_unpack(const uint8_t *b, size_t len, size_t *at, qs_figure **out)
{
    *out = NULL;
    uint8_t have;
    if (take(b, len, at, &have, 1)) return -1;
    if (!have) return 0;
    qs_figure *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (take(b, len, at, f, sizeof *f)) { free(f); return -1; }
    size_t ns = f->nseries, na = f->nannots;
    int heat = f->heat != NULL;
    f->series = NULL;
    f->annots = NULL;
    f->heat = NULL;
    f->nseries = f->cap_series = f->nannots = f->cap_annots = 0;
    if (ns > len || na > len) goto bad;   /* every element takes bytes: a count beyond them is garbage */
    if (ns && !(f->series = calloc(ns, sizeof *f->series))) goto bad;
    f->cap_series = ns;
    for (size_t i = 0; i < ns; i++) {
        qs_series *s = &f->series[f->nseries];
        uint64_t nl;
        uint8_t hx, hy;
        if (take(b, len, at, s, sizeof *s)) goto bad;
        s->name = NULL;
        s->x = s->y = NULL;
        f->nseries++;
        size_t nx = s->kind == QS_SER_STEP ? s->n + 1 : s->n;
        if (s->n > len || take(b, len, at, &nl, 8)) goto bad;
        if (nl && (take_dup(b, len, at, (void **)&s->name, nl) || s->name[nl - 1])) goto bad;
        if (take(b, len, at, &hx, 1) || (hx && take_dup(b, len, at, (void **)&s->x, nx * sizeof(double)))) goto bad;
        if (take(b, len, at, &hy, 1) || (hy && take_dup(b, len, at, (void **)&s->y, s->n * sizeof(double)))) goto bad;
    }
    if (na) {
        if (!(f->annots = malloc(na * sizeof *f->annots)) || take(b, len, at, f->annots, na * sizeof *f->annots)) goto bad;
        f->nannots = f->cap_annots = na;
    }
    if (heat) {
        qs_heatmap h;
        if (take(b, len, at, &h, sizeof h) || !(f->heat = malloc(sizeof *f->heat))) goto bad;
        h.v = NULL;
        *f->heat = h;
        size_t nv = h.rows * h.cols;
        if (f->heat->rows > len || f->heat->cols > len || nv > len ||
            take_dup(b, len, at, (void **)&f->heat->v, nv * sizeof(double)))
            goto bad;
    }
    *out = f;
    return 0;
bad:
    qs_fig_free(f);
    return -1;
}
