/*
** The thread pool (kernels/pool.h): every task exactly once, slots in range with slot 0 the caller,
** nested calls inline, zero tasks, one thread, many tasks, a task waiting for a lower one, two
** callers at once, and that two threads really run at the same time.
*/
#include "test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "../../kernels/pool.h"

typedef struct {
    atomic_int *hits;
    int width;
    pthread_t caller;
    atomic_int bad;
} cover_ctx;

static void cover_task(void *vc, size_t t, int slot)
{
    cover_ctx *c = vc;
    atomic_fetch_add(&c->hits[t], 1);
    if (slot < 0 || slot >= c->width) atomic_store(&c->bad, 1);
    if ((slot == 0) != (pthread_equal(pthread_self(), c->caller) != 0)) atomic_store(&c->bad, 2);
}

static void cover(int threads, size_t n)
{
    cover_ctx c = {calloc(n ? n : 1, sizeof(atomic_int)), qs_pool_width(threads, n), pthread_self(), 0};
    assert_non_null(c.hits);
    qs_pool_for(threads, n, cover_task, &c);
    for (size_t i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
    assert_int_equal(atomic_load(&c.bad), 0);
    free(c.hits);
}

static void every_task_once(void **state)
{
    (void)state;
    cover(4, 1000);
    cover(2, 3);
    cover(0, 77);          /* default width: online CPUs */
    cover(QS_POOL_MAX + 5, 200);
    cover(3, 1000000);     /* many tasks */
}

static void zero_tasks(void **state)
{
    (void)state;
    cover(4, 0);
    assert_int_equal(qs_pool_width(4, 0), 1);
    assert_int_equal(qs_pool_width(8, 3), 3);
    assert_int_equal(qs_pool_width(1, 100), 1);
    assert_true(qs_pool_width(0, 1000) >= 1);
}

typedef struct { size_t order[64]; atomic_size_t k; atomic_int bad; pthread_t caller; } one_ctx;

static void one_task(void *vc, size_t t, int slot)
{
    one_ctx *c = vc;
    if (slot != 0 || !pthread_equal(pthread_self(), c->caller)) atomic_store(&c->bad, 1);
    c->order[atomic_fetch_add(&c->k, 1)] = t;
}

static void one_thread_in_order(void **state)
{
    (void)state;
    one_ctx c = {{0}, 0, 0, pthread_self()};
    qs_pool_for(1, 64, one_task, &c);
    assert_int_equal(atomic_load(&c.bad), 0);
    assert_int_equal(atomic_load(&c.k), 64);
    for (size_t i = 0; i < 64; i++) assert_int_equal(c.order[i], i);
}

/* Each outer task runs a parallel-for of its own: it must run inline, on this thread, as slot 0. */
typedef struct { atomic_int inner[16 * 8]; atomic_int bad; } nest_ctx;
typedef struct { nest_ctx *n; size_t outer; pthread_t self; } inner_ctx;

static void inner_task(void *vc, size_t t, int slot)
{
    inner_ctx *ic = vc;
    if (slot != 0 || !pthread_equal(pthread_self(), ic->self)) atomic_store(&ic->n->bad, 1);
    atomic_fetch_add(&ic->n->inner[ic->outer * 8 + t], 1);
}

static void outer_task(void *vc, size_t t, int slot)
{
    (void)slot;
    inner_ctx ic = {vc, t, pthread_self()};
    qs_pool_for(4, 8, inner_task, &ic);
}

static void nested_runs_inline(void **state)
{
    (void)state;
    nest_ctx n;
    memset(&n, 0, sizeof n);
    qs_pool_for(4, 16, outer_task, &n);
    assert_int_equal(atomic_load(&n.bad), 0);
    for (int i = 0; i < 16 * 8; i++) assert_int_equal(atomic_load(&n.inner[i]), 1);
}

/* Task t waits for task t−1 (a merge window of one): tasks go out in increasing order, so this ends. */
typedef struct { atomic_size_t done; } chain_ctx;

static void chain_task(void *vc, size_t t, int slot)
{
    (void)slot;
    chain_ctx *c = vc;
    while (atomic_load(&c->done) != t) sched_yield();
    atomic_store(&c->done, t + 1);
}

static void lower_task_wait(void **state)
{
    (void)state;
    chain_ctx c = {0};
    qs_pool_for(3, 500, chain_task, &c);
    assert_int_equal(atomic_load(&c.done), 500);
}

/* Two threads call at once: one owns the workers, the other runs inline; both finish. */
static void *other_caller(void *arg)
{
    size_t n = *(size_t *)arg;
    cover(2, n);
    return NULL;
}

static void two_callers(void **state)
{
    (void)state;
    pthread_t th;
    size_t n = 200000;
    assert_int_equal(pthread_create(&th, NULL, other_caller, &n), 0);
    cover(2, n);
    pthread_join(th, NULL);
}

/* Task 0 waits (up to 10 s) for task 1 to start: only possible when two threads run the call. */
typedef struct { atomic_int started1, saw1; } par_ctx;

static void par_task(void *vc, size_t t, int slot)
{
    (void)slot;
    par_ctx *c = vc;
    if (t == 1) { atomic_store(&c->started1, 1); return; }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (atomic_load(&c->started1)) { atomic_store(&c->saw1, 1); return; }
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 10);
}

static void really_parallel(void **state)
{
    (void)state;
    for (int k = 0; k < 20; k++) {   /* repeated: workers sleep between calls and must wake each time */
        par_ctx c = {0, 0};
        qs_pool_for(2, 2, par_task, &c);
        assert_int_equal(atomic_load(&c.saw1), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_task_once),
        cmocka_unit_test(zero_tasks),
        cmocka_unit_test(one_thread_in_order),
        cmocka_unit_test(nested_runs_inline),
        cmocka_unit_test(lower_task_wait),
        cmocka_unit_test(two_callers),
        cmocka_unit_test(really_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
