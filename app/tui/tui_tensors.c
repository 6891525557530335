/*
** The Tensors view: every tensor of the database with its shape, dtype, size and statistics,
** filtered and sorted (the list itself is the application's: tui_data.c reads and orders it).
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "tui_view.h"

static void tensors_draw(tui *T, int y0, int h)
{
    static const char *const keys[] = {"name", "size", "absmax", "kurtosis", "outliers"};
    if (!T->nt) {
        tui_empty_msg(T, y0 + 1, "No tensors in this database yet.",
                  "Press : and run `demo` for the demo set, `gen gaussian --name g` or `import FILE.safetensors`.");
        return;
    }
    char info[200];
    snprintf(info, sizeof info, "%zu tensor%s%s%s%s, sorted by %s%s", T->nvis, T->nvis == 1 ? "" : "s",
             T->filter[0] ? " matching \"" : "", T->filter, T->filter[0] ? "\"" : "", keys[T->sort_key],
             T->sort_desc ? " (descending)" : "");
    /* columns: NAME takes what is left; on a narrow terminal RESULTS, OUTLIERS, then DTYPE go first */
    int W = T->W, show_out = 1, show_dt = 1, show_res = 1;
    /* the SHAPE column is as wide as the widest shape: its free columns go to the names */
    int shw = 5;
    for (size_t i = 0; i < T->nt; i++) {
        int l = (int)strlen(T->t[i].shape);
        if (l > shw) shw = l;
    }
    if (shw > 14) shw = 14;
    int fixed = shw + 1 + 9 + 10 + 11 + 9 + 9 + 8 + 2;
    if (W - fixed < 24) { show_res = 0; fixed -= 8; }
    if (W - fixed < 24) { show_out = 0; fixed -= 9; }
    if (W - fixed < 24) { show_dt = 0; fixed -= 9; }
    /* dropped columns are named, with the width that shows them, as the RL list's Tab hint: if it fits */
    if (!show_res || !show_out || !show_dt) {
        char note[128];
        snprintf(note, sizeof note, "   [+%d column%s at %d+ cols:%s%s%s]", !show_res + !show_out + !show_dt,
                 !show_res + !show_out + !show_dt == 1 ? "" : "s", shw + 1 + 9 + 10 + 11 + 9 + 9 + 8 + 2 + 24, show_dt ? "" : " DTYPE,",
                 show_out ? "" : " OUTLIERS,", show_res ? "" : " RESULTS,");
        note[strlen(note) - 2] = ']', note[strlen(note) - 1] = 0;   /* the last comma */
        if ((int)(strlen(info) + strlen(note)) > W - 2) *strchr(note, ':') = ']', strchr(note, ']')[1] = 0;   /* without the names */
        if (strlen(info) + strlen(note) <= sizeof info - 1 && (int)(strlen(info) + strlen(note)) <= W - 2) strcat(info, note);
    }
    tui_addstr_clip(y0, 1, info, T->W - 2);
    int nw = W - fixed;
    if (nw < 12) nw = 12;
    char line[1024];
    tui_head_on(T);
    snprintf(line, sizeof line, " %-*.*s %*s %-*s%9s %10s %8s %8s %s", nw, nw, "NAME", shw, "SHAPE", show_dt ? 9 : 0, show_dt ? "DTYPE" : "",
             "SIZE", "ABSMAX", "KURTOSIS", show_out ? "OUTLIERS" : "", show_res ? "RESULTS" : "");
    tui_fill_line(T, y0 + 1);
    tui_addstr_clip(y0 + 1, 0, line, W);
    tui_head_off(T);
    int rows = h - 2;
    tui_scroll_into(&T->lt, (int)T->nvis, rows);
    const char *peers[256];
    int np = 0;
    for (int r = 0; r < rows && r < 256 && T->lt.top + r < (int)T->nvis; r++) peers[np++] = T->t[T->vis[T->lt.top + r]].name;
    T->click_list = &T->lt;
    T->click_y0 = y0 + 2;
    T->click_n = (int)T->nvis;
    for (int r = 0; r < rows && T->lt.top + r < (int)T->nvis; r++) {
        int i = T->lt.top + r;
        const tui_tensor *t = &T->t[T->vis[i]];
        char sz[24], am[24], ku[24], ou[24];
        qs_fmt_bytes((double)t->nbytes, sz, sizeof sz);
        tui_fmt_num(t->absmax, am, sizeof am);
        if (isnan(t->kurtosis)) snprintf(ku, sizeof ku, "-");
        else if (t->kurtosis >= 1e4) snprintf(ku, sizeof ku, "%.2e", t->kurtosis);
        else snprintf(ku, sizeof ku, "%.2f", t->kurtosis);
        if (isnan(t->outlier)) snprintf(ou, sizeof ou, "-");
        else snprintf(ou, sizeof ou, "%.3f%%", 100 * t->outlier);
        /* a long name is cut in the middle, where it is the same as its neighbours on screen */
        char nbuf[512];
        tui_cut_middle(t->name, peers, np, nw, nbuf, sizeof nbuf);
        const char *nm = nbuf;
        char rs[16] = "";
        if (show_res && t->nresults) snprintf(rs, sizeof rs, "%7d", t->nresults);
        else if (show_res) snprintf(rs, sizeof rs, "%7s", "-");
        snprintf(line, sizeof line, " %-*.*s %*.*s %-*.*s%9s %10s %8s %8s %s", nw, nw, nm, shw, shw, t->shape, show_dt ? 9 : 0, show_dt ? 8 : 0,
                 t->dtype, sz, am, ku, show_out ? ou : "", rs);
        if (i == T->lt.cur) { tui_sel_on(T); tui_fill_line(T, y0 + 2 + r); }
        tui_addstr_clip(y0 + 2 + r, 0, line, W);
        if (i == T->lt.cur) { mvaddch(y0 + 2 + r, 0, '>'); tui_sel_off(T); }
    }
}

static int tensors_key(tui *T, tui_act a, int page)
{
    if (tui_list_key(&T->lt, (int)T->nvis, page, a)) return 1;
    if (a == TA_ENTER && tui_cur_tensor(T)) { tui_jump(T, TV_FORMATS); return 1; }
    if (a == TA_TAB) { tui_jump(T, TV_RL); return 1; }
    if (a == TA_SORT || a == TA_SORT_REV) {
        if (a == TA_SORT) T->sort_key = (T->sort_key + 1) % 5;
        else T->sort_desc = !T->sort_desc;
        tui_apply_view(T);
        static const char *const keys[] = {"name", "size", "absmax", "kurtosis", "outliers"};
        tui_set_msg(T, 0, "sorted by %s%s", keys[T->sort_key], T->sort_desc ? ", descending" : "");
        return 1;
    }
    if (a == TA_FILTER) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", T->filter);
        if (tui_prompt(T, "filter: ", buf, sizeof buf)) {
            snprintf(T->filter, sizeof T->filter, "%s", buf);
            tui_apply_view(T);
            tui_set_msg(T, 0, T->filter[0] ? "%zu of %zu tensors match" : "filter cleared (%zu of %zu)", T->nvis, T->nt);
        }
        return 1;
    }
    return 0;
}

static int tensors_rows(tui *T) { return (int)T->nvis; }
static const char *tensors_row_text(tui *T, int i, char *buf, size_t cap) { (void)buf; (void)cap; return T->t[T->vis[i]].name; }
static tui_list *tensors_cursor(tui *T) { return &T->lt; }

const tui_view_ops tui_view_tensors = {
    .name = "Tensors", .flags = TVF_BROWSE,
    .about = {"every tensor with shape, dtype, size, absmax, kurtosis (Gaussian = 3) and the",
              "fraction of outliers (|x - mean| > 6 std).  Enter: its formats."},
    .draw = tensors_draw, .key = tensors_key, .rows = tensors_rows, .row_text = tensors_row_text, .cursor = tensors_cursor,
};
