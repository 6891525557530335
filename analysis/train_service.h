/*
** The work of `qscope train` below app/ (issue 26, second part): tokenizer (bytes or a model's
** vocabulary), texts read and tokenized as `llm eval` does, the model (new, llm.c-style init, or
** --init), the run (train_loop.h) and the Hugging Face checkpoint (store/llm_save_hf.h).
*/
#ifndef QS_TRAIN_SERVICE_H
#define QS_TRAIN_SERVICE_H

#include <stddef.h>

#include "train_grad.h"
#include "train_loop.h"

typedef struct qs_train_job {
    const char *tokenizer;        /* a model whose vocabulary tokenizes the texts; NULL: bytes (or init's) */
    const char *init;             /* continue from this model; NULL: a new one of the shape below */
    const char *out;              /* checkpoint directory, or NULL */
    const char *const *text;      /* training texts */
    int ntext;
    const char *val_text;         /* held-out text */
    int layers, dim, heads, kv_heads, ffn;   /* a new model's shape; 0: 2, 64, 4, = heads, 4*dim */
    qs_train_opts t;              /* t.T is also a new model's context */
    qs_train_grad_req grad;       /* cross-check files of the initial model (train_grad.h), all NULL: none */
    /* called once the model and the tokens are ready, before the first step (may be NULL) */
    void (*start)(void *ctx, const qs_llm_cfg *c, size_t ntrain, size_t nval);
    qs_train_cb step;             /* after every step (may be NULL) */
    void *ctx;
} qs_train_job;

typedef struct qs_train_result {
    qs_llm_model m;               /* the trained model */
    size_t ntrain, nval;          /* tokens */
    double val0;                  /* validation loss before the first step */
    qs_train_rec *rec;            /* t.steps records */
    int bytes;                    /* 1: byte-level tokens */
    double grad_loss;             /* the loss of the cross-check's micro-batch; NAN without grad files */
} qs_train_result;

/* Run the job; *r is filled on success (free with qs_train_result_free).  Errors name the file or the
** option at fault. */
int qs_train_job_run(const qs_train_job *j, qs_train_result *r, qs_err *e);
void qs_train_result_free(qs_train_result *r);

#endif
