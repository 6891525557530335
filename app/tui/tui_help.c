/*
** The Help view: the help text generated from the key table (tui_keys.c), wrapped to the screen
** and kept until the width changes.
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"

typedef struct help_view {
    tui_list l;
    char **lines;                 /* the text wrapped at w columns */
    int n, w;
} help_view;

static void help_done(tui *T)
{
    help_view *S = tui_state(T, TV_HELP);
    for (int i = 0; i < S->n; i++) free(S->lines[i]);
    free(S->lines);
    S->lines = NULL;
    S->n = 0;
}

static help_view *text(tui *T)
{
    help_view *S = tui_state(T, TV_HELP);
    if (S->lines && S->w == T->W - 2) return S;
    help_done(T);
    S->w = T->W - 2;
    S->n = tui_help_lines_w(S->w, &S->lines);
    if (S->n < 0) S->n = 0;
    return S;
}

static void help_draw(tui *T, int y0, int h)
{
    help_view *S = text(T);
    T->click_list = &S->l;
    T->click_n = S->n;
    tui_draw_text(T, &S->l, S->lines, S->n, y0, h, 0);
}

static int help_key(tui *T, tui_act a, int page)
{
    help_view *S = text(T);
    if (tui_list_key(&S->l, S->n, page, a)) { S->l.top = S->l.cur; return 1; }
    return 0;
}

static int help_rows(tui *T) { return text(T)->n; }
static const char *help_row_text(tui *T, int i, char *buf, size_t cap) { (void)buf; (void)cap; return text(T)->lines[i]; }
static tui_list *help_cursor(tui *T) { return &((help_view *)tui_state(T, TV_HELP))->l; }

const tui_view_ops tui_view_help = {
    .name = "Help", .flags = TVF_TEXT, .state_size = sizeof(help_view),
    .draw = help_draw, .key = help_key, .rows = help_rows, .row_text = help_row_text, .cursor = help_cursor,
    .done = help_done,
};
