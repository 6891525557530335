/*
** Sampling continuations and re-scoring them: the rollout half of `qscope llm score` (app/cli/cmd_llm.c).
** A rollout samples N tokens for B copies of one prompt with the low-precision model; scoring
** recomputes the same tokens' log-probabilities teacher-forced under another model's numerics.
*/
#ifndef QS_LLM_ROLLOUT_H
#define QS_LLM_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"
#include "../kernels/qs_err.h"

#define MAX_PROMPT 256

typedef struct { int32_t ids[MAX_PROMPT]; int n; char label[64]; long answer; /* -1: no task */ } prompt_t;

typedef struct sampler { double temp, top_p; int top_k, greedy; } sampler;

typedef struct rollout {
    int B, plen, N;
    int32_t *tok;        /* [B][plen+N] */
    double *lp, *ent;    /* [B][N] rollout log-prob and entropy of generated token */
    int *len;            /* generated tokens kept per sequence (up to and including EOS) */
} rollout;

int llm_rollout(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *p, int B, int N, int eos,
                uint64_t seed, uint64_t stream, const sampler *sp, rollout *ro, double *secs, qs_err *e);

void llm_rollout_free(rollout *ro);

int llm_score_tokens(const qs_llm_model *m, const qs_llm_numerics *nx, const rollout *ro, double *lp, double *ent,
                     double *secs, qs_err *e);

/* One token drawn from a row of logits with uniform u in [0,1): sp NULL = plain softmax sampling at
** temperature 1, else the filters of sampler (llm_rollout.c); *lp, *ent: log-prob and entropy of the
** unfiltered distribution.  scratch: llm_sample_scratch(vocab) bytes, or NULL when sp is NULL (it keeps
** the exps for the draw then, the same bits either way). */
size_t llm_sample_scratch(int vocab);
int llm_sample_token(const float *logits, int vocab, double u, const sampler *sp, void *scratch, double *lp, double *ent);

/* ---------------------------------------------------------------- batched rollouts (issue 27)
** All P x G sequences of a GRPO step decode together (kernels/llm_decode.h): prompts of different
** lengths, G samples each, one GEMM per weight matrix per step with M = the sequences still running;
** a sequence leaves the batch at EOS or after max_new tokens.  Sequence i = prompt i / G, sample
** i % G draws its token t with u = qs_sr_uniform(seed, ((i / G) * 256 + i % G) * 65536 + t), the
** counters of llm_rollout(stream = i / G, b = i % G): results depend on neither the batch nor the
** thread count, and a sequence sampled alone equals itself in any batch, bit for bit. */
typedef struct rollout_batch {
    int nseq, group, max_new, n_layer;
    uint64_t stream0;        /* llm_rollout's stream of prompt 0 (llm_rollout_batch_at) */
    int32_t *tok;            /* [nseq][max_new] generated tokens (EOS included; unused tail 0) */
    double *lp, *ent;        /* [nseq][max_new] log-prob and entropy of each generated token */
    int *len;                /* [nseq] tokens generated (through EOS) */
    int *plen;               /* [nseq] prompt length */
    /* rounding underflow over the whole call (prefill and decoding): QS_LLM_UF_LEN(n_layer) counters
    ** (kernels/llm_decode.h); llm_rollout_underflow reads them */
    uint64_t *uf;
    double secs;             /* wall seconds of the call */
    long tokens;             /* tokens generated, sum of len */
    long rows;               /* rows forwarded (prefill + decoding) */
} rollout_batch;

/* m: the rollout policy, its weights already rounded (qs_llm_quantize_weights) when the rollout config
** has a weight format; nx: its activation / KV / ResQ numerics (NULL = FP32); eos < 0: none; sp NULL =
** plain sampling at temperature 1.  Vary seed per GRPO step.  On error *out is empty. */
int llm_rollout_batch(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *prompts, int nprompt, int group,
                      int max_new, int eos, uint64_t seed, const sampler *sp, rollout_batch *out, qs_err *e);
/* The same with prompt p drawing from stream stream0 + p: GRPO step st passes stream0 = st * P, so
** its draws are those of llm_rollout(stream = st * P + p) one prompt at a time. */
int llm_rollout_batch_at(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *prompts, int nprompt,
                         int group, int max_new, int eos, uint64_t seed, uint64_t stream0, const sampler *sp,
                         rollout_batch *out, qs_err *e);
void llm_rollout_batch_free(rollout_batch *rb);
/* Fraction of the non-zero values rounded at (layer, site) that became 0 (site QS_SITE_ATTN_IN ..
** QS_SITE_FFN_DOWN_IN, QS_LLM_LSITE_KV; layer n_layer: the output projection's input, site 0); -1
** when nothing was rounded there. */
double llm_rollout_underflow(const rollout_batch *rb, int layer, int site);

#endif
