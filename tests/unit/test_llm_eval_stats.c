/*
** The `llm eval` statistics table (analysis/llm_eval_stats.h) is consistent: every row has a JSON
** key and a place in the summary, every double of qs_eval_summary has a row, every key the writer
** puts is read back by the reader, and the views' columns are numbered without gaps.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_eval_stats.h"

/* every row: key, place in the summary, companions that exist; an interval's two halves share a key */
static void test_rows(void **state)
{
    (void)state;
    for (int i = 1; i < QS_EVS_N; i++) {
        const qs_evstat *r = &qs_evstats[i];
        assert_non_null(r->key);
        assert_true(r->off >= offsetof(qs_eval_summary, ppl) && r->off < offsetof(qs_eval_summary, hist));
        assert_true(r->se >= 0 && r->se < QS_EVS_N && r->lo >= 0 && r->lo < QS_EVS_N && r->hi >= 0 && r->hi < QS_EVS_N);
        assert_true(!r->lo == !r->hi);
        if (r->elem == 1) {
            assert_true(i + 1 < QS_EVS_N && qs_evstats[i + 1].elem == 2);
            assert_string_equal(qs_evstats[i + 1].key, r->key);
        }
        if (r->elem == 2) assert_int_equal(qs_evstats[i - 1].elem, 1);
        /* keys are unique (the two halves of an interval apart) and places too */
        for (int j = 1; j < i; j++) {
            if (!(r->elem == 2 && j == i - 1)) assert_string_not_equal(qs_evstats[j].key, r->key);
            assert_true(qs_evstats[j].off != r->off);
        }
        /* the reference's statistics come first: the stored JSON puts them before the others */
        if (r->flags & QS_EVS_REF) assert_true(i == 1 || (qs_evstats[i - 1].flags & QS_EVS_REF));
    }
    /* every double of the summary between ppl and hist is a row: a new statistic cannot be computed
    ** and forgotten by the writer and the reader */
    assert_int_equal((offsetof(qs_eval_summary, hist) - offsetof(qs_eval_summary, ppl)) / sizeof(double), QS_EVS_N - 1);
}

/* each view: columns 1..n, each once, with a header, then none */
static void test_columns(void **state)
{
    (void)state;
    for (int v = 0; v < QS_EVV_N; v++) {
        int n = 0;
        for (int i = 1; i < QS_EVS_N; i++) n += qs_evstats[i].view[v].col > 0;
        assert_true(n >= 8);
        for (int k = 1; k <= n; k++) {
            int id = qs_evstat_column(v, k);
            assert_true(id > 0);
            assert_non_null(qs_evstats[id].view[v].head);
            assert_non_null(qs_evstats[id].label);
            assert_true(qs_evstats[id].view[v].kind != QS_EVF_PRINTF || qs_evstats[id].view[v].fmt);
        }
        assert_int_equal(qs_evstat_column(v, n + 1), 0);
    }
    assert_int_equal(qs_evstat_sort_key(1), QS_EVS_KL_MEAN);
    assert_int_equal(qs_evstat_sort_key(2), QS_EVS_DPPL);
    assert_int_equal(qs_evstat_sort_key(3), 0);
}

/* what the writer puts, the reader reads: every key, in table order, non-finite values as null */
static void test_round_trip(void **state)
{
    (void)state;
    qs_eval_summary s;
    memset(&s, 0, sizeof s);
    for (int i = 1; i < QS_EVS_N; i++) {
        double x = 0.25 * i - 3;
        memcpy((char *)&s + qs_evstats[i].off, &x, sizeof x);
    }
    s.kl_q[10] = NAN;
    json_t *j = json_object();
    qs_evstats_put(j, &s, 1);
    json_object_set_new(j, "between", json_true());
    qs_evstats_put(j, &s, 0);
    char *txt = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    assert_non_null(txt);
    json_t *d = json_loads(txt, 0, NULL);
    assert_non_null(d);
    const char *prev = txt;
    for (int i = 1; i < QS_EVS_N; i++) {
        char k[64];
        snprintf(k, sizeof k, "\"%s\":", qs_evstats[i].key);
        const char *at = strstr(txt, k);
        assert_non_null(at);
        if (qs_evstats[i].elem != 2) { assert_true(at >= prev); prev = at; }
    }
    assert_true(strstr(txt, "\"between\"") > strstr(txt, "\"nll_se\"") && strstr(txt, "\"between\"") < strstr(txt, "\"kl_mean\""));
    double v[QS_EVS_N];
    qs_evstats_get(d, v);
    for (int i = 1; i < QS_EVS_N; i++) {
        if (i == QS_EVS_KL_MAX) assert_true(isnan(v[i]));
        else assert_true(v[i] == 0.25 * i - 3);
    }
    json_decref(d);
    free(txt);
    /* an absent key reads as NAN */
    json_t *e = json_object();
    qs_evstats_get(e, v);
    for (int i = 1; i < QS_EVS_N; i++) assert_true(isnan(v[i]));
    json_decref(e);
}

/* a variant without one finite row ("scored": 0) is failed: no statistics, even those a result
** stored before the rule carries (PPL 1, KL 0), and the answer says "failed" (issue 28) */
static void test_failed(void **state)
{
    (void)state;
    json_t *d = json_pack("{s:i,s:f,s:f,s:[f,f],s:{s:i}}", "scored", 0, "ppl", 1.0, "kl_mean", 0.0, "dppl_rel_ci95", 0.0, 0.0,
                          "nonfinite", "logit_rows", 31);
    long long rows = 0;
    assert_true(qs_evstats_failed(d, &rows));
    assert_int_equal(rows, 31);
    double v[QS_EVS_N];
    qs_evstats_get(d, v);
    for (int i = 1; i < QS_EVS_N; i++) assert_true(isnan(v[i]));
    assert_true(qs_evstats_mark_failed(d));
    assert_true(json_is_true(json_object_get(d, "failed")));
    assert_true(json_is_null(json_object_get(d, "ppl")) && json_is_null(json_object_get(d, "kl_mean")) &&
                json_is_null(json_object_get(d, "dppl_rel_ci95")));
    assert_null(json_object_get(d, "kl_max"));   /* absent stays absent */
    json_decref(d);
    /* some rows scored: not failed, numbers kept; no "scored" at all: not judged failed */
    json_t *ok = json_pack("{s:i,s:f}", "scored", 3, "ppl", 2.5), *old = json_pack("{s:f}", "ppl", 2.5);
    assert_false(qs_evstats_failed(ok, NULL) || qs_evstats_failed(old, NULL));
    assert_false(qs_evstats_mark_failed(ok));
    assert_true(json_is_false(json_object_get(ok, "failed")) && json_real_value(json_object_get(ok, "ppl")) == 2.5);
    json_decref(ok);
    json_decref(old);
}

/* the cells the views print */
static void test_cells(void **state)
{
    (void)state;
    double v[QS_EVS_N];
    for (int i = 0; i < QS_EVS_N; i++) v[i] = NAN;
    v[QS_EVS_DPPL] = 0.0123;
    v[QS_EVS_DPPL_LO] = 0.0023;
    v[QS_EVS_DPPL_HI] = 0.0223;
    v[QS_EVS_KL_MEAN] = 2.5e-4;
    v[QS_EVS_KL_SE] = 1e-5;
    v[QS_EVS_TOP1] = 0.9876;
    char b[96];
    qs_evstat_cell(QS_EVV_TUI, QS_EVS_DPPL, v, 1, b, sizeof b);
    assert_string_equal(b, "+1.23+-1.00");
    qs_evstat_cell(QS_EVV_REPORT, QS_EVS_DPPL, v, 0, b, sizeof b);
    assert_string_equal(b, "+1.23 [+0.23, +2.23]");
    qs_evstat_cell(QS_EVV_TUI, QS_EVS_KL_MEAN, v, 0, b, sizeof b);
    assert_string_equal(b, "2.5e-04");
    qs_evstat_cell(QS_EVV_CLI, QS_EVS_KL_MEAN, v, 0, b, sizeof b);
    assert_string_equal(b, "0.00025±1.0e-05");   /* never ±0.00001 nor ±0.00000 (issue 28) */
    qs_evstat_cell(QS_EVV_REPORT, QS_EVS_TOP1, v, 0, b, sizeof b);
    assert_string_equal(b, "98.76");
    qs_evstat_cell(QS_EVV_TUI, QS_EVS_PPL, v, 0, b, sizeof b);
    assert_string_equal(b, "-");
    v[QS_EVS_DPPL_HI] = NAN;
    qs_evstat_cell(QS_EVV_REPORT, QS_EVS_DPPL, v, 0, b, sizeof b);
    assert_string_equal(b, "-");
}

/* numbers for tables: significant digits, never zeros for a nonzero value (issue 28) */
static void test_num(void **state)
{
    (void)state;
    char b[40];
    const struct { double v; int dec, plus; const char *want; } c[] = {
        {3.2e-6, 5, 0, "3.2e-06"}, {0, 5, 0, "0"}, {0.00025, 5, 0, "0.00025"}, {0.0001, 5, 0, "0.00010"},
        {0.00000999, 5, 0, "1.0e-05"}, {123456, 4, 0, "1.235e+05"}, {1.5, 2, 1, "+1.50"}, {-3e-6, 2, 1, "-3.0e-06"},
        {0.0123, 2, 1, "+1.2e-02"}, {-0.5, 2, 1, "-0.50"}, {NAN, 4, 0, "-"}, {INFINITY, 4, 1, "-"}, {12.054, 4, 0, "12.0540"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        qs_evnum(c[i].v, c[i].dec, c[i].plus, b, sizeof b);
        assert_string_equal(b, c[i].want);
    }
    /* the table's cells: a small SE and a small dPPL interval keep their digits */
    double v[QS_EVS_N];
    for (int i = 0; i < QS_EVS_N; i++) v[i] = NAN;
    v[QS_EVS_DP_RMS] = 2.2e-5;
    v[QS_EVS_DP_RMS_SE] = 8.1e-6;
    v[QS_EVS_DPPL] = 0.0004;
    v[QS_EVS_DPPL_LO] = -0.00002;
    v[QS_EVS_DPPL_HI] = 0.0013;
    qs_evstat_cell(QS_EVV_CLI, QS_EVS_DP_RMS, v, 0, b, sizeof b);
    assert_string_equal(b, "2.2e-05±8.1e-06");
    qs_evstat_cell(QS_EVV_CLI, QS_EVS_DPPL, v, 0, b, sizeof b);
    assert_string_equal(b, "+4.0e-02% [-2.0e-03, +0.13]");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_num),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_failed),
        cmocka_unit_test(test_cells),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
