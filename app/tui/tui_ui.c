/*
** The generic API the views call (tui_view.h): messages, the view stack, the prompt, cursors of
** lists, and the drawing helpers every view shares.  Nothing here knows a particular view: what
** differs between views is read from their rows in the table.
*/
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "tui_view.h"

/* SIGINT / SIGTERM / SIGHUP end the main loop and any prompt, so the terminal is always restored. */
static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }
int tui_interrupted(void) { return (int)g_signal; }

void tui_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

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

/* Missing results of the current tensor go to the worker (one job for all its missing formats). */
void tui_analyze_missing(tui *T, int force)
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

void tui_jump(tui *T, tui_view_id v)
{
    const tui_view_ops *V = tui_view_of(v);
    if (V->open && V->open(T)) return;
    T->depth = 0;
    T->view = 0;
    if (v == 0) return;
    if (V->parent) tui_push(T, V->parent);
    tui_push(T, v);
    if (V->flags & TVF_METRICS) {
        if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
        if (T->auto_analyze) tui_analyze_missing(T, 0);
    }
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
        if (ch == KEY_RESIZE) { getmaxyx(stdscr, T->H, T->W); if (T->redraw) T->redraw(T); continue; }
        if (ch >= 32 && ch < 256 && n + 1 < cap) { buf[n++] = (char)ch; buf[n] = 0; }
    }
}

int tui_list_key(tui_list *l, int n, int page, tui_act a)
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

void tui_scroll_into(tui_list *l, int n, int rows)
{
    if (l->cur >= n) l->cur = n - 1;
    if (l->cur < 0) l->cur = 0;
    if (rows < 1) rows = 1;
    if (l->cur < l->top) l->top = l->cur;
    if (l->cur >= l->top + rows) l->top = l->cur - rows + 1;
    if (l->top > n - rows) l->top = n - rows;
    if (l->top < 0) l->top = 0;
}

void tui_sel_on(tui *T) { attron(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); }
void tui_sel_off(tui *T) { attroff(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); }
void tui_head_on(tui *T) { attron(A_BOLD | A_UNDERLINE); (void)T; }
void tui_head_off(tui *T) { attroff(A_BOLD | A_UNDERLINE); (void)T; }

void tui_fill_line(tui *T, int y)
{
    move(y, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
}

/* s from (y, x) in lines of at most w columns, broken at spaces (a word longer than w is cut) */
int tui_addstr_wrapped(int y, int x, const char *s, int w)
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
void tui_empty_msg(tui *T, int y, const char *a, const char *b)
{
    attron(A_BOLD);
    y += tui_addstr_wrapped(y, 2, a, T->W - 4);
    attroff(A_BOLD);
    if (b) tui_addstr_wrapped(y, 2, b, T->W - 4);
}

void tui_draw_text(tui *T, tui_list *l, char **lines, int n, int y0, int h, int left)
{
    if (l->top > n - h) l->top = n - h;
    if (l->top < 0) l->top = 0;
    l->cur = l->top;
    for (int r = 0; r < h && l->top + r < n; r++) {
        const char *s = lines[l->top + r];
        int hit = T->search[0] && strcasestr(s, T->search);
        for (int c = 0; c < left && *s; c++)   /* scrolled sideways: skip `left` characters */
            for (s++; (*s & 0xC0) == 0x80; s++) {}
        if (hit) attron(A_BOLD);
        tui_addstr_clip(y0 + r, 1, s, T->W - 2);
        if (hit) attroff(A_BOLD);
    }
}
