/*
** Fused training-operand kernels (llm_fakeq_par.c's tasks): one format family's fake quantization of
** a task's share of an operand, straight from the row-major matrix along either axis (no transposed
** panels), with the 16-point RHT along the block axis and the operand statistics taken in the same
** pass.  Each family lives in its own file (llm_fakeq_mx.c, llm_fakeq_nvfp4.c, llm_fakeq_hif4.c) and
** must give the bits of the generic path: copy + qs_llm_rht16 + qs_fakeq_matrix, and the counts of
** qs_llm_opstat_runs / qs_llm_opstat_add (tile2d 0) on the values the format saw.
*/
#ifndef QS_LLM_FAKEQ_FAST_H
#define QS_LLM_FAKEQ_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "format_apply.h"
#include "qs_err.h"

typedef struct qs_fq_task {
    const qs_apply *a;   /* format and options: tensor scale resolved (o.tensor_scale > 0 where the format
                         ** has one), SR seed in o.seed, the matrix's SR base in o.index0; a->axis unused */
    int axis;            /* 1: blocks along each row (element (r, c) has SR counter index0 + r*cols + c);
                         ** 0: blocks down each column (counter index0 + c*rows + r), as qs_format_apply */
    const float *x;      /* the whole matrix, rows x cols, row-major */
    float *y;            /* the output matrix; may equal x (then each block is read before it is written) */
    size_t rows, cols;
    size_t r0, r1;       /* axis 1: this task's rows [r0, r1), all columns */
    size_t c0, c1;       /* axis 0: this task's columns [c0, c1) of rows [r0, r1): all rows for the mx and
                         ** hif4 kernels; whole 16-row bands (r1 = rows at the end) of every column for
                         ** nvfp4's, so that each task reads whole rows */
    int rht;             /* 1: the 16-point RHT of qs_llm_rht16(.., axis, rht_seed, 0) along the block axis first
                         ** (blocks of 16 from the run's start; a final partial block unchanged) */
    uint64_t rht_seed;
    uint64_t *cnt;       /* NULL, or c[0..3] += underflows, non-finite outputs, non-finite inputs, clips of this
                         ** share: the rules of qs_llm_opstat_add with tile2d 0 (llm_opstat.c) */
    float ts;            /* the matrix's finite absmax (for the clip thresholds of tensor-scaled formats) */
} qs_fq_task;

/* 1 when a family kernel takes every task of this operand (format, options, rounding, axis, RHT,
** with or without counts), else 0 and the generic path runs. */
int qs_llm_fakeq_fast_ok(const qs_apply *a, int axis, int rht, int counting);
/* 0 done, -1 error (e set).  Only for operands qs_llm_fakeq_fast_ok accepted. */
int qs_llm_fakeq_fast(const qs_fq_task *t, qs_err *e);

/* The families (one file each); the same contract. */
int qs_fq_mx_ok(const qs_apply *a, int axis, int rht, int counting);
int qs_fq_mx(const qs_fq_task *t, qs_err *e);
int qs_fq_nvfp4_ok(const qs_apply *a, int axis, int rht, int counting);
int qs_fq_nvfp4(const qs_fq_task *t, qs_err *e);
int qs_fq_hif4_ok(const qs_apply *a, int axis, int rht, int counting);
int qs_fq_hif4(const qs_fq_task *t, qs_err *e);

#endif
