/*
** Per-layer sensitivity of a causal LM to one format and a greedy mixed-precision plan
** (`qscope llm sensitivity`, docs/llm.md "llm sensitivity"): one variant per (layer, site) with only
** that site of that layer at the format, evaluated by qs_llm_eval_run (same chunks, scoring and
** statistics as `llm eval`) with the reference's residual stream reused below the layer.
*/
#ifndef QS_LLM_SENS_H
#define QS_LLM_SENS_H

#include "llm_eval.h"

/* Sites: 0..3 the linear inputs (= QS_SITE_ATTN_IN..QS_SITE_FFN_DOWN_IN), 4 the K/V cache rows
** (= QS_LLM_LSITE_KV), 5 the layer's seven weight matrices. */
enum { QS_SENS_KV = QS_LLM_LSITE_KV, QS_SENS_W = 5, QS_SENS_NSITE = 6 };
const char *qs_sens_site_name(int site);
int qs_sens_site_parse(const char *name);   /* -1 when unknown */
/* Elements a site of one layer holds: parameters (w) or elements per token (the others). */
double qs_sens_site_elems(const qs_llm_cfg *c, int site);

typedef struct qs_sens_table {
    int nlayer, nsite, site[QS_SENS_NSITE];
    size_t n;                              /* scored tokens */
    double ref_ppl, ref_ppl_se;
    double *kl, *kl_se, *dppl, *top1;      /* [layer * nsite + j] */
} qs_sens_table;

/* The variants of the table: variant l * nsite + j has only site j of layer l at fmt (fmt NULL =
** FP32: every variant equals the reference) and starts from the reference's residual stream entering
** layer l.  Evaluate them with qs_llm_eval_run (or its units, analysis/llm_eval_shard.h), then
** qs_sens_table_make summarizes the evaluation into the table. */
typedef struct qs_sens_variants {
    int nlayer, nsite, site[QS_SENS_NSITE], nvar;
    qs_eval_variant *var;                  /* [nvar] */
    const qs_apply **lf;                   /* per variant: its per-layer site formats */
    qs_llm_model *views;                   /* per layer: its matrices at fmt (site w) */
} qs_sens_variants;
int qs_sens_variants_make(const qs_llm_model *ref, const qs_apply *fmt, int scaled, const int *sites, int nsite,
                          qs_sens_variants *sv, qs_err *e);
void qs_sens_variants_free(qs_sens_variants *sv);
int qs_sens_table_make(const qs_sens_variants *sv, const qs_eval_out *out, qs_sens_table *t, qs_err *e);

/* All of it in one process. */
int qs_sens_run(const qs_llm_model *ref, const qs_apply *fmt, int scaled, const int *sites, int nsite, const int32_t *text,
                size_t ntext, const qs_eval_setup *su, qs_eval_progress prog, void *pctx, qs_sens_table *t, qs_err *e);
void qs_sens_table_free(qs_sens_table *t);

/* One promotion of the greedy ranking. */
typedef struct qs_sens_step {
    int layer, j;                          /* j indexes t->site */
    double kl, extra_bits, kl_per_bit;
    double predicted_kl, bits_avg;         /* after this promotion: sum of isolated KL left at the format, average bits */
} qs_sens_step;

typedef struct qs_sens_bits { double weights, activations, all; } qs_sens_bits;

/* The whole greedy ranking (nlayer * nsite steps into order): decreasing KL per extra bit (ties:
** lower layer, then site order); KL <= 0 last.  *pred0 / *bits0: predicted KL and average bits with
** everything at the format. */
void qs_sens_plan_order(const qs_sens_table *t, const qs_llm_cfg *c, double bits_fmt, double bits_hi, qs_sens_step *order,
                        double *pred0, double *bits0);
/* Promotions taken for a KL target (kl_target >= 0: the fewest steps whose predicted KL <= target) or a
** bits budget (the most steps whose average bits <= budget). */
int qs_sens_plan_choose(const qs_sens_step *order, int nsteps, double pred0, double bits0, double kl_target, double bits_budget);
/* Refinement of a plan for kl_target whose first k steps (predicted KL pred_k) measured `measured` KL,
** above the target: the next number of steps.  The measured/predicted ratio is taken to hold for the
** steps ahead, so the plan grows to the first step whose predicted KL x ratio <= kl_target, by at least
** one step and at least twice the previous round's addition prev_add (0 the first time: the rounds stay
** few), and to at most kmax steps (the bits budget's, or nsteps).  Returns k when it cannot grow. */
int qs_sens_plan_refine(const qs_sens_step *order, int nsteps, int k, double pred_k, double measured, double kl_target,
                        int prev_add, int kmax);
/* Average bits of a plan (promoted[l * nsite + j] != 0 at bits_hi, the rest at bits_fmt). */
qs_sens_bits qs_sens_plan_bits(const qs_sens_table *t, const qs_llm_cfg *c, const uint8_t *promoted, double bits_fmt, double bits_hi);

/* Evaluate the combined plan: every chosen site at fmt except the promoted ones at hi.  Fills *s
** (against the reference). */
int qs_sens_verify(const qs_llm_model *ref, const qs_apply *fmt, const qs_apply *hi, int scaled, const qs_sens_table *t,
                   const uint8_t *promoted, const int32_t *text, size_t ntext, const qs_eval_setup *su, qs_eval_summary *s,
                   qs_err *e);

#endif
