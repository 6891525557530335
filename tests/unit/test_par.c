/*
** The MPI layer without mpirun (app/cli/par.h): one rank, units computed and collected in order, a failure
** stops at once; and the schedule every rank computes alike: longest first, to the least loaded rank.
*/
#include "test_util.h"

#include <math.h>

#include "../../app/cli/par.h"

typedef struct { char log[256]; size_t fail_at; } trace;

static int unit(size_t i, void *ctx, uint8_t **out, size_t *len, qs_err *e)
{
    trace *t = ctx;
    snprintf(t->log + strlen(t->log), sizeof t->log - strlen(t->log), "f%zu ", i);
    if (i == t->fail_at) return qs_fail(e, "unit %zu failed", i);
    *out = malloc(2);
    (*out)[0] = (uint8_t)('a' + i);
    (*out)[1] = 0;
    *len = 2;
    return 0;
}

static int collect(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    trace *t = ctx;
    if (len != 2 || b[0] != 'a' + i) return qs_fail(e, "unit %zu: not its bytes", i);
    snprintf(t->log + strlen(t->log), sizeof t->log - strlen(t->log), "c%zu ", i);
    return 0;
}

static void one_rank_in_order(void **state)
{
    (void)state;
    int argc = 1;
    char *args[] = {"qscope", NULL}, **argv = args;
    qs_err e = {{0}};
    assert_int_equal(qs_par_init(&argc, &argv, &e), 0);   /* no launcher in the environment */
    assert_int_equal(qs_par_size(), 1);
    assert_int_equal(qs_par_rank(), 0);
    double cost[4] = {1, 9, 2, 5};   /* one rank keeps unit order, whatever the costs */
    trace t = {"", (size_t)-1};
    assert_int_equal(qs_par_run(4, cost, unit, collect, &t, NULL, &e), 0);
    assert_string_equal(t.log, "f0 c0 f1 c1 f2 c2 f3 c3 ");
    /* a failing unit ends the run there, with its message; the earlier ones were collected */
    trace u = {"", 2};
    assert_int_equal(qs_par_run(4, NULL, unit, collect, &u, NULL, &e), -1);
    assert_string_equal(u.log, "f0 c0 f1 c1 f2 ");
    assert_string_equal(e.msg, "unit 2 failed");
    assert_int_equal(qs_par_run(0, NULL, unit, collect, &u, NULL, &e), 0);
    assert_int_equal(qs_par_exit(3), 3);
}

static void schedule_longest_first(void **state)
{
    (void)state;
    /* by cost 5, 3, 3, 2, 2, 2, 1: each to the least loaded rank, ties to the lower rank */
    double cost[7] = {5, 3, 3, 2, 2, 2, 1};
    int owner[7];
    qs_par_assign(7, cost, 3, owner);
    int want[7] = {0, 1, 2, 1, 2, 0, 1};
    assert_memory_equal(owner, want, sizeof want);
    /* the order of the units does not matter, only their costs (ties: the lower index first) */
    double shuffled[7] = {2, 1, 3, 5, 2, 3, 2};
    qs_par_assign(7, shuffled, 3, owner);
    int want2[7] = {1, 1, 1, 0, 2, 2, 0};
    assert_memory_equal(owner, want2, sizeof want2);
    /* loads stay within one unit of each other when the units are equal */
    double eq[10];
    for (int i = 0; i < 10; i++) eq[i] = 1;
    int o10[10], load[4] = {0};
    qs_par_assign(10, eq, 4, o10);
    for (int i = 0; i < 10; i++) load[o10[i]]++;
    for (int r = 0; r < 4; r++) assert_true(load[r] == 2 || load[r] == 3);
    /* no cost (NaN, negative) counts as 0; one rank takes everything */
    double odd[3] = {NAN, -4, 1};
    qs_par_assign(3, odd, 2, owner);
    assert_int_equal(owner[2], 0);
    qs_par_assign(3, odd, 1, owner);
    assert_int_equal(owner[0] + owner[1] + owner[2], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank_in_order),
        cmocka_unit_test(schedule_longest_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
