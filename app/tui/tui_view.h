/*
** The workbench's views as data (after tig's view_ops): one row of operations per view, in the
** table of tui_view.c indexed by tui_view_id.  The generic code (tui.c) draws, dispatches keys,
** searches, opens and closes views only through this table; a view's state is its own struct,
** allocated zeroed (state_size bytes) when the application starts and reached with tui_state().
** What several views show (the tensors, the chosen formats and their results, the RL runs) is
** the application's, in struct tui (tui.h), read by tui_data.c.
**
** Views call only the small generic API declared below (tui_ui.c, tui_plot.c, tui_cut.c) and the
** data functions of tui.h, never tui.c.
*/
#ifndef QS_TUI_VIEW_H
#define QS_TUI_VIEW_H

#include <curses.h>

#include "tui.h"

enum {
    TVF_TENSOR = 1 << 0,    /* shows the current tensor: named in the title */
    TVF_BLOCK = 1 << 1,     /* shows one format's blocks: that format is named in the title, `o` edits it */
    TVF_METRICS = 1 << 2,   /* shows the tensor's results: read when opened by its key and after an analysis;
                            ** missing ones are computed when opened or when the formats change */
    TVF_BROWSE = 1 << 3,    /* the tensor list: a click picks another tensor; new options compute nothing */
    TVF_TEXT = 1 << 4,      /* a text: a search match becomes the top line */
};

/* what changed (tui_views_changed): a `:` command ran (DB), another process wrote to the database
** (DATA: keep cursors on their items), the chosen formats, a format's options */
enum tui_change { TUI_CH_DB = 1, TUI_CH_DATA, TUI_CH_FORMATS, TUI_CH_OPTIONS };

#define TUI_ABOUT 6
typedef struct tui_view_ops {
    const char *name;               /* in the title and the status line */
    const char *about[TUI_ABOUT];   /* its paragraph in the help, in lines (optional) */
    unsigned flags;                 /* TVF_* */
    tui_view_id parent;             /* opened by its key: put over this view (0: over the first) */
    size_t state_size;              /* the view's own state, allocated zeroed */
    void (*init)(tui *T);           /* state defaults other than zero (optional) */
    void (*draw)(tui *T, int y0, int h);          /* the rows [y0, y0 + h) of the screen */
    int (*key)(tui *T, tui_act a, int page);      /* 1 when the view used the action */
    /* search: the rows, their text (buf may be used), the cursor a match moves; all or none */
    int (*rows)(tui *T);
    const char *(*row_text)(tui *T, int i, char *buf, size_t cap);
    tui_list *(*cursor)(tui *T);
    int (*open)(tui *T);            /* asked before its key shows it; nonzero: not now (message set) (optional) */
    void (*close)(tui *T);          /* left with back or close (optional) */
    void (*changed)(tui *T, int what);   /* enum tui_change: drop what was read or made from it (optional) */
    void (*done)(tui *T);           /* free what the state holds (optional) */
} tui_view_ops;

/* tui_view.c: the table */
const tui_view_ops *tui_view_of(tui_view_id v);
void *tui_state(tui *T, tui_view_id v);
int tui_views_init(tui *T);         /* every view's state; -1 out of memory */
void tui_views_free(tui *T);
void tui_views_changed(tui *T, int what);

/* The rows of the table, defined by the view files (one per line of TUI_VIEW_LIST). */
#define TUI_VIEW_EXTERN(id, name, ...) extern const tui_view_ops tui_view_##name;
TUI_VIEW_LIST(TUI_VIEW_EXTERN, TUI_VIEW_EXTERN)
#undef TUI_VIEW_EXTERN

/* tui_ui.c: the generic API for views */
void tui_push(tui *T, tui_view_id v);       /* show v over the current view */
void tui_pop(tui *T);                       /* back to the view under it */
void tui_jump(tui *T, tui_view_id v);       /* show v over the first view (and its parent), as its key does */
void tui_analyze_missing(tui *T, int force);   /* the current tensor's missing results (all, force) to the worker */
int tui_list_key(tui_list *l, int n, int page, tui_act a);   /* moves a cursor of n rows; 1 when used */
void tui_scroll_into(tui_list *l, int n, int rows);          /* keeps the cursor in `rows` shown rows */
void tui_fill_line(tui *T, int y);
void tui_sel_on(tui *T);
void tui_sel_off(tui *T);
void tui_head_on(tui *T);
void tui_head_off(tui *T);
int tui_addstr_wrapped(int y, int x, const char *s, int w);   /* lines of at most w columns; returns the count */
void tui_empty_msg(tui *T, int y, const char *a, const char *b);   /* a bold line, then what to do */
/* scrolled text, matches in bold; `left` characters of each line scrolled off to the left */
void tui_draw_text(tui *T, tui_list *l, char **lines, int n, int y0, int h, int left);

#endif
