/*
** Writing a model of kernels/llm.h as a Hugging Face checkpoint directory that store/llm_load_hf.c
** (`qscope llm eval/generate/logits --model DIR`) loads back: config.json (LlamaForCausalLM), and
** model.safetensors (u64 header length, JSON header padded to 8 bytes, F32 data; the tensor names of
** llm_arch.c's Hugging Face scheme).  A model with adjacent-pair RoPE (one loaded from a llama GGUF)
** gets its Q/K rows (and biases) permuted back into Hugging Face's rotate_half order, the inverse of
** llama.cpp's converter.
*/
#ifndef QS_LLM_SAVE_HF_H
#define QS_LLM_SAVE_HF_H

#include "../kernels/llm.h"
#include "../kernels/qs_err.h"

typedef struct qs_llm_save_tok {
    const char *copy_dir;    /* a Hugging Face directory whose tokenizer.json (and tokenizer_config.json) to copy, or NULL */
    int byte_level;          /* write a byte-level tokenizer.json: token id = byte value (vocab 256) */
    int bos, eos;            /* config.json bos/eos_token_id, -1: none */
} qs_llm_save_tok;

/* One tensor of the checkpoint: its Hugging Face name, its data and shape (rows 0: a 1-D tensor of
** cols values), and perm > 0 the number of heads whose Q/K rows are permuted back to rotate_half. */
typedef struct qs_llm_hf_tensor { char name[96]; const float *p; size_t rows, cols; int perm; } qs_llm_hf_tensor;

/* The tensors of m in the order they are written (each once; tied: the embedding once), at most cap;
** returns how many. */
int qs_llm_hf_tensors(const qs_llm_model *m, qs_llm_hf_tensor *t, int cap);

/* Write model.safetensors-style F32 tensors of k models of one shape into one file: model i's tensors
** are named as qs_llm_hf_tensors names them plus suffix[i] (e.g. "" or ".m").  Errors name the file. */
int qs_llm_save_safetensors_n(const char *path, const qs_llm_model *const *ms, const char *const *suffix, int k,
                              qs_err *e);

/* Write the checkpoint into dir (created if missing; existing files of these names are replaced).
** Errors name the file. */
int qs_llm_save_hf(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, qs_err *e);

/* Only model.safetensors's content, to path: every tensor of m under its Hugging Face name (F32; a tied
** embedding once; adjacent-pair Q/K rows permuted as above).  `train --grad-out` writes gradients, which
** have the model's layout, with it. */
int qs_llm_save_safetensors(const char *path, const qs_llm_model *m, qs_err *e);

#endif
