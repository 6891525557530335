/*
** The Training view: the stored training runs of `qscope train` (name, recipe, seed, status, steps,
** validation loss before -> after), the selected run's loss curves below (training loss per step,
** validation loss where measured; `a`: every run's validation loss, seeds of one configuration as
** one mean curve with its band), and beside them (under them on a narrow screen) the per (layer,
** operand) underflow / clipped / non-finite fractions of its quantized operands: the mean over the
** run, or one step's (`m` steps through the steps that have them).
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tui_view.h"
#include "../../analysis/train_curves.h"
#include "../../kernels/llm_recipe.h"
#include "../../store/train_store.h"

typedef struct train_view {
    qs_train_run_item *runs;      /* read when shown; again after a command */
    size_t nruns;
    int loaded;
    tui_list l;
    int all;                      /* plot every run's validation loss */
    int ostep;                    /* operand statistics of this step; 0: the mean over the run */
    int64_t ostep_run;            /* the run ostep belongs to */
} train_view;

#define TRV(T) ((train_view *)tui_state((T), TV_TRAIN))

static void train_done(tui *T)
{
    train_view *S = TRV(T);
    qs_train_run_items_free(S->runs, S->nruns);
    S->runs = NULL;
    S->nruns = 0;
    S->loaded = 0;
}

static void load(tui *T)
{
    train_view *S = TRV(T);
    if (S->loaded) return;
    int64_t cur = S->l.cur >= 0 && (size_t)S->l.cur < S->nruns ? S->runs[S->l.cur].id : -1;
    train_done(T);
    qs_err e = {{0}};
    if (qs_train_run_list(T->db, NULL, &S->runs, &S->nruns, &e)) tui_set_msg(T, 1, "%s", e.msg);
    S->loaded = 1;
    for (size_t i = 0; i < S->nruns; i++)   /* read again: the cursor stays on its run */
        if (S->runs[i].id == cur) S->l.cur = (int)i;
}

static void fmt_loss(double v, char *b, size_t cap)
{
    if (isfinite(v)) snprintf(b, cap, "%.3f", v);
    else snprintf(b, cap, "-");
}

/* The list: as many rows as fit in list_h - 1 under the heading. */
static void train_rows(tui *T, train_view *S, int y0, int list_h)
{
    int nw = 4;
    for (size_t i = 0; i < S->nruns; i++) if ((int)strlen(S->runs[i].name) > nw) nw = (int)strlen(S->runs[i].name);
    int room = T->W - (1 + 1 + 12 + 1 + 8 + 1 + 8 + 1 + 11 + 1 + 17);
    if (nw > room) nw = room > 8 ? room : 8;
    char line[600];
    tui_head_on(T);
    tui_fill_line(T, y0);
    snprintf(line, sizeof line, " %-*s %-12s %8s %-8s %11s %s", nw, "RUN", "RECIPE", "SEED", "STATUS", "STEPS", T->ascii ? "VAL0 -> FINAL" : "VAL0 → FINAL");
    tui_addstr_clip(y0, 0, line, T->W);
    tui_head_off(T);
    int rows = list_h - 1;
    tui_scroll_into(&S->l, (int)S->nruns, rows);
    T->click_list = &S->l;
    T->click_y0 = y0 + 1;
    T->click_n = (int)S->nruns;
    for (int r = 0; r < rows && S->l.top + r < (int)S->nruns; r++) {
        int i = S->l.top + r;
        const qs_train_run_item *R = &S->runs[i];
        char st[32], a[16], b[16];
        snprintf(st, sizeof st, "%d/%d", R->steps_done, R->steps);
        fmt_loss(R->val0, a, sizeof a);
        fmt_loss(R->val_final, b, sizeof b);
        snprintf(line, sizeof line, " %-*.*s %-12.12s %8llu %-8s %11s %s %s %s", nw, nw, qs_esc(R->name), qs_esc(R->recipe),
                 (unsigned long long)R->seed, R->status, st, a, T->ascii ? "->" : "→", b);
        if (i == S->l.cur) { tui_sel_on(T); tui_fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (i == S->l.cur) { mvaddch(y0 + 1 + r, 0, '>'); tui_sel_off(T); }
    }
}

/* The selected run's training and validation loss, or every run's validation loss. */
static qs_figure *loss_figure(tui *T, train_view *S, const qs_train_run_item *R)
{
    qs_err e = {{0}};
    if (S->all) {
        qs_loss_curve *c;
        size_t nc;
        if (qs_loss_curves(T->db, S->runs, S->nruns, 1, &c, &nc, &e)) { tui_set_msg(T, 1, "%s", e.msg); return NULL; }
        qs_figure *f = qs_plot_loss("validation loss of every run", c, nc, 1, 0);
        qs_loss_curves_free(c, nc);
        return f;
    }
    qs_loss_curve *tr = NULL, *va = NULL;
    size_t nt = 0, nv = 0;
    qs_figure *f = NULL;
    if (qs_loss_curves(T->db, R, 1, 0, &tr, &nt, &e) || qs_loss_curves(T->db, R, 1, 1, &va, &nv, &e))
        tui_set_msg(T, 1, "%s", e.msg);
    else {
        snprintf(tr[0].label, sizeof tr[0].label, "training");
        snprintf(va[0].label, sizeof va[0].label, "validation");
        qs_loss_curve both[2] = {tr[0], va[0]};
        char title[200];
        snprintf(title, sizeof title, "loss of %.120s (%.40s)", R->name, R->recipe);
        if ((f = qs_plot_loss(title, both, 2, 0, 0))) qs_axis_set(&f->y, QS_AX_LINEAR, "loss (nats/token)");
    }
    qs_loss_curves_free(tr, nt);
    qs_loss_curves_free(va, nv);
    return f;
}

/* The run's layer count from its model JSON (the output head is layer `layers`); -1 unknown. */
static int model_layers(const char *model)
{
    json_t *j = json_loads(model, 0, NULL);
    json_t *l = json_object_get(j, "layers");
    int n = json_is_integer(l) ? (int)json_integer_value(l) : -1;
    json_decref(j);
    return n;
}

/* The operand statistics table in the rectangle (y0, x0, h, w). */
static void opstat_table(tui *T, train_view *S, const qs_train_run_item *R, int y0, int x0, int h, int w)
{
    if (h < 2 || w < 20) return;
    qs_err e = {{0}};
    qs_train_opstat_row *o = NULL;
    size_t n = 0;
    if (S->ostep_run != R->id) { S->ostep = 0; S->ostep_run = R->id; }
    if (qs_train_run_opstats(T->db, R->id, S->ostep, &o, &n, &e)) { tui_addstr_clip(y0, x0 + 1, e.msg, w - 1); return; }
    char line[300];
    if (S->ostep) snprintf(line, sizeof line, " quantized operands: step %d (m: next)", S->ostep);
    else snprintf(line, sizeof line, " quantized operands: run mean (m: a step)");
    attron(A_BOLD);
    tui_addstr_clip(y0, x0, line, w);
    attroff(A_BOLD);
    if (!n) {
        tui_addstr_clip(y0 + 1, x0 + 1, strcmp(R->recipe, "fp32") ? "no operand statistics stored"
                                                                   : "none: the fp32 recipe quantizes nothing", w - 1);
        free(o);
        return;
    }
    tui_head_on(T);
    snprintf(line, sizeof line, " %-5s %-9s %9s %9s %9s", "LAYER", "OPERAND", "UNDERFLOW", "CLIPPED", "NONFINITE");
    move(y0 + 1, x0);
    for (int x = 0; x < w; x++) addch(' ');
    tui_addstr_clip(y0 + 1, x0, line, w);
    tui_head_off(T);
    int layers = model_layers(R->model), rows = h - 2;
    for (int i = 0; i < rows && (size_t)i < n; i++) {
        if (i == rows - 1 && (size_t)rows < n) {
            snprintf(line, sizeof line, " ... %zu more", n - (size_t)i);
            tui_addstr_clip(y0 + 2 + i, x0, line, w);
            break;
        }
        char lay[16];
        if (o[i].layer == layers) snprintf(lay, sizeof lay, "head");
        else snprintf(lay, sizeof lay, "%d", o[i].layer);
        snprintf(line, sizeof line, " %-5s %-9s %9.3g %9.3g %9.3g", lay, qs_llm_operand_name(o[i].operand), o[i].underflow,
                 o[i].clipped, o[i].nonfinite);
        tui_addstr_clip(y0 + 2 + i, x0, line, w);
    }
    free(o);
}

static void train_draw(tui *T, int y0, int h)
{
    train_view *S = TRV(T);
    load(T);
    if (!S->nruns) {
        tui_empty_msg(T, y0 + 1, "No training runs yet.",
                      "Press : and run `train --steps 100` (a small model on the Austen text), or `train --recipe hif4 "
                      "--seed 1` for a low-precision recipe.  Each run is listed with its recipe, seed, status and "
                      "validation loss; its loss curves and the underflow / clipping of its quantized operands are shown "
                      "below it.");
        return;
    }
    if (S->l.cur >= (int)S->nruns) S->l.cur = (int)S->nruns - 1;
    int list_h = h / 3;
    if (list_h > (int)S->nruns + 1) list_h = (int)S->nruns + 1;
    if (list_h < 3) list_h = 3;
    train_rows(T, S, y0, list_h);
    const qs_train_run_item *R = &S->runs[S->l.cur];
    int py = y0 + list_h, ph = h - list_h, side = T->W >= 100, tw = side ? 46 : T->W;
    int th = side ? ph : ph - (ph * 3 / 5 > 10 ? ph * 3 / 5 : 10);   /* under the plot: what it leaves of 10 rows */
    if (th < 0) th = 0;
    T->fig = loss_figure(T, S, R);
    if (T->fig) {
        snprintf(T->fig_what, sizeof T->fig_what, "loss-%s", S->all ? "all" : R->name);
        tui_draw_figure(T, T->fig, py, 0, side ? ph : ph - th, side ? T->W - tw : T->W);
    }
    opstat_table(T, S, R, side ? py : py + ph - th, side ? T->W - tw : 0, th, tw);
}

/* The next step after S->ostep that has operand statistics (0 after the last: the mean). */
static void next_ostep(tui *T, train_view *S, const qs_train_run_item *R)
{
    qs_err e = {{0}};
    qs_train_step_row *s = NULL;
    size_t n = 0;
    if (S->ostep_run != R->id) { S->ostep = 0; S->ostep_run = R->id; }
    int next = 0;
    if (!qs_train_run_steps(T->db, R->id, &s, &n, &e))
        for (size_t i = 0; i < n && !next; i++) {
            if (s[i].step <= S->ostep) continue;
            qs_train_opstat_row *o = NULL;
            size_t k = 0;
            if (!qs_train_run_opstats(T->db, R->id, s[i].step, &o, &k, &e) && k) next = s[i].step;
            free(o);
        }
    free(s);
    S->ostep = next;
    if (next) tui_set_msg(T, 0, "operand statistics of step %d", next);
    else tui_set_msg(T, 0, "operand statistics: the mean over the run");
}

static int train_key(tui *T, tui_act a, int page)
{
    train_view *S = TRV(T);
    load(T);   /* keys typed with the view's key arrive before its first frame */
    if (a == TA_HIST_ALL) { S->all = !S->all; return 1; }
    if (a == TA_METRIC) {
        if (S->nruns) next_ostep(T, S, &S->runs[S->l.cur]);
        return 1;
    }
    return tui_list_key(&S->l, (int)S->nruns, page, a);
}

static void train_changed(tui *T, int what)
{
    if (what == TUI_CH_DB || what == TUI_CH_DATA) TRV(T)->loaded = 0;
}

static int train_nrows(tui *T) { load(T); return (int)TRV(T)->nruns; }
static const char *train_row_text(tui *T, int i, char *buf, size_t cap)
{
    const qs_train_run_item *R = &TRV(T)->runs[i];
    snprintf(buf, cap, "%s %s %s", R->name, R->recipe, R->status);
    return buf;
}
static tui_list *train_cursor(tui *T) { return &TRV(T)->l; }

const tui_view_ops tui_view_train = {
    .name = "Training", .state_size = sizeof(train_view),
    .about = {"stored `qscope train` runs: recipe, seed, status, steps, validation loss before",
              "and after; the selected run's loss curves (a: every run's validation loss, seeds",
              "as a mean with its band) and the underflow / clipped / non-finite fractions of",
              "its quantized operands per layer (the mean over the run; m: one step's)."},
    .draw = train_draw, .key = train_key, .rows = train_nrows, .row_text = train_row_text, .cursor = train_cursor,
    .changed = train_changed, .done = train_done,
};
