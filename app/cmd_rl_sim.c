/*
** `qscope sim grpo`: the CPU GRPO experiment of spec ais-rl.md §5 over formats x methods x seeds,
** on both cores, every run stored (mmlog tokens of some steps, per-step metrics, reward curves).
*/
#include "cmd_rl.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "quant_opts.h"
#include "../analysis/ais_store.h"
#include "../analysis/results.h"
#include "../datasets/grpo_sim.h"
#include "../kernels/qs_version.h"
#include "../store/json_out.h"
#include "../store/rl_log.h"

/* simulation methods: a correction, plus the exact baseline and the fixed-λ ablation */
enum { SM_EXACT = 0, SM_NONE, SM_TIS, SM_SEQ_TIS, SM_MIS, SM_SEQ_MIS, SM_GEO, SM_AIS, SM_AIS_FIXED, SM_COUNT };
static const char *const kSimMethods[SM_COUNT] = {"exact", "none", "tis", "seq_tis", "icepop", "seq_mis", "geo_rs", "ais_r",
                                                  "ais_r_fixed"};
static const qs_ais_method kCorr[SM_COUNT] = {QS_CORR_NONE, QS_CORR_NONE, QS_CORR_TIS, QS_CORR_SEQ_TIS, QS_CORR_MIS,
                                              QS_CORR_SEQ_MIS, QS_CORR_GEO, QS_CORR_AIS, QS_CORR_AIS};

static int sim_method_parse(const char *s)
{
    for (int i = 0; i < SM_COUNT; i++) if (!strcmp(s, kSimMethods[i])) return i;
    qs_ais_method m;
    if (qs_ais_method_parse(s, &m) == 0)
        for (int i = 1; i < SM_COUNT; i++) if (kCorr[i] == m) return i;
    if (!strcmp(s, "ais_fixed")) return SM_AIS_FIXED;
    return -1;
}

/* what the summary needs of each step (the full records are freed once a run is stored) */
typedef struct cstep { double reward, greedy_pi, k3, ess_seq, lambda; } cstep;

typedef struct job {
    int fi, mi;                /* format index (-1: exact), method */
    uint64_t seed;
    qs_grpo_cfg cfg;
    qs_grpo_step *steps;       /* during the run */
    cstep *cs;                 /* after it */
    char run[256];
    int done;
} job;

typedef struct ctx {
    qs_db *db;
    pthread_mutex_t mu;
    job *jobs;
    size_t njobs, next;
    int failed;
    qs_err err;
    int log_every, store, replace;
    const char *prefix;
    char *cfg_json;            /* shared settings (no seed/method/format) */
    size_t finished;
    int tty;
} ctx;

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

static char *run_metadata(const ctx *C, const job *j)
{
    json_t *m = json_loads(C->cfg_json, 0, NULL);
    if (!m) return NULL;
    json_object_set_new(m, "schema", json_string("mmlog-v1"));
    json_object_set_new(m, "producer", json_string("qscope sim grpo"));
    json_object_set_new(m, "tool_version", json_string(QS_VERSION));
    json_object_set_new(m, "method", json_string(kSimMethods[j->mi]));
    json_object_set_new(m, "seed", json_integer((json_int_t)j->seed));
    if (j->fi >= 0) {
        char *fo = qs_quant_opts_json(&j->cfg.fmt);
        json_object_set_new(m, "rollout_format", json_string(j->cfg.fmt.f->name));
        json_object_set_new(m, "rollout_format_options", fo ? json_loads(fo, 0, NULL) : json_null());
        free(fo);
        json_object_set_new(m, "weight_scaling", json_string(j->cfg.wscale == QS_WSCALE_ROW ? "row" : j->cfg.wscale == QS_WSCALE_TENSOR ? "tensor" : "none"));
    } else {
        json_object_set_new(m, "rollout_format", json_string("exact"));
    }
    if (j->mi == SM_AIS_FIXED) json_object_set_new(m, "lambda_fixed", json_real(j->cfg.ais.lambda_fixed));
    char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(m);
    return s;
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

/* store one finished run: rl_run + logged tokens + an rl_sim result (one transaction) */
static int store_run(ctx *C, job *j, logbuf *L, qs_err *e)
{
    char *meta = run_metadata(C, j);
    if (!meta) return qs_fail(e, "out of memory");
    XXH128_hash_t h = XXH3_128bits(meta, strlen(meta));
    char hex[33];
    snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    int rc = -1;
    int64_t id;
    qs_rl_writer *w = NULL;
    if (qs_db_begin(C->db, e)) { free(meta); return -1; }
    if (qs_rl_run_create(C->db, j->run, "qscope sim grpo", "sim:grpo", meta, C->replace, &id, e)) goto out;
    if (!(w = qs_rl_writer_open(C->db, id, e))) goto out;
    if (L->n && qs_rl_writer_rows(w, L->rows, L->n, e)) goto out;
    {
        int n = j->cfg.steps;
        const qs_grpo_step *s = j->steps;
        json_t *d = json_object();
        json_object_set_new(d, "run", json_string(j->run));
        json_object_set_new(d, "method", json_string(kSimMethods[j->mi]));
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
        /* key: hash of the settings (the input); options: the settings plus the run name, so two runs of
        ** the same settings under different names keep their own rows */
        json_t *oj = json_loads(meta, 0, NULL);
        if (oj) json_object_set_new(oj, "run", json_string(j->run));
        char *opts = oj ? json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(oj);
        int prc = data && opts ? qs_result_put(C->db, hex, "rl_sim", j->fi >= 0 ? j->cfg.fmt.f->name : "exact", opts, data, NULL, e)
                               : qs_fail(e, "out of memory");
        free(opts);
        free(data);
        if (prc) goto out;
    }
    rc = qs_db_exec(C->db, "COMMIT", e);
out:
    qs_rl_writer_close(w);
    if (rc) sqlite3_exec(C->db->h, "ROLLBACK", NULL, NULL, NULL);
    free(meta);
    return rc;
}

static void *worker(void *arg)
{
    ctx *C = arg;
    for (;;) {
        pthread_mutex_lock(&C->mu);
        if (C->failed || C->next >= C->njobs) { pthread_mutex_unlock(&C->mu); break; }
        job *j = &C->jobs[C->next++];
        pthread_mutex_unlock(&C->mu);
        qs_err e = {{0}};
        logbuf L = {NULL, 0, 0, C->store ? C->log_every : 0, j->cfg.steps};
        j->steps = calloc((size_t)j->cfg.steps, sizeof *j->steps);
        j->cs = calloc((size_t)j->cfg.steps, sizeof *j->cs);
        int rc = j->steps && j->cs ? qs_grpo_run(&j->cfg, j->steps, C->store ? log_step : NULL, &L, &e) : qs_fail(&e, "out of memory");
        for (int i = 0; !rc && i < j->cfg.steps; i++) {
            const qs_grpo_step *s = &j->steps[i];
            j->cs[i] = (cstep){s->reward, s->greedy_pi, s->diag.v[QS_AIS_F_kl_k3], s->diag.v[QS_AIS_F_ess_seq],
                               s->diag.v[QS_AIS_F_ais_lambda]};
        }
        pthread_mutex_lock(&C->mu);
        if (!rc && C->store) rc = store_run(C, j, &L, &e);
        free(j->steps);
        j->steps = NULL;
        if (rc && !C->failed) {
            C->failed = 1;
            C->err = e;
            qs_err_prefix(&C->err, j->run);
        }
        j->done = !rc;
        C->finished++;
        if (C->tty) fprintf(stderr, "\r%zu/%zu runs", C->finished, C->njobs);
        pthread_mutex_unlock(&C->mu);
        free(L.rows);
    }
    return NULL;
}

static int run_jobs(ctx *C, job *jobs, size_t n, int threads)
{
    C->jobs = jobs;
    C->njobs = n;
    C->next = 0;
    C->finished = 0;
    pthread_t th[16];
    int nt = 0;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&th[nt], NULL, worker, C) == 0) nt++;
    if (!nt) worker(C);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    if (C->tty) fprintf(stderr, "\n");
    return C->failed ? -1 : 0;
}

/* ---- summary --------------------------------------------------------------------------------- */

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

static double mean_range(const cstep *s, int a, int b, size_t off)
{
    double t = 0;
    int n = 0;
    for (int i = a; i < b; i++) {
        double v = *(const double *)((const char *)&s[i] + off);
        if (isfinite(v)) { t += v; n++; }
    }
    return n ? t / n : NAN;
}

/* collapse: the mean reward of the last 10 % of steps is below half the best 10-step moving average */
static int collapsed(const cstep *s, int n)
{
    int w = n < 10 ? n : 10;
    double best = -INFINITY;
    for (int i = 0; i + w <= n; i++) best = fmax(best, mean_range(s, i, i + w, offsetof(cstep, reward)));
    int tail = n / 10 > 0 ? n / 10 : 1;
    return mean_range(s, n - tail, n, offsetof(cstep, reward)) < 0.5 * best && best > 0;
}

int qs_cmd_sim(qs_cli *cli, int argc, char **argv)
{
    enum { O_FORMATS = 0x2200, O_METHODS, O_SEEDS, O_SEED0, O_STEPS, O_T, O_P, O_V, O_DIM, O_BATCH, O_GROUP, O_EPOCHS,
           O_LR, O_SGD, O_CLIP, O_INIT, O_FEAT, O_TEMP, O_WSCALE, O_LOGEVERY, O_NOSTORE, O_JSON, O_NAME, O_REPLACE, O_JOBS };
    static const struct option lo[] = {AIS_LONGOPTS, {"formats", required_argument, 0, O_FORMATS},
                                       {"methods", required_argument, 0, O_METHODS}, {"seeds", required_argument, 0, O_SEEDS},
                                       {"seed0", required_argument, 0, O_SEED0}, {"steps", required_argument, 0, O_STEPS},
                                       {"T", required_argument, 0, O_T}, {"prompts", required_argument, 0, O_P},
                                       {"vocab", required_argument, 0, O_V}, {"dim", required_argument, 0, O_DIM},
                                       {"batch", required_argument, 0, O_BATCH}, {"group", required_argument, 0, O_GROUP},
                                       {"epochs", required_argument, 0, O_EPOCHS}, {"lr", required_argument, 0, O_LR},
                                       {"sgd", no_argument, 0, O_SGD}, {"clip", required_argument, 0, O_CLIP},
                                       {"init", required_argument, 0, O_INIT}, {"feat-scale", required_argument, 0, O_FEAT},
                                       {"rollout-temp", required_argument, 0, O_TEMP},
                                       {"wscale", required_argument, 0, O_WSCALE},
                                       {"log-every", required_argument, 0, O_LOGEVERY}, {"no-store", no_argument, 0, O_NOSTORE},
                                       {"json", no_argument, 0, O_JSON}, {"name", required_argument, 0, O_NAME},
                                       {"replace", no_argument, 0, O_REPLACE}, {"jobs", required_argument, 0, O_JOBS},
                                       {0, 0, 0, 0}};
    qs_grpo_cfg base;
    qs_grpo_cfg_default(&base);
    const char *formats = "fp8_e4m3,hif8,mxfp4,nvfp4,hif4", *methods = "exact,none,tis,icepop,seq_mis,geo_rs,ais_r,ais_r_fixed";
    const char *wscale = "auto", *prefix = "sim";
    unsigned long long nseeds = 10, seed0 = 0, u;
    int log_every = 50, store = 1, json = 0, replace = 0, jobs = 2, band = 0, ch;
    double x;
    if (argc < 2 || strcmp(argv[1], "grpo") != 0) return qs_cli_usage("sim", "the only simulation is `sim grpo`");
    argc--;
    argv++;
    optind = 1;
    opterr = 0;
#define U(lo_, hi_, field, what) \
    if (qs_parse_u64(optarg, &u) || (long long)u < (long long)(lo_) || u > (hi_)) return qs_cli_usage("sim", "bad %s '%s'", what, optarg); \
    field = (int)u; break;
#define F(cond, field, what) \
    if (qs_parse_f64(optarg, &x) || !(cond)) return qs_cli_usage("sim", "bad %s '%s'", what, optarg); \
    field = x; break;
    while ((ch = getopt_long(argc, argv, "j:", lo, NULL)) != -1) {
        int k = qs_rl_ais_opt("sim", ch, optarg, &base.ais, &band);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case O_FORMATS: formats = optarg; break;
        case O_METHODS: methods = optarg; break;
        case O_SEEDS: if (qs_parse_u64(optarg, &nseeds) || nseeds < 1 || nseeds > 64) return qs_cli_usage("sim", "--seeds is 1..64"); break;
        case O_SEED0: if (qs_parse_u64(optarg, &seed0)) return qs_cli_usage("sim", "bad --seed0"); break;
        case O_STEPS: U(1, 100000, base.steps, "--steps")
        case O_T: U(1, 256, base.T, "--T")
        case O_P: U(1, 4096, base.P, "--prompts")
        case O_V: U(2, 1024, base.V, "--vocab")
        case O_DIM: U(1, 1024, base.D, "--dim")
        case O_BATCH: U(1, 1024, base.B, "--batch")
        case O_GROUP: U(2, 256, base.G, "--group")
        case O_EPOCHS: U(1, 64, base.epochs, "--epochs")
        case O_LR: F(x > 0 && x < 100, base.lr, "--lr")
        case O_SGD: base.sgd = 1; break;
        case O_CLIP: F(x > 0 && x < 10, base.clip_eps, "--clip")
        case O_INIT: F(x >= 0 && x < 100, base.init_scale, "--init")
        case O_FEAT: F(x > 0 && x < 100, base.feat_scale, "--feat-scale")
        case O_TEMP: F(x > 0 && x < 100, base.rollout_temp, "--rollout-temp")
        case O_WSCALE: wscale = optarg; break;
        case O_LOGEVERY: U(0, 1000000, log_every, "--log-every")
        case O_NOSTORE: store = 0; break;
        case O_JSON: json = 1; break;
        case O_NAME: prefix = optarg; break;
        case O_REPLACE: replace = 1; break;
        case 'j':
        case O_JOBS: U(1, 16, jobs, "--jobs")
        default: return qs_cli_usage("sim", "unknown option '%s'", argv[optind - 1]);
        }
    }
#undef U
#undef F
    if (optind != argc) return qs_cli_usage("sim", "unexpected argument '%s'", argv[optind]);
    if (strcmp(wscale, "auto") && strcmp(wscale, "none") && strcmp(wscale, "tensor") && strcmp(wscale, "row"))
        return qs_cli_usage("sim", "--wscale is auto, none, tensor or row");
    /* formats */
    qs_apply fmts[16], fbase;
    memset(&fbase, 0, sizeof fbase);
    fbase.axis = 1;
    int nf = qs_quant_parse_list("sim", formats, &fbase, fmts, 16);
    if (nf < 0) return QS_EXIT_USAGE;
    char flabels[16][96];
    for (int i = 0; i < nf; i++) qs_quant_label(&fmts[i], NULL, flabels[i], sizeof flabels[i]);
    /* methods */
    int meth[SM_COUNT], nm = 0;
    {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", methods);
        for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            int m = sim_method_parse(t);
            if (m < 0) return qs_cli_usage("sim", "unknown method '%s' (%s, %s, %s, %s, %s, %s, %s, %s, %s)", t, kSimMethods[0],
                                           kSimMethods[1], kSimMethods[2], kSimMethods[3], kSimMethods[4], kSimMethods[5],
                                           kSimMethods[6], kSimMethods[7], kSimMethods[8]);
            for (int i = 0; i < nm; i++) if (meth[i] == m) m = -1;
            if (m >= 0) meth[nm++] = m;
        }
    }
    int want_fixed = 0, want_ais = 0;
    for (int i = 0; i < nm; i++) { want_fixed |= meth[i] == SM_AIS_FIXED; want_ais |= meth[i] == SM_AIS; }
    if (want_fixed && !want_ais) return qs_cli_usage("sim", "ais_r_fixed holds lambda at the mean of the ais_r run: list ais_r too");

    /* shared settings */
    json_t *cj = json_object();
    json_object_set_new(cj, "prompts", json_integer(base.P));
    json_object_set_new(cj, "T", json_integer(base.T));
    json_object_set_new(cj, "vocab", json_integer(base.V));
    json_object_set_new(cj, "dim", json_integer(base.D));
    json_object_set_new(cj, "batch", json_integer(base.B));
    json_object_set_new(cj, "group", json_integer(base.G));
    json_object_set_new(cj, "steps", json_integer(base.steps));
    json_object_set_new(cj, "epochs", json_integer(base.epochs));
    json_object_set_new(cj, "lr", json_real(base.lr));
    json_object_set_new(cj, "optimizer", json_string(base.sgd ? "sgd" : "adam"));
    json_object_set_new(cj, "clip_eps", json_real(base.clip_eps));
    json_object_set_new(cj, "init_scale", json_real(base.init_scale));
    json_object_set_new(cj, "feat_scale", json_real(base.feat_scale));
    json_object_set_new(cj, "rollout_temp", json_real(base.rollout_temp));
    char *aj = qs_ais_opts_json(&base.ais);
    json_object_set_new(cj, "ais", aj ? json_loads(aj, 0, NULL) : json_null());
    free(aj);
    ctx C;
    memset(&C, 0, sizeof C);
    C.cfg_json = json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(cj);
    C.log_every = log_every;
    C.store = store;
    C.replace = replace;
    C.prefix = prefix;
    C.tty = isatty(2) && !json;
    pthread_mutex_init(&C.mu, NULL);

    /* jobs: exact once per seed; every (format, method) per seed; ais_r_fixed after ais_r */
    size_t cap = (size_t)(nf * nm + 1) * nseeds, n1 = 0, n2 = 0;
    job *J1 = calloc(cap, sizeof *J1), *J2 = calloc(cap, sizeof *J2);
    int rc = QS_EXIT_OK;
    if (!J1 || !J2 || !C.cfg_json) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    for (unsigned long long s = 0; s < nseeds; s++)
        for (int mi = 0; mi < nm; mi++)
            for (int fi = meth[mi] == SM_EXACT ? -1 : 0; fi < (meth[mi] == SM_EXACT ? 0 : nf); fi++) {
                job *j = meth[mi] == SM_AIS_FIXED ? &J2[n2++] : &J1[n1++];
                j->fi = fi;
                j->mi = meth[mi];
                j->seed = seed0 + s;
                j->cfg = base;
                j->cfg.seed = seed0 + s;
                j->cfg.method = kCorr[meth[mi]];
                j->cfg.exact = fi < 0;
                if (fi >= 0) {
                    j->cfg.fmt = fmts[fi];
                    int elem = qs_format_is_minifloat_cast(fmts[fi].f);
                    j->cfg.wscale = !strcmp(wscale, "row") ? QS_WSCALE_ROW : !strcmp(wscale, "tensor") ? QS_WSCALE_TENSOR
                                  : !strcmp(wscale, "none") ? QS_WSCALE_NONE : elem ? QS_WSCALE_ROW : QS_WSCALE_NONE;
                }
                int len = snprintf(j->run, sizeof j->run, "%s/grpo/%s/%s/seed%llu", prefix, fi >= 0 ? flabels[fi] : "exact",
                                   kSimMethods[meth[mi]], (unsigned long long)(seed0 + s));
                /* a cut name could give two runs one name: refuse instead */
                if (len < 0 || (size_t)len >= sizeof j->run) {
                    rc = qs_cli_usage("sim grpo", "run name '%.60s...' is too long (%d bytes, at most %zu): shorten --name",
                                      j->run, len, sizeof j->run - 1);
                    goto done;
                }
            }
    if (store && !(C.db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto done; }
    if (!replace && store) {
        /* refuse up front rather than after minutes of work */
        qs_err e = {{0}};
        sqlite3_stmt *st = qs_db_prepare(C.db, "SELECT 1 FROM rl_run WHERE name=?", &e);
        for (size_t i = 0; st && i < n1 + n2; i++) {
            job *j = i < n1 ? &J1[i] : &J2[i - n1];
            sqlite3_reset(st);
            sqlite3_bind_text(st, 1, j->run, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(st) == SQLITE_ROW) {
                sqlite3_finalize(st);
                rc = qs_cli_error(QS_EXIT_ERR, "run '%s' exists already (use --name PREFIX or --replace)", j->run);
                goto done;
            }
        }
        sqlite3_finalize(st);
    }
    if (run_jobs(&C, J1, n1, jobs)) { rc = qs_cli_err(QS_EXIT_ERR, &C.err); goto done; }
    for (size_t i = 0; i < n2; i++) {
        /* λ of the matching ais_r run, averaged over its steps */
        for (size_t k = 0; k < n1; k++)
            if (J1[k].mi == SM_AIS && J1[k].fi == J2[i].fi && J1[k].seed == J2[i].seed)
                J2[i].cfg.ais.lambda_fixed = mean_range(J1[k].cs, 0, base.steps, offsetof(cstep, lambda));
    }
    if (n2 && run_jobs(&C, J2, n2, jobs)) { rc = qs_cli_err(QS_EXIT_ERR, &C.err); goto done; }

    /* summary per format x method over seeds */
    {
        int S = base.steps, early = S * 15 / 100 > 0 ? S * 15 / 100 : 1, tail = S / 10 > 0 ? S / 10 : 1;
        json_t *out = json_array();
        if (!json) {
            printf("%sGRPO simulation: P=%d T=%d V=%d D=%d, %d prompts x %d samples, %d steps, %s lr %g, %d epoch(s), "
                   "%llu seeds; mean over seeds +- 95%% CI (t)%s\n", qs_c_dim(cli), base.P, base.T, base.V, base.D, base.B, base.G,
                   base.steps, base.sgd ? "SGD" : "Adam", base.lr, base.epochs, nseeds, qs_c_off(cli));
            printf("%s%-14s %-12s %15s %15s %8s %8s %8s %9s %9s %9s %8s %8s%s\n", qs_c_head(cli), "FORMAT", "METHOD",
                   "FINAL REWARD", "EARLY REWARD", "AUC", "GREEDY", "COLLAPSE", "K3 EARLY", "K3 LATE", "ESSSEQ LT", "LAM EARLY",
                   "LAM LATE", qs_c_off(cli));
        }
        for (int fi = -1; fi < nf; fi++) {
            json_t *ser = json_array();
            for (int mi = 0; mi < nm; mi++) {
                if ((meth[mi] == SM_EXACT) != (fi < 0)) continue;
                agg fin = {{0}, 0}, ear = {{0}, 0}, auc = {{0}, 0}, gre = {{0}, 0}, col = {{0}, 0}, k3e = {{0}, 0},
                    k3l = {{0}, 0}, esl = {{0}, 0}, lme = {{0}, 0}, lml = {{0}, 0};
                double *curve = calloc((size_t)S, sizeof *curve);
                int ncur = 0;
                for (size_t k = 0; k < n1 + n2; k++) {
                    job *j = k < n1 ? &J1[k] : &J2[k - n1];
                    int jfi = meth[mi] == SM_EXACT ? -1 : fi;
                    if (j->mi != meth[mi] || j->fi != jfi) continue;
                    const cstep *s = j->cs;
                    agg_add(&fin, mean_range(s, S - tail, S, offsetof(cstep, reward)));
                    agg_add(&ear, mean_range(s, 0, early, offsetof(cstep, reward)));
                    agg_add(&auc, mean_range(s, 0, S, offsetof(cstep, reward)));
                    agg_add(&gre, mean_range(s, S - tail, S, offsetof(cstep, greedy_pi)));
                    agg_add(&col, collapsed(s, S));
                    agg_add(&k3e, mean_range(s, 0, early, offsetof(cstep, k3)));
                    agg_add(&k3l, mean_range(s, S - tail, S, offsetof(cstep, k3)));
                    agg_add(&esl, mean_range(s, S - tail, S, offsetof(cstep, ess_seq)));
                    agg_add(&lme, mean_range(s, 0, early, offsetof(cstep, lambda)));
                    agg_add(&lml, mean_range(s, S - tail, S, offsetof(cstep, lambda)));
                    if (curve) for (int i = 0; i < S; i++) curve[i] += s[i].reward;
                    ncur++;
                }
                if (!fin.n) { free(curve); continue; }
                const char *fl = fi >= 0 ? flabels[fi] : "exact";
                int shows_lambda = meth[mi] == SM_AIS || meth[mi] == SM_AIS_FIXED;
                if (json) {
                    json_array_append_new(out, json_pack("{s:s,s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                        "format", fl, "method", kSimMethods[meth[mi]], "seeds", fin.n, "final_reward", agg_mean(&fin),
                        "final_reward_ci95", isnan(agg_ci(&fin)) ? 0.0 : agg_ci(&fin), "early_reward", agg_mean(&ear),
                        "early_reward_ci95", isnan(agg_ci(&ear)) ? 0.0 : agg_ci(&ear), "auc", agg_mean(&auc),
                        "greedy_final", agg_mean(&gre), "collapse_rate", agg_mean(&col), "k3_early", agg_mean(&k3e),
                        "k3_late", agg_mean(&k3l), "ess_seq_late", agg_mean(&esl), "lambda_early", agg_mean(&lme),
                        "lambda_late", agg_mean(&lml)));
                } else {
                    char a[40], b[40];
                    snprintf(a, sizeof a, "%.3f+-%.3f", agg_mean(&fin), fin.n > 1 ? agg_ci(&fin) : 0.0);
                    snprintf(b, sizeof b, "%.3f+-%.3f", agg_mean(&ear), ear.n > 1 ? agg_ci(&ear) : 0.0);
                    printf("%-14s %-12s %15s %15s %8.3f %8.3f %8.2f %9.2e %9.2e %9.4f", fl, kSimMethods[meth[mi]], a, b,
                           agg_mean(&auc), agg_mean(&gre), agg_mean(&col), agg_mean(&k3e), agg_mean(&k3l), agg_mean(&esl));
                    if (shows_lambda) printf(" %8.3f %8.3f\n", agg_mean(&lme), agg_mean(&lml));
                    else printf(" %8s %8s\n", "-", "-");
                }
                if (curve && ncur) {
                    json_t *xs = json_array(), *ys = json_array();
                    for (int i = 0; i < S; i++) { json_array_append_new(xs, json_integer(i)); json_array_append_new(ys, qs_json_num(curve[i] / ncur)); }
                    json_array_append_new(ser, json_pack("{s:s,s:o,s:o}", "name", kSimMethods[meth[mi]], "x", xs, "y", ys));
                }
                free(curve);
            }
            /* reward curves of this format (exact included for comparison) */
            if (fi >= 0) {
                for (int mi = 0; mi < nm; mi++)
                    if (meth[mi] == SM_EXACT) {
                        double *curve = calloc((size_t)S, sizeof *curve);
                        int ncur = 0;
                        for (size_t k = 0; curve && k < n1; k++)
                            if (J1[k].mi == SM_EXACT) { for (int i = 0; i < S; i++) curve[i] += J1[k].cs[i].reward; ncur++; }
                        if (curve && ncur) {
                            json_t *xs = json_array(), *ys = json_array();
                            for (int i = 0; i < S; i++) { json_array_append_new(xs, json_integer(i)); json_array_append_new(ys, qs_json_num(curve[i] / ncur)); }
                            json_array_insert_new(ser, 0, json_pack("{s:s,s:o,s:o}", "name", "exact", "x", xs, "y", ys));
                        }
                        free(curve);
                    }
            }
            if (store && fi >= 0 && json_array_size(ser)) {
                char title[200];
                snprintf(title, sizeof title, "GRPO simulation, rollout %s: mean reward over %llu seeds", flabels[fi], nseeds);
                json_t *d = json_pack("{s:s,s:s,s:s,s:s,s:O}", "title", title, "xlabel", "step", "ylabel", "mean reward", "yscale",
                                      "linear", "series", ser);
                json_t *op = json_loads(C.cfg_json, 0, NULL);
                json_object_set_new(op, "seeds", json_integer((json_int_t)nseeds));
                json_object_set_new(op, "seed0", json_integer((json_int_t)seed0));
                json_object_set_new(op, "name", json_string(prefix));
                char *ds = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(17));
                char *os = json_dumps(op, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
                XXH128_hash_t h = XXH3_128bits(os, strlen(os));
                char hex[33];
                snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
                qs_err e = {{0}};
                if (qs_result_put(C.db, hex, "trajectory", flabels[fi], os, ds, NULL, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
                free(ds);
                free(os);
                json_decref(op);
                json_decref(d);
            }
            json_decref(ser);
        }
        if (json) {
            json_t *top = json_pack("{s:s,s:o,s:o}", "simulation", "grpo", "settings", json_loads(C.cfg_json, 0, NULL), "results", out);
            char *s = json_dumps(top, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
            if (s) puts(s);
            free(s);
            json_decref(top);
        } else {
            json_decref(out);
            printf("%sFINAL = mean reward of the last 10%% of steps, EARLY = first 15%%, AUC = all steps; GREEDY = greedy reward "
                   "under the trainer, last 10%%; COLLAPSE = share of seeds whose final reward < half the best 10-step "
                   "average; LAM = AIS-R lambda (project reconstruction).%s\n", qs_c_dim(cli), qs_c_off(cli));
            if (store) printf("%sstored: runs %s/grpo/... (qscope runs), results rl_sim, reward trajectories per format%s\n",
                              qs_c_dim(cli), prefix, qs_c_off(cli));
        }
    }
done:
    for (size_t i = 0; J1 && i < n1; i++) { free(J1[i].steps); free(J1[i].cs); }
    for (size_t i = 0; J2 && i < n2; i++) { free(J2[i].steps); free(J2[i].cs); }
    free(J1);
    free(J2);
    free(C.cfg_json);
    pthread_mutex_destroy(&C.mu);
    qs_db_close(C.db);
    return rc;
}
