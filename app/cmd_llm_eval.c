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
#include "../store/json_out.h"
#include "../store/io_err.h"
#include "quant_opts.h"
#include "llm_par.h"
#include "par.h"
#include "../analysis/llm_eval.h"
#include "../analysis/llm_eval_shard.h"
#include "../analysis/results.h"
#include "../store/container.h"
#include "../store/llm_load.h"
#include "../kernels/blas_threads.h"
#include "../kernels/qs_version.h"

/* The default evaluation text (written by `make data`), relative to the working directory. */
#define QS_EVAL_DEFAULT_TEXT QS_LLM_DEFAULT_TEXT   /* store/llm_load.h */
#define MAX_CFG 32
#define CMD "llm eval"

typedef struct eval_cfg {
    char label[256];
    qs_apply w, a, kv;
    int has_w, has_a, has_kv;
    qs_llm_resq resq;
    qs_llm_model wm;          /* rounded weights (has_w) */
    const qs_llm_model *m;
} eval_cfg;

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

/* SPEC = w=F,a=F,kv=F,resq=MODE (any subset, each at most once); F as in `analyze -f`. */
static int parse_config(const char *spec, eval_cfg *c)
{
    memset(c, 0, sizeof *c);
    char *dup = strdup(spec), *save = NULL;
    if (!dup) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    size_t k = 0;
    int rc = 0;
    for (char *it = strtok_r(dup, ",", &save); it && !rc; it = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(it, '=');
        if (!eq || eq == it || !eq[1]) { rc = qs_cli_usage(CMD, "--config: '%s' is not KEY=VALUE (keys w, a, kv, resq)", it); break; }
        *eq = 0;
        const char *key = it, *val = eq + 1;
        char lab[96] = "";
        int *has = NULL;
        qs_apply *ap = NULL;
        if (!strcmp(key, "w")) { has = &c->has_w; ap = &c->w; }
        else if (!strcmp(key, "a")) { has = &c->has_a; ap = &c->a; }
        else if (!strcmp(key, "kv")) { has = &c->has_kv; ap = &c->kv; }
        else if (!strcmp(key, "resq")) {
            if (c->resq) { rc = qs_cli_usage(CMD, "--config '%s': resq given twice", spec); break; }
            if (!strcmp(val, "dense")) c->resq = QS_RESQ_DENSE;
            else if (!strcmp(val, "2:4")) c->resq = QS_RESQ_24;
            else if (strcmp(val, "none")) { rc = qs_cli_usage(CMD, "--config: resq is dense, 2:4 or none, not '%s'", val); break; }
            snprintf(lab, sizeof lab, "%s", val);
        } else { rc = qs_cli_usage(CMD, "--config: unknown key '%s' (w, a, kv, resq)", key); break; }
        if (has) {
            if (*has) { rc = qs_cli_usage(CMD, "--config '%s': %s given twice", spec, key); break; }
            if (strchr(val, ',')) { rc = qs_cli_usage(CMD, "--config: one format per key"); break; }
            if (!strcmp(val, "fp32")) continue;
            if (qs_llm_parse_fmt(CMD, val, ap)) { rc = QS_EXIT_USAGE; break; }
            *has = 1;
            qs_quant_label(ap, val, lab, sizeof lab);
        }
        if (lab[0] && k < sizeof c->label) k += (size_t)snprintf(c->label + k, sizeof c->label - k, "%s%s=%s", k ? "," : "", key, lab);
    }
    free(dup);
    if (rc) return rc;
    if (c->resq && !c->has_a) return qs_cli_usage(CMD, "--config '%s': resq corrects activation rounding: give a=F", spec);
    if (!c->label[0]) snprintf(c->label, sizeof c->label, "fp32");
    return 0;
}

typedef struct eval_opts {
    const char *model, *text, *save_ids;
    int ctx, chunks, score_all, json, force, scaled;
    eval_cfg cfg[MAX_CFG];
    int ncfg;
} eval_opts;

static int parse_opts(int argc, char **argv, eval_opts *o)
{
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"text", required_argument, 0, 't'}, {"ctx", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'k'}, {"config", required_argument, 0, 'C'}, {"score", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'}, {"force", no_argument, 0, 'F'}, {"unscaled-casts", no_argument, 0, 'u'},
        {"save-ids", required_argument, 0, 'I'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->scaled = 1;
    optind = 1;
    opterr = 0;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 't': o->text = optarg; break;
        case 'c': if ((rc = qs_cli_parse_int(CMD, "--ctx", optarg, 4, 1 << 16, &o->ctx))) return rc; break;
        case 'k': if ((rc = qs_cli_parse_int(CMD, "--chunks", optarg, 1, 1 << 20, &o->chunks))) return rc; break;
        case 'C':
            if (o->ncfg == MAX_CFG) return qs_cli_usage(CMD, "at most %d --config", MAX_CFG);
            if ((rc = parse_config(optarg, &o->cfg[o->ncfg]))) return rc;
            o->ncfg++;
            break;
        case 's':
            if (!strcmp(optarg, "half")) o->score_all = 0;
            else if (!strcmp(optarg, "all")) o->score_all = 1;
            else return qs_cli_usage(CMD, "--score is half or all, not '%s'", optarg);
            break;
        case 'j': o->json = 1; break;
        case 'F': o->force = 1; break;
        case 'u': o->scaled = 0; break;
        case 'I': o->save_ids = optarg; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
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

/* ---------------------------------------------------------------- text */

/* The largest --text: its tokens take 4 bytes per byte of text at worst. */
#define TEXT_MAX ((size_t)1 << 30)

/* A regular file's size is checked before anything is read; a pipe is read up to the limit, one
** byte past it meaning too large. */
int qs_eval_read_text(const char *path, char **buf, size_t *len, char hash[33], qs_err *e)
{
    int fd = qs_open_regular(path, e);   /* a FIFO would block the read */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) close(fd);
    if (!f) return fd < 0 ? -1 : qs_fail(e, "%s: cannot open (%s)", path, strerror(errno));
    struct stat st = {0};
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uintmax_t)st.st_size > TEXT_MAX) {
        fclose(f);
        return qs_fail(e, "%s: %jd bytes, larger than the 1 GiB limit for a text", path, (intmax_t)st.st_size);
    }
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : (size_t)1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return qs_fail(e, "%s: out of memory (%zu bytes for the text)", path, cap); }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        if (n > TEXT_MAX) { free(b); fclose(f); return qs_fail(e, "%s: larger than the 1 GiB limit for a text", path); }
        size_t ncap = cap * 2 > TEXT_MAX + 1 ? TEXT_MAX + 1 : cap * 2;
        char *nb = realloc(b, ncap);
        if (!nb) free(b);
        b = nb;
        cap = ncap;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b); return qs_fail(e, "%s: read error (%s)", path, strerror(errno)); }
    XXH128_hash_t h = XXH3_128bits(b, n);
    snprintf(hash, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    *buf = b;
    *len = n;
    return 0;
}

int qs_eval_text_ids(const char *path, const qs_llm_file *f, const char *text, size_t tlen, int32_t **ids, int *ntok,
                     qs_err *e)
{
    *ids = NULL;
    if (!f->v.n) return qs_fail(e, "%s: the model has no vocabulary to tokenize the text", path);
    int32_t *p = malloc((tlen + 2) * sizeof(int32_t));
    if (!p) return qs_fail(e, "%s: out of memory (%zu bytes for the tokens of the text)", path, (tlen + 2) * sizeof(int32_t));
    /* as llama-perplexity tokenizes (add_special): a vocabulary that adds BOS gets it at the start of
    ** the text too, so chunk boundaries match; BOS then also replaces the first token of each chunk */
    const int add_bos = f->v.add_bos && f->v.bos >= 0;
    if (add_bos) p[0] = f->v.bos;
    int n = qs_llm_tokenize_named(&f->v, path, text, tlen, p + add_bos,
                                  (int)(tlen + 1 > (size_t)1 << 30 ? (size_t)1 << 30 : tlen + 1), e);
    if (n < 0) { free(p); return -1; }   /* the message names the text or the tokenizer's file */
    *ids = p;
    *ntok = n + add_bos;
    return 0;
}

/* ---------------------------------------------------------------- results as JSON */

json_t *qs_llm_model_json(const char *path, const qs_llm_file *f)
{
    json_t *j = json_object();
    qs_json_set_text(j, "path", path);
    qs_json_set_text(j, "name", f->name);   /* from the file's metadata: anything, cut at 127 bytes */
    json_object_set_new(j, "hash", json_string(f->hash));
    json_object_set_new(j, "tensor_types", json_string(f->wtypes));
    return j;
}

json_t *qs_llm_text_json(const char *path, const char *hash, size_t bytes)
{
    json_t *j = json_object();
    qs_json_set_text(j, "path", path);
    json_object_set_new(j, "hash", json_string(hash));
    json_object_set_new(j, "bytes", json_integer((json_int_t)bytes));
    return j;
}

const char *qs_llm_title(const qs_llm_file *f) { return qs_esc(f->name[0] ? f->name : f->arch); }

static json_t *apply_json(const qs_apply *a, int has)
{
    if (!has) return json_string("fp32");
    char *s = qs_quant_opts_json(a);
    json_t *v = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    return v ? v : json_string(a->f->name);
}

/* The numerics of a variant (part of the cache key). */
static json_t *numerics_json(const eval_cfg *c, int scaled)
{
    if (!c) return json_pack("{s:s}", "reference", "fp32");
    return json_pack("{s:o,s:o,s:o,s:s,s:b}", "weights", apply_json(&c->w, c->has_w), "activations", apply_json(&c->a, c->has_a),
                     "kv_cache", apply_json(&c->kv, c->has_kv), "resq",
                     c->resq == QS_RESQ_DENSE ? "dense" : c->resq == QS_RESQ_24 ? "2:4" : "none", "scaled_casts", scaled);
}

static const char *const kQname[11] = {"min", "p0_1", "p1", "p5", "p10", "median", "p90", "p95", "p99", "p99_9", "max"};

static json_t *hist_json(const qs_klhist *h)
{
    json_t *ed = json_array(), *ct = json_array();
    for (int k = 0; k <= QS_KLHIST_BINS; k++) json_array_append_new(ed, json_real(qs_klhist_edge(k)));
    for (int k = 0; k < QS_KLHIST_BINS; k++) json_array_append_new(ct, json_integer((json_int_t)h->counts[k]));
    return json_pack("{s:s,s:o,s:o,s:I,s:I,s:I,s:I}", "scale", "log2", "edges", ed, "counts", ct, "zero", (json_int_t)h->zero,
                     "under", (json_int_t)h->under, "over", (json_int_t)h->over, "nonfinite", (json_int_t)h->nonfinite);
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Stored data of one variant: its summary, non-finite counts and timing. */
static json_t *variant_json(const qs_eval_summary *s, const qs_eval_nonfinite *nf, int is_cfg, double secs)
{
    json_t *j = json_object();
    json_object_set_new(j, "scored", json_integer((json_int_t)s->n));
    qs_json_set_num(j, "ppl", s->ppl);
    qs_json_set_num(j, "ppl_se", s->ppl_se);
    qs_json_set_num(j, "nll_mean", s->nll_mean);
    qs_json_set_num(j, "nll_se", s->nll_se);
    json_object_set_new(j, "nonfinite", json_pack("{s:I,s:I,s:o}", "logit_rows", (json_int_t)nf->logit_rows, "activation_values",
                                                  (json_int_t)nf->act_values, "first_site", nf->first_layer < 0 ? json_null() :
                                                  json_pack("{s:i,s:s}", "layer", nf->first_layer, "site", qs_llm_site_name(nf->first_site))));
    json_object_set_new(j, "compute_seconds", json_real(secs));
    if (!is_cfg) return j;
    qs_json_set_num(j, "kl_mean", s->kl_mean);
    qs_json_set_num(j, "kl_se", s->kl_se);
    for (int q = 0; q < 11; q++) {
        char k[32];
        snprintf(k, sizeof k, "kl_%s", kQname[q]);
        qs_json_set_num(j, k, s->kl_q[q]);
    }
    qs_json_set_num(j, "top1_agree", s->top1);
    qs_json_set_num(j, "top1_agree_se", s->top1_se);
    qs_json_set_num(j, "dp_rms", s->dp_rms);
    qs_json_set_num(j, "dp_rms_se", s->dp_rms_se);
    qs_json_set_num(j, "dp_mean", s->dp_mean);
    qs_json_set_num(j, "dp_mean_se", s->dp_mean_se);
    for (int q = 0; q < 11; q++) {
        char k[32];
        snprintf(k, sizeof k, "dp_%s", kQname[q]);
        qs_json_set_num(j, k, s->dp_q[q]);
    }
    qs_json_set_num(j, "ln_ppl_ratio", s->lnratio_mean);
    qs_json_set_num(j, "ln_ppl_ratio_se", s->lnratio_se);
    qs_json_set_num(j, "ppl_ratio", s->ppl_ratio);
    qs_json_set_num(j, "ppl_ratio_se", s->ppl_ratio_se);
    qs_json_set_num(j, "dppl_rel", s->dppl_rel);
    json_object_set_new(j, "dppl_rel_ci95", json_pack("[o,o]", num(s->dppl_lo), num(s->dppl_hi)));
    qs_json_set_num(j, "ppl_diff", s->ppl_diff);
    qs_json_set_num(j, "ppl_diff_se", s->ppl_diff_se);
    qs_json_set_num(j, "cor_ln_ppl", s->cor_lnppl);
    json_object_set_new(j, "kl_hist", hist_json(&s->hist));
    return j;
}

static double jd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Store per-token arrays (float32) beside a result: what later views (sensitivity, plots) read. */
static int put_f32(qs_db *db, int64_t id, const char *name, const double *x, size_t n, qs_err *e)
{
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (!f) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    int rc = qs_result_blob_put(db, id, name, f, n * sizeof(float), e);
    free(f);
    return rc;
}

/* Every computed variant's summary and per-token arrays, in one transaction; datas[i] becomes the
** stored data of variant i. */
static int store_variants(qs_db *db, const eval_opts *o, const qs_llm_file *f, json_t *const *keys, const int *want,
                          const qs_eval_out *out, char **datas, qs_err *e)
{
    if (qs_db_begin(db, e)) return -1;
    for (int i = 0; i <= o->ncfg; i++) {
        if (i > 0 && !want[i - 1]) continue;
        qs_eval_summary s;
        if (qs_eval_summarize(&out->var[0], i ? &out->var[i] : NULL, out->n, &s, e)) goto fail;
        json_t *d = variant_json(&s, &out->var[i].nf, i > 0, out->var[i].fwd_seconds + out->var[i].head_seconds);
        /* names for the readers of stored results (workbench, plot kl, report): the key holds only hashes */
        json_t *run = json_object();
        qs_json_set_text(run, "model", f->name);
        qs_json_set_text(run, "text", o->text);
        json_object_set_new(run, "tensor_types", json_string(f->wtypes));
        json_object_set_new(d, "run", run);
        char *ds = json_dumps(d, JSON_COMPACT), *ks = json_dumps(keys[i], JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(d);
        int64_t id = 0;
        int bad = !ds || !ks ? qs_fail(e, "out of memory") :
                  qs_result_put(db, f->hash, "llm_eval", i ? o->cfg[i - 1].label : "reference", ks, ds, &id, e) ||
                  put_f32(db, id, "nll", out->var[i].nll, out->n, e) ||
                  (i && (put_f32(db, id, "kl", out->var[i].kl, out->n, e) || put_f32(db, id, "dp", out->var[i].dp, out->n, e)));
        free(ks);
        free(datas[i]);
        datas[i] = ds;
        if (bad) goto fail;
    }
    if (!qs_db_commit(db, e)) return 0;
fail:
    qs_db_rollback(db);
    return -1;
}

/* ---------------------------------------------------------------- printing */

/* "v±se" with 4 decimals, or 4 significant digits for values out of a table's range */
static const char *pm(char *buf, size_t cap, double v, double se)
{
    if (fabs(v) < 1e5) snprintf(buf, cap, "%.4f±%.4f", v, se);
    else snprintf(buf, cap, "%.4g±%.2g", v, se);
    return buf;
}

static void print_table(const eval_opts *o, const qs_llm_file *f, json_t *ref, json_t *cfgs, size_t ntok, size_t scored,
                        int nchunks, int bos)
{
    printf("model %s (%s; %s)\n", qs_esc(o->model), qs_llm_title(f), f->wtypes);
    printf("text %s: %zu tokens; ctx %d, %d chunks; scoring: %s; BOS %s\n", qs_esc(o->text), ntok, o->ctx, nchunks,
           o->score_all ? "all positions 0..ctx-2 of each chunk (--score all)"
                        : "second half of each chunk, positions ctx/2..ctx-2 (llama.cpp)",
           bos >= 0 ? "replaces the first token of each chunk" : "not added (the vocabulary does not add BOS)");
    printf("%zu scored tokens; errors are standard errors of per-token means (tokens treated as independent)\n\n", scored);
    printf("%-28s %18s %26s %18s %9s %9s %9s %9s %16s %16s %7s\n", "config", "PPL", "dPPL [95% CI]", "KL mean", "median",
           "p90", "p99", "max", "same top", "RMS dp", "cor");
    char b1[64];
    printf("%-28s %18s\n", "reference fp32", pm(b1, sizeof b1, jd(ref, "ppl"), jd(ref, "ppl_se")));
    for (size_t i = 0; i < json_array_size(cfgs); i++) {
        json_t *c = json_array_get(cfgs, i);
        json_t *ci = json_object_get(c, "dppl_rel_ci95");
        char dppl[64], lab[64];
        snprintf(dppl, sizeof dppl, "%+.2f%% [%+.2f, %+.2f]", 100 * jd(c, "dppl_rel"),
                 100 * json_number_value(json_array_get(ci, 0)), 100 * json_number_value(json_array_get(ci, 1)));
        snprintf(lab, sizeof lab, "%.28s", json_string_value(json_object_get(c, "label")));
        printf("%-28s %18s %26s %9.5f±%-8.5f %9.5f %9.5f %9.5f %9.4f %7.3f%%±%-6.3f %7.4f±%-7.4f %7.4f\n", lab,
               pm(b1, sizeof b1, jd(c, "ppl"), jd(c, "ppl_se")), dppl, jd(c, "kl_mean"), jd(c, "kl_se"), jd(c, "kl_median"), jd(c, "kl_p90"),
               jd(c, "kl_p99"), jd(c, "kl_max"), 100 * jd(c, "top1_agree"), 100 * jd(c, "top1_agree_se"), jd(c, "dp_rms"),
               jd(c, "dp_rms_se"), jd(c, "cor_ln_ppl"));
    }
    printf("\nKL = KL(P_ref || P_config) per token (nats); dPPL = PPL(config)/PPL(ref) - 1 (delta method); "
           "dp = p_config - p_ref of the actual next token; cor = Cor(ln p_config, ln p_ref) per token\n");
}

/* ---------------------------------------------------------------- command */

int qs_cmd_llm_eval(qs_cli *cli, int argc, char **argv)
{
    eval_opts *o = calloc(1, sizeof *o);
    if (!o) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    int rc = parse_opts(argc, argv, o);
    if (rc) { free(o); return rc; }
    const double t_start = qs_now_s();
    qs_err e = {{0}};
    qs_llm_file f;
    memset(&f, 0, sizeof f);
    char *text = NULL, thash[33];
    size_t tlen = 0;
    int32_t *ids = NULL;
    qs_db *db = NULL;
    json_t *ref_data = NULL, *cfg_arr = json_array(), *keys[MAX_CFG + 1] = {0};
    char *datas[MAX_CFG + 1] = {0};
    int64_t rids[MAX_CFG + 1] = {0};
    qs_eval_shard sh;
    memset(&sh, 0, sizeof sh);
    if (qs_eval_read_text(o->text, &text, &tlen, thash, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (qs_llm_load(o->model, &f, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    if (o->ctx > f.m.c.ctx) { rc = qs_cli_usage(CMD, "--ctx %d exceeds the model context %d", o->ctx, f.m.c.ctx); goto done; }
    if (!f.v.n) { rc = qs_cli_error(QS_EXIT_ERR, "%s: the model has no vocabulary to tokenize the text", o->model); goto done; }
    int ntok = 0;
    if (qs_eval_text_ids(o->text, &f, text, tlen, &ids, &ntok, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    const int add_bos = f.v.add_bos && f.v.bos >= 0;
    if (o->save_ids && qs_par_rank() == 0) {   /* the text's ids, comma-separated: for cross-checks with other tools */
        FILE *fo = fopen(o->save_ids, "w");
        if (!fo) { qs_write_fail(&e, o->save_ids, errno); rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
        for (int i = 0; i < ntok; i++) fprintf(fo, "%s%d", i ? "," : "", ids[i]);
        fputc('\n', fo);
        int werr = ferror(fo) ? errno : 0;
        if (fclose(fo) || werr) { qs_write_fail(&e, o->save_ids, werr ? werr : errno); rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    }
    /* llama.cpp wants two chunks for the second-half convention; all positions need one */
    int need = o->score_all ? o->ctx : 2 * o->ctx;
    if (ntok < need) {
        rc = qs_cli_error(QS_EXIT_USAGE, "%s: %d tokens is too short for --ctx %d (needs at least %d tokens%s)", o->text, ntok,
                          o->ctx, need, o->score_all ? "" : "; --score all needs one chunk");
        goto done;
    }
    qs_eval_setup su = {o->ctx, ntok / o->ctx, o->score_all, add_bos ? f.v.bos : -1};
    if (o->chunks && o->chunks < su.nchunks) su.nchunks = o->chunks;
    const size_t scored = qs_eval_ntok(&su);

    /* cache keys: one result per variant */
    if (!(db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto done; }
    int want[MAX_CFG], nwant = 0, need_ref = o->force;
    for (int i = 0; i <= o->ncfg; i++) {
        json_t *k = json_pack("{s:s,s:i,s:i,s:s,s:i,s:o}", "text", thash, "ctx", o->ctx, "chunks", su.nchunks, "score",
                              o->score_all ? "all" : "half", "bos", su.bos, "numerics",
                              numerics_json(i ? &o->cfg[i - 1] : NULL, o->scaled));
        keys[i] = k;
        char *ks = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
        if (!ks) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
        if (!o->force && qs_result_get(db, f.hash, "llm_eval", i ? o->cfg[i - 1].label : "reference", ks, &datas[i], &rids[i], &e)) {
            free(ks);
            rc = qs_cli_err(QS_EXIT_ERR, &e);
            goto done;
        }
        free(ks);
        if (i == 0) need_ref |= !datas[0];
        else { want[i - 1] = !datas[i]; nwant += want[i - 1]; }
    }
    if (nwant) need_ref = 1;
    double compute = 0;
    if (need_ref) {
        /* the configurations' weights, rounded once */
        qs_eval_variant var[MAX_CFG];
        memset(var, 0, sizeof var);
        for (int i = 0; i < o->ncfg; i++) {
            eval_cfg *c = &o->cfg[i];
            c->m = &f.m;
            if (want[i] || o->force) want[i] = 1;
            if (c->has_w && want[i]) {
                /* configurations with the same weight format share one rounded copy */
                char *wj = qs_quant_opts_json(&c->w);
                for (int k = 0; k < i && wj; k++) {
                    char *kj = o->cfg[k].has_w && o->cfg[k].wm.arena ? qs_quant_opts_json(&o->cfg[k].w) : NULL;
                    if (kj && !strcmp(kj, wj)) c->m = &o->cfg[k].wm;
                    free(kj);
                    if (c->m != &f.m) break;
                }
                free(wj);
                if (c->m == &f.m) {
                    if (qs_llm_clone(&c->wm, &f.m, &e) || qs_llm_quantize_weights(&c->wm, &c->w, o->scaled, &e)) {
                        rc = qs_cli_err(QS_EXIT_ERR, &e);
                        goto done;
                    }
                    c->m = &c->wm;
                }
            }
            var[i].m = c->m;
            var[i].nx = (qs_llm_numerics){c->has_a ? &c->a : NULL, c->resq, c->has_kv ? &c->kv : NULL, o->scaled, NULL};
        }
        /* chunks x configurations on the ranks; rank 0 ends with every per-token result */
        double t0 = qs_now_s();
        if (qs_eval_shard_init(&sh, &f.m, var, want, o->ncfg, ids, (size_t)ntok, &su, &e) ||
            qs_llm_shard_run(&sh, CMD, &e)) {
            rc = qs_cli_err(QS_EXIT_ERR, &e);
            goto done;
        }
        compute = qs_now_s() - t0;
        if (qs_par_rank() == 0 && store_variants(db, o, &f, keys, want, &sh.out, datas, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    }
    if (qs_par_rank() > 0) goto done;   /* rank 0 stores and prints */
    /* assemble the answer from the stored (or just computed) data */
    ref_data = json_loads(datas[0], 0, NULL);
    if (!ref_data) { rc = qs_cli_error(QS_EXIT_ERR, "stored reference result is not JSON"); goto done; }
    json_object_set_new(ref_data, "cached", json_boolean(!need_ref));
    for (int i = 0; i < o->ncfg; i++) {
        json_t *c = json_loads(datas[i + 1], 0, NULL);
        if (!c) { rc = qs_cli_error(QS_EXIT_ERR, "stored result of %s is not JSON", o->cfg[i].label); goto done; }
        json_t *obj = json_pack("{s:s,s:O}", "label", o->cfg[i].label, "numerics", json_object_get(keys[i + 1], "numerics"));
        json_object_update(obj, c);
        json_decref(c);
        json_object_set_new(obj, "cached", json_boolean(!(need_ref && want[i])));
        json_array_append_new(cfg_arr, obj);
    }
    int weight_note = 0;
    for (int i = 0; i < o->ncfg; i++) weight_note |= o->cfg[i].has_w;
    weight_note = weight_note && (strstr(f.wtypes, "q4") || strstr(f.wtypes, "q5") || strstr(f.wtypes, "q8") || strstr(f.wtypes, "q6"));
    char wnote[320];
    snprintf(wnote, sizeof wnote, "the model's weights are already quantized (%s): a weight format's result is relative to that "
             "grid; activation and KV-cache results are not affected", f.wtypes);
    /* non-finite values are never silent */
    for (size_t i = 0; i <= (size_t)o->ncfg; i++) {
        json_t *v = i ? json_array_get(cfg_arr, i - 1) : ref_data, *nf = json_object_get(v, "nonfinite");
        json_int_t lr = json_integer_value(json_object_get(nf, "logit_rows")), av = json_integer_value(json_object_get(nf, "activation_values"));
        json_t *fs = json_object_get(nf, "first_site");
        char where[96] = "";
        if (json_is_object(fs))
            snprintf(where, sizeof where, ", first at layer %lld %s", (long long)json_integer_value(json_object_get(fs, "layer")),
                     json_string_value(json_object_get(fs, "site")));
        if (lr || av)
            fprintf(stderr, "qscope: warning: %s: %lld non-finite logit rows (left out of the statistics), %lld non-finite "
                    "activation values%s\n", i ? o->cfg[i - 1].label : "reference", (long long)lr, (long long)av, where);
    }
    double secs = qs_now_s() - t_start;
    if (o->json) {
        json_t *j = json_object();
        json_object_set_new(j, "model", qs_llm_model_json(o->model, &f));
        json_object_set_new(j, "text", qs_llm_text_json(o->text, thash, tlen));
        json_object_set_new(j, "tokens", json_integer(ntok));
        json_object_set_new(j, "scored_tokens", json_integer((json_int_t)scored));
        json_object_set_new(j, "ctx", json_integer(o->ctx));
        json_object_set_new(j, "chunks", json_integer(su.nchunks));
        json_object_set_new(j, "score", json_string(o->score_all ? "all" : "half"));
        json_object_set_new(j, "bos", su.bos >= 0 ? json_integer(su.bos) : json_null());
        json_object_set_new(j, "reference", json_incref(ref_data));
        json_object_set_new(j, "configs", json_incref(cfg_arr));
        if (weight_note) json_object_set_new(j, "note", json_string(wnote));
        json_object_set_new(j, "compute_seconds", json_real(compute));
        json_object_set_new(j, "seconds", json_real(secs));
        char *s = json_dumps(j, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        print_table(o, &f, ref_data, cfg_arr, (size_t)ntok, scored, su.nchunks, su.bos);
        if (weight_note) printf("note: %s\n", wnote);
        printf("%s in %.1f s (%.1f s computing)\n", need_ref ? "computed" : "all results reused from the database (--force recomputes)",
               secs, compute);
    }
done:
    qs_eval_shard_free(&sh);
    for (int i = 0; i <= MAX_CFG; i++) { json_decref(keys[i]); free(datas[i]); }
    for (int i = 0; i < o->ncfg; i++) if (o->cfg[i].wm.arena) qs_llm_free(&o->cfg[i].wm);
    json_decref(ref_data);
    json_decref(cfg_arr);
    if (db) qs_db_close(db);
    qs_llm_file_free(&f);
    free(ids);
    free(text);
    free(o);
    return rc;
}

/* ---------------------------------------------------------------- bench case */

/* Best-of-5 OpenBLAS SGEMM rate (GFLOP/s) of the model's dominant product at ctx rows:
** x[ctx][dim] . W_up[ffn][dim]^T, with the library's default threads (both cores). */
static double sgemm_rate(const qs_llm_model *m, int rows)
{
    const int K = m->c.dim, N = m->c.ffn;
    float *x = malloc((size_t)rows * K * sizeof(float)), *y = malloc((size_t)rows * N * sizeof(float));
    if (!x || !y) { free(x); free(y); return 0; }
    for (size_t i = 0; i < (size_t)rows * K; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = qs_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, N, K, 1.0f, x, K, m->L[0].w_up, K, 0.0f, y, N);
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
