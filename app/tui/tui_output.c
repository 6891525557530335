/*
** The Output view: what the last `:` command printed (the text is the application's, T->out),
** scrolled down and sideways (a table wider than the screen: Left/Right, h/l, with the columns
** shown in the title line; h at the left edge goes back); a new command's output shows from its
** first line and column.
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"

typedef struct output_view {
    tui_list l;
    int left;                     /* columns scrolled off to the left */
    int width;                    /* the widest line (characters), when last drawn */
} output_view;

#define OV(T) ((output_view *)tui_state((T), TV_OUTPUT))

static int u8cols(const char *s)
{
    int n = 0;
    for (; *s; s++) n += (*s & 0xC0) != 0x80;
    return n;
}

static void output_draw(tui *T, int y0, int h)
{
    output_view *O = OV(T);
    tui_list *L = &O->l;
    if (!T->out) { tui_empty_msg(T, y0 + 1, "No command has run yet.", "Press : and type a qscope command, e.g. `info` or `analyze --all -f mxfp4`."); return; }
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
    /* sideways: the widest line decides; the title line says which columns show */
    int view_w = T->W - 2;
    O->width = 0;
    for (int i = 0; i < k; i++)
        if (u8cols(lines[i]) > O->width) O->width = u8cols(lines[i]);
    if (O->left > O->width - view_w) O->left = O->width - view_w;
    if (O->left < 0) O->left = 0;
    char pos[80] = "";
    if (O->width > view_w)
        snprintf(pos, sizeof pos, "  [columns %d-%d of %d, h/l scroll]", O->left + 1,
                 O->left + view_w < O->width ? O->left + view_w : O->width, O->width);
    int pw = (int)strlen(pos);
    attron(A_BOLD);
    tui_addstr_clip(y0, 1, T->out_title, T->W - 2 - pw);
    attroff(A_BOLD);
    if (pw) tui_addstr_clip(y0, T->W - 1 - pw, pos, pw);
    T->click_list = L;
    T->click_n = k;
    tui_draw_text(T, L, lines, k, y0 + 1, h - 1, O->left);
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
    output_view *O = OV(T);
    tui_list *L = &O->l;
    int step = (T->W - 2) / 2 > 8 ? (T->W - 2) / 2 : 8;   /* half a screen sideways */
    if (a == TA_RIGHT) {
        if (O->left + T->W - 2 < O->width) O->left += step;
        return 1;
    }
    if (a == TA_LEFT) {
        if (O->left > 0) { O->left = O->left > step ? O->left - step : 0; return 1; }
        tui_pop(T);   /* at the left edge, h goes back as in the other views */
        return 1;
    }
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

static tui_list *output_cursor(tui *T) { return &OV(T)->l; }

static int output_open(tui *T)
{
    if (T->out) return 0;
    tui_set_msg(T, 1, "no command has run yet: press : to run one");
    return -1;
}

static void output_changed(tui *T, int what)
{
    output_view *O = OV(T);
    if (what == TUI_CH_DB) O->l.cur = O->l.top = O->left = 0;   /* a command ran: its output from the top */
}

const tui_view_ops tui_view_output = {
    .name = "Output", .flags = TVF_TEXT, .state_size = sizeof(output_view),
    .about = {"what the last `:` command printed: j/k scroll, Left/Right or h/l scroll a",
              "wide table sideways (the title line gives the columns shown; h at the left",
              "edge goes back), / searches."},
    .draw = output_draw, .key = output_key, .rows = output_rows, .row_text = output_row_text, .cursor = output_cursor,
    .open = output_open, .changed = output_changed,
};
