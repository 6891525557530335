/*
** The work of `qscope train` below app/ (issue 26, second part): tokenizer (bytes or a model's
** vocabulary), texts read and tokenized as `llm eval` does, the model (new, llm.c-style init, or
** --init), the run (train_loop.h) and the Hugging Face checkpoint (store/llm_save_hf.h).
*/
#ifndef QS_TRAIN_SERVICE_H
#define QS_TRAIN_SERVICE_H

#include <signal.h>
#include <stddef.h>

#include "train_grad.h"
#include "train_loop.h"
#include "../store/train_ckpt.h"

/* What a run trains on, once the model and the tokens are ready (the job's ready hook). */
typedef struct qs_train_data {
    const qs_llm_model *m;        /* the model before the first step */
    size_t ntrain, nval;          /* tokens */
    int bytes;                    /* 1: byte-level tokens */
    char hash[33];                /* hex XXH3-128 of both token streams (qs_train_data_hash) */
} qs_train_data;

typedef struct qs_train_job {
    const char *tokenizer;        /* a model whose vocabulary tokenizes the texts; NULL: bytes (or init's) */
    const char *init;             /* continue from this model; NULL: a new one of the shape below */
    const char *out;              /* checkpoint directory, or NULL (qs_train_out_check it first) */
    int ckpt_every;               /* with out: a checkpoint after every N-th step too (0: the last only) */
    /* continue the checkpoint in this directory, whose trainer_state.json is resume_state (the caller
    ** made t and the fields above from it); init and the shape are then not used */
    const char *resume;
    const qs_train_state *resume_state;
    const char *recipe_preset;    /* the recipe as given (--recipe, --op), recorded in trainer_state.json */
    const char *const *ops;
    int nops;
    /* the database run, recorded in trainer_state.json when a checkpoint is written (NULL or "": none) */
    const char *run_name;
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
    /* once the model is made or loaded, before anything runs on it (may be NULL; a per-layer plan checks
    ** the shape it was made for); non-zero fails the job with *e as it set it */
    int (*model_check)(void *ctx, const qs_llm_cfg *c, qs_err *e);
    /* after start, before the first step (may be NULL); non-zero fails the job with *e as it set it */
    int (*ready)(void *ctx, const qs_train_data *d, qs_err *e);
    /* when not NULL and set (a signal handler's flag), the run stops after the step in progress, once
    ** its step callback returned: the job then succeeds with r->stopped and the checkpoint of that step */
    const volatile sig_atomic_t *stop;
} qs_train_job;

typedef struct qs_train_result {
    qs_llm_model m;               /* the trained model */
    size_t ntrain, nval;          /* tokens */
    double val0;                  /* validation loss before the first step */
    qs_train_rec *rec;            /* t.steps records */
    int bytes;                    /* 1: byte-level tokens */
    int steps_done;               /* completed steps (records rec[start_step .. steps_done-1]) */
    int stopped;                  /* 1: *job.stop ended the run early */
    int bad_input;                /* after an error: 1 when the input is at fault (shape, ctx, a text shorter
                                  ** than ctx+1 tokens): a usage error, found before the ready hook */
    double grad_loss;             /* the loss of the cross-check's micro-batch; NAN without grad files */
    int start_step;               /* steps taken before this run (resumed), else 0: rec[start_step ..] */
    char data_hash[33];           /* qs_train_data_hash of the token streams */
} qs_train_result;

/* A new model's shape (the job's options and defaults) checked before anything is read: sizes that
** do not divide (dim by heads, heads by KV heads), an odd head dimension.  Errors name the option. */
int qs_train_shape_check(const qs_train_job *j, qs_err *e);

/* Run the job; *r is filled on success (free with qs_train_result_free).  Errors name the file or the
** option at fault; after an error r->val0 (NAN when not measured), r->steps_done and r->bad_input
** are still set (bad input: a text shorter than one window of ctx+1 tokens, --ctx beyond the model's,
** a shape).  With out, a checkpoint (train_ckpt.h) is written atomically every ckpt_every steps, after
** the last and after a stop (--steps 0: of the model as it is); nothing is written before the first. */
int qs_train_job_run(const qs_train_job *j, qs_train_result *r, qs_err *e);
/* XXH3-128 (hex) of the training then the validation tokens (int32, host order), each stream
** preceded by its length as a uint64, so where one ends is part of the hash. */
void qs_train_data_hash(const int32_t *train, size_t ntrain, const int32_t *val, size_t nval, char hex[33]);
void qs_train_result_free(qs_train_result *r);

#endif
