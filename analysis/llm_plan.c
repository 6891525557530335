/*
** The Lagrangian plan solver (see llm_plan.h).
*/
#include "llm_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct seg { int cell, from, to; double eff, dcost, dkl; int k; } seg;

static double cost_of(const qs_plan_problem *p, int c, int f) { return p->elems[c] * p->bits[(size_t)c * p->nfmt + f]; }
static double kl_of(const qs_plan_problem *p, int c, int f) { return p->kl[(size_t)c * p->nfmt + f]; }

void qs_plan_eval_choice(const qs_plan_problem *p, const int *choice, double *kl, double *bits_avg)
{
    double k = 0, b = 0, n = 0;
    for (int c = 0; c < p->ncell; c++) {
        k += kl_of(p, c, choice[c]);
        b += cost_of(p, c, choice[c]);
        n += p->elems[c];
    }
    *kl = k;
    *bits_avg = n > 0 ? b / n : 0;
}

static int seg_cmp(const void *a, const void *b)
{
    const seg *x = a, *y = b;
    if (x->eff != y->eff) return x->eff > y->eff ? -1 : 1;
    if (x->cell != y->cell) return x->cell < y->cell ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* The formats of cell c on its lower convex hull of (cost, KL), cheapest first, into h; returns their
** count (0: no finite KL). */
static int cell_hull(const qs_plan_problem *p, int c, int *idx, int *h)
{
    const int F = p->nfmt;
    int n = 0;
    for (int f = 0; f < F; f++)
        if (isfinite(kl_of(p, c, f)) && isfinite(cost_of(p, c, f))) idx[n++] = f;
    for (int i = 1; i < n; i++)   /* insertion sort by cost, then KL, then format index */
        for (int j = i; j > 0; j--) {
            int a = idx[j - 1], b = idx[j];
            double ca = cost_of(p, c, a), cb = cost_of(p, c, b);
            int swap = ca > cb || (ca == cb && (kl_of(p, c, a) > kl_of(p, c, b) || (kl_of(p, c, a) == kl_of(p, c, b) && a > b)));
            if (!swap) break;
            idx[j - 1] = b;
            idx[j] = a;
        }
    int m = 0;
    for (int i = 0; i < n; i++) {
        int f = idx[i];
        if (m && !(kl_of(p, c, f) < kl_of(p, c, h[m - 1]))) continue;   /* dominated: costs more, saves nothing */
        while (m >= 2) {   /* keep the KL saved per bit strictly decreasing along the hull */
            int a = h[m - 2], b = h[m - 1];
            double e1 = (kl_of(p, c, a) - kl_of(p, c, b)) / (cost_of(p, c, b) - cost_of(p, c, a));
            double e2 = (kl_of(p, c, b) - kl_of(p, c, f)) / (cost_of(p, c, f) - cost_of(p, c, b));
            if (e1 > e2) break;
            m--;
        }
        h[m++] = f;
    }
    return m;
}

/* The greedy fill: while some cell's change to a format of lower KL fits in the budget, take the one
** with the most KL saved per extra bit (ties: lower cell, lower format index). */
static int greedy_fill(const qs_plan_problem *p, int *choice, double *cost, double cap)
{
    int changes = 0;
    for (;;) {
        int bc = -1, bf = -1;
        double best = -1;
        for (int c = 0; c < p->ncell; c++)
            for (int f = 0; f < p->nfmt; f++) {
                double dk = kl_of(p, c, choice[c]) - kl_of(p, c, f), dc = cost_of(p, c, f) - cost_of(p, c, choice[c]);
                if (!isfinite(kl_of(p, c, f)) || !(dk > 0) || *cost + dc > cap) continue;
                double eff = dc > 0 ? dk / dc : INFINITY;
                if (eff > best) { best = eff; bc = c; bf = f; }
            }
        if (bc < 0) return changes;
        *cost += cost_of(p, bc, bf) - cost_of(p, bc, choice[bc]);
        choice[bc] = bf;
        changes++;
    }
}

void qs_plan_solution_free(qs_plan_solution *s)
{
    free(s->choice);
    free(s->front);
    memset(s, 0, sizeof *s);
}

int qs_plan_solve(const qs_plan_problem *p, double budget, qs_plan_solution *s)
{
    memset(s, 0, sizeof *s);
    const int C = p->ncell, F = p->nfmt;
    if (C < 1 || F < 1) return -1;
    int *idx = malloc((size_t)F * sizeof *idx), *hull = malloc((size_t)C * F * sizeof *hull), *nh = calloc((size_t)C, sizeof *nh);
    seg *sg = malloc((size_t)C * F * sizeof *sg);
    s->choice = malloc((size_t)C * sizeof *s->choice);
    s->front = malloc(((size_t)C * F + 1) * sizeof *s->front);
    int rc = -1, ns = 0;
    if (!idx || !hull || !nh || !sg || !s->choice || !s->front) goto done;
    double elems = 0, cost = 0, kl = 0;
    for (int c = 0; c < C; c++) {
        int *h = hull + (size_t)c * F;
        if (!(nh[c] = cell_hull(p, c, idx, h))) goto done;
        s->choice[c] = h[0];
        cost += cost_of(p, c, h[0]);
        kl += kl_of(p, c, h[0]);
        elems += p->elems[c];
        for (int k = 0; k + 1 < nh[c]; k++) {
            seg *x = &sg[ns++];
            x->cell = c;
            x->k = k;
            x->from = h[k];
            x->to = h[k + 1];
            x->dcost = cost_of(p, c, h[k + 1]) - cost_of(p, c, h[k]);
            x->dkl = kl_of(p, c, h[k]) - kl_of(p, c, h[k + 1]);
            x->eff = x->dkl / x->dcost;
        }
    }
    qsort(sg, (size_t)ns, sizeof *sg, seg_cmp);   /* a cell's own segments stay in hull order: their eff decreases */
    const double cap = budget * elems * (1 + 1e-12) + 1e-9;
    s->feasible = cost <= cap;
    s->front[s->nfront++] = (qs_plan_point){INFINITY, kl, cost / elems};
    int inside = s->feasible;
    s->lagrange_points = s->feasible;
    double pcost = cost;
    for (int i = 0; i < ns; i++) {
        cost += sg[i].dcost;
        kl -= sg[i].dkl;
        s->front[s->nfront++] = (qs_plan_point){sg[i].eff, kl, cost / elems};
        if (inside && cost <= cap) {
            s->choice[sg[i].cell] = sg[i].to;
            s->lagrange_points++;
            pcost = cost;
        } else
            inside = 0;
    }
    if (s->feasible) s->filled = greedy_fill(p, s->choice, &pcost, cap);
    qs_plan_eval_choice(p, s->choice, &s->kl, &s->bits_avg);
    rc = 0;
done:
    free(idx); free(hull); free(nh); free(sg);
    if (rc) qs_plan_solution_free(s);
    return rc;
}
