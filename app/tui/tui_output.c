/*
** The Output view: what the last `:` command printed (the text is the application's, T->out),
** scrolled; a new command's output shows from its first line.
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"

static void output_draw(tui *T, int y0, int h)
{
    tui_list *L = tui_state(T, TV_OUTPUT);
    if (!T->out) { tui_empty_msg(T, y0 + 1, "No command has run yet.", "Press : and type a qscope command, e.g. `info` or `analyze --all -f mxfp4`."); return; }
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
    T->click_list = L;
    T->click_n = k;
    tui_draw_text(T, L, lines, k, y0 + 1, h - 1);
    free(copy);
    free(lines);
}

static int output_rows(tui *T)
{
    int n = 1;
    for (size_t i = 0; i < T->out_len; i++) n += T->out[i] == '\n';
    return n;
}

static int output_key(tui *T, tui_act a, int page)
{
    tui_list *L = tui_state(T, TV_OUTPUT);
    if (tui_list_key(L, output_rows(T), page, a)) { L->top = L->cur; return 1; }
    return 0;
}

static const char *output_row_text(tui *T, int i, char *buf, size_t cap)
{
    const char *p = T->out;
    for (int m = 0; p && m < i; m++) { p = strchr(p, '\n'); if (p) p++; }
    if (!p) return NULL;
    const char *e = strchr(p, '\n');
    snprintf(buf, cap, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
    return buf;
}

static tui_list *output_cursor(tui *T) { return tui_state(T, TV_OUTPUT); }

static int output_open(tui *T)
{
    if (T->out) return 0;
    tui_set_msg(T, 1, "no command has run yet: press : to run one");
    return -1;
}

static void output_changed(tui *T, int what)
{
    tui_list *L = tui_state(T, TV_OUTPUT);
    if (what == TUI_CH_DB) L->cur = L->top = 0;   /* a command ran: its output from the top */
}

const tui_view_ops tui_view_output = {
    .name = "Output", .flags = TVF_TEXT, .state_size = sizeof(tui_list),
    .draw = output_draw, .key = output_key, .rows = output_rows, .row_text = output_row_text, .cursor = output_cursor,
    .open = output_open, .changed = output_changed,
};
