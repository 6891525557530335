/*
** Stored `llm sensitivity` results and their plans (llm_sens_store.h).
*/
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "llm_sens_store.h"
#include "llm_eval_stats.h"
#include "llm_results.h"
#include "../kernels/qs_version.h"
#include "../store/text_escape.h"

void qs_sensruns_free(qs_sensrun *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) { free(runs[i].kl); free(runs[i].dppl); free(runs[i].bf16); }
    free(runs);
}

static double num(json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* a [L][S] array of numbers into out (NaN where missing) */
static void grid(json_t *a, int L, int S, double *out)
{
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++) out[l * S + s] = num(json_array_get(json_array_get(a, (size_t)l), (size_t)s));
}

static char *canon_without(const char *opts, const char *k1, const char *k2)
{
    json_t *o = json_loads(opts ? opts : "", 0, NULL);
    if (!o) return NULL;
    json_object_del(o, k1);
    json_object_del(o, k2);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static void read_plan(qs_db *db, qs_sensrun *r, const char *opts, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT options, data FROM result WHERE kind = 'llm_plan' AND tensor_hash = ? AND "
                                         "format = ? AND tool_version = ? ORDER BY id DESC", e);
    if (!st) return;
    sqlite3_bind_text(st, 1, r->model_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, r->format, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, QS_VERSION, -1, SQLITE_STATIC);
    char *want = canon_without(opts, "kl_target", "bits_budget");
    while (want && !r->have_plan && sqlite3_step(st) == SQLITE_ROW) {
        const char *po = (const char *)sqlite3_column_text(st, 0);
        char *got = canon_without(po, "kl_target", "bits_budget");
        json_t *pj = po ? json_loads(po, 0, NULL) : NULL;
        json_t *d = got && !strcmp(got, want) ? json_loads((const char *)sqlite3_column_text(st, 1), 0, NULL) : NULL;
        json_t *bf = json_object_get(d, "bf16");
        if (d && json_is_array(bf) && (r->bf16 = calloc((size_t)r->layers * r->nsites, 1))) {
            r->have_plan = 1;
            for (int l = 0; l < r->layers; l++)
                for (int s = 0; s < r->nsites; s++)
                    r->bf16[l * r->nsites + s] = json_integer_value(json_array_get(json_array_get(bf, (size_t)l), (size_t)s)) != 0;
            for (int i = 0; i < r->layers * r->nsites; i++) r->npromoted += r->bf16[i];
            json_t *kt = json_object_get(pj, "kl_target"), *bb = json_object_get(pj, "bits_budget");
            r->plan_kl_target = num(kt);
            r->plan_bits_budget = num(bb);
            if (json_is_number(kt)) snprintf(r->target, sizeof r->target, "mean KL <= %g", json_number_value(kt));
            else if (json_is_number(bb)) snprintf(r->target, sizeof r->target, "average bits <= %g", json_number_value(bb));
            else snprintf(r->target, sizeof r->target, "stored plan");
            r->plan_pred_kl = num(json_object_get(d, "predicted_kl"));
            json_t *ba = json_object_get(d, "bits_avg");
            r->plan_bits = json_is_object(ba) ? num(json_object_get(ba, "all")) : num(ba);
            json_t *m = json_object_get(d, "measured");
            r->plan_kl = num(json_object_get(m, qs_evstats[QS_EVS_KL_MEAN].key));   /* written from that table */
            r->plan_dppl = num(json_object_get(m, qs_evstats[QS_EVS_DPPL].key));
            r->plan_kl_se = num(json_object_get(m, qs_evstats[QS_EVS_KL_SE].key));
        }
        json_decref(d);
        json_decref(pj);
        free(got);
    }
    free(want);
    sqlite3_finalize(st);
}

/* The tables read so far, with each one's options (to find its plans). */
typedef struct sensload {
    qs_sensrun *R;
    char **opts;
    size_t nr;
} sensload;

/* The names and shape of a stored table. */
static void read_meta(qs_sensrun *r, json_t *d, json_t *sites)
{
    const char *s;
    json_t *mo = json_object_get(d, "model"), *tx = json_object_get(d, "text");
    s = json_is_object(mo) ? json_string_value(json_object_get(mo, "name")) : json_string_value(mo);
    if (!s) s = r->model_hash;   /* cut, if at all, between characters: the names go on into titles and JSON */
    snprintf(r->model, sizeof r->model, "%.*s", (int)qs_utf8_prefix(s, sizeof r->model - 1), s);
    s = json_is_object(tx) ? json_string_value(json_object_get(tx, "path")) : json_string_value(tx);
    if (s && strrchr(s, '/')) s = strrchr(s, '/') + 1;
    if (!s) s = "?";
    snprintf(r->text, sizeof r->text, "%.*s", (int)qs_utf8_prefix(s, sizeof r->text - 1), s);
    s = json_string_value(json_object_get(d, "score"));
    snprintf(r->score, sizeof r->score, "%s", s ? s : "?");
    r->ctx = (int)json_integer_value(json_object_get(d, "ctx"));
    r->chunks = (int)json_integer_value(json_object_get(d, "chunks"));
    for (int k = 0; k < r->nsites; k++) {
        s = json_string_value(json_array_get(sites, (size_t)k));
        snprintf(r->sites[k], sizeof r->sites[k], "%s", s ? s : "?");
    }
}

static int add_table(void *ctx, const qs_llm_result_row *row, qs_err *e)
{
    sensload *SL = ctx;
    json_t *d = row->data, *sites = json_object_get(d, "sites");
    int L = (int)json_integer_value(json_object_get(d, "layers")), S = (int)json_array_size(sites);
    if (L <= 0 || L > 4096 || S <= 0 || S > QS_SENS_MAX_SITES) return 0;
    qs_sensrun *NR = realloc(SL->R, (SL->nr + 1) * sizeof *NR);
    char **NO = NR ? realloc(SL->opts, (SL->nr + 1) * sizeof *NO) : NULL;
    if (NR) SL->R = NR;
    if (NO) SL->opts = NO;
    if (!NR || !NO) return qs_fail(e, "out of memory");
    qs_sensrun *r = &SL->R[SL->nr];
    memset(r, 0, sizeof *r);
    r->plan_kl_target = r->plan_bits_budget = r->plan_kl_se = NAN;
    SL->opts[SL->nr] = strdup(row->options ? row->options : "{}");
    SL->nr++;
    snprintf(r->model_hash, sizeof r->model_hash, "%s", row->hash);
    snprintf(r->format, sizeof r->format, "%s", row->format ? row->format : "?");
    r->layers = L;
    r->nsites = S;
    read_meta(r, d, sites);
    r->ref_ppl = num(json_object_get(json_object_get(d, "reference"), "ppl"));
    r->kl = malloc((size_t)L * S * sizeof *r->kl);
    r->dppl = malloc((size_t)L * S * sizeof *r->dppl);
    if (!r->kl || !r->dppl) return qs_fail(e, "out of memory");
    grid(json_object_get(d, "kl_mean"), L, S, r->kl);
    grid(json_object_get(d, "dppl"), L, S, r->dppl);
    return 0;
}

int qs_sensruns_load(qs_db *db, qs_sensrun **runs, size_t *n, qs_err *e)
{
    *runs = NULL;
    *n = 0;
    sensload SL = {NULL, NULL, 0};
    int rc = qs_llm_results_each(db, "llm_sensitivity", add_table, &SL, e);
    for (size_t i = 0; i < SL.nr && !rc; i++) read_plan(db, &SL.R[i], SL.opts[i], e);
    for (size_t i = 0; i < SL.nr; i++) free(SL.opts[i]);
    free(SL.opts);
    if (rc) { qs_sensruns_free(SL.R, SL.nr); return -1; }
    *runs = SL.R;
    *n = SL.nr;
    return 0;
}

/* The heatmap's footnote: the plan's target and what it gives, in the words and precision of
** `llm sensitivity`'s "plan verified" line (cmd_llm_sens.c), and whether the measured KL meets a KL
** target (the plan is chosen on the predicted KL, a sum of isolated effects, which can miss it). */
static void plan_note(const qs_sensrun *r, char *b, size_t cap)
{
    char tgt[96], verdict[16] = "";
    if (isfinite(r->plan_kl_target)) {
        snprintf(tgt, sizeof tgt, "mean KL <= %g", r->plan_kl_target);
        if (isfinite(r->plan_kl)) snprintf(verdict, sizeof verdict, r->plan_kl <= r->plan_kl_target ? "met: " : "missed: ");
    } else if (isfinite(r->plan_bits_budget))
        snprintf(tgt, sizeof tgt, "average bits <= %g", r->plan_bits_budget);
    else snprintf(tgt, sizeof tgt, "%s", r->target);
    char kl[40], se[48] = "", pred[40];   /* qs_evnum: the digits `llm sensitivity` prints, never 0.00000 */
    qs_evnum(r->plan_kl, 5, 0, kl, sizeof kl);
    qs_evnum(r->plan_pred_kl, 5, 0, pred, sizeof pred);
    if (isfinite(r->plan_kl_se)) {
        se[0] = '\xc2', se[1] = '\xb1';   /* "±" */
        qs_evnum(r->plan_kl_se, 5, 0, se + 2, sizeof se - 2);
    }
    /* the verdict and the measured KL first: a narrow terminal cuts the end of the line */
    snprintf(b, cap, "B: BF16 in the plan for %s (%smeasured KL %s%s); predicted KL %s; %d cell%s, %.3f bits", tgt, verdict, kl, se,
             pred, r->npromoted, r->npromoted == 1 ? "" : "s", r->plan_bits);
}

qs_figure *qs_plot_sensitivity(const qs_sensrun *r)
{
    char title[300];
    snprintf(title, sizeof title, "mean KL, one (layer, site) at %.*s: %.*s, %.*s, ctx %d", (int)qs_utf8_prefix(r->format, 40),
             r->format, (int)qs_utf8_prefix(r->model, 60), r->model, (int)qs_utf8_prefix(r->text, 60), r->text, r->ctx);
    size_t nc = (size_t)r->layers * r->nsites;
    float *v = malloc(nc * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < nc; i++) v[i] = r->kl[i] > 0 ? (float)r->kl[i] : NAN;   /* KL <= 0: nothing on a log scale */
    /* the look of `plot sensitivity` (app/cli/cmd_plot.c), plus the plan's cells */
    qs_figure *f = qs_plot_block_heatmap(title, v, (uint64_t)r->layers, (uint64_t)r->nsites, 1, "mean KL to FP32, nats (log scale)",
                                         "site", "layer", 400);
    free(v);
    if (!f) return NULL;
    /* one tick per cell centre: the sites by name, the layers by number (never a tick on an edge) */
    f->x.cells = f->y.cells = 1;
    f->x.ncat = r->nsites < QS_AXIS_MAX_CAT ? r->nsites : QS_AXIS_MAX_CAT;
    for (int s = 0; s < f->x.ncat; s++) snprintf(f->x.cat[s], sizeof f->x.cat[s], "%s", r->sites[s]);
    if (!r->have_plan) return f;
    /* dark text on the light (viridis: upper half) cells, grey on the dark ones */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nc; i++)
        if (r->kl[i] > 0) { lo = fmin(lo, log(r->kl[i])); hi = fmax(hi, log(r->kl[i])); }
    for (int l = 0; l < r->layers; l++)
        for (int s = 0; s < r->nsites; s++)
            if (r->bf16[l * r->nsites + s]) {
                double k = r->kl[l * r->nsites + s], t = k > 0 && hi > lo ? (log(k) - lo) / (hi - lo) : 0;
                qs_annot *a = qs_fig_annotate(f, s + 0.5, l + 0.5, 0, "B");
                if (a) { a->anchor = 1; a->color = t > 0.45 ? -2 : QS_COLOR_GREY; }
            }
    plan_note(r, f->note, sizeof f->note);
    return f;
}
