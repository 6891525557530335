/*
** The cross-format plan solver (analysis/llm_plan.c) on synthetic tables against brute force: every
** point of the Lagrangian front is optimal for its own bits, the plan respects the budget and is no
** worse than the front's last point within it, dominated formats are never chosen; and the per-layer
** weight view (kernels/llm.c qs_llm_view_quantize_per_layer) against whole-model rounding.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_plan.h"
#include "../../kernels/format.h"
#include "../../kernels/llm.h"
#include "../../store/llm_load.h"

static uint64_t g_s = 99;
static double urand(void)
{
    g_s = g_s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_s >> 11) / 9007199254740992.0;
}

/* The least KL of any choice whose cost is <= cap (total bits), by enumeration. */
static double brute(const qs_plan_problem *p, double cap)
{
    int C = p->ncell, F = p->nfmt, ch[8] = {0};
    double best = INFINITY;
    for (;;) {
        double k = 0, b = 0;
        for (int c = 0; c < C; c++) {
            k += p->kl[c * F + ch[c]];
            b += p->elems[c] * p->bits[c * F + ch[c]];
        }
        if (b <= cap * (1 + 1e-12) && k < best) best = k;
        int c = 0;
        while (c < C && ++ch[c] == F) ch[c++] = 0;
        if (c == C) return best;
    }
}

static void random_problem(int C, int F, double *kl, double *bits, double *elems)
{
    static const double fb[] = {4.25, 4.5, 6, 8, 16};
    for (int c = 0; c < C; c++) {
        elems[c] = urand() < 0.5 ? 100 + (int)(urand() * 900) : 1 + (int)(urand() * 20);
        double scale = urand() * urand();
        for (int f = 0; f < F; f++) {
            bits[c * F + f] = fb[f] + (urand() < 0.2 ? 0.05 : 0);
            /* roughly falling with bits, with noise: some formats dominated */
            kl[c * F + f] = scale * exp(-0.6 * fb[f]) * (0.5 + urand());
        }
    }
}

static void test_front_optimal_and_budget(void **st)
{
    (void)st;
    enum { C = 6, F = 4 };
    double kl[C * F], bits[C * F], elems[C];
    for (int trial = 0; trial < 200; trial++) {
        random_problem(C, F, kl, bits, elems);
        qs_plan_problem p = {C, F, kl, bits, elems};
        double E = 0;
        for (int c = 0; c < C; c++) E += elems[c];
        double budget = 4.25 + urand() * 6;
        qs_plan_solution s;
        assert_int_equal(qs_plan_solve(&p, budget, &s), 0);
        assert_true(s.feasible);
        /* the front: bits rising, KL falling, each point optimal for its own bits */
        for (int i = 0; i < s.nfront; i++) {
            double opt = brute(&p, s.front[i].bits_avg * E);
            assert_true(fabs(opt - s.front[i].kl) <= 1e-12 * (1 + fabs(opt)));
            if (i) assert_true(s.front[i].bits_avg > s.front[i - 1].bits_avg && s.front[i].kl < s.front[i - 1].kl);
        }
        /* the plan: within budget, between the brute-force optimum and the front's last point within it */
        double k, b;
        qs_plan_eval_choice(&p, s.choice, &k, &b);
        assert_true(fabs(k - s.kl) < 1e-15 && fabs(b - s.bits_avg) < 1e-12);
        assert_true(b <= budget * (1 + 1e-12));
        double opt = brute(&p, budget * E);
        assert_true(k >= opt - 1e-15);
        assert_true(s.lagrange_points >= 1);
        assert_true(k <= s.front[s.lagrange_points - 1].kl + 1e-15);
        qs_plan_solution_free(&s);
    }
}

/* At a budget equal to a front point's bits, the plan is that point (brute-force optimal). */
static void test_budget_on_front_point(void **st)
{
    (void)st;
    enum { C = 5, F = 5 };
    double kl[C * F], bits[C * F], elems[C];
    for (int trial = 0; trial < 50; trial++) {
        random_problem(C, F, kl, bits, elems);
        qs_plan_problem p = {C, F, kl, bits, elems};
        double E = 0;
        for (int c = 0; c < C; c++) E += elems[c];
        qs_plan_solution s0;
        assert_int_equal(qs_plan_solve(&p, 100, &s0), 0);
        int i = (int)(urand() * s0.nfront);
        double budget = s0.front[i].bits_avg;
        qs_plan_solution s;
        assert_int_equal(qs_plan_solve(&p, budget, &s), 0);
        assert_true(fabs(s.kl - brute(&p, budget * E)) <= 1e-12 * (1 + s.kl));
        qs_plan_solution_free(&s);
        qs_plan_solution_free(&s0);
    }
}

/* A dominated format (more bits, more KL) is never chosen; an infeasible budget returns the cheapest
** choice, flagged; a cell without a finite KL is an error; the greedy fill uses leftover bits. */
static void test_edges(void **st)
{
    (void)st;
    /* two cells, formats: cheap (4 bits), dominated (8 bits, worse than cheap), good (16 bits) */
    double kl[] = {1.0, 2.0, 0.1, 0.5, 0.6, 0.0}, bits[] = {4, 8, 16, 4, 8, 16}, elems[] = {10, 10};
    qs_plan_problem p = {2, 3, kl, bits, elems};
    qs_plan_solution s;
    assert_int_equal(qs_plan_solve(&p, 100, &s), 0);
    assert_int_equal(s.choice[0], 2);
    assert_int_equal(s.choice[1], 2);
    for (int i = 1; i < s.nfront; i++) assert_true(s.front[i].kl < s.front[i - 1].kl);
    assert_int_equal(s.nfront, 3);   /* cheapest, then cell 0 to 16 bits, then cell 1 to 16 bits */
    qs_plan_solution_free(&s);
    assert_int_equal(qs_plan_solve(&p, 10, &s), 0);   /* 16 bits per cell on average: cell 0 gets it */
    assert_int_equal(s.choice[0], 2);
    assert_int_equal(s.choice[1], 0);
    assert_true(s.bits_avg <= 10);
    qs_plan_solution_free(&s);
    assert_int_equal(qs_plan_solve(&p, 3, &s), 0);
    assert_false(s.feasible);
    assert_int_equal(s.choice[0], 0);
    assert_int_equal(s.choice[1], 0);
    qs_plan_solution_free(&s);
    /* the fill: the relaxation stops at a big step that does not fit, a smaller later one does */
    double kl2[] = {1.0, 0.0, 0.3, 0.299}, bits2[] = {4, 16, 4, 5}, el2[] = {100, 10};
    qs_plan_problem p2 = {2, 2, kl2, bits2, el2};
    assert_int_equal(qs_plan_solve(&p2, 4.2, &s), 0);   /* 462 bits: cell 0 to 16 costs 1200 more, cell 1 to 5 costs 10 */
    assert_int_equal(s.choice[0], 0);
    assert_int_equal(s.choice[1], 1);
    assert_int_equal(s.filled, 1);
    assert_int_equal(s.lagrange_points, 1);
    qs_plan_solution_free(&s);
    double kl3[] = {NAN, INFINITY};
    qs_plan_problem p3 = {1, 2, kl3, bits, elems};
    assert_int_equal(qs_plan_solve(&p3, 10, &s), -1);
}

/* qs_llm_view_quantize_per_layer with one format everywhere equals whole-model rounding's layers; a
** NULL layer aliases the source. */
static void test_view_per_layer(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    const int L = f.m.c.n_layer;
    qs_apply mx, nv;
    memset(&mx, 0, sizeof mx);
    mx.f = qs_format_find("mxfp4");
    mx.axis = 1;
    nv = mx;
    nv.f = qs_format_find("nvfp4");
    qs_llm_model all, one, v;
    assert_int_equal(qs_llm_clone(&all, &f.m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&all, &mx, 1, &e), 0);
    assert_int_equal(qs_llm_clone(&one, &f.m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&one, &nv, 1, &e), 0);
    const qs_apply **w = calloc((size_t)L, sizeof *w);
    for (int l = 0; l < L; l++) w[l] = l == 0 ? NULL : l % 2 ? &mx : &nv;
    assert_int_equal(qs_llm_view_quantize_per_layer(&v, &f.m, w, 1, &e), 0);
    size_t n = (size_t)f.m.c.ffn * f.m.c.dim;
    assert_ptr_equal(v.L[0].w_down, f.m.L[0].w_down);
    for (int l = 1; l < L; l++) {
        const qs_llm_model *ref = l % 2 ? &all : &one;
        assert_memory_equal(v.L[l].w_down, ref->L[l].w_down, n * sizeof(float));
        assert_memory_equal(v.L[l].wq, ref->L[l].wq, qs_llm_q_dim(&f.m.c) * f.m.c.dim * sizeof(float));
    }
    qs_llm_view_free(&v);
    free(w);
    qs_llm_free(&all);
    qs_llm_free(&one);
    qs_llm_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_optimal_and_budget),
        cmocka_unit_test(test_budget_on_front_point),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_view_per_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
