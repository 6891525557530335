/*
** `qscope sim grpo`: the CPU GRPO experiment of spec ais-rl.md §5 over formats x methods x seeds,
** on both cores, every run stored (mmlog tokens of some steps, per-step metrics, reward curves).
*/
#include "cmd_rl.h"

#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "quant_opts.h"
#include "../../analysis/ais_store.h"
#include "../../analysis/results.h"
#include "../../analysis/grpo_sweep.h"
#include "par.h"
#include "../../store/q_rl.h"
#include "../../kernels/qs_version.h"
#include "../../store/json_out.h"
#include "../../store/rl_log.h"

typedef struct ctx {
    qs_db *db;
    qs_grpo_job *jobs;         /* every run: the first pass's, then the ais_r_fixed ones */
    size_t njobs;
    size_t *unit_job, *unit_start;   /* unit u holds jobs unit_job[unit_start[u] .. unit_start[u + 1]) */
    int log_every, store, replace, threads;
    char *cfg_json;            /* shared settings (no seed/method/format) */
} ctx;

static char *run_metadata(const ctx *C, const qs_grpo_job *j)
{
    json_t *m = json_loads(C->cfg_json, 0, NULL);
    if (!m) return NULL;
    json_object_set_new(m, "schema", json_string("mmlog-v1"));
    json_object_set_new(m, "producer", json_string("qscope sim grpo"));
    json_object_set_new(m, "tool_version", json_string(QS_VERSION));
    json_object_set_new(m, "method", json_string(qs_sim_methods[j->mi]));
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
    if (j->mi == QS_SM_AIS_FIXED) json_object_set_new(m, "lambda_fixed", json_real(j->cfg.ais.lambda_fixed));
    char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(m);
    return s;
}

/* the jobs of unit u (pointers into C->jobs, in job order) */
static size_t unit_jobs(const ctx *C, size_t u, qs_grpo_job **out)
{
    size_t n = 0;
    for (size_t k = C->unit_start[u]; k < C->unit_start[u + 1]; k++) out[n++] = &C->jobs[C->unit_job[k]];
    return n;
}

/* a unit: the runs of one seed and one rollout format (or the exact run), on C->threads threads */
static int unit_fn(size_t u, void *p, uint8_t **out, size_t *len, qs_err *e)
{
    ctx *C = p;
    qs_grpo_job *J[QS_SM_COUNT];
    size_t n = unit_jobs(C, u, J);
    int rc = qs_grpo_jobs_run(J, n, C->threads, C->store, C->log_every, e);
    if (!rc) rc = qs_grpo_jobs_pack(J, n, out, len, e);
    for (size_t i = 0; i < n; i++) qs_grpo_job_free(J[i]);
    return rc;
}

/* rank 0: a unit's runs back, stored in one transaction */
static int collect_fn(size_t u, const uint8_t *b, size_t len, void *p, qs_err *e)
{
    ctx *C = p;
    qs_grpo_job *J[QS_SM_COUNT];
    size_t n = unit_jobs(C, u, J);
    int rc = qs_grpo_jobs_unpack(J, n, b, len, e);
    if (!rc && C->store) {
        rc = qs_db_begin(C->db, e);
        for (size_t i = 0; !rc && i < n; i++) {
            char *meta = run_metadata(C, J[i]);
            rc = meta ? qs_grpo_job_store(C->db, J[i], meta, C->replace, e) : qs_fail(e, "out of memory");
            if (rc) qs_err_prefix(e, J[i]->run);
            free(meta);
        }
        if (!rc) rc = qs_db_commit(C->db, e);
        if (rc) qs_db_rollback(C->db);
    }
    for (size_t i = 0; i < n; i++) qs_grpo_job_drop_log(J[i]);
    return rc;
}

/* What `sim grpo` was asked: the settings, the rollout formats and the correction methods. */
typedef struct sim_args {
    qs_grpo_cfg base;
    const char *formats, *methods, *wscale, *prefix;
    unsigned long long nseeds, seed0;
    int log_every, store, json, replace, jobs;
    qs_apply fmts[16];
    char flabels[16][96];
    int nf, meth[QS_SM_COUNT], nm;
} sim_args;

/* The options into A; 0, or the usage error's exit status (message printed). */
static int parse_opts(int argc, char **argv, sim_args *A)
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
    unsigned long long u;
    int band = 0, ch;
    double x;
    optind = 1;
    opterr = 0;
#define U(lo_, hi_, field, what) \
    if (qs_parse_u64(optarg, &u) || (long long)u < (long long)(lo_) || u > (hi_)) return qs_cli_usage("sim", "bad %s '%s'", what, optarg); \
    field = (int)u; break;
#define F(cond, field, what) \
    if (qs_parse_f64(optarg, &x) || !(cond)) return qs_cli_usage("sim", "bad %s '%s'", what, optarg); \
    field = x; break;
    while ((ch = getopt_long(argc, argv, "j:", lo, NULL)) != -1) {
        int k = qs_rl_ais_opt("sim", ch, optarg, &A->base.ais, &band);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case O_FORMATS: A->formats = optarg; break;
        case O_METHODS: A->methods = optarg; break;
        case O_SEEDS: if (qs_parse_u64(optarg, &A->nseeds) || A->nseeds < 1 || A->nseeds > 64) return qs_cli_usage("sim", "--seeds is 1..64"); break;
        case O_SEED0: if (qs_parse_u64(optarg, &A->seed0)) return qs_cli_usage("sim", "bad --seed0"); break;
        case O_STEPS: U(1, 100000, A->base.steps, "--steps")
        case O_T: U(1, 256, A->base.T, "--T")
        case O_P: U(1, 4096, A->base.P, "--prompts")
        case O_V: U(2, 1024, A->base.V, "--vocab")
        case O_DIM: U(1, 1024, A->base.D, "--dim")
        case O_BATCH: U(1, 1024, A->base.B, "--batch")
        case O_GROUP: U(2, 256, A->base.G, "--group")
        case O_EPOCHS: U(1, 64, A->base.epochs, "--epochs")
        case O_LR: F(x > 0 && x < 100, A->base.lr, "--lr")
        case O_SGD: A->base.sgd = 1; break;
        case O_CLIP: F(x > 0 && x < 10, A->base.clip_eps, "--clip")
        case O_INIT: F(x >= 0 && x < 100, A->base.init_scale, "--init")
        case O_FEAT: F(x > 0 && x < 100, A->base.feat_scale, "--feat-scale")
        case O_TEMP: F(x > 0 && x < 100, A->base.rollout_temp, "--rollout-temp")
        case O_WSCALE: A->wscale = optarg; break;
        case O_LOGEVERY: U(0, 1000000, A->log_every, "--log-every")
        case O_NOSTORE: A->store = 0; break;
        case O_JSON: A->json = 1; break;
        case O_NAME: A->prefix = optarg; break;
        case O_REPLACE: A->replace = 1; break;
        case 'j':
        case O_JOBS: U(1, 16, A->jobs, "--jobs")
        default: return qs_cli_usage("sim", "unknown option '%s'", argv[optind - 1]);
        }
    }
#undef U
#undef F
    if (optind != argc) return qs_cli_usage("sim", "unexpected argument '%s'", argv[optind]);
    if (strcmp(A->wscale, "auto") && strcmp(A->wscale, "none") && strcmp(A->wscale, "tensor") && strcmp(A->wscale, "row"))
        return qs_cli_usage("sim", "--wscale is auto, none, tensor or row");
    return 0;
}

/* The --formats and --methods lists; 0, or the usage error's exit status (message printed). */
static int parse_lists(sim_args *A)
{
    qs_apply fbase;
    memset(&fbase, 0, sizeof fbase);
    fbase.axis = 1;
    A->nf = qs_quant_parse_list("sim", A->formats, &fbase, A->fmts, 16);
    if (A->nf < 0) return QS_EXIT_USAGE;
    for (int i = 0; i < A->nf; i++) qs_quant_label(&A->fmts[i], NULL, A->flabels[i], sizeof A->flabels[i]);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", A->methods);
    for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        int m = qs_sim_method_parse(t);
        if (m < 0) return qs_cli_usage("sim", "unknown method '%s' (%s, %s, %s, %s, %s, %s, %s, %s, %s)", t, qs_sim_methods[0],
                                       qs_sim_methods[1], qs_sim_methods[2], qs_sim_methods[3], qs_sim_methods[4],
                                       qs_sim_methods[5], qs_sim_methods[6], qs_sim_methods[7], qs_sim_methods[8]);
        for (int i = 0; i < A->nm; i++) if (A->meth[i] == m) m = -1;
        if (m >= 0) A->meth[A->nm++] = m;
    }
    int want_fixed = 0, want_ais = 0;
    for (int i = 0; i < A->nm; i++) { want_fixed |= A->meth[i] == QS_SM_AIS_FIXED; want_ais |= A->meth[i] == QS_SM_AIS; }
    if (want_fixed && !want_ais) return qs_cli_usage("sim", "ais_r_fixed holds lambda at the mean of the ais_r run: list ais_r too");
    return 0;
}

/* The settings every run shares (no seed, method or format), as sorted compact JSON. */
static char *settings_json(const qs_grpo_cfg *base)
{
    json_t *cj = json_object();
    json_object_set_new(cj, "prompts", json_integer(base->P));
    json_object_set_new(cj, "T", json_integer(base->T));
    json_object_set_new(cj, "vocab", json_integer(base->V));
    json_object_set_new(cj, "dim", json_integer(base->D));
    json_object_set_new(cj, "batch", json_integer(base->B));
    json_object_set_new(cj, "group", json_integer(base->G));
    json_object_set_new(cj, "steps", json_integer(base->steps));
    json_object_set_new(cj, "epochs", json_integer(base->epochs));
    json_object_set_new(cj, "lr", json_real(base->lr));
    json_object_set_new(cj, "optimizer", json_string(base->sgd ? "sgd" : "adam"));
    json_object_set_new(cj, "clip_eps", json_real(base->clip_eps));
    json_object_set_new(cj, "init_scale", json_real(base->init_scale));
    json_object_set_new(cj, "feat_scale", json_real(base->feat_scale));
    json_object_set_new(cj, "rollout_temp", json_real(base->rollout_temp));
    char *aj = qs_ais_opts_json(&base->ais);
    json_object_set_new(cj, "ais", aj ? json_loads(aj, 0, NULL) : json_null());
    free(aj);
    char *s = json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(cj);
    return s;
}

/* One job's settings: the method, the seed and the rollout format (fi < 0: the exact run); its
** run name.  0, or the usage error's exit status when the name would not fit. */
static int job_init(qs_grpo_job *j, const sim_args *A, int mi, int fi, unsigned long long s)
{
    j->fi = fi;
    j->mi = A->meth[mi];
    j->seed = A->seed0 + s;
    j->cfg = A->base;
    j->cfg.seed = A->seed0 + s;
    j->cfg.method = qs_sim_method_corr(A->meth[mi]);
    j->cfg.exact = fi < 0;
    if (fi >= 0) {
        const char *ws = A->wscale;
        j->cfg.fmt = A->fmts[fi];
        int elem = qs_format_is_minifloat_cast(A->fmts[fi].f);
        j->cfg.wscale = !strcmp(ws, "row") ? QS_WSCALE_ROW : !strcmp(ws, "tensor") ? QS_WSCALE_TENSOR
                      : !strcmp(ws, "none") ? QS_WSCALE_NONE : elem ? QS_WSCALE_ROW : QS_WSCALE_NONE;
    }
    int len = snprintf(j->run, sizeof j->run, "%s/grpo/%s/%s/seed%llu", A->prefix, fi >= 0 ? A->flabels[fi] : "exact",
                       qs_sim_methods[A->meth[mi]], (unsigned long long)(A->seed0 + s));
    /* a cut name could give two runs one name: refuse instead */
    if (len < 0 || (size_t)len >= sizeof j->run)
        return qs_cli_usage("sim grpo", "run name '%.60s...' is too long (%d bytes, at most %zu): shorten --name", j->run,
                            len, sizeof j->run - 1);
    return 0;
}

/* Every run into C->jobs (exact once per seed; every (format, method) per seed; the ais_r_fixed
** ones last, after their ais_r) and the units of work with their cost: per seed, the exact run,
** then each rollout format's runs.  0, or an exit status (message printed). */
static int make_jobs(ctx *C, const sim_args *A, double **cost, size_t *nunit)
{
    size_t cap = (size_t)(A->nf * A->nm + 1) * A->nseeds, n1 = 0, n2 = 0;
    qs_grpo_job *J1 = calloc(cap, sizeof *J1), *J2 = calloc(cap, sizeof *J2);
    int rc = QS_EXIT_OK;
    if (!J1 || !J2) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    for (unsigned long long s = 0; s < A->nseeds && !rc; s++)
        for (int mi = 0; mi < A->nm && !rc; mi++) {
            int exact = A->meth[mi] == QS_SM_EXACT;
            for (int fi = exact ? -1 : 0; fi < (exact ? 0 : A->nf) && !rc; fi++)
                rc = job_init(A->meth[mi] == QS_SM_AIS_FIXED ? &J2[n2++] : &J1[n1++], A, mi, fi, s);
        }
    if (rc) goto done;
    C->njobs = n1 + n2;
    C->jobs = calloc(C->njobs, sizeof *C->jobs);
    C->unit_job = calloc(C->njobs, sizeof *C->unit_job);
    C->unit_start = calloc((size_t)(A->nf + 1) * A->nseeds + 1, sizeof *C->unit_start);
    *cost = calloc((size_t)(A->nf + 1) * A->nseeds, sizeof **cost);
    if (!C->jobs || !C->unit_job || !C->unit_start || !*cost) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    memcpy(C->jobs, J1, n1 * sizeof *J1);
    memcpy(C->jobs + n1, J2, n2 * sizeof *J2);
    *nunit = 0;
    for (unsigned long long s = 0, k = 0; s < A->nseeds; s++)
        for (int fi = -1; fi < A->nf; fi++) {
            size_t k0 = k;
            for (size_t i = 0; i < C->njobs; i++)
                if (C->jobs[i].seed == A->seed0 + s && C->jobs[i].fi == fi) C->unit_job[k++] = i;
            if (k == k0) continue;
            (*cost)[*nunit] = (double)(k - k0) * A->base.steps;
            C->unit_start[++*nunit] = k;
        }
done:
    free(J1);
    free(J2);
    return rc;
}

/* The mean reward curve of the runs of method mi and format fi, as a plot series named name;
** NULL when there are none. */
static json_t *mean_curve(const ctx *C, int mi, int fi, int S, const char *name)
{
    double *curve = calloc((size_t)S, sizeof *curve);
    int ncur = 0;
    for (size_t k = 0; curve && k < C->njobs; k++) {
        const qs_grpo_job *j = &C->jobs[k];
        if (j->mi != mi || j->fi != fi) continue;
        for (int i = 0; i < S; i++) curve[i] += j->cs[i].reward;
        ncur++;
    }
    json_t *ser = NULL;
    if (curve && ncur) {
        json_t *xs = json_array(), *ys = json_array();
        for (int i = 0; i < S; i++) { json_array_append_new(xs, json_integer(i)); json_array_append_new(ys, qs_json_num(curve[i] / ncur)); }
        ser = json_pack("{s:s,s:o,s:o}", "name", name, "x", xs, "y", ys);
    }
    free(curve);
    return ser;
}

/* One line (or JSON row) of the summary: method mi under format fi over the seeds; 0 when no
** run has it. */
static int summary_row(const ctx *C, const sim_args *A, int mi, int fi, json_t *out)
{
    int jfi = A->meth[mi] == QS_SM_EXACT ? -1 : fi;
    const qs_grpo_job **cell = calloc(C->njobs, sizeof *cell);
    int ncell = 0;
    for (size_t k = 0; cell && k < C->njobs; k++)
        if (C->jobs[k].mi == A->meth[mi] && C->jobs[k].fi == jfi) cell[ncell++] = &C->jobs[k];
    qs_grpo_cell c;
    qs_grpo_cell_summary(cell, ncell, A->base.steps, &c);
    free(cell);
    if (!c.n) return 0;
    const char *fl = fi >= 0 ? A->flabels[fi] : "exact", *method = qs_sim_methods[A->meth[mi]];
    if (A->json) {
        json_array_append_new(out, json_pack("{s:s,s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
            "format", fl, "method", method, "seeds", c.n, "final_reward", c.final,
            "final_reward_ci95", isnan(c.final_ci) ? 0.0 : c.final_ci, "early_reward", c.early,
            "early_reward_ci95", isnan(c.early_ci) ? 0.0 : c.early_ci, "auc", c.auc,
            "greedy_final", c.greedy, "collapse_rate", c.collapse, "k3_early", c.k3_early,
            "k3_late", c.k3_late, "ess_seq_late", c.ess_late, "lambda_early", c.lam_early,
            "lambda_late", c.lam_late));
        return 1;
    }
    char a[40], b[40];
    snprintf(a, sizeof a, "%.3f+-%.3f", c.final, c.n > 1 ? c.final_ci : 0.0);
    snprintf(b, sizeof b, "%.3f+-%.3f", c.early, c.n > 1 ? c.early_ci : 0.0);
    printf("%-14s %-12s %15s %15s %8.3f %8.3f %8.2f %9.2e %9.2e %9.4f", fl, method, a, b, c.auc, c.greedy, c.collapse,
           c.k3_early, c.k3_late, c.ess_late);
    if (A->meth[mi] == QS_SM_AIS || A->meth[mi] == QS_SM_AIS_FIXED) printf(" %8.3f %8.3f\n", c.lam_early, c.lam_late);
    else printf(" %8s %8s\n", "-", "-");
    return 1;
}

/* Format fi's reward curves (exact first, for comparison) stored as a trajectory result. */
static int store_curves(const ctx *C, const sim_args *A, int fi, json_t *ser)
{
    char title[200];
    snprintf(title, sizeof title, "GRPO simulation, rollout %s: mean reward over %llu seeds", A->flabels[fi], A->nseeds);
    json_t *d = json_pack("{s:s,s:s,s:s,s:s,s:O}", "title", title, "xlabel", "step", "ylabel", "mean reward", "yscale",
                          "linear", "series", ser);
    json_t *op = json_loads(C->cfg_json, 0, NULL);
    json_object_set_new(op, "seeds", json_integer((json_int_t)A->nseeds));
    json_object_set_new(op, "seed0", json_integer((json_int_t)A->seed0));
    json_object_set_new(op, "name", json_string(A->prefix));
    char *ds = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(17));
    char *os = json_dumps(op, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    XXH128_hash_t h = XXH3_128bits(os, strlen(os));
    char hex[33];
    snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    qs_err e = {{0}};
    int rc = qs_result_put(C->db, hex, "trajectory", A->flabels[fi], os, ds, NULL, &e) ? qs_cli_err(QS_EXIT_ERR, &e) : 0;
    free(ds);
    free(os);
    json_decref(op);
    json_decref(d);
    return rc;
}

/* The summary per format x method over seeds (table or JSON), and each format's reward curves
** stored; rank 0 only. */
static int summarize(qs_cli *cli, const ctx *C, const sim_args *A)
{
    const qs_grpo_cfg *b = &A->base;
    int S = b->steps, rc = QS_EXIT_OK;
    json_t *out = json_array();
    if (!A->json) {
        printf("%sGRPO simulation: P=%d T=%d V=%d D=%d, %d prompts x %d samples, %d steps, %s lr %g, %d epoch(s), "
               "%llu seeds; mean over seeds +- 95%% CI (t)%s\n", qs_c_dim(cli), b->P, b->T, b->V, b->D, b->B, b->G,
               b->steps, b->sgd ? "SGD" : "Adam", b->lr, b->epochs, A->nseeds, qs_c_off(cli));
        printf("%s%-14s %-12s %15s %15s %8s %8s %8s %9s %9s %9s %8s %8s%s\n", qs_c_head(cli), "FORMAT", "METHOD",
               "FINAL REWARD", "EARLY REWARD", "AUC", "GREEDY", "COLLAPSE", "K3 EARLY", "K3 LATE", "ESSSEQ LT", "LAM EARLY",
               "LAM LATE", qs_c_off(cli));
    }
    for (int fi = -1; fi < A->nf; fi++) {
        json_t *ser = json_array();
        int have_exact = 0;
        for (int mi = 0; mi < A->nm; mi++) {
            have_exact |= A->meth[mi] == QS_SM_EXACT;
            if ((A->meth[mi] == QS_SM_EXACT) != (fi < 0)) continue;
            if (!summary_row(C, A, mi, fi, out)) continue;
            json_t *c = mean_curve(C, A->meth[mi], A->meth[mi] == QS_SM_EXACT ? -1 : fi, S, qs_sim_methods[A->meth[mi]]);
            if (c) json_array_append_new(ser, c);
        }
        if (fi >= 0 && have_exact) {   /* the exact run's curve first, for comparison */
            json_t *c = mean_curve(C, QS_SM_EXACT, -1, S, "exact");
            if (c) json_array_insert_new(ser, 0, c);
        }
        if (A->store && fi >= 0 && json_array_size(ser) && store_curves(C, A, fi, ser)) rc = QS_EXIT_ERR;
        json_decref(ser);
    }
    if (A->json) {
        json_t *top = json_pack("{s:s,s:o,s:o}", "simulation", "grpo", "settings", json_loads(C->cfg_json, 0, NULL), "results", out);
        char *s = json_dumps(top, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
        if (s) puts(s);
        free(s);
        json_decref(top);
        return rc;
    }
    json_decref(out);
    printf("%sFINAL = mean reward of the last 10%% of steps, EARLY = first 15%%, AUC = all steps; GREEDY = greedy reward "
           "under the trainer, last 10%%; COLLAPSE = share of seeds whose final reward < half the best 10-step "
           "average; LAM = AIS-R lambda (project reconstruction).%s\n", qs_c_dim(cli), qs_c_off(cli));
    if (A->store) printf("%sstored: runs %s/grpo/... (qscope runs), results rl_sim, reward trajectories per format%s\n",
                         qs_c_dim(cli), A->prefix, qs_c_off(cli));
    return rc;
}

static int cmd_sim_grpo(qs_cli *cli, int argc, char **argv)
{
    sim_args A;
    memset(&A, 0, sizeof A);
    qs_grpo_cfg_default(&A.base);
    A.formats = "fp8_e4m3,hif8,mxfp4,nvfp4,hif4";
    A.methods = "exact,none,tis,icepop,seq_mis,geo_rs,ais_r,ais_r_fixed";
    A.wscale = "auto";
    A.prefix = "sim";
    A.nseeds = 10;
    A.log_every = 50;
    A.store = 1;
    A.jobs = 2;
    int rc = parse_opts(argc, argv, &A);
    if (!rc) rc = parse_lists(&A);
    if (rc) return rc;

    ctx C;
    memset(&C, 0, sizeof C);
    C.log_every = A.log_every;
    C.store = A.store;
    C.replace = A.replace;
    C.threads = A.jobs;
    double *cost = NULL;
    size_t nunit = 0;
    if (!(C.cfg_json = settings_json(&A.base))) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    if ((rc = make_jobs(&C, &A, &cost, &nunit))) goto done;
    if (A.store && !(C.db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto done; }
    if (!A.replace && A.store) {
        /* refuse up front rather than after minutes of work */
        qs_err e = {{0}};
        for (size_t i = 0; i < C.njobs; i++) {
            int taken = 0;
            if (qs_run_exists(C.db, C.jobs[i].run, &taken, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
            if (taken) { rc = qs_cli_error(QS_EXIT_ERR, "run '%s' exists already (use --name PREFIX or --replace)", C.jobs[i].run); goto done; }
        }
    }
    qs_err e = {{0}};
    if (qs_par_run(nunit, cost, unit_fn, collect_fn, &C, "sim grpo", &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (qs_par_rank() == 0) rc = summarize(cli, &C, &A);   /* rank 0 summarizes and prints */
done:
    for (size_t i = 0; C.jobs && i < C.njobs; i++) qs_grpo_job_free(&C.jobs[i]);
    free(C.jobs);
    free(C.unit_job);
    free(C.unit_start);
    free(cost);
    free(C.cfg_json);
    qs_db_close(C.db);
    return rc;
}

/* The simulations of `qscope sim` (dispatch and usage errors from here; the help is QS_SIM_HELP). */
const qs_subcommand qs_sim_subcommands[] = {
    {"grpo", "the CPU GRPO experiment: every (format, method) over the seeds, each run stored\n", cmd_sim_grpo, 1,
     "[--formats LIST] [--methods LIST] [--seeds N] [options]", QS_SIM_ABOUT "\n\n" QS_SIM_OPTS},
    {NULL, NULL, NULL, 0, NULL, NULL},
};
