/*
** The cross-checks of `qscope train` (issue 26, item 6): the gradient of the first training micro-batch
** as a Hugging Face safetensors file (`--grad-out`), that micro-batch's token ids (`--batch-out`), and
** the FP32 and quantized operands of layer 0's Q projection under a recipe (`--operand-out`), so that
** anyone can check the gradient against finite differences and the recipe's quantization against
** `qscope quant`.  docs/train.md, "Cross-checks".
*/
#ifndef QS_TRAIN_GRAD_H
#define QS_TRAIN_GRAD_H

#include <stddef.h>
#include <stdint.h>

#include "train_loop.h"

typedef struct qs_train_grad_req {
    const char *grad_out;      /* .safetensors: the gradient, Hugging Face names, F32; NULL: none */
    const char *batch_out;     /* .npy: the micro-batch's token ids, int32, batch x (T+1); NULL: none */
    const char *operand_out;   /* directory: OP.src.npy and OP.q.npy of layer 0's wq GEMMs; needs a recipe */
} qs_train_grad_req;

/* Micro-batch 0 of train under o (the windows step 1 trains on first: qs_train_batch), one training
** pass of m under o->recipe (FP32 without) from a fresh state, so the SR call counter starts where the
** run's does: *loss is the mean token loss, and the files of q are written.  The gradient is that of
** *loss, before any accumulation scaling or clipping (with --accum 1 it is step 1's gradient).
** Errors name the file or the option. */
int qs_train_grad_run(const qs_llm_model *m, const int32_t *train, size_t ntrain, const qs_train_opts *o,
                      const qs_train_grad_req *q, double *loss, qs_err *e);

#endif
