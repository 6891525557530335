/*
** The runs of `qscope sim grpo` (formats x methods x seeds of datasets/grpo_sim.h): running a set of
** them on threads, their results as bytes (so that the ranks of `mpirun` can compute them and rank 0
** store them), storing one, and the summary of a (format, method) cell over seeds.  Every run is a
** pure function of its settings and seed, so where it runs never changes its results.
*/
#ifndef QS_GRPO_SWEEP_H
#define QS_GRPO_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "grpo_sim.h"
#include "../store/db.h"
#include "../store/rl_log.h"

/* simulation methods: a correction, plus the exact baseline and the fixed-lambda ablation */
enum { QS_SM_EXACT = 0, QS_SM_NONE, QS_SM_TIS, QS_SM_SEQ_TIS, QS_SM_MIS, QS_SM_SEQ_MIS, QS_SM_GEO, QS_SM_AIS, QS_SM_AIS_FIXED,
       QS_SM_COUNT };
extern const char *const qs_sim_methods[QS_SM_COUNT];
int qs_sim_method_parse(const char *s);   /* -1 when unknown */
qs_ais_method qs_sim_method_corr(int method);

/* what the summary needs of each step */
typedef struct qs_grpo_cstep { double reward, greedy_pi, k3, ess_seq, lambda; } qs_grpo_cstep;

typedef struct qs_grpo_job {
    int fi, mi;                /* format index (-1: exact), method */
    uint64_t seed;
    qs_grpo_cfg cfg;
    char run[256];
    /* results */
    qs_grpo_cstep *cs;         /* [cfg.steps] */
    char *data;                /* the stored rl_sim result's data (JSON), when logging */
    qs_rl_row *rows;           /* the logged tokens */
    size_t nrows;
} qs_grpo_job;

/* Run jobs[0..n) on up to `threads` threads; the ais_r_fixed ones after the others, lambda fixed at
** the mean of the ais_r job of the same format and seed (which must be among jobs).  store: keep the
** data and, every log_every steps (and the last; 0 never), the batch's tokens.  On failure e names
** the run. */
int qs_grpo_jobs_run(qs_grpo_job **jobs, size_t n, int threads, int store, int log_every, qs_err *e);
/* The results of jobs[0..n) as bytes, and back (into jobs of the same settings, in the same order). */
int qs_grpo_jobs_pack(qs_grpo_job *const *jobs, size_t n, uint8_t **b, size_t *len, qs_err *e);
int qs_grpo_jobs_unpack(qs_grpo_job **jobs, size_t n, const uint8_t *b, size_t len, qs_err *e);
/* Free a job's data and rows (keep cs), or everything. */
void qs_grpo_job_drop_log(qs_grpo_job *j);
void qs_grpo_job_free(qs_grpo_job *j);

/* Store a finished run inside the caller's transaction: rl_run `j->run` with `meta` (replacing an
** existing one when replace), its logged tokens and its rl_sim result. */
int qs_grpo_job_store(qs_db *db, const qs_grpo_job *j, const char *meta, int replace, qs_err *e);

/* A (format, method) cell over its seeds' runs (jobs in seed order): FINAL = mean reward of the last
** 10 % of steps, EARLY = first 15 %, AUC = all steps; GREEDY = greedy reward under the trainer, last
** 10 %; COLLAPSE = share of runs whose final reward < half the best 10-step average; K3, ESS_seq and
** lambda early / late; ci: 95 % t intervals over seeds (NaN with one seed). */
typedef struct qs_grpo_cell {
    int n;
    double final, final_ci, early, early_ci, auc, greedy, collapse, k3_early, k3_late, ess_late, lam_early, lam_late;
} qs_grpo_cell;
void qs_grpo_cell_summary(const qs_grpo_job *const *jobs, int n, int steps, qs_grpo_cell *c);
/* Mean of field `off` (offsetof in qs_grpo_cstep) over steps [a, b), finite values only. */
double qs_grpo_mean_range(const qs_grpo_cstep *s, int a, int b, size_t off);

#endif
