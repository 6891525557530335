/*
** `qscope train` on MPI ranks (see train_par.h).
*/
#include "train_par.h"

#include "par.h"

static int sum_f32(void *ctx, float *x, size_t n, qs_err *e)
{
    (void)ctx;
    return qs_par_sum_f32(x, n, e);
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
