/*
** Fixed-text evaluation of a causal LM under low-precision configurations against its FP32
** reference (`qscope llm eval`, docs/llm.md "Model evaluation"): perplexity of every variant and,
** for every configuration, per-token KL divergence, Delta p and top-1 agreement against the
** reference, chunk by chunk so that at most one chunk of reference probabilities and one block of
** logits per variant are held.
**
** Scoring convention (llama.cpp's llama-perplexity by default): the token ids are cut into
** non-overlapping chunks of ctx tokens (a partial last chunk is dropped); when `bos` >= 0 the first
** token of every chunk is replaced by BOS for the forward pass; the logits at positions first ..
** ctx-2 score the next token, with first = ctx/2 (second half, llama.cpp) or 0 (--score all).
*/
#ifndef QS_LLM_EVAL_H
#define QS_LLM_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"
#include "../kernels/llm_stats.h"

typedef struct qs_eval_setup {
    int ctx;          /* chunk length (tokens per forward pass) */
    int nchunks;      /* chunks evaluated (<= ntext / ctx) */
    int score_all;    /* 0: positions ctx/2 .. ctx-2 (llama.cpp), 1: 0 .. ctx-2 */
    int bos;          /* >= 0: this id replaces the first token of each chunk; -1: none */
} qs_eval_setup;

/* First scored position of a chunk, and the number of scored tokens of the whole run. */
int qs_eval_first(const qs_eval_setup *s);
size_t qs_eval_ntok(const qs_eval_setup *s);
/* Input ids of chunk c (ctx of them, BOS-replaced) from the text ids; the targets are text ids
** c*ctx + first + 1 .. c*ctx + ctx - 1 (never the BOS). */
void qs_eval_chunk_input(const qs_eval_setup *s, const int32_t *text, int c, int32_t *in);

/* A variant: the weights it uses (the reference's or a rounded copy) and its numerics. */
typedef struct qs_eval_variant {
    const qs_llm_model *m;
    qs_llm_numerics nx;
    /* > 0: the variant equals the reference (weights and numerics) in layers < from_layer, so its
    ** forward pass starts from the reference's residual stream entering that layer (kept per chunk:
    ** layers x ctx x dim floats); its non-finite counts then cover layers >= from_layer only. */
    int from_layer;
} qs_eval_variant;

/* Non-finite values met by a variant: logit rows with NaN/Inf (those tokens are left out of the
** statistics) and activations seen at the taps (pre-rounding values of every site). */
typedef struct qs_eval_nonfinite {
    uint64_t logit_rows, act_values;
    int first_layer;          /* -1: none */
    qs_llm_site first_site;
} qs_eval_nonfinite;

/* Per scored token (index k = chunk * per_chunk + position - first). */
typedef struct qs_eval_var_out {
    double *nll;              /* -ln p(next token); NaN when the row was not finite */
    double *kl, *dp;          /* against the reference (configurations only) */
    uint8_t *same_top;
    qs_eval_nonfinite nf;
    double fwd_seconds, head_seconds;   /* forward passes; output projection + statistics */
} qs_eval_var_out;

typedef struct qs_eval_out {
    size_t n;                 /* scored tokens */
    int nvar;                 /* 1 + configurations; var[0] is the reference */
    qs_eval_var_out *var;
} qs_eval_out;

typedef void (*qs_eval_progress)(void *ctx, int chunk, int nchunks);

/* Run the reference `ref` (FP32 numerics) and the ncfg configurations over the chunks of text.
** want[i] = 0 skips configuration i (its outputs stay empty: a cached result).  Allocates out. */
int qs_llm_eval_run(const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg,
                    const int32_t *text, size_t ntext, const qs_eval_setup *s, qs_eval_progress prog, void *pctx,
                    qs_eval_out *out, qs_err *e);
void qs_eval_out_free(qs_eval_out *o);

/* The pieces of qs_llm_eval_run, for callers that split the chunks (analysis/llm_eval_shard.h).
** qs_eval_check validates the setup and ids; *resid = 1 when a wanted variant starts above layer 0. */
int qs_eval_check(const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg, const int32_t *text,
                  size_t ntext, const qs_eval_setup *s, int *resid, qs_err *e);
/* Outputs for n tokens of the reference and of the wanted configurations (want NULL: all). */
int qs_eval_out_alloc(qs_eval_out *out, size_t n, const int *want, int ncfg);
/* One chunk's buffers (with the reference's residual streams when resid). */
typedef struct qs_eval_work qs_eval_work;
qs_eval_work *qs_eval_work_new(const qs_llm_model *ref, const qs_eval_setup *s, int resid, qs_err *e);
void qs_eval_work_free(qs_eval_work *w);
/* Chunk c: the reference's pass, then every configuration whose outputs out->var[i + 1] are
** allocated; per-token results at k0 .. k0 + per - 1 of out's arrays (out->var[0] must be allocated).
** A token's results depend only on the chunk, never on which other variants run beside it. */
int qs_eval_chunk(qs_eval_work *w, const qs_llm_model *ref, const qs_eval_variant *cfg, const int32_t *text,
                  const qs_eval_setup *s, int c, qs_eval_out *out, size_t k0, qs_err *e);

/* Summary of one variant (docs/llm.md defines each).  Tokens whose row (or the reference's) was
** not finite are left out; n counts the tokens used. */
typedef struct qs_eval_summary {
    size_t n;
    double ppl, ppl_se, nll_mean, nll_se;
    /* against the reference (configurations) */
    double kl_mean, kl_se, kl_q[11];         /* quantiles at qs_eval_kl_qs */
    double dp_rms, dp_rms_se, dp_mean, dp_mean_se, dp_q[11];
    double top1, top1_se;
    double lnratio_mean, lnratio_se;         /* mean of ln p_ref - ln p_Q = ln(PPL(Q)/PPL(ref)) */
    double ppl_ratio, ppl_ratio_se;          /* PPL(Q)/PPL(ref) (delta method) */
    double dppl_rel, dppl_lo, dppl_hi;       /* PPL(Q)/PPL(ref) - 1 with its 95% interval */
    double ppl_diff, ppl_diff_se;            /* PPL(Q) - PPL(ref) */
    double cor_lnppl;                        /* Pearson correlation of per-token ln p (Q vs ref) */
    qs_klhist hist;
} qs_eval_summary;

/* The quantile levels of kl_q/dp_q: 0 (min), .001, .01, .05, .10, .50, .90, .95, .99, .999, 1 (max). */
extern const double qs_eval_kl_qs[11];

/* The reference's summary (cfg = NULL) or a configuration's against the reference. */
int qs_eval_summarize(const qs_eval_var_out *ref, const qs_eval_var_out *cfg, size_t n, qs_eval_summary *s, qs_err *e);

#endif
