/*
** Shared by the model loaders (llm_load_gguf.c: GGUF, llm_load_hf.c: Hugging Face safetensors
** directories), in llm_load_common.c: tensors found over one or several files (shards) and read
** through the store's parsers and tensor reader, by role, in GGUF or Hugging Face spelling (llm_arch.h).
*/
#ifndef QS_LLM_LOAD_INTERNAL_H
#define QS_LLM_LOAD_INTERNAL_H

#include "llm_load.h"
#include "container.h"
#include "llm_arch.h"

#include <jansson.h>

typedef struct qs_llm_src {
    const uint8_t *buf;
    size_t len;
    qs_container c;
    const char *path;     /* for messages */
} qs_llm_src;

/* Tensor `name` in one container, or over the sources (which: the index of the source holding it). */
const qs_tdesc *qs_llm__find_t(const qs_container *c, const char *name);
const qs_tdesc *qs_llm__find(const qs_llm_src *src, int nsrc, const char *name, int *which);
/* Allocate m for cfg and read every weight of architecture `arch` in spelling `scheme` (biases when the
** architecture allows them and layer 0 has a Q bias; the output matrix unless tie or absent); FP32, shapes
** checked.  Messages name their file (the shard at fault, else `where`): callers add no prefix. */
int qs_llm__load_weights(qs_llm_model *m, const qs_llm_cfg *cfg, const qs_llm_arch *arch, const qs_llm_src *src,
                         int nsrc, const char *where, qs_llm_scheme scheme, int tie, qs_err *e);
/* Hyper-parameter h from GGUF metadata (key "ARCH.<key>") or config.json (see llm_arch.h): an int or a
** float into out; absent: the table's default, else `derived`. */
int qs_llm__hparam(json_t *obj, qs_llm_scheme s, const char *arch, qs_llm_hparam h, double derived, void *out, qs_err *e);
/* The shape keys of both schemes into cfg (not vocab for GGUF, not rope_neox), head_dim included. */
int qs_llm__shape(json_t *obj, qs_llm_scheme s, const char *arch, qs_llm_cfg *cfg, qs_err *e);
/* Tensor `name` of shape ws[nd] (PyTorch order) into dst, FP32; messages name the file. */
int qs_llm__load_tn(const qs_llm_src *src, int nsrc, const char *where, const char *name, const uint64_t *ws, int nd,
                    float *dst, qs_err *e);
/* llm_load_ext.c: the configuration beyond the Llama core (sliding window, RoPE scaling, experts; cfg->arch;
** nothing else for Gemma rows) after qs_llm__shape, and its tensors after the core's (m allocated with that cfg). */
int qs_llm__ext_shape(json_t *obj, qs_llm_scheme s, const qs_llm_arch *A, qs_llm_cfg *cfg, qs_err *e);
int qs_llm__load_ext(qs_llm_model *m, const qs_llm_arch *A, const qs_llm_src *src, int nsrc, const char *where,
                     qs_llm_scheme s, qs_err *e);
/* Gemma rows (QS_ARCH_GEMMA): their keys into cfg's Gemma fields (after qs_llm__shape; nothing for other
** rows), and Hugging Face's RMSNorm (1 + w) made a plain weight (after the weights are read). */
int qs_llm__gemma_cfg(json_t *obj, qs_llm_scheme s, const qs_llm_arch *A, qs_llm_cfg *cfg, qs_err *e);
void qs_llm__gemma_hf_norms(qs_llm_model *m);
void qs_llm__wtypes(const qs_llm_src *src, int nsrc, char *out, size_t cap);
int qs_llm__vocab_tables(qs_llm_vocab *v, qs_err *e);

#endif
