/*
** Intervals over chunks and paired comparisons of `llm eval` (analysis/llm_eval_ci.h), on cases
** checkable by hand: chunk means 1, 2, 3 give the mean 2 with the standard error of three means
** (1/sqrt 3, not the per-token one) and the t(2) interval; a bootstrap of equal chunks collapses to
** the value; two chunks with means 0 and 1 resample to 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_eval_ci.h"

static void test_parse(void **state)
{
    (void)state;
    qs_evci_opts o;
    assert_int_equal(qs_evci_parse("delta", &o), 0);
    assert_int_equal(o.method, QS_EVCI_DELTA);
    assert_int_equal(qs_evci_parse("bootstrap", &o), 0);
    assert_int_equal(o.method, QS_EVCI_BOOTSTRAP);
    assert_int_equal(o.resamples, QS_EVCI_DEFAULT_B);
    assert_int_equal(o.seed, QS_EVCI_DEFAULT_SEED);
    assert_int_equal(qs_evci_parse("bootstrap:500", &o), 0);
    assert_int_equal(o.resamples, 500);
    assert_int_equal(qs_evci_parse("bootstrap:500:7", &o), 0);
    assert_true(o.resamples == 500 && o.seed == 7);
    const char *bad[] = {"", "boot", "bootstrapx", "bootstrap:", "bootstrap:5", "bootstrap:x", "bootstrap:100:",
                         "bootstrap:100:-1", "bootstrap:100:7x", "bootstrap:2000000", "Delta"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(qs_evci_parse(bad[i], &o), -1);
}

static void test_t975(void **state)
{
    (void)state;
    assert_true(isnan(qs_evci_t975(0)));
    assert_true(fabs(qs_evci_t975(1) - 12.706) < 1e-9);
    assert_true(fabs(qs_evci_t975(2) - 4.303) < 1e-9);
    assert_true(fabs(qs_evci_t975(30) - 2.042) < 1e-9);
    assert_true(fabs(qs_evci_t975(40) - 2.0211) < 2e-4);    /* tables: 2.021 */
    assert_true(fabs(qs_evci_t975(1000) - 1.9623) < 2e-4);
}

/* chunk means 1, 2, 3 (two tokens each): 2 +- t(2) / sqrt(3) */
static void test_chunk_t(void **state)
{
    (void)state;
    const double s[] = {2, 4, 6}, n[] = {2, 2, 2};
    qs_evci_est x;
    double se;
    qs_evci_chunk_t(s, n, 3, &x, &se);
    assert_true(fabs(x.v - 2) < 1e-12);
    assert_true(fabs(se - 1 / sqrt(3)) < 1e-12);
    assert_true(fabs(x.lo - (2 - 4.303 / sqrt(3))) < 1e-9 && fabs(x.hi - (2 + 4.303 / sqrt(3))) < 1e-9);
    /* token-weighted: a chunk of 4 tokens at mean 1 and one of 1 token at mean 6 give 2 */
    const double s2[] = {4, 6}, n2[] = {4, 1};
    qs_evci_chunk_t(s2, n2, 2, &x, &se);
    assert_true(fabs(x.v - 2) < 1e-12);
    /* residuals 4 - 2*4 = -4 and 6 - 2 = 4: sqrt(2 * 32) / 5 */
    assert_true(fabs(se - sqrt(64.0) / 5) < 1e-12);
    /* one chunk with tokens: an estimate, no interval; no tokens: nothing */
    const double s3[] = {3, 0}, n3[] = {3, 0};
    qs_evci_chunk_t(s3, n3, 2, &x, &se);
    assert_true(x.v == 1 && isnan(x.lo) && isnan(x.hi) && isnan(se));
    const double z[] = {0, 0};
    qs_evci_chunk_t(z, z, 2, &x, &se);
    assert_true(isnan(x.v));
}

static void test_bootstrap(void **state)
{
    (void)state;
    qs_evci_opts o = {QS_EVCI_BOOTSTRAP, 4000, 1};
    qs_err e = {{0}};
    qs_evci_est x;
    /* equal chunks: every resample has the same mean */
    const double s[] = {6, 6, 6}, n[] = {2, 2, 2};
    assert_int_equal(qs_evci_boot_ratio(s, n, 3, &o, &x, &e), 0);
    assert_true(x.v == 3 && x.lo == 3 && x.hi == 3);
    /* means 0 and 1: resamples 0, 1/2, 1 with 1/4, 1/2, 1/4, so the 2.5% and 97.5% points are 0 and 1 */
    const double s2[] = {0, 1}, n2[] = {1, 1};
    assert_int_equal(qs_evci_boot_ratio(s2, n2, 2, &o, &x, &e), 0);
    assert_true(x.v == 0.5 && x.lo == 0 && x.hi == 1);
    int half = 0;
    for (int b = 0; b < 4000; b++) half += qs_evci_draw(1, b, 0, 2) != qs_evci_draw(1, b, 1, 2);
    assert_true(half > 1800 && half < 2200);
    /* deterministic for a seed; another seed, another interval (ten unequal chunks) */
    double s3[10], n3[10];
    for (int c = 0; c < 10; c++) { s3[c] = (c * 7) % 10 + 1e-3 * c * c; n3[c] = 1; }
    qs_evci_est a, b, c2;
    assert_int_equal(qs_evci_boot_ratio(s3, n3, 10, &o, &a, &e), 0);
    assert_int_equal(qs_evci_boot_ratio(s3, n3, 10, &o, &b, &e), 0);
    assert_true(a.lo == b.lo && a.hi == b.hi);
    o.seed = 2;
    assert_int_equal(qs_evci_boot_ratio(s3, n3, 10, &o, &c2, &e), 0);
    assert_true(c2.v == a.v && (c2.lo != a.lo || c2.hi != a.hi));
    /* about the normal interval of ten chunk means: 4.53 +- 1.96 * 2.87 / sqrt(10) */
    assert_true(fabs(a.lo - (4.53 - 1.78)) < 0.5 && fabs(a.hi - (4.53 + 1.78)) < 0.5);
}

/* draws are uniform over the chunks */
static void test_draw(void **state)
{
    (void)state;
    int cnt[7] = {0};
    for (int b = 0; b < 1000; b++)
        for (int j = 0; j < 7; j++) {
            int c = qs_evci_draw(5, b, j, 7);
            assert_true(c >= 0 && c < 7);
            cnt[c]++;
        }
    for (int c = 0; c < 7; c++) assert_true(cnt[c] > 900 && cnt[c] < 1100);
}

/* a reference and configurations over 3 chunks of 2 tokens */
static void make_out(qs_eval_out *t)
{
    assert_int_equal(qs_eval_out_alloc(t, 6, NULL, 3), 0);
    for (int k = 0; k < 6; k++) {
        t->var[0].nll[k] = 0;
        t->var[1].nll[k] = 1;                 /* a: ln ratio 1 everywhere */
        t->var[2].nll[k] = 2 + k / 2;         /* b: 2, 2, 3, 3, 4, 4: b - a has chunk means 1, 2, 3 */
        t->var[3].nll[k] = 1;
        t->var[1].kl[k] = 0;
        t->var[2].kl[k] = 0.1;
        t->var[3].kl[k] = 0;
    }
}

static void test_variant(void **state)
{
    (void)state;
    qs_eval_out t;
    make_out(&t);
    qs_evci_opts o = {QS_EVCI_BOOTSTRAP, 1000, 1};
    qs_err e = {{0}};
    qs_evci_var v;
    /* configuration a: every chunk the same, so the interval is the point */
    assert_int_equal(qs_evci_variant(&t, 2, 1, &o, &v, &e), 0);
    assert_true(v.n == 6 && v.lnratio.v == 1 && v.lnratio.lo == 1 && v.lnratio.hi == 1);
    assert_true(fabs(v.dppl.v - (exp(1) - 1)) < 1e-12 && v.dppl.lo == v.dppl.v && v.ppl.v == exp(1));
    assert_true(v.kl.v == 0 && v.kl.hi == 0);
    /* b: chunk means 2, 3, 4 of ln ratio; the percentile interval within [2, 4] and exp'd for PPL */
    assert_int_equal(qs_evci_variant(&t, 2, 2, &o, &v, &e), 0);
    assert_true(fabs(v.lnratio.v - 3) < 1e-12 && v.lnratio.lo >= 2 && v.lnratio.lo < 3 && v.lnratio.hi > 3 && v.lnratio.hi <= 4);
    assert_true(fabs(v.ppl.lo - exp(v.lnratio.lo)) < 1e-9 && fabs(v.dppl.hi - expm1(v.lnratio.hi)) < 1e-9);
    /* a non-finite token is left out: chunk 0 keeps one token */
    t.var[2].nll[1] = NAN;
    assert_int_equal(qs_evci_variant(&t, 2, 2, &o, &v, &e), 0);
    assert_true(v.n == 5 && fabs(v.lnratio.v - (2 + 3 + 3 + 4 + 4) / 5.0) < 1e-12);
    /* the reference has only PPL */
    assert_int_equal(qs_evci_variant(&t, 2, 0, &o, &v, &e), 0);
    assert_true(v.ppl.v == 1 && isnan(v.dppl.v) && isnan(v.kl.v));
    /* whole chunks are resampled, never tokens: tokens 0, 2 in every chunk give equal chunk means, so
    ** the interval is the point (a bootstrap of tokens would spread it) */
    for (int k = 0; k < 6; k++) t.var[3].nll[k] = 2 * (k % 2);
    assert_int_equal(qs_evci_variant(&t, 2, 3, &o, &v, &e), 0);
    assert_true(v.lnratio.v == 1 && v.lnratio.lo == 1 && v.lnratio.hi == 1);
    /* every token non-finite: no statistics */
    for (int k = 0; k < 6; k++) t.var[3].nll[k] = NAN;
    assert_int_equal(qs_evci_variant(&t, 2, 3, &o, &v, &e), 0);
    assert_true(v.n == 0 && isnan(v.ppl.v) && isnan(v.dppl.lo) && isnan(v.kl.hi));
    assert_int_equal(qs_evci_variant(&t, 2, 4, &o, &v, &e), -1);
    qs_eval_out_free(&t);
}

static void test_paired(void **state)
{
    (void)state;
    qs_eval_out t;
    make_out(&t);
    qs_evci_opts o = {QS_EVCI_DELTA, 0, 0};
    qs_err e = {{0}};
    qs_evci_pair p;
    /* b against a: per-chunk differences 1, 2, 3 -> 2 +- t(2) / sqrt 3 (not the per-token SE 0.365) */
    assert_int_equal(qs_evci_paired(&t, 2, 1, 2, &o, &p, &e), 0);
    assert_true(p.n == 6 && p.chunks == 3);
    assert_true(fabs(p.dln.v - 2) < 1e-12 && fabs(p.dln_se - 1 / sqrt(3)) < 1e-12);
    assert_true(fabs(p.dln.lo - (2 - 4.303 / sqrt(3))) < 1e-9);
    assert_true(p.dln.lo < 0);   /* the interval holds 0: three chunks are too few for a difference of this spread */
    assert_true(fabs(p.dkl.v - 0.1) < 1e-12 && fabs(p.dkl.lo - 0.1) < 1e-12 && fabs(p.dkl.hi - 0.1) < 1e-12);
    /* the other way round: the signs turn */
    assert_int_equal(qs_evci_paired(&t, 2, 2, 1, &o, &p, &e), 0);
    assert_true(fabs(p.dln.v + 2) < 1e-12 && fabs(p.dkl.v + 0.1) < 1e-12);
    /* bootstrap: within the range of the chunk means, no SE */
    o = (qs_evci_opts){QS_EVCI_BOOTSTRAP, 2000, 3};
    assert_int_equal(qs_evci_paired(&t, 2, 1, 2, &o, &p, &e), 0);
    assert_true(p.dln.v == 2 && p.dln.lo >= 1 && p.dln.lo < 2 && p.dln.hi > 2 && p.dln.hi <= 3 && isnan(p.dln_se));
    /* a token non-finite in either configuration is left out of both */
    t.var[1].nll[0] = NAN;
    o.method = QS_EVCI_DELTA;
    assert_int_equal(qs_evci_paired(&t, 2, 1, 2, &o, &p, &e), 0);
    assert_true(p.n == 5 && fabs(p.dln.v - (1 + 2 + 2 + 3 + 3) / 5.0) < 1e-12);
    assert_int_equal(qs_evci_paired(&t, 2, 0, 2, &o, &p, &e), -1);   /* the reference is no configuration */
    qs_eval_out_free(&t);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_parse),   cmocka_unit_test(test_t975),   cmocka_unit_test(test_chunk_t),
        cmocka_unit_test(test_bootstrap), cmocka_unit_test(test_draw), cmocka_unit_test(test_variant),
        cmocka_unit_test(test_paired),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
