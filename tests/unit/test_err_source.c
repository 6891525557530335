/*
** Tests of the main error source wording (analysis/err_source.c) on stored metrics objects.
*/
#include "test_util.h"

#include <jansson.h>

#include "../../analysis/err_source.h"

static void both(const char *js, const char *want_short, const char *want_long)
{
    json_t *m = json_loads(js, 0, NULL);
    assert_non_null(m);
    qs_err_src s = qs_err_src_of(m);
    char a[200], b[200];
    assert_string_equal(qs_err_src_short(&s, a, sizeof a), want_short);
    assert_string_equal(qs_err_src_long(&s, b, sizeof b), want_long);
    json_decref(m);
}

static void test_sources(void **st)
{
    (void)st;
    /* the largest energy share names the source, whatever the counts say */
    both("{\"n_finite\":100,\"sum_e2\":1,\"nonfinite_frac\":0,\"underflow_frac\":0.08,\"clip_frac\":0.01,"
         "\"err_energy\":{\"underflow\":0.026,\"clip\":0.147,\"rounding\":0.827}}",
         "rounding 83%", "rounding 83% (clipping 15%, underflow 2.6%)");
    both("{\"n_finite\":100,\"sum_e2\":1,\"nonfinite_frac\":0,\"err_energy\":{\"underflow\":0.6,\"clip\":0,\"rounding\":0.4}}",
         "underflow 60%", "underflow 60% (rounding 40%)");
    both("{\"n_finite\":100,\"sum_e2\":1,\"nonfinite_frac\":0,\"err_energy\":{\"underflow\":0.0009,\"clip\":0.9951,\"rounding\":0.004}}",
         "clipping >99%", "clipping >99% (rounding 0.4%)");   /* underflow below 0.1%: left out */
    both("{\"n_finite\":100,\"sum_e2\":1,\"nonfinite_frac\":0,\"err_energy\":{\"underflow\":0,\"clip\":0,\"rounding\":1}}",
         "rounding 100%", "rounding 100%");
    /* NaN/Inf: a count, the finite error's sources after it */
    both("{\"n_finite\":10000,\"sum_e2\":\"inf\",\"nonfinite_frac\":0.0008,"
         "\"err_energy\":{\"underflow\":0.03,\"clip\":0,\"rounding\":0.97}}",
         "NaN/Inf 0.08%", "NaN/Inf 0.08% of values; finite error: rounding 97% (underflow 3%)");
    both("{\"n_finite\":4,\"sum_e2\":\"inf\",\"nonfinite_frac\":1,\"err_energy\":{\"underflow\":null,\"clip\":null,\"rounding\":null}}",
         "NaN/Inf 100%", "NaN/Inf 100% of values");
    /* no error; no finite input; a result stored without the shares */
    both("{\"n_finite\":4,\"sum_e2\":0,\"nonfinite_frac\":0,\"err_energy\":{\"underflow\":null,\"clip\":null,\"rounding\":null}}",
         "exact", "none (exact)");
    both("{\"n_finite\":0,\"sum_e2\":0,\"nonfinite_frac\":0,\"err_energy\":{\"underflow\":null,\"clip\":null,\"rounding\":null}}",
         "-", "-");
    both("{\"n_finite\":4,\"sum_e2\":2,\"nonfinite_frac\":0}", "-", "-");
}

static void test_pct(void **st)
{
    (void)st;
    char b[16];
    assert_string_equal(qs_pct(0.0008, b, sizeof b), "0.08%");
    assert_string_equal(qs_pct(0.026, b, sizeof b), "2.6%");
    assert_string_equal(qs_pct(0.0996, b, sizeof b), "10%");
    assert_string_equal(qs_pct(0.9996, b, sizeof b), ">99%");
    assert_string_equal(qs_pct(1, b, sizeof b), "100%");
    assert_string_equal(qs_pct(0, b, sizeof b), "0%");
    assert_string_equal(qs_pct(7.62939453e-06, b, sizeof b), "0.00076%");   /* 1 value in 131072 */
    assert_string_equal(qs_pct(1e-7, b, sizeof b), "<0.0001%");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_pct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
