/*
** The one thread pool: every data-parallel site of qscope (attention, AMLA, the Llama forward,
** the training pass, MSD, the metrics engine, tensor statistics, quant streaming, model evaluation, the simulations)
** runs its tasks here (docs/architecture.md, "Threads").
**
** qs_pool_for(threads, n, fn, ctx) calls fn(ctx, task, slot) once for every task in [0, n) and
** returns when all have returned.  The calling thread takes part as slot 0; pool workers are slots
** 1 .. width−1, where width = qs_pool_width(threads, n).  A slot runs one task at a time, so state
** indexed by slot (scratch, histograms) needs no lock.  Tasks are handed out in increasing order,
** one at a time, to whichever slot is free: a task may wait for a lower task (a merge window) but
** never for a higher one.  How work is cut into tasks is the caller's: results must not depend on
** which slot ran which task.
**
** Workers are started on first use, up to the largest width asked for (at most QS_POOL_MAX), and
** sleep between calls (after watching 30 us for the next one).  A call from inside a task (nested),
** or while another thread's call holds the pool, runs its tasks inline on the calling thread, in
** order, as slot 0: no deadlock, same results.
*/
#ifndef QS_POOL_H
#define QS_POOL_H

#include <stddef.h>

#define QS_POOL_MAX 64

typedef void (*qs_pool_fn)(void *ctx, size_t task, int slot);

/* threads <= 0: one per online CPU.  The result is in [1, QS_POOL_MAX] and never above n (1 for n = 0). */
int qs_pool_width(int threads, size_t n);

/* Run every task (see above).  Never fails: without workers (none could be started, nested, busy)
** the tasks run inline. */
void qs_pool_for(int threads, size_t n, qs_pool_fn fn, void *ctx);

/* Online CPUs (at least 1). */
int qs_pool_cpus(void);

#endif
