/*
** Unit tests for the pre-training claim and its sweeps: the --sweep spec (analysis/train_sweep.h:
** default, keys in either order, refusals, seed-major run list, names), the paired-gap arithmetic
** (known gaps -> known mean and t-interval), and the claim's verdict from default-sweep runs written
** by SQL into a fresh database (reproduced, differs, inconclusive; a missing seed -> not enough runs
** and the bound sweep function asked to run them; runs of another configuration, another data hash
** or not done ignored).
*/
#include "test_util.h"
#include "test_store_util.h"   /* the fixture: a temporary directory with an open database */

#include <math.h>

#include "../../analysis/claims_train.h"
#include "../../analysis/train_sweep.h"
#include "../../store/db.h"

#define near(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void sql(qs_db *db, const char *s)
{
    qs_err e = {{0}};
    if (qs_db_exec(db, s, &e)) fail_msg("%s", e.msg);
}

/* ---- the sweep spec ------------------------------------------------------------------------- */

static void test_sweep_default(void **state)
{
    (void)state;
    qs_train_sweep s;
    qs_err e = {{0}};
    assert_int_equal(qs_train_sweep_parse("default", &s, &e), 0);
    assert_int_equal(s.nrecipe, 5);
    assert_int_equal(s.nseed, 3);
    assert_int_equal(qs_train_sweep_count(&s), 15);
    const char *r;
    uint64_t seed;
    qs_train_sweep_at(&s, 0, &r, &seed);
    assert_string_equal(r, "bf16");
    assert_int_equal(seed, 1);
    qs_train_sweep_at(&s, 4, &r, &seed);   /* seed-major: every recipe of seed 1 first */
    assert_string_equal(r, "mxfp8");
    assert_int_equal(seed, 1);
    qs_train_sweep_at(&s, 6, &r, &seed);
    assert_string_equal(r, "hif4");
    assert_int_equal(seed, 2);
    char name[64];
    qs_train_sweep_run_name("default", "hif4", 3, name, sizeof name);
    assert_string_equal(name, "default-hif4-s3");
}

static void test_sweep_keys(void **state)
{
    (void)state;
    qs_train_sweep s;
    qs_err e = {{0}};
    assert_int_equal(qs_train_sweep_parse("recipes=bf16,hif4,seeds=7,9", &s, &e), 0);
    assert_int_equal(s.nrecipe, 2);
    assert_string_equal(s.recipe[1], "hif4");
    assert_int_equal(s.nseed, 2);
    assert_int_equal(s.seed[1], 9);
    assert_int_equal(qs_train_sweep_parse("seeds=4,recipes=mxfp4", &s, &e), 0);
    assert_int_equal(s.nrecipe, 1);
    assert_int_equal(s.nseed, 1);
    assert_int_equal(s.seed[0], 4);
    assert_int_equal(qs_train_sweep_parse("recipes=nvfp4", &s, &e), 0);   /* seeds: the default's */
    assert_int_equal(s.nseed, 3);
    assert_int_equal(qs_train_sweep_parse("seeds=1", &s, &e), 0);         /* recipes: the default's */
    assert_int_equal(s.nrecipe, 5);
}

static void refused(const char *spec, const char *want)
{
    qs_train_sweep s;
    qs_err e = {{0}};
    assert_int_equal(qs_train_sweep_parse(spec, &s, &e), -1);
    if (!strstr(e.msg, want)) fail_msg("'%s': message '%s' lacks '%s'", spec, e.msg, want);
}

static void test_sweep_refusals(void **state)
{
    (void)state;
    refused("", "empty");
    refused("recipes=mxfp5", "mxfp5");
    refused("recipes=bf16,bf16", "twice");
    refused("seeds=1,x", "'x'");
    refused("seeds=-1", "'-1'");
    refused("seeds=1,1", "twice");
    refused("runs=3", "unknown key 'runs'");
    refused("bf16,hif4", "not 'default'");
    refused("recipes=", "empty recipe");
    refused("recipes=bf16,seeds=1,recipes=hif4", "twice");
}

static void test_sweep_names(void **state)
{
    (void)state;
    char key[8192], a[64], b[64], c[64];
    qs_train_default_key(key, sizeof key);
    qs_train_sweep_name(key, a, sizeof a);
    assert_string_equal(a, "default");
    qs_train_shape s;
    qs_train_opts t;
    qs_train_defaults(&s, &t);
    t.steps = 10;
    const char *tx[] = {"x.txt"};
    qs_train_config_key(&s, &t, NULL, tx, 1, "v.txt", key, sizeof key);
    qs_train_sweep_name(key, b, sizeof b);
    assert_true(!strncmp(b, "sweep-", 6) && strlen(b) == 14);
    qs_train_sweep_name(key, c, sizeof c);
    assert_string_equal(b, c);   /* the same configuration, the same name */
    t.lr *= 2;
    qs_train_config_key(&s, &t, NULL, tx, 1, "v.txt", key, sizeof key);
    qs_train_sweep_name(key, c, sizeof c);
    assert_string_not_equal(b, c);
}

/* ---- the arithmetic ------------------------------------------------------------------------- */

static void test_paired_gap(void **state)
{
    (void)state;
    double v[] = {1.01, 1.02, NAN, 1.03}, b[] = {1.0, 1.0, 1.0, 1.0};
    qs_gap_ci g;
    qs_paired_gap(v, b, 4, &g);
    assert_int_equal(g.n, 3);   /* the NaN is not paired */
    near(g.mean, 0.02, 1e-12);
    double h = 4.303 * 0.01 / sqrt(3.0);   /* sd 0.01, t(2) = 4.303 */
    near(g.lo, 0.02 - h, 1e-12);
    near(g.hi, 0.02 + h, 1e-12);
    qs_paired_gap(v, b, 1, &g);
    assert_int_equal(g.n, 1);
    assert_true(isinf(g.lo) && isinf(g.hi));
}

/* ---- the claim on stored runs --------------------------------------------------------------- */

static int g_sweep_calls;
static int count_sweep(void *ctx, qs_err *e)
{
    (void)ctx;
    (void)e;
    g_sweep_calls++;
    return 0;
}

static const qs_claim *pretrain_claim(void)
{
    for (size_t i = 0; i < qs_claim_count(); i++)
        if (!strcmp(qs_claim_at(i)->id, "hif4.pretrain")) return qs_claim_at(i);
    fail_msg("no claim hif4.pretrain");
    return NULL;
}

#define MODEL "'{\"layers\":4,\"dim\":128,\"heads\":4,\"kv_heads\":4,\"ffn\":512,\"ctx\":128,\"vocab\":256}'"
#define OPTS "'{\"batch\":8,\"lr\":0.003,\"accum\":1}'"

/* One run of the default sweep: recipe, seed, relative gap to bf16's 2.0 (bf16 itself: 0). */
static void put(qs_db *db, const char *recipe, int seed, double gap)
{
    char q[1024];
    snprintf(q, sizeof q,
             "INSERT INTO train_run(name, recipe, seed, sweep, status, steps, steps_done, val0, val_final, model, "
             "options, data_hash, tool_version) VALUES ('default-%s-s%d', '%s', %d, 'default', 'done', 300, 300, 5.57, "
             "%.17g, " MODEL ", " OPTS ", 'h1', 'test')",
             recipe, seed, recipe, seed, 2.0 * (1 + gap));
    sql(db, q);
}

/* hif4 gaps g[0..2], mxfp4 gaps m[0..2]; nvfp4 and mxfp8 fixed. */
static void sweep(qs_db *db, const double *g, const double *m)
{
    for (int s = 1; s <= 3; s++) {
        put(db, "bf16", s, 0);
        put(db, "hif4", s, g[s - 1]);
        put(db, "mxfp4", s, m[s - 1]);
        put(db, "nvfp4", s, 0.005);
        put(db, "mxfp8", s, -0.001 * s);
    }
}

static qs_claim_out measure(qs_db *db)
{
    qs_claims_train_env env = {db, count_sweep, NULL};
    qs_claims_train_bind(&env);
    qs_claim_out o;
    memset(&o, 0, sizeof o);
    o.value = NAN;
    qs_err e = {{0}};
    int rc = pretrain_claim()->measure(0, &o, &e);
    qs_claims_train_bind(NULL);
    if (rc) fail_msg("measure: %s", e.msg);
    return o;
}

static void test_claim_reproduced(void **state)
{
    fixture *f = *state;
    const double g[] = {0.002, 0.003, 0.004}, m[] = {0.010, 0.012, 0.014};
    sweep(f->db, g, m);
    g_sweep_calls = 0;
    qs_claim_out o = measure(f->db);
    assert_int_equal(o.verdict, QS_VERDICT_REPRODUCED);
    assert_int_equal(g_sweep_calls, 0);   /* nothing missing: no sweep */
    near(o.value, 0.3, 1e-9);   /* hif4's mean gap in % */
    /* hif4: mean 0.300 %, sd 0.1 %: half-width 4.303 * 0.1 / sqrt 3 = 0.248 % */
    assert_non_null(strstr(o.measured, "hif4 +0.30 % [+0.05, +0.55]"));
    assert_non_null(strstr(o.measured, "mxfp4 +1.20 % [+0.70, +1.70]"));
    assert_non_null(strstr(o.measured, "nvfp4 +0.50 %"));
    assert_non_null(strstr(o.detail, "hif4 - mxfp4: -0.900 %"));
    assert_non_null(strstr(o.detail, "within 1 % of BF16: yes"));
}

static void test_claim_differs(void **state)
{
    fixture *f = *state;
    const double g[] = {0.020, 0.021, 0.022}, m[] = {0.010, 0.012, 0.014};   /* above 1 %, above mxfp4 */
    sweep(f->db, g, m);
    qs_claim_out o = measure(f->db);
    assert_int_equal(o.verdict, QS_VERDICT_DIFFERS);
    assert_non_null(strstr(o.detail, "no (the whole interval is above)"));
    assert_non_null(strstr(o.detail, "no, above it"));
}

static void test_claim_inconclusive(void **state)
{
    fixture *f = *state;
    const double g[] = {0.005, 0.015, 0.010}, m[] = {0.010, 0.012, 0.014};   /* straddles 1 %; order unclear */
    sweep(f->db, g, m);
    qs_claim_out o = measure(f->db);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_non_null(strstr(o.detail, "undecided (the interval straddles 1 %)"));
}

static void test_claim_context_missing(void **state)
{
    fixture *f = *state;
    const double g[] = {0.002, 0.003, 0.004}, m[] = {0.010, 0.012, 0.014};
    sweep(f->db, g, m);
    sql(f->db, "DELETE FROM train_run WHERE recipe = 'mxfp8' AND seed > 1");
    g_sweep_calls = 0;
    qs_claim_out o = measure(f->db);
    assert_int_equal(o.verdict, QS_VERDICT_REPRODUCED);   /* mxfp8 is context: no training for it */
    assert_int_equal(g_sweep_calls, 0);
    assert_non_null(strstr(o.measured, "mxfp8 -0.10 % (n = 1)"));
}

static void test_claim_missing_seed(void **state)
{
    fixture *f = *state;
    const double g[] = {0.002, 0.003, 0.004}, m[] = {0.010, 0.012, 0.014};
    sweep(f->db, g, m);
    sql(f->db, "DELETE FROM train_run WHERE name = 'default-hif4-s3'");
    g_sweep_calls = 0;
    qs_claim_out o = measure(f->db);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_int_equal(g_sweep_calls, 1);   /* asked to run the missing runs */
    assert_non_null(strstr(o.detail, "Not enough runs: hif4 has 2 seeds"));
    assert_non_null(strstr(o.measured, "hif4 +0.25 %"));
}

static void test_claim_ignores(void **state)
{
    fixture *f = *state;
    const double g[] = {0.002, 0.003, 0.004}, m[] = {0.010, 0.012, 0.014};
    sweep(f->db, g, m);
    /* hif4 seed 3 made unusable three ways, one after the other: each leaves 2 seeds */
    const char *spoil[] = {"UPDATE train_run SET status = 'running', steps_done = 100 WHERE name = 'default-hif4-s3'",
                           "UPDATE train_run SET data_hash = 'h2' WHERE name = 'default-hif4-s3'",
                           "UPDATE train_run SET model = '{\"layers\":2,\"dim\":128}' WHERE name = 'default-hif4-s3'",
                           "UPDATE train_run SET steps = 200, steps_done = 200 WHERE name = 'default-hif4-s3'",
                           "UPDATE train_run SET sweep = 'sweep-0000abcd' WHERE name = 'default-hif4-s3'"};
    const char *reset = "UPDATE train_run SET status = 'done', steps = 300, steps_done = 300, data_hash = 'h1', "
                        "sweep = 'default', model = " MODEL " WHERE name = 'default-hif4-s3'";
    for (size_t i = 0; i < sizeof spoil / sizeof *spoil; i++) {
        sql(f->db, reset);
        assert_int_equal(measure(f->db).verdict, QS_VERDICT_REPRODUCED);
        sql(f->db, spoil[i]);
        qs_claim_out o = measure(f->db);
        if (o.verdict != QS_VERDICT_INCONCLUSIVE || !strstr(o.detail, "hif4 has 2 seeds"))
            fail_msg("spoil %zu: verdict %d, %s", i, (int)o.verdict, o.detail);
        if (i == 1 || i == 2 || i == 3) assert_non_null(strstr(o.detail, "1 stored run of another configuration ignored"));
    }
}

static void test_claim_unbound(void **state)
{
    (void)state;
    qs_claim_out o;
    memset(&o, 0, sizeof o);
    qs_err e = {{0}};
    assert_int_equal(pretrain_claim()->measure(0, &o, &e), 0);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_non_null(strstr(o.detail, "No database"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_default),
        cmocka_unit_test(test_sweep_keys),
        cmocka_unit_test(test_sweep_refusals),
        cmocka_unit_test(test_sweep_names),
        cmocka_unit_test(test_paired_gap),
        cmocka_unit_test_setup_teardown(test_claim_reproduced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_inconclusive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_missing_seed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_context_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_ignores, setup, teardown),
        cmocka_unit_test(test_claim_unbound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
