/*
** The FP32 training loop of `qscope train` (issue 26, second part): a model from scratch (llm.c-style
** init) or loaded, deterministic batches from a token array, AdamW with warm-up + cosine schedule,
** global gradient-norm clipping, gradient accumulation, and validation loss on fixed held-out batches.
** Same inputs and seed give bit-identical losses and weights (one thread of loops; OpenBLAS sgemm
** is deterministic for a fixed thread count and shape).
*/
#ifndef QS_TRAIN_LOOP_H
#define QS_TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"
#include "../kernels/llm_adamw.h"
#include "../kernels/llm_recipe.h"
#include "../kernels/qs_err.h"

/* Data-parallel training of one run over ranks (the app provides it; analysis/ knows no MPI).  Each
** step's accum*batch windows are cut into size*k equal chunks of at most batch windows (k the fewest
** that fit; size must divide accum*batch); rank r computes chunks r*k .. r*k+k-1 into its own zeroed
** gradient, sum_f32 adds the ranks' gradients element-wise and sum_f64 the per-chunk losses, and every
** rank then takes the same AdamW step.  Both sums must leave the same bits on every rank.  The
** validation batches are shared out likewise (batch g on rank g mod size) and their losses summed in
** batch order, so the validation loss of given weights is the serial run's bit for bit.  With size 1
** the loop is the serial one exactly. */
typedef struct qs_train_par {
    int rank, size;
    int (*sum_f32)(void *ctx, float *x, size_t n, qs_err *e);
    int (*sum_f64)(void *ctx, double *x, size_t n, qs_err *e);
    void *ctx;
} qs_train_par;

typedef struct qs_train_opts {
    int batch, T, steps, accum, warmup, eval_every, val_seqs;
    double lr, min_frac, clip;     /* clip <= 0: no clipping */
    qs_adamw_opts adam;
    uint64_t seed;
    const qs_llm_recipe *recipe;   /* the training micro-batches' GEMMs; NULL: FP32.  Validation stays FP32 */
    /* with recipe: per-linear recipes instead (qs_llm_train_state_set_recipes, nrecipes of them: a plan
    ** file's, `train --recipe-file PLAN`); recipe then names the run and its backward slots */
    const qs_llm_recipe *recipes;
    size_t nrecipes;
    const qs_train_par *par;       /* data-parallel over ranks; NULL: this process alone */
    /* Resuming (train_ckpt.h): steps already taken, so the run goes on at step start_step + 1 with the
    ** same batches and schedule; the optimizer state to use and update (NULL: a zeroed one of the
    ** loop's own; a caller that checkpoints passes its own); the recipe's GEMM call counter then, and
    ** where to put it after every step (before the callback; may be NULL). */
    int start_step;
    qs_adamw *opt;
    uint64_t sr_calls, *sr_calls_out;
} qs_train_opts;

typedef struct qs_train_rec {
    int step;                      /* 1 .. steps */
    double train_loss;             /* mean over the step's accum micro-batches */
    double val_loss;               /* after the step; NAN when not measured at this step */
    double grad_norm;              /* before clipping, of the mean gradient */
    double lr, tok_s;
    /* Under a recipe: the step's operand statistics, (n_layer + 1) x QS_OP_COUNT (row n_layer: the
    ** output head), valid during the callback only; NULL without a recipe. */
    const qs_llm_opstat *opstat;
} qs_train_rec;

/* Weights of a model of shape c from seed: matrices ~ N(0, 0.02), the output projections of each
** block (wo, w_down) scaled by 1/sqrt(2 n_layer) (GPT-2 / llm.c), RMSNorm weights 1.  Each value
** depends on (seed, its index) only. */
void qs_train_init(qs_llm_model *m, uint64_t seed);

/* Mean next-token loss over the fixed validation windows of val (val_seqs windows of T+1 tokens,
** evenly spaced). */
int qs_train_val_loss(const qs_llm_model *m, const int32_t *val, size_t nval, const qs_train_opts *o, double *loss,
                      qs_err *e);

/* The o->batch windows of T+1 tokens of micro-batch mb (step s's micro-batch a is mb = s*accum + a) into
** dst; ntrain > T.  They depend on (o->seed, mb) only. */
void qs_train_batch(const int32_t *train, size_t ntrain, const qs_train_opts *o, uint64_t mb, int32_t *dst);

/* Called after every step; a non-zero return stops the run (then qs_train_run returns -1 with e set
** by the callback). */
typedef int (*qs_train_cb)(void *ctx, const qs_train_rec *r);

/* Train m for steps o->start_step+1 .. o->steps (o->steps 0: no update) on windows of train (ntrain > T
** tokens) and measure the validation loss before the first step (*val0; untouched when resuming) and every
** eval_every steps and after the last.  rec holds o->steps records (those before start_step untouched).
** With o->recipe the training micro-batches run under it (a state of their own, so its SR
** call counter runs on across the run) and the validation loss stays FP32, as the papers compare;
** the operand counts are reset before each step and summed over its micro-batches (rec->opstat).
** Errors: bad options (named), a text shorter than T+1 tokens, out of memory, and a micro-batch loss or
** gradient norm that is NaN/Inf: the step is re-run with per-site checks and the message names the
** first site that produced a non-finite value (qs_llm_nonfinite_site, docs/train.md). */
int qs_train_run(qs_llm_model *m, const int32_t *train, size_t ntrain, const int32_t *val, size_t nval,
                 const qs_train_opts *o, double *val0, qs_train_rec *rec, qs_train_cb cb, void *ctx, qs_err *e);

#endif
