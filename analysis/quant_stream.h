/*
** Fake-quantizing a stored tensor into an .npy file, streaming and on every core (`quant FILE -o
** OUT`, `quant TENSOR --name OUT`).
**
** The tensor is cut into units of about QS_QSTREAM_UNIT values (1 MiB of float32, so a thread's
** buffers stay in its cache): bands of whole rows, or, for rows longer than that, block-aligned
** pieces of one row.  Pool threads (kernels/pool.h) take units in order, read them through the
** reader's windows, fake-quantize each row or piece (with qs_format_apply where a run needs more than that) and
** append the result to the writer in element order, so memory is a few MB per thread whatever the
** tensor size and the output is written in large sequential blocks.  The result is bit for bit that of one
** qs_format_apply over the whole tensor: stochastic rounding keeps its global element counter,
** NVFP4's per-tensor scale comes from a first absmax pass over the whole tensor.  Where a run or a
** scale spans the whole tensor or a whole column (--gran tensor/col, --scale tensor/col, axis-0
** blocks under stochastic rounding or a scale) one thread applies the format to the whole tensor,
** still streaming its output.
*/
#ifndef QS_QUANT_STREAM_H
#define QS_QUANT_STREAM_H

#include "../kernels/format_apply.h"
#include "../store/npy_write.h"
#include "../store/tensor.h"

#define QS_QSTREAM_UNIT ((uint64_t)1 << 18)

/* Quantize the tensor of r (shape[0..ndim)) with a into w, which must be open for that shape,
** using `threads` threads (<= 0: the online CPUs).  Returns 0, or -1 with e set. */
int qs_quant_stream(const qs_apply *a, qs_treader *r, const uint64_t *shape, int ndim, qs_npy_writer *w, int threads,
                    qs_err *e);

#endif
