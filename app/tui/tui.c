/*
** The workbench: entry point, main loop and screen layout (see tui.h for the files).
**
** Screen: a title line (view, tensor, format), the view, a status line (view, position, database,
** running job with a progress bar, or the last message) and a key-hint bar.  The main loop sleeps
** in poll() on the terminal and the worker's self-pipe, with a 100 ms tick while a job runs, so a
** finished job shows at once; idle, it wakes once a second to read the database's data_version
** (one cheap PRAGMA), and what another process wrote (`qscope llm eval`, `analyze`, an import)
** shows without a key press, every cursor staying on its item.  Resizes re-lay out at once
** (KEY_RESIZE); below 60 x 16 cells a message asks for a larger terminal.
*/
#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../cli/quant_opts.h"
#include "tui_view.h"
#include "../render/plot_render.h"

#define MIN_W 60
#define MIN_H 16
#define TUI_DEFAULT_FORMATS QS_DEFAULT_FORMATS

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
    unsigned fl = tui_view_of(T->view)->flags;
    int n = snprintf(buf, sizeof buf, " qscope  %s", tui_view_name(T->view));
    if (fl & TVF_TENSOR && t) n += snprintf(buf + n, sizeof buf - (size_t)n, "  %s", t->name);
    if (fl & TVF_BLOCK && T->blk_fmt >= 0 && T->blk_fmt < T->nfmts)
        snprintf(buf + n, sizeof buf - (size_t)n, "  %s", T->fmts[T->blk_fmt].label);
    tui_addstr_clip(0, 0, buf, T->W);
    char views[200];
    tui_view_strip(0, views, sizeof views);
    int vw = (int)strlen(views);
    if (T->W - vw <= (int)strlen(buf) + 2) {   /* a long title: the short names */
        tui_view_strip(1, views, sizeof views);
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
    tui_view_of(T->view)->draw(T, y0, h);
    draw_title(T);
    draw_status(T);
    refresh();
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

/* Read the database again: after a `:` command (what = TUI_CH_DB: everything, the blocks too) or
** when another process wrote to it (TUI_CH_DATA: the lists and results; the cursors stay on their
** items).  Keeps the current tensor by name. */
static void reload_all(tui *T, int what)
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
    /* RL runs only after a command: reading them again drops their diagnostics, which read every
    ** token (a run being logged would be read again each second); r recomputes them */
    if (T->runs_loaded && what == TUI_CH_DB) tui_load_runs(T, &e);
    tui_load_kres(T, &e);
    T->met_for = -1;
    if (what == TUI_CH_DB) T->blk_for = -1;
    tui_views_changed(T, what);
    T->data_version = qs_db_data_version(T->db);
}

/* Once a second while idle: has another connection committed since we last read? */
static void poll_data_version(tui *T)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
    if (t < T->next_poll) return;
    T->next_poll = t + 1.0;
    int64_t v = qs_db_data_version(T->db);
    if (v < 0 || v == T->data_version || T->job.busy) return;   /* a job's own writes: reloaded when it ends */
    reload_all(T, TUI_CH_DATA);
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
        reload_all(T, TUI_CH_DB);
        tui_push(T, TV_OUTPUT);
    } else {
        T->met_for = -1;
        T->blk_for = -1;
        tui_count_results(T);
        if (tui_view_of(T->view)->flags & TVF_METRICS) tui_load_metrics(T);
        T->data_version = qs_db_data_version(T->db);
    }
}

static void search(tui *T, int dir, int ask)
{
    if (ask) {
        char buf[128] = "";
        if (!tui_prompt(T, "/", buf, sizeof buf) || !buf[0]) return;
        snprintf(T->search, sizeof T->search, "%s", buf);
    }
    if (!T->search[0]) { tui_set_msg(T, 1, "no search yet: press /"); return; }
    const tui_view_ops *V = tui_view_of(T->view);
    if (!V->rows) { tui_set_msg(T, 1, "nothing to search in this view"); return; }
    tui_list *l = V->cursor(T);
    int n = V->rows(T);
    for (int k = 1; k <= n; k++) {
        int i = ((l->cur + dir * k) % n + n) % n;
        char tmp[200];
        const char *s = V->row_text(T, i, tmp, sizeof tmp);
        if (s && strcasestr(s, T->search)) {
            l->cur = i;
            if (V->flags & TVF_TEXT) l->top = i;
            tui_set_msg(T, 0, "/%s", T->search);
            return;
        }
    }
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
            if (tui_view_of(T->view)->flags & TVF_BROWSE) T->met_for = -1;   /* another tensor */
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
    const tui_binding *b = tui_key_binding(T->view, ch);
    tui_act a = b ? b->act : TA_NONE;
    if (a == TA_NONE) return 0;
    const tui_view_ops *V = tui_view_of(T->view);
    int page = T->H - 6 > 1 ? T->H - 6 : 1;
    if (V->key(T, a, page)) return 1;   /* the view's own meaning first, then the common one */
    switch (a) {
    case TA_QUIT: T->quit = 1; return 1;
    case TA_CLOSE:
        if (V->close) V->close(T);
        if (T->depth == 0) T->quit = 1;
        else tui_pop(T);
        return 1;
    case TA_BACK:
        if (V->close) V->close(T);
        tui_pop(T);
        return 1;
    case TA_HELP: tui_push(T, TV_HELP); return 1;
    case TA_REDRAW: clearok(curscr, TRUE); return 1;
    case TA_CMDLINE: command_line(T); return 1;
    case TA_SEARCH: search(T, 1, 1); return 1;
    case TA_NEXT: search(T, 1, 0); return 1;
    case TA_PREV: search(T, -1, 0); return 1;
    case TA_VIEW: tui_jump(T, b->to); return 1;
    case TA_FORMATS: tui_choose_formats(T); return 1;
    case TA_OPTIONS: tui_format_options(T); return 1;
    case TA_EXPORT: {
        char path[512];
        tui_draw(T);   /* keys typed ahead may have changed the view since the last frame */
        tui_export_png(T, path, sizeof path);
        return 1;
    }
    case TA_RECOMPUTE:
        if (tui_cur_tensor(T)) tui_analyze_missing(T, 1);
        return 1;
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
    T->redraw = tui_draw;
    if (tui_views_init(T)) return qs_fail(e, "out of memory");
    T->db_path = strdup(db_path);
    T->met_for = T->blk_for = T->blk_fmt = -1;
    T->fauto_for = -1;
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
    T->data_version = qs_db_data_version(T->db);
    return 0;
}

void tui_free_app(tui *T)
{
    tui_views_free(T);
    tui_rl_cache_clear(T);
    tui_hist_cache_clear(T);
    tui_blocks_free(&T->blk);
    if (T->fig) qs_fig_free(T->fig);
    T->fig = NULL;
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
    tui_catch_signals();
    int last_step = -1;
    while (!T.quit && !tui_interrupted()) {
        tui_draw(&T);
        struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {T.job.wake_fd[0], POLLIN, 0}};
        int busy = T.job.busy;
        int r = poll(p, 2, busy ? 100 : 1000);
        if (r < 0 && errno != EINTR) break;
        if (tui_interrupted()) break;
        if (p[1].revents & POLLIN) job_finished(&T);
        poll_data_version(&T);
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
    if (tui_interrupted()) {
        fprintf(stderr, "qscope: interrupted\n");
        return 128 + tui_interrupted();
    }
    return QS_EXIT_OK;
}
