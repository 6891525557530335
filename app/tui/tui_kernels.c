/*
** The Kernels view: stored MSD, attention and ResQ experiment results, listed and plotted.  Its
** state is the cursor of the list and the result under it (read again, the list keeps it).
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "tui_view.h"

typedef struct kernels_view {
    tui_list l;
    int64_t cur_id;               /* the result under the cursor when last drawn */
} kernels_view;

#define KV(T) ((kernels_view *)tui_state((T), TV_KERNELS))

static void kernels_draw(tui *T, int y0, int h)
{
    tui_list *L = &KV(T)->l;
    int idx[4096], n = 0;
    for (size_t i = 0; i < T->nkres && n < 4096; i++)
        if (strcmp(T->kres[i].kind, "trajectory")) idx[n++] = (int)i;
    if (!n) {
        tui_empty_msg(T, y0 + 1, "No kernel results yet.",
                  "Press : and run `msd` (Multi-Scale Dequant: effective bits by passes), `attn --L 256,512` "
                  "(attention error by sequence length) or `resq` (FP4 layer with a residual correction); "
                  "each stores its result, which is listed and plotted here.");
        return;
    }
    int list_h = h / 3;
    if (list_h > n + 2) list_h = n + 2;
    if (list_h < 3) list_h = 3;
    char line[600];
    tui_head_on(T);
    tui_fill_line(T, y0);
    /* WHAT as wide as its longest entry: on a narrow screen the KIND column goes first (WHAT starts
    ** with the kind), then CREATED loses its year and seconds; only then is WHAT cut, with "..." */
    int need = 4;
    for (int i = 0; i < n; i++)
        if ((int)strlen(T->kres[idx[i]].what) > need) need = (int)strlen(T->kres[idx[i]].what);
    int showkind = T->W - 1 - 9 - 7 - 21 >= need, cw = T->W - 1 - 9 - (showkind ? 7 : 0) - 21 >= need ? 20 : 11;
    int ww = T->W - 1 - 9 - (showkind ? 7 : 0) - (cw + 1);
    if (ww < 20) ww = 20;
    if (ww > need && showkind) ww = T->W - 40 > need ? T->W - 40 : need;
    snprintf(line, sizeof line, " %-8s %s%-*s %-*s", "RESULT", showkind ? "KIND   " : "", ww, "WHAT", cw, "CREATED");
    tui_addstr_clip(y0, 0, line, T->W);
    tui_head_off(T);
    int rows = list_h - 1;
    tui_scroll_into(L, n, rows);
    T->click_list = L;
    T->click_y0 = y0 + 1;
    T->click_n = n;
    for (int r = 0; r < rows && L->top + r < n; r++) {
        tui_kres *K = &T->kres[idx[L->top + r]];
        char what[300], when[24];
        tui_cut_end(K->what, ww, what, sizeof what);
        /* 2026-12-01T16:14:56Z, or 12-01 16:14 when short */
        if (cw < 20 && strlen(K->created) >= 16) snprintf(when, sizeof when, "%.5s %.5s", K->created + 5, K->created + 11);
        else snprintf(when, sizeof when, "%.20s", K->created);
        snprintf(line, sizeof line, " %-8lld %-*s%s%-*s %s", (long long)K->id, showkind ? 7 : 0, showkind ? K->kind : "", "", ww, what,
                 when);
        if (L->top + r == L->cur) { tui_sel_on(T); tui_fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (L->top + r == L->cur) { mvaddch(y0 + 1 + r, 0, '>'); tui_sel_off(T); }
    }
    qs_err e = {{0}};
    tui_kres *K = &T->kres[idx[L->cur]];
    KV(T)->cur_id = K->id;
    T->fig = tui_kres_figure(T, K->id, &e);
    if (!T->fig) { tui_addstr_clip(y0 + list_h + 1, 2, e.msg, T->W - 4); return; }
    snprintf(T->fig_what, sizeof T->fig_what, "%s-%lld", K->kind, (long long)K->id);
    tui_draw_figure_short(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
}

static int kernels_rows(tui *T);
static int kernels_key(tui *T, tui_act a, int page) { return tui_list_key(&KV(T)->l, kernels_rows(T), page, a); }

static int kernels_rows(tui *T)
{
    int nk = 0;
    for (size_t i = 0; i < T->nkres; i++) nk += strcmp(T->kres[i].kind, "trajectory") != 0;
    return nk;
}

/* row i of the list: the i-th stored result that is not a trajectory (those are the RL view's) */
static const char *kernels_row_text(tui *T, int i, char *buf, size_t cap)
{
    for (size_t k = 0; k < T->nkres; k++)
        if (strcmp(T->kres[k].kind, "trajectory") && i-- == 0) {
            snprintf(buf, cap, "%s %s %s", T->kres[k].kind, T->kres[k].format, T->kres[k].what);
            return buf;
        }
    return NULL;
}
static tui_list *kernels_cursor(tui *T) { return &KV(T)->l; }

/* The list was read again: the cursor stays on its result. */
static void kernels_changed(tui *T, int what)
{
    if (what != TUI_CH_DB && what != TUI_CH_DATA) return;
    for (size_t i = 0, k = 0; i < T->nkres; i++) {
        if (!strcmp(T->kres[i].kind, "trajectory")) continue;
        if (T->kres[i].id == KV(T)->cur_id) { KV(T)->l.cur = (int)k; return; }
        k++;
    }
}

const tui_view_ops tui_view_kernels = {
    .name = "Kernels", .state_size = sizeof(kernels_view), .changed = kernels_changed,
    .about = {"stored MSD and attention experiment results, plotted."},
    .draw = kernels_draw, .key = kernels_key, .rows = kernels_rows, .row_text = kernels_row_text, .cursor = kernels_cursor,
};
