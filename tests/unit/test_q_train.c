/*
** Unit tests for the read half of store/train_store.h (store/q_train.c): training runs written by
** SQL into a fresh database and read back — the list (order, glob, NULL columns as "" and NaN), one
** run by name, its steps in step order with unmeasured validation as NaN, and the operand
** statistics of one step or over the run (weighted by the counts, ordered by layer then operand in
** the recipe's order), an unknown operand refused with the database named.
*/
#include "test_util.h"
#include "test_store_util.h"   /* the fixture: a temporary directory with an open database */

#include <math.h>

#include "../../kernels/llm_recipe.h"
#include "../../store/db.h"
#include "../../store/train_store.h"

static void sql(qs_db *db, const char *s)
{
    qs_err e = {{0}};
    if (qs_db_exec(db, s, &e)) fail_msg("%s", e.msg);
}

/* Two runs: b/hif4 (done, a sweep, three steps, statistics over two steps) and a/fp32 (running,
** nothing optional set, no steps). */
static void two_runs(qs_db *db)
{
    sql(db, "INSERT INTO train_run(id, name, recipe, seed, sweep, status, steps, steps_done, val0, val_final, model, "
            "options, data_hash, tool_version, checkpoint, error, finished_at) VALUES "
            "(7, 'b/hif4', 'hif4', -1, 'sw1', 'done', 3, 3, 5.5, 4.25, '{\"layers\":2}', '{\"batch\":4}', "
            "'abc', '0.9', '/ck', NULL, '2026-01-01T00:00:00Z'),"
            "(3, 'a/fp32', 'fp32', 1, NULL, 'running', 10, 0, NULL, NULL, '{}', '{}', 'def', '0.9', NULL, NULL, NULL);"
            "INSERT INTO train_step(run_id, step, train_loss, val_loss, grad_norm, lr, tok_s) VALUES "
            "(7, 3, 4.0, 4.25, 0.5, 1e-4, 100), (7, 1, 5.0, NULL, 1.5, 3e-4, 90), (7, 2, 4.5, 4.75, 1.0, 2e-4, 95);"
            "INSERT INTO train_opstat(run_id, step, layer, operand, n, underflow, clipped, nonfinite) VALUES "
            "(7, 1, 1, 'fwd.x', 100, 0.1, 0.0, 0.0), (7, 2, 1, 'fwd.x', 300, 0.3, 0.02, 0.0),"
            "(7, 1, 0, 'wgrad.x', 10, 0.5, 0.0, 0.25), (7, 1, 0, 'fwd.w', 10, 0.0, 0.5, 0.0),"
            "(7, 1, 2, 'dgrad.dy', 0, 0.0, 0.0, 0.0), (7, 2, 2, 'dgrad.dy', 0, 0.5, 0.25, 0.0);");
}

static void test_empty(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    qs_train_run_item *r = (qs_train_run_item *)1;
    size_t n = 9;
    assert_int_equal(qs_train_run_list(f->db, NULL, &r, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(r);
    qs_train_run_item one;
    assert_int_equal(qs_train_run_get(f->db, "x", &one, &e), 0);
    qs_train_step_row *s = (qs_train_step_row *)1;
    assert_int_equal(qs_train_run_steps(f->db, 1, &s, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(s);
    qs_train_opstat_row *o = (qs_train_opstat_row *)1;
    assert_int_equal(qs_train_run_opstats(f->db, 1, 0, &o, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(o);
}

static void test_list_and_get(void **state)
{
    fixture *f = *state;
    two_runs(f->db);
    qs_err e = {{0}};
    qs_train_run_item *r;
    size_t n;
    assert_int_equal(qs_train_run_list(f->db, NULL, &r, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(r[0].name, "a/fp32");   /* by name, not by id */
    assert_string_equal(r[1].name, "b/hif4");
    assert_int_equal(r[0].id, 3);
    assert_string_equal(r[0].sweep, "");
    assert_string_equal(r[0].checkpoint, "");
    assert_string_equal(r[0].error, "");
    assert_string_equal(r[0].finished_at, "");
    assert_string_equal(r[0].status, "running");
    assert_true(isnan(r[0].val0) && isnan(r[0].val_final));
    assert_int_equal(r[0].steps, 10);
    assert_int_equal(r[0].steps_done, 0);
    assert_true(r[1].seed == UINT64_MAX);       /* stored as a signed 64-bit integer */
    assert_string_equal(r[1].recipe, "hif4");
    assert_string_equal(r[1].sweep, "sw1");
    assert_string_equal(r[1].model, "{\"layers\":2}");
    assert_string_equal(r[1].options, "{\"batch\":4}");
    assert_string_equal(r[1].data_hash, "abc");
    assert_string_equal(r[1].tool_version, "0.9");
    assert_string_equal(r[1].checkpoint, "/ck");
    assert_string_equal(r[1].finished_at, "2026-01-01T00:00:00Z");
    assert_true(r[1].val0 == 5.5 && r[1].val_final == 4.25);
    assert_int_equal(r[1].steps_done, 3);
    assert_true(r[1].created_at[0] != '\0');    /* the column's default */
    qs_train_run_items_free(r, n);

    assert_int_equal(qs_train_run_list(f->db, "b/*", &r, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(r[0].name, "b/hif4");
    qs_train_run_items_free(r, n);
    assert_int_equal(qs_train_run_list(f->db, "B/*", &r, &n, &e), 0);   /* GLOB is case-sensitive */
    assert_int_equal(n, 0);
    qs_train_run_items_free(r, n);

    /* a run read alone is freed as a list of one */
    qs_train_run_item *one = malloc(sizeof *one);
    assert_non_null(one);
    assert_int_equal(qs_train_run_get(f->db, "b/hif4", one, &e), 1);
    assert_int_equal(one->id, 7);
    assert_string_equal(one->recipe, "hif4");
    qs_train_run_items_free(one, 1);
    qs_train_run_item none;
    assert_int_equal(qs_train_run_get(f->db, "b/*", &none, &e), 0);   /* a name, not a pattern */
}

static void test_steps(void **state)
{
    fixture *f = *state;
    two_runs(f->db);
    qs_err e = {{0}};
    qs_train_step_row *s;
    size_t n;
    assert_int_equal(qs_train_run_steps(f->db, 7, &s, &n, &e), 0);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(s[i].step, i + 1);
    assert_true(s[0].train_loss == 5.0 && isnan(s[0].val_loss) && s[0].grad_norm == 1.5 && s[0].lr == 3e-4);
    assert_true(s[1].val_loss == 4.75 && s[2].val_loss == 4.25 && s[2].tok_s == 100);
    free(s);
    assert_int_equal(qs_train_run_steps(f->db, 3, &s, &n, &e), 0);
    assert_int_equal(n, 0);
    free(s);
}

static void test_opstats(void **state)
{
    fixture *f = *state;
    two_runs(f->db);
    qs_err e = {{0}};
    qs_train_opstat_row *o;
    size_t n;
    /* one step: layer order, then the recipe's operand order (fwd.w before wgrad.x, not by name) */
    assert_int_equal(qs_train_run_opstats(f->db, 7, 1, &o, &n, &e), 0);
    assert_int_equal(n, 4);
    assert_int_equal(o[0].layer, 0);
    assert_int_equal(o[0].operand, QS_OP_FWD_W);
    assert_true(o[0].clipped == 0.5 && o[0].n == 10);
    assert_int_equal(o[1].operand, QS_OP_WGRAD_X);
    assert_true(o[1].underflow == 0.5 && o[1].nonfinite == 0.25);
    assert_int_equal(o[2].layer, 1);
    assert_true(o[2].underflow == 0.1);
    assert_int_equal(o[3].layer, 2);
    assert_int_equal(o[3].operand, QS_OP_DGRAD_DY);
    free(o);
    /* over the run: weighted by n (layer 1: (100*0.1 + 300*0.3)/400 = 0.25), plain when n is 0 */
    assert_int_equal(qs_train_run_opstats(f->db, 7, 0, &o, &n, &e), 0);
    assert_int_equal(n, 4);
    assert_int_equal(o[2].layer, 1);
    assert_int_equal(o[2].n, 400);
    assert_float_equal(o[2].underflow, 0.25, 1e-12);
    assert_float_equal(o[2].clipped, 0.015, 1e-12);
    assert_int_equal(o[3].n, 0);
    assert_float_equal(o[3].underflow, 0.25, 1e-12);
    assert_float_equal(o[3].clipped, 0.125, 1e-12);
    free(o);
    assert_int_equal(qs_train_run_opstats(f->db, 7, 9, &o, &n, &e), 0);   /* a step without statistics */
    assert_int_equal(n, 0);
    free(o);
}

static void test_unknown_operand(void **state)
{
    fixture *f = *state;
    two_runs(f->db);
    sql(f->db, "INSERT INTO train_opstat VALUES (7, 1, 0, 'fwd.q', 1, 0, 0, 0)");
    qs_err e = {{0}};
    qs_train_opstat_row *o = (qs_train_opstat_row *)1;
    size_t n = 5;
    assert_int_equal(qs_train_run_opstats(f->db, 7, 1, &o, &n, &e), -1);
    assert_null(o);
    assert_int_equal(n, 0);
    assert_non_null(strstr(e.msg, "t.db"));
    assert_non_null(strstr(e.msg, "'fwd.q'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_and_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_opstats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_operand, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
