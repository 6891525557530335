/*
** A training run recorded in memory (app/cli/train_capture.h), as a sweep's run travels from its MPI
** rank to rank 0: the bytes give back every field, step and operand statistic; every truncation and a
** corrupted length are refused with one message; the record stores as the run's rows.
*/
#include "test_util.h"
#include "test_store_util.h"

#include <math.h>

#include "../../app/cli/train_capture.h"
#include "../../app/cli/train_par.h"

static void fill(qs_train_capture *c)
{
    memset(c, 0, sizeof *c);
    c->model_json = strdup("{\"dim\":32}");
    c->options_json = strdup("{\"batch\":4}");
    c->recipe = strdup("mxfp4");
    c->why = strdup("stopped by SIGINT after step 2");
    snprintf(c->data_hash, sizeof c->data_hash, "%032x", 7);
    snprintf(c->status, sizeof c->status, "stopped");
    c->seed = 3;
    c->steps = 5;
    c->val0 = 5.25;
    qs_err e = {{0}};
    for (int k = 1; k <= 2; k++) {
        qs_train_step_row r = {k, 5.0 - k, k == 2 ? 4.5 : NAN, 0.5 * k, 1e-3, 100.0 * k};
        qs_train_opstat_row ops[3] = {{0, 1, 64, 0.25, 0, 0}, {1, 2, 128, 0.5, 0.125, 0}, {2, 5, 32, 0, 0, 0.0625}};
        assert_int_equal(qs_train_capture_step(c, &r, ops, k == 1 ? 3 : 1, &e), 0);
    }
}

static void test_round_trip(void **st)
{
    (void)st;
    qs_train_capture a, b;
    fill(&a);
    uint8_t *bytes = NULL;
    size_t len = 0;
    qs_err e = {{0}};
    assert_int_equal(qs_train_capture_pack(&a, &bytes, &len, &e), 0);
    assert_int_equal(qs_train_capture_unpack(bytes, len, &b, &e), 0);
    assert_string_equal(b.model_json, a.model_json);
    assert_string_equal(b.options_json, a.options_json);
    assert_string_equal(b.recipe, "mxfp4");
    assert_null(b.checkpoint);
    assert_string_equal(b.why, a.why);
    assert_string_equal(b.data_hash, a.data_hash);
    assert_string_equal(b.status, "stopped");
    assert_true(b.seed == 3 && b.steps == 5 && b.val0 == 5.25);
    assert_int_equal(b.nstep, 2);
    assert_int_equal(b.nops, 4);
    assert_true(b.op_at[0] == 0 && b.op_at[1] == 3 && b.op_at[2] == 4);
    assert_true(b.step[1].val_loss == 4.5 && isnan(b.step[0].val_loss) && b.step[1].tok_s == 200.0);
    assert_true(b.ops[1].n == 128 && b.ops[1].clipped == 0.125 && b.ops[3].layer == 0 && b.ops[3].operand == 1);
    /* every truncation is refused, and so is a string length past the end */
    for (size_t cut = 0; cut < len; cut++) {
        qs_train_capture x;
        qs_err xe = {{0}};
        assert_int_equal(qs_train_capture_unpack(bytes, cut, &x, &xe), -1);
        assert_non_null(strstr(xe.msg, "cannot read"));
    }
    uint64_t huge = (uint64_t)1 << 60;
    memcpy(bytes, &huge, sizeof huge);   /* the model JSON's length */
    qs_train_capture x;
    assert_int_equal(qs_train_capture_unpack(bytes, len, &x, &e), -1);
    free(bytes);
    qs_train_capture_free(&a);
    qs_train_capture_free(&b);
}

static void test_store(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    qs_err e = {{0}};
    qs_train_capture a;
    fill(&a);
    assert_int_equal(qs_train_capture_store(db, "sw-mxfp4-s3", "sw", &a, &e), 0);
    qs_train_run_item it;
    assert_int_equal(qs_train_run_get(db, "sw-mxfp4-s3", &it, &e), 1);
    assert_string_equal(it.status, "stopped");
    assert_string_equal(it.sweep, "sw");
    assert_true(it.steps_done == 2 && it.val0 == 5.25 && it.val_final == 4.5);
    qs_train_step_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(qs_train_run_steps(db, it.id, &rows, &n, &e), 0);
    assert_true(n == 2 && rows[0].train_loss == 4.0 && rows[1].grad_norm == 1.0);
    qs_train_opstat_row *ops = NULL;
    assert_int_equal(qs_train_run_opstats(db, it.id, 1, &ops, &n, &e), 0);
    assert_int_equal(n, 3);
    free(ops);
    free(rows);
    qs_train_run_item *heap = malloc(sizeof *heap);
    *heap = it;
    qs_train_run_items_free(heap, 1);
    qs_train_capture_free(&a);
}

/* A sweep's runs through qs_train_sweep_ranks on one rank (no mpirun): each run's record reaches
** store in run order, through its bytes; a failing run stops the sweep with its message. */
typedef struct { char log[128]; size_t fail_at; } sweep_log;

static int run_fn(size_t i, void *ctx, qs_train_capture *c, qs_err *e)
{
    sweep_log *l = ctx;
    snprintf(l->log + strlen(l->log), sizeof l->log - strlen(l->log), "r%zu ", i);
    if (i == l->fail_at) return qs_fail(e, "run %zu failed", i);
    fill(c);
    c->seed = 100 + i;
    return 0;
}

static int store_fn(size_t i, const qs_train_capture *c, void *ctx, qs_err *e)
{
    sweep_log *l = ctx;
    if (c->seed != 100 + i || c->nstep != 2 || strcmp(c->recipe, "mxfp4")) return qs_fail(e, "run %zu: not its record", i);
    snprintf(l->log + strlen(l->log), sizeof l->log - strlen(l->log), "s%zu ", i);
    return 0;
}

static void test_sweep_one_rank(void **st)
{
    (void)st;
    sweep_log l = {"", 99};
    qs_err e = {{0}};
    assert_int_equal(qs_train_sweep_ranks(3, run_fn, store_fn, &l, NULL, &e), 0);
    assert_string_equal(l.log, "r0 s0 r1 s1 r2 s2 ");
    sweep_log f = {"", 1};
    assert_int_equal(qs_train_sweep_ranks(3, run_fn, store_fn, &f, NULL, &e), -1);
    assert_string_equal(f.log, "r0 s0 r1 ");
    assert_string_equal(e.msg, "run 1 failed");
}

int main(void)
{
    const struct CMUnitTest t[] = {cmocka_unit_test(test_round_trip), cmocka_unit_test(test_sweep_one_rank), cmocka_unit_test_setup_teardown(test_store, setup, teardown)};
    return cmocka_run_group_tests(t, NULL, NULL);
}
