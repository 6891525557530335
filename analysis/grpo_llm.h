/*
** GRPO on a real transformer (issue 27): `qscope rl grpo`.  Per step, B prompts of a task with verifiable
** rewards (rl_task.h) x G samples of up to max_new tokens from the ROLLOUT policy (the model's weights
** under the rollout numerics: weight, activation and KV formats, Rollout-ResQ; llm_rollout.h), rewards,
** group-normalised advantages (as grpo_sim.c: (r - mean_g) / (std_g + eps), std with n - 1), the
** TRAINER's log-probs of the same tokens recomputed teacher-forced by the training forward under its
** recipe (kernels/llm_train.h), the correction's per-token weights w (analysis/ais.h, stop-gradient),
** and one AdamW step on the policy-gradient loss
**     L = -(1/N) sum_tokens A w log pi(token)  [+ kl_coef (1/N) sum_tokens k3(pi_init || pi)]
** over the N response tokens of the step (one epoch, on-policy, no PPO clip: the ratio to pi_old is 1).
** The KL to the initial policy (k3 = e^(lp0 - lp) - (lp0 - lp) - 1, its FP32 forward) is reported always.
** Everything is a pure function of the model, the settings and the seed.
*/
#ifndef QS_GRPO_LLM_H
#define QS_GRPO_LLM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "ais.h"
#include "../kernels/llm_adamw.h"
#include "rl_task.h"
#include "../kernels/llm.h"
#include "../kernels/llm_recipe.h"
#include "../store/llm_tok.h"
#include "../store/rl_log.h"

/* The rollout's numerics (the keys of `llm eval --config`: w, a, kv, resq). */
typedef struct qs_grpo_numerics {
    qs_apply w, a, kv;
    int has_w, has_a, has_kv;
    qs_llm_resq resq;
    int scaled;               /* plain casts get a per-row scale (llm.h) */
} qs_grpo_numerics;

typedef struct qs_grpo_llm_cfg {
    qs_rl_task task;
    int B, G, max_new, steps;          /* prompts per step, samples per prompt, response tokens, steps */
    double temp;                       /* sampling temperature (1: the policy itself) */
    double lr, clip, kl_coef;          /* AdamW learning rate, gradient-norm clip (0: off), KL coefficient */
    uint64_t seed;                     /* prompts and samples */
    qs_grpo_numerics roll;
    const qs_llm_recipe *trainer;      /* NULL: FP32 */
    qs_ais_method method;
    qs_ais_opts ais;
    const qs_llm_vocab *vocab;         /* NULL or empty: byte-level tokens (token = byte) */
} qs_grpo_llm_cfg;

void qs_grpo_llm_cfg_default(qs_grpo_llm_cfg *c);

typedef struct qs_grpo_llm_step {
    int step;                          /* 0 .. steps-1 */
    double reward, reward_std;         /* mean and std over the step's B*G samples (before its update) */
    double resp_len, entropy;          /* mean response tokens; mean rollout entropy per token (nats) */
    double kl_init;                    /* mean k3 of the trainer to the initial policy per token */
    double mismatch_k3, weight_mean, weight_zero, lambda;   /* rollout vs trainer; the correction's weights */
    double loss, grad_norm;            /* the step's loss and its gradient norm (before clipping) */
    double sample_s, train_s;          /* wall time */
    /* the rollout's activation-rounding underflow over the step (llm_rollout.h): QS_LLM_UF_LEN(uf_layers)
    ** counters, at QS_LLM_UF(l, site) the non-zero values rounded and at +1 those that became 0 */
    const uint64_t *uf;
    int uf_layers;
} qs_grpo_llm_step;

/* After every step (its update done): the record, the step's tokens as mmlog rows (reward and
** advantage per token, seq = b*G + g, grp = step*B + b) and the B prompts' texts.  Non-zero stops the
** run with that error. */
typedef int (*qs_grpo_llm_cb)(void *ctx, const qs_grpo_llm_step *rec, const qs_rl_row *rows, size_t n,
                              const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e);

/* The settings fit the model: a group of >= 2, the first step's prompts + max_new (+2) within its context. */
int qs_grpo_llm_check(const qs_llm_model *m, const qs_grpo_llm_cfg *c, qs_err *e);

/* Train m in place for c->steps steps (fewer when *stop becomes set: the run ends after the step in
** progress, *steps_done says how many).  Errors: a model context shorter than prompt + max_new, a
** non-finite log-prob or loss, out of memory. */
int qs_grpo_llm_run(qs_llm_model *m, const qs_grpo_llm_cfg *c, qs_grpo_llm_cb cb, void *ctx,
                    const volatile sig_atomic_t *stop, int *steps_done, qs_err *e);

/* Where a run stands between two steps: with the model's weights, everything a resumed run needs to
** continue bit for bit (the sampling streams are a pure function of the seed and the step). */
typedef struct qs_grpo_llm_state {
    int step;                          /* steps completed: the next step's index */
    double lambda;                     /* the AIS lambda after it */
    uint64_t calls, calls0;            /* the trainer's and the initial policy's GEMM call counters */
    const qs_adamw *opt;               /* AdamW's moments and step count (qs_grpo_llm_run_from: NULL is zero) */
    int final;                         /* 1: the run ends here (its last step, or stopped) */
} qs_grpo_llm_state;

/* After every completed step (its callback done), final 0, and once more with final 1 when the run
** ends after a completed step (a stop may come after the first call): the state to checkpoint.
** Non-zero stops the run. */
typedef int (*qs_grpo_llm_ckpt_cb)(void *ctx, const qs_llm_model *m, const qs_grpo_llm_state *s, qs_err *e);

/* qs_grpo_llm_run from state `from` (NULL: step 0) with the initial policy `init` (NULL: m as given;
** the KL reference), steps from->step .. c->steps-1, ckpt called after each. */
int qs_grpo_llm_run_from(qs_llm_model *m, const qs_llm_model *init, const qs_grpo_llm_cfg *c,
                         const qs_grpo_llm_state *from, qs_grpo_llm_cb cb, qs_grpo_llm_ckpt_cb ckpt, void *ctx,
                         const volatile sig_atomic_t *stop, int *steps_done, qs_err *e);

#endif
