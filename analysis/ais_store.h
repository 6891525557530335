/*
** AIS diagnostics of a stored RL run (rl_token): read step by step in primary-key order, compute on
** a second thread while the next step is read, and store the results.
**
** Result key: tensor_hash = the run's "token hash", XXH3-128 (hex) of the run's token records in
** (step, seq, pos) order, each record = step, seq, pos (int64 LE), lp_rollout, lp_train (double),
** mask (int64), advantage, reward, entropy (double, NaN for NULL), grp (int64, −1 for NULL).  Two
** runs with the same tokens share results; the run name is in the options.
**
** Stored rows (analysis/results.h), all with format = the run's rollout format (metadata
** "rollout_format" / header "rollout_precision", else "unknown") and options = the AIS options JSON
** plus "run" and, for trajectories, "set":
**   kind "rl_ais":      {"run":..,"token_hash":..,"reconstruction":..,"fields":{NAME:[per step]..}}
**   kind "trajectory":  {"title":..,"xlabel":"step" (an llm score run: "prompt (llm score: no training)"),
**                        "ylabel":..,"series":[{"name":..,"x":[..],"y":[..]}]}
**                       one row per set: "policy", "weights", "ais", "ess", "mismatch", "overview"
**                       (written in this order; `qscope plot trajectory` draws the newest: overview)
*/
#ifndef QS_AIS_STORE_H
#define QS_AIS_STORE_H

#include "../store/db.h"
#include "ais.h"

typedef struct qs_ais_result {
    char run[256];
    int64_t run_id;
    char hash[33];
    char format[64];
    qs_ais_row *rows;
    size_t nrows;
    uint64_t tokens;
    int per_prompt;               /* an `llm score` run: its "steps" are prompts (rl_xaxis.h) */
} qs_ais_result;

/* Diagnostics of every step of run `run`. */
int qs_ais_run(qs_db *db, const char *run, const qs_ais_opts *o, qs_ais_result *r, qs_err *e);
void qs_ais_result_free(qs_ais_result *r);

/* JSON of the per-step fields ({"fields": {name: [..]}, ...}), malloc'd. */
char *qs_ais_result_json(const qs_ais_result *r, const qs_ais_opts *o);
/* The trajectory JSON of one set (policy, weights, ais, ess, mismatch, overview), malloc'd; NULL
** for an unknown set or one without data (policy of a log without entropy and reward). */
char *qs_ais_trajectory_json(const qs_ais_result *r, const char *set);
extern const char *qs_ais_trajectory_sets;
/* Store the rl_ais row and the trajectory rows (one transaction). */
int qs_ais_store(qs_db *db, const qs_ais_result *r, const qs_ais_opts *o, qs_err *e);

/* Per-token weights of every method for the steps of a computed result (λ from r): calls fn once
** per token with w[QS_CORR_COUNT] (0 for masked tokens). */
typedef int (*qs_ais_token_fn)(void *ctx, int64_t step, int64_t seq, int64_t pos, int mask, double delta,
                               const double *w, qs_err *e);
int qs_ais_run_weights(qs_db *db, const qs_ais_result *r, const qs_ais_opts *o, int64_t only_step,
                       qs_ais_token_fn fn, void *ctx, qs_err *e);

#define QS_AIS_RECONSTRUCTION \
    "AIS-R: the project's reconstruction of AIS (arXiv 2605.13907); the paper's exact formulas are " \
    "unpublished. R = token ESS ratio, S = 1 - exp(-mean|delta|/tau_s), Vamp = 1 - ESS_seq (or gradient " \
    "level), lambda_raw = S*R*(1 - kappa*Vamp), lambda = EMA_beta(lambda_raw)"

#endif
