/*
** The runs of `qscope sim grpo` (see grpo_sweep.h).
*/
#include "grpo_sweep.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "results.h"
#include "../kernels/pool.h"
#include "../store/json_out.h"

const char *const qs_sim_methods[QS_SM_COUNT] = {"exact", "none", "tis", "seq_tis", "icepop", "seq_mis", "geo_rs", "ais_r",
                                                 "ais_r_fixed"};
static const qs_ais_method kCorr[QS_SM_COUNT] = {QS_CORR_NONE, QS_CORR_NONE, QS_CORR_TIS, QS_CORR_SEQ_TIS, QS_CORR_MIS,
                                                 QS_CORR_SEQ_MIS, QS_CORR_GEO, QS_CORR_AIS, QS_CORR_AIS};

qs_ais_method qs_sim_method_corr(int method) { return kCorr[method]; }

int qs_sim_method_parse(const char *s)
{
    for (int i = 0; i < QS_SM_COUNT; i++) if (!strcmp(s, qs_sim_methods[i])) return i;
    qs_ais_method m;
    if (qs_ais_method_parse(s, &m) == 0)
        for (int i = 1; i < QS_SM_COUNT; i++) if (kCorr[i] == m) return i;
    if (!strcmp(s, "ais_fixed")) return QS_SM_AIS_FIXED;
    return -1;
}

double qs_grpo_mean_range(const qs_grpo_cstep *s, int a, int b, size_t off)
{
    double t = 0;
    int n = 0;
    for (int i = a; i < b; i++) {
        double v = *(const double *)((const char *)&s[i] + off);
        if (isfinite(v)) { t += v; n++; }
    }
    return n ? t / n : NAN;
}

/* ---- running ---------------------------------------------------------------------------------- */

typedef struct logbuf { qs_rl_row *rows; size_t n, cap; int log_every, steps; } logbuf;

static int log_step(void *p, int step, const qs_ais_batch *b, const int *token, qs_err *e)
{
    logbuf *L = p;
    if (!L->log_every || (step % L->log_every != 0 && step != L->steps - 1)) return 0;
    if (L->n + b->n > L->cap) {
        size_t c = L->cap ? L->cap : 4096;
        while (c < L->n + b->n) c *= 2;
        qs_rl_row *r = realloc(L->rows, c * sizeof *r);
        if (!r) return qs_fail(e, "out of memory");
        L->rows = r;
        L->cap = c;
    }
    for (size_t k = 0; k < b->n; k++) {
        /* sequence ordinal within the step and position: tokens of a sequence are contiguous */
        size_t k0 = k;
        while (k0 > 0 && b->seq[k0 - 1] == b->seq[k]) k0--;
        L->rows[L->n++] = (qs_rl_row){step, b->seq[k], (int64_t)(k - k0), token[k], b->grp[k], b->lp_r[k], b->lp_t[k],
                                      b->adv[k], b->reward[k], b->entropy[k], 1};
    }
    return 0;
}

static json_t *arr(const qs_grpo_step *st, int n, size_t off, int diag_field)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        double v = diag_field >= 0 ? st[i].diag.v[diag_field] : *(const double *)((const char *)&st[i] + off);
        json_array_append_new(a, qs_json_num(v));
    }
    return a;
}

/* the rl_sim result's data: per-step curves of a finished run */
static char *run_data(const qs_grpo_job *j, const qs_grpo_step *s)
{
    int n = j->cfg.steps;
    json_t *d = json_object();
    json_object_set_new(d, "run", json_string(j->run));
    json_object_set_new(d, "method", json_string(qs_sim_methods[j->mi]));
    json_object_set_new(d, "seed", json_integer((json_int_t)j->seed));
    json_object_set_new(d, "reward", arr(s, n, offsetof(qs_grpo_step, reward), -1));
    json_object_set_new(d, "greedy_pi", arr(s, n, offsetof(qs_grpo_step, greedy_pi), -1));
    json_object_set_new(d, "greedy_mu", arr(s, n, offsetof(qs_grpo_step, greedy_mu), -1));
    json_object_set_new(d, "entropy", arr(s, n, offsetof(qs_grpo_step, entropy), -1));
    json_object_set_new(d, "weight_norm", arr(s, n, offsetof(qs_grpo_step, wnorm), -1));
    json_object_set_new(d, "grad_norm", arr(s, n, offsetof(qs_grpo_step, gnorm), -1));
    json_object_set_new(d, "clip_frac", arr(s, n, offsetof(qs_grpo_step, clipfrac), -1));
    json_object_set_new(d, "quant_rel_rmse", arr(s, n, offsetof(qs_grpo_step, qerr), -1));
    static const int diag[] = {QS_AIS_F_kl_k1, QS_AIS_F_kl_k3, QS_AIS_F_mean_abs_dlogp, QS_AIS_F_max_abs_dlogp,
                               QS_AIS_F_ess_tok, QS_AIS_F_ess_seq, QS_AIS_F_cv_w, QS_AIS_F_chi2_tok, QS_AIS_F_chi2_seq,
                               QS_AIS_F_frac_w_gt_c, QS_AIS_F_frac_w_lt_inv_c, QS_AIS_F_ais_R, QS_AIS_F_ais_S,
                               QS_AIS_F_ais_vamp, QS_AIS_F_ais_lambda_raw, QS_AIS_F_ais_lambda};
    for (size_t k = 0; k < sizeof diag / sizeof diag[0]; k++)
        json_object_set_new(d, qs_ais_field_names[diag[k]], arr(s, n, 0, diag[k]));
    int corr = kCorr[j->mi];
    json_object_set_new(d, "weight_mean", arr(s, n, 0, QS_AIS_W0 + QS_AIS_WN * corr));
    json_object_set_new(d, "weight_frac_zero", arr(s, n, 0, QS_AIS_W0 + QS_AIS_WN * corr + 4));
    char *data = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(d);
    return data;
}

static int run_one(qs_grpo_job *j, int store, int log_every, qs_err *e)
{
    logbuf L = {NULL, 0, 0, store ? log_every : 0, j->cfg.steps};
    qs_grpo_step *steps = calloc((size_t)j->cfg.steps, sizeof *steps);
    j->cs = calloc((size_t)j->cfg.steps, sizeof *j->cs);
    int rc = steps && j->cs ? qs_grpo_run(&j->cfg, steps, store ? log_step : NULL, &L, e) : qs_fail(e, "out of memory");
    for (int i = 0; !rc && i < j->cfg.steps; i++) {
        const qs_grpo_step *s = &steps[i];
        j->cs[i] = (qs_grpo_cstep){s->reward, s->greedy_pi, s->diag.v[QS_AIS_F_kl_k3], s->diag.v[QS_AIS_F_ess_seq],
                                   s->diag.v[QS_AIS_F_ais_lambda]};
    }
    if (!rc && store && !(j->data = run_data(j, steps))) rc = qs_fail(e, "out of memory");
    free(steps);
    j->rows = L.rows;
    j->nrows = L.n;
    return rc;
}

typedef struct sweep {
    pthread_mutex_t mu;
    qs_grpo_job **jobs;
    int store, log_every, failed;
    qs_err err;
} sweep;

/* One run on the pool; after a failure the runs not yet started are skipped. */
static void run_task(void *arg, size_t i, int slot)
{
    (void)slot;
    sweep *P = arg;
    pthread_mutex_lock(&P->mu);
    int stop = P->failed;
    pthread_mutex_unlock(&P->mu);
    if (stop) return;
    qs_grpo_job *j = P->jobs[i];
    qs_err e = {{0}};
    int rc = run_one(j, P->store, P->log_every, &e);
    pthread_mutex_lock(&P->mu);
    if (rc && !P->failed) {
        P->failed = 1;
        P->err = e;
        qs_err_prefix(&P->err, j->run);
    }
    pthread_mutex_unlock(&P->mu);
}

static int run_pool(qs_grpo_job **jobs, size_t n, int threads, int store, int log_every, qs_err *e)
{
    if (!n) return 0;
    sweep P;
    memset(&P, 0, sizeof P);
    pthread_mutex_init(&P.mu, NULL);
    P.jobs = jobs;
    P.store = store;
    P.log_every = log_every;
    qs_pool_for(threads < 1 ? 1 : threads > 16 ? 16 : threads, n, run_task, &P);
    pthread_mutex_destroy(&P.mu);
    if (P.failed) *e = P.err;
    return P.failed ? -1 : 0;
}

int qs_grpo_jobs_run(qs_grpo_job **jobs, size_t n, int threads, int store, int log_every, qs_err *e)
{
    qs_grpo_job **first = malloc((n ? n : 1) * sizeof *first), **then = malloc((n ? n : 1) * sizeof *then);
    if (!first || !then) { free(first); free(then); return qs_fail(e, "out of memory"); }
    size_t n1 = 0, n2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i]->mi == QS_SM_AIS_FIXED) then[n2++] = jobs[i];
        else first[n1++] = jobs[i];
    }
    int rc = run_pool(first, n1, threads, store, log_every, e);
    for (size_t i = 0; !rc && i < n2; i++) {
        /* lambda of the matching ais_r run, averaged over its steps */
        size_t k = 0;
        while (k < n1 && !(first[k]->mi == QS_SM_AIS && first[k]->fi == then[i]->fi && first[k]->seed == then[i]->seed)) k++;
        if (k == n1) rc = qs_fail(e, "%s: no ais_r run to take lambda from", then[i]->run);
        else then[i]->cfg.ais.lambda_fixed = qs_grpo_mean_range(first[k]->cs, 0, first[k]->cfg.steps, offsetof(qs_grpo_cstep, lambda));
    }
    if (!rc) rc = run_pool(then, n2, threads, store, log_every, e);
    free(first);
    free(then);
    return rc;
}

void qs_grpo_job_drop_log(qs_grpo_job *j)
{
    free(j->data);
    free(j->rows);
    j->data = NULL;
    j->rows = NULL;
    j->nrows = 0;
}

void qs_grpo_job_free(qs_grpo_job *j)
{
    qs_grpo_job_drop_log(j);
    free(j->cs);
    j->cs = NULL;
}

/* ---- bytes ------------------------------------------------------------------------------------ */

/* per job: {steps, data length, rows, the lambda it held fixed} then cs[steps], the data and the rows */
typedef struct job_hdr { int64_t steps, data_len, nrows; double lambda_fixed; } job_hdr;

int qs_grpo_jobs_pack(qs_grpo_job *const *jobs, size_t n, uint8_t **b, size_t *len, qs_err *e)
{
    size_t tot = 0;
    for (size_t i = 0; i < n; i++)
        tot += sizeof(job_hdr) + (size_t)jobs[i]->cfg.steps * sizeof(qs_grpo_cstep) + (jobs[i]->data ? strlen(jobs[i]->data) : 0) +
               jobs[i]->nrows * sizeof(qs_rl_row);
    uint8_t *p = malloc(tot ? tot : 1);
    if (!p) return qs_fail(e, "out of memory");
    *b = p;
    *len = tot;
    for (size_t i = 0; i < n; i++) {
        const qs_grpo_job *j = jobs[i];
        job_hdr h = {j->cfg.steps, j->data ? (int64_t)strlen(j->data) : -1, (int64_t)j->nrows, j->cfg.ais.lambda_fixed};
        memcpy(p, &h, sizeof h);
        p += sizeof h;
        memcpy(p, j->cs, (size_t)h.steps * sizeof(qs_grpo_cstep));
        p += (size_t)h.steps * sizeof(qs_grpo_cstep);
        if (h.data_len > 0) memcpy(p, j->data, (size_t)h.data_len);
        if (h.data_len > 0) p += h.data_len;
        if (h.nrows) memcpy(p, j->rows, j->nrows * sizeof(qs_rl_row));
        p += j->nrows * sizeof(qs_rl_row);
    }
    return 0;
}

int qs_grpo_jobs_unpack(qs_grpo_job **jobs, size_t n, const uint8_t *b, size_t len, qs_err *e)
{
    const uint8_t *p = b, *end = b + len;
    for (size_t i = 0; i < n; i++) {
        qs_grpo_job *j = jobs[i];
        qs_grpo_job_free(j);
        job_hdr h;
        if ((size_t)(end - p) < sizeof h) return qs_fail(e, "%s: truncated result", j->run);
        memcpy(&h, p, sizeof h);
        p += sizeof h;
        if (h.steps != j->cfg.steps || h.nrows < 0 || h.data_len < -1 ||
            (size_t)(end - p) < (size_t)h.steps * sizeof(qs_grpo_cstep) + (size_t)(h.data_len > 0 ? h.data_len : 0) +
                                    (size_t)h.nrows * sizeof(qs_rl_row))
            return qs_fail(e, "%s: result does not match its settings", j->run);
        j->cs = malloc((size_t)h.steps * sizeof *j->cs);
        j->data = h.data_len >= 0 ? malloc((size_t)h.data_len + 1) : NULL;
        j->rows = h.nrows ? malloc((size_t)h.nrows * sizeof *j->rows) : NULL;
        if (!j->cs || (h.data_len >= 0 && !j->data) || (h.nrows && !j->rows)) { qs_grpo_job_free(j); return qs_fail(e, "out of memory"); }
        j->cfg.ais.lambda_fixed = h.lambda_fixed;   /* set where the run ran (ais_r_fixed) */
        memcpy(j->cs, p, (size_t)h.steps * sizeof *j->cs);
        p += (size_t)h.steps * sizeof *j->cs;
        if (j->data) {
            memcpy(j->data, p, (size_t)h.data_len);
            j->data[h.data_len] = 0;
            p += h.data_len;
        }
        j->nrows = (size_t)h.nrows;
        if (h.nrows) memcpy(j->rows, p, j->nrows * sizeof *j->rows);
        p += j->nrows * sizeof *j->rows;
    }
    return p == end ? 0 : qs_fail(e, "sim grpo: %zu unexpected bytes after %zu runs", (size_t)(end - p), n);
}

/* ---- storing ---------------------------------------------------------------------------------- */

int qs_grpo_job_store(qs_db *db, const qs_grpo_job *j, const char *meta, int replace, qs_err *e)
{
    if (!j->data) return qs_fail(e, "%s: no result to store", j->run);
    XXH128_hash_t h = XXH3_128bits(meta, strlen(meta));
    char hex[33];
    snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    int64_t id;
    if (qs_rl_run_create(db, j->run, "qscope sim grpo", "sim:grpo", meta, replace, &id, e)) return -1;
    qs_rl_writer *w = qs_rl_writer_open(db, id, e);
    if (!w) return -1;
    int rc = j->nrows ? qs_rl_writer_rows(w, j->rows, j->nrows, e) : 0;
    qs_rl_writer_close(w);
    if (rc) return -1;
    /* key: hash of the settings (the input); options: the settings plus the run name, so two runs of
    ** the same settings under different names keep their own rows */
    json_t *oj = json_loads(meta, 0, NULL);
    if (oj) json_object_set_new(oj, "run", json_string(j->run));
    char *opts = oj ? json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(oj);
    rc = opts ? qs_result_put(db, hex, "rl_sim", j->fi >= 0 ? j->cfg.fmt.f->name : "exact", opts, j->data, NULL, e)
              : qs_fail(e, "out of memory");
    free(opts);
    return rc;
}

/* ---- summary ---------------------------------------------------------------------------------- */

static double t975(int df)
{
    static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                               2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060,
                               2.056, 2.052, 2.048, 2.045, 2.042};
    return df < 1 ? NAN : df <= 30 ? t[df] : 1.96;
}

typedef struct agg { double v[64]; int n; } agg;
static void agg_add(agg *a, double x) { if (a->n < 64) a->v[a->n++] = x; }
static double agg_mean(const agg *a) { double s = 0; for (int i = 0; i < a->n; i++) s += a->v[i]; return a->n ? s / a->n : NAN; }
static double agg_ci(const agg *a)
{
    if (a->n < 2) return NAN;
    double m = agg_mean(a), ss = 0;
    for (int i = 0; i < a->n; i++) ss += (a->v[i] - m) * (a->v[i] - m);
    return t975(a->n - 1) * sqrt(ss / (a->n - 1)) / sqrt((double)a->n);
}

/* collapse: the mean reward of the last 10 % of steps is below half the best 10-step moving average */
static int collapsed(const qs_grpo_cstep *s, int n)
{
    int w = n < 10 ? n : 10;
    double best = -INFINITY;
    for (int i = 0; i + w <= n; i++) best = fmax(best, qs_grpo_mean_range(s, i, i + w, offsetof(qs_grpo_cstep, reward)));
    int tail = n / 10 > 0 ? n / 10 : 1;
    return qs_grpo_mean_range(s, n - tail, n, offsetof(qs_grpo_cstep, reward)) < 0.5 * best && best > 0;
}

void qs_grpo_cell_summary(const qs_grpo_job *const *jobs, int n, int S, qs_grpo_cell *c)
{
    const int early = S * 15 / 100 > 0 ? S * 15 / 100 : 1, tail = S / 10 > 0 ? S / 10 : 1;
    agg fin = {{0}, 0}, ear = {{0}, 0}, auc = {{0}, 0}, gre = {{0}, 0}, col = {{0}, 0}, k3e = {{0}, 0}, k3l = {{0}, 0},
        esl = {{0}, 0}, lme = {{0}, 0}, lml = {{0}, 0};
    for (int k = 0; k < n; k++) {
        const qs_grpo_cstep *s = jobs[k]->cs;
        agg_add(&fin, qs_grpo_mean_range(s, S - tail, S, offsetof(qs_grpo_cstep, reward)));
        agg_add(&ear, qs_grpo_mean_range(s, 0, early, offsetof(qs_grpo_cstep, reward)));
        agg_add(&auc, qs_grpo_mean_range(s, 0, S, offsetof(qs_grpo_cstep, reward)));
        agg_add(&gre, qs_grpo_mean_range(s, S - tail, S, offsetof(qs_grpo_cstep, greedy_pi)));
        agg_add(&col, collapsed(s, S));
        agg_add(&k3e, qs_grpo_mean_range(s, 0, early, offsetof(qs_grpo_cstep, k3)));
        agg_add(&k3l, qs_grpo_mean_range(s, S - tail, S, offsetof(qs_grpo_cstep, k3)));
        agg_add(&esl, qs_grpo_mean_range(s, S - tail, S, offsetof(qs_grpo_cstep, ess_seq)));
        agg_add(&lme, qs_grpo_mean_range(s, 0, early, offsetof(qs_grpo_cstep, lambda)));
        agg_add(&lml, qs_grpo_mean_range(s, S - tail, S, offsetof(qs_grpo_cstep, lambda)));
    }
    *c = (qs_grpo_cell){fin.n, agg_mean(&fin), agg_ci(&fin), agg_mean(&ear), agg_ci(&ear), agg_mean(&auc), agg_mean(&gre),
                        agg_mean(&col), agg_mean(&k3e), agg_mean(&k3l), agg_mean(&esl), agg_mean(&lme), agg_mean(&lml)};
}
