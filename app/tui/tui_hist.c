/*
** The Histogram view: error (relative, absolute, in ulps) or value histograms of the current tensor
** under the chosen formats, overlaid (a: only the one under the cursor); the value histogram is
** the picture of `qscope plot value-hist`.
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "tui_view.h"
#include "../../analysis/plot_fly.h"
#include "../../analysis/plot.h"

typedef struct hist_view {
    int kind;                     /* 0 rel_err, 1 abs_err, 2 ulp_err, 3 value */
    int liny;                     /* linear counts instead of log */
    int one;                      /* only the format under the cursor */
    qs_figure *vh_fig;            /* value histogram of `qscope plot value-hist` for vh_key (tensor, format) */
    char vh_key[300];
} hist_view;

static void hist_draw(tui *T, int y0, int h)
{
    hist_view *S = tui_state(T, TV_HIST);
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) { tui_empty_msg(T, y0 + 1, "No tensor selected.", "Go to the Tensors view (1) and pick one."); return; }
    if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
    static const char *const which[] = {"rel_err", "abs_err", "ulp_err", "value"};
    static const char *const what[] = {"relative error |Q(x) - x| / |x|", "absolute error |Q(x) - x|",
                                       "error in ulps (Q(x) - x) / ulp", "|x|"};
    qs_hist hs[TUI_MAX_FMTS];
    const qs_hist *hp[TUI_MAX_FMTS];
    const char *names[TUI_MAX_FMTS];
    size_t n = 0;
    char title[300];
    int cf = T->forder && T->lf.cur < T->nfmts ? T->forder[T->lf.cur] : 0;
    if (S->kind == 3) {
        /* the picture of `qscope plot value-hist TENSOR -f F`: |x|, |Q(x)| and the grid, labelled;
        ** one pass over the tensor, kept until the tensor or the format changes */
        const tui_fmt *F = &T->fmts[cf];
        char key[sizeof S->vh_key];
        snprintf(key, sizeof key, "%s|%s", t->hash, F->label);
        if (!S->vh_fig || strcmp(key, S->vh_key)) {
            qs_err e = {{0}};
            qs_fig_free(S->vh_fig);
            S->vh_fig = qs_value_hist_figure(T->db, t->name, &F->a, F->label, 0, &e);
            snprintf(S->vh_key, sizeof S->vh_key, "%s", key);
            if (!S->vh_fig) { tui_addstr_clip(y0 + 1, 2, e.msg, T->W - 4); return; }
        }
        T->fig = qs_fig_clone(S->vh_fig);
        snprintf(T->fig_what, sizeof T->fig_what, "value-hist-%s-%s", t->name, F->label);
    } else {
        for (int i = 0; i < T->nfmts; i++) {
            int k = T->forder ? T->forder[i] : i;
            if (S->one && k != cf) continue;
            if (tui_load_hist(T, k, which[S->kind], &hs[n]) || !hs[n].nbins) { free(hs[n].counts); continue; }
            hp[n] = &hs[n];
            names[n++] = T->fmts[k].label;
        }
        if (!n) goto none;
        if (S->one) snprintf(title, sizeof title, "%s: %s under %s", t->name, what[S->kind], T->fmts[cf].label);
        else snprintf(title, sizeof title, "%s: %s", t->name, what[S->kind]);
        T->fig = qs_plot_err_hist(title, what[S->kind], n, names, hp);
        for (size_t i = 0; i < n; i++) free(hs[i].counts);
        snprintf(T->fig_what, sizeof T->fig_what, "%s-hist-%s", which[S->kind], t->name);
    }
    if (T->fig && S->liny) {
        qs_axis_set(&T->fig->y, QS_AX_LINEAR, "count");
        T->fig->y.zero_base = 1;
    }
    tui_draw_figure(T, T->fig, y0, 0, h, T->W);
    return;
none:
    tui_empty_msg(T, y0 + 1, "No stored histograms for this tensor yet.",
              T->job.busy ? "They are being computed in the background." : "Press r to compute them (Formats view shows progress).");
}

static int hist_key(tui *T, tui_act a, int page)
{
    hist_view *S = tui_state(T, TV_HIST);
    if (a == TA_HIST_KIND) { S->kind = (S->kind + 1) % 4; return 1; }
    if (a == TA_LOGY) { S->liny = !S->liny; return 1; }
    if (a == TA_HIST_ALL) { S->one = !S->one; return 1; }
    if (a == TA_TAB) { tui_pop(T); tui_push(T, TV_BLOCKS); return 1; }
    if (tui_list_key(&T->lf, T->nfmts, page, a)) { T->fauto = 0; return 1; }   /* j/k pick the format whose grid is drawn */
    return 0;
}

static void hist_done(tui *T)
{
    hist_view *S = tui_state(T, TV_HIST);
    qs_fig_free(S->vh_fig);
    S->vh_fig = NULL;
}

const tui_view_ops tui_view_hist = {
    .name = "Histogram", .flags = TVF_TENSOR | TVF_METRICS, .state_size = sizeof(hist_view),
    .about = {"error (or value) histograms of the chosen formats, overlaid."},
    .draw = hist_draw, .key = hist_key, .done = hist_done,
};
