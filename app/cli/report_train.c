/*
** The report's "Training runs" section: the stored training runs grouped by recipe, model and
** options apart from the seed (analysis/train_curves.h), one row per group with its final validation
** loss (mean over the seeds with its band) and the relative gap to the BF16 curve of the same model
** (FP32 when there is no BF16 run), and the validation-loss plot with the gap plot under it.
** Nothing when the database has no training runs.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../render/plot_render.h"
#include "report_sections.h"
#include "../../analysis/train_curves.h"
#include "../../store/json_out.h"
#include "../../store/train_store.h"

/* The baseline curve of c's model: bf16, else fp32; NULL when neither ran. */
static const qs_loss_curve *baseline_of(const qs_loss_curve *c, size_t n, const char *model)
{
    static const char *const pref[] = {"bf16", "fp32"};
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(c[i].recipe, pref[p]) && !strcmp(c[i].model, model)) return &c[i];
    return NULL;
}

/* "2 x 64" from the model JSON's layers and dim; "-" without them. */
static void model_cell(const char *model, char *b, size_t cap)
{
    json_t *j = json_loads(model, 0, NULL);
    json_t *l = json_object_get(j, "layers"), *d = json_object_get(j, "dim");
    if (json_is_integer(l) && json_is_integer(d))
        snprintf(b, cap, "%lld layers x %lld", (long long)json_integer_value(l), (long long)json_integer_value(d));
    else snprintf(b, cap, "-");
    json_decref(j);
}

static void final_cell(const qs_loss_curve *c, char *b, size_t cap)
{
    if (!isfinite(c->final)) snprintf(b, cap, "-");
    else if (c->band == QS_BAND_T95 && isfinite(c->final_hi))
        snprintf(b, cap, "%.4f ± %.4f (95%% t)", c->final, c->final_hi - c->final);
    else if (c->band == QS_BAND_MINMAX && isfinite(c->final_lo))
        snprintf(b, cap, "%.4f (min %.4f, max %.4f)", c->final, c->final_lo, c->final_hi);
    else snprintf(b, cap, "%.4f", c->final);
}

static int train_plots(const char *dir, const qs_loss_curve *c, size_t nc, json_t *pl, qs_err *e)
{
    qs_provenance pv = {"qscope report (training runs)", NULL, NULL, NULL, NULL};
    qs_png_opts po = {0, 0, 0};
    char path[4096];
    qs_figure *f = qs_plot_loss("validation loss of the training runs", c, nc, 1, 0);
    if (!f) return qs_fail(e, "out of memory");
    snprintf(path, sizeof path, "%s/train_loss.png", dir);
    int rc = qs_plot_png(f, &po, &pv, path, e);
    if (!rc) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", f->title, "file", "train_loss.png"));
    qs_fig_free(f);
    const qs_loss_curve *b = nc ? baseline_of(c, nc, c[0].model) : NULL;
    if (rc || !b || nc < 2) return rc;
    if (!(f = qs_plot_loss_gap(NULL, c, nc, b))) return qs_fail(e, "out of memory");
    snprintf(path, sizeof path, "%s/train_gap.png", dir);
    rc = qs_plot_png(f, &po, &pv, path, e);
    if (!rc) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", f->title, "file", "train_gap.png"));
    qs_fig_free(f);
    return rc;
}

int qs_report_train(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e)
{
    (void)cli;
    qs_train_run_item *runs;
    size_t nruns;
    if (qs_train_run_list(db, NULL, &runs, &nruns, e)) return -1;
    if (!nruns) { qs_train_run_items_free(runs, nruns); return 0; }
    qs_loss_curve *c;
    size_t nc;
    if (qs_loss_curves(db, runs, nruns, 1, &c, &nc, e)) { qs_train_run_items_free(runs, nruns); return -1; }
    json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
    for (size_t i = 0; i < nc; i++) {
        char model[64], steps[32], v0[32], fin[96], gap[128], nr[16];
        model_cell(c[i].model, model, sizeof model);
        snprintf(nr, sizeof nr, "%d", c[i].nruns);
        snprintf(steps, sizeof steps, "%.0f", c[i].n ? c[i].x[c[i].n - 1] : 0.0);
        if (c[i].n && c[i].x[0] == 0 && isfinite(c[i].mean[0])) snprintf(v0, sizeof v0, "%.4f", c[i].mean[0]);
        else snprintf(v0, sizeof v0, "-");
        final_cell(&c[i], fin, sizeof fin);
        const qs_loss_curve *b = baseline_of(c, nc, c[i].model);
        if (b == &c[i]) snprintf(gap, sizeof gap, "baseline");
        else if (b && isfinite(b->final) && b->final != 0 && isfinite(c[i].final))
            snprintf(gap, sizeof gap, "%+.2f%% vs %s", 100 * (c[i].final - b->final) / b->final, b->recipe);
        else snprintf(gap, sizeof gap, "-");
        json_array_append_new(rows, json_pack("[o,o,s,s,s,s,s,s]", qs_json_text(c[i].recipe), qs_json_text(c[i].label), model, nr,
                                              steps, v0, fin, gap));
        json_array_append_new(notes, json_null());
    }
    int rc = plots ? train_plots(dir, c, nc, pl, e) : 0;
    if (!rc) {
        char intro[700];
        snprintf(intro, sizeof intro,
                 "%zu training run%s in the database (`qscope train`), one row per recipe, model and options apart "
                 "from the seed. Final validation loss: the mean over the seeds ± the half-width of its 95%% "
                 "Student-t interval with 3 or more seeds, min..max with 2. Gap: (final − baseline) / baseline, "
                 "the baseline being the BF16 curve of the same model (FP32 when no BF16 run exists).",
                 nruns, nruns == 1 ? "" : "s");
        json_array_append_new(sections, json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s,s,s,s],s:O,s:O,s:O}", "id", "train", "title",
                                                  "Training runs", "intro", intro, "columns", "recipe", "runs", "model",
                                                  "seeds", "last step", "val loss before", "final val loss", "gap",
                                                  "rows", rows, "notes", notes, "plots", pl));
    }
    json_decref(rows); json_decref(notes); json_decref(pl);
    qs_loss_curves_free(c, nc);
    qs_train_run_items_free(runs, nruns);
    return rc;
}
