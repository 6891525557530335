/*
** Per-step metrics of an RL run trained by qscope (`rl grpo`, table rl_step of schema 6, rl_underflow of schema 7): one row per
** completed step, next to the step's rl_token rows.
*/
#ifndef QS_RL_STEP_H
#define QS_RL_STEP_H

#include <stdint.h>

#include "../kernels/qs_err.h"
#include "db.h"

/* The value columns of rl_step, in order. */
#define QS_RL_STEP_COLS(X) X(reward) X(reward_std) X(resp_len) X(entropy) X(kl_init) X(mismatch_k3) \
    X(weight_mean) X(weight_zero) X(lambda) X(loss) X(grad_norm) X(sample_s) X(train_s)
#define X(c) QS_RL_STEP_##c,
enum { QS_RL_STEP_COLS(X) QS_RL_STEP_NCOL };
#undef X

/* Insert (or replace) the row of (run, step); NaN values are stored as NULL.  The caller owns the
** transaction. */
int qs_rl_step_put(qs_db *db, int64_t run_id, int64_t step, const double v[QS_RL_STEP_NCOL], qs_err *e);

/* The ids of one sequence of a step (rl_seq), e.g. seq_id "3:17" and the group's "3:2:7+5=". */
int qs_rl_seq_put(qs_db *db, int64_t run_id, int64_t step, int64_t seq, const char *seq_id, const char *group_id,
                  qs_err *e);

/* Re-open run `name` for `rl grpo --resume`: in one transaction, its rl_token, rl_seq, rl_step and rl_underflow rows of
** steps >= from deleted (the resumed run recomputes them).  Returns 1 and *id, 0 when there is no such
** run (nothing changes), -1 on error. */
int qs_rl_run_reopen(qs_db *db, const char *name, int64_t from, int64_t *id, qs_err *e);
/* The rl_underflow rows of (run, step) from a rollout's underflow counters (kernels/llm_decode.h:
** QS_LLM_UF_LEN(n_layer) values): one row per (layer, site) that rounded a non-zero value, site named
** attn_in attn_out ffn_in ffn_down_in kv, and layer n_layer "head_in" (the output projection's input).
** uf NULL or nothing rounded: no rows.  The caller owns the transaction. */
int qs_rl_underflow_put(qs_db *db, int64_t run_id, int64_t step, const uint64_t *uf, int n_layer, qs_err *e);
const char *qs_rl_underflow_site(int layer, int n_layer, int site);

/* The rl_step rows of the run named run (-1: no such run); a sweep skips a run stored whole. */
int qs_rl_step_count(qs_db *db, const char *run, int64_t *n, qs_err *e);

#endif
