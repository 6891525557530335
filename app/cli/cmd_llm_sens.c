/*
** `qscope llm sensitivity`: per-(layer, site) sensitivity of a model to one format — mean KL to the
** FP32 reference and Delta PPL with only that site of that layer rounded — and a greedy
** mixed-precision plan (which sites to keep in BF16), verified by one evaluation of the combined
** plan (docs/llm.md "llm sensitivity").  Stored as result kinds "llm_sensitivity" and "llm_plan"
** (analysis/results.h) and reused unless --force.
*/
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "quant_opts.h"
#include "llm_par.h"
#include "llm_progress.h"
#include "stop_signal.h"
#include "../../kernels/qs_stop.h"
#include "par.h"
#include "llm_text_run.h"
#include "llm_eval_out.h"
#include "text_table.h"
#include "../../analysis/llm_text.h"
#include "../../analysis/llm_eval_shard.h"
#include "../../analysis/llm_eval_stats.h"
#include "../../analysis/llm_sens.h"
#include "../../analysis/results.h"
#include "../../store/llm_load.h"
#include "llm_sens_cli.h"



static int parse_pos(const char *opt, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || !isfinite(v)) return qs_cli_usage(CMD, "%s wants a number >= 0, not '%s'", opt, s);
    *out = v;
    return 0;
}

static int parse_sites(const char *list, sens_opts *o)
{
    char *dup = strdup(list), *save = NULL;
    if (!dup) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    o->nsite = 0;
    int rc = 0;
    for (char *it = strtok_r(dup, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        int s = qs_sens_site_parse(it);
        if (s < 0) { rc = qs_cli_usage(CMD, "--sites: unknown site '%s' (attn_in, attn_out, ffn_in, ffn_down_in, kv, w)", it); break; }
        for (int i = 0; i < o->nsite; i++)
            if (o->sites[i] == s) { rc = qs_cli_usage(CMD, "--sites: '%s' given twice", it); break; }
        if (rc) break;
        o->sites[o->nsite++] = s;
    }
    free(dup);
    if (!rc && !o->nsite) rc = qs_cli_usage(CMD, "--sites: no site given");
    return rc;
}

static int parse_opts(int argc, char **argv, sens_opts *o)
{
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"text", required_argument, 0, 't'}, {"ctx", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'k'}, {"format", required_argument, 0, 'f'}, {"sites", required_argument, 0, 'S'},
        {"score", required_argument, 0, 's'}, {"kl-target", required_argument, 0, 'K'}, {"bits-budget", required_argument, 0, 'B'},
        {"json", no_argument, 0, 'j'}, {"force", no_argument, 0, 'F'}, {"unscaled-casts", no_argument, 0, 'u'},
        {"csv", optional_argument, 0, 'V'}, {"formats", required_argument, 0, 'M'}, {"bits", required_argument, 0, 'B'},
        {"plan-out", required_argument, 0, 'O'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->scaled = 1;
    o->kl_target = o->bits_budget = -1;
    for (int i = 0; i < QS_SENS_NSITE; i++) o->sites[i] = i;
    o->nsite = QS_SENS_NSITE;
    optind = 1;
    opterr = 0;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 't': o->text = optarg; break;
        case 'f': o->fmt_spec = optarg; break;
        case 'M': o->formats = optarg; break;
        case 'O': o->plan_out = optarg; break;
        case 'c': if ((rc = qs_cli_parse_int(CMD, "--ctx", optarg, 4, 1 << 16, &o->ctx))) return rc; break;
        case 'k': if ((rc = qs_cli_parse_int(CMD, "--chunks", optarg, 1, 1 << 20, &o->chunks))) return rc; break;
        case 'S': if ((rc = parse_sites(optarg, o))) return rc; break;
        case 'K': if ((rc = parse_pos("--kl-target", optarg, &o->kl_target))) return rc; break;
        case 'B': if ((rc = parse_pos("--bits-budget", optarg, &o->bits_budget))) return rc; break;
        case 's': if ((rc = qs_llm_parse_score(CMD, optarg, &o->score_all))) return rc; break;
        case 'j': o->json = 1; break;
        case 'F': o->force = 1; break;
        case 'u': o->scaled = 0; break;
        case 'V': if ((rc = qs_evout_opt(CMD, ch, optarg, argc, argv, &o->out))) return rc; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->json && o->out.csv && !strcmp(o->out.csv, "-"))
        return qs_cli_usage(CMD, "--csv to stdout and --json are exclusive (give --csv FILE)");
    if (!o->model) {
        if (access(QS_LLM_DEFAULT_MODEL, R_OK) == 0) o->model = QS_LLM_DEFAULT_MODEL;
        else return qs_cli_usage(CMD, "--model PATH is required (the default %s is missing: run `make data`)", QS_LLM_DEFAULT_MODEL);
    }
    if (!o->text) {
        if (access(QS_LLM_DEFAULT_TEXT, R_OK) == 0) o->text = QS_LLM_DEFAULT_TEXT;
        else return qs_cli_usage(CMD, "--text FILE is required (the default %s is missing: run `make data`)", QS_LLM_DEFAULT_TEXT);
    }
    if (o->formats || o->plan_out) return qs_sens_formats_opts(o);
    if (!o->fmt_spec) return qs_cli_usage(CMD, "--format F is required (e.g. mxfp4), or --formats F1,F2,... with --bits B");
    if (strchr(o->fmt_spec, ',')) return qs_cli_usage(CMD, "--format: one format");
    if (qs_llm_parse_fmt(CMD, o->fmt_spec, &o->fmt) || qs_llm_parse_fmt(CMD, "bf16", &o->hi)) return QS_EXIT_USAGE;
    int rows = 0;   /* the format reaches an activation or KV-cache site (all but w) */
    for (int i = 0; i < o->nsite; i++) rows |= o->sites[i] != QS_SENS_W;
    if ((rc = qs_llm_fmt_site_check(CMD, "--format ", o->fmt_spec, &o->fmt, rows ? "activations and the KV cache" : NULL)))
        return rc;
    qs_quant_label(&o->fmt, o->fmt_spec, o->label, sizeof o->label);
    return 0;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *matrix(const double *x, int L, int S)
{
    json_t *a = json_array();
    for (int l = 0; l < L; l++) {
        json_t *r = json_array();
        for (int j = 0; j < S; j++) json_array_append_new(r, num(x[l * S + j]));
        json_array_append_new(a, r);
    }
    return a;
}

/* kl_mean [L][S] of a stored result back into a table (the plan is computed from the stored data). */
static int table_from_json(json_t *d, qs_sens_table *t, const sens_opts *o, int L)
{
    memset(t, 0, sizeof *t);
    json_t *kl = json_object_get(d, "kl_mean");
    if (!json_is_array(kl) || (int)json_array_size(kl) != L) return -1;
    t->nlayer = L;
    t->nsite = o->nsite;
    memcpy(t->site, o->sites, sizeof o->sites);
    t->kl = calloc((size_t)L * o->nsite, sizeof(double));
    if (!t->kl) return -1;
    for (int l = 0; l < L; l++) {
        json_t *r = json_array_get(kl, (size_t)l);
        if ((int)json_array_size(r) != o->nsite) return -1;
        for (int j = 0; j < o->nsite; j++) {
            json_t *v = json_array_get(r, (size_t)j);
            t->kl[l * o->nsite + j] = json_is_number(v) ? json_number_value(v) : NAN;
        }
    }
    return 0;
}

static json_t *bits_json(qs_sens_bits b)
{
    return json_pack("{s:o,s:o,s:o}", "weights", num(b.weights), "activations", num(b.activations), "all", num(b.all));
}

static double cell_of(json_t *m, int l, int j)
{
    json_t *v = json_array_get(json_array_get(m, (size_t)l), (size_t)j);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The layer x site table: KL with the largest of each site starred, then dPPL; columns sized by their
** cells, small values with significant digits (llm_eval_stats.h qs_evnum). */
static void print_table(const sens_opts *o, json_t *d, int L)
{
    json_t *kl = json_object_get(d, "kl_mean"), *dp = json_object_get(d, "dppl");
    const int S = o->nsite;
    qs_ttab *tb = qs_ttab_new(2 + 2 * S);
    if (!tb) return;
    qs_ttab_align(tb, 0, 0);
    printf("mean KL (nats) with one site of one layer at %s, all else FP32 (* = the largest of its site); right of |: "
           "dPPL %% of the same variants\n", o->label);
    qs_ttab_row(tb);
    qs_ttab_set(tb, 0, "layer");
    qs_ttab_set(tb, 1 + S, "|");
    for (int j = 0; j < S; j++) {
        qs_ttab_set(tb, 1 + j, "%s ", qs_sens_site_name(o->sites[j]));   /* the star's column */
        qs_ttab_set(tb, 2 + S + j, "%s", qs_sens_site_name(o->sites[j]));
    }
    for (int l = 0; l < L; l++) {
        qs_ttab_row(tb);
        qs_ttab_set(tb, 0, "%d", l);
        qs_ttab_set(tb, 1 + S, "|");
        for (int j = 0; j < S; j++) {
            int top = 1;   /* the largest KL of site j */
            for (int k = 0; k < L; k++) top &= !(cell_of(kl, k, j) > cell_of(kl, l, j)) || k == l;
            for (int k = 0; k < l && top; k++) top = !(cell_of(kl, k, j) == cell_of(kl, l, j));
            char a[40], b[40];
            qs_evnum(cell_of(kl, l, j), 5, 0, a, sizeof a);
            qs_evnum(100 * cell_of(dp, l, j), 2, 1, b, sizeof b);
            qs_ttab_set(tb, 1 + j, "%s%c", a, top && isfinite(cell_of(kl, l, j)) ? '*' : ' ');
            qs_ttab_set(tb, 2 + S + j, "%s%%", b);
        }
    }
    qs_ttab_print(tb, stdout);
    qs_ttab_free(tb);
}

/* an average of bits, or "-" when the plan has no site of that kind (null) */
static void print_bits(char *buf, size_t cap, json_t *v)
{
    if (json_is_number(v)) snprintf(buf, cap, "%.3f", json_number_value(v));
    else snprintf(buf, cap, "-");
}

/* One run of the command: its inputs, the table's cache key and stored data, and what was computed. */
typedef struct sens_run {
    sens_opts *o;
    qs_llm_text_run t;
    qs_db *db;
    json_t *key, *sites, *d;      /* d: the table's stored data, then the answer */
    char *ks, *data;
    qs_sens_table tab;
    int L, S, computed, pcomputed;
    double compute, bits_fmt, bits_hi;
} sens_run;

/* The cache key of the table: text, chunking, format, sites, casts. */
static int table_key(sens_run *r)
{
    const sens_opts *o = r->o;
    char *fj = qs_quant_opts_json(&o->fmt);
    json_t *fo = fj ? json_loads(fj, 0, NULL) : NULL;
    free(fj);
    r->sites = json_array();
    for (int j = 0; j < r->S; j++) json_array_append_new(r->sites, json_string(qs_sens_site_name(o->sites[j])));
    r->key = json_pack("{s:s,s:i,s:i,s:s,s:i,s:o,s:O,s:b}", "text", r->t.thash, "ctx", o->ctx, "chunks", r->t.su.nchunks, "score",
                       o->score_all ? "all" : "half", "bos", r->t.su.bos, "format", fo ? fo : json_string(o->label), "sites",
                       r->sites, "scaled_casts", o->scaled);
    r->ks = r->key ? json_dumps(r->key, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    return r->ks ? 0 : qs_cli_error(QS_EXIT_ERR, "out of memory");
}

/* Progress after every merged chunk (rank 0). */
static int sens_tick(void *ctx, qs_eval_shard *sh, int chunk, qs_err *e)
{
    (void)chunk;
    (void)e;
    const int done = (int)(sh->merged / (size_t)sh->ngroup);
    qs_eval_tick t = {done, sh->su.nchunks, done, sh->su.nchunks};
    qs_llm_progress_tick(ctx, &t);
    return 0;
}

/* Chunks x (layer, site) variants on the ranks; rank 0 makes the table.  Ctrl-C stops it within a
** layer (nothing of the unfinished table is stored). */
static int compute_table(sens_run *r)
{
    qs_err e = {{0}};
    double t0 = qs_now_s();
    qs_sens_variants sv;
    qs_eval_shard sh;
    memset(&sh, 0, sizeof sh);
    qs_llm_progress pg;
    qs_llm_progress_init(&pg, CMD, r->o->ctx, 0);
    int bad = qs_sens_variants_make(&r->t.f.m, &r->o->fmt, r->o->scaled, r->o->sites, r->S, &sv, &e);
    if (!bad) {
        bad = qs_eval_shard_init(&sh, &r->t.f.m, sv.var, NULL, sv.nvar, r->t.ids, (size_t)r->t.ntok, &r->t.su, &e);
        if (!bad && qs_par_rank() == 0) {
            sh.chunk_done = sens_tick;
            sh.done_ctx = &pg;
            sens_tick(&pg, &sh, 0, &e);
        }
        qs_stop_signals_on();
        bad = bad || qs_llm_shard_run(&sh, CMD, &e) || (qs_par_rank() == 0 && qs_sens_table_make(&sv, &sh.out, &r->tab, &e));
        qs_llm_progress_end(&pg);
        qs_eval_shard_free(&sh);
        qs_sens_variants_free(&sv);
    }
    if (bad && qs_stop_requested()) {
        if (qs_par_rank() == 0)
            fprintf(stderr, "qscope: %s: stopped by %s; nothing of the unfinished table was stored\n", CMD, qs_stop_name());
        return qs_stop_status();
    }
    if (bad) return qs_cli_err(QS_EXIT_ERR, &e);
    r->compute = qs_now_s() - t0;
    r->computed = 1;
    return 0;
}

/* The stored data of a computed table: the measurements and the whole greedy ranking (independent of
** any target). */
static json_t *table_data(sens_run *r)
{
    const sens_opts *o = r->o;
    const int L = r->L, S = r->S;
    const qs_llm_model *m = &r->t.f.m;
    json_t *d = json_object();
    json_object_set_new(d, "model", qs_llm_model_json(o->model, &r->t.f));
    json_object_set_new(d, "text", qs_llm_text_json(o->text, r->t.thash, r->t.tlen));
    json_object_set_new(d, "tokens", json_integer(r->t.ntok));
    json_object_set_new(d, "scored_tokens", json_integer((json_int_t)r->tab.n));
    json_object_set_new(d, "ctx", json_integer(o->ctx));
    json_object_set_new(d, "chunks", json_integer(r->t.su.nchunks));
    json_object_set_new(d, "score", json_string(o->score_all ? "all" : "half"));
    json_object_set_new(d, "format", json_string(o->label));
    json_object_set_new(d, "sites", json_incref(r->sites));
    json_object_set_new(d, "layers", json_integer(L));
    json_object_set_new(d, "reference", json_pack("{s:o,s:o}", "ppl", num(r->tab.ref_ppl), "ppl_se", num(r->tab.ref_ppl_se)));
    json_object_set_new(d, "kl_mean", matrix(r->tab.kl, L, S));
    json_object_set_new(d, "kl_se", matrix(r->tab.kl_se, L, S));
    json_object_set_new(d, "dppl", matrix(r->tab.dppl, L, S));
    json_object_set_new(d, "top1_agree", matrix(r->tab.top1, L, S));
    double elems = 0;
    json_t *sp = json_array();
    for (int j = 0; j < S; j++) {
        double n = qs_sens_site_elems(&m->c, o->sites[j]);
        elems += n * L;
        json_array_append_new(sp, json_pack("{s:s,s:s,s:f,s:f}", "site", qs_sens_site_name(o->sites[j]), "unit",
                                            o->sites[j] == QS_SENS_W ? "parameters" : "per_token", "elements", n,
                                            "bits_per_elem", r->bits_fmt));
    }
    json_object_set_new(d, "bits_fp32", json_real(32 * elems));
    json_object_set_new(d, "bits_format", json_real(r->bits_fmt));
    json_object_set_new(d, "bits_bf16", json_real(r->bits_hi));
    json_object_set_new(d, "site_params", sp);
    qs_sens_step *order = calloc((size_t)L * S, sizeof *order);
    if (!order) { json_decref(d); return NULL; }
    double pred0, bits0;
    qs_sens_plan_order(&r->tab, &m->c, r->bits_fmt, r->bits_hi, order, &pred0, &bits0);
    json_t *oa = json_array();
    for (int k = 0; k < L * S; k++)
        json_array_append_new(oa, json_pack("{s:i,s:s,s:o,s:f,s:o,s:o,s:f}", "layer", order[k].layer, "site",
                                            qs_sens_site_name(o->sites[order[k].j]), "kl", num(order[k].kl), "extra_bits",
                                            order[k].extra_bits, "kl_per_bit", num(order[k].kl_per_bit), "predicted_kl",
                                            num(order[k].predicted_kl), "bits_avg", order[k].bits_avg));
    json_object_set_new(d, "plan", json_pack("{s:o,s:o,s:f}", "order", oa, "predicted_kl_format", num(pred0), "bits_avg_format", bits0));
    free(order);
    return d;
}

static int store_table(sens_run *r)
{
    qs_err e = {{0}};
    json_t *d = table_data(r);
    qs_sens_table_free(&r->tab);
    r->data = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (!r->data) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    if (qs_result_put(r->db, r->t.f.hash, "llm_sensitivity", r->o->label, r->ks, r->data, NULL, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    return 0;
}

/* The statistics of the plan's verifying evaluation (rows of analysis/llm_eval_stats.h). */
static const int kMeasured[] = {QS_EVS_KL_MEAN, QS_EVS_KL_SE, QS_EVS_KL_MEDIAN, QS_EVS_KL_P99, QS_EVS_KL_MAX,
                                QS_EVS_PPL, QS_EVS_DPPL, QS_EVS_DPPL_LO, QS_EVS_TOP1};

/* Promote the first k steps of the ranking (promoted only grows) and verify the combined plan. */
static int plan_verify(sens_run *r, const qs_sens_step *order, int k, uint8_t *promoted, qs_eval_summary *sm, qs_err *e)
{
    const sens_opts *o = r->o;
    for (int i = 0; i < k; i++) promoted[order[i].layer * r->S + order[i].j] = 1;
    double t0 = qs_now_s();
    int rc = qs_sens_verify(&r->t.f.m, &o->fmt, &o->hi, o->scaled, &r->tab, promoted, r->t.ids, (size_t)r->t.ntok, &r->t.su, sm, e);
    r->compute += qs_now_s() - t0;
    r->pcomputed = 1;
    return rc;
}

/* The statistics of each refinement round (a subset of kMeasured). */
static const int kRound[] = {QS_EVS_KL_MEAN, QS_EVS_KL_SE, QS_EVS_DPPL, QS_EVS_TOP1};

/* A plan's stored data: the first k steps of the ranking promoted to BF16, verified by one evaluation.
** With a KL target the measured KL decides: a miss adds the next cells of the ranking
** (qs_sens_plan_refine) and verifies again, until the target is met or kmax steps (the bits budget's,
** or all) are promoted; every verification is a round of "refine". */
static json_t *plan_data(sens_run *r, const qs_sens_step *order, int k, double pred0, uint8_t *promoted, qs_err *e)
{
    const sens_opts *o = r->o;
    const int L = r->L, S = r->S, n = L * S;
    const int kmax = o->bits_budget >= 0 ? qs_sens_plan_choose(order, n, pred0, r->bits_fmt, -1, o->bits_budget) : n;
    if (k > kmax) k = kmax;
    json_t *rounds = json_array();
    qs_eval_summary sm;
    int prev_add = 0, met = 1;
    for (;;) {
        double pk = k ? order[k - 1].predicted_kl : pred0;
        if (plan_verify(r, order, k, promoted, &sm, e)) { json_decref(rounds); return NULL; }
        met = o->kl_target < 0 || sm.kl_mean <= o->kl_target;
        json_t *mr = json_object();
        qs_evstats_put_ids(mr, &sm, kRound, (int)(sizeof kRound / sizeof *kRound));
        json_array_append_new(rounds, json_pack("{s:i,s:o,s:o,s:o,s:b}", "steps", k, "predicted_kl", num(pk), "bits_avg",
                                                bits_json(qs_sens_plan_bits(&r->tab, &r->t.f.m.c, promoted, r->bits_fmt, r->bits_hi)),
                                                "measured", mr, "met", met));
        if (met) break;
        int next = qs_sens_plan_refine(order, n, k, pk, sm.kl_mean, o->kl_target, prev_add, kmax);
        if (next <= k) {
            fprintf(stderr, "qscope: %s: plan of %d promotions: measured KL %.5g misses the target %g, and %s\n", CMD, k,
                    sm.kl_mean, o->kl_target, k >= n ? "every cell is promoted" : "the bits budget is spent");
            break;
        }
        fprintf(stderr, "qscope: %s: plan of %d promotions: measured KL %.5g misses the target %g; refining with %d more\n", CMD,
                k, sm.kl_mean, o->kl_target, next - k);
        prev_add = next - k;
        k = next;
    }
    json_t *pr = json_array(), *bf = json_array();
    for (int i = 0; i < k; i++)
        json_array_append_new(pr, json_pack("{s:i,s:s}", "layer", order[i].layer, "site", qs_sens_site_name(o->sites[order[i].j])));
    for (int l = 0; l < L; l++) {
        json_t *row = json_array();
        for (int j = 0; j < S; j++) json_array_append_new(row, json_integer(promoted[l * S + j]));
        json_array_append_new(bf, row);
    }
    json_t *meas = json_object(), *target = json_object();
    qs_evstats_put_ids(meas, &sm, kMeasured, (int)(sizeof kMeasured / sizeof *kMeasured));
    if (o->kl_target >= 0) json_object_set_new(target, "kl", json_real(o->kl_target));
    if (o->bits_budget >= 0) json_object_set_new(target, "bits", json_real(o->bits_budget));
    return json_pack("{s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:b}", "target", target, "steps", k, "promoted", pr, "bf16", bf,
                     "predicted_kl", num(k ? order[k - 1].predicted_kl : pred0), "bits_avg",
                     bits_json(qs_sens_plan_bits(&r->tab, &r->t.f.m.c, promoted, r->bits_fmt, r->bits_hi)), "measured", meas,
                     "refine", rounds, "target_met", met);
}

/* The plan for --kl-target or --bits-budget (stored as kind "llm_plan"), merged into r->d's plan. */
static int make_plan(sens_run *r)
{
    const sens_opts *o = r->o;
    const int n = r->L * r->S;
    qs_err e = {{0}};
    qs_sens_step *order = calloc((size_t)n, sizeof *order);
    uint8_t *promoted = calloc((size_t)n, 1);
    json_t *pkey = NULL, *pd = NULL;
    char *pks = NULL, *pdata = NULL;
    int rc = 0;
    if (!order || !promoted) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    double pred0, bits0;
    qs_sens_plan_order(&r->tab, &r->t.f.m.c, r->bits_fmt, r->bits_hi, order, &pred0, &bits0);
    int k = qs_sens_plan_choose(order, n, pred0, bits0, o->kl_target, o->bits_budget);
    if (o->bits_budget >= 0 && o->bits_budget < bits0)
        fprintf(stderr, "qscope: note: --bits-budget %g is below %s's own %g bits: nothing can be promoted\n", o->bits_budget,
                o->label, bits0);
    pkey = json_deep_copy(r->key);
    if (o->kl_target >= 0) json_object_set_new(pkey, "kl_target", json_real(o->kl_target));
    if (o->bits_budget >= 0) json_object_set_new(pkey, "bits_budget", json_real(o->bits_budget));
    if (!(pks = json_dumps(pkey, JSON_COMPACT | JSON_SORT_KEYS))) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    if (!o->force && !r->computed && qs_result_get(r->db, r->t.f.hash, "llm_plan", o->label, pks, &pdata, NULL, &e)) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto done;
    }
    if (pdata && o->kl_target >= 0) {   /* a KL-target plan stored before refinement existed is made again */
        json_t *old = json_loads(pdata, 0, NULL);
        if (!json_is_array(json_object_get(old, "refine"))) { free(pdata); pdata = NULL; }
        json_decref(old);
    }
    if (!pdata) {
        if (!(pd = plan_data(r, order, k, pred0, promoted, &e))) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
        pdata = json_dumps(pd, JSON_COMPACT);
        if (!pdata || qs_result_put(r->db, r->t.f.hash, "llm_plan", o->label, pks, pdata, NULL, &e)) {
            rc = pdata ? qs_cli_err(QS_EXIT_ERR, &e) : qs_cli_error(QS_EXIT_ERR, "out of memory");
            goto done;
        }
        json_decref(pd);
    }
    if (!(pd = json_loads(pdata, 0, NULL))) { rc = qs_cli_error(QS_EXIT_ERR, "stored plan is not JSON"); goto done; }
    json_object_update(json_object_get(r->d, "plan"), pd);
done:
    json_decref(pkey); json_decref(pd);
    free(pks); free(pdata);
    free(order); free(promoted);
    return rc;
}

/* The top of the greedy ranking (the plan's steps at least), as a table. */
static void print_plan_order(json_t *plan)
{
    json_t *ord = json_object_get(plan, "order"), *st = json_object_get(plan, "steps");
    size_t show = json_array_size(ord) < 10 ? json_array_size(ord) : 10;
    if (json_is_integer(st) && (size_t)json_integer_value(st) > show) show = (size_t)json_integer_value(st);
    qs_ttab *tb = qs_ttab_new(8);
    if (!tb) return;
    qs_ttab_align(tb, 0, 0);
    qs_ttab_align(tb, 2, 1);
    qs_ttab_align(tb, 7, 1);
    char a[40], b[40];
    qs_ttab_row(tb);
    const char *h[] = {"step", "layer", "site", "KL", "extra bits", "predicted KL", "avg bits"};
    for (int c = 0; c < 7; c++) qs_ttab_set(tb, c, "%s", h[c]);
    qs_ttab_row(tb);
    qs_ttab_set(tb, 0, "0");
    qs_ttab_set(tb, 2, "(all at format)");
    qs_evnum(json_number_value(json_object_get(plan, "predicted_kl_format")), 5, 0, a, sizeof a);
    qs_ttab_set(tb, 5, "%s", a);
    qs_ttab_set(tb, 6, "%.3f", json_number_value(json_object_get(plan, "bits_avg_format")));
    for (size_t i = 0; i < show; i++) {
        json_t *x = json_array_get(ord, i);
        qs_ttab_row(tb);
        qs_ttab_set(tb, 0, "%zu", i + 1);
        qs_ttab_set(tb, 1, "%lld", (long long)json_integer_value(json_object_get(x, "layer")));
        qs_ttab_set(tb, 2, "%s", json_string_value(json_object_get(x, "site")));
        qs_evnum(json_number_value(json_object_get(x, "kl")), 5, 0, a, sizeof a);
        qs_evnum(json_number_value(json_object_get(x, "predicted_kl")), 5, 0, b, sizeof b);
        qs_ttab_set(tb, 3, "%s", a);
        qs_ttab_set(tb, 4, "%.0f", json_number_value(json_object_get(x, "extra_bits")));
        qs_ttab_set(tb, 5, "%s", b);
        qs_ttab_set(tb, 6, "%.3f", json_number_value(json_object_get(x, "bits_avg")));
        if (json_is_integer(st) && i + 1 == (size_t)json_integer_value(st)) qs_ttab_set(tb, 7, "  <- plan");
    }
    qs_ttab_print(tb, stdout);
    qs_ttab_free(tb);
}

/* A KL-target plan's verifications: whether the first met the target and, when it missed, every round of
** the refinement, then where it stopped. */
static void print_refine(const sens_run *r, json_t *plan)
{
    json_t *rounds = json_object_get(plan, "refine"), *kt = json_object_get(json_object_get(plan, "target"), "kl");
    const size_t n = json_array_size(rounds);
    const int met = json_is_true(json_object_get(plan, "target_met"));
    if (!json_is_number(kt) || !n) return;
    const double target = json_number_value(kt);
    const char *why = (int)json_integer_value(json_object_get(plan, "steps")) >= r->L * r->S ? "every cell is at BF16"
                                                                                              : "the bits budget (--bits-budget) is spent";
    if (n == 1) {
        if (met) printf("plan meets the KL target %g\n", target);
        else printf("the plan misses the KL target %g and cannot be refined: %s\n", target, why);
        return;
    }
    printf("the first plan missed the KL target %g (measured above it): refined by promoting the next cells of the ranking\n", target);
    printf("%6s %11s %14s %22s %10s\n", "round", "promotions", "predicted KL", "measured KL", "avg bits");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(rounds, i);
        double v[QS_EVS_N];
        qs_evstats_get(json_object_get(x, "measured"), v);
        char pk[40], km[40], ks[40], meas[96];   /* significant digits, never a 0.00000 for a small value */
        qs_evnum(json_number_value(json_object_get(x, "predicted_kl")), 5, 0, pk, sizeof pk);
        qs_evnum(v[QS_EVS_KL_MEAN], 5, 0, km, sizeof km);
        qs_evnum(v[QS_EVS_KL_SE], 5, 0, ks, sizeof ks);
        snprintf(meas, sizeof meas, "%s±%s", km, ks);
        /* %23s: "±" is 2 bytes but 1 column */
        printf("%6zu %11lld %14s %23s %10.3f   %s\n", i + 1, (long long)json_integer_value(json_object_get(x, "steps")), pk, meas,
               json_number_value(json_object_get(json_object_get(x, "bits_avg"), "all")),
               json_is_true(json_object_get(x, "met")) ? "meets the target" : "missed");
    }
    if (met) printf("the refined plan meets the KL target %g after %zu rounds\n", target, n);
    else printf("the plan still misses the KL target %g: %s\n", target, why);
}

static void print_text(const sens_run *r, const char *note, double secs)
{
    const sens_opts *o = r->o;
    json_t *d = r->d, *plan = json_object_get(d, "plan"), *ref = json_object_get(d, "reference");
    char a[40], b[40], c[40], dd[40];
    printf("model %s (%s; %s)\n", qs_esc(o->model), qs_llm_title(&r->t.f), r->t.f.wtypes);
    qs_evnum(json_number_value(json_object_get(ref, "ppl")), 4, 0, a, sizeof a);
    qs_evnum(json_number_value(json_object_get(ref, "ppl_se")), 4, 0, b, sizeof b);
    printf("text %s: %d tokens; ctx %d, %d chunks, %lld scored tokens; scoring: %s; reference PPL %s±%s\n", qs_esc(o->text),
           r->t.ntok, o->ctx, r->t.su.nchunks, (long long)json_integer_value(json_object_get(d, "scored_tokens")),
           o->score_all ? "all positions" : "second half of each chunk (llama.cpp)", a, b);
    print_table(o, d, r->L);
    printf("\nplan (greedy by KL per extra bit, BF16 = %g bits, %s = %g bits/elem): top of the ranking\n", r->bits_hi, o->label,
           r->bits_fmt);
    print_plan_order(plan);
    json_t *st = json_object_get(plan, "steps");
    if (json_is_integer(st)) {
        json_t *ba = json_object_get(plan, "bits_avg");
        double m[QS_EVS_N];   /* the measured statistics (kMeasured) */
        qs_evstats_get(json_object_get(plan, "measured"), m);
        char bw[32], bav[32];
        print_bits(bw, sizeof bw, json_object_get(ba, "weights"));
        print_bits(bav, sizeof bav, json_object_get(ba, "activations"));
        printf("plan: %lld promotions to BF16; average bits: weights %s, activations %s, all %.3f\n",
               (long long)json_integer_value(st), bw, bav, json_number_value(json_object_get(ba, "all")));
        qs_evnum(json_number_value(json_object_get(plan, "predicted_kl")), 5, 0, a, sizeof a);
        qs_evnum(m[QS_EVS_KL_MEAN], 5, 0, b, sizeof b);
        qs_evnum(m[QS_EVS_KL_SE], 5, 0, c, sizeof c);
        qs_evnum(100 * m[QS_EVS_DPPL], 2, 1, dd, sizeof dd);
        printf("plan verified by one evaluation: predicted KL %s (sum of isolated effects), measured KL %s±%s, "
               "dPPL %s%%, same top %.2f%%\n", a, b, c, dd, 100 * m[QS_EVS_TOP1]);
        printf("(isolated effects are not additive: predicted and measured KL differ)\n");
        print_refine(r, plan);
    } else
        printf("(give --kl-target X or --bits-budget B for a plan verified by one evaluation)\n");
    if (note) printf("note: %s\n", note);
    printf("%s in %.1f s (%.1f s computing)\n", r->computed || r->pcomputed ? "computed" : "all results reused from the database (--force recomputes)",
           secs, r->compute);
}

/* --csv: one row per layer x site with its measurements, its place in the greedy ranking and, with a
** plan, whether the plan keeps it in BF16. */
static void sens_csv(const sens_run *r, FILE *f)
{
    const sens_opts *o = r->o;
    json_t *d = r->d, *plan = json_object_get(d, "plan"), *ord = json_object_get(plan, "order");
    json_t *bf = json_object_get(plan, "bf16");
    fputs("model,text,ctx,chunks,score,scored_tokens,format,layer,site,kl_mean,kl_se,dppl_rel,top1_agree,rank,kl_per_bit,"
          "extra_bits,bf16\n", f);
    for (int l = 0; l < r->L; l++)
        for (int j = 0; j < r->S; j++) {
            const char *site = qs_sens_site_name(o->sites[j]);
            json_t *step = NULL;
            size_t rank = 0;
            for (size_t k = 0; k < json_array_size(ord) && !step; k++) {
                json_t *x = json_array_get(ord, k);
                if (json_integer_value(json_object_get(x, "layer")) == l && !strcmp(json_string_value(json_object_get(x, "site")), site))
                    step = x, rank = k + 1;
            }
            qs_csv_field(f, o->model);
            fputc(',', f);
            qs_csv_field(f, o->text);
            fprintf(f, ",%d,%d,%s,%lld,", o->ctx, r->t.su.nchunks, o->score_all ? "all" : "half",
                    (long long)json_integer_value(json_object_get(d, "scored_tokens")));
            qs_csv_field(f, o->label);
            fprintf(f, ",%d,%s", l, site);
            const double v[] = {cell_of(json_object_get(d, "kl_mean"), l, j), cell_of(json_object_get(d, "kl_se"), l, j),
                                cell_of(json_object_get(d, "dppl"), l, j), cell_of(json_object_get(d, "top1_agree"), l, j)};
            for (int q = 0; q < 4; q++) isfinite(v[q]) ? fprintf(f, ",%.9g", v[q]) : fputs(",", f);
            if (step) {
                json_t *kpb = json_object_get(step, "kl_per_bit");
                fprintf(f, ",%zu,", rank);
                if (json_is_number(kpb)) fprintf(f, "%.9g", json_number_value(kpb));
                fprintf(f, ",%.9g", json_number_value(json_object_get(step, "extra_bits")));
            } else
                fputs(",,,", f);
            json_t *b = json_array_get(json_array_get(bf, (size_t)l), (size_t)j);
            if (json_is_integer(b)) fprintf(f, ",%lld\n", (long long)json_integer_value(b));
            else fputs(",\n", f);
        }
}

/* Write the CSV where --csv asks.  0, or 1 after an error naming the file. */
static int write_sens_csv(const sens_run *r)
{
    const char *path = r->o->out.csv;
    if (!path) return 0;
    if (!strcmp(path, "-")) { sens_csv(r, stdout); return 0; }
    FILE *f = fopen(path, "w");
    if (!f) return qs_cli_error(QS_EXIT_ERR, "%s: cannot write: %s", qs_esc(path), strerror(errno));
    sens_csv(r, f);
    if (fclose(f)) return qs_cli_error(QS_EXIT_ERR, "%s: cannot write: %s", qs_esc(path), strerror(errno));
    return 0;
}

/* The table and plan, computed or reused; rank 0 then has the answer in r->d. */
static int sens_answer(qs_cli *cli, sens_run *r)
{
    const sens_opts *o = r->o;
    qs_err e = {{0}};
    int rc;
    if (!(r->db = qs_cli_open_db(cli))) return QS_EXIT_ERR;
    if ((rc = table_key(r))) return rc;
    if (!o->force && qs_result_get(r->db, r->t.f.hash, "llm_sensitivity", o->label, r->ks, &r->data, NULL, &e))
        return qs_cli_err(QS_EXIT_ERR, &e);
    if (!r->data && (rc = compute_table(r))) return rc;
    if (qs_par_rank() > 0) return 0;   /* rank 0 alone plans, stores and prints */
    if (r->computed && (rc = store_table(r))) return rc;
    if (!(r->d = json_loads(r->data, 0, NULL)) || table_from_json(r->d, &r->tab, o, r->L))
        return qs_cli_error(QS_EXIT_ERR, "stored sensitivity result is not a %d x %d table", r->L, r->S);
    if ((o->kl_target >= 0 || o->bits_budget >= 0) && (rc = make_plan(r))) return rc;
    uint8_t *none = calloc((size_t)r->L * r->S, 1);
    if (none) {
        json_object_set_new(json_object_get(r->d, "plan"), "bits_avg_format_split",
                            bits_json(qs_sens_plan_bits(&r->tab, &r->t.f.m.c, none, r->bits_fmt, r->bits_hi)));
        free(none);
    }
    return 0;
}

int qs_sens_format_table(qs_db *db, qs_llm_text_run *t, const sens_opts *o, const qs_apply *fmt, const char *label,
                         qs_sens_table *tab, int *computed, double *compute_s)
{
    sens_opts fo = *o;   /* the one-format options of this format */
    fo.fmt = *fmt;
    snprintf(fo.label, sizeof fo.label, "%s", label);
    sens_run r;
    memset(&r, 0, sizeof r);
    r.o = &fo;
    r.t = *t;            /* borrowed, never freed here */
    r.db = db;
    r.L = t->f.m.c.n_layer;
    r.S = o->nsite;
    r.bits_fmt = qs_format_bits_per_elem(fmt->f, &fmt->o);
    r.bits_hi = 16;
    qs_err e = {{0}};
    int rc = table_key(&r);
    if (!rc && !o->force && qs_result_get(db, t->f.hash, "llm_sensitivity", fo.label, r.ks, &r.data, NULL, &e))
        rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (!rc && !r.data) rc = compute_table(&r);
    if (!rc && qs_par_rank() == 0) {
        if (r.computed) rc = store_table(&r);
        if (!rc && (!(r.d = json_loads(r.data, 0, NULL)) || table_from_json(r.d, &r.tab, &fo, r.L)))
            rc = qs_cli_error(QS_EXIT_ERR, "stored sensitivity result of %s is not a %d x %d table", label, r.L, r.S);
    }
    if (!rc) {
        *tab = r.tab;
        memset(&r.tab, 0, sizeof r.tab);
        *computed = r.computed;
        *compute_s += r.compute;
    }
    qs_sens_table_free(&r.tab);
    json_decref(r.key); json_decref(r.sites); json_decref(r.d);
    free(r.ks); free(r.data);
    return rc;
}

int qs_cmd_llm_sens(qs_cli *cli, int argc, char **argv)
{
    sens_run r;
    memset(&r, 0, sizeof r);
    if (!(r.o = calloc(1, sizeof *r.o))) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    const sens_opts *o = r.o;
    int rc = parse_opts(argc, argv, r.o);
    if (rc) { free(r.o); return rc; }
    const double t_start = qs_now_s();
    qs_stop_signals_default();   /* until the computation, Ctrl-C loses nothing */
    if ((rc = qs_llm_text_run_open(&r.t, CMD, o->model, o->text, o->ctx, o->chunks, o->score_all, NULL))) goto done;
    if (o->formats) { rc = qs_sens_formats_run(cli, r.o, &r.t); goto done; }
    r.L = r.t.f.m.c.n_layer;
    r.S = o->nsite;
    r.bits_fmt = qs_format_bits_per_elem(o->fmt.f, &o->fmt.o);
    r.bits_hi = 16;
    if ((rc = sens_answer(cli, &r)) || qs_par_rank() > 0) goto done;
    int wsite = 0;
    for (int j = 0; j < r.S; j++) wsite |= o->sites[j] == QS_SENS_W;
    const char *wt = r.t.f.wtypes;
    int wnote = wsite && (strstr(wt, "q4") || strstr(wt, "q5") || strstr(wt, "q8") || strstr(wt, "q6"));
    char note[320];
    snprintf(note, sizeof note, "the model's weights are already quantized (%s): the w site's result is relative to that grid; "
             "activation and KV-cache results are not affected", wt);
    double secs = qs_now_s() - t_start;
    if (o->json) {
        json_object_set_new(r.d, "cached", json_boolean(!r.computed && !r.pcomputed));
        if (wnote) json_object_set_new(r.d, "note", json_string(note));
        json_object_set_new(r.d, "compute_seconds", json_real(r.compute));
        json_object_set_new(r.d, "seconds", json_real(secs));
        char *s = json_dumps(r.d, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
    } else if (!o->out.csv || strcmp(o->out.csv, "-"))
        print_text(&r, wnote ? note : NULL, secs);
    rc = write_sens_csv(&r);
done:
    qs_sens_table_free(&r.tab);
    json_decref(r.key); json_decref(r.sites); json_decref(r.d);
    free(r.ks); free(r.data);
    if (r.db) qs_db_close(r.db);
    qs_llm_text_run_free(&r.t);
    free(r.o);
    return rc;
}
