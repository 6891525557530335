/*
** Loading a Llama- or Qwen2-architecture model (SmolLM2-135M-Instruct GGUF, full-precision GGUF,
** Hugging Face safetensors directories) into the FP32 forward pass of kernels/llm.h.
**
** Tensors are found and decoded through the store's GGUF parser (store/parse_gguf.c) and tensor
** reader (store/tensor.h), so every ggml block type the importer knows (Q4_0, Q4_1, Q8_0, Q4_K,
** Q6_K, MXFP4, F16, BF16, ...) is dequantized to FP32 the same way `qscope import` does.
** Architectures, tensor names and hyper-parameter keys come from the table of llm_arch.h.  Code:
** llm_load.c (entry point), llm_load_gguf.c, llm_load_hf.c, llm_load_common.c (shared).
*/
#ifndef QS_LLM_LOAD_H
#define QS_LLM_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"

/* The default evaluation text: Jane Austen's "Persuasion", kept aside (never tuned on), as written by
** `make data` (`qscope llm text`, store/rdata.h).  Relative to the project root. */
#define QS_LLM_DEFAULT_TEXT_NAME "persuasion"
#define QS_LLM_DEFAULT_TEXT "data/text/" QS_LLM_DEFAULT_TEXT_NAME ".txt"
/* The model `make data` fetches: `llm eval` and `llm sensitivity` use it when --model is not given. */
#define QS_LLM_DEFAULT_MODEL "data/models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct qs_llm_vocab {
    int n;               /* number of tokens (0: the file has no vocabulary) */
    char *text;          /* all token strings, NUL-separated */
    uint32_t *off;       /* [n] offset of token i in text */
    int32_t *type;       /* [n] tokenizer.ggml.token_type, or NULL (1 normal, 3 control, ...) */
    int bos, eos;        /* -1 when absent */
    int add_bos;         /* 1: the model's tokenizer prepends BOS (GGUF tokenizer.ggml.add_bos_token; HF
                         ** tokenizer_config add_bos_token, else a TemplateProcessing post-processor that
                         ** starts with a special token); 0 otherwise */
    int byte_level;      /* tokenizer.ggml.model == "gpt2": GPT-2 byte-to-unicode token spelling */
    char pre[32];        /* tokenizer.ggml.pre, or "" */
    /* BPE merges (tokenizer.ggml.merges, "left right" per rank) and lookup tables */
    int nmerges;
    char *mtext;         /* NUL-separated */
    uint32_t *moff;
    uint32_t *vhash, *mhash;   /* open addressing, value+1 (0 = empty); capacities are powers of two */
    size_t vhcap, mhcap;
    int *special;        /* ids of control tokens (token_type 3), longest first */
    int nspecial;
    /* Hugging Face tokenizer.json only (NULL for GGUF): the "pre_tokenizer" object as compact JSON,
    ** and the pattern of its first Split/Regex step (or NULL); for the full pre-tokenizer. */
    char *pre_json;
    char *pre_regex;
    int ignore_merges;   /* tokenizer.json model.ignore_merges: a piece that is a token is not merged */
} qs_llm_vocab;

typedef struct qs_llm_file {
    qs_llm_model m;
    qs_llm_vocab v;
    char hash[33];       /* xxh3-128 of the whole file, hex */
    uint64_t size;
    char name[128];      /* general.name, or "" */
    char arch[32];       /* "llama" or "qwen2" */
    char format[16];     /* "gguf" or "safetensors" */
    char wtypes[160];    /* per-tensor ggml types found, e.g. "q4_1 x210, f32 x61, q8_0 x1" */
} qs_llm_file;

/* Load a model: a GGUF file (F32/F16/BF16 or any ggml block type; general.architecture llama or
** qwen2), or a Hugging Face directory (config.json with LlamaForCausalLM / Qwen2ForCausalLM,
** model.safetensors or model.safetensors.index.json + shards, tokenizer.json).  Errors:
** "PATH: what is wrong" (PATH = the file at fault). */
int qs_llm_load(const char *path, qs_llm_file *f, qs_err *e);
/* The GGUF loader alone. */
int qs_llm_load_gguf(const char *path, qs_llm_file *f, qs_err *e);
/* The Hugging Face directory loader alone (llm_load_hf.c). */
int qs_llm_load_hf(const char *dir, qs_llm_file *f, qs_err *e);
/* A tokenizer.json alone, into f->v (f->m stays empty): for tests and tokenizing without weights. */
int qs_llm_load_tokenizer(const char *path, qs_llm_file *f, qs_err *e);
/* The same from a file image in memory (used by the fuzzer); name is used in messages. */
int qs_llm_load_gguf_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e);
void qs_llm_file_free(qs_llm_file *f);

/* Index of the string s[0..n) in a hashed string table (text/off/tab/cap as in qs_llm_vocab), or -1. */
int qs_llm_hash_find(const char *text, const uint32_t *off, const uint32_t *tab, size_t cap, const char *s, size_t n);

/* Token id of an exact token string, or -1. */
int qs_llm_vocab_find(const qs_llm_vocab *v, const char *s);
/* Byte-level BPE tokenization of `text` (len bytes) equal to Hugging Face `tokenizers` (llm_tok.c):
** added tokens (token_type 3 control and 4 user-defined: tokenizer.json added_tokens) are matched
** literally first (leftmost, longest), each stretch between them goes through the pre-tokenizer
** (tokenizer.json's pre_tokenizer, else the one of the GGUF tokenizer.ggml.pre family; regexes in
** PCRE2 with Unicode classes, llm_pretok.h), each piece is mapped byte -> unicode and merged by rank.
** No normalizer is applied and no BOS is added.  Invalid UTF-8 is accepted: invalid bytes are never
** matched by a pattern and end up as byte-level tokens.  Returns the number of ids (<= cap), or -1
** with e set (more than cap ids, an unsupported pre-tokenizer, a symbol missing from the vocabulary). */
int qs_llm_tokenize(const qs_llm_vocab *v, const char *text, size_t len, int32_t *out, int cap, qs_err *e);

/* Append the detokenized bytes of token id to out (at most cap-1 bytes, NUL-terminated); returns the
** number of bytes written.  Byte-level (GPT-2) spellings are mapped back to raw bytes; ids out of
** range give "<id>". */
size_t qs_llm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap);

#endif
