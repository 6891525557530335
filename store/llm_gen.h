/*
** A random Llama-architecture model written as a GGUF file (`qscope gen model`): the shape of a real
** model (presets after Llama 3.2 1B / 3B and Llama 3 8B, with a 32000-token vocabulary), weights drawn
** at random (approximately normal: the sum of four uniforms, std 0.02; norms 1 +- 0.1), stored in one
** type (F32, F16, BF16 or a ggml block type qscope decodes), and a byte-level vocabulary (the 256 GPT-2
** byte spellings, control tokens, padding) so that any text tokenizes.  For tests and benchmarks of
** models larger than memory: the file is written a block of rows at a time (never the whole model in
** memory), and the same seed gives the same bytes.
*/
#ifndef QS_LLM_GEN_H
#define QS_LLM_GEN_H

#include <stdint.h>

#include "../kernels/dtype.h"
#include "../kernels/llm.h"

typedef struct qs_llm_gen {
    qs_llm_cfg c;             /* shape, context, RoPE base, epsilon */
    qs_dtype dt;              /* every matrix's type (norms F32) */
    int tied;                 /* no output.weight: the embedding serves the head */
    uint64_t seed;
} qs_llm_gen;

/* Preset shapes: "tiny" (2 layers, dim 256), "1B", "3B", "8B" (Llama 3.2 1B / 3B, Llama 3 8B, vocab
** 32000).  0, or -1 with e set naming the presets. */
int qs_llm_gen_preset(const char *name, qs_llm_cfg *c, qs_err *e);
/* The types gen model writes, by name (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q6_k);
** QS_DT_INVALID if not one. */
qs_dtype qs_llm_gen_dtype(const char *name);
/* Bytes the file will take (approximately: the tensors' data). */
uint64_t qs_llm_gen_bytes(const qs_llm_gen *g);
/* Write the model to path (created or truncated); *params: its parameters.  0, or -1 with e set. */
int qs_llm_gen_write(const qs_llm_gen *g, const char *path, uint64_t *params, qs_err *e);

#endif
