/*
** Report sections (report_sections.h): builders and the Markdown / HTML renderers.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../render/plot_render.h"
#include "report_sections.h"
#include "../../analysis/ais.h"
#include "../../analysis/ais_store.h"
#include "../../analysis/claims.h"
#include "../../analysis/claims_grpo.h"
#include "../../analysis/claims_train.h"
#include "../../analysis/rl_xaxis.h"
#include "../../store/db_readonly.h"
#include "../../store/json_out.h"
#include "../../store/q_results.h"
#include "../../store/q_rl.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int qs_embed_png(FILE *out, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    unsigned char in[3];
    size_t n;
    while ((n = fread(in, 1, 3, f)) > 0) {
        char o[4];
        o[0] = b64chars[in[0] >> 2];
        o[1] = b64chars[((in[0] & 3) << 4) | (n > 1 ? in[1] >> 4 : 0)];
        o[2] = n > 1 ? b64chars[((in[1] & 15) << 2) | (n > 2 ? in[2] >> 6 : 0)] : '=';
        o[3] = n > 2 ? b64chars[in[2] & 63] : '=';
        fwrite(o, 1, 4, out);
        if (n < 3) break;
    }
    fclose(f);
    return 0;
}

/* A report's plots ({"file", "title"} under dir) as embedded figures. */
int qs_html_figures(FILE *f, json_t *plots, const char *dir)
{
    size_t k;
    json_t *p;
    json_array_foreach(plots, k, p) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(p, "file")));
        fprintf(f, "<figure><img alt=\"");
        qs_html_esc(f, json_string_value(json_object_get(p, "title")));
        fprintf(f, "\" src=\"data:image/png;base64,");
        if (qs_embed_png(f, path)) return -1;
        fprintf(f, "\"><figcaption>");
        qs_html_esc(f, json_string_value(json_object_get(p, "title")));
        fprintf(f, "</figcaption></figure>\n");
    }
    return 0;
}

void qs_html_esc(FILE *f, const char *s)
{
    for (s = s ? qs_esc(s) : NULL; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static int report_claims(const char *dir, int plots, int full, json_t *sections, qs_err *e);

int qs_report_claims(qs_cli *cli, const char *dir, int plots, int full, json_t *sections, qs_err *e)
{
    /* full: the pre-training claim reads the stored default sweep (a report does not train it) */
    qs_err oe = {{0}};   /* no database: the claim says it has no runs */
    qs_db *tdb = full ? qs_db_open_readonly(cli->db_path, &oe) : NULL;
    qs_claims_train_env env = {tdb, NULL, NULL};
    if (tdb) qs_claims_train_bind(&env);
    qs_claims_grpo_bind(tdb);   /* and the RL claims the stored rl grpo sweeps */
    int rc = report_claims(dir, plots, full, sections, e);
    qs_claims_train_bind(NULL);
    qs_claims_grpo_bind(NULL);
    if (tdb) qs_db_close(tdb);
    return rc;
}

static int report_claims(const char *dir, int plots, int full, json_t *sections, qs_err *e)
{
    json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
    for (size_t k = 0; k < qs_claim_count(); k++) {
        const qs_claim *c = qs_claim_at(k);
        qs_claim_out o;
        memset(&o, 0, sizeof o);
        o.value = NAN;
        if (c->measure(!full, &o, e)) {
            qs_fig_free(o.fig);
            json_decref(rows); json_decref(notes); json_decref(pl);
            return qs_fail(e, "claim %s: %s", c->id, e->msg);
        }
        json_array_append_new(rows, json_pack("[s,s,s,s,s,s]", c->id, c->paper, c->claim, c->figure, o.measured,
                                              qs_verdict_name(o.verdict)));
        json_array_append_new(notes, json_string(o.detail));
        if (plots && o.fig) {
            char file[256], path[4096];
            snprintf(file, sizeof file, "claim-%s.png", c->id);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            qs_provenance pv = {full ? "qscope report --claims full" : "qscope report --claims quick", NULL,
                                 "none: generated data with fixed seeds", c->id, o.detail};
            qs_png_opts po = {0, 0, 0};
            int bad = qs_plot_png(o.fig, &po, &pv, path, e);
            if (!bad) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", o.fig->title, "file", file));
            qs_fig_free(o.fig);
            if (bad) { json_decref(rows); json_decref(notes); json_decref(pl); return -1; }
        } else
            qs_fig_free(o.fig);
    }
    json_array_append_new(sections,
        json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s,s],s:o,s:o,s:o}", "id", "claims", "title", "Paper claims",
                  "intro", full ? "Every reproducible headline number of the source papers, re-measured with fixed seeds "
                                  "(`qscope claims`; settings under each row)."
                                : "Every reproducible headline number of the source papers, re-measured with fixed seeds "
                                  "at the reduced sizes of `qscope claims --quick` (settings under each row; "
                                  "`report --claims full` uses the full sizes).",
                  "columns", "claim", "paper", "what the paper says", "paper's figure", "measured", "verdict",
                  "rows", rows, "notes", notes, "plots", pl));
    return 0;
}

static const char *cell(json_t *row, size_t i)
{
    const char *s = json_string_value(json_array_get(row, i));
    return s ? s : "";
}

/* One Markdown table cell (" text |"): control characters and pipes escaped. */
static void md_cell(FILE *f, const char *t)
{
    fprintf(f, " %s |", qs_esc_md(t));
}

void qs_report_sections_md(FILE *f, json_t *sections, int lead)
{
    size_t i, k, c;
    json_t *s, *row, *p;
    json_array_foreach(sections, i, s) {
        if (json_is_true(json_object_get(s, "before_tensors")) != lead) continue;
        json_t *cols = json_object_get(s, "columns"), *notes = json_object_get(s, "notes");
        /* titles and intros name models, texts and runs from stored results */
        fprintf(f, "## %s\n\n%s\n\n", qs_esc(json_string_value(json_object_get(s, "title"))),
                qs_esc(json_string_value(json_object_get(s, "intro"))));
        size_t nc = json_array_size(cols);
        fprintf(f, "|");
        for (c = 0; c < nc; c++) md_cell(f, cell(cols, c));
        fprintf(f, "\n|");
        for (c = 0; c < nc; c++) fprintf(f, "---|");
        fprintf(f, "\n");
        json_array_foreach(json_object_get(s, "rows"), k, row) {
            fprintf(f, "|");
            for (c = 0; c < nc; c++) md_cell(f, cell(row, c));
            fprintf(f, "\n");
        }
        fprintf(f, "\n");
        if (json_array_size(notes)) {
            json_array_foreach(json_object_get(s, "rows"), k, row) {
                const char *n = json_string_value(json_array_get(notes, k));
                if (n && *n) fprintf(f, "- **%s**: %s\n", qs_esc_md(cell(row, 0)), qs_esc(n));
            }
            fprintf(f, "\n");
        }
        json_array_foreach(json_object_get(s, "plots"), k, p)
            fprintf(f, "![%s](%s)\n\n", qs_esc_md(json_string_value(json_object_get(p, "title"))),
                    qs_esc(json_string_value(json_object_get(p, "file"))));
    }
}

int qs_report_sections_html(FILE *f, json_t *sections, const char *dir, int lead)
{
    size_t i, k, c;
    json_t *s, *row;
    json_array_foreach(sections, i, s) {
        if (json_is_true(json_object_get(s, "before_tensors")) != lead) continue;
        json_t *cols = json_object_get(s, "columns"), *notes = json_object_get(s, "notes");
        fprintf(f, "<h2 id=\"s-");   /* the summary's contents link here */
        qs_html_esc(f, json_string_value(json_object_get(s, "id")));
        fprintf(f, "\">");
        qs_html_esc(f, json_string_value(json_object_get(s, "title")));
        fprintf(f, "</h2>\n<p>");
        qs_html_esc(f, json_string_value(json_object_get(s, "intro")));
        fprintf(f, "</p>\n<table class=\"section\"><tr>");
        size_t nc = json_array_size(cols);
        for (c = 0; c < nc; c++) { fprintf(f, "<th>"); qs_html_esc(f, cell(cols, c)); fprintf(f, "</th>"); }
        fprintf(f, "</tr>\n");
        json_array_foreach(json_object_get(s, "rows"), k, row) {
            const char *n = json_string_value(json_array_get(notes, k));
            fprintf(f, "<tr>");
            for (c = 0; c < nc; c++) { fprintf(f, "<td>"); qs_html_esc(f, cell(row, c)); fprintf(f, "</td>"); }
            fprintf(f, "</tr>\n");
            if (n && *n) {
                fprintf(f, "<tr class=\"note\"><td colspan=\"%zu\">", nc);
                qs_html_esc(f, n);
                fprintf(f, "</td></tr>\n");
            }
        }
        fprintf(f, "</table>\n");
        if (qs_html_figures(f, json_object_get(s, "plots"), dir)) return -1;
    }
    return ferror(f) ? -1 : 0;
}

/* ---- RL runs ------------------------------------------------------------------------------------ */

static void fmtg(char *buf, size_t cap, double v, const char *fmt)
{
    if (isnan(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, fmt, v);
}

static int write_fig(qs_figure *fig, const char *dir, const char *file, const char *command, const char *hashes,
                     const char *options, json_t *plots, qs_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    qs_provenance pv = {command, NULL, hashes, NULL, options};
    qs_png_opts po = {0, 0, 0};
    int rc = qs_plot_png(fig, &po, &pv, path, e);
    if (!rc) json_array_append_new(plots, json_pack("{s:s,s:s}", "title", fig->title, "file", file));
    return rc;
}

/* The k3 trajectories of the runs collected by qs_report_rl. */
enum { NTRAJ = 6, NT = QS_REPORT_MAX_RUNS };
typedef struct rl_traj {
    double *x[NT], *y[NT], mean[NT];
    char name[NT][64], hash[NT][34];
    size_t n[NT];
    qs_rl_xkind kind[NT];
    int ntraj;
} rl_traj;

/* One k3 figure for the runs of one x kind (training steps, or llm score's prompts: never on one
** axis): the NTRAJ with the largest mean k3, every run of that kind not drawn named in the note.
** total: the runs of that kind in the table; nothing (0) when none of them can be drawn. */
static int rl_k3_fig(const rl_traj *T, qs_rl_xkind want, int total, const char *dir, json_t *pl, qs_err *e)
{
    /* largest mean k3 first; runs whose k3 is zero throughout cannot be drawn on the log axis */
    int order[NT], ndraw = 0, nzero = 0, nkind = 0;
    for (int i = 0; i < T->ntraj; i++) {
        if (T->kind[i] != want) continue;
        nkind++;
        if (!(T->mean[i] > 0)) { nzero++; continue; }
        int k = ndraw++;
        while (k > 0 && T->mean[order[k - 1]] < T->mean[i]) { order[k] = order[k - 1]; k--; }
        order[k] = i;
    }
    if (!ndraw) return 0;
    int nshow = ndraw < NTRAJ ? ndraw : NTRAJ;
    qs_line_data ld[NTRAJ];
    qs_rl_xkind kinds[NTRAJ];
    char hashes[NTRAJ * 34 + 1] = "";
    for (int i = 0; i < nshow; i++) {
        int t = order[i];
        ld[i] = (qs_line_data){T->name[t], T->n[t], T->x[t], T->y[t]};
        kinds[i] = want;
        snprintf(hashes + strlen(hashes), sizeof hashes - strlen(hashes), "%s%s", i ? "," : "", T->hash[t]);
    }
    const char *what = want == QS_RL_X_PROMPT ? "Rollout-reference mismatch per prompt (llm score, KL estimator k3)"
                                              : "Rollout-trainer mismatch per step (KL estimator k3)";
    char title[200];
    if (nshow < total)
        snprintf(title, sizeof title, "%s: %d of %d runs%s", what, nshow, total, nshow < ndraw ? ", largest mean k3" : "");
    else snprintf(title, sizeof title, "%s", what);
    qs_figure *fig = qs_plot_rl_runs(title, "KL(rollout || trainer), k3", QS_AX_LOG10, ld, kinds, (size_t)nshow, want);
    if (!fig) return qs_fail(e, "out of memory");
    if (want == QS_RL_X_PROMPT) snprintf(fig->y.title, sizeof fig->y.title, "KL(rollout || FP32 reference), k3");
    /* every run not drawn is accounted for under the plot */
    char *nb = fig->note;
    size_t cap = sizeof fig->note, k = 0;
    if (nshow < ndraw) k += (size_t)snprintf(nb + k, cap - k, "%d run%s with smaller k3", ndraw - nshow, ndraw - nshow == 1 ? "" : "s");
    if (nzero && k < cap)
        k += (size_t)snprintf(nb + k, cap - k, "%s%d with k3 = 0 at every %s (log axis)", k ? ", " : "", nzero,
                              want == QS_RL_X_PROMPT ? "prompt" : "step");
    if (total > nkind && k < cap)
        k += (size_t)snprintf(nb + k, cap - k, "%s%d with one %s or beyond the table", k ? ", " : "", total - nkind,
                              want == QS_RL_X_PROMPT ? "prompt" : "step");
    if (k && k < cap) snprintf(nb + k, cap - k, " not drawn; every run is in the table");
    int rc = write_fig(fig, dir, want == QS_RL_X_PROMPT ? "rl_k3_prompts.png" : "rl_k3.png",
                       "qscope report (RL runs)", hashes, "{\"ais\":\"defaults\"}", pl, e);
    qs_fig_free(fig);
    return rc;
}

int qs_report_rl(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e)
{
    (void)cli;
    qs_run_item *runs;
    size_t nruns;
    if (qs_run_names(db, QS_RUNS_SIMS_LAST, &runs, &nruns, e)) return -1;
    qs_ais_opts ao;
    qs_ais_opts_default(&ao);
    json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
    /* the k3 trajectory of every run listed; the figures (one per x kind) draw the NTRAJ with the
    ** largest mean k3 and say so, and name the runs they cannot draw on their log axis (k3 = 0 at
    ** every step) */
    rl_traj *T = calloc(1, sizeof *T);
    int nrun = 0, total = 0, ntotal[2] = {0, 0}, rc = 0;
    if (!T) rc = qs_fail(e, "out of memory");
    for (size_t ri = 0; ri < nruns && !rc; ri++) {
        qs_rl_xkind xk = qs_rl_run_xkind(runs[ri].metadata);
        total++;
        ntotal[xk]++;
        if (nrun >= QS_REPORT_MAX_RUNS) continue;
        const char *name = runs[ri].name, *label = runs[ri].label;
        qs_ais_result r;
        memset(&r, 0, sizeof r);
        if (qs_ais_run(db, name, &ao, &r, e)) { rc = -1; break; }
        double dsum = 0, k3 = 0, essmin = INFINITY, wmax = 0, lam = NAN;
        size_t nd = 0;
        for (size_t i = 0; i < r.nrows; i++) {
            const double *v = r.rows[i].v;
            if (isnan(v[QS_AIS_F_kl_k3])) continue;
            dsum += v[QS_AIS_F_mean_abs_dlogp];
            k3 += v[QS_AIS_F_kl_k3];
            essmin = fmin(essmin, v[QS_AIS_F_ess_seq]);
            wmax = fmax(wmax, v[QS_AIS_F_w_max]);
            lam = v[QS_AIS_F_ais_lambda];
            nd++;
        }
        char c[6][40];
        fmtg(c[0], 40, nd ? dsum / nd : NAN, "%.3g");
        fmtg(c[1], 40, nd ? k3 / nd : NAN, "%.3g");
        fmtg(c[2], 40, nd ? essmin : NAN, "%.3f");
        fmtg(c[3], 40, nd ? wmax : NAN, "%.3g");
        fmtg(c[4], 40, lam, "%.3f");
        /* the steps that have tokens, and their range: a run logged every 10 steps has 7 of 0..59;
        ** an llm score run's "steps" are its prompts */
        const char *unit = xk == QS_RL_X_PROMPT ? " prompts" : "";
        if (r.nrows > 1)
            snprintf(c[5], 40, "%llu / %zu%s (%.0f..%.0f)", (unsigned long long)r.tokens, r.nrows, unit, r.rows[0].v[QS_AIS_F_step],
                     r.rows[r.nrows - 1].v[QS_AIS_F_step]);
        else snprintf(c[5], 40, "%llu / %zu%s", (unsigned long long)r.tokens, r.nrows, unit);
        json_array_append_new(rows, json_pack("[o,o,o,s,s,s,s,s,s]", qs_json_text(name), qs_json_text(label), qs_json_text(r.format), c[5],
                                              c[0], c[1], c[2], c[3], c[4]));
        json_array_append_new(notes, json_null());
        int t = T->ntraj;
        if (plots && t < NT && r.nrows > 1 && (T->x[t] = malloc(r.nrows * sizeof(double))) &&
            (T->y[t] = malloc(r.nrows * sizeof(double)))) {
            double sum = 0;
            size_t npos = 0;
            for (size_t i = 0; i < r.nrows; i++) {
                T->x[t][i] = r.rows[i].v[QS_AIS_F_step];
                T->y[t][i] = r.rows[i].v[QS_AIS_F_kl_k3];
                if (T->y[t][i] > 0 && isfinite(T->y[t][i])) { sum += T->y[t][i]; npos++; }
            }
            T->mean[t] = npos ? sum / (double)r.nrows : 0;
            T->n[t] = r.nrows;
            T->kind[t] = xk;
            snprintf(T->name[t], sizeof T->name[t], "%s", name);
            snprintf(T->hash[t], sizeof T->hash[t], "%s", r.hash);
            T->ntraj++;
        }
        qs_ais_result_free(&r);
        nrun++;
    }
    qs_run_items_free(runs, nruns);
    if (!rc && plots) rc = rl_k3_fig(T, QS_RL_X_STEP, ntotal[QS_RL_X_STEP], dir, pl, e);
    if (!rc && plots) rc = rl_k3_fig(T, QS_RL_X_PROMPT, ntotal[QS_RL_X_PROMPT], dir, pl, e);
    for (int i = 0; T && i < NT; i++) { free(T->x[i]); free(T->y[i]); }
    free(T);
    if (!rc && nrun) {
        char intro[800];
        snprintf(intro, sizeof intro,
                 "%d RL run%s in the database%s. Diagnostics per run (`qscope ais RUN` has them per step): |δ| = mean "
                 "|log-prob difference| per token, k3 = KL estimator, averaged over steps; ESS = the smallest "
                 "sequence-level effective sample size ratio of any step; w max = the largest token weight "
                 "π/μ; λ = the AIS-R mixing coefficient of the last step (AIS-R is the project's reconstruction "
                 "of AIS, whose exact formulas are unpublished).%s",
                 total, total == 1 ? "" : "s", total > nrun ? " (the first ones shown; logged runs before simulated)" : "",
                 ntotal[QS_RL_X_PROMPT] ? " An `llm score` run has no training: its \"steps\" are its prompts (rollout "
                                          "numerics against the FP32 reference), plotted on their own axis, never with "
                                          "training steps." : "");
        json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s,s,s,s,s],s:O,s:O,s:O}", "id", "rl", "title",
                                                  "RL runs: rollout-training mismatch", "intro", intro, "columns", "run",
                                                  "label", "rollout format", "tokens / steps (range)", "|δ|", "k3", "ESS min",
                                                  "w max", "λ (AIS-R)", "rows", rows, "notes", notes, "plots", pl));
    }
    json_decref(rows); json_decref(notes); json_decref(pl);
    return rc;
}

/* ---- kernel experiments ------------------------------------------------------------------------- */

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void jfmt(char *buf, size_t cap, json_t *v, const char *fmt)
{
    if (json_is_number(v)) snprintf(buf, cap, fmt, json_number_value(v));
    else if (json_is_string(v)) snprintf(buf, cap, "%s", json_string_value(v));
    else snprintf(buf, cap, "-");
}

int qs_report_kernels(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e)
{
    (void)cli;
    static const char *const kinds[3] = {"msd", "attn", "resq"};
    for (int k = 0; k < 3; k++) {
        qs_result_item ri;
        int found;
        if (qs_result_latest(db, kinds[k], &ri, &found, e)) return -1;
        char *data = ri.data, *hash = ri.tensor_hash, *opts = ri.options;   /* kept; the rest freed */
        ri.data = ri.tensor_hash = ri.options = NULL;
        qs_result_item_free(&ri);
        json_t *j = data ? json_loads(data, 0, NULL) : NULL;
        if (!j) { free(data); free(hash); free(opts); continue; }
        json_t *rows = json_array(), *notes = json_array(), *pl = json_array(), *r;
        size_t i;
        const char *title, *intro;
        json_t *cols;
        char a[4][48];
        if (k == 0) {
            title = "Kernel experiments: Multi-Scale Dequant";
            intro = "The newest `qscope msd` result: effective bits of the k-pass decompositions (RMS: -1/2 log2(Σe²/Σx²); "
                    "max error: log2(M/max|e|) per row, or per block for MX). The single-pass MXFP8 rows compare "
                    "its two scale rules by RMS bits only (max error: n/a).";
            cols = json_pack("[s,s,s,s,s]", "scheme", "data", "passes", "RMS bits", "max-error bits");
            json_array_foreach(json_object_get(j, "effective_bits"), i, r) {
                jfmt(a[0], 48, json_object_get(r, "passes"), "%.0f");
                jfmt(a[1], 48, json_object_get(r, "bits_rms"), "%.2f");
                json_t *b = json_object_get(r, "bits_bound");
                if (!b) b = json_object_get(r, "bits_block_bound");
                /* the single-pass MXFP8 rows compare scale rules by RMS bits alone: a bare "-" would read as a failure */
                if (!b) snprintf(a[2], 48, "n/a (RMS only)");
                else jfmt(a[2], 48, b, "%.2f");
                /* rows of one scheme that differ by their scale rule (MXFP8 no-clip vs floor) say it */
                char scheme[96];
                const char *rule = json_string_value(json_object_get(r, "scale_rule"));
                snprintf(scheme, sizeof scheme, rule ? "%s, scale %s" : "%s", jstr(r, "scheme"), rule);
                json_array_append_new(rows, json_pack("[s,s,s,s,s]", scheme, jstr(r, "data"), a[0], a[1], a[2]));
                json_array_append_new(notes, json_null());
            }
        } else if (k == 1) {
            title = "Kernel experiments: attention";
            intro = "The newest `qscope attn` result: each kernel's error against the FP64 reference on the same "
                    "(quantized) inputs and on the unquantized ones.";
            cols = json_pack("[s,s,s,s,s]", "keys", "kernel", "rel. L2 (same inputs)", "rel. L2 (unquantized)", "cosine");
            json_array_foreach(json_object_get(j, "rows"), i, r) {
                json_t *q = json_object_get(r, "vs_same_inputs"), *u = json_object_get(r, "vs_unquantized");
                jfmt(a[0], 48, json_object_get(r, "L"), "%.0f");
                jfmt(a[1], 48, json_object_get(q, "rel_l2"), "%.3g");
                jfmt(a[2], 48, json_object_get(u, "rel_l2"), "%.3g");
                jfmt(a[3], 48, json_object_get(q, "cosine"), "%.6f");
                json_array_append_new(rows, json_pack("[s,s,s,s,s]", a[0], jstr(r, "kernel"), a[1], a[2], a[3]));
                json_array_append_new(notes, json_null());
            }
        } else {
            title = "Kernel experiments: Rollout-ResQ";
            intro = "The newest `qscope resq` result (reconstructed method): the FP4 layer's error against the FP32 "
                    "layer for each correction pattern, the activation underflow and the share of it restored.";
            cols = json_pack("[s,s,s,s,s]", "format", "correction", "rel. L2 vs FP32", "underflow", "recovered");
            json_array_foreach(json_object_get(j, "rows"), i, r) {
                jfmt(a[0], 48, json_object_get(json_object_get(r, "vs_fp32"), "rel_l2"), "%.4g");
                json_t *uf = json_object_get(r, "underflow"), *rc2 = json_object_get(r, "recovered");
                snprintf(a[1], 48, json_is_number(uf) ? "%.2f %%" : "-", 100 * json_number_value(uf));
                snprintf(a[2], 48, json_is_number(rc2) ? "%.1f %%" : "-", 100 * json_number_value(rc2));
                json_array_append_new(rows, json_pack("[s,s,s,s,s]", jstr(r, "format"), jstr(r, "sparsity"), a[0], a[1], a[2]));
                json_array_append_new(notes, json_null());
            }
        }
        int rc = 0;
        if (plots) {
            qs_err pe = {{0}};
            qs_figure *fig = qs_plot_lines_json(kinds[k], data, NULL, &pe);
            if (fig) {
                char file[32], cmd[64];
                snprintf(file, sizeof file, "kernel_%s.png", kinds[k]);
                snprintf(cmd, sizeof cmd, "qscope report (newest %s result)", kinds[k]);
                rc = write_fig(fig, dir, file, cmd, hash, opts, pl, e);
                qs_fig_free(fig);
            }
        }
        const char *recon = jstr(j, "reconstructed");
        char intro2[1024];
        snprintf(intro2, sizeof intro2, "%s%s%s", intro, *recon ? " Reconstructed: " : "", recon);
        if (!rc)
            json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:o,s:O,s:O,s:O}", "id", kinds[k], "title", title,
                                                      "intro", intro2, "columns", cols, "rows", rows, "notes", notes,
                                                      "plots", pl));
        else json_decref(cols);
        json_decref(rows); json_decref(notes); json_decref(pl); json_decref(j);
        free(data); free(hash); free(opts);
        if (rc) return -1;
    }
    return 0;
}
