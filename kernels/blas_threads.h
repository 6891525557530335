/*
** OpenBLAS's thread count: chosen once, when the library loads (OPENBLAS_NUM_THREADS or the cores,
** capped under `ulimit -v` by app/cli/blas_limit.c), and never raised by qscope.  Code that calls BLAS
** from several threads of its own (the attention task pool), or that measures one thread, runs in a
** serial section instead of setting and restoring the count around each call: sections nest and may
** overlap across threads, and the last one to end puts back the start-up count, never a value read
** while another section held it.  GEMM results do not depend on the count (rows and columns are
** split, the K loop is not), so this changes speed only.
*/
#ifndef QS_BLAS_THREADS_H
#define QS_BLAS_THREADS_H

int qs_blas_threads(void);        /* the start-up count (at least 1) */
void qs_blas_serial_begin(void);  /* BLAS on one thread until the matching end */
void qs_blas_serial_end(void);

#endif
