/*
** A mixed-precision plan across formats (`qscope llm sensitivity --formats ... --bits B`, docs/llm.md
** "Plans across formats"): every cell (a layer's site) takes one of several formats; cell c at format f
** costs elems[c] x bits[c][f] bits and adds kl[c][f] to the predicted KL (the additive model: the sum of
** the isolated KLs).  The plan minimises the predicted KL subject to an average of at most B bits per
** element (sum elems x bits <= B x sum elems).
**
** Solver: Lagrangian relaxation.  For a multiplier lambda every cell independently takes
** argmin_f kl[c][f] + lambda x elems[c] x bits[c][f]; as lambda falls from +inf to 0 the choices move
** along each cell's lower convex hull of (cost, KL), one hull segment at a time, in decreasing order of
** KL saved per bit — the sweep visits every Lagrangian solution, and each is optimal for its own bits
** (the Pareto front of the relaxation).  The last of them within the budget is then filled greedily:
** the change of one cell to any format of lower KL with the most KL saved per extra bit that still
** fits, until none fits (a knapsack's remainder the relaxation leaves unused).
*/
#ifndef QS_LLM_PLAN_H
#define QS_LLM_PLAN_H

#include <stddef.h>

typedef struct qs_plan_problem {
    int ncell, nfmt;
    const double *kl;        /* [cell * nfmt + f]; not finite: never chosen */
    const double *bits;      /* [cell * nfmt + f] bits per element */
    const double *elems;     /* [cell] elements (weights: parameters; activations: per token) */
} qs_plan_problem;

/* One point of the front: the solution for multiplier lambda (KL per bit), its predicted KL and its
** average bits per element. */
typedef struct qs_plan_point { double lambda, kl, bits_avg; } qs_plan_point;

typedef struct qs_plan_solution {
    int *choice;             /* [ncell] the format of each cell */
    double kl, bits_avg;     /* predicted KL, average bits */
    int lagrange_points;     /* points of the front within the budget (the sweep's last is the start of the fill) */
    int filled;              /* cells changed by the greedy fill */
    qs_plan_point *front;    /* the whole front, from the cheapest solution to the lowest-KL one */
    int nfront;
    int feasible;            /* 0: even the cheapest choice exceeds the budget (it is returned) */
} qs_plan_solution;

/* Solve for the budget (average bits per element).  0, or -1 when out of memory or the problem is
** malformed (a cell without any finite KL). */
int qs_plan_solve(const qs_plan_problem *p, double budget, qs_plan_solution *s);
void qs_plan_solution_free(qs_plan_solution *s);

/* Predicted KL and average bits of a choice. */
void qs_plan_eval_choice(const qs_plan_problem *p, const int *choice, double *kl, double *bits_avg);

#endif
