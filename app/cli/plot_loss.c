/*
** `qscope plot loss`: the runs chosen by name patterns, grouped over seeds, and the baseline they
** are compared with (see plot_loss.h).
*/
#include "plot_loss.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/train_curves.h"
#include "../../store/train_store.h"

/* The baseline: a run of that name, else the runs of that recipe (the configuration with the plotted
** model when there are several).  1 found, 0 not, -1 error. */
static int baseline_curve(qs_db *db, const qs_train_run_item *all, size_t nall, const char *name, int val,
                          const char *model, qs_loss_curve **bc, size_t *nb, size_t *pick, qs_err *e)
{
    qs_train_run_item *sel = malloc((nall ? nall : 1) * sizeof *sel);
    if (!sel) return qs_fail(e, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < nall; i++) if (!strcmp(all[i].name, name)) sel[k++] = all[i];
    if (!k) for (size_t i = 0; i < nall; i++) if (!strcmp(all[i].recipe, name)) sel[k++] = all[i];
    int rc = 0;
    if (k) {
        rc = qs_loss_curves(db, sel, k, val, bc, nb, e) ? -1 : 1;
        *pick = 0;
        for (size_t i = 0; rc == 1 && i < *nb; i++) if (!strcmp((*bc)[i].model, model)) { *pick = i; break; }
    }
    free(sel);   /* the curves point at the models of `all`, not of sel's copies' own memory */
    return rc;
}

static char *names_of(const qs_train_run_item *r, size_t n)
{
    size_t L = 1;
    for (size_t i = 0; i < n; i++) L += strlen(r[i].name) + 1;
    char *s = calloc(1, L);
    for (size_t i = 0; s && i < n; i++) { if (i) strcat(s, ","); strcat(s, r[i].name); }
    return s;
}

int qs_plot_loss_figs(qs_cli *cli, char *const *globs, int nglobs, const char *baseline, int val, int logy,
                      qs_figure **fig, qs_figure **gap, char **runs)
{
    *fig = *gap = NULL;
    *runs = NULL;
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_train_run_item *all = NULL, *sel = NULL;
    qs_loss_curve *c = NULL, *bc = NULL;
    size_t nall = 0, ns = 0, nc = 0, nb = 0, pick = 0;
    int rc = QS_EXIT_ERR;
    if (qs_train_run_list(db, NULL, &all, &nall, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    if (!nall) { rc = qs_cli_error(QS_EXIT_ERR, "%s: no training runs yet (run `qscope train` first)", qs_esc(cli->db_path)); goto out; }
    if (!(sel = malloc(nall * sizeof *sel))) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    for (size_t i = 0; i < nall; i++) {
        int hit = nglobs == 0;
        for (int g = 0; g < nglobs && !hit; g++) hit = fnmatch(globs[g], all[i].name, 0) == 0;
        if (hit) sel[ns++] = all[i];   /* shallow: `all` owns the strings */
    }
    if (!ns) {
        rc = qs_cli_error(QS_EXIT_ERR, "%s: no training run matches '%s'%s (see `qscope runs`)", qs_esc(cli->db_path),
                          qs_esc(globs[0]), nglobs > 1 ? " or the other patterns" : "");
        goto out;
    }
    if (qs_loss_curves(db, sel, ns, val, &c, &nc, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    int anyp = 0;
    for (size_t i = 0; i < nc; i++) anyp |= c[i].n > 0;
    if (!anyp) {
        rc = qs_cli_error(QS_EXIT_ERR, "%s: the matching runs have no %s loss yet", qs_esc(cli->db_path), val ? "validation" : "training");
        goto out;
    }
    if (baseline) {
        int f = baseline_curve(db, all, nall, baseline, val, c[0].model, &bc, &nb, &pick, &e);
        if (f < 0) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
        if (!f) {
            rc = qs_cli_error(QS_EXIT_ERR, "%s: --baseline '%s' is neither a training run nor the recipe of one",
                              qs_esc(cli->db_path), qs_esc(baseline));
            goto out;
        }
    }
    char title[256];
    snprintf(title, sizeof title, "%s loss of %zu training run%s", val ? "validation" : "training", ns, ns == 1 ? "" : "s");
    if (!(*fig = qs_plot_loss(title, c, nc, val, logy)) || (bc && !(*gap = qs_plot_loss_gap(NULL, c, nc, &bc[pick]))) ||
        !(*runs = names_of(sel, ns))) {
        qs_fig_free(*fig);
        qs_fig_free(*gap);
        *fig = *gap = NULL;
        rc = qs_cli_error(QS_EXIT_ERR, "out of memory");
        goto out;
    }
    rc = QS_EXIT_OK;
out:
    qs_loss_curves_free(c, nc);
    qs_loss_curves_free(bc, nb);
    free(sel);
    qs_train_run_items_free(all, nall);
    qs_db_close(db);
    return rc;
}
