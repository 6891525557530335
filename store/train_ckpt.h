/*
** Training checkpoints of `qscope train` that survive a kill, and what `--resume DIR` reads back
** (issue 26, "Bad input and faults").  A checkpoint directory is a Hugging Face model directory
** (store/llm_save_hf.h: config.json, model.safetensors, tokenizer.json) plus
**   optimizer.safetensors  AdamW's moments, F32, named as the weights plus ".m" and ".v"
**   trainer_state.json     completed step, AdamW's step count, the recipe's GEMM call counter, every
**                          option, the model's shape, the texts and the hash of their tokens
** It is written whole into a sibling DIR.tmp-XXXXXX and then swapped in by one atomic rename
** (renameat2 RENAME_EXCHANGE when DIR exists, rename when it does not), so a reader sees the previous
** checkpoint or the new one, never a mix (docs/train.md, "Checkpoints and --resume").
*/
#ifndef QS_TRAIN_CKPT_H
#define QS_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../kernels/llm_adamw.h"
#include "../kernels/qs_err.h"
#include "llm_save_hf.h"

#define QS_TRAIN_STATE_FILE "trainer_state.json"
#define QS_TRAIN_OPT_FILE "optimizer.safetensors"
#define QS_GRPO_STATE_FILE "grpo_state.json"   /* `rl grpo`'s state in place of trainer_state.json */
#define QS_TRAIN_MAX_OPS 64
#define QS_TRAIN_MAX_TEXTS 256

typedef struct qs_train_state {
    int step, steps;                 /* steps completed, steps planned */
    long adam_t;                     /* AdamW steps taken (qs_adamw.t) */
    uint64_t sr_calls;               /* the recipe's GEMM call counter after `step` (SR seeds, RHT signs) */
    int layers, dim, heads, kv_heads, head_dim, ffn, vocab, tied, bias;   /* the model's shape */
    int rope_adjacent;               /* 1: the run's model has adjacent-pair RoPE (a llama GGUF's order) */
    int batch, ctx, accum, warmup, eval_every, val_seqs, ckpt_every;
    double lr, min_frac, clip, beta1, beta2, eps, wd;
    uint64_t seed;
    char *recipe;                    /* --recipe preset, or NULL */
    char *op[QS_TRAIN_MAX_OPS];      /* --op settings, in order */
    int nops;
    char *text[QS_TRAIN_MAX_TEXTS];  /* training texts (absolute paths when they resolved) */
    int ntext;
    char *val_text;
    char *tokenizer;                 /* the model whose vocabulary tokenized the texts; NULL: bytes */
    char *init;                      /* --init of the first run; NULL: a new model */
    uint64_t ntrain, nval;           /* tokens */
    char data_hash[33];              /* qs_train_data_hash (analysis/train_service.h) of the token streams */
    double val0;                     /* validation loss before step 1; NAN: not known */
    char *run_name;                  /* the database run the checkpoint belongs to; NULL: none */
    char tool_version[64];
} qs_train_state;

/* Read DIR/trainer_state.json; every field is checked (type and range).  Errors name the file. */
/* The JSON object of a checkpoint's state file (trainer_state.json, grpo_state.json): a regular file (a
** FIFO would block) of at most max_mib MiB, else "PATH: larger than N MiB, not a WHAT", parsed with
** duplicate keys refused, and an object.  NULL with e set. */
json_t *qs_ckpt_state_load(const char *path, int max_mib, const char *what, qs_err *e);
int qs_train_state_read(const char *dir, qs_train_state *s, qs_err *e);
void qs_train_state_free(qs_train_state *s);
/* Write s as JSON to path (used by qs_train_ckpt_write, into its temporary directory). */
int qs_train_state_write(const char *path, const qs_train_state *s, qs_err *e);

/* Write the checkpoint (model m, tokenizer as qs_llm_save_hf, the moments of opt, state s) atomically
** into dir.  dir must be missing or a directory holding only checkpoint files (qs_train_out_check). */
int qs_train_ckpt_write(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, const qs_adamw *opt,
                        const qs_train_state *s, qs_err *e);

/* The same with another state file: DIR/state_file written by write(path, state). */
typedef int (*qs_ckpt_state_fn)(const char *path, const void *state, qs_err *e);
int qs_ckpt_write(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, const qs_adamw *opt,
                  const char *state_file, qs_ckpt_state_fn write, const void *state, qs_err *e);

/* Fill opt's moments (opt made by qs_adamw_new for m) from DIR/optimizer.safetensors: every tensor of m
** with ".m" and ".v", F32, of its shape, and nothing else.  opt->t is left alone.  Errors name the file. */
int qs_train_ckpt_read_opt(const char *dir, const qs_llm_model *m, qs_adamw *opt, qs_err *e);

/* Put a model loaded from a checkpoint (rotate_half order) and its moments back into adjacent-pair RoPE
** order (Q/K rows permuted as llama.cpp's converter does; cfg.rope_neox 0), the order the run had when
** it came from a llama GGUF, so that it resumes bit for bit. */
int qs_train_ckpt_adjacent(qs_llm_model *m, qs_adamw *opt, qs_err *e);

/* May dir receive checkpoints?  Yes when it is missing and its parent is a writable directory, or when
** it is a directory holding nothing but checkpoint files.  Creates nothing. */
int qs_train_out_check(const char *dir, qs_err *e);


#endif
