/*
** Loading a Llama- or Qwen2-architecture model (SmolLM2-135M-Instruct GGUF, full-precision GGUF,
** Hugging Face safetensors directories) into the FP32 forward pass of kernels/llm.h.
**
** Tensors are found and decoded through the store's GGUF parser (store/parse_gguf.c) and tensor
** reader (store/tensor.h), so every ggml block type the importer knows (Q4_0, Q4_1, Q8_0, Q4_K,
** Q6_K, MXFP4, F16, BF16, ...) is dequantized to FP32 the same way `qscope import` does.
** Architectures, tensor names and hyper-parameter keys come from the table of llm_arch.h.  Code:
** llm_load.c (entry point), llm_load_gguf.c, llm_load_hf.c, llm_load_common.c (shared).  The
** vocabulary and the tokenizer are in llm_tok.h.
*/
#ifndef QS_LLM_LOAD_H
#define QS_LLM_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"
#include "llm_tok.h"

/* The default evaluation text: Jane Austen's "Persuasion", kept aside (never tuned on), as written by
** `make data` (`qscope llm text`, store/rdata.h).  Relative to the project root. */
#define QS_LLM_DEFAULT_TEXT_NAME "persuasion"
#define QS_LLM_DEFAULT_TEXT "data/text/" QS_LLM_DEFAULT_TEXT_NAME ".txt"
/* The model `make data` fetches: `llm eval` and `llm sensitivity` use it when --model is not given. */
#define QS_LLM_DEFAULT_MODEL "data/models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct qs_llm_file {
    qs_llm_model m;
    qs_llm_vocab v;
    char hash[33];       /* xxh3-128 of the whole file, hex */
    uint64_t size;
    char name[128];      /* general.name, or "" */
    char arch[32];       /* "llama" or "qwen2" */
    char format[16];     /* "gguf" or "safetensors" */
    char wtypes[160];    /* per-tensor ggml types found, e.g. "q4_1 x210, f32 x61, q8_0 x1" */
    /* Mapped weights (qs_llm_load_mapped): the file stays mapped and m's matrices are typed weights
    ** (kernels/llm_wtype.h) into it; else all NULL/0 */
    struct qs_file_map *wmaps;   /* the files (a GGUF, or a checkpoint's shards) */
    int nwmaps;                  /* > 0: the weights are mapped */
    struct qs_wt *wts;
} qs_llm_file;

/* How `llm eval` holds the weights (--weights): FP32 copies in memory, or left in the file (mapped),
** widened a panel at a time inside the products.  Auto: mapped when the FP32 copy would take more than
** half of the machine's memory (GGUF files and Hugging Face safetensors directories). */
typedef enum qs_llm_weights { QS_LLM_WEIGHTS_AUTO = 0, QS_LLM_WEIGHTS_F32, QS_LLM_WEIGHTS_MAPPED } qs_llm_weights;
const char *qs_llm_weights_name(qs_llm_weights w);
/* Load path as `mode` says (auto: chosen as above); why (cap bytes): the choice and its reason, one line. */
int qs_llm_load_weights_mode(const char *path, qs_llm_weights mode, qs_llm_file *f, char *why, size_t cap, qs_err *e);
/* A GGUF file or a Hugging Face directory with its matrices left mapped (llm_load_mapped.c): norms and
** biases FP32, the rest typed; the files are hashed and the weights checked finite in pieces whose pages
** are released, so the resident set stays small whatever the files' size. */
int qs_llm_load_mapped(const char *path, qs_llm_file *f, qs_err *e);
/* The Hugging Face loader with mapped weights (llm_load_hf.c). */
int qs_llm_load_hf_mapped(const char *dir, qs_llm_file *f, qs_err *e);

/* Load a model: a GGUF file (F32/F16/BF16 or any ggml block type; general.architecture llama or
** qwen2), or a Hugging Face directory (config.json with LlamaForCausalLM / Qwen2ForCausalLM,
** model.safetensors or model.safetensors.index.json + shards, tokenizer.json).  Errors:
** "PATH: what is wrong" (PATH = the file at fault). */
int qs_llm_load(const char *path, qs_llm_file *f, qs_err *e);
/* The GGUF loader alone. */
int qs_llm_load_gguf(const char *path, qs_llm_file *f, qs_err *e);
/* The Hugging Face directory loader alone (llm_load_hf.c). */
int qs_llm_load_hf(const char *dir, qs_llm_file *f, qs_err *e);
/* A tokenizer.json alone (or a directory's tokenizer.json), into f->v (f->m stays empty): for tests and
** tokenizing without weights (`llm tokenize --tokenizer`). */
int qs_llm_load_tokenizer(const char *path, qs_llm_file *f, qs_err *e);
/* The same from a file image in memory (used by the fuzzer); name is used in messages. */
int qs_llm_load_gguf_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e);
/* A GGUF's vocabulary alone (its tokenizer.* keys; f->m stays empty, no weights are read or checked),
** from a file or an image: what tokenizing needs, in milliseconds instead of a model load. */
int qs_llm_load_gguf_vocab(const char *path, qs_llm_file *f, qs_err *e);
int qs_llm_load_gguf_vocab_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e);
void qs_llm_file_free(qs_llm_file *f);

#endif
