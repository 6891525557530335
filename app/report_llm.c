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

#include "plot_render.h"
#include "report_sections.h"
#include "../analysis/llm_eval_store.h"
#include "../store/json_out.h"

static void g(char *b, size_t cap, double v, const char *fmt)
{
    if (isfinite(v)) snprintf(b, cap, fmt, v);
    else snprintf(b, cap, "-");
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
        char c[9][64], cav[300];
        qs_evrun_caveat(r, cav, sizeof cav);
        if (isfinite(r->ppl)) snprintf(c[0], 64, "%.4g ± %.2g", r->ppl, r->ppl_se);
        else snprintf(c[0], 64, "-");
        json_array_append_new(rows, json_pack("[s,s,s,s,s,s,s,s,s]", "reference (FP32)", c[0], "", "", "", "", "", "", ""));
        json_array_append_new(notes, json_null());
        for (int i = 0; i < r->ncfg; i++) {
            const qs_evcfg *q = &r->cfg[i];
            if (isfinite(q->ppl)) snprintf(c[0], 64, "%.4g ± %.2g", q->ppl, q->ppl_se);
            else snprintf(c[0], 64, "-");
            if (isfinite(q->dppl) && isfinite(q->dppl_lo) && isfinite(q->dppl_hi))
                snprintf(c[1], 64, "%+.2f [%+.2f, %+.2f]", 100 * q->dppl, 100 * q->dppl_lo, 100 * q->dppl_hi);
            else snprintf(c[1], 64, "-");
            g(c[2], 64, q->kl_mean, "%.4g");
            g(c[3], 64, q->kl_median, "%.4g");
            g(c[4], 64, q->kl_p99, "%.4g");
            g(c[5], 64, q->kl_max, "%.4g");
            g(c[6], 64, 100 * q->top1, "%.2f");
            g(c[7], 64, q->dp_rms, "%.4g");
            json_array_append_new(rows, json_pack("[o,s,s,s,s,s,s,s,s]", qs_json_text(q->label), c[0], c[1], c[2], c[3], c[4],
                                                  c[5], c[6], c[7]));
            json_array_append_new(notes, q->has_w && cav[0] ? json_string(cav) : json_null());
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
        snprintf(title, sizeof title, "Model-level evaluation: %.100s on %.100s (ctx %d)", qs_evrun_model(r), r->text, r->ctx);
        snprintf(intro, sizeof intro,
                 "`qscope llm eval`: %.100s (hash %.32s) on %.100s, %d chunks of %d tokens, %zu scored tokens (%s). Each "
                 "configuration against the FP32 reference on the same tokens: PPL ± its standard error; ΔPPL = "
                 "PPL(config)/PPL(ref) − 1 in %% with its 95%% interval (delta method on the paired per-token differences); "
                 "KL = KL(P_ref ‖ P_config) per token in nats (mean, median, 99th percentile, max); same top = tokens whose "
                 "most likely next token agrees; RMS Δp of the actual next token's probability. Standard errors treat "
                 "tokens as independent (docs/llm.md).%s%s",
                 qs_evrun_model(r), r->model_hash, r->text, r->chunks, r->ctx, r->scored,
                 strcmp(r->score, "all") ? "llama.cpp's convention: positions ctx/2 .. ctx−2 of each chunk predict the next token"
                                         : "every position 0 .. ctx−2 of each chunk predicts the next token",
                 cav[0] ? " Note: " : "", cav);
        if (!rc)
            json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s,s,s,s,s],s:O,s:O,s:O}", "id", id, "title", title,
                                                      "intro", intro, "columns", "config", "PPL", "ΔPPL % [95% CI]", "KL mean",
                                                      "KL median", "KL p99", "KL max", "same top %", "RMS Δp", "rows", rows,
                                                      "notes", notes, "plots", pl));
        json_decref(rows); json_decref(notes); json_decref(pl);
    }
    qs_evruns_free(R, n);
    return rc;
}
