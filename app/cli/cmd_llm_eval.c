/*
** `qscope llm eval`: perplexity of a model on a fixed text under its FP32 reference and under
** low-precision configurations, with per-token KL divergence, top-1 agreement and Delta p against
** the reference (llama.cpp's llama-perplexity --kl-divergence quantities; docs/llm.md "Model
** evaluation").  Each variant's result is stored in the `result` table (kind "llm_eval") keyed by
** model hash, text hash, options and tool version, and reused unless --force.
*/
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cblas.h>
#include <xxhash.h>

#include "cli.h"
#include "../../store/json_out.h"
#include "../../store/io_err.h"
#include "quant_opts.h"
#include "../../kernels/llm_wtype.h"
#include "llm_par.h"
#include "llm_progress.h"
#include "stop_signal.h"
#include "../../kernels/qs_stop.h"
#include "par.h"
#include "llm_text_run.h"
#include "llm_eval_out.h"
#include "llm_imatrix_opt.h"
#include "llm_plan_file.h"
#include "llm_wtrans_opts.h"
#include "../../analysis/llm_text.h"
#include "../../analysis/llm_eval.h"
#include "../../analysis/llm_eval_service.h"
#include "../../analysis/llm_eval_stats.h"
#include "../../store/container.h"
#include "../../store/llm_load.h"
#include "../../kernels/blas_threads.h"
#include "../../kernels/qs_version.h"

/* The default evaluation text (written by `make data`), relative to the working directory. */
#define QS_EVAL_DEFAULT_TEXT QS_LLM_DEFAULT_TEXT   /* store/llm_load.h */
#define MAX_CFG 32
#define MAX_PLAN 4
#define CMD "llm eval"


/* One format of an llm command (cli.h): blocks along the input channels only. */
int qs_llm_parse_fmt(const char *cmd, const char *spec, qs_apply *out)
{
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    if (qs_quant_parse_list(cmd, spec, &base, out, 1) != 1) return -1;
    if (out->axis != 1) return qs_cli_usage(cmd, "%s: only blocks along the input channels (axis 1) make sense here", spec), -1;
    if (out->gran == QS_GRAN_COL) return qs_cli_usage(cmd, "%s: per-column granularity is not supported here", spec), -1;
    return 0;
}

/* Whether the per-format option `opt` (NAME=VALUE) is written in the format spec F:OPT:OPT. */
static int has_opt(const char *spec, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':'))
        if (!strncmp(p + 1, opt, n) && (!p[1 + n] || p[1 + n] == ':')) return 1;
    return 0;
}

/* A per-format option is honoured or refused, never only named (cli.h): weights take
** scale=tensor|row|col (one scale per matrix, output row or input column); activations and KV-cache
** rows are rounded a token at a time, so they take scale=row only and refuse gran=tensor (which
** qs_llm_fakeq_row would run per token).  scale=none, which qs_apply cannot tell from no option,
** would be ignored under the default per-row scaling: --unscaled-casts says it instead. */
int qs_llm_fmt_site_check(const char *cmd, const char *what, const char *spec, const qs_apply *ap, const char *rows)
{
    if (has_opt(spec, "scale=none"))
        return qs_cli_usage(cmd, "%s%s: scale=none is not supported here (--unscaled-casts turns the scaling off for "
                            "every site)", what, spec);
    if (!rows) return 0;
    if (ap->cscale && ap->cscale != QS_CSCALE_ROW)
        return qs_cli_usage(cmd, "%s%s: scale=%s is not supported for %s (rounded one token at a time: only "
                            "scale=row)", what, spec, qs_cscale_name(ap->cscale), rows);
    if (has_opt(spec, "gran=tensor"))
        return qs_cli_usage(cmd, "%s%s: gran=tensor is not supported for %s (rounded one token at a time: "
                            "gran=row)", what, spec, rows);
    return 0;
}

static int cfg_scale_check(const char *cmd, const char *opt, const char *key, const char *val, const qs_apply *ap)
{
    char what[64];
    snprintf(what, sizeof what, "%s: %s=", opt, key);
    return qs_llm_fmt_site_check(cmd, what, val, ap,
                                 !strcmp(key, "w") ? NULL : !strcmp(key, "a") ? "activations" : "the KV cache");
}

/* rot=V or rht=V of a --config (kernels/llm_rot.h) into c->xs; lab: its canonical text ("" when off). */
static int parse_xform(const char *cmd, const char *opt, const char *spec, const char *key, const char *val, unsigned *seen,
                       qs_eval_cfg *c, char *lab, size_t n)
{
    const unsigned bit = !strcmp(key, "rot") ? 1u : 2u;
    if (*seen & bit) return qs_cli_usage(cmd, "%s '%s': %s given twice", opt, spec, key);
    *seen |= bit;
    qs_err e = {{0}};
    if (qs_llm_xspec_parse(&c->xs, key, val, &e)) return qs_cli_usage(cmd, "%s: %s", opt, e.msg);
    qs_llm_xspec_text(&c->xs, key, lab, n);
    return 0;
}

/* Calibration transforms are `llm eval`'s (its service builds their models): 0, or the usage error. */
static int wtrans_cmd(const char *cmd, const char *opt)
{
    return strcmp(cmd, CMD) ? qs_cli_usage(cmd, "%s: smooth=, :gptq and :awq are `llm eval` configurations", opt) : 0;
}

/* w=F[:gptq...|:awq...]: the transform suffixes into t (llm_wtrans_opts.h), *val pointed at the format. */
static int wspec(const char *cmd, const char *opt, const char **val, qs_wtrans *t, char *fmt, size_t fcap, char *suf, size_t scap)
{
    int rc = qs_llm_wtrans_wspec(cmd, opt, *val, t, fmt, fcap, suf, scap);
    if (rc || !suf[0]) return rc;
    if ((rc = wtrans_cmd(cmd, opt))) return rc;
    if (!strcmp(fmt, "fp32")) return qs_cli_usage(cmd, "%s: %s rounds weights: give a weight format", opt, suf + 1);
    *val = fmt;
    return 0;
}

/* A weight format GPTQ cannot round on fixed grids is a usage error, before any work. */
static int wtrans_fmt_check(const char *cmd, const char *opt, const char *spec, const qs_eval_cfg *c)
{
    qs_err e = {{0}};
    if (c->wt.wround == QS_WT_GPTQ && c->has_w && qs_gptq_check(&c->w, &e)) return qs_cli_usage(cmd, "%s '%s': %s", opt, spec, e.msg);
    return 0;
}

/* SPEC = w=F,a=F,kv=F,resq=MODE,rot=R,rht=16,smooth=ALPHA (any subset, each at most once); F as in
** `analyze -f` (cli.h), with w's transform suffixes (llm_wtrans_opts.h) or :imatrix=FILE. */
int qs_llm_parse_config(const char *cmd, const char *opt, const char *spec, qs_eval_cfg *c)
{
    memset(c, 0, sizeof *c);
    char *dup = strdup(spec), *save = NULL;
    if (!dup) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    size_t k = 0;
    int rc = 0;
    unsigned seen = 0;   /* rot, rht given */
    for (char *it = strtok_r(dup, ",", &save); it && !rc; it = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(it, '=');
        if (!eq || eq == it || !eq[1]) { rc = qs_cli_usage(cmd, "%s: '%s' is not KEY=VALUE (keys w, a, kv, resq, rot, rht)", opt, it); break; }
        *eq = 0;
        const char *key = it, *val = eq + 1;
        char lab[160] = "";
        int *has = NULL;
        qs_apply *ap = NULL;
        if (!strcmp(key, "w")) { has = &c->has_w; ap = &c->w; }
        else if (!strcmp(key, "a")) { has = &c->has_a; ap = &c->a; }
        else if (!strcmp(key, "kv")) { has = &c->has_kv; ap = &c->kv; }
        else if (!strcmp(key, "smooth")) {
            if (c->wt.smooth) { rc = qs_cli_usage(cmd, "%s '%s': smooth given twice", opt, spec); break; }
            if ((rc = wtrans_cmd(cmd, opt)) || (rc = qs_llm_wtrans_smooth(cmd, opt, val, &c->wt, lab, sizeof lab))) break;
        } else if (!strcmp(key, "resq")) {
            if (c->resq) { rc = qs_cli_usage(cmd, "%s '%s': resq given twice", opt, spec); break; }
            if (!strcmp(val, "dense")) c->resq = QS_RESQ_DENSE;
            else if (!strcmp(val, "2:4")) c->resq = QS_RESQ_24;
            else if (strcmp(val, "none")) { rc = qs_cli_usage(cmd, "%s: resq is dense, 2:4 or none, not '%s'", opt, val); break; }
            snprintf(lab, sizeof lab, "%s", val);
        } else if (!strcmp(key, "rot") || !strcmp(key, "rht")) {
            if ((rc = parse_xform(cmd, opt, spec, key, val, &seen, c, lab, sizeof lab))) break;
        } else { rc = qs_cli_usage(cmd, "%s: unknown key '%s' (w, a, kv, resq, rot, rht, smooth)", opt, key); break; }
        if (has) {
            if (*has) { rc = qs_cli_usage(cmd, "%s '%s': %s given twice", opt, spec, key); break; }
            if (strchr(val, ',')) { rc = qs_cli_usage(cmd, "%s: one format per key", opt); break; }
            const char *imat = ap == &c->w ? qs_imatrix_opt_split(eq + 1) : NULL;
            if (!strcmp(val, "fp32") && imat) { rc = qs_cli_usage(cmd, "%s: w=fp32 takes no importance matrix", opt); break; }
            char fmt[200], suf[96] = "";
            if (ap == &c->w && (rc = wspec(cmd, opt, &val, &c->wt, fmt, sizeof fmt, suf, sizeof suf))) break;
            if (!strcmp(val, "fp32")) continue;
            if (qs_llm_parse_fmt(cmd, val, ap)) { rc = QS_EXIT_USAGE; break; }
            if ((rc = cfg_scale_check(cmd, opt, key, val, ap))) break;
            *has = 1;
            qs_quant_label(ap, val, lab, sizeof lab);
            strncat(lab, suf, sizeof lab - strlen(lab) - 1);
            if (imat && (rc = qs_imatrix_opt_config(cmd, opt, imat, c, lab, sizeof lab))) break;
        }
        if (lab[0] && k < sizeof c->label) k += (size_t)snprintf(c->label + k, sizeof c->label - k, "%s%s=%s", k ? "," : "", key, lab);
    }
    free(dup);
    if (!rc) rc = wtrans_fmt_check(cmd, opt, spec, c);
    if (rc) { qs_eval_cfgs_free(c, 1); return rc; }
    if (qs_wtrans_on(&c->wt) && (c->imat || qs_llm_xspec_any(&c->xs))) {   /* each builds its own model from the FP32 one */
        qs_eval_cfgs_free(c, 1);
        return qs_cli_usage(cmd, "%s '%s': smooth=, :gptq and :awq cannot be combined with rot=, rht= or imatrix=", opt, spec);
    }
    if (c->resq && !c->has_a) return qs_cli_usage(cmd, "%s '%s': resq corrects activation rounding: give a=F", opt, spec);
    if (c->imat && qs_llm_xspec_any(&c->xs)) {   /* the importances are of the untransformed weights' inputs */
        qs_eval_cfgs_free(c, 1);
        return qs_cli_usage(cmd, "%s '%s': imatrix= cannot be combined with rot= or rht= (the importance matrix is of "
                            "the untransformed model)", opt, spec);
    }
    if (!c->label[0]) snprintf(c->label, sizeof c->label, "fp32");
    return 0;
}

typedef struct eval_opts {
    qs_evout_opts out;        /* --ci, --paired, --csv (llm_eval_out.h) */
    const char *model, *text, *save_ids, *calib;
    int ctx, chunks, score_all, json, force, scaled, until_kl, calib_chunks;
    qs_llm_weights weights;   /* --weights */
    double until;             /* --until-ci: target width of the 95% intervals (0: off) */
    qs_eval_cfg cfg[MAX_CFG];
    int ncfg;
    qs_plan_file plan[MAX_PLAN];   /* --plan FILE (llm_plan_file.h): plan[i] is configuration plan_cfg[i] */
    int nplan, plan_cfg[MAX_PLAN];
} eval_opts;

/* --until-ci X (the dPPL interval's width, relative: 0.01 = one percentage point) or kl:X (the KL
** mean's, in nats). */
static int parse_until(const char *v, eval_opts *o)
{
    o->until_kl = !strncmp(v, "kl:", 3);
    const char *x = o->until_kl ? v + 3 : v;
    char *end = NULL;
    errno = 0;
    double w = *x ? strtod(x, &end) : NAN;
    if (!end || *end || errno || !isfinite(w) || w <= 0)
        return qs_cli_usage(CMD, "--until-ci: '%s' is not a positive width (X for the dPPL interval, e.g. 0.01; kl:X for "
                            "the KL mean's, in nats)", v);
    o->until = w;
    return 0;
}

static int parse_opts(int argc, char **argv, eval_opts *o)
{
    static const struct option lo[] = {
        QS_EVOUT_LONGOPTS,
        {"model", required_argument, 0, 'm'}, {"text", required_argument, 0, 't'}, {"ctx", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'k'}, {"config", required_argument, 0, 'C'}, {"score", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'}, {"force", no_argument, 0, 'F'}, {"unscaled-casts", no_argument, 0, 'u'},
        {"save-ids", required_argument, 0, 'I'}, {"until-ci", required_argument, 0, 'U'}, {"plan", required_argument, 0, 'N'},
        {"calib", required_argument, 0, 'L'}, {"calib-chunks", required_argument, 0, 'K'}, {"weights", required_argument, 0, 'W'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->scaled = 1;
    o->calib_chunks = QS_CALIB_CHUNKS;
    optind = 1;
    opterr = 0;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        switch (ch) {
        case 'Q': case 'P': case 'V': if ((rc = qs_evout_opt(CMD, ch, optarg, argc, argv, &o->out))) return rc; break;
        case 'm': o->model = optarg; break;
        case 't': o->text = optarg; break;
        case 'c': if ((rc = qs_cli_parse_int(CMD, "--ctx", optarg, 4, 1 << 16, &o->ctx))) return rc; break;
        case 'k': if ((rc = qs_cli_parse_int(CMD, "--chunks", optarg, 1, 1 << 20, &o->chunks))) return rc; break;
        case 'C':
            if (o->ncfg == MAX_CFG) return qs_cli_usage(CMD, "at most %d --config", MAX_CFG);
            if ((rc = qs_llm_parse_config(CMD, "--config", optarg, &o->cfg[o->ncfg]))) return rc;
            for (int i = 0; i < o->ncfg; i++)   /* the same label is the same configuration (and cache key) */
                if (!strcmp(o->cfg[i].label, o->cfg[o->ncfg].label)) {
                    fprintf(stderr, "qscope: %s: note: --config %s repeats configuration %d (%s): evaluated once\n", CMD,
                            optarg, i + 1, o->cfg[i].label);
                    qs_eval_cfgs_free(&o->cfg[o->ncfg], 1);
                    memset(&o->cfg[o->ncfg], 0, sizeof o->cfg[o->ncfg]);
                    o->ncfg--;
                    break;
                }
            o->ncfg++;
            break;
        case 'N':
            if (o->nplan == MAX_PLAN || o->ncfg == MAX_CFG)
                return qs_cli_usage(CMD, "at most %d --plan and %d configurations", MAX_PLAN, MAX_CFG);
            if ((rc = qs_plan_file_cfg(CMD, optarg, &o->plan[o->nplan], &o->cfg[o->ncfg]))) return rc;
            o->plan_cfg[o->nplan++] = o->ncfg++;
            break;
        case 's': if ((rc = qs_llm_parse_score(CMD, optarg, &o->score_all))) return rc; break;
        case 'j': o->json = 1; break;
        case 'F': o->force = 1; break;
        case 'u': o->scaled = 0; break;
        case 'I': o->save_ids = optarg; break;
        case 'U': if ((rc = parse_until(optarg, o))) return rc; break;
        case 'L': o->calib = optarg; break;
        case 'K': if ((rc = qs_cli_parse_int(CMD, "--calib-chunks", optarg, 1, 1 << 20, &o->calib_chunks))) return rc; break;
        case 'W':
            if (!strcmp(optarg, "mapped")) o->weights = QS_LLM_WEIGHTS_MAPPED;
            else if (!strcmp(optarg, "f32")) o->weights = QS_LLM_WEIGHTS_F32;
            else if (!strcmp(optarg, "auto")) o->weights = QS_LLM_WEIGHTS_AUTO;
            else return qs_cli_usage(CMD, "--weights is mapped, f32 or auto, not '%s'", optarg);
            break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if ((rc = qs_evout_check(CMD, &o->out, o->json, o->ncfg, -1))) return rc;
    if (o->until > 0 && !o->ncfg) return qs_cli_usage(CMD, "--until-ci measures the configurations' intervals: give a --config");
    if (!o->model) {
        if (access(QS_LLM_DEFAULT_MODEL, R_OK) == 0) o->model = QS_LLM_DEFAULT_MODEL;
        else return qs_cli_usage(CMD, "--model PATH is required (the default %s is missing: run `make data`)", QS_LLM_DEFAULT_MODEL);
    }
    if (!o->text) {
        if (access(QS_EVAL_DEFAULT_TEXT, R_OK) == 0) o->text = QS_EVAL_DEFAULT_TEXT;
        else return qs_cli_usage(CMD, "--text FILE is required (the default %s is missing: run `make data`)", QS_EVAL_DEFAULT_TEXT);
    }
    return 0;
}

const char *qs_llm_title(const qs_llm_file *f) { return qs_esc(f->name[0] ? f->name : f->arch); }

/* ---------------------------------------------------------------- printing */

/* What is evaluated, printed before the computation starts. */
static void print_header(const eval_opts *o, const qs_llm_text_run *t)
{
    printf("model %s (%s; %s)\nweights: %s\n", qs_esc(o->model), qs_llm_title(&t->f), t->f.wtypes, t->weights);
    printf("text %s: %d tokens; ctx %d, %s%d chunks; scoring: %s; BOS %s\n", qs_esc(o->text), t->ntok, o->ctx,
           o->until > 0 ? "up to " : "", t->su.nchunks,
           o->score_all ? "all positions 0..ctx-2 of each chunk (--score all)"
                        : "second half of each chunk, positions ctx/2..ctx-2 (llama.cpp)",
           t->su.bos >= 0 ? "replaces the first token of each chunk" : "not added (the vocabulary does not add BOS)");
    printf("configs: reference fp32");
    for (int i = 0; i < o->ncfg; i++) printf(", %s", o->cfg[i].label);
    if (o->until > 0)
        printf("\nuntil the 95%% interval of every config's %s is narrower than %g%s", o->until_kl ? "KL mean" : "dPPL", o->until,
               o->until_kl ? " nats" : "");
    printf("\n");
    fflush(stdout);
}

static void print_table(const eval_opts *o, const qs_llm_text_run *t, const qs_eval_result *res, const qs_evout *ev)
{
    if (o->until > 0) printf("%d chunks evaluated%s\n", t->su.nchunks, res->until_met ? " (the intervals are narrow enough)"
                                                                              : " (all: the intervals are still wider)");
    qs_evout_table(&o->out, ev, res, qs_eval_ntok(&t->su));   /* the statistics, llm_eval_out.h */
}

/* Non-finite values are never silent, and a variant without one finite row reads as failed. */
static void warn_nonfinite(const eval_opts *o, const qs_eval_result *res, size_t ntok)
{
    for (size_t i = 0; i <= (size_t)o->ncfg; i++) {
        json_t *v = i ? json_array_get(res->cfgs, i - 1) : res->ref, *nf = json_object_get(v, "nonfinite");
        json_int_t lr = json_integer_value(json_object_get(nf, "logit_rows")), av = json_integer_value(json_object_get(nf, "activation_values"));
        json_t *fs = json_object_get(nf, "first_site");
        char where[96] = "";
        if (json_is_object(fs))
            snprintf(where, sizeof where, ", first at layer %lld %s", (long long)json_integer_value(json_object_get(fs, "layer")),
                     json_string_value(json_object_get(fs, "site")));
        const char *name = i ? o->cfg[i - 1].label : "reference";
        if (qs_evstats_failed(v, NULL))
            fprintf(stderr, "qscope: warning: %s: FAILED: no finite logit row (%lld of %zu non-finite), no statistics; %lld "
                    "non-finite activation values%s\n", name, (long long)lr, ntok, (long long)av, where);
        else if (lr || av)
            fprintf(stderr, "qscope: warning: %s: %lld non-finite logit rows (left out of the statistics), %lld non-finite "
                    "activation values%s\n", name, (long long)lr, (long long)av, where);
    }
}

static void print_json(const eval_opts *o, const qs_llm_text_run *t, const qs_eval_result *res, const qs_evout *ev,
                       const char *note, double secs)
{
    json_t *j = json_object();
    json_object_set_new(j, "model", qs_llm_model_json(o->model, &t->f));
    json_object_set_new(j, "text", qs_llm_text_json(o->text, t->thash, t->tlen));
    json_object_set_new(j, "tokens", json_integer(t->ntok));
    json_object_set_new(j, "scored_tokens", json_integer((json_int_t)qs_eval_ntok(&t->su)));
    json_object_set_new(j, "ctx", json_integer(o->ctx));
    json_object_set_new(j, "chunks", json_integer(t->su.nchunks));
    json_object_set_new(j, "score", json_string(o->score_all ? "all" : "half"));
    json_object_set_new(j, "bos", t->su.bos >= 0 ? json_integer(t->su.bos) : json_null());
    json_object_set_new(j, "reference", json_incref(res->ref));
    json_object_set_new(j, "configs", json_incref(res->cfgs));
    qs_evout_json(&o->out, ev, res, j);
    if (o->until > 0)
        json_object_set_new(j, "until_ci", json_pack("{s:s,s:f,s:b}", "of", o->until_kl ? "kl_mean" : "dppl", "width", o->until,
                                                     "met", res->until_met));
    if (note) json_object_set_new(j, "note", json_string(note));
    json_object_set_new(j, "weights", json_pack("{s:s,s:s}", "mode", t->f.nwmaps ? "mapped" : "f32", "choice", t->weights));
    json_object_set_new(j, "peak_rss_bytes", json_integer((json_int_t)qs_peak_rss()));   /* VmHWM, this process */
    json_object_set_new(j, "compute_seconds", json_real(res->compute_seconds));
    json_object_set_new(j, "seconds", json_real(secs));
    char *s = json_dumps(j, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

/* The answer as a table, JSON and/or CSV, with its intervals (llm_eval_out.h). */
static int print_answer(const eval_opts *o, const qs_llm_text_run *t, const qs_eval_result *res, const char *note, double secs)
{
    qs_evout ev;
    qs_err e = {{0}};
    if (qs_evout_compute(&o->out, res, &ev, &e)) { qs_evout_free(&ev); return qs_cli_err(QS_EXIT_ERR, &e); }
    const qs_evout_run run = {o->model, o->text, o->score_all ? "all" : "half", o->ctx, t->su.nchunks, qs_eval_ntok(&t->su)};
    if (o->json) print_json(o, t, res, &ev, note, secs);
    else if (!o->out.csv || strcmp(o->out.csv, "-")) {
        print_table(o, t, res, &ev);
        if (note) printf("note: %s\n", note);
        printf("%s in %.1f s (%.1f s computing)\n", res->computed ? "computed" : "all results reused from the database (--force recomputes)",
               secs, res->compute_seconds);
        if (t->f.nwmaps) printf("peak resident set %.2f GiB (VmHWM; weights mapped from a %.2f GiB file)\n",
                              qs_peak_rss() / 1073741824.0, t->f.size / 1073741824.0);
    }
    int rc = qs_evout_write_csv(&o->out, &ev, res, &run);
    qs_evout_free(&ev);
    return rc;
}

/* ---------------------------------------------------------------- command */

/* Ctrl-C / SIGTERM: what the run kept, and the exit status 128 + signal. */
static int interrupted(const qs_eval_result *res)
{
    if (qs_par_rank() == 0)
        fprintf(stderr, "qscope: %s: stopped by %s; %d chunk%s computed and stored by this run (of %d to compute): the same "
                "command continues from there\n", CMD, qs_stop_name(), res->chunks_computed, res->chunks_computed == 1 ? "" : "s",
                res->chunks_todo);
    return qs_stop_status();
}

int qs_cmd_llm_eval(qs_cli *cli, int argc, char **argv)
{
    eval_opts *o = calloc(1, sizeof *o);
    if (!o) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    int rc = parse_opts(argc, argv, o);
    if (rc) {
        for (int i = 0; i < o->nplan; i++) qs_plan_file_free(&o->plan[i]);
        qs_eval_cfgs_free(o->cfg, o->ncfg);
        free(o);
        return rc;
    }
    const double t_start = qs_now_s();
    qs_llm_text_run t;
    qs_llm_calib_text cal = {0};
    qs_db *db = NULL;
    qs_eval_result res = {0};
    qs_err e = {{0}};
    qs_stop_signals_default();   /* until the computation, Ctrl-C loses nothing */
    if ((rc = qs_llm_text_run_open_w(&t, CMD, o->model, o->text, o->ctx, o->chunks, o->score_all, o->save_ids, o->weights)))
        goto done;
    if ((rc = qs_evout_check(CMD, &o->out, o->json, o->ncfg, t.su.nchunks))) goto done;
    for (int i = 0; i < o->nplan && !rc; i++)   /* a plan for this model, as per-layer numerics */
        rc = qs_plan_file_bind_cfg(CMD, &o->plan[i], &o->cfg[o->plan_cfg[i]], &t.f, o->scaled);
    if (rc) goto done;
    if ((rc = qs_llm_calib_open(&cal, CMD, o->calib, o->calib_chunks, &t, o->cfg, o->ncfg))) goto done;
    if (!(db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto done; }
    const int rank0 = qs_par_rank() == 0;
    if (rank0 && !o->json && !(o->out.csv && !strcmp(o->out.csv, "-"))) {   /* not into a CSV on stdout */
        print_header(o, &t);
        qs_llm_calib_print(&cal, o->calib);
    }
    qs_llm_progress pg;
    qs_llm_progress_init(&pg, CMD, o->ctx, o->until > 0);
    qs_eval_request rq = {o->text, t.thash, &t.f, t.ids, (size_t)t.ntok, t.su, o->scaled, o->force, o->cfg, o->ncfg,
                          qs_llm_shard_run, CMD, qs_par_rank(), o->until, o->until_kl, rank0 ? qs_llm_progress_tick : NULL, &pg,
                          o->calib ? &cal.src : NULL};
    qs_stop_signals_on();
    int src = qs_eval_service(db, &rq, &res, &e);
    qs_llm_progress_end(&pg);
    if (src) { rc = qs_stop_requested() ? interrupted(&res) : qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (qs_par_rank() > 0) goto done;   /* rank 0 stores and prints */
    t.su.nchunks = res.nchunks;         /* fewer when --until-ci was met */
    int weight_note = 0;
    for (int i = 0; i < o->ncfg; i++) weight_note |= o->cfg[i].has_w;
    const char *wt = t.f.wtypes;
    weight_note = weight_note && (strstr(wt, "q4") || strstr(wt, "q5") || strstr(wt, "q8") || strstr(wt, "q6"));
    char wnote[320];
    snprintf(wnote, sizeof wnote, "the model's weights are already quantized (%s): a weight format's result is relative to that "
             "grid; activation and KV-cache results are not affected", wt);
    warn_nonfinite(o, &res, qs_eval_ntok(&t.su));
    qs_imatrix_opt_notes(CMD, o->cfg, o->ncfg);
    rc = print_answer(o, &t, &res, weight_note ? wnote : NULL, qs_now_s() - t_start);
done:
    qs_eval_result_free(&res);
    qs_eval_cfgs_free(o->cfg, o->ncfg);
    if (db) qs_db_close(db);
    for (int i = 0; i < o->nplan; i++) qs_plan_file_free(&o->plan[i]);
    qs_llm_calib_close(&cal);
    qs_llm_text_run_free(&t);
    free(o);
    return rc;
}

/* ---------------------------------------------------------------- bench case */

/* Best-of-5 OpenBLAS SGEMM rate (GFLOP/s) of the model's dominant product at ctx rows:
** x[ctx][dim] . W_up[ffn][dim]^T, with the library's default threads (both cores). */
static double sgemm_rate(const qs_llm_model *m, int rows)
{
    const int K = m->c.dim, N = m->c.ffn;
    const float *W = m->L[0].w_up ? m->L[0].w_up : m->L[0].moe.up;   /* a mixture of experts: expert 0's */
    float *x = malloc((size_t)rows * K * sizeof(float)), *y = malloc((size_t)rows * N * sizeof(float));
    if (!x || !y) { free(x); free(y); return 0; }
    for (size_t i = 0; i < (size_t)rows * K; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = qs_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, N, K, 1.0f, x, K, W, K, 0.0f, y, N);
        double t = qs_now_s() - t0;
        if (r && t < best) best = t;   /* the first call warms up */
    }
    free(x); free(y);
    return 2.0 * rows * N * K / best * 1e-9;
}

int qs_llm_eval_bench(const qs_llm_model *ref, const qs_eval_variant *cfg, const char *label, int ctx, int chunks, qs_err *e)
{
    const size_t n = (size_t)ctx * chunks;
    int32_t *ids = malloc(n * sizeof(int32_t));
    if (!ids) return qs_fail(e, "out of memory");
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int32_t)((s >> 33) % ref->c.vocab); }
    const double params = (double)ref->arena_len, sg = sgemm_rate(ref, ctx);
    printf("\nllm eval case: ctx %d, %d chunks of synthetic ids, second-half scoring; FLOPs = 2 x %.4g parameters per "
           "token; OpenBLAS SGEMM %dx%dx%d: %.1f GFLOP/s (core %s, %d threads)\n", ctx, chunks, params, ctx, ref->c.ffn,
           ref->c.dim, sg, openblas_get_corename(), qs_blas_threads());
    printf("%-44s %12s %10s %10s\n", "variants (each over every chunk)", "tokens/s", "GFLOP/s", "% SGEMM");
    int rc = 0;
    for (int pass = 0; pass < (cfg ? 2 : 1) && !rc; pass++) {
        qs_eval_setup su = {ctx, chunks, 0, -1};
        qs_eval_out out;
        int want = 1;
        double t0 = qs_now_s();
        if (qs_llm_eval_run(ref, pass ? cfg : NULL, &want, pass, ids, n, &su, NULL, NULL, &out, e)) { rc = -1; break; }
        for (int v = 0; v < out.nvar && !rc; v++) {
            qs_eval_summary sm;
            rc = qs_eval_summarize(&out.var[0], v ? &out.var[v] : NULL, out.n, &sm, e);
        }
        double t = qs_now_s() - t0, tps = (double)(pass + 1) * n / t, gf = tps * 2 * params * 1e-9;
        qs_eval_out_free(&out);
        char lab[200];
        snprintf(lab, sizeof lab, pass ? "reference + %s" : "reference fp32", label);
        if (!rc) printf("%-44s %12.1f %10.1f %9.0f%%\n", lab, tps, gf, sg > 0 ? 100 * gf / sg : 0);
    }
    free(ids);
    return rc;
}
