/*
** The workbench's two pop-ups: `f` chooses the formats to compare, `o` sets the options of the
** selected format.  The views that depend on the formats hear of a change (tui_views_changed).
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/quant_opts.h"
#include "tui_view.h"

static WINDOW *popup(tui *T, int h, int w, const char *title)
{
    if (h > T->H - 2) h = T->H - 2;
    if (w > T->W - 2) w = T->W - 2;
    WINDOW *win = newwin(h, w, (T->H - h) / 2, (T->W - w) / 2);
    if (!win) return NULL;
    keypad(win, TRUE);
    if (T->ascii) wborder(win, '|', '|', '-', '-', '+', '+', '+', '+');
    else box(win, 0, 0);
    wattron(win, A_BOLD);
    mvwprintw(win, 0, 2, " %s ", title);
    wattroff(win, A_BOLD);
    return win;
}

static void close_popup(tui *T, WINDOW *w)
{
    delwin(w);
    touchwin(stdscr);
    (void)T;
}

void tui_choose_formats(tui *T)
{
    size_t nf = qs_format_count();
    int *on = calloc(nf, sizeof *on);
    if (!on) return;
    for (size_t i = 0; i < nf; i++)
        for (int k = 0; k < T->nfmts; k++)
            if (T->fmts[k].a.f == qs_format_at(i)) on[i] = 1;
    int cur = 0, top = 0, h = (int)nf + 4;
    WINDOW *w = popup(T, h, 70, "formats to compare: Space toggles, Enter applies, Esc cancels");
    if (!w) { free(on); return; }
    int wh = getmaxy(w), rows = wh - 3, done = 0;
    for (;;) {
        if (cur < top) top = cur;
        if (cur >= top + rows) top = cur - rows + 1;
        for (int r = 0; r < rows; r++) {
            int i = top + r;
            wmove(w, 1 + r, 1);
            for (int x = 1; x < getmaxx(w) - 1; x++) waddch(w, ' ');
            if (i >= (int)nf) continue;
            const qs_format *f = qs_format_at((size_t)i);
            if (i == cur) wattron(w, A_REVERSE);
            int sw = getmaxx(w) - 21, sl = (int)strlen(f->summary);   /* a cut summary ends in "..." */
            mvwprintw(w, 1 + r, 2, "[%c] %-12s %.*s%s", on[i] ? 'x' : ' ', f->name, sl > sw ? sw - 3 : sw, f->summary,
                      sl > sw ? "..." : "");
            if (i == cur) wattroff(w, A_REVERSE);
        }
        int cnt = 0;
        for (size_t i = 0; i < nf; i++) cnt += on[i];
        mvwprintw(w, wh - 2, 2, "%d chosen (at most %d)   a: all  c: clear ", cnt, TUI_MAX_FMTS);
        if ((int)nf > rows)   /* more formats than rows: say so, and where the list is */
            wprintw(w, "  %d-%d of %zu, j/k scrolls", top + 1, top + rows, nf);
        wrefresh(w);
        int ch = wgetch(w);
        if (ch == 27 || ch == 'q' || tui_interrupted()) break;
        if (ch == 'j' || ch == KEY_DOWN) cur = cur + 1 < (int)nf ? cur + 1 : cur;
        else if (ch == 'k' || ch == KEY_UP) cur = cur > 0 ? cur - 1 : 0;
        else if (ch == 'g' || ch == KEY_HOME) cur = 0;
        else if (ch == 'G' || ch == KEY_END) cur = (int)nf - 1;
        else if (ch == ' ' || ch == 'x') on[cur] = !on[cur];
        else if (ch == 'a') for (size_t i = 0; i < nf; i++) on[i] = 1;
        else if (ch == 'c') for (size_t i = 0; i < nf; i++) on[i] = 0;
        else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) { done = 1; break; }
    }
    close_popup(T, w);
    if (done) {
        tui_fmt nf2[TUI_MAX_FMTS];
        int n = 0;
        memset(nf2, 0, sizeof nf2);
        /* keep the chosen entries that stay (with their options), then add the new ones */
        for (int k = 0; k < T->nfmts; k++) {
            size_t i;
            for (i = 0; i < nf && qs_format_at(i) != T->fmts[k].a.f; i++) {}
            if (i < nf && on[i] && n < TUI_MAX_FMTS) { nf2[n++] = T->fmts[k]; T->fmts[k].opts = NULL; on[i] = 2; }
        }
        for (size_t i = 0; i < nf && n < TUI_MAX_FMTS; i++) {
            if (on[i] != 1) continue;
            qs_apply a;
            memset(&a, 0, sizeof a);
            a.axis = 1;
            a.f = qs_format_at(i);
            if (a.f->block == 0) a.gran = QS_GRAN_ROW;   /* run-long blocks: one scale per row */
            memset(&nf2[n], 0, sizeof nf2[n]);
            if (tui_fmt_set(&nf2[n], &a) == 0) n++;
        }
        if (!n) tui_set_msg(T, 1, "keep at least one format");
        else {
            tui_fmts_free(T);
            memcpy(T->fmts, nf2, sizeof nf2);
            T->nfmts = n;
            T->lf.cur = 0;
            T->met_for = T->blk_for = -1;
            tui_views_changed(T, TUI_CH_FORMATS);
            tui_load_metrics(T);
            tui_set_msg(T, 0, "%d formats", n);
            if (tui_view_of(T->view)->flags & TVF_METRICS) {
                /* compute what is missing */
                qs_apply apps[TUI_MAX_FMTS];
                int m = 0;
                for (int i = 0; i < T->nfmts; i++) if (!T->met[i].have) apps[m++] = T->fmts[i].a;
                tui_tensor *t = tui_cur_tensor(T);
                if (m && t && T->auto_analyze) tui_job_analyze(&T->job, t->name, apps, m, 0);
            }
        }
    }
    free(on);
}

/* `o`: options of the selected format; each line cycles through its values with Left/Right/Space. */
void tui_format_options(tui *T)
{
    if (!T->nfmts) return;
    int fi = T->forder && T->lf.cur < T->nfmts ? T->forder[T->lf.cur] : 0;
    if (tui_view_of(T->view)->flags & TVF_BLOCK) fi = T->blk_fmt >= 0 ? T->blk_fmt : fi;
    qs_apply a = T->fmts[fi].a;
    const qs_format *f = a.f;
    static const int blocks[] = {0, 8, 16, 32, 64, 128, 256};
    static const qs_gran grans[] = {QS_GRAN_BLOCK, QS_GRAN_TENSOR, QS_GRAN_ROW, QS_GRAN_COL};
    int cur = 0;
    char title[160];
    snprintf(title, sizeof title, "options of %s: Left/Right change, Enter applies, Esc cancels", T->fmts[fi].label);
    WINDOW *w = popup(T, 12, 76, title);
    if (!w) return;
    const int nrow = 7;
    char err[200] = "";
    int done = 0;
    for (;;) {
        const char *names[7] = {"rounding",   "scale rule", "block size",     "granularity",
                                "block axis", "saturate (casts)", "scale (casts)"};
        char vals[7][64];
        snprintf(vals[0], 64, "%s%s", qs_round_name(a.o.round == QS_RND_DEFAULT ? f->default_round : a.o.round),
                 a.o.round == QS_RND_DEFAULT ? " (default)" : "");
        snprintf(vals[1], 64, "%s", f->has_scale_rule ? qs_scale_rule_name(a.o.scale_rule) : "- (no E8M0 block scale)");
        if (a.o.block) snprintf(vals[2], 64, "%d", a.o.block);
        else snprintf(vals[2], 64, "%zu (default)", qs_format_block(f, &a.o));
        snprintf(vals[3], 64, "%s", qs_gran_name(a.gran));
        snprintf(vals[4], 64, "%d (%s)", a.axis, a.axis ? "along rows, contiguous" : "down columns");
        snprintf(vals[5], 64, "%s", a.o.sat ? "yes" : "no");
        snprintf(vals[6], 64, "%s", qs_cast_scale_target(f) > 0 ? qs_cscale_name(a.cscale) : "- (no scale target)");
        for (int r = 0; r < nrow; r++) {
            wmove(w, 2 + r, 1);
            for (int x = 1; x < getmaxx(w) - 1; x++) waddch(w, ' ');
            if (r == cur) wattron(w, A_REVERSE);
            mvwprintw(w, 2 + r, 3, "%-18s < %-36s >", names[r], vals[r]);
            if (r == cur) wattroff(w, A_REVERSE);
        }
        wmove(w, 9, 1);
        for (int x = 1; x < getmaxx(w) - 1; x++) waddch(w, ' ');
        mvwprintw(w, 9, 3, "%.*s", getmaxx(w) - 6, err);
        wrefresh(w);
        int ch = wgetch(w);
        if (ch == 27 || ch == 'q' || tui_interrupted()) break;
        if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            qs_err e = {{0}};
            if (qs_qopts_check(f, &a.o, &e)) { snprintf(err, sizeof err, "%.190s", e.msg); continue; }
            done = 1;
            break;
        }
        if (ch == 'j' || ch == KEY_DOWN) { cur = (cur + 1) % nrow; continue; }
        if (ch == 'k' || ch == KEY_UP) { cur = (cur + nrow - 1) % nrow; continue; }
        int d = ch == KEY_LEFT || ch == 'h' ? -1 : ch == KEY_RIGHT || ch == 'l' || ch == ' ' ? 1 : 0;
        if (!d) continue;
        err[0] = 0;
        switch (cur) {
        case 0: {
            int r = (int)a.o.round;
            for (int k = 0; k < QS_RND_COUNT; k++) {
                r = (r + d + QS_RND_COUNT) % QS_RND_COUNT;
                if (r == QS_RND_DEFAULT || (f->round_modes & (1u << r))) break;
            }
            a.o.round = (qs_round)r;
            break;
        }
        case 1:
            if (f->has_scale_rule) a.o.scale_rule = (qs_scale_rule)((a.o.scale_rule + d + QS_SCALE_COUNT) % QS_SCALE_COUNT);
            break;
        case 2: {
            int k = 0, nb = (int)(sizeof blocks / sizeof *blocks);
            while (k < nb && blocks[k] != a.o.block) k++;
            k = ((k < nb ? k : 0) + d + nb) % nb;
            a.o.block = blocks[k];
            break;
        }
        case 3: {
            int k = 0;
            while (k < 4 && grans[k] != a.gran) k++;
            a.gran = grans[((k < 4 ? k : 0) + d + 4) % 4];
            break;
        }
        case 4: a.axis = !a.axis; break;
        case 5: a.o.sat = !a.o.sat; break;
        case 6:   /* the scaling default of llm/attn (docs/formats.md), for casts with a scale target */
            if (qs_cast_scale_target(f) > 0) a.cscale = (a.cscale + d + 4) % 4;
            break;
        }
        qs_err e = {{0}};
        if (qs_qopts_check(f, &a.o, &e)) snprintf(err, sizeof err, "not valid yet: %.150s", e.msg);
    }
    close_popup(T, w);
    if (!done) return;
    if (tui_fmt_set(&T->fmts[fi], &a)) { tui_set_msg(T, 1, "out of memory"); return; }
    T->met_for = T->blk_for = -1;
    tui_views_changed(T, TUI_CH_OPTIONS);
    tui_load_metrics(T);
    tui_set_msg(T, 0, "%s: options set", T->fmts[fi].label);
    tui_tensor *t = tui_cur_tensor(T);
    if (t && !T->met[fi].have && T->auto_analyze && !(tui_view_of(T->view)->flags & TVF_BROWSE)) tui_job_analyze(&T->job, t->name, &a, 1, 0);
}

