/*
** `qscope train --recipe-file PLAN` (docs/train.md "Plans"): a per-layer plan of `llm sensitivity
** --formats ... --bits B` (llm_plan_file.h) as per-linear training recipes (kernels/llm_train.h,
** qs_llm_train_state_set_recipes).  Per layer, fwd.w of its seven linears is the plan's weights
** format (w) and fwd.x the format of the site feeding each: attn_in for Q/K/V, attn_out for O, ffn_in
** for gate/up, ffn_down_in for down (a site the plan does not name, or fp32: the slot off).  The KV
** cache site has no GEMM operand in training (attention stays FP32) and is not used.  The backward
** slots and the head come from the base recipe (--recipe BASE and --op on backward slots; default
** fp32: the plan's forward under FP32 gradients).
*/
#ifndef QS_TRAIN_PLAN_H
#define QS_TRAIN_PLAN_H

#include <stdio.h>

#include "llm_plan_file.h"
#include "../../kernels/llm_recipe.h"

/* n_layer*7 + 1 recipes (*out, malloc'd) for the plan's layers on top of base (copied into each). */
int qs_train_plan_recipes(const qs_plan_file *p, const qs_llm_recipe *base, qs_llm_recipe **out, size_t *n);
/* The plan fits a model of shape c: its layer count and model.shape (dim, heads, KV heads, head_dim,
** ffn; the vocabulary aside: the head is the base recipe's).  Else one line naming the file in e. */
int qs_train_plan_check(const qs_plan_file *p, const qs_llm_cfg *c, qs_err *e);
/* The run header's lines: the plan, the mapping and the backward slots' source. */
void qs_train_plan_print(FILE *f, const qs_plan_file *p, const char *base, const qs_llm_recipe *r);

#endif
