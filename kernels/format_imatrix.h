/*
** Quantizing a weight matrix with importances (llama.cpp's quant_weights, an importance matrix's row
** for this weight): the registry's answer to "does this format take them" and the rounding itself, and
** a matrix to ggml's block bytes (`bench quantize`), so that nothing above kernels/ names a format family.  Only llama.cpp's types with an importance variant
** take them (format_ggml.h: q4_0 .. q5_1, q2_k .. q6_k, iq4_nl, iq4_xs; ggml's q8_* ignore them).
*/
#ifndef QS_FORMAT_IMATRIX_H
#define QS_FORMAT_IMATRIX_H

#include <stddef.h>

#include "format_apply.h"

/* 1 when the format's encoder takes importances, else 0. */
int qs_format_takes_imatrix(const qs_format *f);

/* rows x cols (row-major; each row one weight row, blocks along it) rounded in place as ggml's
** quantize_<type>(x, rows, cols, qw) followed by its dequantization; qw[cols] the importances (NULL:
** without, the same values as qs_format_apply).  A row's last partial block (cols not a multiple of
** the block) is padded with zeros and rounded without importances, as the registry rounds it.  Rows are
** cut into tasks of the thread pool (threads; results do not depend on it).  -1 with e set. */
int qs_format_fakeq_imatrix(const qs_apply *a, float *x, size_t rows, size_t cols, const float *qw, int threads,
                            qs_err *e);

/* ggml's block of a format of the ggml family: values, bytes, and its GGUF type id (ggml_type); 0, or -1
** for any other format. */
int qs_format_ggml_block(const qs_format *f, int *blk, int *bytes, int *ggml_type);
/* rows x cols (cols a multiple of the block) to ggml's block bytes, rows * cols / blk * bytes of them:
** ggml's quantize_<type>(x, out, rows, cols, qw), qw[cols] or NULL.  Tasks of rows on the pool. */
int qs_format_quantize_ggml(const qs_format *f, const float *x, size_t rows, size_t cols, const float *qw, uint8_t *out,
                            int threads, qs_err *e);

#endif
