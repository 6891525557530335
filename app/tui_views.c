/*
** The list and plot views of the workbench: Tensors, Formats (with a Pareto plot under the table),
** Histogram, RL runs, Kernels, Output and Help, and the two pop-ups (`f` choose formats, `o` format
** options).  Each draw function gets the rows [y0, y0 + h) of the screen.
*/
#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tui.h"
#include "value_hist.h"
#include "../analysis/plot.h"


static void sel_on(tui *T) { attron(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); }
static void sel_off(tui *T) { attroff(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); }
static void head_on(tui *T) { attron(A_BOLD | A_UNDERLINE); (void)T; }
static void head_off(tui *T) { attroff(A_BOLD | A_UNDERLINE); (void)T; }

static void fill_line(tui *T, int y)
{
    move(y, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
}

/* Keep the cursor of a list of n rows visible in `rows` rows. */
static void scroll_into(tui_list *l, int n, int rows)
{
    if (l->cur >= n) l->cur = n - 1;
    if (l->cur < 0) l->cur = 0;
    if (rows < 1) rows = 1;
    if (l->cur < l->top) l->top = l->cur;
    if (l->cur >= l->top + rows) l->top = l->cur - rows + 1;
    if (l->top > n - rows) l->top = n - rows;
    if (l->top < 0) l->top = 0;
}

/* s from (y, x) in lines of at most w columns, broken at spaces (a word longer than w is cut);
** returns the lines used */
static int addstr_wrapped(int y, int x, const char *s, int w)
{
    int n = 0;
    while (*s && w > 0) {
        int len = (int)strlen(s), cut = len;
        if (len > w) {
            cut = w;
            while (cut > 0 && s[cut] != ' ') cut--;
            if (cut == 0) cut = w;
        }
        mvaddnstr(y + n, x, s, cut);
        n++;
        s += cut;
        while (*s == ' ') s++;
    }
    return n;
}

/* An empty state: a bold line, then what to do, both wrapped to the screen. */
static void empty_msg(tui *T, int y, const char *a, const char *b)
{
    attron(A_BOLD);
    y += addstr_wrapped(y, 2, a, T->W - 4);
    attroff(A_BOLD);
    if (b) addstr_wrapped(y, 2, b, T->W - 4);
}

/* ---------------------------------------------------------------- Tensors */

void tui_draw_tensors(tui *T, int y0, int h)
{
    static const char *const keys[] = {"name", "size", "absmax", "kurtosis", "outliers"};
    if (!T->nt) {
        empty_msg(T, y0 + 1, "No tensors in this database yet.",
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
    head_on(T);
    snprintf(line, sizeof line, " %-*.*s %*s %-*s%9s %10s %8s %8s %s", nw, nw, "NAME", shw, "SHAPE", show_dt ? 9 : 0, show_dt ? "DTYPE" : "",
             "SIZE", "ABSMAX", "KURTOSIS", show_out ? "OUTLIERS" : "", show_res ? "RESULTS" : "");
    fill_line(T, y0 + 1);
    tui_addstr_clip(y0 + 1, 0, line, W);
    head_off(T);
    int rows = h - 2;
    scroll_into(&T->lt, (int)T->nvis, rows);
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
        if (i == T->lt.cur) { sel_on(T); fill_line(T, y0 + 2 + r); }
        tui_addstr_clip(y0 + 2 + r, 0, line, W);
        if (i == T->lt.cur) { mvaddch(y0 + 2 + r, 0, '>'); sel_off(T); }
    }
}

/* ---------------------------------------------------------------- Formats */

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

void tui_draw_formats(tui *T, int y0, int h)
{
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) { empty_msg(T, y0 + 1, "No tensor selected.", "Go to the Tensors view (1) and pick one."); return; }
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
    head_on(T);
    fill_line(T, y0 + 1);
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
    head_off(T);
    int table_rows = T->nfmts;
    int room = h - 3;
    int plot_h = room - table_rows - 1;
    int rows = table_rows;
    if (plot_h < 12) { plot_h = 0; rows = room; }
    scroll_into(&T->lf, T->nfmts, rows);
    T->click_list = &T->lf;
    T->click_y0 = y0 + 2;
    T->click_n = T->nfmts;
    int busy = T->job.busy;
    for (int r = 0; r < rows && T->lf.top + r < T->nfmts; r++) {
        int k = T->lf.top + r, i = T->forder ? T->forder[k] : k;
        tui_metrics *m = &T->met[i];
        int y = y0 + 2 + r;
        int sel = k == T->lf.cur;
        if (sel) { sel_on(T); fill_line(T, y); }
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
        if (sel) { mvaddch(y, 0, '>'); sel_off(T); }
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

/* ---------------------------------------------------------------- Histogram */

void tui_draw_hist(tui *T, int y0, int h)
{
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) { empty_msg(T, y0 + 1, "No tensor selected.", "Go to the Tensors view (1) and pick one."); return; }
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
    if (T->hist_kind == 3) {
        /* the picture of `qscope plot value-hist TENSOR -f F`: |x|, |Q(x)| and the grid, labelled;
        ** one pass over the tensor, kept until the tensor or the format changes */
        const tui_fmt *F = &T->fmts[cf];
        char key[sizeof T->vh_key];
        snprintf(key, sizeof key, "%s|%s", t->hash, F->label);
        if (!T->vh_fig || strcmp(key, T->vh_key)) {
            qs_err e = {{0}};
            qs_fig_free(T->vh_fig);
            T->vh_fig = qs_value_hist_figure(T->db, t->name, &F->a, F->label, 0, &e);
            snprintf(T->vh_key, sizeof T->vh_key, "%s", key);
            if (!T->vh_fig) { tui_addstr_clip(y0 + 1, 2, e.msg, T->W - 4); return; }
        }
        T->fig = qs_fig_clone(T->vh_fig);
        snprintf(T->fig_what, sizeof T->fig_what, "value-hist-%s-%s", t->name, F->label);
    } else {
        for (int i = 0; i < T->nfmts; i++) {
            int k = T->forder ? T->forder[i] : i;
            if (T->hist_one && k != cf) continue;
            if (tui_load_hist(T, k, which[T->hist_kind], &hs[n]) || !hs[n].nbins) { free(hs[n].counts); continue; }
            hp[n] = &hs[n];
            names[n++] = T->fmts[k].label;
        }
        if (!n) goto none;
        if (T->hist_one) snprintf(title, sizeof title, "%s: %s under %s", t->name, what[T->hist_kind], T->fmts[cf].label);
        else snprintf(title, sizeof title, "%s: %s", t->name, what[T->hist_kind]);
        T->fig = qs_plot_err_hist(title, what[T->hist_kind], n, names, hp);
        for (size_t i = 0; i < n; i++) free(hs[i].counts);
        snprintf(T->fig_what, sizeof T->fig_what, "%s-hist-%s", which[T->hist_kind], t->name);
    }
    if (T->fig && T->hist_liny) {
        qs_axis_set(&T->fig->y, QS_AX_LINEAR, "count");
        T->fig->y.zero_base = 1;
    }
    tui_draw_figure(T, T->fig, y0, 0, h, T->W);
    return;
none:
    empty_msg(T, y0 + 1, "No stored histograms for this tensor yet.",
              T->job.busy ? "They are being computed in the background." : "Press r to compute them (Formats view shows progress).");
}

/* ---------------------------------------------------------------- RL runs */

void tui_draw_rl(tui *T, int y0, int h)
{
    if (!T->runs_loaded) {
        qs_err le = {{0}};
        if (tui_load_runs(T, &le)) tui_set_msg(T, 1, "%s", le.msg);
    }
    int ntraj = 0;
    for (size_t i = 0; i < T->nkres; i++) ntraj += !strcmp(T->kres[i].kind, "trajectory");
    if (!T->nruns && !ntraj) {
        empty_msg(T, y0 + 1, "No RL runs yet.",
                  "Press : and run `sim grpo --seeds 1 --steps 60` for a short simulated run, or `import-log FILE` "
                  "for a log of your own.  Each run is listed with its tokens, steps and sequences; the per-step "
                  "mismatch diagnostics of the selected run (mean/p95/max |dlogp|, KL k3, IS weights; m cycles) are "
                  "plotted below it, and stored trajectory results (methods compared) are listed under Tab.");
        return;
    }
    int list_h = h / 3, nlist = T->rl_pane == 0 ? (int)T->nruns : ntraj;
    if (list_h > nlist + 2) list_h = nlist + 2;
    if (list_h < 3) list_h = 3;
    char line[600];
    /* run and label columns as wide as their longest entry, within the screen; the steps' range
    ** goes first on a narrow one, then SEQUENCES, then the label and the names are cut (names in
    ** the middle) */
    int rnw = 3, rlw = 14, showseq = 1, sw = 13;
    for (size_t i = 0; i < T->nruns; i++) {
        if ((int)strlen(T->runs[i].name) > rnw) rnw = (int)strlen(T->runs[i].name);
        if ((int)strlen(T->runs[i].label) > rlw) rlw = (int)strlen(T->runs[i].label);
    }
    int avail = T->W - (1 + 1 + 1 + 10 + 1 + sw + 1 + 9 + 1);
    if (avail < rnw + rlw) { sw = 7; avail += 6; }
    if (avail < rnw + 14) { showseq = 0; avail += 10; }
    if (rnw > avail - 14) rnw = avail - 14 > 8 ? avail - 14 : 8;
    if (rlw > avail - rnw) rlw = avail - rnw > 8 ? avail - rnw : 8;
    head_on(T);
    fill_line(T, y0);
    if (T->rl_pane == 0) {
        snprintf(line, sizeof line, " %-*s %-*s %10s %*s %s", rnw, "RUN", rlw, "LABEL / SOURCE", "TOKENS", sw, sw > 7 ? "STEPS (RANGE)" : "STEPS",
                 showseq ? "SEQUENCES" : "");
        char tab[64];
        snprintf(tab, sizeof tab, "   [Tab: stored trajectories (%d)]", ntraj);
        if (strlen(line) + strlen(tab) <= (size_t)T->W) strcat(line, tab);
    } else
        snprintf(line, sizeof line, " %-8s %-*s %-16s %-20s   [Tab: runs (%zu)]", "RESULT", T->W - 50 > 20 ? T->W - 50 : 20, "WHAT",
                 "FORMAT", "CREATED", T->nruns);
    tui_addstr_clip(y0, 0, line, T->W);
    head_off(T);
    int rows = list_h - 1;
    qs_err e = {{0}};
    if (T->rl_pane == 0) {
        if (!T->nruns) {
            tui_addstr_clip(y0 + 1, 2, "No RL runs yet: press : and run `sim grpo --seeds 1` or `import-log FILE`.", T->W - 4);
        } else {
            scroll_into(&T->lr, (int)T->nruns, rows);
            T->click_list = &T->lr;
            T->click_y0 = y0 + 1;
            T->click_n = (int)T->nruns;
            const char *peers[256];
            int np = 0;
            for (int r = 0; r < rows && r < 256 && T->lr.top + r < (int)T->nruns; r++) peers[np++] = T->runs[T->lr.top + r].name;
            for (int r = 0; r < rows && T->lr.top + r < (int)T->nruns; r++) {
                int i = T->lr.top + r;
                tui_run *R = &T->runs[i];
                char nm[300], sq[24] = "";
                tui_cut_middle(R->name, peers, np, rnw, nm, sizeof nm);
                if (R->tokens < 0) snprintf(line, sizeof line, " %-*.*s %-*.*s %10s %*s %9s", rnw, rnw, nm, rlw, rlw, qs_esc(R->label), "...", sw, "...",
                                            showseq ? "..." : "");
                else {
                    /* the logged steps and their range: 7 steps of a 60-step run logged every 10 */
                    char stp[48];
                    if (sw > 7 && R->steps > 1 && isfinite(R->first) && isfinite(R->last))
                        snprintf(stp, sizeof stp, "%lld (%.0f..%.0f)", (long long)R->steps, R->first, R->last);
                    else snprintf(stp, sizeof stp, "%lld", (long long)R->steps);
                    if (showseq) snprintf(sq, sizeof sq, "%9lld", (long long)R->seqs);
                    snprintf(line, sizeof line, " %-*.*s %-*.*s %10lld %*s %s", rnw, rnw, nm, rlw, rlw, qs_esc(R->label), (long long)R->tokens,
                             sw, stp, sq);
                }
                if (i == T->lr.cur) { sel_on(T); fill_line(T, y0 + 1 + r); }
                tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
                if (i == T->lr.cur) { mvaddch(y0 + 1 + r, 0, '>'); sel_off(T); }
            }
            /* every run overlaid (methods compared), or only the selected one ('a'); the
            ** diagnostics are computed by the worker the first time (they read every token) */
            tui_run *R = &T->runs[T->lr.cur];
            int64_t missing[64];
            int nmiss = 0;
            for (size_t i = 0; i < T->nruns && nmiss < 64; i++)
                if (!tui_rl_get(T, T->runs[i].id)) missing[nmiss++] = T->runs[i].id;
            if (nmiss && !T->job.busy && !T->bench_rl_sync && !T->rl_stopped) tui_job_rl(&T->job, missing, nmiss);
            if (nmiss && T->bench_rl_sync) {   /* headless benchmark: compute here */
                for (int i = 0; i < nmiss; i++) {
                    tui_rlc *c = calloc(1, sizeof *c);
                    if (c && !tui_rl_compute(T->db, missing[i], c, &e)) tui_rl_cache_take(T, c, 1);
                    else free(c);
                }
            }
            qs_line_data ld[8];
            size_t nl = 0;
            int first = T->rl_one ? T->lr.cur : 0, last = T->rl_one ? T->lr.cur + 1 : (int)T->nruns;
            int pending = 0;
            for (int i = first; i < last && nl < 8; i++) {
                const tui_rlc *c = tui_rl_get(T, T->runs[i].id);
                if (!c) { pending++; continue; }
                if (c->n) ld[nl++] = (qs_line_data){T->runs[i].name, c->n, c->x, c->y[T->rl_metric]};
            }
            if (pending && !nl) {
                tui_addstr_clip(y0 + list_h + 1, 2, T->rl_stopped ? "The diagnostics were not computed (cancelled or failed): press r to compute them."
                                                                  : "Computing the per-step diagnostics from the tokens in the background...", T->W - 4);
            } else if (!nl) {
                tui_addstr_clip(y0 + list_h + 1, 2, "No unmasked tokens in this run.", T->W - 4);
            } else {
                char title[300];
                if (T->rl_one) snprintf(title, sizeof title, "%s: %s per step", R->name, tui_rl_metric_name(T->rl_metric));
                else if (nl < T->nruns)   /* say what is left out: runs past the eighth, still computing, empty */
                    snprintf(title, sizeof title, "%s per step, %zu of %zu runs (%s; a: the selected one)",
                             tui_rl_metric_name(T->rl_metric), nl, T->nruns, pending ? "others still computing" : "the first by name");
                else snprintf(title, sizeof title, "%s per step, %zu run%s", tui_rl_metric_name(T->rl_metric), nl, nl == 1 ? "" : "s");
                T->fig = qs_plot_trajectory(title, tui_rl_metric_name(T->rl_metric), ld, nl);
                snprintf(T->fig_what, sizeof T->fig_what, "rl-%s-m%d", T->rl_one ? R->name : "runs", T->rl_metric);
                tui_draw_figure(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
            }
        }
        return;
    }
    /* stored trajectory results */
    int idx[4096], n = 0;
    for (size_t i = 0; i < T->nkres && n < 4096; i++)
        if (!strcmp(T->kres[i].kind, "trajectory")) idx[n++] = (int)i;
    if (!n) {
        tui_addstr_clip(y0 + 1, 2, "No stored trajectories yet: press : and run `ais RUN` or `sim grpo --seeds 1`.", T->W - 4);
        return;
    }
    scroll_into(&T->lk, n, rows);
    T->click_list = &T->lk;
    T->click_y0 = y0 + 1;
    T->click_n = n;
    for (int r = 0; r < rows && T->lk.top + r < n; r++) {
        tui_kres *K = &T->kres[idx[T->lk.top + r]];
        int ww = T->W - 50 > 20 ? T->W - 50 : 20;
        char what[300];
        tui_cut_end(K->what, ww, what, sizeof what);
        snprintf(line, sizeof line, " %-8lld %-*.*s %-16.16s %-20.20s", (long long)K->id, ww, ww, what, K->format, K->created);
        if (T->lk.top + r == T->lk.cur) { sel_on(T); fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (T->lk.top + r == T->lk.cur) { mvaddch(y0 + 1 + r, 0, '>'); sel_off(T); }
    }
    tui_kres *K = &T->kres[idx[T->lk.cur]];
    T->fig = tui_kres_figure(T, K->id, &e);
    if (!T->fig) { tui_addstr_clip(y0 + list_h + 1, 2, e.msg, T->W - 4); return; }
    snprintf(T->fig_what, sizeof T->fig_what, "trajectory-%lld", (long long)K->id);
    tui_draw_figure(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
}

/* ---------------------------------------------------------------- Kernels */

void tui_draw_kernels(tui *T, int y0, int h)
{
    int idx[4096], n = 0;
    for (size_t i = 0; i < T->nkres && n < 4096; i++)
        if (strcmp(T->kres[i].kind, "trajectory")) idx[n++] = (int)i;
    if (!n) {
        empty_msg(T, y0 + 1, "No kernel results yet.",
                  "Press : and run `msd` (Multi-Scale Dequant: effective bits by passes), `attn --L 256,512` "
                  "(attention error by sequence length) or `resq` (FP4 layer with a residual correction); "
                  "each stores its result, which is listed and plotted here.");
        return;
    }
    int list_h = h / 3;
    if (list_h > n + 2) list_h = n + 2;
    if (list_h < 3) list_h = 3;
    char line[600];
    head_on(T);
    fill_line(T, y0);
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
    head_off(T);
    int rows = list_h - 1;
    scroll_into(&T->lk, n, rows);
    T->click_list = &T->lk;
    T->click_y0 = y0 + 1;
    T->click_n = n;
    for (int r = 0; r < rows && T->lk.top + r < n; r++) {
        tui_kres *K = &T->kres[idx[T->lk.top + r]];
        char what[300], when[24];
        tui_cut_end(K->what, ww, what, sizeof what);
        /* 2026-12-01T16:14:56Z, or 12-01 16:14 when short */
        if (cw < 20 && strlen(K->created) >= 16) snprintf(when, sizeof when, "%.5s %.5s", K->created + 5, K->created + 11);
        else snprintf(when, sizeof when, "%.20s", K->created);
        snprintf(line, sizeof line, " %-8lld %-*s%s%-*s %s", (long long)K->id, showkind ? 7 : 0, showkind ? K->kind : "", "", ww, what,
                 when);
        if (T->lk.top + r == T->lk.cur) { sel_on(T); fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (T->lk.top + r == T->lk.cur) { mvaddch(y0 + 1 + r, 0, '>'); sel_off(T); }
    }
    qs_err e = {{0}};
    tui_kres *K = &T->kres[idx[T->lk.cur]];
    T->fig = tui_kres_figure(T, K->id, &e);
    if (!T->fig) { tui_addstr_clip(y0 + list_h + 1, 2, e.msg, T->W - 4); return; }
    snprintf(T->fig_what, sizeof T->fig_what, "%s-%lld", K->kind, (long long)K->id);
    tui_draw_figure(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
}

/* ---------------------------------------------------------------- Output and Help */

static void draw_text(tui *T, tui_list *l, char **lines, int n, int y0, int h)
{
    if (l->top > n - h) l->top = n - h;
    if (l->top < 0) l->top = 0;
    l->cur = l->top;
    for (int r = 0; r < h && l->top + r < n; r++) {
        const char *s = lines[l->top + r];
        int hit = T->search[0] && strcasestr(s, T->search);
        if (hit) attron(A_BOLD);
        tui_addstr_clip(y0 + r, 1, s, T->W - 2);
        if (hit) attroff(A_BOLD);
    }
}

void tui_draw_output(tui *T, int y0, int h)
{
    if (!T->out) { empty_msg(T, y0 + 1, "No command has run yet.", "Press : and type a qscope command, e.g. `info` or `analyze --all -f mxfp4`."); return; }
    attron(A_BOLD);
    tui_addstr_clip(y0, 1, T->out_title, T->W - 2);
    attroff(A_BOLD);
    int n = 0;
    for (size_t i = 0; i < T->out_len; i++) n += T->out[i] == '\n';
    n++;
    char **lines = malloc((size_t)n * sizeof *lines);
    if (!lines) return;
    char *copy = strdup(T->out);
    if (!copy) { free(lines); return; }
    int k = 0;
    for (char *p = copy; p && k < n;) {
        lines[k++] = p;
        p = strchr(p, '\n');
        if (p) *p++ = 0;
    }
    /* terminal control sequences (progress bars) are dropped: keep the text after the last \r */
    for (int i = 0; i < k; i++) {
        char *r = strrchr(lines[i], '\r');
        if (r && r[1]) lines[i] = r + 1;
        for (char *c = lines[i]; *c; c++) if ((unsigned char)*c < 32 && *c != '\t') *c = ' ';
    }
    T->click_list = &T->lo;
    T->click_n = k;
    draw_text(T, &T->lo, lines, k, y0 + 1, h - 1);
    free(copy);
    free(lines);
}

void tui_draw_help(tui *T, int y0, int h)
{
    char **L = NULL;
    int n = tui_help_lines_w(T->W - 2, &L);
    if (n < 0) return;
    T->click_list = &T->lh;
    T->click_n = n;
    draw_text(T, &T->lh, L, n, y0, h);
    for (int i = 0; i < n; i++) free(L[i]);
    free(L);
}

/* ---------------------------------------------------------------- pop-ups */

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
            T->second_fmt = -1;
            tui_inspect_free(T);
            tui_load_metrics(T);
            tui_set_msg(T, 0, "%d formats", n);
            if (T->view == TV_FORMATS || T->view == TV_HIST || T->view == TV_BLOCKS) {
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
    if (T->view == TV_BLOCKS || T->view == TV_INSPECT) fi = T->blk_fmt >= 0 ? T->blk_fmt : fi;
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
    tui_inspect_free(T);
    tui_load_metrics(T);
    tui_set_msg(T, 0, "%s: options set", T->fmts[fi].label);
    tui_tensor *t = tui_cur_tensor(T);
    if (t && !T->met[fi].have && T->auto_analyze && T->view != TV_TENSORS) tui_job_analyze(&T->job, t->name, &a, 1, 0);
}
