/*
** Rollout-training mismatch diagnostics, AIS-R and importance-sampling corrections, per training
** step (spec ais-rl.md §1, §2.4-2.5, §3.5, §3.7).  Double precision, deterministic (sums in token
** order), no database access here (ais_store.c reads runs and stores results).
**
** Conventions: δ = lp_train − lp_rollout per token, clamped to [−clamp, clamp] (default 20) before
** every use except max_abs_dlogp and the scale-invariant ess_tok, ess_seq and cv_w (raw, shifted by
** the max); w = exp(δ) = π_train/π_rollout; Δ_i = Σ_t δ over the sequence's valid (mask = 1)
** tokens, ρ_i = exp(clamp(Δ_i)); ρ_geo_i = exp(Δ_i / T_i).  Every
** statistic uses valid tokens only; a sequence without valid tokens does not count.
**
** AIS-R is the PROJECT'S RECONSTRUCTION of AIS (Zhou, Shao et al., arXiv 2605.13907), whose exact
** formulas are unpublished: R = token ESS ratio, S = 1 − exp(−mean|δ| / τ_S), Vamp = 1 − ESS_seq
** (or the gradient-level variant), λ_raw = S·R·(1 − κ·Vamp), λ = EMA_β(λ_raw) clipped to
** [λ_min, λ_max], per-token weight (1 − λ) + λ·min(w, C).
*/
#ifndef QS_AIS_H
#define QS_AIS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef enum qs_ais_method {
    QS_CORR_NONE = 0,   /* weight 1 (uncorrected) */
    QS_CORR_TIS,        /* token TIS: min(w, C) */
    QS_CORR_SEQ_TIS,    /* sequence TIS: min(ρ_i, C) on every token of sequence i */
    QS_CORR_MIS,        /* token MIS (IcePop): w if w in [mis_lo, mis_hi], else 0 */
    QS_CORR_SEQ_MIS,    /* sequence MIS: ρ_i if ρ_i in [seq_lo, seq_hi], else 0 */
    QS_CORR_GEO,        /* geometric-mean rejection (Geo-RS): 1 if ρ_geo_i in [geo_lo, geo_hi], else 0 */
    QS_CORR_AIS,        /* AIS-R: (1 − λ) + λ·w̄ (w̄ = min(w, C), or min(ρ_i, C) with ais_seq) */
    QS_CORR_COUNT
} qs_ais_method;

const char *qs_ais_method_name(qs_ais_method m);
int qs_ais_method_parse(const char *s, qs_ais_method *m);

typedef struct qs_ais_opts {
    double C;                  /* truncation cap (2) */
    double clamp;              /* log-ratio safety bound (20) */
    double tau_s;              /* AIS-R severity scale, nats (0.05) */
    double kappa;              /* AIS-R amplification penalty (0.5) */
    double beta;               /* AIS-R EMA factor (0.9) */
    double lambda_min, lambda_max;   /* [0, 1] */
    int lambda0_zero;          /* EMA starts from 0 instead of λ_raw of the first step */
    int vamp_grad;             /* amplification: 0 = 1 − ESS_seq, 1 = gradient level (needs advantages) */
    int ais_seq;               /* AIS-R IS branch: 0 = token truncated w, 1 = sequence truncated ρ */
    double w_veto;             /* AIS-R: tokens with w < w_veto get weight 0 (0 = off) */
    double lambda_fixed;       /* >= 0: hold λ at this value (ablation); < 0: adaptive (default −1) */
    double mis_lo, mis_hi;     /* token MIS band ([1/C, C]) */
    double seq_lo, seq_hi;     /* sequence MIS band ([1/C, C]) */
    double geo_lo, geo_hi;     /* Geo-RS band ([0.999, 1.001]) */
    double grpo_eps;           /* GRPO advantage epsilon (1e-6) */
} qs_ais_opts;

void qs_ais_opts_default(qs_ais_opts *o);
/* Canonical JSON of the options (sorted keys), malloc'd. */
char *qs_ais_opts_json(const qs_ais_opts *o);

/* One training step's tokens.  Tokens of a sequence are contiguous (seq constant). */
typedef struct qs_ais_batch {
    int64_t step;
    size_t n;
    const int64_t *seq;
    const double *lp_r, *lp_t;
    const uint8_t *mask;       /* NULL: all valid */
    const double *adv;         /* NULL or NaN entries: absent (then GRPO advantages from reward + group) */
    const double *reward;      /* per token (the sequence's reward), NULL/NaN: absent */
    const double *entropy;     /* NULL/NaN: absent */
    const int64_t *grp;        /* NULL / -1: absent */
} qs_ais_batch;

/* The per-step fields, in output order. */
#define QS_AIS_FIELDS(X) \
    X(step) X(n_tok) X(n_seq) X(n_masked) \
    X(mean_abs_dlogp) X(max_abs_dlogp) X(kl_k1) X(kl_k2) X(kl_k3) X(m2) X(chi2_tok) X(chi2_seq) \
    X(ess_tok) X(ess_seq) X(ess_tok_clamped) X(cv_w) \
    X(w_mean) X(w_std) X(w_min) X(w_max) X(w_p01) X(w_p05) X(w_p25) X(w_p50) X(w_p75) X(w_p95) X(w_p99) \
    X(frac_w_gt_c) X(frac_w_lt_inv_c) X(frac_seq_gt_c) X(frac_seq_lt_inv_c) \
    X(rho_mean) X(rho_std) X(rho_min) X(rho_max) X(rho_geo_mean) X(rho_geo_min) X(rho_geo_max) \
    X(rollout_ppl) X(training_ppl) X(rollout_log_ppl) X(training_log_ppl) X(log_ppl_diff) X(log_ppl_abs_diff) \
    X(log_ppl_diff_max) X(log_ppl_diff_min) X(ppl_ratio) X(prob_pearson) X(probs_diff_max) X(probs_diff_mean) \
    X(entropy_mean) X(reward_mean) X(adv_mean) \
    X(ais_R) X(ais_D) X(ais_S) X(ais_vamp) X(ais_lambda_raw) X(ais_lambda) \
    QS_AIS_WFIELDS(none) QS_AIS_WFIELDS(tis) QS_AIS_WFIELDS(seq_tis) QS_AIS_WFIELDS(mis) QS_AIS_WFIELDS(seq_mis) \
    QS_AIS_WFIELDS(geo) QS_AIS_WFIELDS(ais)
#define QS_AIS_WFIELDS(m) X(m##_mean) X(m##_std) X(m##_min) X(m##_max) X(m##_frac_zero) X(m##_frac_trunc) X(m##_ess)

#define X(name) QS_AIS_F_##name,
enum { QS_AIS_FIELDS(X) QS_AIS_NFIELDS };
#undef X
#define QS_AIS_W0 QS_AIS_F_none_mean     /* first weight-summary field; method m at W0 + 7 m */
#define QS_AIS_WN 7

extern const char *const qs_ais_field_names[QS_AIS_NFIELDS];
int qs_ais_field_find(const char *name);

typedef struct qs_ais_row {
    double v[QS_AIS_NFIELDS];   /* NaN where undefined (e.g. no rewards logged) */
    /* AIS-R sums over non-vetoed valid tokens, finished once λ is known */
    double a_n, a_s1, a_s2, a_css, a_min, a_max, a_trunc, n_veto;
} qs_ais_row;

/* Everything of one step except the λ-dependent fields (ais_lambda, ais_* weight summary). */
int qs_ais_step(const qs_ais_opts *o, const qs_ais_batch *b, qs_ais_row *row, qs_err *e);
/* λ over the steps (in order): EMA of λ_raw, clipping, and the AIS-R weight summaries. */
/* One EMA step of λ (first: the first step with tokens; prev ignored then). */
double qs_ais_lambda_next(const qs_ais_opts *o, double prev, double raw, int first);
/* Set λ of one step and its AIS-R weight summary. */
void qs_ais_apply_lambda(qs_ais_row *row, double lambda);
void qs_ais_finish(const qs_ais_opts *o, qs_ais_row *rows, size_t n);

/* Per-token weights of a method for one step (0 where mask = 0); lambda is used by AIS. */
int qs_ais_token_weights(const qs_ais_opts *o, qs_ais_method m, const qs_ais_batch *b, double lambda, double *w,
                         qs_err *e);

#endif
