/*
** The model parts beyond the Llama core (mixture-of-experts weights) in their own arena,
** for llm.c's allocation, clone and checks (see llm_ext.c).
*/
#ifndef QS_LLM_EXT_H
#define QS_LLM_EXT_H

#include "llm.h"

/* The extra configuration fields (window, RoPE factors, experts) are consistent. */
int qs_llm_ext_check(const qs_llm_cfg *c, qs_err *e);
/* Floats of ext_arena for this configuration (0: none). */
size_t qs_llm_ext_floats(const qs_llm_cfg *c);
/* Allocate m->ext_arena (uninitialised) and point every layer's moe into it. */
int qs_llm_ext_alloc(qs_llm_model *m, qs_err *e);

#endif
