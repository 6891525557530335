/*
** `qscope llm sensitivity`: per-(layer, site) sensitivity of a model to one format — mean KL to the
** FP32 reference and Delta PPL with only that site of that layer rounded — and a greedy
** mixed-precision plan (which sites to keep in BF16), verified by one evaluation of the combined
** plan (docs/llm.md "llm sensitivity").  Stored as result kinds "llm_sensitivity" and "llm_plan"
** (analysis/results.h) and reused unless --force.
*/
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
#include "par.h"
#include "../analysis/llm_eval_shard.h"
#include "../analysis/llm_sens.h"
#include "../analysis/results.h"
#include "../store/llm_load.h"

#define CMD "llm sensitivity"

typedef struct sens_opts {
    const char *model, *text, *fmt_spec;
    int ctx, chunks, score_all, json, force, scaled;
    int sites[QS_SENS_NSITE], nsite;
    double kl_target, bits_budget;   /* < 0: not given */
    qs_apply fmt, hi;
    char label[128];
} sens_opts;

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
        {"json", no_argument, 0, 'j'}, {"force", no_argument, 0, 'F'}, {"unscaled-casts", no_argument, 0, 'u'}, {0, 0, 0, 0}};
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
        case 'c': if ((rc = qs_cli_parse_int(CMD, "--ctx", optarg, 4, 1 << 16, &o->ctx))) return rc; break;
        case 'k': if ((rc = qs_cli_parse_int(CMD, "--chunks", optarg, 1, 1 << 20, &o->chunks))) return rc; break;
        case 'S': if ((rc = parse_sites(optarg, o))) return rc; break;
        case 'K': if ((rc = parse_pos("--kl-target", optarg, &o->kl_target))) return rc; break;
        case 'B': if ((rc = parse_pos("--bits-budget", optarg, &o->bits_budget))) return rc; break;
        case 's':
            if (!strcmp(optarg, "half")) o->score_all = 0;
            else if (!strcmp(optarg, "all")) o->score_all = 1;
            else return qs_cli_usage(CMD, "--score is half or all, not '%s'", optarg);
            break;
        case 'j': o->json = 1; break;
        case 'F': o->force = 1; break;
        case 'u': o->scaled = 0; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->model) {
        if (access(QS_LLM_DEFAULT_MODEL, R_OK) == 0) o->model = QS_LLM_DEFAULT_MODEL;
        else return qs_cli_usage(CMD, "--model PATH is required (the default %s is missing: run `make data`)", QS_LLM_DEFAULT_MODEL);
    }
    if (!o->fmt_spec) return qs_cli_usage(CMD, "--format F is required (e.g. mxfp4)");
    if (strchr(o->fmt_spec, ',')) return qs_cli_usage(CMD, "--format: one format");
    if (o->kl_target >= 0 && o->bits_budget >= 0) return qs_cli_usage(CMD, "give --kl-target or --bits-budget, not both");
    if (qs_llm_parse_fmt(CMD, o->fmt_spec, &o->fmt) || qs_llm_parse_fmt(CMD, "bf16", &o->hi)) return QS_EXIT_USAGE;
    qs_quant_label(&o->fmt, o->fmt_spec, o->label, sizeof o->label);
    if (!o->text) {
        if (access(QS_LLM_DEFAULT_TEXT, R_OK) == 0) o->text = QS_LLM_DEFAULT_TEXT;
        else return qs_cli_usage(CMD, "--text FILE is required (the default %s is missing: run `make data`)", QS_LLM_DEFAULT_TEXT);
    }
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

static void print_table(const sens_opts *o, json_t *d, int L)
{
    json_t *kl = json_object_get(d, "kl_mean"), *dp = json_object_get(d, "dppl");
    int S = o->nsite;
    double *mx = calloc((size_t)S, sizeof(double));
    int *arg = calloc((size_t)S, sizeof(int));
    if (!mx || !arg) { free(mx); free(arg); return; }
    for (int j = 0; j < S; j++) { mx[j] = -INFINITY; arg[j] = -1; }
    for (int l = 0; l < L; l++)
        for (int j = 0; j < S; j++) {
            double v = json_number_value(json_array_get(json_array_get(kl, (size_t)l), (size_t)j));
            if (v > mx[j]) { mx[j] = v; arg[j] = l; }
        }
    printf("mean KL (nats) with one site of one layer at %s, all else FP32 (* = the largest of its site)\n", o->label);
    printf("%5s", "layer");
    for (int j = 0; j < S; j++) printf(" %12s", qs_sens_site_name(o->sites[j]));
    printf("   |  dPPL %%:");
    for (int j = 0; j < S; j++) printf(" %11s", qs_sens_site_name(o->sites[j]));
    printf("\n");
    for (int l = 0; l < L; l++) {
        printf("%5d", l);
        for (int j = 0; j < S; j++) {
            double v = json_number_value(json_array_get(json_array_get(kl, (size_t)l), (size_t)j));
            printf(" %11.5f%c", v, arg[j] == l ? '*' : ' ');
        }
        printf("   |         ");
        for (int j = 0; j < S; j++)
            printf(" %+10.2f%%", 100 * json_number_value(json_array_get(json_array_get(dp, (size_t)l), (size_t)j)));
        printf("\n");
    }
    free(mx);
    free(arg);
}

/* an average of bits, or "-" when the plan has no site of that kind (null) */
static void print_bits(char *buf, size_t cap, json_t *v)
{
    if (json_is_number(v)) snprintf(buf, cap, "%.3f", json_number_value(v));
    else snprintf(buf, cap, "-");
}

int qs_cmd_llm_sens(qs_cli *cli, int argc, char **argv)
{
    sens_opts *o = calloc(1, sizeof *o);
    if (!o) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    int rc = parse_opts(argc, argv, o);
    if (rc) { free(o); return rc; }
    const double t_start = qs_now_s();
    qs_err e = {{0}};
    qs_llm_file f;
    memset(&f, 0, sizeof f);
    char *text = NULL, thash[33], *data = NULL, *pdata = NULL;
    size_t tlen = 0;
    int32_t *ids = NULL;
    qs_db *db = NULL;
    json_t *key = NULL, *d = NULL, *pkey = NULL, *pd = NULL;
    qs_sens_table tab;
    memset(&tab, 0, sizeof tab);
    qs_sens_step *order = NULL;
    uint8_t *promoted = NULL;
    int computed = 0, pcomputed = 0;
    if (qs_eval_read_text(o->text, &text, &tlen, thash, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (qs_llm_load(o->model, &f, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (o->ctx > f.m.c.ctx) { rc = qs_cli_usage(CMD, "--ctx %d exceeds the model context %d", o->ctx, f.m.c.ctx); goto done; }
    int ntok = 0;
    if (qs_eval_text_ids(o->text, &f, text, tlen, &ids, &ntok, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    int need = o->score_all ? o->ctx : 2 * o->ctx;
    if (ntok < need) {
        rc = qs_cli_error(QS_EXIT_USAGE, "%s: %d tokens is too short for --ctx %d (needs at least %d tokens%s)", o->text, ntok,
                          o->ctx, need, o->score_all ? "" : "; --score all needs one chunk");
        goto done;
    }
    const int add_bos = f.v.add_bos && f.v.bos >= 0;
    qs_eval_setup su = {o->ctx, ntok / o->ctx, o->score_all, add_bos ? f.v.bos : -1};
    if (o->chunks && o->chunks < su.nchunks) su.nchunks = o->chunks;
    const int L = f.m.c.n_layer, S = o->nsite;
    const double bits_fmt = qs_format_bits_per_elem(o->fmt.f, &o->fmt.o), bits_hi = 16;

    if (!(db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto done; }
    char *fj = qs_quant_opts_json(&o->fmt);
    json_t *fo = fj ? json_loads(fj, 0, NULL) : NULL;
    free(fj);
    json_t *sites = json_array();
    for (int j = 0; j < S; j++) json_array_append_new(sites, json_string(qs_sens_site_name(o->sites[j])));
    key = json_pack("{s:s,s:i,s:i,s:s,s:i,s:o,s:O,s:b}", "text", thash, "ctx", o->ctx, "chunks", su.nchunks, "score",
                    o->score_all ? "all" : "half", "bos", su.bos, "format", fo ? fo : json_string(o->label), "sites", sites,
                    "scaled_casts", o->scaled);
    char *ks = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!ks) { json_decref(sites); rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    if (!o->force && qs_result_get(db, f.hash, "llm_sensitivity", o->label, ks, &data, NULL, &e)) {
        free(ks); json_decref(sites);
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto done;
    }
    double compute = 0;
    if (!data) {
        /* chunks x (layer, site) variants on the ranks; rank 0 makes the table */
        double t0 = qs_now_s();
        qs_sens_variants sv;
        qs_eval_shard sh;
        memset(&sh, 0, sizeof sh);
        int bad = qs_sens_variants_make(&f.m, &o->fmt, o->scaled, o->sites, S, &sv, &e);
        if (!bad) {
            bad = qs_eval_shard_init(&sh, &f.m, sv.var, NULL, sv.nvar, ids, (size_t)ntok, &su, &e) ||
                  qs_llm_shard_run(&sh, CMD, &e) || (qs_par_rank() == 0 && qs_sens_table_make(&sv, &sh.out, &tab, &e));
            qs_eval_shard_free(&sh);
            qs_sens_variants_free(&sv);
        }
        if (bad) {
            free(ks); json_decref(sites);
            rc = qs_cli_err(QS_EXIT_ERR, &e);
            goto done;
        }
        compute = qs_now_s() - t0;
        computed = 1;
    }
    if (qs_par_rank() > 0) { free(ks); json_decref(sites); goto done; }   /* rank 0 alone plans, stores and prints */
    if (computed) {
        d = json_object();
        json_object_set_new(d, "model", qs_llm_model_json(o->model, &f));
        json_object_set_new(d, "text", qs_llm_text_json(o->text, thash, tlen));
        json_object_set_new(d, "tokens", json_integer(ntok));
        json_object_set_new(d, "scored_tokens", json_integer((json_int_t)tab.n));
        json_object_set_new(d, "ctx", json_integer(o->ctx));
        json_object_set_new(d, "chunks", json_integer(su.nchunks));
        json_object_set_new(d, "score", json_string(o->score_all ? "all" : "half"));
        json_object_set_new(d, "format", json_string(o->label));
        json_object_set_new(d, "sites", json_incref(sites));
        json_object_set_new(d, "layers", json_integer(L));
        json_object_set_new(d, "reference", json_pack("{s:o,s:o}", "ppl", num(tab.ref_ppl), "ppl_se", num(tab.ref_ppl_se)));
        json_object_set_new(d, "kl_mean", matrix(tab.kl, L, S));
        json_object_set_new(d, "kl_se", matrix(tab.kl_se, L, S));
        json_object_set_new(d, "dppl", matrix(tab.dppl, L, S));
        json_object_set_new(d, "top1_agree", matrix(tab.top1, L, S));
        double elems = 0;
        json_t *sp = json_array();
        for (int j = 0; j < S; j++) {
            double n = qs_sens_site_elems(&f.m.c, o->sites[j]);
            elems += n * L;
            json_array_append_new(sp, json_pack("{s:s,s:s,s:f,s:f}", "site", qs_sens_site_name(o->sites[j]), "unit",
                                                o->sites[j] == QS_SENS_W ? "parameters" : "per_token", "elements", n,
                                                "bits_per_elem", bits_fmt));
        }
        json_object_set_new(d, "bits_fp32", json_real(32 * elems));
        json_object_set_new(d, "bits_format", json_real(bits_fmt));
        json_object_set_new(d, "bits_bf16", json_real(bits_hi));
        json_object_set_new(d, "site_params", sp);
        /* the whole greedy ranking (independent of any target) */
        order = calloc((size_t)L * S, sizeof *order);
        if (!order) { free(ks); json_decref(sites); rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
        double pred0, bits0;
        qs_sens_plan_order(&tab, &f.m.c, bits_fmt, bits_hi, order, &pred0, &bits0);
        json_t *oa = json_array();
        for (int k = 0; k < L * S; k++)
            json_array_append_new(oa, json_pack("{s:i,s:s,s:o,s:f,s:o,s:o,s:f}", "layer", order[k].layer, "site",
                                                qs_sens_site_name(o->sites[order[k].j]), "kl", num(order[k].kl), "extra_bits",
                                                order[k].extra_bits, "kl_per_bit", num(order[k].kl_per_bit), "predicted_kl",
                                                num(order[k].predicted_kl), "bits_avg", order[k].bits_avg));
        json_object_set_new(d, "plan", json_pack("{s:o,s:o,s:f}", "order", oa, "predicted_kl_format", num(pred0), "bits_avg_format", bits0));
        free(order);
        order = NULL;
        qs_sens_table_free(&tab);
        data = json_dumps(d, JSON_COMPACT);
        if (!data || qs_result_put(db, f.hash, "llm_sensitivity", o->label, ks, data, NULL, &e)) {
            free(ks); json_decref(sites);
            rc = data ? qs_cli_err(QS_EXIT_ERR, &e) : qs_cli_error(QS_EXIT_ERR, "out of memory");
            goto done;
        }
        json_decref(d);
    }
    free(ks);
    json_decref(sites);
    if (!(d = json_loads(data, 0, NULL)) || table_from_json(d, &tab, o, L)) {
        rc = qs_cli_error(QS_EXIT_ERR, "stored sensitivity result is not a %d x %d table", L, S);
        goto done;
    }
    /* the plan for a target, verified by one evaluation */
    if (o->kl_target >= 0 || o->bits_budget >= 0) {
        order = calloc((size_t)L * S, sizeof *order);
        promoted = calloc((size_t)L * S, 1);
        if (!order || !promoted) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
        double pred0, bits0;
        qs_sens_plan_order(&tab, &f.m.c, bits_fmt, bits_hi, order, &pred0, &bits0);
        int k = qs_sens_plan_choose(order, L * S, pred0, bits0, o->kl_target, o->bits_budget);
        if (o->bits_budget >= 0 && o->bits_budget < bits0)
            fprintf(stderr, "qscope: note: --bits-budget %g is below %s's own %g bits: nothing can be promoted\n", o->bits_budget,
                    o->label, bits0);
        pkey = json_deep_copy(key);
        if (o->kl_target >= 0) json_object_set_new(pkey, "kl_target", json_real(o->kl_target));
        else json_object_set_new(pkey, "bits_budget", json_real(o->bits_budget));
        char *pks = json_dumps(pkey, JSON_COMPACT | JSON_SORT_KEYS);
        if (!pks) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
        if (!o->force && !computed && qs_result_get(db, f.hash, "llm_plan", o->label, pks, &pdata, NULL, &e)) {
            free(pks);
            rc = qs_cli_err(QS_EXIT_ERR, &e);
            goto done;
        }
        if (!pdata) {
            json_t *pr = json_array();
            for (int i = 0; i < k; i++) {
                promoted[order[i].layer * S + order[i].j] = 1;
                json_array_append_new(pr, json_pack("{s:i,s:s}", "layer", order[i].layer, "site", qs_sens_site_name(o->sites[order[i].j])));
            }
            json_t *bf = json_array();
            for (int l = 0; l < L; l++) {
                json_t *r = json_array();
                for (int j = 0; j < S; j++) json_array_append_new(r, json_integer(promoted[l * S + j]));
                json_array_append_new(bf, r);
            }
            qs_eval_summary sm;
            double t0 = qs_now_s();
            if (qs_sens_verify(&f.m, &o->fmt, &o->hi, o->scaled, &tab, promoted, ids, (size_t)ntok, &su, &sm, &e)) {
                json_decref(pr); json_decref(bf); free(pks);
                rc = qs_cli_err(QS_EXIT_ERR, &e);
                goto done;
            }
            compute += qs_now_s() - t0;
            pcomputed = 1;
            json_t *meas = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:[o,o],s:o}", "kl_mean", num(sm.kl_mean), "kl_se", num(sm.kl_se),
                                     "kl_median", num(sm.kl_q[5]), "kl_p99", num(sm.kl_q[8]), "kl_max", num(sm.kl_q[10]), "ppl",
                                     num(sm.ppl), "dppl_rel", num(sm.dppl_rel), "dppl_rel_ci95", num(sm.dppl_lo), num(sm.dppl_hi),
                                     "top1_agree", num(sm.top1));
            pd = json_pack("{s:o,s:i,s:o,s:o,s:o,s:o,s:o}", "target",
                           o->kl_target >= 0 ? json_pack("{s:f}", "kl", o->kl_target) : json_pack("{s:f}", "bits", o->bits_budget),
                           "steps", k, "promoted", pr, "bf16", bf, "predicted_kl", num(k ? order[k - 1].predicted_kl : pred0),
                           "bits_avg", bits_json(qs_sens_plan_bits(&tab, &f.m.c, promoted, bits_fmt, bits_hi)), "measured", meas);
            pdata = json_dumps(pd, JSON_COMPACT);
            if (!pdata || qs_result_put(db, f.hash, "llm_plan", o->label, pks, pdata, NULL, &e)) {
                free(pks);
                rc = pdata ? qs_cli_err(QS_EXIT_ERR, &e) : qs_cli_error(QS_EXIT_ERR, "out of memory");
                goto done;
            }
            json_decref(pd);
        }
        free(pks);
        if (!(pd = json_loads(pdata, 0, NULL))) { rc = qs_cli_error(QS_EXIT_ERR, "stored plan is not JSON"); goto done; }
        json_object_update(json_object_get(d, "plan"), pd);
    }
    {
        uint8_t *none = calloc((size_t)L * S, 1);
        if (none) {
            json_object_set_new(json_object_get(d, "plan"), "bits_avg_format_split",
                                bits_json(qs_sens_plan_bits(&tab, &f.m.c, none, bits_fmt, bits_hi)));
            free(none);
        }
    }
    int wsite = 0;
    for (int j = 0; j < S; j++) wsite |= o->sites[j] == QS_SENS_W;
    int wnote = wsite && (strstr(f.wtypes, "q4") || strstr(f.wtypes, "q5") || strstr(f.wtypes, "q8") || strstr(f.wtypes, "q6"));
    char note[320];
    snprintf(note, sizeof note, "the model's weights are already quantized (%s): the w site's result is relative to that grid; "
             "activation and KV-cache results are not affected", f.wtypes);
    double secs = qs_now_s() - t_start;
    json_t *plan = json_object_get(d, "plan");
    if (o->json) {
        json_object_set_new(d, "cached", json_boolean(!computed && !pcomputed));
        if (wnote) json_object_set_new(d, "note", json_string(note));
        json_object_set_new(d, "compute_seconds", json_real(compute));
        json_object_set_new(d, "seconds", json_real(secs));
        char *s = json_dumps(d, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        json_t *ref = json_object_get(d, "reference");
        printf("model %s (%s; %s)\n", qs_esc(o->model), qs_llm_title(&f), f.wtypes);
        printf("text %s: %d tokens; ctx %d, %d chunks, %lld scored tokens; scoring: %s; reference PPL %.4f±%.4f\n", qs_esc(o->text),
               ntok, o->ctx, su.nchunks, (long long)json_integer_value(json_object_get(d, "scored_tokens")),
               o->score_all ? "all positions" : "second half of each chunk (llama.cpp)",
               json_number_value(json_object_get(ref, "ppl")), json_number_value(json_object_get(ref, "ppl_se")));
        print_table(o, d, L);
        json_t *ord = json_object_get(plan, "order");
        printf("\nplan (greedy by KL per extra bit, BF16 = %g bits, %s = %g bits/elem): top of the ranking\n", bits_hi, o->label, bits_fmt);
        printf("%4s %6s %12s %10s %14s %14s %10s\n", "step", "layer", "site", "KL", "extra bits", "predicted KL", "avg bits");
        printf("%4d %6s %12s %10s %14s %14.5f %10.3f\n", 0, "", "(all at format)", "", "",
               json_number_value(json_object_get(plan, "predicted_kl_format")), json_number_value(json_object_get(plan, "bits_avg_format")));
        size_t show = json_array_size(ord) < 10 ? json_array_size(ord) : 10;
        json_t *st = json_object_get(plan, "steps");
        if (json_is_integer(st) && (size_t)json_integer_value(st) > show) show = (size_t)json_integer_value(st);
        for (size_t i = 0; i < show; i++) {
            json_t *x = json_array_get(ord, i);
            printf("%4zu %6lld %12s %10.5f %14.0f %14.5f %10.3f%s\n", i + 1, (long long)json_integer_value(json_object_get(x, "layer")),
                   json_string_value(json_object_get(x, "site")), json_number_value(json_object_get(x, "kl")),
                   json_number_value(json_object_get(x, "extra_bits")), json_number_value(json_object_get(x, "predicted_kl")),
                   json_number_value(json_object_get(x, "bits_avg")),
                   json_is_integer(st) && i + 1 == (size_t)json_integer_value(st) ? "   <- plan" : "");
        }
        if (json_is_integer(st)) {
            json_t *m = json_object_get(plan, "measured"), *ba = json_object_get(plan, "bits_avg");
            char bw[32], bav[32];
            print_bits(bw, sizeof bw, json_object_get(ba, "weights"));
            print_bits(bav, sizeof bav, json_object_get(ba, "activations"));
            printf("plan: %lld promotions to BF16; average bits: weights %s, activations %s, all %.3f\n",
                   (long long)json_integer_value(st), bw, bav, json_number_value(json_object_get(ba, "all")));
            printf("plan verified by one evaluation: predicted KL %.5f (sum of isolated effects), measured KL %.5f±%.5f, "
                   "dPPL %+.2f%%, same top %.2f%%\n", json_number_value(json_object_get(plan, "predicted_kl")),
                   json_number_value(json_object_get(m, "kl_mean")), json_number_value(json_object_get(m, "kl_se")),
                   100 * json_number_value(json_object_get(m, "dppl_rel")), 100 * json_number_value(json_object_get(m, "top1_agree")));
            printf("(isolated effects are not additive: predicted and measured KL differ)\n");
        } else
            printf("(give --kl-target X or --bits-budget B for a plan verified by one evaluation)\n");
        if (wnote) printf("note: %s\n", note);
        printf("%s in %.1f s (%.1f s computing)\n", computed || pcomputed ? "computed" : "all results reused from the database (--force recomputes)",
               secs, compute);
    }
done:
    qs_sens_table_free(&tab);
    free(order);
    free(promoted);
    json_decref(key); json_decref(d); json_decref(pkey); json_decref(pd);
    free(data); free(pdata);
    if (db) qs_db_close(db);
    qs_llm_file_free(&f);
    free(ids);
    free(text);
    free(o);
    return rc;
}
