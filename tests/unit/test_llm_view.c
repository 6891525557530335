/*
** Stored `llm eval` results as pictures (analysis/llm_eval_store.c): the KL histogram and CDF of
** qs_plot_kl drawn from a stored log-spaced histogram, and the weight-grid caveat.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_eval_store.h"

static qs_evrun run_of(qs_evcfg *c, int n, const char *wtypes)
{
    qs_evrun r;
    memset(&r, 0, sizeof r);
    snprintf(r.model, sizeof r.model, "tiny");
    snprintf(r.text, sizeof r.text, "t.txt");
    snprintf(r.wtypes, sizeof r.wtypes, "%s", wtypes);
    r.ctx = 64;
    r.cfg = c;
    r.ncfg = n;
    return r;
}

/* the histogram: one step series per config over the occupied bins, fractions of all tokens */
static void test_kl_hist(void **state)
{
    (void)state;
    qs_evcfg c[2];
    memset(c, 0, sizeof c);
    snprintf(c[0].label, sizeof c[0].label, "a=mxfp4");
    snprintf(c[1].label, sizeof c[1].label, "kv=fp8_e4m3");
    qs_klhist_add(&c[0].hist, 0.5);
    qs_klhist_add(&c[0].hist, 0.5);
    qs_klhist_add(&c[0].hist, 2.0);
    qs_klhist_add(&c[0].hist, 0);        /* KL = 0: in the note, not on the log axis */
    qs_klhist_add(&c[1].hist, 1e-4);
    qs_evrun r = run_of(c, 2, "f32 x20");
    int sel[2] = {0, 1};
    qs_figure *f = qs_plot_kl(&r, sel, 2, 0);
    assert_non_null(f);
    assert_int_equal(f->nseries, 2);
    assert_int_equal(f->series[0].kind, QS_SER_STEP);
    assert_string_equal(f->series[0].name, "a=mxfp4");
    double sum = 0, top = 0;
    for (size_t i = 0; i < f->series[0].n; i++) { sum += f->series[0].y[i]; top = fmax(top, f->series[0].y[i]); }
    assert_true(fabs(sum - 0.75) < 1e-12);   /* 3 of 4 tokens drawn */
    assert_true(fabs(top - 0.5) < 1e-12);    /* the two at 0.5 share a bin */
    /* the bins run from the one holding 0.5 to the one holding 2.0 */
    assert_true(f->series[0].x[0] <= 0.5 && 0.5 < f->series[0].x[1]);
    assert_true(f->series[0].x[f->series[0].n - 1] <= 2.0 && 2.0 < f->series[0].x[f->series[0].n]);
    assert_true(f->series[1].n == 1 && fabs(f->series[1].y[0] - 1) < 1e-12);
    assert_int_equal(f->x.scale, QS_AX_LOG10);
    assert_non_null(strstr(f->note, "1 token with KL = 0"));
    qs_fig_free(f);
}

/* the CDF: non-decreasing, ends at 1, starts at the share of KL = 0 tokens */
static void test_kl_cdf(void **state)
{
    (void)state;
    qs_evcfg c;
    memset(&c, 0, sizeof c);
    snprintf(c.label, sizeof c.label, "w=mxfp4");
    c.has_w = 1;
    for (int i = 0; i < 100; i++) qs_klhist_add(&c.hist, i < 10 ? 0 : pow(10, -6 + 0.07 * i));
    qs_evrun r = run_of(&c, 1, "q8_0 x1, f32 x5, q4_1 x14");
    int sel = 0;
    qs_figure *f = qs_plot_kl(&r, &sel, 1, 1);
    assert_non_null(f);
    assert_int_equal(f->nseries, 1);
    const qs_series *s = &f->series[0];
    assert_true(fabs(s->y[0] - 0.10) < 1e-12);
    for (size_t i = 1; i < s->n; i++) assert_true(s->y[i] >= s->y[i - 1] && s->x[i] > s->x[i - 1]);
    assert_true(fabs(s->y[s->n - 1] - 1) < 1e-12);
    qs_fig_free(f);
    char cav[300];
    qs_evrun_caveat(&r, cav, sizeof cav);
    assert_string_equal(cav, "weights already on a 4-bit grid (q4_1): weight-format results are relative to it");
    r = run_of(&c, 1, "f32 x20");
    qs_evrun_caveat(&r, cav, sizeof cav);
    assert_string_equal(cav, "");            /* full-precision weights: no caveat */
    c.has_w = 0;
    r = run_of(&c, 1, "q4_1 x14");
    qs_evrun_caveat(&r, cav, sizeof cav);
    assert_string_equal(cav, "");            /* no weight format: no caveat */
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_kl_hist),
        cmocka_unit_test(test_kl_cdf),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
