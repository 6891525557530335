/*
** Low-precision training recipes (issue 26, item 3): which registry format each of the six operands
** of a linear layer's three GEMMs goes through.
**   forward          Y  = X · Wᵀ    fwd.x   (tokens x in)  blocks along columns (reduction over in)
**                                   fwd.w   (out x in)     blocks along columns (reduction over in)
**   input gradient   dX = dY · W    dgrad.dy (tokens x out) blocks along columns (reduction over out)
**                                   dgrad.w  (out x in)     blocks along ROWS    (reduction over out)
**   weight gradient  dW = dYᵀ · X   wgrad.dy (tokens x out) blocks along ROWS    (reduction over tokens)
**                                   wgrad.x  (tokens x in)  blocks along ROWS    (reduction over tokens)
** Every operand is quantized from the high-precision tensor (no double quantization), by the
** registry's fake quantization (qs_format_apply); a slot may ask for stochastic rounding (a fresh
** counter-based seed per GEMM call) and for a 16-point random Hadamard transform along the reduction
** dimension (applied to BOTH operands of that GEMM with the same signs, so the product is unchanged in
** exact arithmetic; the 16 signs come from the recipe's seed alone and serve every GEMM of the run, as
** Transformer Engine's one fixed wgrad sign vector, so that an input shared by several GEMMs, the Q, K
** and V projections', is transformed and quantized once).  kernels/llm_train.c runs the recipe (qs_llm_train_state_set_recipe); docs/train.md
** lists the presets, their sources and what stays FP32.
*/
#ifndef QS_LLM_RECIPE_H
#define QS_LLM_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "format_apply.h"
#include "qs_err.h"

typedef enum qs_llm_operand {
    QS_OP_FWD_X = 0, QS_OP_FWD_W, QS_OP_DGRAD_DY, QS_OP_DGRAD_W, QS_OP_WGRAD_DY, QS_OP_WGRAD_X, QS_OP_COUNT
} qs_llm_operand;

typedef struct qs_llm_slot {
    int on;          /* 0: the operand stays FP32 */
    qs_apply a;      /* format and options; the block axis is set by the slot (granularity BLOCK) */
    int sr;          /* stochastic rounding with a per-call seed (the format must support QS_RND_SR) */
    int rht;         /* 16-point random Hadamard transform along the reduction dimension */
    int tile2d;      /* block formats: one scale per 16x16 tile (TE's NVFP4 weights) instead of 1-D blocks;
                     ** the same quantized matrix whichever the axis, so fwd.w and dgrad.w agree */
} qs_llm_slot;

typedef struct qs_llm_recipe {
    char name[32];
    qs_llm_slot op[QS_OP_COUNT];
    uint64_t seed;   /* of the SR draws and the RHT signs */
    int head;        /* 1: the output projection (logits) is quantized too; 0: it stays FP32 */
} qs_llm_recipe;

/* What quantizing operands did, as counts (the training pass adds them per (layer, operand) over a
** step; qs_llm_opstat_add, kernels/llm_opstat.c, has the exact rules):
**   n          values quantized (an off slot quantizes none);
**   underflow  non-zero finite inputs whose quantized value is +-0;
**   clipped    finite inputs beyond the format's range at their scale: |x| > Q + g/2, Q the saturation
**              level of x's block (tile, segment; a cast's max_finite times 1/s), g the element grid's
**              spacing below Q, i.e. no rounding maps x to Q; plus finite inputs an element cast made
**              NaN/Inf (overflow without saturation, also counted as nonfinite);
**   nonfinite  NaN/Inf outputs (NaN/Inf inputs, NaN blocks, overflow).
** With a Hadamard transform the inputs are the transformed values the format saw. */
typedef struct qs_llm_opstat {
    uint64_t n, underflow, clipped, nonfinite;
} qs_llm_opstat;

const char *qs_llm_operand_name(int op);          /* "fwd.x", ... "wgrad.x" */
int qs_llm_operand_parse(const char *s, int *op);
/* The block axis (qs_apply.axis) of the slot: 1 along columns, 0 along rows. */
int qs_llm_operand_axis(int op);

/* Presets: QS_LLM_RECIPE_PRESETS (docs/train.md, "Recipes"); nvfp4-1d is nvfp4 with 1x16 weight blocks. */
#define QS_LLM_RECIPE_PRESETS "fp32, bf16, fp8-hybrid, mxfp8, mxfp4, nvfp4, nvfp4-1d, hif4, hif8"
int qs_llm_recipe_preset(const char *name, qs_llm_recipe *r, qs_err *e);

/* 1 when fwd.w and dgrad.w quantize a weight matrix to the same values, so the training pass may keep
** the forward's for the input gradient (llm_train.c): both slots on with the same format and options
** (the axis aside), neither with SR or an RHT, and the quantization transpose-invariant: 16x16 tiles
** (tile2d), or an elementwise format unscaled or with one scale per tensor.  Else 0 (nvfp4-1d's 1x16
** blocks along columns and along rows differ). */
int qs_llm_recipe_weight_reuse(const qs_llm_recipe *r);
/* 1 when two slots' qs_apply have the same format and options, the axis aside. */
int qs_llm_slot_same_apply(const qs_apply *a, const qs_apply *b);

/* Every slot's options valid for its format, SR supported where asked, RHT on both or neither operand
** of a GEMM (only dgrad and wgrad may use it: the forward's W would need it too). */
int qs_llm_recipe_check(const qs_llm_recipe *r, qs_err *e);

/* y (rows x cols) = the slot's quantization of x along the slot's axis; call numbers the GEMM call
** (the SR seed derives from r->seed and call, the RHT signs from r->seed alone: qs_llm_recipe_rht_seed).
** With RHT, y is the transformed operand quantized.  y may equal x.  An `off` slot copies x. */
int qs_llm_recipe_operand(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols, uint64_t call,
                          float *y, qs_err *e);
/* The same, adding what the quantization did to *st (when st is not NULL; nothing for an off slot).
** Counting needs the input the format saw next to y: with RHT, or when y == x, a copy goes to tmp
** (rows x cols floats; NULL: allocated for the call). */
int qs_llm_recipe_operand_stat(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols,
                               uint64_t call, float *y, float *tmp, qs_llm_opstat *st, qs_err *e);

/* The same, given the finite absmax of what the format sees (after the RHT): amax > 0 stands for the
** pass that would find it, for formats with a per-tensor scale (NVFP4), so the same bits when it is that
** value (qs_llm_absmax2 finds two at once); 0: found here. */
int qs_llm_recipe_operand_am(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols, uint64_t call,
                             float amax, float *y, float *tmp, qs_llm_opstat *st, qs_err *e);

/* Add to st the counts of x (rows x cols, the values the format saw) quantized into y by a (with the
** slot's 16x16 tiles when tile2d).  One pass over x and y, plus one over x for the block maxima of
** block formats (and, for formats whose scales depend on every element, HiF4 and M2XFP, a second run
** of the codec for the metadata, which qs_llm_opstat_quantize saves; under 16x16 tiles these count no
** clips). */
int qs_llm_opstat_add(const qs_apply *a, int tile2d, const float *x, const float *y, size_t rows, size_t cols,
                      qs_llm_opstat *st, qs_err *e);
/* Formats whose scales depend on every element and whose row gives the metadata with fakeq
** (fakeq_meta, seg_scales: HiF4): y (not x) = the registry's quantization of x (rows x cols, blocks along
** a->axis), run by run as qs_format_apply cuts the runs, with the counts added to st, in one codec
** pass.  1 (nothing done) when a does not qualify, 0 when done, -1 on error. */
int qs_llm_opstat_quantize(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, qs_llm_opstat *st,
                           qs_err *e);

/* Fused counting (llm_fakeq_par.c counts each task's runs while they are in cache): the block length
** when a (rows x cols, blocks along a->axis) is an amax-determined block format whose statistics
** blocks are the quantizer's runs cut into blocks from their starts, else 0. */
size_t qs_llm_opstat_run_block(const qs_apply *a, size_t rows, size_t cols);
/* c[0..3] += underflows, non-finite outputs, non-finite inputs, clips of nrun runs of n values (x the
** values the format saw, y their quantization, both with leading dimension ld), blocks from each run's
** start, as qs_llm_opstat_add counts them; ts: the matrix's finite absmax (a tensor scale's). */
int qs_llm_opstat_runs(const qs_apply *a, const float *x, const float *y, size_t nrun, size_t n, size_t ld, float ts,
                       uint64_t c[4], qs_err *e);

/* In place: x (rows x cols) times the block-diagonal orthogonal M = diag(H16 · D) along axis (1: within
** each row, blocks of 16 columns; 0: down each column, blocks of 16 rows), H16 the normalised
** Sylvester Hadamard matrix, D 16 random signs of seed shared by every block (as TE).  inverse
** applies Mᵀ = D · H16.  A final partial block (length not a multiple of 16) is left unchanged. */
void qs_llm_rht16(float *x, size_t rows, size_t cols, int axis, uint64_t seed, int inverse);

/* In place: x (rows x cols) fake-quantized with one block per 16x16 tile (edge tiles smaller), each tile
** a run of the registry's format with block = the tile's size; a per-tensor scale (NVFP4) is the absmax of
** the whole matrix. */
int qs_llm_fakeq_tiles16(const qs_apply *a, float *x, size_t rows, size_t cols, qs_err *e);

/* The per-call seed both operands of one GEMM share (their SR seeds derive from it). */
uint64_t qs_llm_recipe_call_seed(uint64_t seed, uint64_t call);
/* The seed of the RHT signs (qs_llm_rht16) of every GEMM under r: r->seed's alone. */
uint64_t qs_llm_recipe_rht_seed(const qs_llm_recipe *r);

#endif
