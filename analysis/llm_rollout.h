/*
** Sampling continuations and re-scoring them: the rollout half of `qscope llm score` (app/cli/cmd_llm.c).
** A rollout samples N tokens for B copies of one prompt with the low-precision model; scoring
** recomputes the same tokens' log-probabilities teacher-forced under another model's numerics.
*/
#ifndef QS_LLM_ROLLOUT_H
#define QS_LLM_ROLLOUT_H

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

#endif
