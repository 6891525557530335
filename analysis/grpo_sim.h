/*
** A small CPU GRPO experiment with quantized rollouts (spec ais-rl.md §5), used by `qscope sim grpo`.
**
** Task: P prompts, responses of T tokens over a vocabulary of V; each prompt has a random target
** sequence; reward = length of the correct prefix / T.  Policy: linear softmax with shared weights,
** logit_v = Σ_j W[v][j] φ_j(x, t) + Σ_j Wb[v][j] ψ_j(t, prev), with fixed Gaussian features φ, ψ of
** dimension D (function approximation: updates couple contexts).  The trainer keeps FP32 weights
** (logits and softmax in double).  The rollout policy μ uses the same weights fake-quantized through
** a registry format (kernels/format_apply.h; blocks along D), optionally with a rollout
** temperature; tokens are sampled from μ.  GRPO: B prompts × G samples per step, group-normalised
** advantages, PPO-clipped token-mean loss against π_old (the trainer at the start of the step),
** K epochs of full-batch Adam (or SGD), each token's loss multiplied by the correction's weight
** (analysis/ais.h; computed from π_old and μ, stop-gradient).
**
** Everything is a pure function of the configuration and the seed (counter-based random numbers):
** the same seed gives the same bits on any machine with IEEE doubles.
*/
#ifndef QS_GRPO_SIM_H
#define QS_GRPO_SIM_H

#include <stdint.h>

#include "ais.h"
#include "../kernels/format_apply.h"

enum { QS_WSCALE_NONE = 0, QS_WSCALE_TENSOR, QS_WSCALE_ROW };

typedef struct qs_grpo_cfg {
    int P, T, V, D;            /* prompts, response length, vocabulary, feature dimension (16, 8, 32, 64) */
    int B, G;                  /* prompts per step (sampled with replacement), samples per prompt (32, 8) */
    int steps, epochs;         /* (500, 1) */
    double lr;                 /* (0.007) */
    int sgd;                   /* 0 = Adam (β 0.9, 0.999, ε 1e-8), 1 = plain SGD */
    double clip_eps;           /* PPO clip (0.2) */
    double init_scale;         /* std of the initial weights (0.02) */
    double feat_scale;         /* std of the features (1) */
    double rollout_temp;       /* temperature of μ only (1) */
    uint64_t seed;
    int exact;                 /* 1: μ = π (no quantization, no temperature): the baseline */
    qs_apply fmt;              /* rollout weight format (ignored when exact) */
    int wscale;                /* extra scaling of element formats before the cast: QS_WSCALE_* */
    qs_ais_method method;      /* correction applied to the loss */
    qs_ais_opts ais;           /* caps, bands, AIS-R hyper-parameters (lambda_fixed for the ablation) */
} qs_grpo_cfg;

void qs_grpo_cfg_default(qs_grpo_cfg *c);

/* Per-step record. */
typedef struct qs_grpo_step {
    double reward;             /* mean sampled reward */
    double greedy_pi, greedy_mu;   /* mean over prompts of the greedy-decoded reward under π and μ */
    double entropy;            /* mean entropy of π over the sampled contexts (nats) */
    double wnorm, gnorm;       /* ‖(W, Wb)‖ after the step, ‖gradient‖ of the first epoch */
    double clipfrac;           /* fraction of valid tokens whose PPO term was clipped (all epochs) */
    double qerr;               /* relative RMS error of the quantized rollout weights */
    qs_ais_row diag;           /* diagnostics of the batch, with AIS-R λ as used */
} qs_grpo_step;

/* Called for each step (before the update) with the batch as it would be logged (mmlog). */
typedef int (*qs_grpo_log_fn)(void *ctx, int step, const qs_ais_batch *b, const int *token, qs_err *e);

/* Run the experiment; steps[cfg->steps] is filled.  log may be NULL. */
int qs_grpo_run(const qs_grpo_cfg *c, qs_grpo_step *steps, qs_grpo_log_fn log, void *ctx, qs_err *e);

#endif
