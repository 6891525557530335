/* OpenBLAS's thread count, chosen once (see blas_threads.h). */
#include "blas_threads.h"

#include <pthread.h>

#include <cblas.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int startup = 1, serial;

static void read_startup(void)
{
    int n = openblas_get_num_threads();
    startup = n < 1 ? 1 : n;
}

int qs_blas_threads(void)
{
    pthread_once(&once, read_startup);
    return startup;
}

void qs_blas_serial_begin(void)
{
    pthread_once(&once, read_startup);
    pthread_mutex_lock(&lock);
    if (serial++ == 0 && startup > 1) openblas_set_num_threads(1);
    pthread_mutex_unlock(&lock);
}

void qs_blas_serial_end(void)
{
    pthread_mutex_lock(&lock);
    if (serial > 0 && --serial == 0 && startup > 1) openblas_set_num_threads(startup);
    pthread_mutex_unlock(&lock);
}
