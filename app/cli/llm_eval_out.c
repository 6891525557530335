/*
** The printed, JSON and CSV output of `qscope llm eval` beyond its header (llm_eval_out.h).
*/
#include "llm_eval_out.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "text_table.h"
#include "../../analysis/llm_eval_stats.h"
#include "../../store/json_out.h"

/* the interval options with their defaults filled in */
static qs_evci_opts ci_of(const qs_evout_opts *o)
{
    qs_evci_opts c = o->ci;
    if (c.resamples <= 0) c.resamples = QS_EVCI_DEFAULT_B;
    if (!c.seed && !o->ci.resamples) c.seed = QS_EVCI_DEFAULT_SEED;
    return c;
}

static int boot(const qs_evout_opts *o) { return o->ci.method == QS_EVCI_BOOTSTRAP; }

int qs_evout_opt(const char *cmd, int ch, const char *arg, int argc, char **argv, qs_evout_opts *o)
{
    switch (ch) {
    case 'Q':
        if (qs_evci_parse(arg, &o->ci))
            return qs_cli_usage(cmd, "--ci is delta or bootstrap[:N[:SEED]] (N resamples, 10 .. 1000000), not '%s'", arg);
        return 0;
    case 'P': o->paired = 1; return 0;
    case 'V':   /* --csv, --csv=FILE, --csv FILE, --csv - */
        if (!arg && optind < argc && (argv[optind][0] != '-' || !strcmp(argv[optind], "-"))) arg = argv[optind++];
        if (arg && !*arg) return qs_cli_usage(cmd, "--csv: empty file name");
        o->csv = arg ? arg : "-";
        return 0;
    default: return qs_cli_usage(cmd, "unknown option");
    }
}

int qs_evout_check(const char *cmd, const qs_evout_opts *o, int json, int ncfg, int nchunks)
{
    if (o->csv && !strcmp(o->csv, "-") && json) return qs_cli_usage(cmd, "--csv to stdout and --json are exclusive (give --csv FILE)");
    if (o->paired && ncfg < 2) return qs_cli_usage(cmd, "--paired compares configurations with the first: give at least two --config");
    if (nchunks >= 0 && nchunks < 2 && (boot(o) || o->paired))
        return qs_cli_usage(cmd, "%s over chunks need at least 2 chunks (this run has %d: see --chunks, --ctx)",
                            boot(o) ? "--ci bootstrap's intervals" : "--paired's intervals", nchunks);
    return 0;
}

int qs_evout_compute(const qs_evout_opts *o, const qs_eval_result *res, qs_evout *ev, qs_err *e)
{
    memset(ev, 0, sizeof *ev);
    const qs_evci_opts ci = ci_of(o);
    ev->nvar = res->tok.nvar;
    if (boot(o)) {
        if (!(ev->var = calloc((size_t)ev->nvar, sizeof *ev->var))) return qs_fail(e, "out of memory");
        for (int v = 0; v < ev->nvar; v++)
            if (qs_evci_variant(&res->tok, res->per_chunk, v, &ci, &ev->var[v], e)) return -1;
    }
    if (o->paired && ev->nvar > 2) {
        if (!(ev->pair = calloc((size_t)ev->nvar - 2, sizeof *ev->pair))) return qs_fail(e, "out of memory");
        for (int i = 0; i < ev->nvar - 2; i++)
            if (qs_evci_paired(&res->tok, res->per_chunk, 1, i + 2, &ci, &ev->pair[i], e)) return -1;
    }
    return 0;
}

void qs_evout_free(qs_evout *ev)
{
    free(ev->var);
    free(ev->pair);
    memset(ev, 0, sizeof *ev);
}

/* ---------------------------------------------------------------- the table */

static const char *label_of(const qs_eval_result *res, int v)
{
    return v ? json_string_value(json_object_get(json_array_get(res->cfgs, (size_t)v - 1), "label")) : "reference fp32";
}

static json_t *data_of(const qs_eval_result *res, int v) { return v ? json_array_get(res->cfgs, (size_t)v - 1) : res->ref; }

/* "v [lo, hi]" */
static void interval(char *buf, size_t cap, double v, double lo, double hi, int dec, int plus, const char *unit)
{
    char a[40], b[40], c[40];
    qs_evnum(v, dec, plus, a, sizeof a);
    qs_evnum(lo, dec, plus, b, sizeof b);
    qs_evnum(hi, dec, plus, c, sizeof c);
    snprintf(buf, cap, "%s%s [%s, %s]", a, unit, b, c);
}

/* Statistic id's cell of variant v: the table's (llm_eval_stats.c), or under --ci bootstrap the
** bootstrap interval of PPL, dPPL and KL mean. */
static void cell(const qs_evout_opts *o, const qs_evout *ev, int v, int id, const double *x, char *buf, size_t cap)
{
    const qs_evci_var *b = ev->var ? &ev->var[v] : NULL;
    if (b && id == QS_EVS_PPL) interval(buf, cap, x[id], b->ppl.lo, b->ppl.hi, 4, 0, "");
    else if (b && id == QS_EVS_KL_MEAN) interval(buf, cap, x[id], b->kl.lo, b->kl.hi, 5, 0, "");
    else if (b && id == QS_EVS_DPPL) interval(buf, cap, 100 * x[id], 100 * b->dppl.lo, 100 * b->dppl.hi, 2, 1, "%");
    else qs_evstat_cell(QS_EVV_CLI, id, x, 0, buf, cap);
}

static const char *head_of(const qs_evout_opts *o, int id)
{
    if (boot(o) && id == QS_EVS_PPL) return "PPL [95% CI]";
    if (boot(o) && id == QS_EVS_KL_MEAN) return "KL mean [95% CI]";
    return qs_evstats[id].view[QS_EVV_CLI].head;
}

static void stats_rows(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, size_t ntok, qs_ttab *tb)
{
    qs_ttab_row(tb);
    qs_ttab_set(tb, 0, "config");
    for (int k = 1, id; (id = qs_evstat_column(QS_EVV_CLI, k)); k++) qs_ttab_set(tb, k, "%s", head_of(o, id));
    for (int v = 0; v < 1 + (int)json_array_size(res->cfgs); v++) {
        json_t *d = data_of(res, v);
        qs_ttab_row(tb);
        qs_ttab_set(tb, 0, "%s", label_of(res, v));
        long long rows;
        if (qs_evstats_failed(d, &rows)) {
            char msg[128];
            snprintf(msg, sizeof msg, "FAILED (%lld of %zu rows non-finite): no statistics", rows, ntok);
            qs_ttab_set(tb, 1, "-");
            qs_ttab_tail(tb, 2, msg);
            continue;
        }
        double x[QS_EVS_N];
        qs_evstats_get(d, x);
        for (int k = 1, id; (id = qs_evstat_column(QS_EVV_CLI, k)); k++) {
            if (!v && !(qs_evstats[id].flags & QS_EVS_REF)) break;
            char c[128];
            cell(o, ev, v, id, x, c, sizeof c);
            qs_ttab_set(tb, k, "%s", c);
        }
    }
}

/* "yes (higher)", "yes (lower)" or "no": whether the interval excludes 0, and on which side */
static const char *verdict(const qs_evci_est *x)
{
    if (!(isfinite(x->lo) && isfinite(x->hi))) return "-";
    return x->lo > 0 ? "yes (higher)" : x->hi < 0 ? "yes (lower)" : "no";
}

static void paired_table(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res)
{
    const qs_evci_opts ci = ci_of(o);
    if (boot(o))
        printf("\npaired: each configuration against %s on the same tokens; 95%% intervals by a bootstrap over whole chunks "
               "(%d resamples, seed %llu)\n", label_of(res, 1), ci.resamples, (unsigned long long)ci.seed);
    else
        printf("\npaired: each configuration against %s on the same tokens; 95%% intervals from the per-chunk differences "
               "(Student t over chunks)\n", label_of(res, 1));
    qs_ttab *tb = qs_ttab_new(7);
    if (!tb) return;
    qs_ttab_align(tb, 1, 1);
    qs_ttab_row(tb);
    const char *h[] = {"config", "against", "tokens", "d ln PPL [95% CI]", "PPL differs", "d KL mean [95% CI]", "KL differs"};
    for (int c = 0; c < 7; c++) qs_ttab_set(tb, c, "%s", h[c]);
    for (int i = 0; i < ev->nvar - 2; i++) {
        const qs_evci_pair *p = &ev->pair[i];
        char a[128], b[128];
        interval(a, sizeof a, p->dln.v, p->dln.lo, p->dln.hi, 4, 1, "");
        interval(b, sizeof b, p->dkl.v, p->dkl.lo, p->dkl.hi, 5, 1, "");
        qs_ttab_row(tb);
        qs_ttab_set(tb, 0, "%s", label_of(res, i + 2));
        qs_ttab_set(tb, 1, "%s", label_of(res, 1));
        qs_ttab_set(tb, 2, "%zu", p->n);
        qs_ttab_set(tb, 3, "%s", a);
        qs_ttab_set(tb, 4, "%s", verdict(&p->dln));
        qs_ttab_set(tb, 5, "%s", b);
        qs_ttab_set(tb, 6, "%s", verdict(&p->dkl));
    }
    qs_ttab_print(tb, stdout);
    qs_ttab_free(tb);
    printf("d ln PPL = ln PPL(config)/PPL(against) = mean of ln p_against - ln p_config per token; d KL mean = KL mean(config) "
           "- KL mean(against); differs: the interval excludes 0\n");
}

/* The labels of the configurations that round activations or the KV cache ("" when none). */
static void rounding_labels(const qs_eval_result *res, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < json_array_size(res->cfgs); i++) {
        json_t *c = json_array_get(res->cfgs, i), *nx = json_object_get(c, "numerics");
        json_t *a = json_object_get(nx, "activations"), *kv = json_object_get(nx, "kv_cache");
        int rounds = json_object_get(nx, "plan") || (a && !(json_is_string(a) && !strcmp(json_string_value(a), "fp32"))) ||
                     (kv && !(json_is_string(kv) && !strcmp(json_string_value(kv), "fp32")));
        if (rounds && k < cap)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? "; " : "", json_string_value(json_object_get(c, "label")));
    }
}

#define DRAWS_NOTE                                                                                                        \
    "rounding activations or the KV cache moves PPL by about 0.1-0.2% with the summation order (threads, BLAS "         \
    "kernels, batching): no interval here covers such a 'draw' (they cover the sampling of the text's tokens only), "  \
    "so read differences of that size as none"

void qs_evout_table(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, size_t ntok)
{
    const qs_evci_opts ci = ci_of(o);
    const int nch = res->per_chunk ? (int)(res->tok.n / res->per_chunk) : 0;
    if (boot(o))
        printf("%zu scored tokens; PPL, dPPL and KL mean: 95%% intervals by a bootstrap over whole chunks (%d resamples of "
               "%d chunks, seed %llu); other ± are standard errors of per-token means\n\n", ntok, ci.resamples, nch,
               (unsigned long long)ci.seed);
    else
        printf("%zu scored tokens; errors are standard errors of per-token means (tokens treated as independent; "
               "--ci bootstrap resamples whole chunks)\n\n", ntok);
    qs_ttab *tb = qs_ttab_new(1 + QS_EVS_N);
    if (tb) {
        stats_rows(o, ev, res, ntok, tb);
        qs_ttab_print(tb, stdout);
        qs_ttab_free(tb);
    }
    printf("\nKL = KL(P_ref || P_config) per token (nats); dPPL = PPL(config)/PPL(ref) - 1 (%s); dp = p_config - p_ref of "
           "the actual next token; cor = Cor(ln p_config, ln p_ref) per token\n",
           boot(o) ? "bootstrap over chunks" : "delta method");
    if (ev->pair) paired_table(o, ev, res);
    char labs[512];
    rounding_labels(res, labs, sizeof labs);
    if (labs[0])
        printf("note: %s (configurations: %s); --paired compares two configurations on the same tokens, --ci bootstrap "
               "resamples whole chunks\n", DRAWS_NOTE, labs);
}

/* ---------------------------------------------------------------- JSON */

static json_t *pair_json(double lo, double hi) { return json_pack("[o,o]", qs_json_num(lo), qs_json_num(hi)); }

void qs_evout_json(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, json_t *j)
{
    const qs_evci_opts ci = ci_of(o);
    json_t *c = json_pack("{s:s,s:f,s:s}", "method", qs_evci_method_name(o->ci.method), "level", 0.95, "unit",
                          boot(o) ? "chunk" : "token");
    if (boot(o)) {
        json_object_set_new(c, "resamples", json_integer(ci.resamples));
        json_object_set_new(c, "seed", json_integer((json_int_t)ci.seed));
    }
    if (o->paired) json_object_set_new(c, "paired", json_string(boot(o) ? "bootstrap over chunks" : "t over chunks"));
    char labs[512];
    rounding_labels(res, labs, sizeof labs);
    if (labs[0]) json_object_set_new(c, "not_covered", json_string(DRAWS_NOTE));
    json_object_set_new(j, "ci", c);
    for (int v = 0; ev->var && v < ev->nvar; v++) {
        const qs_evci_var *b = &ev->var[v];
        json_t *bj = json_pack("{s:o}", "ppl_ci95", pair_json(b->ppl.lo, b->ppl.hi));
        if (v) {
            json_object_set_new(bj, "dppl_rel_ci95", pair_json(b->dppl.lo, b->dppl.hi));
            json_object_set_new(bj, "ln_ppl_ratio_ci95", pair_json(b->lnratio.lo, b->lnratio.hi));
            json_object_set_new(bj, "kl_mean_ci95", pair_json(b->kl.lo, b->kl.hi));
        }
        json_object_set_new(data_of(res, v), "bootstrap", bj);
    }
    if (!ev->pair) return;
    json_t *pa = json_array();
    for (int i = 0; i < ev->nvar - 2; i++) {
        const qs_evci_pair *p = &ev->pair[i];
        json_t *x = json_pack("{s:s,s:s,s:I,s:i}", "config", label_of(res, i + 2), "against", label_of(res, 1), "tokens",
                              (json_int_t)p->n, "chunks", p->chunks);
        qs_json_set_num(x, "d_ln_ppl", p->dln.v);
        if (!boot(o)) qs_json_set_num(x, "d_ln_ppl_se", p->dln_se);
        json_object_set_new(x, "d_ln_ppl_ci95", pair_json(p->dln.lo, p->dln.hi));
        qs_json_set_num(x, "ppl_ratio", exp(p->dln.v));
        json_object_set_new(x, "ppl_ratio_ci95", pair_json(exp(p->dln.lo), exp(p->dln.hi)));
        qs_json_set_num(x, "d_kl_mean", p->dkl.v);
        if (!boot(o)) qs_json_set_num(x, "d_kl_mean_se", p->dkl_se);
        json_object_set_new(x, "d_kl_mean_ci95", pair_json(p->dkl.lo, p->dkl.hi));
        json_object_set_new(x, "ppl_differs", json_boolean(p->dln.lo > 0 || p->dln.hi < 0));
        json_object_set_new(x, "kl_differs", json_boolean(p->dkl.lo > 0 || p->dkl.hi < 0));
        json_array_append_new(pa, x);
    }
    json_object_set_new(j, "paired", pa);
}

/* ---------------------------------------------------------------- CSV */

static void num(FILE *f, double v)
{
    fputc(',', f);
    if (isfinite(v)) fprintf(f, "%.9g", v);
}

static void csv_header(FILE *f)
{
    fputs("model,text,ctx,chunks,score,scored_tokens,config,failed,cached,scored", f);
    for (int i = 1; i < QS_EVS_N; i++) {
        const qs_evstat *r = &qs_evstats[i];
        fprintf(f, ",%s%s", r->key, r->elem == 1 ? "_lo" : r->elem == 2 ? "_hi" : "");
    }
    fputs(",ci_method,ppl_ci95_lo,ppl_ci95_hi,dppl_ci95_lo,dppl_ci95_hi,kl_mean_ci95_lo,kl_mean_ci95_hi,"
          "nonfinite_logit_rows,nonfinite_activation_values,paired_against,d_ln_ppl,d_ln_ppl_ci95_lo,d_ln_ppl_ci95_hi,"
          "ppl_differs,d_kl_mean,d_kl_mean_ci95_lo,d_kl_mean_ci95_hi,kl_differs\n", f);
}

static void csv_row(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, const qs_evout_run *run, int v,
                    FILE *f)
{
    json_t *d = data_of(res, v), *nf = json_object_get(d, "nonfinite");
    qs_csv_field(f, run->model);
    fputc(',', f);
    qs_csv_field(f, run->text);
    fprintf(f, ",%d,%d,%s,%zu,", run->ctx, run->chunks, run->score, run->ntok);
    qs_csv_field(f, v ? label_of(res, v) : "reference");
    fprintf(f, ",%d,%d,%lld", qs_evstats_failed(d, NULL), json_is_true(json_object_get(d, "cached")),
            (long long)json_integer_value(json_object_get(d, "scored")));
    double x[QS_EVS_N];
    qs_evstats_get(d, x);
    for (int i = 1; i < QS_EVS_N; i++) num(f, !v && !(qs_evstats[i].flags & QS_EVS_REF) ? NAN : x[i]);
    /* the intervals of the method asked for */
    fprintf(f, ",%s", qs_evci_method_name(o->ci.method));
    const qs_evci_var *b = ev->var ? &ev->var[v] : NULL;
    const double z = 1.959964;
    num(f, b ? b->ppl.lo : x[QS_EVS_PPL] - z * x[QS_EVS_PPL_SE]);
    num(f, b ? b->ppl.hi : x[QS_EVS_PPL] + z * x[QS_EVS_PPL_SE]);
    num(f, !v ? NAN : b ? b->dppl.lo : x[QS_EVS_DPPL_LO]);
    num(f, !v ? NAN : b ? b->dppl.hi : x[QS_EVS_DPPL_HI]);
    num(f, !v ? NAN : b ? b->kl.lo : x[QS_EVS_KL_MEAN] - z * x[QS_EVS_KL_SE]);
    num(f, !v ? NAN : b ? b->kl.hi : x[QS_EVS_KL_MEAN] + z * x[QS_EVS_KL_SE]);
    fprintf(f, ",%lld,%lld,", (long long)json_integer_value(json_object_get(nf, "logit_rows")),
            (long long)json_integer_value(json_object_get(nf, "activation_values")));
    const qs_evci_pair *p = ev->pair && v >= 2 ? &ev->pair[v - 2] : NULL;
    if (!p) { fputs(",,,,,,,,\n", f); return; }
    qs_csv_field(f, label_of(res, 1));
    num(f, p->dln.v);
    num(f, p->dln.lo);
    num(f, p->dln.hi);
    fprintf(f, ",%d", p->dln.lo > 0 || p->dln.hi < 0);
    num(f, p->dkl.v);
    num(f, p->dkl.lo);
    num(f, p->dkl.hi);
    fprintf(f, ",%d\n", p->dkl.lo > 0 || p->dkl.hi < 0);
}

void qs_evout_csv(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, const qs_evout_run *run, FILE *f)
{
    csv_header(f);
    for (int v = 0; v < 1 + (int)json_array_size(res->cfgs); v++) csv_row(o, ev, res, run, v, f);
}

int qs_evout_write_csv(const qs_evout_opts *o, const qs_evout *ev, const qs_eval_result *res, const qs_evout_run *run)
{
    if (!o->csv) return 0;
    if (!strcmp(o->csv, "-")) { qs_evout_csv(o, ev, res, run, stdout); return 0; }
    FILE *f = fopen(o->csv, "w");
    if (!f) return qs_cli_error(QS_EXIT_ERR, "%s: cannot write: %s", qs_esc(o->csv), strerror(errno));
    qs_evout_csv(o, ev, res, run, f);
    if (fclose(f)) return qs_cli_error(QS_EXIT_ERR, "%s: cannot write: %s", qs_esc(o->csv), strerror(errno));
    return 0;
}
