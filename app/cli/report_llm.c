/*
** The report's "Model-level evaluation" sections: one per stored `llm eval` run (newest first, at
** most QS_REPORT_MAX_EVALS), with the table of the run (reference PPL ± SE; per config PPL, ΔPPL
** with its 95% interval, KL mean / median / p99 / max, same top token, RMS Δp), the scoring
** convention, the weight-grid caveat where it applies, and the KL distribution plot.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../render/plot_render.h"
#include "report_sections.h"
#include "../../analysis/llm_eval_store.h"
#include "../../analysis/llm_sens_store.h"
#include "../../store/json_out.h"
#include "../../store/text_escape.h"

static void g(char *b, size_t cap, double v, const char *fmt)
{
    if (isfinite(v)) snprintf(b, cap, fmt, v);
    else snprintf(b, cap, "-");
}

/* The newest stored sensitivity table per (model, format): its most sensitive cells, the plan, the heatmap. */
static int qs_report_llm_sens(qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e)
{
    qs_sensrun *R = NULL;
    size_t n = 0;
    if (qs_sensruns_load(db, &R, &n, e)) return -1;
    int rc = 0, shown = 0;
    for (size_t k = n; k-- > 0 && shown < QS_REPORT_MAX_EVALS && !rc;) {
        const qs_sensrun *r = &R[k];
        int newer = 0;
        for (size_t j = k + 1; j < n; j++) newer |= !strcmp(R[j].model_hash, r->model_hash) && !strcmp(R[j].format, r->format);
        if (newer) continue;
        shown++;
        json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
        /* every (layer, site), largest KL first */
        int N = r->layers * r->nsites, *ord = malloc((size_t)N * sizeof *ord);
        if (!ord) { rc = qs_fail(e, "out of memory"); json_decref(rows); json_decref(notes); json_decref(pl); break; }
        for (int i = 0; i < N; i++) {
            int j = i;
            while (j > 0 && !(r->kl[ord[j - 1]] >= r->kl[i])) { ord[j] = ord[j - 1]; j--; }
            ord[j] = i;
        }
        int top = N < 12 ? N : 12;
        for (int i = 0; i < top; i++) {
            int c = ord[i];
            char a[4][48];
            snprintf(a[0], 48, "%d", c / r->nsites);
            g(a[1], 48, r->kl[c], "%.4g");
            if (isfinite(r->dppl[c])) snprintf(a[2], 48, "%+.2f", 100 * r->dppl[c]);
            else snprintf(a[2], 48, "-");
            snprintf(a[3], 48, "%.40s", r->have_plan ? (r->bf16[c] ? "BF16" : r->format) : "-");
            json_array_append_new(rows, json_pack("[s,s,s,s,s]", a[0], r->sites[c % r->nsites], a[1], a[2], a[3]));
            json_array_append_new(notes, json_null());
        }
        free(ord);
        if (plots) {
            qs_figure *fig = qs_plot_sensitivity(r);
            if (!fig) rc = qs_fail(e, "out of memory");
            else {
                char file[64], path[4096], opts[256];
                snprintf(file, sizeof file, "llm_sensitivity-%d.png", shown);
                snprintf(path, sizeof path, "%s/%s", dir, file);
                snprintf(opts, sizeof opts, "{\"ctx\":%d,\"chunks\":%d,\"format\":\"%.80s\"}", r->ctx, r->chunks, r->format);
                qs_provenance pv = {"qscope report (Model-level sensitivity)", NULL, r->model_hash, r->format, opts};
                qs_png_opts po = {0, 0, 0};
                rc = qs_plot_png(fig, &po, &pv, path, e);
                if (!rc) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", fig->title, "file", file));
                qs_fig_free(fig);
            }
        }
        char id[32], title[300], intro[1200], plan[400] = "No plan is stored (`llm sensitivity --kl-target X` or `--bits-budget B` makes one).";
        if (r->have_plan)
            snprintf(plan, sizeof plan, "Plan (%s, greedy by KL per extra bit): %d (layer, site) pairs kept in BF16 (marked B in the "
                     "heatmap), average bits %.3g; predicted KL %.4g (sum of isolated effects), measured by one evaluation %.4g, "
                     "ΔPPL %+.2f %%.", r->target, r->npromoted, r->plan_bits, r->plan_pred_kl, r->plan_kl, 100 * r->plan_dppl);
        snprintf(id, sizeof id, "llm_sens-%d", shown);
        /* names cut between characters: a title that is not UTF-8 would drop the section */
        snprintf(title, sizeof title, "Model-level sensitivity: %.*s at %.*s", (int)qs_utf8_prefix(r->model, 100), r->model,
                 (int)qs_utf8_prefix(r->format, 60), r->format);
        snprintf(intro, sizeof intro,
                 "`qscope llm sensitivity`: one (layer, site) at %.*s at a time, everything else FP32, on %.*s (ctx %d, %d "
                 "chunks); mean KL to the FP32 reference and ΔPPL in %%. The %d most sensitive of %d layers x %d sites, largest "
                 "KL first. %s",
                 (int)qs_utf8_prefix(r->format, 60), r->format, (int)qs_utf8_prefix(r->text, 100), r->text, r->ctx, r->chunks,
                 top, r->layers, r->nsites, plan);
        if (!rc)
            json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s],s:O,s:O,s:O}", "id", id, "title", title, "intro",
                                                      intro, "columns", "layer", "site", "mean KL", "ΔPPL %", "plan", "rows", rows,
                                                      "notes", notes, "plots", pl));
        json_decref(rows); json_decref(notes); json_decref(pl);
    }
    qs_sensruns_free(R, n);
    return rc;
}

/* The evaluation table's columns: the report's of analysis/llm_eval_stats.h. */
static json_t *table_columns(void)
{
    json_t *c = json_pack("[s]", "config");
    for (int k = 1, id; (id = qs_evstat_column(QS_EVV_REPORT, k)); k++)
        json_array_append_new(c, json_string(qs_evstats[id].view[QS_EVV_REPORT].head));
    return c;
}

/* One row: the reference's (ref) has only the reference's statistics, the rest empty. */
static json_t *table_row(const char *label, const double *v, int ref)
{
    json_t *row = json_pack("[o]", ref ? json_string(label) : qs_json_text(label));
    for (int k = 1, id; (id = qs_evstat_column(QS_EVV_REPORT, k)); k++) {
        char cell[96] = "";
        if (!ref || (qs_evstats[id].flags & QS_EVS_REF)) qs_evstat_cell(QS_EVV_REPORT, id, v, 0, cell, sizeof cell);
        json_array_append_new(row, json_string(cell));
    }
    return row;
}

int qs_report_llm_eval(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e)
{
    (void)cli;
    qs_evrun *R = NULL;
    size_t n = 0;
    if (qs_evruns_load(db, &R, &n, e)) return -1;
    int rc = 0, shown = 0;
    for (size_t k = n; k-- > 0 && shown < QS_REPORT_MAX_EVALS && !rc;) {
        const qs_evrun *r = &R[k];
        if (!r->ncfg && !r->have_ref) continue;
        shown++;
        json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
        char cav[300];
        qs_evrun_caveat(r, cav, sizeof cav);
        json_array_append_new(rows, table_row("reference (FP32)", r->ref, 1));
        json_array_append_new(notes, json_null());
        for (int i = 0; i < r->ncfg; i++) {
            const qs_evcfg *q = &r->cfg[i];
            json_array_append_new(rows, table_row(q->label, q->v, 0));
            char fail[160];
            snprintf(fail, sizeof fail, "FAILED: %lld of %zu scored rows non-finite, no statistics", q->nonfinite_rows, r->scored);
            json_array_append_new(notes, q->failed ? json_string(fail) : q->has_w && cav[0] ? json_string(cav) : json_null());
        }
        if (plots && r->ncfg) {
            int sel[64], ns = 0;
            for (int i = 0; i < r->ncfg && ns < 64; i++) sel[ns++] = i;
            qs_figure *fig = qs_plot_kl(r, sel, ns, 0);
            if (!fig) rc = qs_fail(e, "out of memory");
            else {
                char file[64], path[4096], opts[256];
                snprintf(file, sizeof file, "llm_eval_kl-%d.png", shown);
                snprintf(path, sizeof path, "%s/%s", dir, file);
                snprintf(opts, sizeof opts, "{\"ctx\":%d,\"chunks\":%d,\"score\":\"%s\"}", r->ctx, r->chunks, r->score);
                qs_provenance pv = {"qscope report (Model-level evaluation)", NULL, r->model_hash, NULL, opts};
                qs_png_opts po = {0, 0, 0};
                rc = qs_plot_png(fig, &po, &pv, path, e);
                if (!rc) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", fig->title, "file", file));
                qs_fig_free(fig);
            }
        }
        char id[32], title[300], intro[2000];
        snprintf(id, sizeof id, "llm_eval-%d", shown);
        const char *m = qs_evrun_model(r);
        int ml = (int)qs_utf8_prefix(m, 100), tl = (int)qs_utf8_prefix(r->text, 100);
        snprintf(title, sizeof title, "Model-level evaluation: %.*s on %.*s (ctx %d)", ml, m, tl, r->text, r->ctx);
        snprintf(intro, sizeof intro,
                 "`qscope llm eval`: %.*s (hash %.32s) on %.*s, %d chunks of %d tokens, %zu scored tokens (%s). Each "
                 "configuration against the FP32 reference on the same tokens: PPL ± its standard error; ΔPPL = "
                 "PPL(config)/PPL(ref) − 1 in %% with its 95%% interval (delta method on the paired per-token differences); "
                 "KL = KL(P_ref ‖ P_config) per token in nats (mean, median, 99th percentile, max); same top = tokens whose "
                 "most likely next token agrees; RMS Δp of the actual next token's probability. Standard errors treat "
                 "tokens as independent (docs/llm.md).%s%s",
                 ml, m, r->model_hash, tl, r->text, r->chunks, r->ctx, r->scored,
                 strcmp(r->score, "all") ? "llama.cpp's convention: positions ctx/2 .. ctx−2 of each chunk predict the next token"
                                         : "every position 0 .. ctx−2 of each chunk predicts the next token",
                 cav[0] ? " Note: " : "", cav);
        if (!rc)
            json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:o,s:O,s:O,s:O}", "id", id, "title", title, "intro", intro,
                                                      "columns", table_columns(), "rows", rows, "notes", notes, "plots", pl));
        json_decref(rows); json_decref(notes); json_decref(pl);
    }
    qs_evruns_free(R, n);
    return rc ? rc : qs_report_llm_sens(db, dir, plots, sections, e);
}
