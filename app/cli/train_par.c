/*
** `qscope train` on MPI ranks (see train_par.h).
*/
#include "train_par.h"

#include <stdlib.h>

#include "par.h"
#include "../../kernels/blas_threads.h"
#include "../../kernels/qs_clock.h"

static double g_wait_s, g_sum_s;   /* seconds waiting for the slowest rank, and exchanging */

/* A barrier first (microseconds) so that the exchange's own time is measured apart from the wait. */
static int sum_f32(void *ctx, float *x, size_t n, qs_err *e)
{
    (void)ctx;
    double t0 = qs_now_s();
    qs_par_barrier();
    double t1 = qs_now_s();
    int rc = qs_par_sum_f32(x, n, e);
    g_wait_s += t1 - t0;
    g_sum_s += qs_now_s() - t1;
    return rc;
}

static int sum_f64(void *ctx, double *x, size_t n, qs_err *e)
{
    (void)ctx;
    return qs_par_sum_f64(x, n, e);
}

const qs_train_par *qs_train_par_mpi(qs_train_par *p)
{
    if (qs_par_size() <= 1) return NULL;
    *p = (qs_train_par){qs_par_rank(), qs_par_size(), sum_f32, sum_f64, NULL};
    return p;
}

void qs_train_par_seconds(double *wait, double *sum)
{
    *wait = g_wait_s;
    *sum = g_sum_s;
}

typedef struct {
    qs_train_sweep_run_fn run;
    qs_train_sweep_store_fn store;
    void *ctx;
} sweep_ctx;

static int sweep_unit(size_t i, void *ctx, uint8_t **out, size_t *len, qs_err *e)
{
    const sweep_ctx *s = ctx;
    qs_train_capture c = {0};
    double t0 = qs_now_s();
    int rc = s->run(i, s->ctx, &c, e);
    c.seconds = qs_now_s() - t0;
    c.rank = qs_par_rank();
    rc = rc || qs_train_capture_pack(&c, out, len, e) ? -1 : 0;
    qs_train_capture_free(&c);
    return rc;
}

static int sweep_collect(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    const sweep_ctx *s = ctx;
    qs_train_capture c;
    if (qs_train_capture_unpack(b, len, &c, e)) return -1;
    int rc = s->store(i, &c, s->ctx, e);
    qs_train_capture_free(&c);
    return rc;
}

int qs_train_sweep_ranks(size_t n, qs_train_sweep_run_fn run, qs_train_sweep_store_fn store, void *ctx,
                         const char *what, qs_err *e)
{
    sweep_ctx s = {run, store, ctx};
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int serial = qs_par_size() > 1 && local && atoi(local) > 1 && !getenv("OPENBLAS_NUM_THREADS");
    if (serial) qs_blas_serial_begin();
    int rc = qs_par_run(n, NULL, sweep_unit, sweep_collect, &s, what, e);
    if (serial) qs_blas_serial_end();
    return rc;
}
