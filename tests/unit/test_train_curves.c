/*
** Unit tests for analysis/train_curves.c: training runs (inserted by SQL) grouped over seeds — same
** recipe, model and options apart from the seed make one curve, any other difference another — with
** the mean per step, the band (min..max with two seeds, the 95% Student-t interval with three), the
** validation curve starting at val0, unmeasured steps left out, the final values, and the relative gap
** figure against a baseline curve.
*/
#include "test_util.h"
#include "test_store_util.h"   /* the fixture: a temporary directory with an open database */

#include <math.h>

#include "../../analysis/train_curves.h"
#include "../../store/db.h"
#include "../../store/train_store.h"

static void sql(qs_db *db, const char *s)
{
    qs_err e = {{0}};
    if (qs_db_exec(db, s, &e)) fail_msg("%s", e.msg);
}

/* a1..a3: recipe a, seeds 1..3 (one with the options' keys in another order and a checkpoint), losses 3, 4, 8 at
** step 2 (validation at step 2 only); b1, b2: recipe b, two seeds; c: recipe a with another batch. */
static void runs(qs_db *db)
{
    sql(db, "INSERT INTO train_run(id, name, recipe, seed, status, steps, steps_done, val0, val_final, model, options, "
            "data_hash, tool_version) VALUES "
            "(1, 'a1', 'a', 1, 'done', 2, 2, 10, 3, '{\"layers\":1}', '{\"batch\":4,\"seed\":1}', 'h', 'v'),"
            "(2, 'a2', 'a', 2, 'done', 2, 2, 10, 4, '{\"layers\":1}', '{\"seed\":2,\"batch\":4,\"out\":\"ck2\"}', 'h', 'v'),"
            "(3, 'a3', 'a', 3, 'done', 2, 2, 10, 8, '{\"layers\":1}', '{\"batch\":4,\"seed\":3}', 'h', 'v'),"
            "(4, 'b1', 'b', 1, 'done', 2, 2, 10, 2, '{\"layers\":1}', '{\"batch\":4,\"seed\":1}', 'h', 'v'),"
            "(5, 'b2', 'b', 2, 'done', 2, 2, 10, 4, '{\"layers\":1}', '{\"batch\":4,\"seed\":2}', 'h', 'v'),"
            "(6, 'c', 'a', 1, 'done', 2, 2, 10, 5, '{\"layers\":1}', '{\"batch\":8,\"seed\":1}', 'h', 'v');"
            "INSERT INTO train_step(run_id, step, train_loss, val_loss) VALUES "
            "(1, 1, 6, NULL), (1, 2, 3, 3), (2, 1, 6, NULL), (2, 2, 4, 4), (3, 1, 6, NULL), (3, 2, 8, 8),"
            "(4, 1, 5, NULL), (4, 2, 2, 2), (5, 1, 5, NULL), (5, 2, 4, 4), (6, 1, 7, NULL), (6, 2, 5, 5);");
}

static void test_t95(void **state)
{
    (void)state;
    assert_float_equal(qs_t95(1), 12.706, 1e-9);
    assert_float_equal(qs_t95(2), 4.303, 1e-9);
    assert_float_equal(qs_t95(30), 2.042, 1e-9);
    assert_float_equal(qs_t95(200), 1.96, 1e-9);
    assert_true(isnan(qs_t95(0)));
}

static void test_groups(void **state)
{
    fixture *f = *state;
    runs(f->db);
    qs_err e = {{0}};
    qs_train_run_item *r;
    size_t n;
    assert_int_equal(qs_train_run_list(f->db, NULL, &r, &n, &e), 0);
    assert_int_equal(n, 6);
    assert_true(qs_train_same_config(&r[0], &r[1]));    /* options in another order, another seed and checkpoint */
    assert_false(qs_train_same_config(&r[0], &r[3]));   /* another recipe */
    assert_false(qs_train_same_config(&r[0], &r[5]));   /* another batch */
    qs_loss_curve *c;
    size_t nc;
    assert_int_equal(qs_loss_curves(f->db, r, n, 1, &c, &nc, &e), 0);
    assert_int_equal(nc, 3);
    /* a: validation at steps 0 (val0) and 2; mean 5, t-interval 5 ± 4.303 * sqrt(7) / sqrt(3) */
    assert_string_equal(c[0].recipe, "a");
    assert_int_equal(c[0].nruns, 3);
    assert_int_equal(c[0].band, QS_BAND_T95);
    assert_string_equal(c[0].label, "a (3 seeds, 95% t-interval)");
    assert_int_equal(c[0].n, 2);
    assert_true(c[0].x[0] == 0 && c[0].x[1] == 2);
    assert_float_equal(c[0].mean[0], 10, 1e-12);
    assert_float_equal(c[0].lo[0], 10, 1e-12);   /* three equal values: no width */
    assert_float_equal(c[0].mean[1], 5, 1e-12);
    double h = 4.303 * sqrt(7.0) / sqrt(3.0);
    assert_float_equal(c[0].lo[1], 5 - h, 1e-9);
    assert_float_equal(c[0].hi[1], 5 + h, 1e-9);
    assert_float_equal(c[0].final, 5, 1e-12);
    assert_float_equal(c[0].final_hi, 5 + h, 1e-9);
    /* b: two seeds, min..max */
    assert_int_equal(c[1].band, QS_BAND_MINMAX);
    assert_string_equal(c[1].label, "b (2 seeds, min..max)");
    assert_float_equal(c[1].mean[1], 3, 1e-12);
    assert_true(c[1].lo[1] == 2 && c[1].hi[1] == 4);
    /* c alone: its name, no band */
    assert_string_equal(c[2].label, "c");
    assert_int_equal(c[2].band, QS_BAND_NONE);
    assert_true(isnan(c[2].lo[1]) && isnan(c[2].hi[1]));

    /* the gap of a and c to b, per step: (5-3)/3 and (5-3)/3 at step 2, 0 at step 0; b itself left out */
    qs_figure *g = qs_plot_loss_gap(NULL, c, nc, &c[1]);
    assert_non_null(g);
    assert_int_equal(g->nseries, 3);   /* a, c and the zero line */
    assert_string_equal(g->series[0].name, "a (3 seeds, 95% t-interval)");
    assert_int_equal(g->series[0].n, 2);
    assert_float_equal(g->series[0].y[0], 0, 1e-12);
    assert_float_equal(g->series[0].y[1], 100.0 * 2 / 3, 1e-9);
    assert_string_equal(g->series[1].name, "c");
    assert_int_equal(g->series[2].kind, QS_SER_HLINE);
    qs_fig_free(g);
    /* the loss figure: a line per curve, two dotted band lines per curve with a band */
    qs_figure *L = qs_plot_loss(NULL, c, nc, 1, 0);
    assert_non_null(L);
    assert_int_equal(L->nseries, 3 + 2 + 2);
    assert_null(L->series[0].name);   /* the band first, the mean over it */
    assert_null(L->series[1].name);
    assert_int_equal(L->series[1].dash, QS_DASH_DOTTED);
    assert_string_equal(L->series[2].name, "a (3 seeds, 95% t-interval)");
    assert_int_equal(L->series[2].dash, QS_DASH_SOLID);
    assert_non_null(strstr(L->note, "95% t-interval"));
    qs_fig_free(L);
    qs_loss_curves_free(c, nc);

    /* training loss: steps 1 and 2, no val0 */
    assert_int_equal(qs_loss_curves(f->db, r, 1, 0, &c, &nc, &e), 0);
    assert_int_equal(nc, 1);
    assert_int_equal(c[0].n, 2);
    assert_true(c[0].x[0] == 1 && c[0].mean[0] == 6 && c[0].mean[1] == 3);
    assert_float_equal(c[0].final, 3, 1e-12);
    qs_loss_curves_free(c, nc);
    qs_train_run_items_free(r, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t95),
        cmocka_unit_test_setup_teardown(test_groups, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
