/*
** The workbench: entry point, main loop and screen layout (see tui.h for the files).
**
** Screen: a title line (view, tensor, format), the view, a status line (view, position, database,
** running job with a progress bar, or the last message) and a key-hint bar.  The main loop sleeps
** in poll() on the terminal and the worker's self-pipe, with a 100 ms tick only while a job runs,
** so an idle workbench uses no CPU and a finished job shows at once.  Resizes re-lay out at once
** (KEY_RESIZE); below 60 x 16 cells a message asks for a larger terminal.
*/
#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "quant_opts.h"
#include "tui.h"
#include "plot_render.h"

#define MIN_W 60
#define MIN_H 16
#define TUI_DEFAULT_FORMATS QS_DEFAULT_FORMATS

static const char *const kViewNames[TV_COUNT] = {"Tensors", "Formats", "Histogram", "Blocks", "Inspector",
                                                  "RL runs", "Kernels", "Model", "Output", "Help"};
const char *tui_view_name(tui_view_id v) { return v < TV_COUNT ? kViewNames[v] : "?"; }

void tui_set_msg(tui *T, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(T->msg, sizeof T->msg, fmt, ap);
    va_end(ap);
    T->msg_err = err;
}

void tui_fmt_num(double v, char *buf, size_t cap)
{
    if (isnan(v)) snprintf(buf, cap, "-");
    else if (isinf(v)) snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    else if (v == 0) snprintf(buf, cap, "0");
    else if (fabs(v) >= 1e5 || fabs(v) < 1e-3) snprintf(buf, cap, "%.3e", v);
    else snprintf(buf, cap, "%.4g", v);
}

/* Write s at (y, x), at most w columns (UTF-8 aware: counts code points, which is what every glyph
** the workbench prints occupies).  Control characters and invalid UTF-8 are drawn as the CLI
** prints them (qs_esc): names from files never reach the terminal raw. */
void tui_addstr_clip(int y, int x, const char *s, int w)
{
    if (w <= 0 || !s) return;
    s = qs_esc(s);
    int cols = 0;
    const char *p = s;
    while (*p && cols < w) {
        p++;
        while ((*p & 0xC0) == 0x80) p++;
        cols++;
    }
    mvaddnstr(y, x, s, (int)(p - s));
}

void tui_push(tui *T, tui_view_id v)
{
    if (T->view == v) return;
    if (T->depth < (int)(sizeof T->stack / sizeof *T->stack)) T->stack[T->depth++] = T->view;
    T->view = v;
}

void tui_pop(tui *T)
{
    if (T->depth > 0) T->view = T->stack[--T->depth];
}

/* A one-line prompt at the bottom; returns 1 on Enter, 0 on Esc. */
int tui_prompt(tui *T, const char *label, char *buf, size_t cap)
{
    size_t n = strlen(buf);
    curs_set(1);
    nodelay(stdscr, FALSE);
    for (;;) {
        move(T->H - 1, 0);
        clrtoeol();
        attron(A_BOLD);
        mvaddstr(T->H - 1, 0, label);
        attroff(A_BOLD);
        int lw = (int)strlen(label), avail = T->W - lw - 1;
        const char *show = buf + (n > (size_t)avail ? n - (size_t)avail : 0);
        mvaddstr(T->H - 1, lw, show);
        refresh();
        int ch = getch();
        if (tui_interrupted()) { curs_set(0); nodelay(stdscr, !T->bench); return 0; }
        if (ch == ERR) continue;
        if (ch == 27) { curs_set(0); nodelay(stdscr, !T->bench); return 0; }
        if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) { curs_set(0); nodelay(stdscr, !T->bench); return 1; }
        if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) { if (n) buf[--n] = 0; continue; }
        if (ch == 21) { n = 0; buf[0] = 0; continue; }   /* Ctrl-U */
        if (ch == KEY_RESIZE) { getmaxyx(stdscr, T->H, T->W); tui_draw(T); continue; }
        if (ch >= 32 && ch < 256 && n + 1 < cap) { buf[n++] = (char)ch; buf[n] = 0; }
    }
}

static void draw_status(tui *T)
{
    int y = T->H - 2;
    attron(T->color ? COLOR_PAIR(CP_STATUS) : A_REVERSE);
    move(y, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
    char left[400];
    tui_list *l = T->click_list;
    char pos[48] = "";
    if (l && T->click_n > 0) snprintf(pos, sizeof pos, " %d/%d", l->cur + 1, T->click_n);
    /* right side: the job, or the message */
    pthread_mutex_lock(&T->job.mu);
    int busy = T->job.busy;
    char right[400] = "";
    if (busy) {
        double f = T->job.total ? (double)T->job.done / (double)T->job.total : 0;
        int bw = 16, k = (int)(f * bw + 0.5);
        char bar[40];
        for (int i = 0; i < bw; i++) bar[i] = i < k ? '#' : '.';
        bar[bw] = 0;
        if (T->job.kind == TJ_ANALYZE || T->job.kind == TJ_RL)
            snprintf(right, sizeof right, "[%s] %3.0f%% %d/%d %s  Esc cancels ", bar, 100 * f, T->job.step + 1,
                     T->job.nsteps, T->job.label);
        else snprintf(right, sizeof right, "%s  Esc cancels ", T->job.label);
    }
    pthread_mutex_unlock(&T->job.mu);
    if (!busy && T->msg[0]) snprintf(right, sizeof right, "%.380s ", T->msg);
    /* on a narrow screen the database path gives way to the message: the full path, then its file
    ** name, then nothing; a message still too long ends in "..." */
    const char *base = strrchr(T->db_path, '/');
    base = base ? base + 1 : T->db_path;
    int rw = (int)strlen(right);
    snprintf(left, sizeof left, " %s%s  db %s", tui_view_name(T->view), pos, T->db_path);
    if (rw && (int)strlen(left) + 2 + rw > T->W) snprintf(left, sizeof left, " %s%s  db %s", tui_view_name(T->view), pos, base);
    if (rw && (int)strlen(left) + 2 + rw > T->W) snprintf(left, sizeof left, " %s%s", tui_view_name(T->view), pos);
    tui_addstr_clip(y, 0, left, T->W);
    int lw = (int)strlen(left) + 2;
    if (rw > T->W - lw && T->W - lw > 4) {
        int keep = T->W - lw - 4;
        while (keep > 0 && (right[keep] & 0xC0) == 0x80) keep--;   /* not inside a UTF-8 sequence */
        memcpy(right + keep, "... ", 5);
        rw = (int)strlen(right);
    }
    if (right[0]) {
        int x = T->W - rw;
        if (x < lw) x = lw;
        if (!busy && T->msg_err && T->color) attron(COLOR_PAIR(CP_ERR) | A_BOLD);
        tui_addstr_clip(y, x, right, T->W - x);
        if (!busy && T->msg_err && T->color) attroff(COLOR_PAIR(CP_ERR) | A_BOLD);
    }
    attroff(T->color ? COLOR_PAIR(CP_STATUS) : A_REVERSE);
    /* key hints */
    move(T->H - 1, 0);
    clrtoeol();
    if (T->color) attron(COLOR_PAIR(CP_HINT));
    char hints[300];
    tui_fit_hints(tui_hint_bar(T->view), T->W - 1, hints, sizeof hints);
    tui_addstr_clip(T->H - 1, 0, hints, T->W);
    if (T->color) attroff(COLOR_PAIR(CP_HINT));
}

static void draw_title(tui *T)
{
    attron(A_BOLD | (T->color ? COLOR_PAIR(CP_HEAD) : A_REVERSE));
    move(0, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
    char buf[600];
    tui_tensor *t = tui_cur_tensor(T);
    int ctx = T->view == TV_FORMATS || T->view == TV_HIST || T->view == TV_BLOCKS || T->view == TV_INSPECT;
    int n = snprintf(buf, sizeof buf, " qscope  %s", tui_view_name(T->view));
    if (ctx && t) n += snprintf(buf + n, sizeof buf - (size_t)n, "  %s", t->name);
    if ((T->view == TV_BLOCKS || T->view == TV_INSPECT) && T->blk_fmt >= 0 && T->blk_fmt < T->nfmts)
        snprintf(buf + n, sizeof buf - (size_t)n, "  %s", T->fmts[T->blk_fmt].label);
    tui_addstr_clip(0, 0, buf, T->W);
    const char *views = "1 Tensors 2 Formats 3 Hist 4 Blocks 5 RL 6 Kernels 7 Output 8 Model ";
    int vw = (int)strlen(views);
    if (T->W - vw <= (int)strlen(buf) + 2) {   /* a long title: the short names */
        views = "1 Tens 2 Fmt 3 Hist 4 Blk 5 RL 6 Kern 7 Out 8 Model ";
        vw = (int)strlen(views);
    }
    if (T->W - vw > (int)strlen(buf) + 2) mvaddstr(0, T->W - vw, views);
    attroff(A_BOLD | (T->color ? COLOR_PAIR(CP_HEAD) : A_REVERSE));
}

void tui_draw(tui *T)
{
    erase();
    getmaxyx(stdscr, T->H, T->W);
    if (T->W < MIN_W || T->H < MIN_H) {
        char m[120];
        snprintf(m, sizeof m, "Terminal too small (%dx%d).", T->W, T->H);
        tui_addstr_clip(T->H / 2 - 1, 0, m, T->W);
        snprintf(m, sizeof m, "qscope needs at least %dx%d.", MIN_W, MIN_H);
        tui_addstr_clip(T->H / 2, 0, m, T->W);
        tui_addstr_clip(T->H / 2 + 1, 0, "Enlarge it, or press Q to quit.", T->W);
        refresh();
        return;
    }
    T->click_list = NULL;
    T->click_n = 0;
    if (T->fig) { qs_fig_free(T->fig); T->fig = NULL; }
    T->fig_hash[0] = 0;
    int y0 = 1, h = T->H - 3;
    switch (T->view) {
    case TV_TENSORS: tui_draw_tensors(T, y0, h); break;
    case TV_FORMATS: tui_draw_formats(T, y0, h); break;
    case TV_HIST: tui_draw_hist(T, y0, h); break;
    case TV_BLOCKS: tui_draw_blocks(T, y0, h); break;
    case TV_INSPECT: tui_draw_inspect(T, y0, h); break;
    case TV_RL: tui_draw_rl(T, y0, h); break;
    case TV_KERNELS: tui_draw_kernels(T, y0, h); break;
    case TV_MODEL: tui_draw_model(T, y0, h); break;
    case TV_OUTPUT: tui_draw_output(T, y0, h); break;
    case TV_HELP: tui_draw_help(T, y0, h); break;
    default: break;
    }
    draw_title(T);
    draw_status(T);
    refresh();
}

/* Missing results of the current tensor go to the worker (one job for all its missing formats). */
static void maybe_analyze(tui *T, int force)
{
    tui_tensor *t = tui_cur_tensor(T);
    if (!t || T->bench) return;
    if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
    qs_apply apps[TUI_MAX_FMTS];
    int n = 0;
    for (int i = 0; i < T->nfmts; i++)
        if (force || !T->met[i].have || T->met[i].no_blocks) apps[n++] = T->fmts[i].a;
    if (!n) return;
    if (tui_job_analyze(&T->job, t->name, apps, n, force)) {
        if (force) tui_set_msg(T, 1, "a job is running; wait for it or cancel it with Esc");
        return;
    }
    T->msg[0] = 0;
}

static void command_line(tui *T)
{
    char buf[1024] = "";
    if (!tui_prompt(T, ":", buf, sizeof buf)) return;
    char **w = NULL;
    int n = tui_split_args(buf, &w);
    if (n <= 0) { tui_free_args(w); return; }
    if (!strcmp(w[0], "q") || !strcmp(w[0], "quit")) { tui_free_args(w); T->quit = 1; return; }
    if (!strcmp(w[0], "tui")) { tui_free_args(w); tui_set_msg(T, 1, "the workbench is already open"); return; }
    if (!strcmp(w[0], "qscope")) { free(w[0]); memmove(w, w + 1, (size_t)n * sizeof *w); n--; }
    if (n <= 0) { tui_free_args(w); return; }
    char **argv = calloc((size_t)n + 4, sizeof *argv);
    if (!argv) { tui_free_args(w); return; }
    argv[0] = strdup("qscope");
    argv[1] = strdup("--db");
    argv[2] = strdup(T->db_path);
    for (int i = 0; i < n; i++) argv[3 + i] = w[i];
    free(w);
    snprintf(T->out_title, sizeof T->out_title, "qscope %s", buf);
    if (tui_job_command(&T->job, argv)) {
        tui_free_args(argv);
        tui_set_msg(T, 1, "a job is running; wait for it or cancel it with Esc");
    }
}

static void reload_all(tui *T)
{
    qs_err e = {{0}};
    char *cur = NULL;
    tui_tensor *t = tui_cur_tensor(T);
    if (t) cur = strdup(t->name);
    if (tui_load_tensors(T, &e)) tui_set_msg(T, 1, "%s", e.msg);
    if (cur) {
        for (size_t i = 0; i < T->nvis; i++)
            if (!strcmp(T->t[T->vis[i]].name, cur)) T->lt.cur = (int)i;
        free(cur);
    }
    if (T->runs_loaded) tui_load_runs(T, &e);
    tui_load_kres(T, &e);
    T->ev_loaded = 0;
    T->met_for = -1;
    T->blk_for = -1;
    tui_inspect_free(T);
}

/* A job ended: collect its outcome. */
static void job_finished(tui *T)
{
    char c[64];
    while (read(T->job.wake_fd[0], c, sizeof c) > 0) {}
    pthread_mutex_lock(&T->job.mu);
    int fin = T->job.finished, cmd = T->job.output != NULL;
    T->job.finished = 0;
    tui_rlc *rl = T->job.rl_out;
    int nrl = T->job.rl_done;
    if (rl && nrl < T->job.rl_n) T->rl_stopped = 1;
    T->job.rl_out = NULL;
    T->job.rl_done = 0;
    if (fin) tui_set_msg(T, T->job.exit_code != 0, "%s", T->job.msg);
    if (cmd) {
        free(T->out);
        T->out = T->job.output;
        T->out_len = T->job.output_len;
        T->job.output = NULL;
    }
    pthread_mutex_unlock(&T->job.mu);
    if (rl) {
        tui_rl_cache_take(T, rl, nrl);
        return;
    }
    if (!fin) return;
    if (cmd) {
        reload_all(T);
        T->lo.cur = T->lo.top = 0;
        tui_push(T, TV_OUTPUT);
    } else {
        T->met_for = -1;
        T->blk_for = -1;
        tui_count_results(T);
        if (T->view == TV_FORMATS || T->view == TV_HIST || T->view == TV_BLOCKS) tui_load_metrics(T);
    }
}

static void jump(tui *T, tui_view_id v)
{
    T->depth = 0;
    T->view = TV_TENSORS;
    if (v == TV_TENSORS) return;
    if (v == TV_BLOCKS) tui_push(T, TV_FORMATS);
    tui_push(T, v);
    if (v == TV_FORMATS || v == TV_HIST || v == TV_BLOCKS) {
        if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
        if (T->auto_analyze) maybe_analyze(T, 0);
    }
}

static int list_key(tui_list *l, int n, int page, tui_act a)
{
    if (n <= 0) return 0;
    switch (a) {
    case TA_DOWN: l->cur++; break;
    case TA_UP: l->cur--; break;
    case TA_PGDN: l->cur += page; break;
    case TA_PGUP: l->cur -= page; break;
    case TA_HOME: l->cur = 0; break;
    case TA_END: l->cur = n - 1; break;
    default: return 0;
    }
    if (l->cur >= n) l->cur = n - 1;
    if (l->cur < 0) l->cur = 0;
    return 1;
}

static void search(tui *T, int dir, int ask)
{
    if (ask) {
        char buf[128] = "";
        if (!tui_prompt(T, "/", buf, sizeof buf) || !buf[0]) return;
        snprintf(T->search, sizeof T->search, "%s", buf);
    }
    if (!T->search[0]) { tui_set_msg(T, 1, "no search yet: press /"); return; }
    tui_list *l;
    int n;
    switch (T->view) {
    case TV_TENSORS: l = &T->lt; n = (int)T->nvis; break;
    case TV_FORMATS: l = &T->lf; n = T->nfmts; break;
    case TV_RL: l = &T->lr; n = (int)T->nruns; break;
    case TV_KERNELS: l = &T->lk; n = (int)T->nkres; break;
    case TV_OUTPUT: l = &T->lo; n = 0; for (size_t i = 0; i < T->out_len; i++) n += T->out[i] == '\n'; n++; break;
    case TV_HELP: l = &T->lh; { char **L; n = tui_help_lines_w(T->W - 2, &L); for (int i = 0; i < n; i++) free(L[i]); free(L); } break;
    default: tui_set_msg(T, 1, "nothing to search in this view"); return;
    }
    char **lines = NULL;
    if (T->view == TV_HELP) tui_help_lines_w(T->W - 2, &lines);
    for (int k = 1; k <= n; k++) {
        int i = ((l->cur + dir * k) % n + n) % n;
        const char *s = NULL;
        char tmp[200];
        switch (T->view) {
        case TV_TENSORS: s = T->t[T->vis[i]].name; break;
        case TV_FORMATS: s = T->fmts[T->forder ? T->forder[i] : i].label; break;
        case TV_RL: snprintf(tmp, sizeof tmp, "%s %s", T->runs[i].name, T->runs[i].label); s = tmp; break;
        case TV_KERNELS: snprintf(tmp, sizeof tmp, "%s %s %s", T->kres[i].kind, T->kres[i].format, T->kres[i].what); s = tmp; break;
        case TV_HELP: s = lines[i]; break;
        case TV_OUTPUT: {
            const char *p = T->out;
            for (int m = 0; p && m < i; m++) { p = strchr(p, '\n'); if (p) p++; }
            if (!p) break;
            const char *e = strchr(p, '\n');
            snprintf(tmp, sizeof tmp, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
            s = tmp;
            break;
        }
        default: break;
        }
        if (s && strcasestr(s, T->search)) {
            l->cur = i;
            if (T->view == TV_OUTPUT || T->view == TV_HELP) l->top = i;
            tui_set_msg(T, 0, "/%s", T->search);
            if (lines) { for (int m = 0; m < n; m++) free(lines[m]); free(lines); }
            return;
        }
    }
    if (lines) { for (int m = 0; m < n; m++) free(lines[m]); free(lines); }
    tui_set_msg(T, 1, "not found: %s", T->search);
}

static void handle_mouse(tui *T)
{
    MEVENT ev;
    if (getmouse(&ev) != OK) return;
    if (ev.bstate & BUTTON4_PRESSED) { tui_handle_key(T, KEY_UP); tui_handle_key(T, KEY_UP); tui_handle_key(T, KEY_UP); return; }
#ifdef BUTTON5_PRESSED
    if (ev.bstate & BUTTON5_PRESSED) { tui_handle_key(T, KEY_DOWN); tui_handle_key(T, KEY_DOWN); tui_handle_key(T, KEY_DOWN); return; }
#endif
    if (ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON1_DOUBLE_CLICKED)) {
        tui_list *l = T->click_list;
        if (!l || ev.y < T->click_y0) return;
        int i = l->top + (ev.y - T->click_y0);
        if (i >= 0 && i < T->click_n) {
            l->cur = i;
            if (T->view == TV_TENSORS) T->met_for = -1;
            if (ev.bstate & BUTTON1_DOUBLE_CLICKED) tui_handle_key(T, '\n');
        }
    }
}

/* Returns 1 when the key was used. */
int tui_handle_key(tui *T, int ch)
{
    if (ch == KEY_RESIZE) { getmaxyx(stdscr, T->H, T->W); return 1; }
    if (ch == KEY_MOUSE) { handle_mouse(T); return 1; }
    if (T->W < MIN_W || T->H < MIN_H) {
        if (ch == 'Q' || ch == 'q') T->quit = 1;
        return 1;
    }
    T->msg[0] = 0;   /* a message lasts until the next key */
    if (ch == 27 && T->job.busy) { tui_job_cancel(&T->job); tui_set_msg(T, 0, "cancelling..."); return 1; }
    tui_act a = tui_key_action(T->view, ch);
    int page = T->H - 6 > 1 ? T->H - 6 : 1;
    switch (a) {
    case TA_NONE: return 0;
    case TA_QUIT: T->quit = 1; return 1;
    case TA_CLOSE:
        if (T->view == TV_INSPECT) tui_inspect_free(T);
        if (T->depth == 0) T->quit = 1;
        else tui_pop(T);
        return 1;
    case TA_HELP: tui_push(T, TV_HELP); return 1;
    case TA_REDRAW: clearok(curscr, TRUE); return 1;
    case TA_CMDLINE: command_line(T); return 1;
    case TA_SEARCH: search(T, 1, 1); return 1;
    case TA_NEXT: search(T, 1, 0); return 1;
    case TA_PREV: search(T, -1, 0); return 1;
    case TA_V_TENSORS: jump(T, TV_TENSORS); return 1;
    case TA_V_FORMATS: jump(T, TV_FORMATS); return 1;
    case TA_V_HIST: jump(T, TV_HIST); return 1;
    case TA_V_BLOCKS: jump(T, TV_BLOCKS); return 1;
    case TA_V_RL: jump(T, TV_RL); return 1;
    case TA_V_KERNELS: jump(T, TV_KERNELS); return 1;
    case TA_V_MODEL: jump(T, TV_MODEL); return 1;
    case TA_V_OUTPUT:
        if (!T->out) { tui_set_msg(T, 1, "no command has run yet: press : to run one"); return 1; }
        jump(T, TV_OUTPUT);
        return 1;
    case TA_FORMATS: tui_choose_formats(T); return 1;
    case TA_OPTIONS: tui_format_options(T); return 1;
    case TA_EXPORT: {
        char path[512];
        tui_draw(T);   /* keys typed ahead may have changed the view since the last frame */
        tui_export_png(T, path, sizeof path);
        return 1;
    }
    case TA_RECOMPUTE:
        if (T->view == TV_RL) {   /* the RL diagnostics again, from the tokens */
            tui_rl_cache_clear(T);
            T->rl_stopped = 0;
            return 1;
        }
        if (!tui_cur_tensor(T)) return 1;
        maybe_analyze(T, 1);
        return 1;
    case TA_BACK:
        if (T->view == TV_INSPECT) tui_inspect_free(T);
        tui_pop(T);
        return 1;
    default: break;
    }
    switch (T->view) {
    case TV_TENSORS:
        if (list_key(&T->lt, (int)T->nvis, page, a)) return 1;
        if (a == TA_ENTER && tui_cur_tensor(T)) { jump(T, TV_FORMATS); return 1; }
        if (a == TA_TAB) { jump(T, TV_RL); return 1; }
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
    case TV_FORMATS:
        if (list_key(&T->lf, T->nfmts, page, a)) { T->fauto = 0; return 1; }
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
    case TV_HIST:
        if (a == TA_HIST_KIND) { T->hist_kind = (T->hist_kind + 1) % 4; return 1; }
        if (a == TA_LOGY) { T->hist_liny = !T->hist_liny; return 1; }
        if (a == TA_HIST_ALL) { T->hist_one = !T->hist_one; return 1; }
        if (a == TA_TAB) { tui_pop(T); tui_push(T, TV_BLOCKS); return 1; }
        if (list_key(&T->lf, T->nfmts, page, a)) { T->fauto = 0; return 1; }   /* j/k pick the format whose grid is drawn */
        return 0;
    case TV_BLOCKS: return tui_blocks_key(T, a);
    case TV_INSPECT: return tui_inspect_key(T, a);
    case TV_RL:
        if (a == TA_TAB) { T->rl_pane = !T->rl_pane; return 1; }
        if (a == TA_METRIC) { T->rl_metric = (T->rl_metric + 1) % tui_rl_nmetrics(); return 1; }
        if (a == TA_HIST_ALL) { T->rl_one = !T->rl_one; return 1; }
        if (T->rl_pane == 0) return list_key(&T->lr, (int)T->nruns, page, a);
        {
            int nt = 0;
            for (size_t i = 0; i < T->nkres; i++) nt += !strcmp(T->kres[i].kind, "trajectory");
            return list_key(&T->lk, nt, page, a);
        }
    case TV_KERNELS: {
        int nk = 0;
        for (size_t i = 0; i < T->nkres; i++) nk += strcmp(T->kres[i].kind, "trajectory") != 0;
        return list_key(&T->lk, nk, page, a);
    }
    case TV_MODEL: return tui_model_key(T, a, page);
    case TV_OUTPUT: {
        int n = 1;
        for (size_t i = 0; i < T->out_len; i++) n += T->out[i] == '\n';
        if (list_key(&T->lo, n, page, a)) { T->lo.top = T->lo.cur; return 1; }
        return 0;
    }
    case TV_HELP: {
        char **L;
        int n = tui_help_lines_w(T->W - 2, &L);
        for (int i = 0; i < n; i++) free(L[i]);
        free(L);
        if (list_key(&T->lh, n, page, a)) { T->lh.top = T->lh.cur; return 1; }
        return 0;
    }
    default: return 0;
    }
}

static void init_colors(tui *T)
{
    if (!T->color || !has_colors()) { T->color = 0; return; }
    start_color();
    use_default_colors();
    int c256 = COLORS >= 256;
    init_pair(CP_HEAD, COLOR_BLACK, COLOR_CYAN);
    init_pair(CP_SEL, COLOR_BLACK, COLOR_YELLOW);
    init_pair(CP_STATUS, COLOR_BLACK, COLOR_WHITE);
    init_pair(CP_HINT, COLOR_CYAN, -1);
    init_pair(CP_ERR, COLOR_RED, COLOR_WHITE);
    init_pair(CP_BEST, COLOR_GREEN, -1);
    init_pair(CP_SIGN, COLOR_RED, -1);
    init_pair(CP_EXP, COLOR_GREEN, -1);
    init_pair(CP_MANT, COLOR_BLUE, -1);
    init_pair(CP_DIM, c256 ? 244 : COLOR_WHITE, -1);
    init_pair(CP_OK, COLOR_GREEN, -1);
    /* viridis at 8 steps (xterm-256 approximations), or the 8-colour cube */
    static const short v256[TUI_NHEAT] = {54, 61, 67, 30, 36, 71, 149, 220};
    static const short v8[TUI_NHEAT] = {COLOR_MAGENTA, COLOR_BLUE, COLOR_BLUE, COLOR_CYAN, COLOR_CYAN, COLOR_GREEN, COLOR_GREEN, COLOR_YELLOW};
    for (int i = 0; i < TUI_NHEAT; i++) init_pair((short)(CP_HEAT0 + i), c256 ? v256[i] : v8[i], -1);
}

void tui_screen_setup(tui *T)
{
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    init_colors(T);
}

int tui_init_app(tui *T, qs_cli *cli, const char *db_path, const char *fmt_list, qs_err *e)
{
    T->cli = cli;
    T->db_path = strdup(db_path);
    T->met_for = T->blk_for = T->blk_fmt = -1;
    T->fauto_for = -1;
    T->second_fmt = -1;
    T->auto_analyze = 1;
    if (!T->db_path || !(T->db = qs_db_open(db_path, e))) return -1;
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    qs_apply apps[TUI_MAX_FMTS];
    int n = qs_quant_parse_list("tui", fmt_list ? fmt_list : TUI_DEFAULT_FORMATS, &base, apps, TUI_MAX_FMTS);
    if (n < 0) return qs_fail(e, "bad --formats list");
    for (int i = 0; i < n; i++)
        if (tui_fmt_set(&T->fmts[T->nfmts], &apps[i]) == 0) T->nfmts++;
    tui_sort_formats(T);
    if (tui_load_tensors(T, e)) return -1;
    tui_load_kres(T, e);   /* runs: when the RL view is first shown (counting tokens reads them all) */
    return 0;
}

void tui_free_app(tui *T)
{
    tui_model_free(T);
    tui_rl_cache_clear(T);
    tui_hist_cache_clear(T);
    tui_inspect_free(T);
    tui_blocks_free(&T->blk);
    if (T->fig) qs_fig_free(T->fig);
    T->fig = NULL;
    qs_fig_free(T->vh_fig);
    T->vh_fig = NULL;
    free(T->out);
    free(T->forder);
    tui_fmts_free(T);
    qs_err e = {{0}};
    (void)e;
    for (size_t i = 0; i < T->nt; i++) { free(T->t[i].name); free(T->t[i].hash); free(T->t[i].dtype); }
    free(T->t);
    free(T->vis);
    for (size_t i = 0; i < T->nruns; i++) { free(T->runs[i].name); free(T->runs[i].label); }
    free(T->runs);
    for (size_t i = 0; i < T->nkres; i++) { free(T->kres[i].format); free(T->kres[i].hash); free(T->kres[i].created); free(T->kres[i].what); }
    free(T->kres);
    qs_db_close(T->db);
    free(T->db_path);
}

/* SIGINT / SIGTERM / SIGHUP end the main loop, so the terminal is always restored. */
static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }
int tui_interrupted(void) { return g_signal != 0; }

/* Decide glyphs: braille and box characters only on a UTF-8 locale and a terminal that is not a
** plain vt100/vt220/linux console. */
static int want_ascii(void)
{
    const char *term = getenv("TERM");
    if (term && (!strncmp(term, "vt", 2) || !strcmp(term, "dumb"))) return 1;
    return qs_term_mode_auto() == QS_TERM_ASCII;
}

int qs_cmd_tui(qs_cli *cli, int argc, char **argv)
{
    const char *flist = NULL;
    int mouse = 1, ascii = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--formats") && i + 1 < argc) flist = argv[++i];
        else if (!strncmp(argv[i], "--formats=", 10)) flist = argv[i] + 10;
        else if (!strcmp(argv[i], "--no-mouse")) mouse = 0;
        else if (!strcmp(argv[i], "--ascii")) ascii = 1;
        else return qs_cli_usage("tui", "unexpected argument '%s'", argv[i]);
    }
    if (flist) {   /* a bad list is a usage error, before anything else */
        qs_apply base, apps[TUI_MAX_FMTS];
        memset(&base, 0, sizeof base);
        base.axis = 1;
        if (qs_quant_parse_list("tui", flist, &base, apps, TUI_MAX_FMTS) < 0) return QS_EXIT_USAGE;
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return qs_cli_error(QS_EXIT_USAGE, "the workbench needs a terminal (stdin and stdout); for scripts use the other commands");
    setlocale(LC_ALL, "");
    static tui T;
    memset(&T, 0, sizeof T);
    qs_err e = {{0}};
    if (tui_init_app(&T, cli, cli->db_path, flist, &e)) {
        tui_free_app(&T);
        return qs_cli_err(QS_EXIT_ERR, &e);
    }
    if (tui_job_init(&T.job, cli->db_path)) {
        tui_free_app(&T);
        return qs_cli_error(QS_EXIT_ERR, "cannot start the worker thread");
    }
    const char *nc = getenv("NO_COLOR");
    T.color = cli->color && !(nc && *nc);
    T.ascii = ascii == 1 ? 1 : want_ascii();
    set_escdelay(25);
    if (!initscr()) { tui_job_stop(&T.job); tui_free_app(&T); return qs_cli_error(QS_EXIT_ERR, "cannot initialise the terminal"); }
    tui_screen_setup(&T);
    T.mouse = mouse;
    if (mouse) {
        mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON1_DOUBLE_CLICKED | BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
                  | BUTTON5_PRESSED
#endif
                  , NULL);
        mouseinterval(0);
    }
    if (!T.nt) tui_set_msg(&T, 0, "empty database: run `:demo` for the demo set, or `:import FILE`");
    nodelay(stdscr, TRUE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    int last_step = -1;
    while (!T.quit && !g_signal) {
        tui_draw(&T);
        struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {T.job.wake_fd[0], POLLIN, 0}};
        int busy = T.job.busy;
        int r = poll(p, 2, busy ? 100 : -1);
        if (r < 0 && errno != EINTR) break;
        if (g_signal) break;
        if (p[1].revents & POLLIN) job_finished(&T);
        /* a finished format of a running analysis shows at once */
        pthread_mutex_lock(&T.job.mu);
        int step = T.job.busy && T.job.kind == TJ_ANALYZE ? T.job.step : -1;
        pthread_mutex_unlock(&T.job.mu);
        if (step != last_step) { T.met_for = -1; last_step = step; }
        int ch;
        while ((ch = getch()) != ERR) {
            tui_handle_key(&T, ch);
            if (T.quit) break;
        }
    }
    endwin();
    tui_job_stop(&T.job);
    tui_free_app(&T);
    if (g_signal) {
        fprintf(stderr, "qscope: interrupted\n");
        return 128 + (int)g_signal;
    }
    return QS_EXIT_OK;
}
