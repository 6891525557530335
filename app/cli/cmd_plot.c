/*
** `qscope plot KIND [TENSOR] -o FILE.png | -o -`: pictures of results.
**
** Data: err-hist, value-hist, pareto and block-heatmap use the stored results of `qscope analyze`
** (analysis/results.h: "hist", "metrics", "blocks" + blob "rmse") when they exist for the tensor's
** hash, format and options; otherwise the numbers are computed here in one streaming pass
** (fake-quantize with kernels/format_apply, accumulate histograms, error energy and per-block
** RMSE).  transfer needs no tensor.  trajectory / msd / attn read results of those kinds and say
** so when the database has none.  kl reads stored `llm eval` results (analysis/llm_eval_store.h).
**
** The figure comes from analysis/plot_kinds.c, the PNG from app/render/plot_png.c (with provenance text
** chunks), the terminal picture from app/render/plot_term.c.
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "../render/plot_render.h"
#include "../../store/json_out.h"
#include "plot_loss.h"
#include "quant_opts.h"
#include "../../analysis/plot_fly.h"
#include "../../analysis/hist_json.h"
#include "../../analysis/llm_eval_store.h"
#include "../../analysis/llm_sens_store.h"
#include "../../analysis/plot.h"
#include "../../analysis/results.h"
#include "../../analysis/stats_store.h"
#include "../../store/container.h"
#include "../../store/q_results.h"
#include "../../store/tensor.h"

#define MAX_FORMATS 64

typedef struct plot_opts {
    const char *out, *title, *term;
    int width, height;
    double dpi;
    int logx, logy;
    const char *xscale, *yscale;
    double range_lo, range_hi, amax;
    int have_range;
    int n_stored, n_computed;   /* where the data came from (reported after writing) */
    int abs_err;
    int no_store;
    int nsamples;
    const char *model;          /* kl: model name substring or hash prefix */
    const char *cfgs[MAX_FORMATS];
    int ncfgs, cdf, ctx;
    const char *baseline;       /* loss: --baseline */
    int lossk;                  /* loss: 1 --val, 2 --train (3 both: refused) */
} plot_opts;

/* ---------------- stored results ---------------- */

/* The stored result of `kind` for the tensor under a, parsed; NULL when absent. */
static json_t *stored(qs_db *db, const char *hash, const char *kind, const qs_apply *a, int64_t *id)
{
    qs_err e = {{0}};
    char *opts = qs_quant_opts_json(a), *data = NULL;
    if (!opts) return NULL;
    int rc = qs_result_get(db, hash, kind, a->f->name, opts, &data, id, &e);
    free(opts);
    if (rc || !data) { free(data); return NULL; }
    json_t *j = json_loads(data, 0, NULL);
    free(data);
    return j;
}

/* ---------------- provenance ---------------- */

typedef struct prov_buf {
    char *command, *hashes, *formats, *options;
} prov_buf;

static char *join_argv(int argc, char **argv)
{
    size_t cap = 16;
    for (int i = 0; i < argc; i++) cap += 3 * strlen(argv[i]) + 3;
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) {
        if (i) *p++ = ' ';
        int q = argv[i][0] == 0 || strpbrk(argv[i], " \t'\"\\$`*?") != NULL;
        if (q) *p++ = '\'';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'' && q) { memcpy(p, "'\\''", 4); p += 4; }
            else *p++ = *c;
        }
        if (q) *p++ = '\'';
    }
    *p = 0;
    return s;
}

static void prov_free(prov_buf *p) { free(p->command); free(p->hashes); free(p->formats); free(p->options); }

/* ---------------- output ---------------- */

static int apply_axis_opts(qs_figure *f, const plot_opts *po)
{
    struct { const char *s; qs_axis *a; int log; } ax[2] = {{po->xscale, &f->x, po->logx}, {po->yscale, &f->y, po->logy}};
    for (int i = 0; i < 2; i++) {
        if (ax[i].log && ax[i].a->scale != QS_AX_LOG2 && ax[i].a->scale != QS_AX_LOG10) ax[i].a->scale = QS_AX_LOG10;
        if (ax[i].s) {
            if (!strcmp(ax[i].s, "lin") || !strcmp(ax[i].s, "linear")) ax[i].a->scale = QS_AX_LINEAR;
            else if (!strcmp(ax[i].s, "log2")) ax[i].a->scale = QS_AX_LOG2;
            else if (!strcmp(ax[i].s, "log10") || !strcmp(ax[i].s, "log")) ax[i].a->scale = QS_AX_LOG10;
            else if (!strcmp(ax[i].s, "symlog")) ax[i].a->scale = QS_AX_SYMLOG;
            else return qs_cli_usage("plot", "axis scale is lin, log2, log10 or symlog (got '%s')", ax[i].s);
        }
    }
    if (po->title) snprintf(f->title, sizeof f->title, "%.*s", QS_CLIP(po->title, (int)sizeof f->title - 1));
    return 0;
}

/* Two panels in one PNG: f over the full height, f2 (the loss gap) under it at half of it. */
static int png_two(qs_figure *f, qs_figure *f2, const plot_opts *po, const qs_provenance *pv, qs_err *e)
{
    double dpi = po->dpi > 0 ? po->dpi : 100;
    int W = po->width ? po->width : (int)lround(10 * dpi), H = po->height ? po->height : (int)lround(6 * dpi);
    int H2 = H / 2 > 0 ? H / 2 : 1;
    uint8_t *a = NULL, *b = NULL, *all = NULL;
    int rc = -1;
    if (qs_plot_rgb(f, W, H, dpi, &a, NULL, e) || qs_plot_rgb(f2, W, H2, dpi, &b, NULL, e)) goto out;
    if (!(all = malloc((size_t)W * (size_t)(H + H2) * 3))) { qs_fail(e, "out of memory"); goto out; }
    memcpy(all, a, (size_t)W * (size_t)H * 3);
    memcpy(all + (size_t)W * (size_t)H * 3, b, (size_t)W * (size_t)H2 * 3);
    rc = qs_png_write_rgb(po->out, all, W, H + H2, dpi, pv, e);
out:
    free(a); free(b); free(all);
    return rc;
}

static int emit2(qs_cli *cli, qs_figure *f, qs_figure *f2, plot_opts *po, const qs_provenance *pv);
static int emit(qs_cli *cli, qs_figure *f, plot_opts *po, const qs_provenance *pv) { return emit2(cli, f, NULL, po, pv); }

static int emit2(qs_cli *cli, qs_figure *f, qs_figure *f2, plot_opts *po, const qs_provenance *pv)
{
    qs_err e = {{0}};
    int rc = apply_axis_opts(f, po);
    if (rc) return rc;
    if (!strcmp(po->out, "-")) {
        qs_term_opts to = {0};
        to.color = cli->color;
        if (po->term && qs_term_mode_parse(po->term, &to.mode))
            return qs_cli_usage("plot", "--term is auto, braille, block or ascii");
        struct winsize ws;
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 30 && ws.ws_row >= 12) {
            to.cols = ws.ws_col;
            to.rows = ws.ws_row - 2 < 40 ? ws.ws_row - 2 : 40;
        } else {
            to.cols = 100;
            to.rows = 30;
        }
        if (po->width) to.cols = po->width;
        if (po->height) to.rows = po->height;
        if (qs_plot_term(f, &to, stdout, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
        if (f2) {
            to.rows = to.rows / 2 > 12 ? to.rows / 2 : 12;
            if (qs_plot_term(f2, &to, stdout, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
        }
        return QS_EXIT_OK;
    }
    qs_png_opts o = {po->width, po->height, po->dpi};
    rc = f2 ? png_two(f, f2, po, pv, &e) : qs_plot_png(f, &o, pv, po->out, &e);
    qs_plot_cairo_release();
    if (rc) return qs_cli_err(QS_EXIT_ERR, &e);
    if (po->n_stored + po->n_computed)
        fprintf(stderr, "qscope: wrote %s (%d stored result%s, %d computed now)\n", qs_esc(po->out), po->n_stored,
                po->n_stored == 1 ? "" : "s", po->n_computed);
    else
        fprintf(stderr, "qscope: wrote %s\n", qs_esc(po->out));
    return QS_EXIT_OK;
}

/* ---------------- kinds ---------------- */

static const char *const default_errhist = "fp8_e4m3,mxfp4,nvfp4";

static int parse_formats(const char *list, const qs_apply *base, qs_apply *apps, char labels[][96], int cap)
{
    int n = qs_quant_parse_list("plot", list, base, apps, cap);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) qs_quant_label(&apps[i], NULL, labels[i], 96);
    return n;
}

static char *formats_json(const qs_apply *apps, int n, const plot_opts *po, const char *kind)
{
    json_t *o = json_object(), *arr = json_array();
    for (int i = 0; i < n; i++) {
        char *s = qs_quant_opts_json(&apps[i]);
        json_array_append_new(arr, s ? json_loads(s, 0, NULL) : json_null());
        free(s);
    }
    json_object_set_new(o, "formats", arr);
    json_t *p = json_pack("{s:s,s:i,s:i,s:f,s:b,s:b}", "kind", kind, "width", po->width, "height", po->height,
                          "dpi", po->dpi > 0 ? po->dpi : 100, "logx", po->logx, "logy", po->logy);
    if (po->have_range) json_object_set_new(p, "range", json_pack("[f,f]", po->range_lo, po->range_hi));
    if (po->amax > 0) json_object_set_new(p, "amax", json_real(po->amax));
    json_object_set_new(o, "plot", p);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static char *format_names(char labels[][96], int n)
{
    size_t cap = 1;
    for (int i = 0; i < n; i++) cap += strlen(labels[i]) + 1;
    char *s = calloc(1, cap);
    if (!s) return NULL;
    for (int i = 0; i < n; i++) { if (i) strcat(s, ","); strcat(s, labels[i]); }
    return s;
}

static int plot_transfer(qs_cli *cli, plot_opts *po, qs_apply *apps, int n, char labels[][96], prov_buf *pb,
                         qs_provenance *pv)
{
    if (n != 1) return qs_cli_usage("plot", "transfer takes one format (-f F)");
    const qs_format *f = apps[0].f;
    int plain = f->meta_bytes == 0 && f->block == 1;
    double R = po->amax > 0 ? po->amax : 1;
    double lo, hi;
    if (po->have_range) { lo = po->range_lo; hi = po->range_hi; }
    else if (plain) {
        double m = f->max_finite <= 1e5 ? f->max_finite * 1.1 : 4;
        lo = -m; hi = m;
    } else { lo = -1.1 * R; hi = 1.1 * R; }
    qs_err e = {{0}};
    qs_qopts o = apps[0].o;
    if (apps[0].gran == QS_GRAN_TENSOR) o.block = 0;
    qs_figure *fig = qs_plot_transfer(f, &o, lo, hi, po->nsamples > 0 ? (size_t)po->nsamples : 4001, R, &e);
    if (!fig) return qs_cli_err(QS_EXIT_ERR, &e);
    pb->formats = format_names(labels, n);
    pb->options = formats_json(apps, n, po, "transfer");
    pv->formats = pb->formats;
    pv->options = pb->options;
    int rc = emit(cli, fig, po, pv);
    qs_fig_free(fig);
    return rc;
}

static int plot_lines_kind(qs_cli *cli, plot_opts *po, const char *kind, qs_provenance *pv)
{
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_result_item ri;
    int found;
    if (qs_result_latest(db, kind, &ri, &found, &e)) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    char *data = ri.data;
    ri.data = NULL;
    qs_result_item_free(&ri);
    qs_db_close(db);
    if (!data)
        return qs_cli_error(QS_EXIT_ERR, "no %s data in this database yet (run `qscope %s` first)", kind,
                            !strcmp(kind, "trajectory") ? "ais RUN` or `qscope sim grpo" : kind);
    qs_figure *fig = qs_plot_lines_json(kind, data, NULL, &e);
    free(data);
    if (!fig) return qs_cli_err(QS_EXIT_ERR, &e);
    int rc = emit(cli, fig, po, pv);
    qs_fig_free(fig);
    return rc;
}

/* kl: the newest stored evaluation of the chosen model (and ctx), the chosen configs (all by default). */
static int plot_kl(qs_cli *cli, plot_opts *po, prov_buf *pb, qs_provenance *pv)
{
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_evrun *R = NULL;
    size_t n = 0;
    int rc = qs_evruns_load(db, &R, &n, &e);
    qs_db_close(db);
    if (rc) return qs_cli_err(QS_EXIT_ERR, &e);
    const qs_evrun *r = NULL;
    for (size_t i = n; i-- > 0 && !r;) {
        if (po->ctx && R[i].ctx != po->ctx) continue;
        if (po->model && !strstr(R[i].model, po->model) && strncmp(R[i].model_hash, po->model, strlen(po->model))) continue;
        if (R[i].ncfg) r = &R[i];
    }
    if (!r) {
        qs_evruns_free(R, n);
        return qs_cli_error(QS_EXIT_ERR, "no stored llm eval%s%s%s in this database (run `qscope llm eval --model M --config a=mxfp4` first)",
                            po->model || po->ctx ? " matching" : "", po->model ? " --model " : "", po->model ? qs_esc(po->model) : "");
    }
    int sel[MAX_FORMATS], ns = 0;
    if (!po->ncfgs)
        for (int i = 0; i < r->ncfg && ns < MAX_FORMATS; i++) sel[ns++] = i;
    for (int k = 0; k < po->ncfgs; k++) {
        int f = -1;
        for (int i = 0; i < r->ncfg && f < 0; i++) if (!strcmp(r->cfg[i].label, po->cfgs[k])) f = i;
        if (f < 0) {
            char have[1024] = "";
            for (int i = 0; i < r->ncfg; i++)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", r->cfg[i].label);
            rc = qs_cli_usage("plot", "the evaluation of %s (ctx %d) has no config '%s' (it has: %s)", qs_evrun_model(r), r->ctx,
                              po->cfgs[k], have);
            qs_evruns_free(R, n);
            return rc;
        }
        sel[ns++] = f;
    }
    qs_figure *fig = qs_plot_kl(r, sel, ns, po->cdf);
    if (!fig) { qs_evruns_free(R, n); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    char cav[300];
    qs_evrun_caveat(r, cav, sizeof cav);
    int anyw = 0;
    for (int i = 0; i < ns; i++) anyw |= r->cfg[sel[i]].has_w;
    if (anyw && cav[0]) {   /* the weight-grid caveat goes with weight-format curves */
        size_t nl = strlen(fig->note);
        int room = (int)(sizeof fig->note - nl) - 3;
        if (room > 0) snprintf(fig->note + nl, sizeof fig->note - nl, "%s%.*s", nl ? "; " : "", room, cav);
    }
    size_t L = 1;
    for (int i = 0; i < ns; i++) L += strlen(r->cfg[sel[i]].label) + 1;
    pb->formats = calloc(1, L);
    for (int i = 0; i < ns && pb->formats; i++) { if (i) strcat(pb->formats, ";"); strcat(pb->formats, r->cfg[sel[i]].label); }
    json_t *oj = json_pack("{s:s,s:s,s:s,s:i,s:i,s:s,s:b}", "kind", "kl", "model", qs_evrun_model(r), "text", r->text, "ctx", r->ctx,
                           "chunks", r->chunks, "score", r->score, "cdf", po->cdf);
    pb->options = oj ? json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(oj);
    pb->hashes = strdup(r->model_hash);
    pv->tensor_hashes = pb->hashes;
    pv->formats = pb->formats;
    pv->options = pb->options;
    rc = emit(cli, fig, po, pv);
    qs_fig_free(fig);
    qs_evruns_free(R, n);
    return rc;
}

/* `plot sensitivity`: the latest stored `llm sensitivity` table (analysis/results.h
** "llm_sensitivity") as a layers x sites heatmap of mean KL, log colour scale, with its stored plan's
** BF16 cells marked (the figure of the workbench's Model view and the report). */
static int plot_sensitivity(qs_cli *cli, plot_opts *po, prov_buf *pb, qs_provenance *pv)
{
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_sensrun *R = NULL;
    size_t n = 0;
    int rc = qs_sensruns_load(db, &R, &n, &e);
    qs_db_close(db);
    if (rc) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!n) return qs_cli_error(QS_EXIT_ERR, "no llm sensitivity data in this database yet (run `qscope llm sensitivity` first)");
    const qs_sensrun *r = &R[n - 1];
    qs_figure *fig = qs_plot_sensitivity(r);
    if (!fig) { qs_sensruns_free(R, n); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    pb->hashes = strdup(r->model_hash);
    pb->formats = strdup(r->format);
    pv->tensor_hashes = pb->hashes;
    pv->formats = pb->formats;
    rc = emit(cli, fig, po, pv);
    qs_fig_free(fig);
    qs_sensruns_free(R, n);
    return rc;
}

/* `plot loss`: the runs matching the patterns (plot_loss.c), with the gap panel under a baseline.
** Frees the provenance buffers. */
static int plot_loss(qs_cli *cli, plot_opts *po, char *const *globs, int nglobs, int formats, prov_buf *pb)
{
    if (formats) { prov_free(pb); return qs_cli_usage("plot", "loss takes run patterns, not formats"); }
    char dbabs[PATH_MAX];
    qs_provenance pv = {pb->command, realpath(cli->db_path, dbabs) ? dbabs : cli->db_path, NULL, NULL, NULL};
    qs_figure *fig = NULL, *gap = NULL;
    char *runs = NULL;
    int rc = qs_plot_loss_figs(cli, globs, nglobs, po->baseline, po->lossk != 2, po->logy, &fig, &gap, &runs);
    if (rc == QS_EXIT_OK) {
        pv.formats = runs;   /* qscope:formats holds the runs drawn */
        rc = emit2(cli, fig, gap, po, &pv);
    }
    qs_fig_free(fig);
    qs_fig_free(gap);
    free(runs);
    prov_free(pb);
    return rc;
}

static int plot_tensor_kind(qs_cli *cli, plot_opts *po, const char *kind, const char *name, qs_apply *apps, int n,
                            char labels[][96], prov_buf *pb, qs_provenance *pv)
{
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_plot_tensor T;
    int rc = QS_EXIT_ERR;
    qs_figure *fig = NULL;
    qs_hist *hs = NULL;
    if (qs_plot_tensor_open(db, name, &T, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    size_t hl = strlen(T.t.name) + strlen(T.t.hash) + 2;
    pb->hashes = malloc(hl);
    if (pb->hashes) snprintf(pb->hashes, hl, "%s=%s", T.t.name, T.t.hash);
    pv->tensor_hashes = pb->hashes;
    pb->formats = format_names(labels, n);
    pb->options = formats_json(apps, n, po, kind);
    pv->formats = pb->formats;
    pv->options = pb->options;
    char title[300];

    if (!strcmp(kind, "err-hist")) {
        hs = calloc((size_t)n, sizeof *hs);
        const qs_hist **hp = calloc((size_t)n, sizeof *hp);
        const char **names = calloc((size_t)n, sizeof *names);
        if (!hs || !hp || !names) { free(hp); free(names); qs_cli_error(1, "out of memory"); goto out; }
        const char *key = po->abs_err ? "abs_err" : "rel_err";
        for (int i = 0; i < n; i++) {
            json_t *j = po->no_store ? NULL : stored(db, T.t.hash, "hist", &apps[i], NULL);
            if (j && qs_hist_from_json(json_object_get(j, key), &hs[i]) == 0) { json_decref(j); po->n_stored++; }
            else {
                po->n_computed++;
                json_decref(j);
                qs_fly F = {0};
                F.want_err = 1;
                if (qs_fly_run(&T, &apps[i], &F, &e)) { qs_fly_free(&F); free(hp); free(names); rc = qs_cli_err(1, &e); goto out; }
                hs[i] = po->abs_err ? F.abs : F.rel;
                if (po->abs_err) F.abs.counts = NULL; else F.rel.counts = NULL;
                qs_fly_free(&F);
            }
            hp[i] = &hs[i];
            names[i] = labels[i];
        }
        snprintf(title, sizeof title, "%s error of %.*s", po->abs_err ? "absolute" : "relative", QS_CLIP(T.t.name, 200));
        fig = qs_plot_err_hist(title, po->abs_err ? "absolute error |Q(x) - x|" : "relative error |Q(x) - x| / |x|",
                               (size_t)n, names, hp);
        free(hp);
        free(names);
    } else if (!strcmp(kind, "value-hist")) {
        if (n > 1) { rc = qs_cli_usage("plot", "value-hist takes at most one format (its grid is drawn)"); goto out; }
        if (!(fig = qs_value_hist_fig(&T, n ? &apps[0] : NULL, n ? labels[0] : NULL, po->amax, &e))) { rc = qs_cli_err(1, &e); goto out; }
    } else if (!strcmp(kind, "pareto")) {
        qs_pareto_pt *pts = calloc((size_t)n, sizeof *pts);
        if (!pts) { qs_cli_error(1, "out of memory"); goto out; }
        for (int i = 0; i < n; i++) {
            pts[i].name = labels[i];
            pts[i].family = qs_family_name(apps[i].f->family);
            pts[i].bits = qs_format_bits_per_elem(apps[i].f, &apps[i].o);
            json_t *j = po->no_store ? NULL : stored(db, T.t.hash, "metrics", &apps[i], NULL);
            json_t *eb = json_object_get(j, "eff_bits_energy");
            if (j && (json_is_number(eb) || json_is_null(eb))) {
                /* null: exact (+inf) or NaN/Inf outputs (-inf), told apart by "nonfinite_values" */
                pts[i].eff_bits = qs_json_get_num(j, "eff_bits_energy");
                json_t *bpe = json_object_get(j, "bits_per_elem");
                if (json_is_number(bpe)) pts[i].bits = json_number_value(bpe);
                json_decref(j);
                po->n_stored++;
                continue;
            }
            json_decref(j);
            po->n_computed++;
            qs_fly F = {0};
            F.want_err = 1;
            if (qs_fly_run(&T, &apps[i], &F, &e)) { qs_fly_free(&F); free(pts); rc = qs_cli_err(1, &e); goto out; }
            /* exact: +inf; NaN/Inf outputs (sum_e2 = inf): -inf */
            pts[i].eff_bits = F.sum_e2 == 0 ? INFINITY : !isfinite(F.sum_e2) ? -INFINITY
                              : F.sum_x2 > 0 ? -0.5 * log2(F.sum_e2 / F.sum_x2) : NAN;
            qs_fly_free(&F);
        }
        snprintf(title, sizeof title, "effective bits vs bits per element on %.*s", QS_CLIP(T.t.name, 200));
        fig = qs_plot_pareto(title, pts, (size_t)n);
        free(pts);
    } else {   /* block-heatmap */
        if (n != 1) { rc = qs_cli_usage("plot", "block-heatmap takes one format (-f F)"); goto out; }
        if (T.t.ndim < 2) { rc = qs_cli_error(1, "block-heatmap needs a 2-D tensor ('%s' is 1-D)", T.t.name); goto out; }
        float *v = NULL;
        uint64_t R = 0, C = 0, B = 0;
        int axis = apps[0].axis;
        int64_t id = 0;
        json_t *j = po->no_store ? NULL : stored(db, T.t.hash, "blocks", &apps[0], &id);
        if (j) {
            void *blob = NULL;
            size_t nb = 0;
            uint64_t nblocks = (uint64_t)json_integer_value(json_object_get(j, "nblocks"));
            B = (uint64_t)json_integer_value(json_object_get(j, "block"));
            axis = (int)json_integer_value(json_object_get(j, "axis"));
            if (B > 0 && nblocks && qs_result_blob_get(db, id, "rmse", &blob, &nb, &e) == 0 && blob &&
                nb == nblocks * sizeof(float)) {
                R = axis ? T.rows : (T.rows + B - 1) / B;
                C = axis ? (T.cols + B - 1) / B : T.cols;
                if (R * C == nblocks) {
                    v = malloc(nb);
                    const float *src = blob;
                    /* axis 0 blocks are stored column by column: transpose to block-rows x columns */
                    if (v) for (uint64_t k = 0; k < nblocks; k++) {
                        if (axis) v[k] = src[k];
                        else v[(k % R) * C + k / R] = src[k];
                    }
                }
            }
            free(blob);
            json_decref(j);
            if (v) po->n_stored++;
        }
        qs_fly F = {0};
        if (!v) {
            po->n_computed++;
            F.want_tiles = 1;
            if (qs_fly_run(&T, &apps[0], &F, &e)) { qs_fly_free(&F); rc = qs_cli_err(1, &e); goto out; }
            B = F.tb; axis = F.axis;
        }
        char xt[96], yt[96];
        snprintf(xt, sizeof xt, axis ? "block of %llu along the row" : "column", (unsigned long long)B);
        snprintf(yt, sizeof yt, axis ? "row" : "block of %llu down the column", (unsigned long long)B);
        snprintf(title, sizeof title, "per-block RMSE of %.*s under %.*s", QS_CLIP(T.t.name, 150), QS_CLIP(labels[0], 95));
        if (v) fig = qs_plot_block_heatmap(title, v, R, C, 1, "block RMSE (log scale)", xt, yt, HEAT_CELLS);
        else fig = qs_plot_block_heatmap_cells(title, F.cell_sum, F.cell_cnt, F.R, F.C, F.trows, F.tcols, 1,
                                               "block RMSE (log scale)", xt, yt);
        free(v);
        qs_fly_free(&F);
    }
    if (!fig) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    rc = emit(cli, fig, po, pv);
out:
    if (hs) { for (int i = 0; i < n; i++) free(hs[i].counts); free(hs); }
    qs_fig_free(fig);
    qs_plot_tensor_close(&T);
    qs_db_close(db);
    return rc;
}

int qs_cmd_plot(qs_cli *cli, int argc, char **argv)
{
    enum { O_W = 0x2001, O_H, O_DPI, O_TITLE, O_LOGX, O_LOGY, O_XS, O_YS, O_TERM, O_RANGE, O_AMAX, O_ABS, O_FRESH, O_N,
           O_MODEL, O_CONFIG, O_CDF, O_CTX, O_BASE, O_VAL, O_TRAIN };
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {"output", required_argument, 0, 'o'},
                                       {"width", required_argument, 0, O_W}, {"height", required_argument, 0, O_H},
                                       {"dpi", required_argument, 0, O_DPI}, {"title", required_argument, 0, O_TITLE},
                                       {"logx", no_argument, 0, O_LOGX}, {"logy", no_argument, 0, O_LOGY},
                                       {"xscale", required_argument, 0, O_XS}, {"yscale", required_argument, 0, O_YS},
                                       {"term", required_argument, 0, O_TERM}, {"range", required_argument, 0, O_RANGE},
                                       {"amax", required_argument, 0, O_AMAX}, {"abs", no_argument, 0, O_ABS},
                                       {"fresh", no_argument, 0, O_FRESH}, {"samples", required_argument, 0, O_N},
                                       {"model", required_argument, 0, O_MODEL}, {"config", required_argument, 0, O_CONFIG},
                                       {"cdf", no_argument, 0, O_CDF}, {"ctx", required_argument, 0, O_CTX},
                                       {"baseline", required_argument, 0, O_BASE}, {"val", no_argument, 0, O_VAL},
                                       {"train", no_argument, 0, O_TRAIN}, {0, 0, 0, 0}};
    /* the command line as typed, before getopt permutes argv */
    prov_buf pb = {0};
    pb.command = join_argv(cli->argc, cli->argv);
    plot_opts po;
    memset(&po, 0, sizeof po);
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    char flist[4096] = "";
    int ch;
    unsigned long long u;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "f:o:", lo, NULL)) != -1) {
        if (ch == 'f') {
            size_t L = strlen(flist);
            if (L + strlen(optarg) + 2 > sizeof flist) return free(pb.command), qs_cli_usage("plot", "format list too long");
            snprintf(flist + L, sizeof flist - L, "%s%s", L ? "," : "", optarg);
            continue;
        }
        int k = qs_quant_opt("plot", ch, optarg, &base);
        if (k < 0) { free(pb.command); return QS_EXIT_USAGE; }
        if (k) continue;
        switch (ch) {
        case 'o': po.out = optarg; break;
        case O_W:
        case O_H:
            if (qs_parse_u64(optarg, &u) || u == 0 || u > 20000) return free(pb.command), qs_cli_usage("plot", "bad size '%s'", optarg);
            if (ch == O_W) po.width = (int)u; else po.height = (int)u;
            break;
        case O_DPI:
            if (qs_parse_f64(optarg, &po.dpi) || po.dpi < 10 || po.dpi > 2400) return free(pb.command), qs_cli_usage("plot", "bad --dpi '%s' (10..2400)", optarg);
            break;
        case O_TITLE: po.title = optarg; break;
        case O_LOGX: po.logx = 1; break;
        case O_LOGY: po.logy = 1; break;
        case O_XS: po.xscale = optarg; break;
        case O_YS: po.yscale = optarg; break;
        case O_TERM: po.term = optarg; break;
        case O_RANGE: {
            char *end;
            po.range_lo = strtod(optarg, &end);
            if (*end != ',' || !isfinite(po.range_lo)) return free(pb.command), qs_cli_usage("plot", "--range is LO,HI");
            if (qs_parse_f64(end + 1, &po.range_hi) || !(po.range_hi > po.range_lo)) return free(pb.command), qs_cli_usage("plot", "--range is LO,HI with LO < HI");
            po.have_range = 1;
            break;
        }
        case O_AMAX:
            if (qs_parse_f64(optarg, &po.amax) || !(po.amax > 0)) return free(pb.command), qs_cli_usage("plot", "bad --amax '%s'", optarg);
            break;
        case O_ABS: po.abs_err = 1; break;
        case O_FRESH: po.no_store = 1; break;
        case O_N:
            if (qs_parse_u64(optarg, &u) || u < 2 || u > 1000000) return free(pb.command), qs_cli_usage("plot", "bad --samples '%s'", optarg);
            po.nsamples = (int)u;
            break;
        case O_MODEL: po.model = optarg; break;
        case O_CONFIG:
            if (po.ncfgs == MAX_FORMATS) return free(pb.command), qs_cli_usage("plot", "too many --config");
            po.cfgs[po.ncfgs++] = optarg;
            break;
        case O_CDF: po.cdf = 1; break;
        case O_BASE: po.baseline = optarg; break;
        case O_VAL: case O_TRAIN: po.lossk |= ch == O_VAL ? 1 : 2; break;
        case O_CTX:
            if (qs_parse_u64(optarg, &u) || u == 0 || u > 1 << 20) return free(pb.command), qs_cli_usage("plot", "bad --ctx '%s'", optarg);
            po.ctx = (int)u;
            break;
        default: return free(pb.command), qs_cli_usage("plot", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return free(pb.command), qs_cli_usage("plot", "give a KIND (err-hist, value-hist, pareto, block-heatmap, transfer, trajectory, msd, attn, sensitivity, kl, loss)");
    const char *kind = argv[optind++];
    static const char *const kinds[] = {"err-hist", "value-hist", "pareto", "block-heatmap", "transfer", "trajectory", "msd", "attn",
                                        "sensitivity", "kl", "loss"};
    int ki = -1;
    for (int i = 0; i < 11; i++) if (!strcmp(kind, kinds[i])) ki = i;
    if (ki != 9 && (po.model || po.ncfgs || po.cdf || po.ctx))
        return free(pb.command), qs_cli_usage("plot", "--model, --config, --ctx and --cdf are for `plot kl`");
    if (ki != 10 && (po.baseline || po.lossk))
        return free(pb.command), qs_cli_usage("plot", "--baseline, --val and --train are for `plot loss`");
    if (po.lossk == 3) return free(pb.command), qs_cli_usage("plot", "--val and --train exclude each other");
    if (ki < 0) return free(pb.command), qs_cli_usage("plot", "unknown plot kind '%s'", kind);
    if (!po.out) return free(pb.command), qs_cli_usage("plot", "give -o FILE.png, or -o - for the terminal");
    if (strcmp(po.out, "-") != 0) {
        qs_err fe = {{0}};
        if (qs_plot_font_ok(&fe)) { free(pb.command); return qs_cli_err(QS_EXIT_ERR, &fe); }
    }
    if (ki == 10) return plot_loss(cli, &po, argv + optind, argc - optind, flist[0] != 0, &pb);   /* every argument a run */
    const char *tensor = optind < argc ? argv[optind++] : NULL;
    if (optind < argc) return free(pb.command), qs_cli_usage("plot", "unexpected argument '%s'", argv[optind]);

    qs_provenance pv = {pb.command, NULL, NULL, NULL, NULL};
    char dbabs[PATH_MAX];
    int rc;
    static qs_apply apps[MAX_FORMATS];
    static char labels[MAX_FORMATS][96];
    int n = 0;

    if (ki == 4) {   /* transfer: no database */
        if (tensor) { prov_free(&pb); return qs_cli_usage("plot", "transfer takes no tensor"); }
        if (!flist[0]) { prov_free(&pb); return qs_cli_usage("plot", "transfer needs a format (-f F)"); }
        if ((n = parse_formats(flist, &base, apps, labels, MAX_FORMATS)) < 0) { prov_free(&pb); return QS_EXIT_USAGE; }
        rc = plot_transfer(cli, &po, apps, n, labels, &pb, &pv);
        prov_free(&pb);
        return rc;
    }
    pv.database = realpath(cli->db_path, dbabs) ? dbabs : cli->db_path;
    if (ki == 9) {
        if (tensor || flist[0]) { prov_free(&pb); return qs_cli_usage("plot", "kl takes no tensor or formats: --model M --config LABEL"); }
        rc = plot_kl(cli, &po, &pb, &pv);
        prov_free(&pb);
        return rc;
    }
    if (ki >= 5) {
        if (tensor || flist[0]) { prov_free(&pb); return qs_cli_usage("plot", "%s takes no tensor or formats yet", kind); }
        rc = ki == 8 ? plot_sensitivity(cli, &po, &pb, &pv) : plot_lines_kind(cli, &po, kind, &pv);
        prov_free(&pb);
        return rc;
    }
    if (!tensor) { prov_free(&pb); return qs_cli_usage("plot", "%s needs a tensor name (see `qscope ls`)", kind); }
    if (!flist[0]) {
        if (ki == 0) snprintf(flist, sizeof flist, "%s", default_errhist);
        else if (ki == 2) {
            size_t L = 0;
            for (size_t i = 0; i < qs_format_count() && L + 32 < sizeof flist; i++)
                L += (size_t)snprintf(flist + L, sizeof flist - L, "%s%s", L ? "," : "", qs_format_at(i)->name);
        } else if (ki == 3) { prov_free(&pb); return qs_cli_usage("plot", "block-heatmap needs a format (-f F)"); }
    }
    if (flist[0] && (n = parse_formats(flist, &base, apps, labels, MAX_FORMATS)) < 0) { prov_free(&pb); return QS_EXIT_USAGE; }
    rc = plot_tensor_kind(cli, &po, kind, tensor, apps, n, labels, &pb, &pv);
    prov_free(&pb);
    return rc;
}
