/*
** Unit tests for the RL claims on a transformer (analysis/claims_grpo.c): runs written by SQL into a
** fresh database (rl_run metadata with the sweep name, rl_step rewards and lambdas) give known final
** rewards (the mean of the last K steps), known paired differences and 95 % t-intervals and the
** verdicts of docs/claims.md; a missing seed gives "not enough runs" and the sweep to run; incomplete
** runs and runs of another sweep are ignored; no database gives "not measured"; rl_underflow rows of the
** sweep's FP4-rollout runs give the underflow claim's means and verdict.
*/
#include "test_util.h"
#include "test_store_util.h"

#include <math.h>

#include "../../analysis/claims_grpo.h"
#include "../../store/db.h"

#define near(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void sql(qs_db *db, const char *s)
{
    qs_err e = {{0}};
    if (qs_db_exec(db, s, &e)) fail_msg("%s", e.msg);
}

static int g_id;

/* A run of 10 steps (stored: `stored` of them): reward 0 and lambda lam0 on steps 0..7, reward r and
** lambda lam1 on steps 8, 9 (K = 10 / 4 = 2), so its final reward is r and its lambdas lam0 -> lam1. */
static void run(qs_db *db, const char *sweep, const char *roll, const char *tr, const char *corr, int seed, double r,
                double lam0, double lam1, int stored)
{
    char q[1024];
    g_id++;
    snprintf(q, sizeof q,
             "INSERT INTO rl_run(id, name, metadata) VALUES(%d, 'r%d', '{\"sweep\":\"%s\",\"rollout_format\":\"%s\","
             "\"trainer\":\"%s\",\"correction\":\"%s\",\"seed\":%d,\"steps\":10}')",
             g_id, g_id, sweep, roll, tr, corr, seed);
    sql(db, q);
    for (int s = 0; s < stored; s++) {
        snprintf(q, sizeof q, "INSERT INTO rl_step(run_id, step, reward, lambda) VALUES(%d, %d, %.17g, %.17g)", g_id, s,
                 s >= 8 ? r : 0.0, s >= 8 ? lam1 : lam0);
        sql(db, q);
    }
}

static const qs_claim *claim(const char *id)
{
    for (size_t i = 0; i < qs_claims_grpo_n; i++)
        if (!strcmp(qs_claims_grpo[i].id, id)) return &qs_claims_grpo[i];
    fail_msg("no claim %s", id);
    return NULL;
}

static void measure(qs_db *db, const char *id, qs_claim_out *o)
{
    memset(o, 0, sizeof *o);
    qs_err e = {{0}};
    qs_claims_grpo_bind(db);
    int rc = claim(id)->measure(0, o, &e);
    qs_claims_grpo_bind(NULL);
    if (rc) fail_msg("%s", e.msg);
}

/* The mismatch sweep: base 0.5; full (FP4 trainer) 0.40; roll (bf16 trainer) = full + d[seed]. */
static void mismatch_runs(qs_db *db, const double dh[3], const double dm[3], int seeds_roll_hif4)
{
    for (int s = 1; s <= 3; s++) {
        run(db, "hif4-rl", "bf16", "bf16", "none", s, 0.5, 0, 0, 10);
        run(db, "hif4-rl", "hif4", "hif4", "none", s, 0.4, 0, 0, 10);
        run(db, "hif4-rl", "mxfp4", "mxfp4", "none", s, 0.4, 0, 0, 10);
        if (s <= seeds_roll_hif4) run(db, "hif4-rl", "w=hif4,a=hif4", "bf16", "none", s, 0.4 + dh[s - 1], 0, 0, 10);
        run(db, "hif4-rl", "w=mxfp4,a=mxfp4", "bf16", "none", s, 0.4 + dm[s - 1], 0, 0, 10);
    }
}

static void test_mismatch_supported(void **state)
{
    fixture *f = *state;
    mismatch_runs(f->db, (double[]){-0.10, -0.12, -0.14}, (double[]){-0.05, -0.06, -0.07}, 3);
    /* noise: another sweep's run, an incomplete run and a corrected run do not count */
    run(f->db, "other", "w=hif4,a=hif4", "bf16", "none", 1, 0.9, 0, 0, 10);
    run(f->db, "hif4-rl", "w=hif4,a=hif4", "bf16", "none", 4, 0.9, 0, 0, 9);
    run(f->db, "hif4-rl", "w=hif4,a=hif4", "bf16", "tis", 1, 0.9, 0, 0, 10);
    for (int s = 1; s <= 3; s++)   /* the fp32 trainer: context, not mixed with the bf16 one */
        run(f->db, "hif4-rl", "w=hif4,a=hif4", "fp32", "none", s, 0.1 * s, 0, 0, 10);
    qs_claim_out o;
    measure(f->db, "hif4.rl-mismatch", &o);
    assert_int_equal(o.verdict, QS_VERDICT_REPRODUCED);
    near(o.value, -0.12, 1e-12);
    /* mean -0.12, sd 0.02, t(2) 4.303: half-width 4.303 * 0.02 / sqrt(3) = 0.0497 */
    assert_non_null(strstr(o.detail, "hif4: roll - full -0.120 [-0.170, -0.070] (3 seeds)"));
    assert_non_null(strstr(o.detail, "mxfp4: roll - full -0.060 [-0.085, -0.035] (3 seeds)"));
    assert_non_null(strstr(o.detail, "1 incomplete ignored"));
    assert_non_null(strstr(o.detail, "with the fp32 trainer, roll - full -0.200 [-0.448, +0.048] (3 seeds)"));
}

static void test_mismatch_differs(void **state)
{
    fixture *f = *state;
    mismatch_runs(f->db, (double[]){-0.10, -0.12, -0.14}, (double[]){0.10, 0.11, 0.12}, 3);
    qs_claim_out o;
    measure(f->db, "hif4.rl-mismatch", &o);
    assert_int_equal(o.verdict, QS_VERDICT_DIFFERS);
}

static void test_mismatch_inconclusive(void **state)
{
    fixture *f = *state;
    mismatch_runs(f->db, (double[]){-0.10, 0.10, -0.02}, (double[]){-0.05, -0.06, -0.07}, 3);
    qs_claim_out o;
    measure(f->db, "hif4.rl-mismatch", &o);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_non_null(strstr(o.detail, "contains 0"));
}

static void test_mismatch_missing_seed(void **state)
{
    fixture *f = *state;
    mismatch_runs(f->db, (double[]){-0.10, -0.12, -0.14}, (double[]){-0.05, -0.06, -0.07}, 2);
    qs_claim_out o;
    measure(f->db, "hif4.rl-mismatch", &o);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_string_equal(o.measured, "not enough runs");
    assert_non_null(strstr(o.detail, "2 seeds with every configuration"));
    assert_non_null(strstr(o.detail, "qscope rl grpo --sweep hif4-rl"));
}

static void test_resq(void **state)
{
    fixture *f = *state;
    const double roll[3] = {0.30, 0.28, 0.32}, resq[3] = {0.40, 0.39, 0.41};
    for (int s = 1; s <= 3; s++) {
        run(f->db, "resq", "w=bf16,a=bf16", "fp32", "none", s, 0.5, 0, 0, 10);
        run(f->db, "resq", "w=hif4,a=hif4,resq=none", "fp32", "none", s, roll[s - 1], 0, 0, 10);
        run(f->db, "resq", "w=hif4,a=hif4,resq=2:4", "fp32", "none", s, resq[s - 1], 0, 0, 10);
        run(f->db, "resq", "w=hif4,a=hif4,resq=dense", "fp32", "none", s, 0.5, 0, 0, 10);
        run(f->db, "resq", "w=mxfp4,a=mxfp4,resq=none", "fp32", "none", s, 0.30, 0, 0, 10);
        run(f->db, "resq", "w=mxfp4,a=mxfp4,resq=2:4", "fp32", "none", s, 0.2 + 0.01 * s, 0, 0, 10);
        run(f->db, "resq", "w=mxfp4,a=mxfp4,resq=dense", "fp32", "none", s, 0.5, 0, 0, 10);
    }
    qs_claim_out o;
    measure(f->db, "resq.rl-gap", &o);
    /* hif4: gap mean 0.2, gain mean 0.1: half closed; mxfp4: gain -0.08 [..] < 0 with a gap: differs */
    near(o.value, 0.5, 1e-12);
    assert_non_null(strstr(o.measured, "hif4 50 % closed"));
    assert_non_null(strstr(o.measured, "mxfp4 -40 % closed"));
    assert_int_equal(o.verdict, QS_VERDICT_DIFFERS);
    assert_non_null(strstr(o.detail, "dense gain +0.200"));   /* context, not the verdict */
}

/* The `ais` preset (MXFP4 rollout, fp32 trainer; corrections by canonical name or alias); the base run
** from the sweep 'resq' (the `ais` preset has none). */
static void ais_runs(qs_db *db, double roll, double tis, double lam1)
{
    static const char *const corr[] = {"icepop", "seq_mis", "geo"};
    for (int s = 1; s <= 3; s++) {
        double j = 0.005 * (s - 2);   /* seed noise */
        run(db, "resq", "w=bf16,a=bf16", "fp32", "none", s, 0.5 + j, 0, 0, 10);
        run(db, "ais", "w=mxfp4,a=mxfp4", "fp32", "none", s, roll + 2 * j, 0, 0, 10);
        run(db, "ais", "w=mxfp4,a=mxfp4", "fp32", "tis", s, tis + j, 0, 0, 10);
        for (int k = 0; k < 3; k++) run(db, "ais", "w=mxfp4,a=mxfp4", "fp32", corr[k], s, roll, 0, 0, 10);
        run(db, "ais", "w=mxfp4,a=mxfp4", "fp32", "ais", s, roll + j, 0.1, lam1 + j, 10);
        run(db, "resq", "w=mxfp4,a=mxfp4,resq=none", "fp32", "none", s, 0.9, 0, 0, 10);   /* another sweep's */
    }
}

static void test_ais_harm_and_recovery(void **state)
{
    fixture *f = *state;
    ais_runs(f->db, 0.2, 0.45, 0.6);
    qs_claim_out o;
    measure(f->db, "ais.llm-c2", &o);
    assert_int_equal(o.verdict, QS_VERDICT_REPRODUCED);
    near(o.value, -0.3, 1e-12);
    assert_non_null(strstr(o.measured, "best tis +0.250"));
    measure(f->db, "ais.llm-c4", &o);
    assert_int_equal(o.verdict, QS_VERDICT_REPRODUCED);
    near(o.value, 0.5, 1e-12);
}

static void test_ais_no_harm(void **state)
{
    fixture *f = *state;
    ais_runs(f->db, 0.5, 0.5, 0.1);
    qs_claim_out o;
    measure(f->db, "ais.llm-c2", &o);
    assert_int_equal(o.verdict, QS_VERDICT_DIFFERS);
    assert_non_null(strstr(o.detail, "sim grpo"));
    measure(f->db, "ais.llm-c4", &o);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_non_null(strstr(o.detail, "no harm"));
}

/* One rl_underflow row of the run just made (g_id). */
static void uf(qs_db *db, int step, int layer, const char *site, double frac)
{
    char q[256];
    snprintf(q, sizeof q, "INSERT INTO rl_underflow(run_id, step, layer, site, n, underflow) VALUES(%d, %d, %d, '%s', 100, %.17g)",
             g_id, step, layer, site, frac);
    sql(db, q);
}

/* Underflow of the FP4-rollout runs of 'hif4-rl': the mean over steps per run, then over runs; bf16
** rollouts and other sweeps are not read; substantial underflow is inconclusive (dominance unmeasured). */
static void test_underflow_measured(void **state)
{
    fixture *f = *state;
    run(f->db, "hif4-rl", "w=hif4,a=hif4", "bf16", "none", 1, 0.4, 0, 0, 10);
    uf(f->db, 0, 0, "ffn_down_in", 0.10), uf(f->db, 1, 0, "ffn_down_in", 0.20), uf(f->db, 0, 0, "attn_in", 0.01);
    run(f->db, "hif4-rl", "hif4", "hif4", "none", 2, 0.4, 0, 0, 10);
    uf(f->db, 0, 0, "ffn_down_in", 0.25), uf(f->db, 0, 0, "attn_in", 0.03);
    run(f->db, "hif4-rl", "w=mxfp4,a=mxfp4", "bf16", "none", 1, 0.4, 0, 0, 10);
    uf(f->db, 0, 1, "head_in", 0.05), uf(f->db, 0, 0, "kv", 0.02);
    run(f->db, "hif4-rl", "bf16", "bf16", "none", 1, 0.5, 0, 0, 10);   /* not FP4: not read */
    uf(f->db, 0, 0, "attn_out", 0.9);
    run(f->db, "other", "w=hif4,a=hif4", "bf16", "none", 1, 0.4, 0, 0, 10);   /* another sweep */
    uf(f->db, 0, 0, "attn_out", 0.9);
    qs_claim_out o;
    measure(f->db, "rl.underflow-source", &o);
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    near(o.value, 0.2, 1e-12);   /* hif4 L0 ffn_down_in: (0.15 + 0.25) / 2 */
    assert_string_equal(o.measured, "hif4 20.00 % at L0 ffn_down_in; mxfp4 5.00 % at L1 head_in");
    assert_non_null(strstr(o.detail, "3 runs"));
    assert_non_null(strstr(o.detail, "attn_in 2.000 %"));
    assert_non_null(strstr(o.detail, "by layer L0 11.000 %"));
    assert_non_null(strstr(o.detail, "substantial"));
    assert_null(strstr(o.detail, "attn_out"));
}

static void test_underflow_negligible(void **state)
{
    fixture *f = *state;
    run(f->db, "hif4-rl", "w=hif4,a=hif4", "bf16", "none", 1, 0.4, 0, 0, 10);
    uf(f->db, 0, 0, "ffn_down_in", 5e-4), uf(f->db, 0, 0, "attn_in", 0);
    qs_claim_out o;
    measure(f->db, "rl.underflow-source", &o);
    assert_int_equal(o.verdict, QS_VERDICT_DIFFERS);
    assert_string_equal(o.measured, "hif4 0.05 % at L0 ffn_down_in");
    assert_non_null(strstr(o.detail, "Not supported"));
}

static void test_not_measured(void **state)
{
    fixture *f = *state;
    qs_claim_out o;
    measure(f->db, "ais.llm-c2", &o);   /* an empty database */
    assert_int_equal(o.verdict, QS_VERDICT_INCONCLUSIVE);
    assert_string_equal(o.measured, "not measured");
    assert_non_null(strstr(o.detail, "qscope rl grpo --sweep ais"));
    measure(NULL, "resq.rl-gap", &o);   /* unbound */
    assert_string_equal(o.measured, "not measured");
    measure(f->db, "rl.underflow-source", &o);
    assert_string_equal(o.measured, "not measured");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mismatch_supported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_inconclusive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_missing_seed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resq, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ais_harm_and_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ais_no_harm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_underflow_measured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_underflow_negligible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_measured, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
