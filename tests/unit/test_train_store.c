/*
** Unit tests for the write half of store/train_store.h (store/train_store.c): a run's row, its steps
** and operand statistics, its end; a name taken refused; each step committed on its own (it survives
** a connection closed without _end); removal with its cascade, all or nothing; bad ids refused;
** reopening a run for --resume (steps beyond the checkpoint dropped in the same transaction).
*/
#include "test_store_util.h"

#include "../../kernels/llm_recipe.h"
#include "../../kernels/qs_version.h"
#include "../../store/train_store.h"

static qs_train_run_meta meta(const char *name)
{
    return (qs_train_run_meta){name, "fp32", 7, NULL, 3, "{\"layers\":1}", "{\"batch\":2}", "00ff", "ckpt/dir"};
}

static int64_t begin_ok(qs_db *db, const char *name)
{
    qs_train_run_meta m = meta(name);
    int64_t id = -1;
    qs_err e = {{0}};
    if (qs_train_run_begin(db, &m, &id, &e)) fail_msg("%s", e.msg);
    assert_true(id > 0);
    return id;
}

static void step_ok(qs_db *db, int64_t id, int step, double val, const qs_train_opstat_row *ops, size_t nops)
{
    qs_train_step_row r = {step, 5.0 - step, val, 0.5, 1e-3, 1000};
    qs_err e = {{0}};
    if (qs_train_run_step(db, id, &r, ops, nops, &e)) fail_msg("%s", e.msg);
}

static void test_begin_step_end(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    qs_err e = {{0}};
    int64_t id = begin_ok(db, "train/fp32/s7");
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE status='running' AND steps=3 AND steps_done=0 "
                               "AND seed=7 AND sweep IS NULL AND val0 IS NULL AND finished_at IS NULL", 0), 1);
    char *tv = q_text(db, "SELECT tool_version || '|' || checkpoint || '|' || data_hash FROM train_run");
    char want[128];
    snprintf(want, sizeof want, "%s|ckpt/dir|00ff", QS_VERSION);
    assert_string_equal(tv, want);
    free(tv);
    if (qs_train_run_val0(db, id, 5.5, &e)) fail_msg("%s", e.msg);
    step_ok(db, id, 1, NAN, NULL, 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step WHERE run_id=?1 AND step=1 AND val_loss IS NULL", id), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE steps_done=1 AND val_final IS NULL AND val0=5.5", 0), 1);
    qs_train_opstat_row ops[2] = {{0, QS_OP_FWD_X, 100, 0.25, 0.5, 0}, {1, QS_OP_WGRAD_X, 10, 0, 0, 0.1}};
    step_ok(db, id, 2, 4.25, ops, 2);
    step_ok(db, id, 3, NAN, NULL, 0);   /* not measured: val_final stays the last measured one */
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE steps_done=3 AND val_final=4.25", 0), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE run_id=?1 AND step=2", id), 2);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE layer=0 AND operand='fwd.x' AND n=100 AND "
                               "underflow=0.25 AND clipped=0.5 AND nonfinite=0", 0), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE layer=1 AND operand='wgrad.x' AND nonfinite=0.1", 0), 1);
    if (qs_train_run_end(db, id, "done", NULL, &e)) fail_msg("%s", e.msg);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE status='done' AND error IS NULL AND "
                               "finished_at IS NOT NULL", 0), 1);
    /* a failed run keeps its reason */
    int64_t id2 = begin_ok(db, "train/fp32/s7-2");
    if (qs_train_run_end(db, id2, "failed", "step 1: the gradient is not finite", &e)) fail_msg("%s", e.msg);
    char *why = q_text(db, "SELECT status || ': ' || error FROM train_run WHERE name='train/fp32/s7-2'");
    assert_string_equal(why, "failed: step 1: the gradient is not finite");
    free(why);
    /* an unknown status is refused and changes nothing */
    assert_int_equal(qs_train_run_end(db, id, "running", NULL, &e), -1);
    assert_msg(&e, "not done, stopped or failed");
}

static void test_name_taken(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    begin_ok(f->db, "r");
    qs_train_run_meta m = meta("r");
    int64_t id = -1;
    assert_int_equal(qs_train_run_begin(f->db, &m, &id, &e), -1);
    assert_msg(&e, "'r' exists already");
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_run", 0), 1);
    /* the connection is left usable: no transaction stays open */
    begin_ok(f->db, "r2");
    m.name = "";
    assert_int_equal(qs_train_run_begin(f->db, &m, &id, &e), -1);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_run", 0), 2);
    /* _begin_unique: the first free name of r, r-2, r-3 ... (r2 is not r-2) */
    char name[16];
    m.name = "r";
    if (qs_train_run_begin_unique(f->db, &m, name, sizeof name, &id, &e)) fail_msg("%s", e.msg);
    assert_string_equal(name, "r-2");
    if (qs_train_run_begin_unique(f->db, &m, name, sizeof name, &id, &e)) fail_msg("%s", e.msg);
    assert_string_equal(name, "r-3");
    m.name = "fresh";
    if (qs_train_run_begin_unique(f->db, &m, name, sizeof name, &id, &e)) fail_msg("%s", e.msg);
    assert_string_equal(name, "fresh");
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_run WHERE id=?1 AND name='fresh'", id), 1);
    m.name = "a-name-longer-than-16";
    assert_int_equal(qs_train_run_begin_unique(f->db, &m, name, sizeof name, &id, &e), -1);
    assert_msg(&e, "too long");
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_run", 0), 5);
}

/* Each step is committed as it is stored: a run whose process ends without _end keeps them. */
static void test_steps_survive_close(void **state)
{
    fixture *f = *state;
    int64_t id = begin_ok(f->db, "killed");
    step_ok(f->db, id, 1, NAN, NULL, 0);
    step_ok(f->db, id, 2, 3.0, NULL, 0);
    char path[128];
    fpath(f, "t.db", path, sizeof path);
    qs_db_close(f->db);
    qs_err e = {{0}};
    if (!(f->db = qs_db_open(path, &e))) fail_msg("%s", e.msg);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_run WHERE status='running' AND steps_done=2 AND "
                                  "val_final=3.0", 0), 1);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM train_step WHERE run_id=?1", id), 2);
}

static void test_remove_cascades(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    qs_err e = {{0}};
    qs_train_opstat_row op = {0, QS_OP_FWD_W, 4, 0, 0, 0};
    int64_t a = begin_ok(db, "a"), b = begin_ok(db, "b");
    step_ok(db, a, 1, 1.0, &op, 1);
    step_ok(db, b, 1, 1.0, &op, 1);
    /* an unknown name removes nothing, not even the names before it */
    const char *bad[] = {"a", "nope"};
    assert_int_equal(qs_train_run_remove(db, bad, 2, &e), -1);
    assert_msg(&e, "'nope'");
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run", 0), 2);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step", 0), 2);
    const char *one[] = {"a"};
    if (qs_train_run_remove(db, one, 1, &e)) fail_msg("%s", e.msg);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE name='b'", 0), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run", 0), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step WHERE run_id=?1", a), 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE run_id=?1", a), 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE run_id=?1", b), 1);
    /* inside a caller's transaction it joins it: the caller's rollback undoes it */
    if (qs_db_begin(db, &e)) fail_msg("%s", e.msg);
    const char *two[] = {"b"};
    if (qs_train_run_remove(db, two, 1, &e)) fail_msg("%s", e.msg);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run", 0), 0);
    qs_db_rollback(db);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run", 0), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step WHERE run_id=?1", b), 1);
}

static void test_bad_id(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    qs_err e = {{0}};
    int64_t id = begin_ok(db, "x");
    qs_train_step_row r = {1, 1, NAN, 1, 1, 1};
    assert_int_equal(qs_train_run_step(db, id + 99, &r, NULL, 0, &e), -1);
    assert_msg(&e, "no training run with id");
    assert_int_equal(qs_train_run_val0(db, id + 99, 1.0, &e), -1);
    assert_msg(&e, "no training run with id");
    assert_int_equal(qs_train_run_end(db, id + 99, "done", NULL, &e), -1);
    assert_msg(&e, "no training run with id");
    /* a step twice, a step 0 and an operand out of range are refused, and leave nothing behind */
    step_ok(db, id, 1, NAN, NULL, 0);
    assert_int_equal(qs_train_run_step(db, id, &r, NULL, 0, &e), -1);
    assert_msg(&e, "step 1 already");
    r.step = 0;
    assert_int_equal(qs_train_run_step(db, id, &r, NULL, 0, &e), -1);
    r.step = 2;
    qs_train_opstat_row op = {0, QS_OP_COUNT, 1, 0, 0, 0};
    assert_int_equal(qs_train_run_step(db, id, &r, &op, 1, &e), -1);
    assert_msg(&e, "no such slot");
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step", 0), 1);
    assert_int_equal(q_int(db, "SELECT steps_done FROM train_run", 0), 1);
    /* and the connection is still usable */
    step_ok(db, id, 2, NAN, NULL, 0);
}

/* --resume reopens the stored run: steps and operand statistics beyond the checkpoint's step go, the
** run is 'running' again with the new plan; an absent run, another run of that name, and bad
** arguments change nothing. */
static void test_reopen(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    qs_err e = {{0}};
    qs_train_opstat_row op = {0, QS_OP_FWD_X, 8, 0.5, 0, 0};
    int64_t id = begin_ok(db, "run"), other = begin_ok(db, "other"), got = -1;
    for (int s = 1; s <= 3; s++) step_ok(db, id, s, s == 1 ? 4.5 : s == 3 ? 3.5 : NAN, &op, 1);
    step_ok(db, other, 1, 9.0, &op, 1);
    if (qs_train_run_end(db, id, "stopped", "stopped by SIGINT after step 3", &e)) fail_msg("%s", e.msg);
    char *before = q_text(db, "SELECT group_concat(name || status || steps || steps_done, ';') FROM train_run");
    /* absent, another data hash, steps not all stored: 0 or 2 and nothing changed */
    qs_train_reopen r = {"nope", "00ff", 2, 5, NULL};
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), 0);
    r = (qs_train_reopen){"run", "beef", 2, 5, NULL};
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), 2);
    r = (qs_train_reopen){"run", "00ff", 4, 5, NULL};   /* the checkpoint is beyond the stored steps */
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), 2);
    r = (qs_train_reopen){"run", "00ff", 2, 2, NULL};   /* nothing to run */
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), -1);
    assert_msg(&e, "cannot continue from step 2 to 2");
    char *after = q_text(db, "SELECT group_concat(name || status || steps || steps_done, ';') FROM train_run");
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step", 0), 4);
    assert_int_equal(got, -1);
    /* the checkpoint of step 1 of run (3 steps stored), resumed to 6 steps */
    r = (qs_train_reopen){"run", "00ff", 1, 6, "new/ckpt"};
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), 1);
    assert_int_equal(got, id);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE id=?1 AND status='running' AND steps=6 AND "
                               "steps_done=1 AND val_final=4.5 AND error IS NULL AND finished_at IS NULL AND "
                               "checkpoint='new/ckpt' AND json_extract(options, '$.steps')=6 AND "
                               "json_extract(options, '$.batch')=2", id), 1);
    assert_int_equal(q_int(db, "SELECT count(*) || max(step) FROM train_step WHERE run_id=?1", id), 11);
    assert_int_equal(q_int(db, "SELECT count(*) || max(step) FROM train_opstat WHERE run_id=?1", id), 11);
    /* the other run is untouched; the steps dropped can be stored again, and the run ends as usual */
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_step WHERE run_id=?1", other), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_opstat WHERE run_id=?1", other), 1);
    for (int s = 2; s <= 6; s++) step_ok(db, id, s, s == 6 ? 2.5 : NAN, &op, 1);
    if (qs_train_run_end(db, id, "done", NULL, &e)) fail_msg("%s", e.msg);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE id=?1 AND status='done' AND steps_done=6 AND "
                               "val_final=2.5 AND checkpoint='new/ckpt'", id), 1);
    /* a reopen that keeps every step (a finished run extended) keeps the checkpoint when none is given */
    r = (qs_train_reopen){"run", "00ff", 6, 8, NULL};
    assert_int_equal(qs_train_run_reopen(db, &r, &got, &e), 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM train_run WHERE id=?1 AND status='running' AND steps=8 AND "
                               "steps_done=6 AND val_final=2.5 AND checkpoint='new/ckpt'", id), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_begin_step_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_survive_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_cascades, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
    };
    return cmocka_run_group_tests_name("train_store", tests, NULL, NULL);
}
