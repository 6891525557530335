/*
** `qscope train` on MPI ranks (see train_par.h).
*/
#include "train_par.h"

#include "par.h"
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
