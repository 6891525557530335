/*
** The Formats view: the current tensor under each chosen format (bits per element, effective bits,
** SQNR, errors, main error source; the best of each column marked), with a Pareto plot under the
** table.  The formats, their results and their order are the application's (tui_data.c).
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "tui_view.h"

static double col_val(const tui_metrics *m, int c)
{
    switch (c) {
    case 0: return m->bits;
    case 1: return m->eff_bits;
    case 2: return m->sqnr;
    case 3: return m->max_rel;
    case 4: return m->under;
    default: return m->clip;
    }
}

static void formats_draw(tui *T, int y0, int h)
{
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) { tui_empty_msg(T, y0 + 1, "No tensor selected.", "Go to the Tensors view (1) and pick one."); return; }
    if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
    char info[400], am[24], sz[24];
    tui_fmt_num(t->absmax, am, sizeof am);
    qs_fmt_bytes((double)t->nbytes, sz, sizeof sz);
    snprintf(info, sizeof info, "%s  %s %s  %s  absmax %s  kurtosis %.2f", t->name, t->shape, t->dtype, sz, am,
             isnan(t->kurtosis) ? 0.0 : t->kurtosis);
    tui_addstr_clip(y0, 1, info, T->W - 2);
    /* best of each column among the formats with results: min bits, max eff/SQNR, min errors */
    double best[6];
    for (int c = 0; c < 6; c++) {
        best[c] = NAN;
        for (int i = 0; i < T->nfmts; i++) {
            if (!T->met[i].have) continue;
            double v = col_val(&T->met[i], c);
            if (isnan(v)) continue;
            int better = c == 1 || c == 2 ? v > best[c] : v < best[c];
            if (isnan(best[c]) || better) best[c] = v;
        }
    }
    static const char *const hdr[] = {"BITS/EL", "EFF BITS", "SQNR dB", "MAX REL ERR", "UNDERFLOW", "CLIPPED"};
    static const int cw[] = {8, 9, 8, 12, 10, 9};
    /* the name column as wide as the longest label (8..22); RESULT only when it fits */
    int x = 1, nw = 8;
    for (int i = 0; i < T->nfmts; i++) {
        int l = (int)strlen(T->fmts[i].label) + 2;
        if (l > nw) nw = l;
    }
    if (nw > 22) nw = 22;
    int show_res = x + nw + 68 + 15 <= T->W;
    tui_head_on(T);
    tui_fill_line(T, y0 + 1);
    mvprintw(y0 + 1, x, "%-*s", nw, "FORMAT");
    int cx = x + nw;
    for (int c = 0; c < 6; c++) {
        char hd[40];
        snprintf(hd, sizeof hd, "%s%s", T->fsort == c + 1 ? (T->fsort_desc ? (T->ascii ? "v" : "\u2193") : (T->ascii ? "^" : "\u2191")) : "",
                 hdr[c]);
        int pad = cw[c] - (int)strlen(hdr[c]) - (T->fsort == c + 1);
        mvprintw(y0 + 1, cx, "%*s%s ", pad > 0 ? pad : 0, "", hd);
        cx += cw[c] + 2;
    }
    if (show_res) mvprintw(y0 + 1, cx, "%s", "MAIN ERROR");
    tui_head_off(T);
    int table_rows = T->nfmts;
    int room = h - 3;
    int plot_h = room - table_rows - 1;
    int rows = table_rows;
    if (plot_h < 12) { plot_h = 0; rows = room; }
    tui_scroll_into(&T->lf, T->nfmts, rows);
    T->click_list = &T->lf;
    T->click_y0 = y0 + 2;
    T->click_n = T->nfmts;
    int busy = T->job.busy;
    for (int r = 0; r < rows && T->lf.top + r < T->nfmts; r++) {
        int k = T->lf.top + r, i = T->forder ? T->forder[k] : k;
        tui_metrics *m = &T->met[i];
        int y = y0 + 2 + r;
        int sel = k == T->lf.cur;
        if (sel) { tui_sel_on(T); tui_fill_line(T, y); }
        const char *fpeers[TUI_MAX_FMTS];
        for (int q = 0; q < T->nfmts; q++) fpeers[q] = T->fmts[q].label;
        char lab[200];
        tui_cut_middle(T->fmts[i].label, fpeers, T->nfmts, nw - 1, lab, sizeof lab);   /* two options never read the same */
        mvprintw(y, x, "%-*.*s", nw, nw - 1, lab);
        cx = x + nw;
        for (int c = 0; c < 6; c++) {
            char v[32];
            double d = m->have ? col_val(m, c) : NAN;
            if (!m->have) snprintf(v, sizeof v, ".");
            else if (c >= 3 && c != 3) snprintf(v, sizeof v, "%.3f%%", 100 * d);
            else if (c == 1 && !show_res && m->nonfinite > 0) snprintf(v, sizeof v, "NaN/Inf");   /* why -inf */
            else if (c == 0 || c == 1) snprintf(v, sizeof v, isinf(d) ? "%.0f" : "%.3f", d);
            else if (c == 2) snprintf(v, sizeof v, isinf(d) ? "%.0f" : "%.2f", d);
            else tui_fmt_num(d, v, sizeof v);
            int isbest = m->have && !isnan(d) && d == best[c];
            if (isbest && !sel) attron(A_BOLD | (T->color ? COLOR_PAIR(CP_BEST) : 0));
            mvprintw(y, cx, "%*s%s", cw[c], v, isbest ? "*" : " ");
            if (isbest && !sel) attroff(A_BOLD | (T->color ? COLOR_PAIR(CP_BEST) : 0));
            cx += cw[c] + 2;
        }
        /* the source carrying most of the error energy, or the share of values that became NaN/Inf
        ** (why a row reads -inf) */
        if (show_res) mvprintw(y, cx, "%.*s", T->W - cx, m->have ? m->src : busy ? "computing" : "missing (r)");
        if (sel) { mvaddch(y, 0, '>'); tui_sel_off(T); }
    }
    if (plot_h > 0) {
        qs_pareto_pt pts[TUI_MAX_FMTS];
        size_t n = 0;
        size_t nfin = 0;
        /* every result, as `qscope plot pareto` has them: exact and NaN/Inf ones are named in the note */
        for (int i = 0; i < T->nfmts; i++)
            if (T->met[i].have) {
                pts[n++] = (qs_pareto_pt){T->fmts[i].label, qs_family_name(T->fmts[i].a.f->family), T->met[i].bits, T->met[i].eff_bits};
                nfin += isfinite(T->met[i].eff_bits) && isfinite(T->met[i].bits);
            }
        if (n && nfin) {
            char title[300];
            snprintf(title, sizeof title, "%s: effective bits vs bits per element", t->name);
            T->fig = qs_plot_pareto(title, pts, n);
            snprintf(T->fig_what, sizeof T->fig_what, "pareto-%s", t->name);
            tui_draw_figure(T, T->fig, y0 + 3 + table_rows, 0, plot_h, T->W);
        } else {
            tui_addstr_clip(y0 + 3 + table_rows, 2, busy ? "Computing the results in the background..." :
                            "No stored results for this tensor yet: press r to compute them.", T->W - 4);
        }
    }
}

static int formats_key(tui *T, tui_act a, int page)
{
    if (tui_list_key(&T->lf, T->nfmts, page, a)) { T->fauto = 0; return 1; }
    if (a == TA_ENTER) { tui_push(T, TV_BLOCKS); return 1; }
    if (a == TA_TAB) { tui_push(T, TV_HIST); return 1; }
    if (a == TA_SORT || a == TA_SORT_REV) {
        static const char *const cols[] = {"as chosen", "bits/elem", "effective bits", "SQNR", "max rel err", "underflow", "clipped"};
        if (a == TA_SORT) {
            T->fsort = (T->fsort + 1) % 7;
            T->fsort_desc = T->fsort == 2 || T->fsort == 3;   /* larger is better there */
        } else T->fsort_desc = !T->fsort_desc;
        tui_sort_formats(T);
        tui_set_msg(T, 0, "sorted by %s%s", cols[T->fsort], T->fsort_desc ? ", descending" : "");
        return 1;
    }
    return 0;
}

static int formats_rows(tui *T) { return T->nfmts; }
static const char *formats_row_text(tui *T, int i, char *buf, size_t cap)
{
    (void)buf;
    (void)cap;
    return T->fmts[T->forder ? T->forder[i] : i].label;
}
static tui_list *formats_cursor(tui *T) { return &T->lf; }

const tui_view_ops tui_view_formats = {
    .name = "Formats", .flags = TVF_TENSOR | TVF_METRICS,
    .about = {"the selected tensor under each chosen format: bits per element (with scales),",
              "effective bits, SQNR, max relative error, underflow and clipped fractions; the",
              "best value of each column is marked with *.  Missing results are computed in",
              "the background (with per-block data, so Blocks works).  Enter: its blocks."},
    .draw = formats_draw, .key = formats_key, .rows = formats_rows, .row_text = formats_row_text, .cursor = formats_cursor,
};
