/*
** Applying a format to a whole tensor: granularity, block axis and streaming.
**
** The tensor is seen as a matrix (rows x cols, C order; 1-D tensors are one row).  Runs of values
** are cut out of it and handed to the format's fakeq:
**   QS_GRAN_BLOCK, axis 1: each row is a run, blocks of the format's size along the row (default);
**   QS_GRAN_BLOCK, axis 0: each column is a run, blocks run down the column;
**   QS_GRAN_ROW / QS_GRAN_COL: one block (one scale) per row / column — for formats whose block
**     size can be a whole run (int8/int4);
**   QS_GRAN_TENSOR: one block for the whole tensor.
** NVFP4's per-tensor scale is the absmax of the whole tensor (a first pass) unless given.
** Work is streamed in bands of rows with bounded memory.  A run with one scale (int8/int4 per tensor,
** row or column) longer than a band is read twice: first for its amax, then in pieces quantized
** under that amax (qs_qopts.tensor_scale), so memory stays bounded there too.
** A scaled element cast (cscale, cast_scale.h) first reads the tensor once for the absmax of each
** scale's run (the tensor, each row or each column), then casts Q(x * s) * inv value by value.
*/
#ifndef QS_FORMAT_APPLY_H
#define QS_FORMAT_APPLY_H

#include <stdint.h>

#include "cast_scale.h"
#include "format.h"

typedef enum qs_gran { QS_GRAN_BLOCK = 0, QS_GRAN_TENSOR, QS_GRAN_ROW, QS_GRAN_COL } qs_gran;

typedef struct qs_apply {
    const qs_format *f;
    qs_qopts o;
    int axis;       /* 1: blocks along the last dimension (contiguous); 0: along the first */
    qs_gran gran;
    int cscale;     /* qs_cscale: one FP32 scale per tensor/row/column of an element cast (0: none) */
} qs_apply;

/* Where the blocks of a format applied to a rows x cols tensor lie: runs are rows (or columns, col),
** cut into blocks of blk values (0: one block per run); whole: one block, the whole tensor.  Block b
** is block b % per of run b / per.  The one mapping apply, the analysis and the inspector share. */
typedef struct qs_block_geom {
    int whole, col;
    size_t blk;
    uint64_t rows, cols;
    uint64_t runlen, nruns;   /* whole: one run of rows x cols values */
    uint64_t per;             /* blocks per run */
    uint64_t nblocks;
} qs_block_geom;

void qs_block_geom_of(const qs_apply *a, uint64_t rows, uint64_t cols, qs_block_geom *g);
/* Flat C-order indices of block b's elements (at most cap, ascending in the run) and the SR counter
** index of its first element; returns the count. */
size_t qs_block_geom_elems(const qs_block_geom *g, uint64_t b, uint64_t *idx, size_t cap, uint64_t *index0);
uint64_t qs_block_geom_block_of(const qs_block_geom *g, uint64_t i);   /* the block of flat element i */

typedef int (*qs_fa_read)(void *ctx, uint64_t start, size_t n, float *out, qs_err *e);
typedef int (*qs_fa_write)(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e);

int qs_format_apply(const qs_apply *a, uint64_t rows, uint64_t cols, qs_fa_read rd, void *rctx,
                    qs_fa_write wr, void *wctx, qs_err *e);

/* Absmax over the finite values (NaN and Inf ignored), used for per-tensor scales. */
int qs_format_absmax(qs_fa_read rd, void *rctx, uint64_t n, float *amax, qs_err *e);

/* The scales of a scaled cast (a->cscale != 0): n = 1, rows or cols pairs (s, inv) of
** qs_cast_scale_of, allocated into *s and *inv (16 spare zeros at the end); fails when the format has
** no scale target or scale=col is asked of a 1-D tensor. */
int qs_cast_scales(const qs_apply *a, uint64_t rows, uint64_t cols, qs_fa_read rd, void *rctx, float **s, float **inv,
                   size_t *n, qs_err *e);

const char *qs_gran_name(qs_gran g);
int qs_gran_parse(const char *s, qs_gran *g);

#endif
