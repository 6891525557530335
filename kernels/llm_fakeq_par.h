/*
** One training operand fake-quantized on the thread pool (llm_recipe.c): the same bits as copying
** x, applying the 16-point RHT along the block axis when asked (qs_llm_rht16) and qs_fakeq_matrix
** (resq.h) in place, faster.
**   axis 1 (blocks along rows): contiguous row ranges in parallel, read from x and written to y in one
**     pass, each range's stochastic-rounding counters offset to its place (index0);
**   axis 0 (blocks down columns): panels of 64 columns, each transposed into a per-task buffer that
**     stays in cache, quantized as rows (one run per column: the same blocks, and the same
**     column-major SR counters as qs_format_apply's axis 0), and transposed back.
** A per-tensor scale (NVFP4) is the absmax of the whole matrix, found first.  Scaled casts (cscale),
** other granularities and small operands take the plain path.
*/
#ifndef QS_LLM_FAKEQ_PAR_H
#define QS_LLM_FAKEQ_PAR_H

#include <stddef.h>
#include <stdint.h>

#include "format_apply.h"
#include "llm_recipe.h"
#include "qs_err.h"

/* y (rows x cols) = fake quantization of x under a (block axis a->axis), after the RHT of seed
** rht_seed when rht; y may equal x.  threads as qs_pool_for. */
int qs_llm_fakeq_par(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, int rht, uint64_t rht_seed,
                     int threads, qs_err *e);

/* The same, with the statistics of qs_llm_opstat_add (tile2d 0) added to *st, counted by each task
** while its rows or panel are in cache (the values the format saw: after the RHT), the tasks' counts
** summed in task order: the same counts, without another pass over the operand.  Amax-determined
** block formats on the pool only (operands the parallel path takes, blocks along the runs, an RHT
** only along columns, y != x); 1 (nothing done, y untouched) otherwise. */
int qs_llm_fakeq_par_stat(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, int rht,
                          uint64_t seed, int threads, qs_llm_opstat *st, qs_err *e);

/* The finite absmax of x (rows x cols) as it is (*plain) and after qs_llm_rht16 along axis 0 with seed
** (*rht), in one parallel read: the tensor scales of an operand's two uses (dgrad.dy and wgrad.dy of
** one dY, fwd.x and wgrad.x of one X).  1 (nothing done) without AVX-512, else 0. */
int qs_llm_absmax2(const float *x, size_t rows, size_t cols, uint64_t seed, int threads, float *plain, float *rht);

#endif
